#!/usr/bin/env bash
# Runs every test: installs what is missing, checks format and function length, builds (warnings
# are errors), lints the library, agent and CLI sources (clang-tidy) and every non-test source (cppcheck), runs
# the whole ctest suite, then the same suite under ASan+UBSan.
# Services the tests need (a private dockerd, workers) are started and stopped by the tests'
# own fixtures. Last, a short run of every libFuzzer target (scripts/fuzz.sh: clang, ASan+UBSan,
# a few seconds each from the committed seeds; tests/fuzz/README.md has the long run).
#   SBX_SKIP_ASAN=1 skips the sanitizer pass (for quick local runs).
#   SBX_SKIP_FUZZ=1 skips the fuzz run; SBX_FUZZ_SECONDS sets its seconds per target (4).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/install-deps.sh

jobs=$(nproc)
# Tests run two per core: most of a test's time is spent waiting (for a daemon to start, a
# timeout to fire, a sandbox to boot), so one per core left the cores idle. Measured on 2 cores:
# the suite used 37% of them at -j2 (272 s); -j4 took 181 s, and under ASan+UBSan 282 s
# against 394 s. Heavy tests reserve more than one slot (their PROCESSORS property).
test_jobs=$((jobs * 2))
status=0
stamp() { echo "== $* ($(date -u +%H:%M:%S))"; }

stamp "format (.clang-format)"
scripts/check-format.sh || status=1
stamp "function length (over 100 lines only with a stated reason)"
/usr/bin/python3 scripts/check-long-functions.py || status=1

stamp "build (warnings are errors)"
scripts/build.sh "$root/build"
stamp "lint (clang-tidy and its static analyzer on the library, agent and CLI sources, .clang-tidy)"
scripts/tidy.sh "$root/build" || status=1
stamp "lint (cppcheck on every non-test source)"
scripts/cppcheck.sh "$root/build" || status=1
stamp "tests"
(cd build && ctest --output-on-failure -j "$test_jobs") || status=1

if [ "${SBX_SKIP_ASAN:-0}" != 1 ]; then
  stamp "build with ASan+UBSan"
  scripts/build.sh "$root/build-asan" -DSBX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
  stamp "tests under ASan+UBSan"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j "$test_jobs") || status=1
fi

if [ "${SBX_SKIP_FUZZ:-0}" != 1 ]; then
  stamp "fuzz: a short run of every libFuzzer target"
  scripts/fuzz.sh "${SBX_FUZZ_SECONDS:-4}" || status=1
fi
stamp "done: $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
