#!/usr/bin/env bash
# Configures and builds sbx into a build directory.
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]   (default BUILD_DIR: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
cmake -S "$root" -B "$dir" -DSBX_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
