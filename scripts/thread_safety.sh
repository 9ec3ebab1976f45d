#!/usr/bin/env bash
# The product code compiled by clang with -Wthread-safety -Werror: every
# member a Mutex guards is GUARDED_BY it, every helper that expects it held
# REQUIRES it (util/mutex.h). Builds the libraries and binaries, not the
# tests, into build-clang/ (or $BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-clang}
CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug -DSAGAD_WERROR=ON \
  -DCMAKE_CXX_FLAGS="-Wthread-safety -Wthread-safety-beta" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target sagad_core sagad_examples sagad sagactl sagad-sim \
  example-services
echo "thread safety: clean"
