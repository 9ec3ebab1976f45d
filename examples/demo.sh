#!/usr/bin/env bash
# The demo: installs dependencies, builds, starts example-services and sagad on
# loopback with a fresh data dir, submits an incident, shows it waiting for
# approval, approves it and prints the final instance and its event log.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
TARGETS="sagad sagactl example-services" scripts/build.sh  # tests are built by tests/run_tests.sh
B=${BUILD_DIR:-build}
work=$(mktemp -d /tmp/sagad-demo-XXXXXX)
cleanup() { kill "${SAGAD_PID:-}" "${ES_PID:-}" 2>/dev/null || true; }
trap cleanup EXIT

source scripts/wait_port.sh

"$B/example-services" --listen 127.0.0.1:0 >"$work/services.out" 2>"$work/services.log" &
ES_PID=$!
ES=http://127.0.0.1:$(wait_port "$work/services.out")
args=()
for s in ticketing edr iam mail inventory payments shipping airline hotel cars; do args+=(--service "$s=$ES"); done
"$B/sagad" --examples --data-dir "$work/data" --listen 127.0.0.1:0 "${args[@]}" >"$work/sagad.out" 2>"$work/sagad.log" &
SAGAD_PID=$!
API=http://127.0.0.1:$(wait_port "$work/sagad.out")
echo "== sagad at $API, example services at $ES, data in $work/data"

echo; echo "== 1. submit an incident (waits until it needs a human)"
inst=$(curl -sf -X POST "$API/v1/sagas/incident_response/instances?wait=10" \
  -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-incident-1' \
  -d '{"input":{"title":"Phishing on laptop-7","severity":"high","host":"laptop-7","user":"bob","email":"bob@example.com"}}')
id=$(jq -r .id <<<"$inst")
jq '{id, status, steps: [.steps[] | {name, status, external_ref}]}' <<<"$inst"

echo; echo "== 2. the approvals queue"
curl -sf "$API/v1/approvals" | jq '.approvals[] | {instance_id, step, key}'

echo; echo "== 3. approve notify_user"
curl -sf -X POST "$API/v1/instances/$id/steps/notify_user/approve" -H 'Content-Type: application/json' -d '{"comment":"confirmed with SOC"}' \
  | jq '{status, notify_user: .steps[3].approval}'

echo; echo "== 4. final instance"
curl -sf "$API/v1/instances/$id?wait=10" | jq '{id, status, steps: [.steps[] | {name, status, key, attempts, external_ref}]}'

echo; echo "== 5. event log"
curl -sf "$API/v1/instances/$id/events" | jq -r '.events[] | "\(.seq)\t\(.type)\t\(.step // "-")"'

echo; echo "== 6. effects seen by the downstream services (each exactly once)"
curl -sf "$ES/_effects" | jq '{total, duplicates, by_route}'
