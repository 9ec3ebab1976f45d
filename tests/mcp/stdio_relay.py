"""A stdio relay between sagad and an MCP server that loses one reply: it
passes every line both ways, except the response to the first tools/call of
the tool named in RELAY_DROP_TOOL, which it drops (once per RELAY_ONCE_FILE:
the file records that it did). The server acted; sagad never hears of it.
With RELAY_SEEN_FILE, each tools/call passed to the server appends its tool's
name there once the server has it (a test waits for that).

Usage: stdio_relay.py COMMAND [ARGS...]"""
import json
import os
import subprocess
import sys
import threading


def main():
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    drop_tool = os.environ.get("RELAY_DROP_TOOL", "")
    once = os.environ.get("RELAY_ONCE_FILE", "")
    doomed = set()

    def upstream():
        for line in sys.stdin.buffer:
            try:
                m = json.loads(line)
            except ValueError:
                m = {}
            if (m.get("method") == "tools/call" and m.get("params", {}).get("name") == drop_tool
                    and once and not os.path.exists(once)):
                doomed.add(m.get("id"))
                with open(once, "w") as f:
                    f.write("dropped\n")
            child.stdin.write(line)
            child.stdin.flush()
            if m.get("method") == "tools/call" and os.environ.get("RELAY_SEEN_FILE"):
                with open(os.environ["RELAY_SEEN_FILE"], "a") as f:
                    f.write(m.get("params", {}).get("name", "") + "\n")
        child.stdin.close()

    threading.Thread(target=upstream, daemon=True).start()
    for line in child.stdout:
        try:
            m = json.loads(line)
        except ValueError:
            m = {}
        if "id" in m and m.get("id") in doomed and "method" not in m:
            doomed.discard(m["id"])
            continue
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    child.wait()


if __name__ == "__main__":
    main()
