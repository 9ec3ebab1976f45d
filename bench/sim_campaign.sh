#!/usr/bin/env bash
# The long simulation campaign: seeds 1..SEEDS of sagad-sim over JOBS
# processes (default: the number of cores), in chunks; a chunk that stops
# at a violation goes on from the next seed. Prints every violation's
# replay command and one summary line:
#   campaign: N seeds, M sagas, K events, V violations, R sagas/s per CPU, T s wall
# Usage: [SIM=sagad-sim] bench/sim_campaign.sh SEEDS [JOBS]   (else builds build-release/)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${1:?usage: bench/sim_campaign.sh SEEDS [JOBS]}"
jobs="${2:-$(nproc)}"
if [[ -z "${SIM:-}" ]]; then  # SIM=path/to/sagad-sim skips the build
  BUILD_DIR=build-release BUILD_TYPE=Release TARGETS=sagad-sim scripts/build.sh >/dev/null
  SIM="$PWD/build-release/sagad-sim"
fi
sim="$SIM"
out=$(mktemp -d)
per=$(( (seeds + jobs - 1) / jobs ))
run_range() {  # first last file
  local s=$1 last=$2 file=$3
  while (( s <= last )); do
    local n=$(( last - s + 1 )); (( n > 20000 )) && n=20000
    local log
    log=$("$sim" --seed "$s" --seeds "$n" || true)
    echo "$log" | grep -E '^(sim:|seed |replay:)' >> "$file"
    if echo "$log" | tail -1 | grep -q '^sim:'; then
      local done_
      done_=$(echo "$log" | tail -1 | awk '{print $2}')
      s=$(( s + done_ ))
    else  # aborted (an engine invariant check): go on after that seed
      local at
      at=$(echo "$log" | grep -m1 -oE '^seed [0-9]+: ABORT' | awk '{print $2}' | tr -d : || true)
      [[ -z "$at" ]] && at=$(( s + n - 1 ))
      echo "sim: $(( at - s + 1 )) seeds, 0 sagas, 0 events, 1 violations, 0 sagas/s" >> "$file"
      s=$(( at + 1 ))
    fi
  done
}
start=$(date +%s)
for (( j = 0; j < jobs; ++j )); do
  first=$(( j * per + 1 )); last=$(( (j + 1) * per )); (( last > seeds )) && last=$seeds
  (( first <= last )) && run_range "$first" "$last" "$out/$j" &
done
wait
cat "$out"/* | grep -E '^(seed |replay:)' || true
cat "$out"/* | awk -v secs=$(( $(date +%s) - start )) '
  /^sim:/ { n += $2; m += $4; k += $6; v += $8; if ($10 > 0) cpu += $4 / $10 }
  END { printf "campaign: %d seeds, %d sagas, %d events, %d violations, %d sagas/s per CPU, %d s wall\n", n, m, k, v, (cpu > 0 ? m / cpu : 0), secs }'
rm -rf "$out"
