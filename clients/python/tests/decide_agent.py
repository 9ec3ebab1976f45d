#!/usr/bin/env python3
"""A tiny agent for the client's kill test: it asks a scripted "model"
which IP to block (the model answers another IP each time it is asked: its
count is kept in MODEL_COUNTER), records the answer as a decision, may kill
itself right then (CRASH_AFTER_DECIDE=1: SIGKILL between the model's answer
and the call), then blocks the IP with a call_id named after the decision
and finishes the run. It prints the IP it blocked."""
import os
import signal
import sys

from sagad_client import Client


def model() -> dict:
    path = os.environ["MODEL_COUNTER"]
    n = int(open(path).read()) + 1 if os.path.exists(path) else 1
    with open(path, "w") as f:
        f.write(str(n))
    return {"ip": "198.51.100.%d" % (100 + n)}


def main() -> int:
    client = Client(os.environ["SAGAD_URL"], os.environ["SAGAD_TOKEN"])
    incident = os.environ["INCIDENT"]
    run = client.start_run("soc_tools", {"incident": incident},
                           idempotency_key="decide-agent:" + incident)
    choice = run.decide("which-ip", model, model="scripted")
    if os.environ.get("CRASH_AFTER_DECIDE") == "1":
        os.kill(os.getpid(), signal.SIGKILL)
    out = run.call("block_ip", {"ip": choice["ip"]}, call_id="block-which-ip")
    print(out["status"], choice["ip"], flush=True)
    run.finish()
    return 0 if out["status"] == "COMMITTED" else 1


if __name__ == "__main__":
    sys.exit(main())
