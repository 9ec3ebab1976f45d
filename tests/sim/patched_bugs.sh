#!/usr/bin/env bash
# Proof that the simulator bites, for the bugs that lived in product code
# (the operator rules and planner, the definition checks, the recording of
# a downstream's text): each patch in tests/sim/bugs/ re-introduces one, on
# a copy of the tree (a git worktree; this checkout is never touched), and
# sagad-sim built from that copy must find it within BUDGET seeds
# (default 10000).
#   tests/sim/patched_bugs.sh [--check] [BUDGET [NAME...]]
# --check: only make sure every patch still applies to HEAD (fast; the
# tests run this). Otherwise one worktree and one build directory under
# ${WORK:-/tmp/sagad-bug-patches} serve every patch in turn (the first
# build is a full one, the next ones recompile what a patch touches).
# Prints "bug NAME: found at seed S: ..." (a VIOLATION, or an ABORT: an
# invariant the engine checks itself) or "bug NAME: not found in N seeds";
# exit 1 if any was not found. To clean up afterwards:
#   git worktree remove --force ${WORK:-/tmp/sagad-bug-patches}/tree
# Measured: a first (Release) build of 20-40 min on 2 cores, then a
# minute per patch; the seed each is found at is in docs/simulation.md.
set -uo pipefail
src="$(cd "$(dirname "$0")/../.." && pwd)"
patches="$src/tests/sim/bugs"
if [[ "${1:-}" == "--check" ]]; then
  failed=0
  for p in "$patches"/*.patch; do
    if ! git -C "$src" apply --check "$p" 2>/dev/null; then
      echo "patch $(basename "$p") no longer applies to this tree: refresh it"
      failed=1
    fi
  done
  exit $failed
fi
budget="${1:-10000}"
shift || true
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for p in "$patches"/*.patch; do names+=("$(basename "$p" .patch)"); done
fi
work="${WORK:-/tmp/sagad-bug-patches}"
tree="$work/tree"
mkdir -p "$work"
if [[ ! -d "$tree" ]]; then
  git -C "$src" worktree prune  # a registration whose directory is gone
  git -C "$src" worktree add --quiet --detach "$tree" HEAD || exit 2
fi
git -C "$tree" checkout -q --detach "$(git -C "$src" rev-parse HEAD)" || exit 2
failed=0
for name in "${names[@]}"; do
  git -C "$tree" checkout -q -- . && git -C "$tree" clean -qfd
  if ! git -C "$tree" apply "$patches/$name.patch"; then
    echo "bug $name: the patch does not apply"
    failed=1
    continue
  fi
  if ! (cd "$tree" && BUILD_DIR="$work/build" BUILD_TYPE=Release TARGETS=sagad-sim \
        scripts/build.sh >"$work/build-$name.log" 2>&1); then
    echo "bug $name: the build failed (see $work/build-$name.log)"
    failed=1
    continue
  fi
  out=$("$work/build/sagad-sim" --seeds "$budget" 2>&1)
  # A violation of the invariants the World checks, or of one the engine
  # checks itself (SAGAD_CHECK: the simulator prints "seed S: ABORT").
  line=$(echo "$out" | grep -m1 -E '^seed .*(VIOLATION|ABORT)' || true)
  if [[ -n "$line" ]]; then
    echo "bug $name: found at ${line#seed }"
  else
    echo "bug $name: not found in $budget seeds"
    failed=1
  fi
done
git -C "$tree" checkout -q -- . && git -C "$tree" clean -qfd
exit $failed
