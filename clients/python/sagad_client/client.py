"""The sagad client: submissions, and agent runs whose tool calls each take
effect at most once (docs/agents.md). Standard library only.

    client = Client("http://127.0.0.1:8080", token="agent-token")
    run = client.start_run("soc_tools", {"incident": "INC-7"},
                           metadata={"agent": "soc-bot", "model": "m-1"},
                           idempotency_key="INC-7")
    ticket = run.call("create_ticket", {"title": "...", "severity": "high",
                                        "source_ip": "203.0.113.9"})
    if ticket["result"]["source"] == "external":
        run.call("block_ip", {"ip": "203.0.113.9"})
    run.finish()

Every request that creates something carries a key (the Idempotency-Key of
a submission or of a run, the call_id of a call), so a request whose reply
was lost is sent again as it was: sagad answers the first outcome, and the
business effect happens once.
"""
import hashlib
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Callable, Dict, List, Optional

from .errors import SagadError, TransportError, Unavailable, error_for

Json = Dict[str, Any]

# A call's statuses that need nothing more from sagad until someone acts.
SETTLED_CALL = ("COMMITTED", "FAILED", "REJECTED", "AWAITING_APPROVAL", "NEEDS_REVIEW",
                "COMPENSATING", "COMPENSATED", "CANCELLED")
# A call's statuses after which no decision is left: not waiting for an
# operator any more (until_decided).
DECIDED_CALL = ("COMMITTED", "FAILED", "REJECTED", "NEEDS_REVIEW", "COMPENSATED", "CANCELLED")


def derive_call_id(run_id: str, tool: str, arguments: Json) -> str:
    """A stable call_id for `tool` with `arguments` in a run: the same call
    made again (by an agent that restarted) gets the same id, so it answers
    the first outcome instead of acting twice. Two calls of one tool with
    the same arguments in one run need call_ids of their own."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(("%s\n%s\n%s" % (run_id, tool, canonical)).encode()).hexdigest()
    prefix = "".join(c for c in tool if c.isalnum() or c in "_-")[:40]
    return "%s-%s" % (prefix or "call", digest[:20])


class Client:
    """A connection to one sagad.

    `retries` network errors and 503s are retried (with a backoff from
    `backoff_s`, doubling up to 2 s), each time with the same keys; `timeout_s` bounds
    one HTTP exchange (a long poll adds its wait)."""

    def __init__(self, url: str, token: Optional[str] = None, *, timeout_s: float = 30.0,
                 retries: int = 5, backoff_s: float = 0.2) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s

    # ---- plumbing ----

    def request(self, method: str, path: str, body: Optional[Json] = None,
                headers: Optional[Dict[str, str]] = None, wait_s: float = 0.0) -> Json:
        """One request, retried on a network error or a 503 with the same
        body and headers; the answer's JSON (with "_status" and, on a replay,
        "_replayed": True), or the SagadError sagad answered."""
        data = None if body is None else json.dumps(body).encode()
        last: Optional[SagadError] = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(self.backoff_s * (2 ** (attempt - 1)), 2.0))
            req = urllib.request.Request(self.url + path, data=data, method=method)
            req.add_header("Accept", "application/json")
            if data is not None:
                req.add_header("Content-Type", "application/json")
            if self.token:
                req.add_header("Authorization", "Bearer " + self.token)
            for k, v in (headers or {}).items():
                req.add_header(k, v)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s + wait_s) as r:
                    out = json.loads(r.read() or b"{}")
                    if isinstance(out, dict):
                        out["_status"] = r.status
                        if r.headers.get("Idempotent-Replayed") == "true":
                            out["_replayed"] = True
                    return out
            except urllib.error.HTTPError as e:
                try:
                    problem = json.loads(e.read() or b"{}")
                except ValueError:
                    problem = {}
                err = error_for(e.code, problem if isinstance(problem, dict) else {})
                if not isinstance(err, Unavailable):
                    raise err from None
                last = err
            except (urllib.error.URLError, ConnectionError, socket.timeout, OSError) as e:
                last = TransportError("%s %s: %s" % (method, path, e))
        assert last is not None
        raise last

    # ---- sagas ----

    def submit(self, saga: str, input: Json, *, idempotency_key: Optional[str] = None,
               version: Optional[int] = None, wait_s: float = 0.0) -> Json:
        """Submits an instance of `saga`; its view. Without a key one is
        made, so the retries of this call never create a second instance."""
        key = idempotency_key or str(uuid.uuid4())
        body: Json = {"input": input}
        if version:
            body["version"] = version
        q = "?wait=%.3f" % wait_s if wait_s > 0 else ""
        return self.request("POST", "/v1/sagas/%s/instances%s" % (_q(saga), q), body,
                            {"Idempotency-Key": key}, wait_s)

    def get(self, instance_id: str, *, wait_s: float = 0.0) -> Json:
        """An instance's view (a run's lists its calls); with `wait_s`, once
        it settles or the wait ends."""
        q = "?wait=%.3f" % wait_s if wait_s > 0 else ""
        return self.request("GET", "/v1/instances/%s%s" % (_q(instance_id), q), wait_s=wait_s)

    # ---- agent runs ----

    def start_run(self, toolbox: str, input: Optional[Json] = None, *,
                  metadata: Optional[Json] = None, idempotency_key: Optional[str] = None,
                  version: Optional[int] = None) -> "Run":
        """Opens a run of `toolbox` (OPEN, no calls). Give the agent's own
        key (the task, the conversation) as `idempotency_key`: an agent that
        restarts and opens again with it gets the same run back."""
        body: Json = {"input": input or {}, "metadata": metadata or {}}
        if version:
            body["version"] = version
        key = idempotency_key or str(uuid.uuid4())
        view = self.request("POST", "/v1/toolboxes/%s/runs" % _q(toolbox), body,
                            {"Idempotency-Key": key})
        return Run(self, view["id"], view)

    def run(self, run_id: str) -> "Run":
        """A run already open (an agent resuming from its id)."""
        return Run(self, run_id)


class Run:
    """One agent run: calls appended one at a time, then finish or abort."""

    def __init__(self, client: Client, run_id: str, view: Optional[Json] = None) -> None:
        self.client = client
        self.id = run_id
        self.view = view or {}

    def call(self, tool: str, arguments: Optional[Json] = None, *,
             call_id: Optional[str] = None, wait_s: float = 30.0, reason: Optional[str] = None,
             evidence: Optional[List[Any]] = None, model: Optional[str] = None,
             prompt_version: Optional[str] = None, until_decided: bool = False) -> Json:
        """Calls `tool` with `arguments`; the call as sagad records it, once
        it is COMMITTED (its "result"), FAILED, REJECTED, AWAITING_APPROVAL
        (an operator decides; call again later for the outcome) or
        NEEDS_REVIEW, or as it is when `wait_s` runs out. With
        `until_decided`, a call waiting for an operator is held (by sagad,
        no polling) until the operator decided and it went on, or `wait_s`
        ran out. The same call_id with the same arguments never acts
        twice: name it after the decision that led to it (see `decide`)."""
        arguments = arguments or {}
        cid = call_id or derive_call_id(self.id, tool, arguments)
        body: Json = {"call_id": cid, "tool": tool, "arguments": arguments}
        for k, v in (("reason", reason), ("evidence", evidence), ("model", model),
                     ("prompt_version", prompt_version)):
            if v is not None:
                body[k] = v
        deadline = time.monotonic() + wait_s
        done = DECIDED_CALL if until_decided else SETTLED_CALL
        while True:
            left = max(0.0, deadline - time.monotonic())
            step = min(left, 30.0)
            q = "?wait=%.3f" % step if step > 0 else ""
            if q and until_decided:
                q += "&until=decided"
            out = self.client.request("POST", "/v1/instances/%s/calls%s" % (_q(self.id), q),
                                      body, wait_s=step)
            if out.get("status") in done or time.monotonic() >= deadline:
                return out

    def decision(self, decision_id: str) -> Optional[Json]:
        """The decision recorded under `decision_id` ({"value", "model",
        ...}), or None."""
        for d in self.get().get("decisions") or []:
            if d.get("decision_id") == decision_id:
                return d
        return None

    def decide(self, decision_id: str, compute: Callable[[], Any], *,
               model: Optional[str] = None, prompt_version: Optional[str] = None) -> Any:
        """The value decided under `decision_id`: the one recorded before (an
        agent that restarted: its model is not asked again), or `compute()`'s,
        recorded now. The first value recorded is kept: if another copy of
        the agent recorded one first, that one is returned."""
        first = self.decision(decision_id)
        if first is not None:
            return first.get("value")
        body: Json = {"decision_id": decision_id, "value": compute()}
        if model is not None:
            body["model"] = model
        if prompt_version is not None:
            body["prompt_version"] = prompt_version
        out = self.client.request("POST", "/v1/instances/%s/decisions" % _q(self.id), body)
        return out.get("value")

    def receipt(self) -> Json:
        """The run's receipt: its decisions, calls and approvals as a hash
        chain (`sagactl verify-receipt FILE` checks one offline)."""
        return self.client.request("GET", "/v1/instances/%s/receipt" % _q(self.id))

    def get(self, *, wait_s: float = 0.0) -> Json:
        """The run's view: its status and its calls, in order."""
        self.view = self.client.get(self.id, wait_s=wait_s)
        return self.view

    def calls(self) -> List[Json]:
        """The run's calls so far (what a restarted agent rebuilds from)."""
        return list(self.get().get("calls") or [])

    def finish(self) -> Json:
        """COMPLETED once every call is settled (Conflict while one is not)."""
        self.view = self.client.request("POST", "/v1/instances/%s/finish" % _q(self.id), {})
        return self.view

    def abort(self, reason: str = "") -> Json:
        """Undoes the committed calls in reverse order (the run ends
        COMPENSATED); Conflict naming the irreversible call once one is
        under way or done."""
        self.view = self.client.request("POST", "/v1/instances/%s/abort" % _q(self.id),
                                        {"reason": reason})
        return self.view


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")
