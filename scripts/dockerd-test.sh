#!/usr/bin/env bash
# Runs a private Docker engine for the docker tests and benchmarks: Debian's /usr/sbin/dockerd on
# its own unix socket, data root, exec root and pidfile under a fresh temp dir, with the bridge,
# iptables and IP forwarding all off, and test images imported from a local root filesystem
# (busybox-static, plus the host's python3). No image is ever pulled from a registry.
#
# This script installs nothing (scripts/install-deps.sh lists docker.io and busybox-static) and
# never touches the host's own dockerd, /etc/docker or /var/lib/docker.
#
#   scripts/dockerd-test.sh start STATE    start a daemon, import the images, write STATE
#   scripts/dockerd-test.sh stop STATE     stop it, remove its containers, mounts and dirs
#   scripts/dockerd-test.sh restart STATE  stop and start the same daemon (same socket and data)
#   scripts/dockerd-test.sh env STATE      print `export VAR=...` lines (eval them in a shell)
#
# STATE is a file of shell assignments (SBX_DOCKER_SOCKET, DOCKER_HOST, SBX_DOCKER_IMAGE_*,
# ...) that the tests read. SBX_DOCKERD_IMAGES=busybox skips the python image (faster start).
#
# SBX_DOCKERD_OWNER=PID at start: the daemon belongs to that process (a test binary), and a
# watchdog stops it as `stop` does once that process is gone, so a test killed by ctest's timeout
# or a crash leaves no daemon behind. dockerd's parent is this script, which exits at once, so
# a parent-death signal (tests/support/die_with_parent.h) cannot tie it to its test; and it
# must stop its containers and unmount, which SIGKILL would not let it do.
# SBX_DOCKERD_OWNER=parent: the process that ran this script owns it. The ctest fixture's shared
# daemon is started so: it outlives the test that starts it, as a fixture must, and is stopped by
# the cleanup test, or by the watchdog once ctest itself is gone (killed by a CI timeout).
#
# Note: /usr/local/bin/docker on dev machines is an unrelated client; we only ever run
# /usr/sbin/dockerd and /usr/bin/docker from Debian's docker.io.
set -euo pipefail

DOCKERD=/usr/sbin/dockerd
DOCKER=/usr/bin/docker
BUSYBOX=/bin/busybox
PYTHON=/usr/bin/python3
# How long the daemon may take to answer /_ping. Cold starts on a loaded 2-core machine with
# eight builds running take a few seconds; a minute means something is wrong, not slow.
PING_TIMEOUT_S=60
# How long a SIGTERM'd daemon may take to stop its containers and unmount before SIGKILL.
STOP_TIMEOUT_S=30

die() { echo "dockerd-test: $*" >&2; exit 1; }

usage() { sed -n '9,15p' "$0" >&2; exit 2; }

# How often the watchdog checks its owner (seconds).
WATCH_INTERVAL_S=1

[ $# -eq 2 ] || usage
cmd=$1
state=$2

ping_daemon() { # socket -> 0 when /_ping answers OK
  curl -fsS --max-time 2 --unix-socket "$1" http://docker/_ping 2>/dev/null | grep -q OK
}

# Starts dockerd on the dirs under $dir with storage driver $1; returns non-zero when it does not
# answer /_ping in time (its log is then in $dir/dockerd.log).
launch() {
  local driver=$1
  mkdir -p "$dir/data" "$dir/exec"
  # An empty config file: the host's /etc/docker/daemon.json must not leak into the tests.
  [ -f "$dir/daemon.json" ] || echo '{}' >"$dir/daemon.json"
  # setsid + all three streams redirected: ctest waits for a fixture's pipes to close, so the
  # daemon must not hold them. --bridge=none and the iptables/forwarding flags keep the host's
  # network configuration untouched; without --containerd, dockerd runs its own containerd
  # under exec-root (private socket, private state).
  setsid "$DOCKERD" \
    --host "unix://$dir/docker.sock" \
    --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/dockerd.pid" \
    --config-file "$dir/daemon.json" \
    --bridge=none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
    --userland-proxy=false --storage-driver="$driver" --log-level=warn \
    </dev/null >>"$dir/dockerd.log" 2>&1 &
  local pid=$!
  local waited=0
  while ! ping_daemon "$dir/docker.sock"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      return 1
    fi
    sleep 0.2
    waited=$((waited + 1))
    if [ $waited -ge $((PING_TIMEOUT_S * 5)) ]; then
      kill -KILL "$pid" 2>/dev/null || true
      return 1
    fi
  done
  echo "$pid" >"$dir/dockerd.realpid"
  echo "$driver" >"$dir/driver"
}

# Builds a root filesystem in $1: busybox with its applet links (and /bin/sh), empty /tmp etc.
make_busybox_rootfs() {
  local r=$1 applet
  mkdir -p "$r/bin" "$r/tmp" "$r/var/tmp" "$r/proc" "$r/sys" "$r/dev" "$r/etc" "$r/workspace" "$r/root"
  chmod 1777 "$r/tmp" "$r/var/tmp" # world-writable, as in Debian's and Ubuntu's images
  cp "$BUSYBOX" "$r/bin/busybox"
  for applet in $("$BUSYBOX" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$r/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$r/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
}

# Adds the host's python3, its standard library and every shared library they load.
add_python() {
  local r=$1 real lib
  real=$(readlink -f "$PYTHON")
  local ver
  ver=$(basename "$real")            # python3.11
  mkdir -p "$r/usr/bin" "$r/usr/lib"
  cp "$real" "$r/usr/bin/$ver"
  ln -sf "$ver" "$r/usr/bin/python3"
  ln -sf "$ver" "$r/usr/bin/python"
  cp -a "/usr/lib/$ver" "$r/usr/lib/"
  for lib in $(ldd "$real" /usr/lib/"$ver"/lib-dynload/*.so 2>/dev/null |
               awk '/=>/ && $3 ~ /^\// {print $3} /^\t\// {print $1}' | sort -u); do
    mkdir -p "$r$(dirname "$lib")"
    cp -L "$lib" "$r$lib"
  done
}

import_image() { # rootfs name
  tar -C "$1" -c . | DOCKER_HOST="unix://$dir/docker.sock" "$DOCKER" import - "$2" >/dev/null
}

write_state() {
  local tmp="$state.tmp.$$"
  {
    echo "SBX_DOCKERD_DIR=$dir"
    echo "SBX_DOCKER_SOCKET=$dir/docker.sock"
    echo "DOCKER_HOST=unix://$dir/docker.sock"
    echo "SBX_DOCKER_IMAGE_BUSYBOX=$img_busybox"
    echo "SBX_DOCKER_IMAGE_PYTHON=$img_python"
    echo "SBX_DOCKER_DRIVER=$(cat "$dir/driver")"
  } >"$tmp"
  mv "$tmp" "$state"
}

load_state() {
  [ -f "$state" ] || die "no state file $state (was the daemon started with 'start $state'?)"
  dir=$(sed -n 's/^SBX_DOCKERD_DIR=//p' "$state")
  case "$dir" in
    /tmp/sbx-dockerd.*) ;;
    *) die "state file $state names '$dir', not a dir this script made; refusing to touch it" ;;
  esac
}

# Stops the daemon in $dir and everything it started, leaving the dirs in place. With
# `keep-containers` (a restart), containers are left for dockerd to stop as it does on any
# shutdown, so they exist (exited) when it comes back, as after a real daemon restart.
stop_daemon() {
  local pid="" i
  [ -f "$dir/dockerd.realpid" ] && pid=$(cat "$dir/dockerd.realpid")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "${1:-}" != keep-containers ]; then
    # Remove our containers first, so dockerd has nothing to wait for on shutdown.
    local ids
    ids=$(DOCKER_HOST="unix://$dir/docker.sock" timeout 20 "$DOCKER" ps -aq 2>/dev/null || true)
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086
      DOCKER_HOST="unix://$dir/docker.sock" timeout 30 "$DOCKER" rm -f $ids >/dev/null 2>&1 || true
    fi
    # Networks a test made (each a bridge interface in the host's namespace) go with them.
    DOCKER_HOST="unix://$dir/docker.sock" timeout 20 "$DOCKER" network prune -f >/dev/null 2>&1 || true
  fi
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < STOP_TIMEOUT_S * 5; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # Containers of a daemon that died without cleaning up: runc's state for dockerd's moby
  # namespace lives under our exec root, so only our containers are listed.
  local runc_root="$dir/exec/runtime-runc/moby" c
  if [ -d "$runc_root" ] && command -v runc >/dev/null; then
    for c in $(runc --root "$runc_root" list -q 2>/dev/null || true); do
      runc --root "$runc_root" kill -a "$c" KILL 2>/dev/null || true
      runc --root "$runc_root" delete -f "$c" 2>/dev/null || true
    done
  fi
  # Stragglers our daemon started (containerd, shims, container processes of a killed
  # daemon): found by the unique dir in their command line, ended by pid.
  local p
  for p in $(pgrep -f -- "$dir/" || true); do
    [ "$p" = "$$" ] || kill -KILL "$p" 2>/dev/null || true
  done
  # Mounts left under the dir (overlay layers, shm, netns): deepest first, lazily.
  local m
  for m in $(awk -v d="$dir/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -f "$dir/dockerd.realpid"
}

# The start time of process $1 (field 22 of its stat, after the command name, which may hold
# spaces), or nothing when it is gone.
start_time() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  st=${st##*) }
  echo "$st" | cut -d' ' -f20
}

# Starts the watchdog of owner $SBX_DOCKERD_OWNER (see the top), detached from our streams.
watch_owner() {
  local owner=$SBX_DOCKERD_OWNER since
  [ "$owner" != parent ] || owner=$PPID
  since=$(start_time "$owner")
  if [ -z "$since" ]; then # gone already: nobody to serve, and nobody would stop it
    stop_daemon
    rm -rf "$dir"
    rm -f "$state"
    die "SBX_DOCKERD_OWNER=$owner is not a running process; the daemon was stopped"
  fi
  SBX_DOCKERD_OWNER=$owner SBX_DOCKERD_OWNER_START=$since setsid "$0" watch "$state" \
    </dev/null >>"$dir/watchdog.log" 2>&1 &
  echo $! >"$dir/watchdog.pid"
}

# Ends the watchdog, unless this is it.
stop_watchdog() {
  local w=""
  [ -f "$dir/watchdog.pid" ] && w=$(cat "$dir/watchdog.pid")
  if [ -n "$w" ] && [ "$w" != "$$" ]; then
    kill -KILL "$w" 2>/dev/null || true
  fi
  rm -f "$dir/watchdog.pid"
}

case "$cmd" in
  watch)
    load_state
    while [ "$(start_time "$SBX_DOCKERD_OWNER")" = "$SBX_DOCKERD_OWNER_START" ]; do
      sleep "$WATCH_INTERVAL_S"
    done
    echo "dockerd-test: owner $SBX_DOCKERD_OWNER is gone; stopping the daemon"
    stop_daemon
    rm -rf "$dir"
    rm -f "$state"
    ;;
  start)
    [ -x "$DOCKERD" ] || die "$DOCKERD missing: install Debian's docker.io (scripts/install-deps.sh)"
    [ -x "$DOCKER" ] || die "$DOCKER missing: install Debian's docker.io (scripts/install-deps.sh)"
    [ -x "$BUSYBOX" ] || die "$BUSYBOX missing: install busybox-static (scripts/install-deps.sh)"
    [ "$(id -u)" -eq 0 ] || die "dockerd needs root here (rootless dockerd is not set up by this script)"
    dir=$(mktemp -d /tmp/sbx-dockerd.XXXXXX)
    # overlay2 is fast; vfs works on any filesystem (copies every layer) when overlay cannot
    # mount here (e.g. /tmp on overlayfs itself).
    if ! launch overlay2; then
      echo "dockerd-test: overlay2 failed, falling back to vfs:" >&2
      tail -5 "$dir/dockerd.log" >&2
      stop_daemon
      rm -rf "$dir/data" "$dir/exec"
      launch vfs || { tail -20 "$dir/dockerd.log" >&2; stop_daemon; rm -rf "$dir";
                      die "dockerd did not start (log above)"; }
    fi
    # Image names carry the dir's unique suffix only in the tag, so they never collide with
    # anything on a shared daemon and are recognisably ours.
    img_busybox=sbx-test-busybox:latest
    img_python=""
    make_busybox_rootfs "$dir/rootfs-busybox"
    import_image "$dir/rootfs-busybox" "$img_busybox"
    if [ "${SBX_DOCKERD_IMAGES:-all}" != busybox ]; then
      img_python=sbx-test-python:latest
      cp -a "$dir/rootfs-busybox" "$dir/rootfs-python"
      add_python "$dir/rootfs-python"
      import_image "$dir/rootfs-python" "$img_python"
      rm -rf "$dir/rootfs-python"
    fi
    rm -rf "$dir/rootfs-busybox"
    write_state
    [ -z "${SBX_DOCKERD_OWNER:-}" ] || watch_owner
    echo "dockerd-test: daemon up on $dir/docker.sock ($(cat "$dir/driver"))"
    ;;
  stop)
    if [ ! -f "$state" ]; then
      echo "dockerd-test: no state file $state; nothing to stop"
      exit 0
    fi
    load_state
    stop_watchdog
    stop_daemon
    rm -rf "$dir"
    rm -f "$state"
    echo "dockerd-test: stopped and removed $dir"
    ;;
  restart)
    load_state
    stop_daemon keep-containers
    launch "$(sed -n 's/^SBX_DOCKER_DRIVER=//p' "$state")" ||
      { tail -20 "$dir/dockerd.log" >&2; die "dockerd did not restart (log above)"; }
    ;;
  env)
    [ -f "$state" ] || die "no state file $state"
    sed 's/^/export /' "$state"
    ;;
  *) usage ;;
esac
