#!/usr/bin/env bash
# install_embed.sh BUILD_DIR SOURCE_DIR [EXTRA_CFLAGS...] - `cmake --install` into a temporary
# prefix, then checks what an operator and an embedding program get there: the programs, the
# agent where the providers look for it, the headers with the generated contract header, one
# libsbx.a, sbx.pc; builds examples/embed/embed.c with `pkg-config --cflags --libs sbx` alone
# and runs it on the fake provider; and verifies the installed systemd unit (systemd-analyze
# verify, where available), which names the installed sbx-worker and the installed
# deploy/README.md as its Documentation=.
set -euo pipefail
build=$1 src=$2
shift 2
extra=("$@")
tmp=$(mktemp -d /tmp/sbx-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "install_embed: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/sbx bin/sbx-worker libexec/sbx/sbx-agent lib/libsbx.a lib/pkgconfig/sbx.pc \
         include/sbx/engine.h include/sbx/broker.h include/sbx/worker.h \
         include/sbx/v1/execution.pb-c.h lib/systemd/system/sbx-worker.service; do
  [ -e "$prefix/$f" ] || fail "cmake --install did not install $f"
done
[ -x "$prefix/bin/sbx-worker" ] || fail "bin/sbx-worker is not executable"
"$prefix/bin/sbx" --help >/dev/null || fail "the installed sbx does not run"
"$prefix/bin/sbx-worker" --help >/dev/null || fail "the installed sbx-worker does not run"

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs sbx) || fail "pkg-config --cflags --libs sbx failed"
case "$flags" in *"$build"*|*"$src"*) fail "sbx.pc points into the build or source tree: $flags";; esac
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror "${extra[@]}" -o "$tmp/embed" "$src/examples/embed/embed.c" $flags \
  || fail "examples/embed did not build with: cc embed.c $flags"

cat > "$tmp/fake.yaml" <<YAML
sandbox:
  default_profile: fake
  secret_file: $tmp/secret
  runtime_dir: $tmp/run
  profiles:
    fake: { type: fake, scope: per_call }
YAML
out=$("$tmp/embed" "$tmp/fake.yaml" "echo embedded hello") || fail "embed exited $?"
[ "$out" = "embedded hello" ] || fail "embed printed '$out'"
set +e
"$tmp/embed" "$tmp/fake.yaml" "exit 7" >/dev/null 2>&1
rc=$?
set -e
[ $rc -eq 7 ] || fail "embed passed on exit status $rc, not 7"

unit=$prefix/lib/systemd/system/sbx-worker.service
grep -q "^ExecStart=$prefix/bin/sbx-worker " "$unit" || fail "the unit does not start the installed sbx-worker: $(grep ExecStart "$unit")"
doc=$(sed -n 's|^Documentation=file://||p' "$unit")
[ -n "$doc" ] && [ -f "$doc" ] || fail "the unit's Documentation= names '$doc', which the install did not put there"
if command -v systemd-analyze >/dev/null; then
  # verify resolves ExecStart and the unit's directives without a running systemd
  log=$(systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $log"
  if grep -Ei "unknown|invalid|not executable|failed" <<<"$log"; then fail "systemd-analyze verify: $log"; fi
else
  echo "install_embed: systemd-analyze not installed; unit not verified"
fi
echo "install_embed: 1 passed, 0 failed"
