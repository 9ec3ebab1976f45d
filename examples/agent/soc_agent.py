#!/usr/bin/env python3
"""An incident agent on sagad_client (docs/agents.md).

It works one incident in a run of the soc_tools toolbox, choosing each next
tool call from what the last ones returned. `decide` stands in for a model:
it blocks the source IP only when the ticket system says the source is
external, always disables the account, and tells the user last (an
irreversible e-mail: an operator approves it in sagad, never the agent).

The agent keeps no state of its own: killed and started again with the
same incident, it opens the same run (the incident is the run's
Idempotency-Key). Each choice of its model is recorded in the run as a
decision ("next-0", "next-1", ...) before it is acted on, and the call it
leads to is named after it: started again, the agent replays its decisions
(the model is not asked again, so a model that would now answer otherwise
changes nothing), sends each call again with the same call_id and
arguments, and sagad answers the first outcome: nothing happens twice. A
call that waits for an operator is held by sagad (until_decided), not
polled.

    soc_agent.py --url http://127.0.0.1:8080 --token TOKEN --incident INC-7 \
        --ip 203.0.113.9 --user bob --email bob@example.com
"""
import argparse
import sys
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
    n = 0  # the agent's n-th choice, and the call it led to, are both "next-<n>"
    while True:
        name = "next-%d" % n
        # Recorded before it is acted on: after a crash the model is not
        # asked again, and the call below goes with the same call_id and
        # arguments (its first outcome answers).
        calls = run.calls()
        choice = run.decide(name, lambda: _as_json(decide(incident, calls[:n])),
                            model="scripted-1", prompt_version="soc-v1")
        if choice is None:
            view = run.finish()
            log("finished: %s" % view["status"])
            return view
        out = run.call(choice["tool"], choice["arguments"], call_id=name, until_decided=True,
                       wait_s=300, reason="incident " + incident["id"],
                       evidence=["alert:" + incident["id"]], model="scripted-1")
        log("%s -> %s %s" % (choice["tool"], out["status"],
                             out.get("result") or out.get("last_error", "")))
        if out["status"] == "NEEDS_REVIEW":
            log("an operator must review %s; stopping" % out["call_id"])
            return run.get()
        if out["status"] not in ("AWAITING_APPROVAL", "STARTED", "PLANNED", "UNKNOWN"):
            n += 1  # decided: the next choice (else the same call is asked again)


def _as_json(call: Optional[Call]) -> Optional[Dict[str, Any]]:
    return None if call is None else {"tool": call[0], "arguments": call[1]}


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
