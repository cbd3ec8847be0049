#!/usr/bin/env bash
# Runs clang-tidy (Debian 12's clang-tidy 14, checks in .clang-tidy) over libsbx's own sources
# -- the library folders, not tests, bench or the agent -- with the build's
# compile_commands.json, two files at a time. Fails on any finding (WarningsAsErrors), naming
# it. Run by scripts/test.sh after the build.
#   scripts/tidy.sh [BUILD_DIR] [--analyzer]   (default: build; --analyzer adds clang-analyzer-*,
#                                               minutes of CPU, see .clang-tidy)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
extra=()
[ "${2:-}" = --analyzer ] && extra=(--checks=clang-analyzer-*,-clang-analyzer-security.insecureAPI.DeprecatedOrUnsafeBufferHandling)
cd "$root"
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[ -n "$tidy" ] || { echo "tidy: clang-tidy is not installed (scripts/install-deps.sh)" >&2; exit 1; }
[ -f "$dir/compile_commands.json" ] || { echo "tidy: no $dir/compile_commands.json; build first (scripts/build.sh)" >&2; exit 1; }
mapfile -t files < <(find core broker client providers worker -name '*.c' | sort)
if ! printf '%s\n' "${files[@]}" | xargs -P 2 -n 4 "$tidy" -p "$dir" --quiet --use-color=false "${extra[@]}" \
       2> >(grep -v -E '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^Use -system-headers' >&2); then
  echo "tidy: clang-tidy found problems above (.clang-tidy says which checks run and why some do not)" >&2
  exit 1
fi
echo "tidy: ${#files[@]} library sources pass clang-tidy"
