#!/usr/bin/env bash
# The benchmark in one command: installs what is missing, builds sagad,
# example-services and the benchmarks in Release into build-release/, then
# runs load_bench with the given arguments (default: the concurrency table).
#   bench/run.sh                                   # c = 1, 16, 64 + baseline
#   bench/run.sh --preload 1000000 --levels 16,64  # store-size curve
#   bench/run.sh --recovery 10000                  # recovery time
#   bench/run.sh --graph 200                       # trip_booking: parallel bookings
#   bench/run.sh --store postgres                  # also on PostgreSQL (a server of
#                                                  # its own), and two coordinators
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-release -j "$(nproc)" --target sagad example-services load_bench chaos_bench
[ $# -eq 0 ] && set -- --sagas 3000
exec build-release/load_bench "$@"
