#!/usr/bin/env bash
# Test-only tools from npm, pinned in tests/package-lock.json (axe-core for
# the browser tests). Nothing here is needed to build or run sagad.
set -euo pipefail
cd "$(dirname "$0")/../tests"
if ! command -v npm >/dev/null; then
  apt-get install -y --no-install-recommends nodejs npm >/dev/null
fi
npm ci --no-audit --no-fund --loglevel=error
