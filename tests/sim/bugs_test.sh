#!/usr/bin/env bash
# Proof that the simulator bites: each bug re-introduced behind
# `sagad-sim --bug NAME` (coordinator/sim/bugs.h) must be found within its
# budget of seeds (exit 1 and a VIOLATION line). Usage: bugs_test.sh SIM
set -uo pipefail
sim="$1"
failed=0
check() {  # name budget
  out=$("$sim" --bug "$1" --seeds "$2" 2>&1)
  rc=$?
  line=$(echo "$out" | grep -m1 '^seed .*VIOLATION' || true)
  if [[ $rc -ne 1 || -z "$line" ]]; then
    echo "bug $1: not found in $2 seeds"
    failed=1
  else
    echo "bug $1: found: $line"
  fi
}
check refusal-as-success 200
check timeout-as-not-sent 200
check two-owners 2000
check lying-fsync 500
exit $failed
