#!/usr/bin/env bash
# README command (a): on a fresh Debian 12 machine, installs the missing packages, builds sbx,
# and runs the main job on the embedded built-in default (one `local` profile, network denied).
# The sandbox run itself is the `sbx run` command; until the engine and the local provider are
# built in, this shows the binary and the configuration it would run with.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/install-deps.sh
scripts/build.sh "$root/build"

sbx="$root/build/cli/sbx"
echo "== sbx version"
"$sbx" version
echo "== sbx config check (the built-in default; set SBX_CONFIG or --config to use a file)"
env -u SBX_CONFIG "$sbx" config check
