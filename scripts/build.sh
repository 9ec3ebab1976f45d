#!/usr/bin/env bash
# Configures and builds sagad into build/ (or $BUILD_DIR). Extra args go to cmake.
# TARGETS="sagad sagactl" builds only those (the demo does); default: all.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} -DSAGAD_WERROR=ON "$@" >/dev/null
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
