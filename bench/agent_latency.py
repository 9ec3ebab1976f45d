#!/usr/bin/python3
"""An agent's call through sagad against the same POST sent straight.

  bench/agent_latency.py BUILD_DIR [--calls N] [--per-run K] [--think-ms T]

Starts example-services and a sagad (LMDB, fsync on, the built-in examples,
every service idempotent and queryable) from BUILD_DIR, opens a soc_tools
run every K calls, and makes N calls of `create_ticket` with `?wait`, each
preceded by the same POST sent straight to the ticketing service (the
baseline, measured in the same run, alternated call by call). T ms of
think time before each pair (an agent's, not counted). Prints p50 and p90
of both and the difference; the first tenth is left out (warm-up).
Standard library only.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid

SERVICES = ["ticketing", "edr", "iam", "mail", "inventory", "payments", "shipping", "airline",
            "hotel", "cars"]


def post(conn, path, body, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    conn.request("POST", path, json.dumps(body), h)
    r = conn.getresponse()
    return r.status, r.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--per-run", type=int, default=20)
    ap.add_argument("--think-ms", type=float, default=0)
    ap.add_argument("--port", type=int, default=18601)
    a = ap.parse_args()
    d = tempfile.mkdtemp()
    svc_port, api_port = a.port, a.port + 1
    base = f"http://127.0.0.1:{svc_port}"
    cfg = {"services": {n: {"base_url": base, "idempotent": True, "queryable": True}
                        for n in SERVICES}}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    svc = subprocess.Popen([f"{a.build}/example-services", "--listen", f"127.0.0.1:{svc_port}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sagad = subprocess.Popen([f"{a.build}/sagad", "--config", f"{d}/config.json", "--data-dir",
                              f"{d}/data", "--listen", f"127.0.0.1:{api_port}", "--examples"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        for line in sagad.stdout:
            if line.startswith("LISTENING"):
                break
        bare = http.client.HTTPConnection("127.0.0.1", svc_port)
        api = http.client.HTTPConnection("127.0.0.1", api_port)
        for _ in range(100):  # example-services may still be binding
            try:
                post(bare, "/tickets", {"title": "warm", "severity": "low", "source_ip": "x"},
                     {"Idempotency-Key": str(uuid.uuid4())})
                break
            except OSError:
                bare = http.client.HTTPConnection("127.0.0.1", svc_port)
                time.sleep(0.05)
        b, c = [], []
        run = None
        for i in range(a.calls):
            if i % a.per_run == 0:
                st, data = post(api, "/v1/toolboxes/soc_tools/runs", {"input": {"incident": "b"}})
                assert st == 201, (st, data)
                run = json.loads(data)["id"]
            args = {"title": f"t{i}", "severity": "low", "source_ip": f"10.0.{i // 250}.{i % 250}"}
            if a.think_ms:
                time.sleep(a.think_ms / 1000)
            t0 = time.perf_counter()
            st, _ = post(bare, "/tickets", args, {"Idempotency-Key": str(uuid.uuid4())})
            b.append(time.perf_counter() - t0)
            assert st < 300, st
            t0 = time.perf_counter()
            st, data = post(api, f"/v1/instances/{run}/calls?wait=5",
                            {"call_id": f"c{i}", "tool": "create_ticket", "arguments": args})
            c.append(time.perf_counter() - t0)
            assert st == 200 and json.loads(data).get("status") == "COMMITTED", (st, data[:200])
        b, c = sorted(b[a.calls // 10:]), sorted(c[a.calls // 10:])
        p = lambda xs, q: xs[int(len(xs) * q)] * 1e3
        print(f"calls {a.calls} per-run {a.per_run} think {a.think_ms:g} ms: "
              f"bare p50 {p(b, .5):.3f} p90 {p(b, .9):.3f} ms; "
              f"agent call p50 {p(c, .5):.3f} p90 {p(c, .9):.3f} ms; "
              f"p50 over bare {p(c, .5) - p(b, .5):.3f} ms")
    finally:
        sagad.terminate()
        svc.terminate()
        sagad.wait()
        svc.wait()


if __name__ == "__main__":
    main()
