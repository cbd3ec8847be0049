#!/usr/bin/env bash
# Runs clang-tidy (Debian 12's clang-tidy 14, checks in .clang-tidy, clang's static analyzer
# among them) over sbx's own sources -- the library folders, the agent and the CLI; not tests
# or bench -- with the build's compile_commands.json, two processes at a time (the analyzer
# makes it a few minutes of CPU). Fails on any finding (WarningsAsErrors), naming it. Run by
# scripts/test.sh after the build.
#   scripts/tidy.sh [BUILD_DIR] [FILE.c...]   (default: build; files: only those)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
cd "$root"
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[ -n "$tidy" ] || { echo "tidy: clang-tidy is not installed (scripts/install-deps.sh)" >&2; exit 1; }
[ -f "$dir/compile_commands.json" ] || { echo "tidy: no $dir/compile_commands.json; build first (scripts/build.sh)" >&2; exit 1; }
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(find core broker client providers worker agent cli -name '*.c' | sort)
fi
if ! printf '%s\n' "${files[@]}" | xargs -P 2 -n 2 "$tidy" -p "$dir" --quiet --use-color=false \
       2> >(grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^Use -system-headers' >&2); then
  echo "tidy: clang-tidy found problems above (.clang-tidy says which checks run and why some do not)" >&2
  exit 1
fi
echo "tidy: ${#files[@]} sources pass clang-tidy"
