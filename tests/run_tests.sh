#!/usr/bin/env bash
# The whole test suite: install dependencies (and the test-only npm tools,
# pinned in tests/package-lock.json), build with -Werror, run ctest.
#   tests/run_tests.sh              everything (unit, integration, crash)
#   tests/run_tests.sh -L unit      any ctest arguments narrow it down
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/test_deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest -j "$(nproc)" --output-on-failure "$@"
