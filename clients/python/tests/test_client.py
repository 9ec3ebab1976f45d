"""The client against a real sagad and example-services, started here.

Run by clients/python/tests/run.sh (ctest label "python"), which installs
the client into a fresh venv and passes the binaries in SAGAD_BIN and
SERVICES_BIN."""
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import unittest

# The repository's helper that starts a process printing "LISTENING <port>".
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "tests", "testing"))
from live import start  # noqa: E402

import sagad_client  # noqa: E402
from sagad_client import Client, Conflict, Forbidden, NotFound, TransportError, Unprocessable

SERVICES = ("ticketing", "edr", "iam", "mail", "inventory", "payments", "shipping", "airline",
            "hotel", "cars")
AGENT, OPERATOR = "agent-s3cret", "op-s3cret"


class Sandbox:
    """example-services and sagad (--examples, an agent's and an operator's
    token) in a temporary directory; sagad can be killed and restarted on
    the same port and data."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sagad-client-")
        self.log = open(os.path.join(self.dir, "processes.log"), "w")
        self.services, es_port = start([os.environ["SERVICES_BIN"], "--listen", "127.0.0.1:0"],
                                       self.log)
        url = "http://127.0.0.1:%d" % es_port
        self.es_url = url
        self.config = {
            "listen": "127.0.0.1:0", "data_dir": os.path.join(self.dir, "data"),
            "services": {s: {"base_url": url, "timeout_ms": 2000} for s in SERVICES},
            "workers": 4, "examples": True, "coordinator_id": "client-test",
            "tokens": [{"name": "soc-agent", "token": AGENT, "role": "submitter"},
                       {"name": "alice", "token": OPERATOR, "role": "operator"}]}
        self.port = 0
        self.start()

    def start(self):
        if self.port:
            self.config["listen"] = "127.0.0.1:%d" % self.port
        path = os.path.join(self.dir, "config.json")
        with open(path, "w") as f:
            json.dump(self.config, f)
        self.sagad, self.port = start([os.environ["SAGAD_BIN"], "--config", path], self.log)
        self.url = "http://127.0.0.1:%d" % self.port

    def kill(self):
        self.sagad.send_signal(signal.SIGKILL)
        self.sagad.wait()
        self.sagad.stdout.close()

    def effects(self):
        with __import__("urllib.request").request.urlopen(self.es_url + "/_effects") as r:
            return json.loads(r.read())

    def close(self):
        for p in (self.sagad, self.services):
            p.kill()
            p.wait()
            p.stdout.close()
        self.log.close()


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.box = Sandbox()

    @classmethod
    def tearDownClass(cls):
        cls.box.close()

    def agent(self):
        return Client(self.box.url, AGENT, retries=8, backoff_s=0.1)

    def operator(self):
        return Client(self.box.url, OPERATOR)

    def test_an_incident_run_end_to_end(self):
        run = self.agent().start_run("soc_tools", {"incident": "INC-1"},
                                     metadata={"agent": "soc-bot", "model": "m-1"},
                                     idempotency_key="py-INC-1")
        self.assertEqual(run.view["status"], "OPEN")
        again = self.agent().start_run("soc_tools", {"incident": "INC-1"},
                                       metadata={"agent": "soc-bot", "model": "m-1"},
                                       idempotency_key="py-INC-1")
        self.assertEqual(again.id, run.id)
        ticket = run.call("create_ticket", {"title": "Phishing", "severity": "high",
                                            "source_ip": "203.0.113.9"},
                          reason="alert 42", evidence=["alert-42"], model="m-1")
        self.assertEqual(ticket["status"], "COMMITTED", ticket)
        self.assertEqual(ticket["result"]["source"], "external")
        block = run.call("block_ip", {"ip": "203.0.113.9"})
        self.assertEqual(block["status"], "COMMITTED", block)
        same = run.call("block_ip", {"ip": "203.0.113.9"})  # the derived call_id again
        self.assertEqual(same["call_id"], block["call_id"])
        self.assertTrue(same.get("_replayed"))
        self.assertEqual(same["result"], block["result"])
        mail = run.call("notify_user", {"to": "bob@example.com", "body": "we blocked it"})
        self.assertEqual(mail["status"], "AWAITING_APPROVAL", mail)
        path = "/v1/instances/%s/steps/%s/approve" % (run.id, mail["call_id"])
        with self.assertRaises(Forbidden):
            self.agent().request("POST", path, {})
        self.operator().request("POST", path, {"comment": "ok"})
        sent = run.call("notify_user", {"to": "bob@example.com", "body": "we blocked it"})
        self.assertEqual(sent["status"], "COMMITTED", sent)
        self.assertEqual(sent["approval"]["by"], "alice")
        done = run.finish()
        self.assertEqual(done["status"], "COMPLETED")
        self.assertEqual([c["tool"] for c in run.calls()],
                         ["create_ticket", "block_ip", "notify_user"])

    def test_refusals_are_typed_and_carry_the_problem(self):
        run = self.agent().start_run("soc_tools", {"incident": "INC-2"})
        with self.assertRaises(Unprocessable) as bad:
            run.call("block_ip", {"address": "1.2.3.4"})
        self.assertTrue(any(e["path"] == "/ip" for e in bad.exception.errors), bad.exception.problem)
        run.call("block_ip", {"ip": "198.51.100.7"}, call_id="blk")
        with self.assertRaises(Conflict):
            run.call("block_ip", {"ip": "198.51.100.8"}, call_id="blk")
        with self.assertRaises(NotFound):
            self.agent().start_run("no_such_toolbox", {})
        with self.assertRaises(Unprocessable):
            self.agent().start_run("soc_tools", {"incident": 7})
        run.call("notify_user", {"to": "x", "body": "y"}, call_id="mail")
        self.operator().request("POST", "/v1/instances/%s/steps/mail/approve" % run.id, {})
        self.assertEqual(run.call("notify_user", {"to": "x", "body": "y"}, call_id="mail")["status"],
                         "COMMITTED")
        with self.assertRaises(Conflict) as late:
            run.abort("too late")
        self.assertIn("'mail'", late.exception.detail)

    def test_abort_undoes_in_reverse(self):
        run = self.agent().start_run("soc_tools", {"incident": "INC-3"})
        run.call("block_ip", {"ip": "198.51.100.20"})
        run.call("disable_account", {"user": "dave"})
        run.abort("false alarm")
        view = run.get(wait_s=10)
        self.assertEqual(view["status"], "COMPENSATED", view)
        self.assertEqual([c["status"] for c in view["calls"]], ["COMPENSATED", "COMPENSATED"])

    def test_a_call_sent_while_sagad_is_down_is_retried_with_the_same_call_id(self):
        client = self.agent()
        run = client.start_run("soc_tools", {"incident": "INC-4"})
        before = self.box.effects()["by_route"].get("disable_account", 0)
        self.box.kill()
        restarter = threading.Timer(0.5, self.box.start)
        restarter.start()
        try:
            out = run.call("disable_account", {"user": "erin"})
        finally:
            restarter.join()
        self.assertEqual(out["status"], "COMMITTED", out)
        self.assertEqual(self.box.effects()["by_route"]["disable_account"], before + 1)
        self.assertEqual(run.call("disable_account", {"user": "erin"})["status"], "COMMITTED")
        self.assertEqual(self.box.effects()["by_route"]["disable_account"], before + 1)

    def test_decide_keeps_the_first_value_and_until_decided_waits_for_the_operator(self):
        run = self.agent().start_run("soc_tools", {"incident": "INC-5"})
        asked = []

        def model(answer):
            return lambda: asked.append(answer) or answer

        self.assertEqual(run.decide("triage", model({"block": "198.51.100.5"}), model="m-1"),
                         {"block": "198.51.100.5"})
        self.assertEqual(run.decide("triage", model({"block": "other"})), {"block": "198.51.100.5"})
        self.assertEqual(asked, [{"block": "198.51.100.5"}])  # the model was asked once
        self.assertEqual(run.decision("triage")["model"], "m-1")
        result = {}

        def send():
            result["mail"] = run.call("notify_user", {"to": "x", "body": "y"}, call_id="mail",
                                      until_decided=True, wait_s=60)

        waiting = threading.Thread(target=send)
        waiting.start()
        deadline = time.monotonic() + 10
        while not any(c["status"] == "AWAITING_APPROVAL" for c in run.calls()):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        self.assertTrue(waiting.is_alive())  # held past AWAITING_APPROVAL
        self.operator().request("POST", "/v1/instances/%s/steps/mail/approve" % run.id, {})
        waiting.join(30)
        self.assertEqual(result["mail"]["status"], "COMMITTED", result)
        kinds = [e["type"] for e in run.receipt()["entries"]]
        self.assertEqual(kinds[:3], ["opened", "decision", "call"])
        self.assertIn("approved", kinds)

    def test_an_agent_killed_after_its_models_answer_does_not_ask_it_again(self):
        """The agent is SIGKILLed between its model's answer (recorded as a
        decision) and its call; started again, it replays the decision: the
        model, which would answer otherwise, is not asked again, and one
        effect happens."""
        agent = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decide_agent.py")
        counter = os.path.join(self.box.dir, "model-calls")
        before = self.box.effects()["by_route"].get("block_ip", 0)
        env = dict(os.environ, SAGAD_URL=self.box.url, SAGAD_TOKEN=AGENT, MODEL_COUNTER=counter,
                   INCIDENT="INC-6")
        import subprocess
        first = subprocess.run([sys.executable, agent], env=dict(env, CRASH_AFTER_DECIDE="1"),
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(first.returncode, -signal.SIGKILL, first.stderr)
        self.assertEqual(self.box.effects()["by_route"].get("block_ip", 0), before)
        second = subprocess.run([sys.executable, agent], env=env, capture_output=True, text=True,
                                timeout=60)
        self.assertEqual(second.returncode, 0, second.stderr)
        with open(counter) as f:
            self.assertEqual(f.read(), "1")  # the model was asked once
        self.assertEqual(self.box.effects()["by_route"]["block_ip"], before + 1)
        self.assertIn("198.51.100.101", second.stdout)

    def test_an_unreachable_sagad_is_a_transport_error(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaises(TransportError):
            Client("http://127.0.0.1:%d" % port, AGENT, retries=1, backoff_s=0.01).get("x")

    def test_derived_call_ids_are_stable_and_valid(self):
        a = sagad_client.derive_call_id("r1", "block_ip", {"ip": "1", "n": [1, 2]})
        self.assertEqual(a, sagad_client.derive_call_id("r1", "block_ip", {"n": [1, 2], "ip": "1"}))
        self.assertNotEqual(a, sagad_client.derive_call_id("r2", "block_ip", {"ip": "1", "n": [1, 2]}))
        self.assertRegex(a, r"^[A-Za-z0-9_-]{1,64}$")


if __name__ == "__main__":
    unittest.main()
