#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/ and
# runs each for RUNS inputs (default 200000) from its seed corpus in
# fuzz/corpus/, with a fixed seed: the same inputs on every run, so CI stays
# reproducible (explore further by hand with another -seed or more runs).
# A crash fails the run; the input that caused it is left in build-fuzz/
# (crash-*): add it to the corpus and a regression test, then fix.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-200000}
CXX=clang++ CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSAGAD_FUZZ=ON \
  -DSAGAD_JEMALLOC=OFF >/dev/null
targets=(definition template request_body replay)
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  cp -r "fuzz/corpus/$t/." "$work/"
  echo "== fuzz_$t, $RUNS inputs"
  status=0
  (cd build-fuzz && ./fuzz_$t -seed=1 -runs="$RUNS" -max_total_time=600 -max_len=8192 -rss_limit_mb=2048 \
     -print_final_stats=1 "$work" > "fuzz_$t.log" 2>&1) || status=$?
  grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" \
    "build-fuzz/fuzz_$t.log" || true
  rm -rf "$work"
  [ "$status" -eq 0 ] || { tail -40 "build-fuzz/fuzz_$t.log"; echo "fuzz_$t failed"; exit 1; }
done
