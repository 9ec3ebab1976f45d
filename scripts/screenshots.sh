#!/usr/bin/env bash
# Regenerates the console's screenshots in docs/ (each page at 1280x800 and
# at 390x844, "-phone"): the browser tests take them as they go.
#   scripts/screenshots.sh          (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
scripts/test_deps.sh
/usr/bin/python3 tests/browser/console_test.py --sagad "$B/sagad" --services "$B/example-services" \
  --screenshots docs
ls docs/console-*.png
