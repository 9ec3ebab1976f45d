"""Real sagad and example-services processes for the Python tests (the
browser tests, the API conformance test): start them, talk HTTP to them."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

OPERATOR, VIEWER, ADMIN = "op-s3cret", "view-s3cret", "admin-s3cret"
SUBMITTER = "agent-s3cret"  # an agent of its own: never sees the others' runs
SERVICES = ("ticketing", "edr", "iam", "mail", "inventory", "payments", "shipping", "airline",
            "hotel", "cars")


def start(argv, log):
    """Starts a process that prints "LISTENING <port>"; returns (proc, port)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if line.startswith("LISTENING "):
            return p, int(line.split()[1])
        if not line and p.poll() is not None:
            break
    raise RuntimeError("did not start: %s" % argv)


def exchange(port, method, path, body=None, token=None, content_type="application/json",
             raw=None, headers=None):
    """One request; returns (status, headers, body bytes)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method)
    if data is not None or method in ("POST", "PUT"):
        req.add_header("Content-Type", content_type)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def http(port, method, path, body=None, token=None, content_type="application/json"):
    """One request; returns (status, decoded JSON body or None)."""
    status, _, data = exchange(port, method, path, body, token, content_type)
    return status, json.loads(data or b"null")


class Sandbox:
    """example-services and a sagad (examples on, tokens for an admin, an
    operator, a viewer and an agent) in a temporary directory."""

    def __init__(self, sagad, services, prefix):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        self.log = open(os.path.join(self.dir, "processes.log"), "w")
        self.services, self.es_port = start([services, "--listen", "127.0.0.1:0"], self.log)
        url = "http://127.0.0.1:%d" % self.es_port
        svc = {name: {"base_url": url, "timeout_ms": 1000} for name in SERVICES}
        # An unclear ticket outcome goes to review after one unanswered question.
        svc["ticketing"]["retry"] = {"max_reconciliations": 1, "initial_backoff_ms": 10,
                                     "max_backoff_ms": 20}
        config = {"listen": "127.0.0.1:0", "data_dir": os.path.join(self.dir, "data"),
                  "services": svc, "workers": 8, "examples": True,
                  "tokens": [{"name": "alice", "token": OPERATOR, "role": "operator"},
                             {"name": "victor", "token": VIEWER, "role": "viewer"},
                             {"name": "root", "token": ADMIN, "role": "admin"},
                             {"name": "agent-b", "token": SUBMITTER, "role": "submitter"}]}
        path = os.path.join(self.dir, "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        self.sagad, self.port = start([sagad, "--config", path], self.log)

    def close(self):
        for p in (self.sagad, self.services):
            p.kill()
            p.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
