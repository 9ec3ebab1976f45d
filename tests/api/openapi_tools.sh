#!/usr/bin/env bash
# Third-party tools on sagad's OpenAPI document (ctest openapi_tools):
#   1. @redocly/cli lint: no error, no warning (tests/api/redocly.yaml says
#      which rule is off and why);
#   2. openapi-typescript generates the client types, and tsc --strict
#      compiles a submission with input and a typed read of an instance.
# The tools are test-only npm packages pinned in tests/package-lock.json
# (scripts/test_deps.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tests=$(dirname "$here")
doc=$(dirname "$tests")/coordinator/http/openapi.json
bin=$tests/node_modules/.bin
[ -x "$bin/redocly" ] || { echo "run scripts/test_deps.sh first (npm ci in tests/)"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin/redocly" lint --config "$here/redocly.yaml" --format stylish "$doc" >"$out/lint.txt" 2>&1 || {
  cat "$out/lint.txt"; echo "redocly lint failed"; exit 1; }
if grep -qE "You have [0-9]+ (warning|error)" "$out/lint.txt" || ! grep -q "is valid" "$out/lint.txt"; then
  cat "$out/lint.txt"; echo "redocly lint reported warnings"; exit 1
fi
echo "redocly lint: clean"
cp "$here/client_check.ts" "$here/tsconfig.json" "$out/"
"$bin/openapi-typescript" "$doc" -o "$out/sagad-api.d.ts" >/dev/null
"$bin/tsc" -p "$out/tsconfig.json"
echo "openapi-typescript + tsc --strict: the client compiles"
