"""MCP servers as sagad's downstreams, with real third-party servers from npm
(test-only, pinned in tests/package-lock.json): @modelcontextprotocol/
server-memory over stdio (create_entities forward, delete_entities undo,
open_nodes the reconcile read) and server-everything over stdio and
Streamable HTTP. A real sagad; its crashes are its own crash points
(_exit at the point, as a kill -9 there); a lost reply is a relay that drops
it (stdio_relay.py); a server killed mid-call is a SIGKILL of the child.

Usage: gateway_test.py --sagad PATH  (exit 77: the npm servers are missing)"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "testing"))
from live import ADMIN, exchange, http, start  # noqa: E402

NM = os.path.join(here, "..", "node_modules", "@modelcontextprotocol")
MEMORY = os.path.join(NM, "server-memory", "dist", "index.js")
EVERYTHING = os.path.join(NM, "server-everything", "dist", "index.js")
RELAY = os.path.join(here, "stdio_relay.py")


def remember_tool(name, server, reconcile):
    tool = {"name": name, "description": "Remember a fact",
            "arguments_schema": {"type": "object", "required": ["name"],
                                 "properties": {"name": {"type": "string"}}},
            "forward": {"mcp": server, "tool": "create_entities",
                        "arguments": {"entities": [{"name": "{{args.name}}", "entityType": "fact",
                                                    "observations": ["seen"]}]}},
            "compensation": {"mcp": server, "tool": "delete_entities",
                             "arguments": {"entityNames": ["{{args.name}}"]}}}
    if reconcile:
        tool["reconcile"] = {"tool": "open_nodes", "arguments": {"names": ["{{args.name}}"]},
                             "committed_if": "/entities/0"}
    return tool


def echo_tool(name, server):
    return {"name": name, "arguments_schema": {"type": "object"},
            "forward": {"mcp": server, "tool": "echo", "arguments": {"message": "{{args.message}}"}},
            "compensation": {"mcp": server, "tool": "echo", "arguments": {"message": "undo"}}}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_until(what, check, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def entities(path):
    """The names of the entities in a memory server's file, with repeats."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line)["name"] for line in f if line.strip() and
                json.loads(line).get("type") == "entity"]


def children(parent, marker):
    """Pids of processes under `parent` whose command line holds `marker`."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/stat" % pid) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open("/proc/%s/cmdline" % pid) as f:
                cmd = f.read().replace("\0", " ")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and marker in cmd:
            out.append(int(pid))
    return out


class Gateway:
    def __init__(self, sagad):
        self.sagad_bin = sagad
        self.dir = tempfile.mkdtemp(prefix="sagad-gateway-")
        self.log = open(os.path.join(self.dir, "processes.log"), "w")
        self.memory = os.path.join(self.dir, "memory.jsonl")
        self.blind = os.path.join(self.dir, "blind.jsonl")
        self.seen = os.path.join(self.dir, "slow.seen")
        port = free_port()
        self.everything = subprocess.Popen(["node", EVERYTHING, "streamableHttp"],
                                           env=dict(os.environ, PORT=str(port)),
                                           stdout=self.log, stderr=self.log)
        wait_until("server-everything over HTTP", lambda: self.listening(port))
        relay = ["python3", RELAY, "node", MEMORY]
        retry = {"max_reconciliations": 3, "initial_backoff_ms": 50, "max_backoff_ms": 200}
        servers = {
            "memory": {"command": relay, "timeout_ms": 1500, "retry": retry,
                       "env": {"MEMORY_FILE_PATH": self.memory, "RELAY_DROP_TOOL": "create_entities",
                               "RELAY_ONCE_FILE": os.path.join(self.dir, "memory.dropped")}},
            "blind": {"command": relay, "timeout_ms": 1500, "retry": retry,
                      "env": {"MEMORY_FILE_PATH": self.blind, "RELAY_DROP_TOOL": "create_entities",
                              "RELAY_ONCE_FILE": os.path.join(self.dir, "blind.dropped")}},
            "slow": {"command": ["python3", RELAY, "node", EVERYTHING, "stdio"],
                     "timeout_ms": 30000, "env": {"RELAY_SEEN_FILE": self.seen}},
            "everything": {"url": "http://127.0.0.1:%d/mcp" % port},
        }
        defs = os.path.join(self.dir, "defs")
        os.makedirs(defs)
        slow_op = {"name": "long_op", "arguments_schema": {"type": "object"},
                   "forward": {"mcp": "slow", "tool": "trigger-long-running-operation",
                               "arguments": {"duration": 20, "steps": 20}},
                   "compensation": {"mcp": "slow", "tool": "echo", "arguments": {"message": "undo"}}}
        with open(os.path.join(defs, "memory_tools.json"), "w") as f:
            json.dump({"kind": "toolbox", "name": "memory_tools", "version": 1,
                       "tools": [remember_tool("remember", "memory", True),
                                 dict(remember_tool("remember_approved", "memory", True),
                                      requires_approval=True),
                                 remember_tool("remember_blind", "blind", False),
                                 echo_tool("echo", "everything"), echo_tool("slow_echo", "slow"),
                                 slow_op]}, f)
        self.config = os.path.join(self.dir, "config.json")
        with open(self.config, "w") as f:
            json.dump({"listen": "127.0.0.1:0", "data_dir": os.path.join(self.dir, "data"),
                       "definitions_dir": defs, "mcp_servers": servers,
                       "tokens": [{"name": "root", "token": ADMIN, "role": "admin"}]}, f)
        self.proc = None
        self.start()

    @staticmethod
    def listening(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def start(self, crash_at=None):
        env = dict(os.environ)
        env.pop("SAGA_CRASH_AT", None)
        if crash_at:
            env["SAGA_CRASH_AT"] = crash_at
        p = subprocess.Popen([self.sagad_bin, "--config", self.config], stdout=subprocess.PIPE,
                             stderr=self.log, text=True, env=env)
        line = p.stdout.readline()
        assert line.startswith("LISTENING "), "sagad did not start: %r" % line
        self.proc, self.port = p, int(line.split()[1])

    def api(self, method, path, body=None):
        return http(self.port, method, path, body, ADMIN)

    def open_run(self):
        status, run = self.api("POST", "/v1/toolboxes/memory_tools/runs", {"input": {}})
        assert status == 201, (status, run)
        return run["id"]

    def call(self, run, call_id, tool, args, wait=20):
        return self.api("POST", "/v1/instances/%s/calls?wait=%d" % (run, wait),
                        {"call_id": call_id, "tool": tool, "arguments": args})

    def call_status(self, run, call_id):
        status, view = self.api("GET", "/v1/instances/" + run)
        assert status == 200, (status, view)
        return next((c for c in view["calls"] if c["call_id"] == call_id), None)

    def settled(self, run, call_id, statuses):
        def check():
            c = self.call_status(run, call_id)
            return c if c and c["status"] in statuses else None
        return wait_until("call %s in %s" % (call_id, statuses), check)

    def close(self):
        for p in (self.proc, self.everything):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        self.log.close()


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def scenarios(g):
    run = g.open_run()
    # A lost reply: the server created alice, sagad never heard; the read finds her.
    status, c = g.call(run, "c1", "remember", {"name": "alice"})
    check(status == 200 and c["status"] == "COMMITTED", "a lost reply is reconciled: %s" % c["status"])
    check(c["result"]["entities"][0]["name"] == "alice", "the read's result is the call's")
    check(entities(g.memory) == ["alice"], "alice created once: %s" % entities(g.memory))
    status, again = g.call(run, "c1", "remember", {"name": "alice"})
    check(status == 200 and again["status"] == "COMMITTED" and entities(g.memory) == ["alice"],
          "the same call_id again takes no second effect")
    status, e = g.call(run, "c2", "echo", {"message": "hi"})
    check(status == 200 and e["status"] == "COMMITTED" and "hi" in json.dumps(e["result"]),
          "a tool over Streamable HTTP commits: %s" % e.get("result"))
    # An operator approves a tool call as any other, seeing which tool on which server.
    status, c = g.call(run, "c3", "remember_approved", {"name": "erin"}, wait=5)
    check(c["status"] == "AWAITING_APPROVAL", "a call waits for its approval")
    _, cards = g.api("GET", "/v1/approvals")
    card = next(a for a in cards["approvals"] if a["instance_id"] == run)
    check(card["request"]["url"] == "mcp://memory/create_entities" and
          card["request"]["body"]["entities"][0]["name"] == "erin",
          "the approval shows the tool, its server and arguments: %s" % card["request"])
    status, _ = g.api("POST", "/v1/instances/%s/steps/c3/approve" % run, {"comment": "ok"})
    check(status == 200 and g.settled(run, "c3", ("COMMITTED",)) and "erin" in entities(g.memory),
          "approved, the call commits")
    status, _ = g.api("POST", "/v1/instances/%s/abort" % run, {"reason": "done"})
    check(status == 200, "abort accepted")
    wait_until("the run compensated", lambda: g.api("GET", "/v1/instances/" + run)[1]["status"] ==
               "COMPENSATED")
    check(entities(g.memory) == [], "abort removed alice and erin: %s" % entities(g.memory))

    # No reconcile and a lost reply: nobody can tell; review, with what to check.
    run = g.open_run()
    status, c = g.call(run, "b1", "remember_blind", {"name": "bob"})
    c = g.settled(run, "b1", ("NEEDS_REVIEW",))
    _, bundle = g.api("GET", "/v1/instances/%s/bundle" % run)
    check("MCP server 'blind'" in json.dumps(bundle), "the review says which server to check")
    check(entities(g.blind) == ["bob"], "bob created once, never re-sent")

    # kill -9 between the answer and its record: the read finds the effect.
    g.proc.kill()
    g.proc.wait()
    for point, name in (("before_outcome", "carol"), ("after_started", "dave")):
        g.start(crash_at=point)
        run = g.open_run()
        try:
            g.call(run, "k1", "remember", {"name": name}, wait=10)
        except OSError:
            pass  # sagad went at the crash point
        check(g.proc.wait(timeout=30) == 75, "sagad crashed at " + point)
        g.start()
        c = g.settled(run, "k1", ("COMMITTED",))
        check(c["status"] == "COMMITTED" and entities(g.memory).count(name) == 1,
              "after a crash at %s %s exists once: %s" % (point, name, entities(g.memory)))

    # The server killed mid-call: in doubt, no reconcile: review; the server restarts.
    run = g.open_run()
    status, _, _ = exchange(g.port, "POST", "/v1/instances/%s/calls" % run,
                            {"call_id": "s1", "tool": "long_op", "arguments": {}},
                            token=ADMIN)
    check(status == 202, "the slow call accepted")
    def seen():
        return os.path.exists(g.seen) and "trigger-long-running-operation" in open(g.seen).read()
    wait_until("the server has the slow call", seen)
    relays = children(g.proc.pid, "stdio_relay.py")
    pids = [p for r in relays for p in children(r, "index.js stdio")]
    check(len(pids) == 1, "one slow server runs")
    os.kill(pids[0], signal.SIGKILL)
    c = g.settled(run, "s1", ("NEEDS_REVIEW",))
    check("may or may not have acted" in json.dumps(g.api("GET", "/v1/instances/%s/bundle" % run)[1]),
          "a server killed mid-call leaves the call for review")
    run = g.open_run()
    status, c = g.call(run, "s2", "slow_echo", {"message": "back"})
    check(c["status"] == "COMMITTED", "the server was restarted: %s" % c["status"])


def refusals(sagad, g):
    """A tool the server lacks, or arguments its inputSchema refuses, stop
    sagad at start, naming them; an unreachable server is a warning."""
    for forward, expect in (
            ({"mcp": "memory", "tool": "crate_entities", "arguments": {}},
             "MCP server 'memory' has no tool 'crate_entities'"),
            ({"mcp": "memory", "tool": "create_entities", "arguments": {"names": []}},
             "requires argument 'entities'")):
        d = os.path.join(g.dir, "bad")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        tool = remember_tool("remember", "memory", False)
        tool["forward"] = forward
        with open(os.path.join(d, "tb.json"), "w") as f:
            json.dump({"kind": "toolbox", "name": "bad_tools", "version": 1, "tools": [tool]}, f)
        with open(g.config) as f:
            config = json.load(f)
        config["definitions_dir"] = d
        config["data_dir"] = os.path.join(g.dir, "bad-data")
        path = os.path.join(g.dir, "bad.json")
        with open(path, "w") as f:
            json.dump(config, f)
        r = subprocess.run([sagad, "--config", path], capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and expect in r.stderr, "refused at start: " + expect)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sagad", required=True)
    a = ap.parse_args()
    if not (os.path.exists(MEMORY) and os.path.exists(EVERYTHING)) or not shutil.which("node"):
        print("skipped: the npm test servers are not installed (scripts/test_deps.sh)")
        return 77
    g = Gateway(a.sagad)
    try:
        scenarios(g)
        refusals(a.sagad, g)
        return 0
    except Exception:
        g.log.flush()
        with open(os.path.join(g.dir, "processes.log")) as f:
            sys.stderr.write(f.read()[-6000:])
        raise
    finally:
        g.close()
        shutil.rmtree(g.dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
