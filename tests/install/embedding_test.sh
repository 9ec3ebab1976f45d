#!/usr/bin/env bash
# Installs sagad into a temporary prefix, builds examples/embedding as an
# out-of-tree project with find_package(sagad), runs it against
# example-services and completes one saga, submitted with sagad::Client.   usage: embedding_test.sh SRC BUILD
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d /tmp/sagad-embed-XXXXXX)
cleanup() { kill "${APP:-}" "${ES:-}" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/examples/embedding" -B "$work/app" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app" -j 2 >/dev/null

source "$src/scripts/wait_port.sh"
"$work/prefix/bin/example-services" --listen 127.0.0.1:0 >"$work/es.out" 2>/dev/null &
ES=$!
URL=http://127.0.0.1:$(wait_port "$work/es.out")
"$work/app/embedded_saga" --data-dir "$work/data" --listen 127.0.0.1:0 \
  --service ticketing="$URL" --service inventory="$URL" >"$work/app.out" 2>/dev/null &
APP=$!
API=http://127.0.0.1:$(wait_port "$work/app.out")
# The C++ client, built out of tree: submit, the same key again, wait, and a
# refused approval (an unknown step) as a NOT_FOUND status.
read -r status refused < <("$work/app/submit_with_client" "$API" onboard_customer \
  '{"customer":"acme"}' embed-1)
echo "embedded saga status: $status; an unknown step: $refused"
[ "$status" = COMPLETED ]
[ "$refused" = NOT_FOUND ]
effects=$(curl -sf "$URL/_effects" | jq .total)
echo "effects: $effects"
[ "$effects" = 2 ]
echo "1 passed, 0 failed"
