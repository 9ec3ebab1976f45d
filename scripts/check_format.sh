#!/usr/bin/env bash
# Every C++ file of the tree is as clang-format (.clang-format) writes it.
#   scripts/check_format.sh        check (exit 1 naming the files that differ)
#   scripts/check_format.sh --fix  rewrite them
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run -Werror "${files[@]}" 2>/tmp/sagad-format.$$; then
  grep -o '^[^:]*' /tmp/sagad-format.$$ | sort -u | sed 's/^/not formatted: /'
  rm -f /tmp/sagad-format.$$
  echo "run scripts/check_format.sh --fix"
  exit 1
fi
rm -f /tmp/sagad-format.$$
echo "format: ${#files[@]} files clean"
