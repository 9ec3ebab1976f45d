#!/usr/bin/env python3
"""An incident agent on sagad_client (docs/agents.md).

It works one incident in a run of the soc_tools toolbox, choosing each next
tool call from what the last ones returned. `decide` stands in for a model:
it blocks the source IP only when the ticket system says the source is
external, always disables the account, and tells the user last (an
irreversible e-mail: an operator approves it in sagad, never the agent).

The agent keeps no state of its own: killed and started again with the
same incident, it opens the same run (the incident is the run's
Idempotency-Key), rebuilds what it knows from the run's calls, and asks for
the next one. A call it had sent when it died is sent again with the same
call_id (derived from the run, the tool and the arguments): sagad answers
the first outcome, and nothing happens twice.

    soc_agent.py --url http://127.0.0.1:8080 --token TOKEN --incident INC-7 \
        --ip 203.0.113.9 --user bob --email bob@example.com
"""
import argparse
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from sagad_client import Client

Call = Tuple[str, Dict[str, Any]]


def decide(incident: Dict[str, str], calls: List[Dict[str, Any]]) -> Optional[Call]:
    """The next tool call, from the incident and the calls so far (in
    order, each with its tool, arguments, status and result); None when
    the incident is handled. A scripted stand-in for a model."""
    done = {c["tool"]: c for c in calls}
    if "create_ticket" not in done:
        return "create_ticket", {"title": "Suspicious sign-in for " + incident["user"],
                                 "severity": "high", "source_ip": incident["ip"]}
    ticket = done["create_ticket"].get("result") or {}
    if ticket.get("source") == "external" and "block_ip" not in done:
        return "block_ip", {"ip": incident["ip"]}
    if "disable_account" not in done:
        return "disable_account", {"user": incident["user"]}
    if "notify_user" not in done:
        return "notify_user", {"to": incident["email"],
                               "body": "We locked your account after a suspicious sign-in "
                                       "(ticket %s)." % ticket.get("ref", "?")}
    return None


def work(client: Client, incident: Dict[str, str], log=print) -> Dict[str, Any]:
    run = client.start_run("soc_tools", {"incident": incident["id"]},
                           metadata={"agent": "soc_agent.py", "model": "scripted-1",
                                     "prompt_version": "soc-v1"},
                           idempotency_key="soc-agent:" + incident["id"])
    log("run %s" % run.id)
    while True:
        calls = run.calls()
        pending = [c for c in calls if c["status"] not in ("COMMITTED", "FAILED", "REJECTED")]
        if pending:  # a call of an earlier life: ask again with its own call_id
            c = pending[0]
            nxt: Optional[Call] = (c["tool"], c["arguments"])
        else:
            nxt = decide(incident, calls)
        if nxt is None:
            view = run.finish()
            log("finished: %s" % view["status"])
            return view
        tool, args = nxt
        out = run.call(tool, args, wait_s=30, reason="incident " + incident["id"],
                       evidence=["alert:" + incident["id"]], model="scripted-1")
        log("%s -> %s %s" % (tool, out["status"], out.get("result") or out.get("last_error", "")))
        if out["status"] == "AWAITING_APPROVAL":
            time.sleep(0.5)  # an operator decides; ask again with the same call_id
        elif out["status"] == "NEEDS_REVIEW":
            log("an operator must review %s; stopping" % out["call_id"])
            return run.get()


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--token", default=None)
    ap.add_argument("--incident", required=True)
    ap.add_argument("--ip", required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--email", required=True)
    a = ap.parse_args(argv)
    client = Client(a.url, a.token, retries=20, backoff_s=0.2)
    view = work(client, {"id": a.incident, "ip": a.ip, "user": a.user, "email": a.email},
                log=lambda m: print(m, flush=True))
    return 0 if view["status"] == "COMPLETED" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
