#!/usr/bin/env bash
# The incident agent (soc_agent.py) against example-services, killed with
# kill -9 in the middle of a call, and sagad with it; both start again, the
# agent finishes the same run, and every effect happened exactly once.
#   examples/agent/kill_demo.sh            (builds what is missing)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD_DIR:-build}
for t in sagad example-services; do
  [ -x "$B/$t" ] || TARGETS="sagad sagactl example-services" scripts/build.sh
done
source scripts/wait_port.sh
work=$(mktemp -d /tmp/sagad-agent-XXXXXX)
cleanup() { kill -9 "${AGENT_PID:-}" "${SAGAD_PID:-}" "${ES_PID:-}" 2>/dev/null || true; }
trap cleanup EXIT
say() { echo "== $*"; }
poll() {  # poll SECONDS COMMAND...: until COMMAND succeeds
  local until=$((SECONDS + $1)); shift
  until "$@"; do
    [ $SECONDS -lt $until ] || { echo "timed out: $*" >&2; tail -20 "$work"/*.log >&2; exit 1; }
    sleep 0.1
  done
}

say "the client, from the source tree, into a fresh venv"
/usr/bin/python3 -m venv "$work/venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$work/venv/bin/pip" install --quiet clients/python

"$B/example-services" --listen 127.0.0.1:0 >"$work/services.out" 2>"$work/services.log" &
ES_PID=$!
ES=http://127.0.0.1:$(wait_port "$work/services.out")
services=$(for s in ticketing edr iam mail inventory payments shipping airline hotel cars; do
  printf '"%s": {"base_url": "%s", "timeout_ms": 5000},' "$s" "$ES"; done)
write_config() {
  cat >"$work/config.json" <<JSON
{"listen": "127.0.0.1:$1", "data_dir": "$work/data", "examples": true, "coordinator_id": "demo",
 "services": {${services%,}},
 "tokens": [{"name": "soc-agent", "token": "agent-token", "role": "submitter"},
            {"name": "alice", "token": "operator-token", "role": "operator"}]}
JSON
}
start_sagad() {
  write_config "$1"
  "$B/sagad" --config "$work/config.json" >"$work/sagad.out" 2>>"$work/sagad.log" &
  SAGAD_PID=$!
  PORT=$(wait_port "$work/sagad.out")
}
start_agent() {
  "$work/venv/bin/python" examples/agent/soc_agent.py --url "http://127.0.0.1:$PORT" \
    --token agent-token --incident INC-2041 --ip 203.0.113.77 --user bob \
    --email bob@example.com >>"$work/agent.log" 2>&1 &
  AGENT_PID=$!
}
start_sagad 0
API=http://127.0.0.1:$PORT
say "sagad at $API, example services at $ES, everything in $work"

# The firewall answers slowly: the agent and sagad die while block_ip is
# in the service's hands.
curl -sf -X POST "$ES/_faults" -H 'Content-Type: application/json' \
  -d '{"path": "/ips/block", "action": "delay", "delay_ms": 1500}' >/dev/null
start_agent
in_flight() { [ "$(curl -sf "$ES/_effects" | jq '.pending')" -gt 0 ]; }
poll 30 in_flight
say "block_ip is in flight: kill -9 the agent and sagad"
kill -9 "$AGENT_PID" "$SAGAD_PID"
wait "$AGENT_PID" "$SAGAD_PID" 2>/dev/null || true

say "both start again; the agent resumes its run"
start_sagad "$PORT"
start_agent
awaiting() { curl -sf "$API/v1/approvals" -H 'Authorization: Bearer operator-token' \
  | jq -e '.approvals | map(select(.call.tool == "notify_user")) | length == 1' >/dev/null; }
poll 60 awaiting
run=$(curl -sf "$API/v1/approvals" -H 'Authorization: Bearer operator-token' | jq -r '.approvals[0].instance_id')
call=$(curl -sf "$API/v1/approvals" -H 'Authorization: Bearer operator-token' | jq -r '.approvals[0].step')
say "an operator approves the e-mail ($call of run $run)"
curl -sf -X POST "$API/v1/instances/$run/steps/$call/approve" -H 'Authorization: Bearer operator-token' \
  -H 'Content-Type: application/json' -d '{"comment": "checked with the SOC lead"}' >/dev/null
wait "$AGENT_PID"
cat "$work/agent.log"

say "the run, as sagad has it"
curl -sf "$API/v1/instances/$run" -H 'Authorization: Bearer operator-token' \
  | jq -c '{status, calls: [.calls[] | {call_id, tool, status}]}'
say "effects seen by the services (each exactly once)"
effects=$(curl -sf "$ES/_effects")
jq -c '{total, by_route}' <<<"$effects"
jq -e '.total == 4 and ([.by_key[]] | all(. == 1)) and .by_route.create_ticket == 1
       and .by_route.block_ip == 1 and .by_route.disable_account == 1
       and .by_route.send_message == 1' <<<"$effects" >/dev/null
say "ok: every effect once, the run finished after kill -9 of the agent and of sagad"
