#!/usr/bin/env bash
# Replays every seed of tests/sim/regression_seeds.txt (a seed, a comment
# with the bug it found): each must pass now. Usage: regressions.sh SIM FILE
set -euo pipefail
sim="$1"
list="$2"
failed=0
while read -r seed rest; do
  [[ -z "$seed" || "$seed" == \#* ]] && continue
  if ! out=$("$sim" --seed "$seed" 2>&1); then
    echo "regression seed $seed ($rest) fails again:"
    echo "$out" | tail -20
    failed=1
  fi
done < "$list"
[[ $failed -eq 0 ]] && echo "sim regressions: every seed passes"
exit $failed
