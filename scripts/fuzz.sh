#!/usr/bin/env bash
# Builds every libFuzzer target with clang (-DSBX_FUZZ=ON, ASan+UBSan) into build-fuzz and runs
# each from its committed seed corpus for a while. New inputs go to a scratch directory, never
# into the corpus; a finding (crash, leak, timeout, out-of-memory, a violated property) is kept
# under build-fuzz/findings/<target>/ and fails the run. See tests/fuzz/README.md.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 5 seconds, every target)
#   SBX_FUZZ_BUILD=dir   another build directory (default build-fuzz)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-5}
shift || true
build=${SBX_FUZZ_BUILD:-$root/build-fuzz}

if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DSBX_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
else
  cmake "$build" >/dev/null # picks up targets added since
fi
list=$build/fuzz-targets.txt
mapfile -t all < <(cut -f1 "$list")
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >/dev/null

scratch=$(mktemp -d "${TMPDIR:-/tmp}/sbx-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
for t in "${targets[@]}"; do # every name known before any run starts
  if [ -z "$(awk -F'\t' -v t="$t" '$1 == t' "$list")" ]; then
    echo "fuzz: no target $t (see $list)" >&2
    exit 2
  fi
done

# One target's run; 0 when it found nothing. Prints one line (or the finding) when it ends.
fuzz_one() {
  local line name bin max_len dirs corpus start runs
  line=$(awk -F'\t' -v t="$1" '$1 == t' "$list")
  IFS=$'\t' read -r name bin max_len dirs <<<"$line"
  IFS=: read -r -a corpus <<<"$dirs"
  mkdir -p "$scratch/$name" "$build/findings/$name"
  start=$(date +%s)
  # -timeout: one input running 30 s is a hang; -rss_limit_mb: a decoder must stay bounded.
  if (cd "$build/findings/$name" &&
    "$bin" "$scratch/$name" "${corpus[@]}" -max_total_time="$seconds" -max_len="$max_len" \
      -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 >"$scratch/$name.log" 2>&1); then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$name.log" | grep -o '[0-9]*$' || true)
    echo "fuzz: $name: ${runs:-?} inputs in $(($(date +%s) - start)) s, no finding"
  else
    echo "fuzz: $name: FINDING (artifacts in $build/findings/$name):"
    grep -E 'fuzz finding|ERROR: |SUMMARY: |runtime error|Test unit written' "$scratch/$name.log" |
      head -20 || tail -30 "$scratch/$name.log"
    return 1
  fi
}

# One target per core at once (each libFuzzer run is one busy process).
status=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
