#!/usr/bin/env bash
# README command (a): on a fresh Debian 12 machine, installs the missing packages, builds sbx,
# and runs the main job on the embedded built-in default (one `local` profile, network denied):
# a Python program in a fresh sandbox, whose exit status becomes this script's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/install-deps.sh
scripts/build.sh "$root/build"

sbx="$root/build/cli/sbx"
unset SBX_CONFIG # the built-in default, whatever the caller's environment says
echo "== sbx version"
"$sbx" version
echo "== sbx config check (the built-in default; set SBX_CONFIG or --config to use a file)"
"$sbx" config check
echo "== sbx run -- python3 ... (a fresh sandbox: no network, private /tmp, /workspace)"
"$sbx" run -- python3 -c '
import os, platform, socket
print("hello from the sandbox:", platform.python_version(), "in", os.getcwd())
# The sandbox has its own empty network namespace: loopback is the only interface, so no
# packet can leave (and this demo sends none anywhere).
print("network interfaces:", ", ".join(name for _, name in socket.if_nameindex()))
'
