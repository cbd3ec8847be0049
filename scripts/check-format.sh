#!/usr/bin/env bash
# Fails when a tracked C/C++ file does not follow .clang-format (Debian 12's clang-format 14),
# naming each file and the command that fixes it. Run by scripts/test.sh, so CI refuses drift.
# Files go to clang-format 64 at a time, one batch per core: one process per file took a minute
# of the test command on a VM where a process start costs milliseconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (scripts/install-deps.sh)" >&2; exit 1; }
rc=0
out=$( (git ls-files '*.c' '*.h' '*.cc' '*.cpp' 2>/dev/null || find . -name '*.[ch]' -not -path './build*') |
  xargs -r -d '\n' -P "$(nproc)" -n 64 clang-format --dry-run --Werror 2>&1 >/dev/null) || rc=$?
mapfile -t bad < <(printf '%s\n' "$out" |
  sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) do not follow .clang-format; fix with:" >&2
  echo "  clang-format -i ${bad[*]}" >&2
  exit 1
fi
if [ "$rc" -ne 0 ]; then # clang-format failed otherwise (a file it cannot read or parse)
  printf '%s\n' "$out" >&2
  echo "check-format: clang-format failed (exit $rc)" >&2
  exit 1
fi
echo "check-format: every C/C++ file follows .clang-format"
