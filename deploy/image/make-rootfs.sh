#!/usr/bin/env bash
# make-rootfs.sh PREFIX CONTEXT - the build context of the sbx-worker image: CONTEXT/Dockerfile
# and CONTEXT/rootfs.tar, a root filesystem assembled here from PREFIX (a `cmake --install`
# prefix) and this machine's files, so that the image is built FROM scratch and nothing is
# pulled. The root filesystem holds:
#   /usr/bin/sbx-worker, /usr/bin/sbx, /usr/libexec/sbx/sbx-agent   from PREFIX
#   /usr/libexec/sbx/sbx-health-probe, health-check-request,         the probe, its request
#   /usr/bin/nghttp                                                   and its client
#   /bin/busybox and its applets (/bin/sh ...)                        for the probe and the
#                                                                     init container's copy
#   every shared library those programs load and the dynamic loader  found with ldd
#   /etc/ssl/certs/ca-certificates.crt                                for the cloud providers
#   /etc/passwd, /etc/group (root, sbx = 10001, nobody), nsswitch.conf
#   /var/lib/sbx, /run/sbx (owned by sbx, 0700), /tmp (1777), /etc/sbx/{config,tls}
# Every file is owned by root in the archive except sbx's two state directories, so it needs no
# root to make. It only reads PREFIX and the host's files and writes CONTEXT.
#
# Needs: ldd, GNU tar, busybox-static, nghttp2-client (scripts/install-deps.sh has them all).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
prefix=$1 context=$2
BUSYBOX=/bin/busybox
NGHTTP=/usr/bin/nghttp
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
SBX_UID=10001
die() { echo "make-rootfs: $*" >&2; exit 1; }

for f in bin/sbx-worker bin/sbx libexec/sbx/sbx-agent; do
  [ -x "$prefix/$f" ] || die "$prefix/$f is missing: run 'cmake --install BUILD --prefix $prefix' first"
done
[ -x "$BUSYBOX" ] || die "$BUSYBOX is missing: install busybox-static"
[ -x "$NGHTTP" ] || die "$NGHTTP is missing: install nghttp2-client (the health probe's client)"

root=$(mktemp -d "${TMPDIR:-/tmp}/sbx-rootfs-XXXXXX")
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT
mkdir -p "$context"
install -d "$root/usr/bin" "$root/usr/libexec/sbx" "$root/bin" "$root/etc/sbx/config" \
  "$root/etc/sbx/tls" "$root/etc/ssl/certs" "$root/var/lib" "$root/run" "$root/proc" \
  "$root/sys" "$root/dev"
install -d -m 1777 "$root/tmp"
install -d -m 0700 "$root/var/lib/sbx" "$root/run/sbx"
install -m 0755 "$prefix/bin/sbx-worker" "$prefix/bin/sbx" "$NGHTTP" "$root/usr/bin/"
install -m 0755 "$prefix/libexec/sbx/sbx-agent" "$here/sbx-health-probe" "$root/usr/libexec/sbx/"
# the probe's request: a gRPC frame of an empty HealthCheckRequest (5 zero bytes)
printf '\000\000\000\000\000' >"$root/usr/libexec/sbx/health-check-request"
install -m 0755 "$BUSYBOX" "$root/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
done

# The shared libraries of every dynamic program, at the paths ldd resolves them to (the
# loader's own path included), so the loader finds them as it does here.
libs=$(for prog in "$root/usr/bin/"*; do
         ldd "$prog" 2>/dev/null || true
       done | awk '/=> \// {print $3} /^[ \t]*\/[^ ]+ \(0x/ {print $1}' | sort -u)
[ -n "$libs" ] || die "ldd found no shared libraries for sbx-worker (is ldd installed?)"
for lib in $libs; do
  install -d "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
for prog in "$root/usr/bin/"*; do
  if ldd "$prog" 2>/dev/null | grep -q 'not found'; then
    die "$(basename "$prog") needs libraries ldd cannot find: $(ldd "$prog" | grep 'not found')"
  fi
done

if [ -f "$CA_BUNDLE" ]; then
  cp -L "$CA_BUNDLE" "$root$CA_BUNDLE"
else
  echo "make-rootfs: no $CA_BUNDLE here (ca-certificates): the image has no CA bundle" >&2
fi
printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
  "sbx:x:$SBX_UID:$SBX_UID:sbx worker:/var/lib/sbx:/bin/false" \
  'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' "sbx:x:$SBX_UID:" 'nogroup:x:65534:' >"$root/etc/group"
printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$root/etc/nsswitch.conf"

# root owns everything but sbx's state directories; fixed times and order, so the same inputs
# make the same archive.
tar_common=(--numeric-owner --sort=name --mtime=@"${SOURCE_DATE_EPOCH:-0}" -C "$root")
tar -cf "$context/rootfs.tar" "${tar_common[@]}" --owner=0 --group=0 \
  --exclude=./var/lib/sbx --exclude=./run/sbx .
tar -rf "$context/rootfs.tar" "${tar_common[@]}" --owner="$SBX_UID" --group="$SBX_UID" \
  ./var/lib/sbx ./run/sbx
cp "$here/Dockerfile" "$context/Dockerfile"
echo "make-rootfs: $context/rootfs.tar ($(du -h "$context/rootfs.tar" | cut -f1)) and Dockerfile"
