#!/usr/bin/env bash
# Fails when a tracked C/C++ file does not follow .clang-format (Debian 12's clang-format 14),
# naming each file and the command that fixes it. Run by scripts/test.sh, so CI refuses drift.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (scripts/install-deps.sh)" >&2; exit 1; }
bad=()
while IFS= read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.c' '*.h' '*.cc' '*.cpp' 2>/dev/null || find . -name '*.[ch]' -not -path './build*')
if [ ${#bad[@]} -gt 0 ]; then
  echo "check-format: ${#bad[@]} file(s) do not follow .clang-format; fix with:" >&2
  echo "  clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "check-format: every C/C++ file follows .clang-format"
