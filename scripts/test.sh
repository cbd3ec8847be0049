#!/usr/bin/env bash
# Runs every test: installs what is missing, builds (warnings are errors), runs the whole
# ctest suite, then the same suite under ASan+UBSan. Services the tests need (a private
# dockerd, workers) are started and stopped by the tests' own fixtures.
#   SBX_SKIP_ASAN=1 skips the sanitizer pass (for quick local runs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/install-deps.sh

jobs=$(nproc)
status=0

echo "== format (.clang-format)"
scripts/check-format.sh || status=1

echo "== build (warnings are errors)"
scripts/build.sh "$root/build"
echo "== tests"
(cd build && ctest --output-on-failure -j "$jobs") || status=1

if [ "${SBX_SKIP_ASAN:-0}" != 1 ]; then
  echo "== build with ASan+UBSan"
  scripts/build.sh "$root/build-asan" -DSBX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
  echo "== tests under ASan+UBSan"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$jobs") || status=1
fi
exit $status
