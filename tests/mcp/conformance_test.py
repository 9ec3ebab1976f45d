"""The official MCP conformance suite (@modelcontextprotocol/conformance,
test-only, pinned in tests/package-lock.json) against a sagad without
tokens (the suite's client sends none): the scenarios that apply to a
tools-only server. Each must pass; the suite's own report is printed.

Usage: conformance_test.py --sagad PATH --services PATH"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "testing"))
from live import SERVICES, start  # noqa: E402

SCENARIOS = ("server-initialize", "ping", "tools-list", "server-sse-multiple-streams",
             "dns-rebinding-protection")
SUITE = os.path.join(here, "..", "node_modules", "@modelcontextprotocol", "conformance", "dist",
                     "index.js")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sagad", required=True)
    ap.add_argument("--services", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sagad-conformance-")
    log = open(os.path.join(work, "processes.log"), "w")
    services, es_port = start([a.services, "--listen", "127.0.0.1:0"], log)
    url = "http://127.0.0.1:%d" % es_port
    config = {"listen": "127.0.0.1:0", "data_dir": os.path.join(work, "data"), "examples": True,
              "services": {s: {"base_url": url} for s in SERVICES}}
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump(config, f)
    sagad, port = start([a.sagad, "--config", os.path.join(work, "config.json")], log)
    failed = []
    try:
        for scenario in SCENARIOS:
            r = subprocess.run(
                ["node", "--import", os.path.join(here, "node20_compat.mjs"), SUITE, "server",
                 "--url", "http://localhost:%d/mcp?toolbox=soc_tools&input.incident=CONF" % port,
                 "--scenario", scenario],
                capture_output=True, text=True, timeout=120)
            out = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)
            print(out)
            m = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", out)
            if r.returncode != 0 or not m or m.group(1) != m.group(2) or m.group(3) != "0":
                failed.append(scenario)
    finally:
        for p in (sagad, services):
            p.kill()
            p.wait()
        log.close()
        if not failed:
            shutil.rmtree(work, ignore_errors=True)
    if failed:
        print("conformance scenarios failed: " + ", ".join(failed), file=sys.stderr)
        return 1
    print("conformance: %d scenarios passed" % len(SCENARIOS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
