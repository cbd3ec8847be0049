#!/usr/bin/env bash
# Runs the docker benchmarks on a private dockerd of their own: starts it
# (scripts/dockerd-test.sh), runs bench_docker, stops it whatever happens.
#   bench/docker/run.sh BENCH_BINARY [SBX_AGENT]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$1
[ $# -ge 2 ] && [ -n "$2" ] && export SBX_AGENT=$2
state=$(mktemp /tmp/sbx-bench-dockerd.XXXXXX)
rm -f "$state"
trap 'SBX_DOCKERD_IMAGES=busybox "$root/scripts/dockerd-test.sh" stop "$state" >/dev/null' EXIT
SBX_DOCKERD_IMAGES=busybox "$root/scripts/dockerd-test.sh" start "$state" >/dev/null
"$bin" "$state"
