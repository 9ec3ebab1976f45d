"""sagad as an MCP server, driven by the official MCP TypeScript SDK client
(tests/mcp/mcp_client.mjs, @modelcontextprotocol/sdk pinned in
tests/package-lock.json) against real sagad and example-services processes.

Usage: mcp_test.py --sagad PATH --services PATH"""
import argparse
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "testing"))
from live import OPERATOR, Sandbox  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sagad", required=True)
    ap.add_argument("--services", required=True)
    a = ap.parse_args()
    box = Sandbox(a.sagad, a.services, "sagad-mcp-")
    try:
        r = subprocess.run(["node", os.path.join(here, "mcp_client.mjs"),
                            "http://127.0.0.1:%d" % box.port,
                            "http://127.0.0.1:%d" % box.es_port, OPERATOR],
                           timeout=180)
        if r.returncode != 0:
            with open(os.path.join(box.dir, "processes.log")) as f:
                sys.stderr.write(f.read()[-4000:])
        return r.returncode
    finally:
        box.close()


if __name__ == "__main__":
    sys.exit(main())
