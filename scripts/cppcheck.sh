#!/usr/bin/env bash
# Runs cppcheck (Debian 12's 2.10) over every C source of sbx outside tests and bench: the
# library folders, the providers, the CLI and sbx-agent. Checks: warning and portability (style
# findings are left to clang-tidy, which runs with the build's flags). Fails on any finding,
# naming it; a deliberate exception is an inline `// cppcheck-suppress <id>` with its reason.
# Run by scripts/test.sh after the build (the generated contract headers are in BUILD_DIR).
#   scripts/cppcheck.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
cd "$root"
command -v cppcheck >/dev/null || { echo "cppcheck: not installed (scripts/install-deps.sh)" >&2; exit 1; }
[ -d "$dir/proto" ] || { echo "cppcheck: no $dir/proto; build first (scripts/build.sh)" >&2; exit 1; }
if ! cppcheck --quiet --enable=warning,portability --inline-suppr --error-exitcode=1 \
       -j "$(nproc)" -I include -I . -I "$dir/proto" --suppress=missingIncludeSystem \
       core broker client worker providers cli agent; then
  echo "cppcheck: findings above" >&2
  exit 1
fi
echo "cppcheck: core broker client worker providers cli agent are clean"
