"""sagad as an MCP server, driven by the official MCP TypeScript clients
(tests/mcp/mcp_client.mjs: @modelcontextprotocol/sdk v1, the 2025 era;
tests/mcp/mcp_client_v2.mjs: @modelcontextprotocol/client v2, the
2026-07-28 revision; both pinned in tests/package-lock.json) against real
sagad and example-services processes.

Usage: mcp_test.py --sagad PATH --services PATH"""
import argparse
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "testing"))
from live import OPERATOR, SUBMITTER, Sandbox  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sagad", required=True)
    ap.add_argument("--services", required=True)
    a = ap.parse_args()
    box = Sandbox(a.sagad, a.services, "sagad-mcp-")
    try:
        urls = ["http://127.0.0.1:%d" % box.port, "http://127.0.0.1:%d" % box.es_port]
        # The 2025 era with the SDK v1, then the 2026-07-28 revision with v2.
        for script, extra in (("mcp_client.mjs", [OPERATOR]),
                              ("mcp_client_v2.mjs", [OPERATOR, SUBMITTER])):
            r = subprocess.run(["node", os.path.join(here, script)] + urls + extra, timeout=180)
            if r.returncode != 0:
                with open(os.path.join(box.dir, "processes.log")) as f:
                    sys.stderr.write(f.read()[-4000:])
                return r.returncode
        return 0
    finally:
        box.close()


if __name__ == "__main__":
    sys.exit(main())
