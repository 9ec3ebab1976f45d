#!/usr/bin/python3
"""Live conformance of sagad's HTTP API to its OpenAPI document: real sagad
and example-services processes are driven through every operation, and every
answer is checked against the document: its status is declared for that
operation (405/408/413/500/503 may fall to `default`), its Content-Type is the
declared one, and its body validates against the declared schema
(python3-jsonschema, Draft 2020-12, $refs into the document).

  /usr/bin/python3 tests/api/conformance_test.py --sagad build/sagad \
      --services build/example-services
"""
import argparse
import json
import os
import re
import sys
import time
import unittest

import jsonschema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testing"))
from live import ADMIN, OPERATOR, VIEWER, Sandbox, exchange  # noqa: E402

ARGS = None
DOC_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "coordinator",
                        "http", "openapi.json")
INCIDENT = {"title": "Phishing", "severity": "high", "host": "laptop-7", "user": "bob",
            "email": "bob@example.com"}
ORDER = {"sku": "SKU-1", "qty": 2, "amount": 4200, "currency": "EUR", "customer": "c-9",
         "address": "1 Main St"}
FALLS_TO_DEFAULT = {405, 408, 413, 500, 503}


class Conformance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DOC_PATH) as f:
            cls.doc = json.load(f)
        cls.box = Sandbox(ARGS.sagad, ARGS.services, "sagad-conformance-")
        cls.port = cls.box.port
        cls.seen = set()  # (method, template, status) checked

    @classmethod
    def tearDownClass(cls):
        cls.box.close()

    def operation(self, method, path):
        bare = path.split("?")[0]
        # Literal paths first: /v1/instances/actions/cancel is not /v1/instances/{id}/cancel.
        for template, ops in sorted(self.doc["paths"].items(), key=lambda t: t[0].count("{")):
            pattern = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
            if re.match(pattern, bare):
                # A method the path does not take: only a 405 problem may answer.
                return template, ops.get(method.lower())
        self.fail("no operation in the document for %s %s" % (method, bare))

    def call(self, method, path, body=None, token=OPERATOR, expect=None, **kw):
        """Sends the request and checks its answer against the document."""
        status, headers, raw = exchange(self.port, method, path, body, token, **kw)
        template, op = self.operation(method, path)
        where = "%s %s -> %d %s" % (method, path, status, raw[:300])
        if expect is not None:
            self.assertEqual(status, expect, where)
        if op is None:
            self.assertEqual(status, 405, where)
            op = {"responses": {"default": {"content": {"application/problem+json": {
                "schema": {"$ref": "#/components/schemas/Problem"}}}}}}
        declared = op["responses"].get(str(status))
        if declared is None:
            self.assertIn(status, FALLS_TO_DEFAULT, "undeclared status: " + where)
            declared = op["responses"]["default"]
        self.seen.add((method, template, status))
        content = declared.get("content")
        if not content:
            return status, None
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip()
        self.assertIn(ctype, content, "Content-Type not declared: " + where)
        if ctype == "text/plain":
            return status, raw.decode()
        data = json.loads(raw)
        schema = content[ctype].get("schema", {})
        try:
            # A resolver of its own each time: one that saw an error may keep its scope.
            resolver = jsonschema.RefResolver.from_schema(self.doc)
            jsonschema.Draft202012Validator(schema, resolver=resolver).validate(data)
        except jsonschema.ValidationError as e:
            self.fail("%s: %s at %s" % (where, e.message, list(e.absolute_path)))
        return status, data

    def wait_status(self, id_, status):
        deadline = time.monotonic() + 30
        while True:
            _, inst = self.call("GET", "/v1/instances/%s?wait=1" % id_, token=VIEWER, expect=200)
            if inst["status"] == status or time.monotonic() > deadline:
                self.assertEqual(inst["status"], status)
                return inst

    def submit(self, saga, inp, wait=10, expect=None):
        return self.call("POST", "/v1/sagas/%s/instances?wait=%d" % (saga, wait), {"input": inp},
                         expect=expect)[1]

    # ---- the operations ----
    def test_1_probes_and_documents(self):
        self.call("GET", "/healthz", token=None, expect=200)
        self.call("GET", "/readyz", token=None, expect=200)
        self.call("GET", "/v1/openapi.json", token=None, expect=200)
        self.call("GET", "/healthz?x=1", token=None, expect=400)
        self.call("DELETE", "/healthz", token=None, expect=405)
        self.call("GET", "/metrics", token=None, expect=401)  # with tokens, a scrape needs one
        status, text = self.call("GET", "/metrics", token=VIEWER, expect=200)
        self.assertIn("sagad_", text)
        self.call("GET", "/v1/whoami", token=VIEWER, expect=200)
        self.call("GET", "/v1/whoami", token="wrong", expect=401)
        self.call("GET", "/v1/counts", token=VIEWER, expect=200)
        self.call("GET", "/v1/sagas", token=VIEWER, expect=200)

    def test_2_submissions_reads_and_searches(self):
        done = self.submit("order_fulfilment", dict(ORDER, customer="conf-2"), expect=200)
        self.assertEqual(done["status"], "COMPLETED")
        self.call("POST", "/v1/sagas/order_fulfilment/instances", {"input": ORDER}, expect=201)
        self.call("POST", "/v1/sagas/order_fulfilment/instances", {"input": {}}, expect=400)
        self.call("POST", "/v1/sagas/nope/instances", {"input": ORDER}, expect=404)
        self.call("POST", "/v1/sagas/order_fulfilment/instances", raw=b"x=1",
                  content_type="application/x-www-form-urlencoded", expect=415)
        self.call("POST", "/v1/sagas/order_fulfilment/instances", {"input": ORDER}, token=VIEWER,
                  expect=403)
        keyed = {"Idempotency-Key": "conf-key-1"}
        _, first = self.call("POST", "/v1/sagas/order_fulfilment/instances", {"input": ORDER},
                             headers=keyed)
        _, again = self.call("POST", "/v1/sagas/order_fulfilment/instances", {"input": ORDER},
                             headers=keyed)
        self.assertEqual(first["id"], again["id"])  # the same key answers the first instance
        _, by_key = self.call("GET", "/v1/instances?idempotency_key=conf-key-1", token=VIEWER,
                              expect=200)
        self.assertEqual([i["id"] for i in by_key["instances"]], [first["id"]])
        id_ = done["id"]
        self.call("GET", "/v1/instances/" + id_, token=VIEWER, expect=200)
        self.call("GET", "/v1/instances/nope", token=VIEWER, expect=404)
        self.call("GET", "/v1/instances/%s/events" % id_, token=VIEWER, expect=200)
        self.call("GET", "/v1/instances/%s/bundle" % id_, token=VIEWER, expect=200)
        self.call("GET", "/v1/instances?limit=2", token=VIEWER, expect=200)
        _, found = self.call("GET", "/v1/instances?input.customer=conf-2", token=VIEWER, expect=200)
        self.assertEqual([i["id"] for i in found["instances"]], [id_])
        self.call("GET", "/v1/instances?status=BOGUS", token=VIEWER, expect=400)

    def test_3_operator_actions(self):
        inst = self.submit("incident_response", INCIDENT, expect=200)
        self.assertEqual(inst["status"], "AWAITING_APPROVAL")
        self.call("GET", "/v1/approvals", token=VIEWER, expect=200)
        step = "/v1/instances/%s/steps/" % inst["id"]
        self.call("POST", step + "notify_user/approve", {"comment": "ok"}, token=VIEWER, expect=403)
        self.call("POST", step + "create_ticket/approve", {}, expect=409)
        self.call("POST", step + "nope/approve", {}, expect=404)
        self.call("POST", step + "notify_user/retry", {}, expect=409)
        self.call("POST", step + "notify_user/skip", {"result": {}}, expect=409)
        self.call("POST", step + "notify_user/resolve", {"outcome": "maybe"}, expect=400)
        self.call("POST", "/v1/instances/%s/compensate" % inst["id"], {}, expect=409)
        self.call("POST", step + "notify_user/approve", {"comment": "ok"}, expect=200)
        self.wait_status(inst["id"], "COMPLETED")
        self.call("POST", "/v1/instances/%s/cancel" % inst["id"], {}, expect=409)
        other = self.submit("incident_response", INCIDENT, expect=200)
        self.call("POST", "/v1/instances/%s/steps/notify_user/reject" % other["id"],
                  {"reason": "no"}, expect=200)
        third = self.submit("incident_response", INCIDENT, expect=200)
        self.call("POST", "/v1/instances/%s/cancel" % third["id"], {"reason": "x"}, expect=200)
        for turned_back in (other, third):  # their compensations are done before the next test
            self.wait_status(turned_back["id"], "COMPENSATED")

    def test_4_review_and_resolve(self):
        es = self.box.es_port
        exchange(es, "POST", "/_faults", {"path": "/tickets", "action": "commit_500", "times": 1})
        exchange(es, "POST", "/_faults",
                 {"path": "/operations", "action": "query_unknown", "times": 50})
        inst = self.submit("incident_response", INCIDENT)
        inst = self.wait_status(inst["id"], "NEEDS_REVIEW")
        exchange(es, "DELETE", "/_faults")
        self.call("GET", "/v1/instances/%s/bundle" % inst["id"], token=VIEWER, expect=200)
        self.call("POST", "/v1/instances/%s/steps/create_ticket/resolve" % inst["id"],
                  {"outcome": "committed", "external_ref": "T-1"}, expect=200)

    def test_5_services_bulk_and_definitions(self):
        self.call("GET", "/v1/services", token=VIEWER, expect=200)
        self.call("POST", "/v1/services/payments/pause", {"reason": "t"}, expect=200)
        self.call("POST", "/v1/services/payments/resume", {}, expect=200)
        self.call("POST", "/v1/services/nope/pause", {}, expect=404)
        ids = [self.submit("incident_response", dict(INCIDENT, title="conf-5"))["id"]
               for _ in range(2)]
        # An irreversible step is never approved in bulk: one by one, as seen.
        _, held = self.call("POST", "/v1/instances/actions/approve", {"ids": ids}, expect=200)
        self.assertEqual([r["http_status"] for r in held["results"]], [409, 409])
        _, cards = self.call("GET", "/v1/approvals", token=VIEWER, expect=200)
        seen = [{"instance_id": c["instance_id"], "step": c["step"], "digest": c["digest"]}
                for c in cards["approvals"] if c["instance_id"] in ids]
        self.assertEqual(len(seen), 2)
        stale = [dict(seen[0], digest="0" * 64)]
        _, refused = self.call("POST", "/v1/approvals/actions/approve", {"approvals": stale},
                               expect=409)
        self.assertEqual(len(refused["refused"]), 1)
        self.call("POST", "/v1/approvals/actions/approve", {"approvals": "x"}, expect=400)
        _, approved = self.call("POST", "/v1/approvals/actions/approve",
                                {"approvals": seen, "comment": "seen"}, expect=200)
        self.assertEqual([r["http_status"] for r in approved["results"]], [200, 200])
        _, rejected = self.call("POST", "/v1/instances/actions/reject", {"ids": ids}, expect=200)
        self.assertEqual([r["http_status"] for r in rejected["results"]], [409, 409])
        self.call("POST", "/v1/instances/actions/cancel", {"filter": {"saga": "nope"}}, expect=200)
        self.call("POST", "/v1/instances/actions/retry", {"ids": "x"}, expect=400)
        _, d = self.call("GET", "/v1/sagas/order_fulfilment/versions/1", token=VIEWER, expect=200)
        d["name"], d["version"] = "conformance_saga", 3
        d.pop("required_input", None)
        path = "/v1/sagas/conformance_saga/versions/3"
        self.call("PUT", path, d, token=ADMIN, expect=201)
        self.call("PUT", path, d, token=ADMIN, expect=200)
        d["steps"] = d["steps"][:1]
        self.call("PUT", path, d, token=ADMIN, expect=409)
        self.call("PUT", path, d, token=OPERATOR, expect=403)
        self.call("GET", "/v1/sagas/conformance_saga/versions/x", token=VIEWER, expect=400)
        self.call("GET", "/v1/sagas/conformance_saga/versions/9", token=VIEWER, expect=404)

    def test_6_toolboxes_runs_calls_and_mcp(self):
        _, tbs = self.call("GET", "/v1/toolboxes", token=VIEWER, expect=200)
        self.assertIn("soc_tools", [t["name"] for t in tbs["toolboxes"]])
        _, tb = self.call("GET", "/v1/toolboxes/soc_tools/versions/1", token=VIEWER, expect=200)
        self.call("GET", "/v1/toolboxes/soc_tools/versions/9", token=VIEWER, expect=404)
        tb["version"] = 2
        self.call("PUT", "/v1/toolboxes/soc_tools/versions/2", tb, token=ADMIN, expect=201)
        self.call("PUT", "/v1/toolboxes/soc_tools/versions/2", tb, token=ADMIN, expect=200)
        tb["tools"] = tb["tools"][:1]
        self.call("PUT", "/v1/toolboxes/soc_tools/versions/2", tb, token=ADMIN, expect=409)
        self.call("PUT", "/v1/toolboxes/soc_tools/versions/3", tb, token=OPERATOR, expect=403)
        runs = "/v1/toolboxes/soc_tools/runs"
        self.call("POST", runs, {"input": {}}, expect=422)
        self.call("POST", "/v1/toolboxes/nope/runs", {"input": {}}, expect=404)
        _, run = self.call("POST", runs, {"input": {"incident": "conf-6"},
                                          "metadata": {"agent": "conformance"}}, expect=201)
        self.assertEqual(run["status"], "OPEN")
        calls = "/v1/instances/%s/calls" % run["id"]
        decisions = "/v1/instances/%s/decisions" % run["id"]
        self.call("POST", decisions, {"decision_id": "d1", "value": {"block": True}}, expect=201)
        _, d = self.call("POST", decisions, {"decision_id": "d1", "value": 2}, expect=200)
        self.assertEqual(d["value"], {"block": True})
        self.call("POST", decisions, {"decision_id": "d 2", "value": 1}, expect=422)
        self.call("POST", decisions, {"decision_id": "d3", "value": "x" * 20000}, expect=413)
        block = {"call_id": "b1", "tool": "block_ip", "arguments": {"ip": "203.0.113.1"}}
        _, c = self.call("POST", calls + "?wait=10", block, expect=200)
        self.assertEqual(c["status"], "COMMITTED")
        self.call("POST", calls, block, expect=200)  # the same call: its first outcome
        self.call("POST", calls, dict(block, arguments={"ip": "203.0.113.2"}), expect=409)
        self.call("POST", calls, {"call_id": "b2", "tool": "block_ip", "arguments": {}},
                  expect=422)
        self.call("POST", calls, {"call_id": "b3", "tool": "block_ip",
                                  "arguments": {"ip": "203.0.113.3"}}, token=VIEWER, expect=403)
        _, mail = self.call("POST", calls + "?wait=10", {"call_id": "m1", "tool": "notify_user",
                            "arguments": {"to": "x", "body": "y"}}, expect=200)
        self.assertEqual(mail["status"], "AWAITING_APPROVAL")
        _, held = self.call("POST", calls + "?wait=0.1&until=decided", {
            "call_id": "m1", "tool": "notify_user", "arguments": {"to": "x", "body": "y"}},
            expect=200)
        self.assertEqual(held["status"], "AWAITING_APPROVAL")
        self.call("GET", "/v1/instances/%s?wait=0.1&until=decided" % run["id"], token=VIEWER,
                  expect=200)
        self.call("GET", "/v1/instances/%s?until=soon" % run["id"], token=VIEWER, expect=400)
        _, receipt = self.call("GET", "/v1/instances/%s/receipt" % run["id"], token=VIEWER,
                               expect=200)
        self.assertEqual(receipt["entries"][0]["type"], "opened")
        self.call("GET", "/v1/instances/nope/receipt", token=VIEWER, expect=404)
        self.call("POST", "/v1/instances/%s/finish" % run["id"], {}, expect=409)
        self.call("POST", "/v1/instances/%s/abort" % run["id"], {"reason": "t"}, expect=200)
        self.wait_status(run["id"], "COMPENSATED")
        self.call("POST", "/v1/instances/nope/finish", {}, expect=404)
        _, other = self.call("POST", runs, {"input": {"incident": "conf-6b"}}, expect=201)
        self.call("POST", "/v1/instances/%s/finish" % other["id"], {}, expect=200)
        self.call("POST", "/v1/instances/%s/abort" % other["id"], {}, expect=409)
        mcp = "/mcp?toolbox=soc_tools&input.incident=conf-6"
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "conformance", "version": "1"}}}
        self.call("POST", mcp, init, expect=200)
        self.call("POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                  expect=202)
        self.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                  expect=400)
        self.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 3, "method": "ping"},
                  headers={"Mcp-Session-Id": "nope"}, expect=404)
        self.call("POST", "/mcp", init, token=VIEWER, expect=403)
        self.call("POST", "/mcp", raw=b"x=1", content_type="application/x-www-form-urlencoded",
                  expect=415)

    def test_8_the_dashboard_and_alerts_use_only_exported_metrics(self):
        status, text = self.call("GET", "/metrics", token=VIEWER, expect=200)
        exported = set()
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                name, kind = line.split()[2:4]
                exported.add(name)
                if kind == "histogram":
                    exported.update(name + s for s in ("_bucket", "_sum", "_count"))
        monitoring = os.path.join(os.path.dirname(DOC_PATH), "..", "..", "docs", "monitoring")
        used = set()
        for name in ("sagad-dashboard.json", "sagad-alerts.yml"):
            with open(os.path.join(monitoring, name)) as f:
                used.update(re.findall(r"\bsagad_[a-z_]+", f.read()))
        used.discard("sagad_")
        self.assertTrue(used)
        self.assertEqual(sorted(used - exported), [], "named by the dashboard or alerts, not exported")
        # Calls are labelled by saga, step and service.
        self.assertIn('sagad_step_calls_by_step_total{saga="order_fulfilment",step="charge_payment",'
                      'service="payments",phase="forward",outcome="committed"}', text)

    def test_9_every_operation_was_checked(self):
        checked = {(m, t) for m, t, _ in self.seen}
        missing = [(m.upper(), t) for t, ops in self.doc["paths"].items() for m in ops
                   if m != "parameters" and (m.upper(), t) not in checked]
        self.assertEqual(missing, [], "operations no answer was checked against")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sagad", required=True)
    ap.add_argument("--services", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
