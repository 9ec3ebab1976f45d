# Sourced by scripts that start sagad or example-services:
# wait_port FILE prints the port of the "LISTENING <port>" line once the
# process wrote it (polls with a 10 s deadline).
wait_port() {
  for _ in $(seq 1 100); do
    p=$(awk '/^LISTENING/{print $2}' "$1" 2>/dev/null)
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.1
  done
  echo "no LISTENING line in $1" >&2; return 1
}
