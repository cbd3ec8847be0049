#!/usr/bin/env bash
# The ctest fixture's daemon (scripts/dockerd-test.sh with SBX_DOCKERD_OWNER=parent) stops once
# the process that started the script is gone, as ctest killed by a CI timeout would be: here a
# shell that starts it and then sleeps, killed with SIGKILL. Before, the fixture's daemon was
# unowned and ran on after a killed ctest.
#   tests/docker/daemon_owner.sh SCRIPT
set -euo pipefail
script=$1
state=$(mktemp -u /tmp/sbx-dockerd-owner.XXXXXX)
SBX_DOCKERD_OWNER=parent SBX_DOCKERD_IMAGES=busybox \
  bash -c '"$0" start "$1" >/dev/null && exec sleep 600' "$script" "$state" &
owner=$!
cleanup() {
  kill -KILL "$owner" 2>/dev/null || true
  [ ! -f "$state" ] || "$script" stop "$state" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# Started once the owner is the sleep (the script has returned, its watchdog running).
for _ in $(seq 1 1200); do
  [ "$(cat "/proc/$owner/comm" 2>/dev/null)" = sleep ] && break
  kill -0 "$owner" 2>/dev/null || { echo "FAIL: the daemon did not start"; exit 1; }
  sleep 0.1
done
[ -f "$state" ] || { echo "FAIL: no state file after start"; exit 1; }
dir=$(sed -n 's/^SBX_DOCKERD_DIR=//p' "$state")
pid=$(cat "$dir/dockerd.pid")
kill -0 "$pid" || { echo "FAIL: dockerd $pid is not running"; exit 1; }
kill -KILL "$owner"
wait "$owner" 2>/dev/null || true
# The watchdog looks every second; the daemon then has up to 30 s to stop its containers.
for _ in $(seq 1 450); do
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pid" 2>/dev/null; then
  echo "FAIL: dockerd $pid still runs 45 s after its owner was killed"
  exit 1
fi
for _ in $(seq 1 50); do
  [ -e "$state" ] || [ -e "$dir" ] || break
  sleep 0.1
done
[ ! -e "$state" ] || { echo "FAIL: the state file $state is left"; exit 1; }
[ ! -e "$dir" ] || { echo "FAIL: the daemon's dir $dir is left"; exit 1; }
echo "ok: dockerd $pid stopped and $dir removed after its owner was killed"
