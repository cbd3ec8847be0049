#!/bin/sh
# check_cli.sh MODE SBX DIR - drives the built `sbx` binary for the config tests (ctest).
#   bad-exact: every DIR/*.yaml is refused with exit 3 and "FILE:LINE:COL:" on stderr at the
#              location its first line names (`# expect: LINE:COL ...`); SBX carries the test
#              providers, so the intended mistake is the one reported.
#   bad:       every DIR/*.yaml is refused with exit 3 and some "FILE:LINE:COL:" on stderr
#              (the plain `sbx`, whatever providers it has built in).
#   good:      every DIR/*.yaml is accepted (exit 0), in text and in --json (valid JSON).
#   good-builtin: the same with the plain `sbx`, for every file whose provider types are all
#              built into it (the others are listed as skipped; the set grows as providers land).
#   usage:     --help, version, unknown commands and options, missing files: exit codes.
# Prints every failure and exits 1 if there was one.
set -u
mode=$1 sbx=$2 dir=$3
fails=0
out=$(mktemp -d "${TMPDIR:-/tmp}/sbx-config-cli.XXXXXX")
trap 'rm -rf "$out"' EXIT INT TERM
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_rc WANT CMD... : runs CMD (stdout/stderr to $out/o, $out/e) and checks its exit code.
expect_rc() {
  want=$1; shift
  "$@" >"$out/o" 2>"$out/e"; rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "$* -> exit $rc, expected $want"; sed 's/^/    /' "$out/e" | head -5; return 1
  fi
  return 0
}

count=0
case $mode in
bad-exact|bad)
  for f in "$dir"/*.yaml; do
    count=$((count + 1))
    expect_rc 3 env -u SBX_CONFIG "$sbx" config check "$f" || continue
    if [ "$mode" = bad-exact ]; then
      where=$(head -1 "$f" | sed -n 's/^# expect: \([0-9]*:[0-9]*\) .*/\1/p')
      grep -qF "$f:$where: " "$out/e" || { fail "$f: stderr lacks $f:$where:"; sed 's/^/    /' "$out/e"; }
      expect_rc 3 env -u SBX_CONFIG "$sbx" --json config check "$f" || continue
      cp "$out/o" "$out/json.$count"          # checked below, all in one python run
      printf '%s\n' "$f:$where: " >"$out/want.$count"
    else
      grep -qE "^sbx: config error: .*\.yaml:[0-9]+:[0-9]+: " "$out/e" ||
        { fail "$f: stderr names no file:line:column"; sed 's/^/    /' "$out/e"; }
    fi
  done
  [ "$count" -ge 30 ] || fail "only $count bad files in $dir (at least 30 expected)"
  if [ "$mode" = bad-exact ]; then
    /usr/bin/python3 - "$out" "$count" <<'PY' || fail "--json errors (see above)"
import json, sys, os
out, n, bad = sys.argv[1], int(sys.argv[2]), 0
for i in range(1, n + 1):
    if not os.path.exists(f"{out}/json.{i}"):
        continue
    want = open(f"{out}/want.{i}").read().rstrip("\n")
    try:
        e = json.load(open(f"{out}/json.{i}"))["error"]
        ok = e["code"] == "CONFIG" and want in e["message"]
    except Exception as x:
        ok = False
    if not ok:
        print(f"FAIL: --json error for {want} is not {{error: {{code: CONFIG, message: ...}}}}")
        bad += 1
sys.exit(1 if bad else 0)
PY
  fi
  ;;
good|good-builtin)
  builtin=$("$sbx" --json version | /usr/bin/python3 -c 'import json,sys; print(" ".join(json.load(sys.stdin)["providers"]))')
  for f in "$dir"/*.yaml; do
    if [ "$mode" = good-builtin ]; then
      missing=
      for t in $(sed -n 's/^ *type: *\([a-z0-9_]*\).*/\1/p' "$f"); do
        case " $builtin " in *" $t "*) ;; *) missing="$missing $t" ;; esac
      done
      if [ -n "$missing" ]; then echo "skipped $f (not built in:$missing)"; continue; fi
    fi
    count=$((count + 1))
    expect_rc 0 "$sbx" config check "$f" || continue
    grep -q "^profiles (default: " "$out/o" && grep -q "^    policy: network " "$out/o" ||
      fail "$f: the text output lacks the profiles and their policy"
    expect_rc 0 "$sbx" --json config check "$f" || continue
    /usr/bin/python3 -c '
import json, sys
c = json.load(sys.stdin)
assert c["profiles"], "no profiles"
assert any(p["name"] == c["default_profile"] for p in c["profiles"]), "default profile missing"
for p in c["profiles"]:
    for k in ("provider", "scope", "environment", "identity", "policy", "options"):
        assert k in p, k
    assert p["policy"]["network_egress"] in ("deny", "allow", "allowlist")
' <"$out/o" || fail "$f: --json output lacks the resolved profiles"
  done
  [ "$count" -ge 1 ] || fail "no examples in $dir"
  ;;
usage)
  expect_rc 0 "$sbx" --help && { grep -q "^Exit codes:" "$out/o" || fail "--help lacks the exit codes"; }
  expect_rc 0 "$sbx" version && { grep -q "^sbx [0-9]" "$out/o" || fail "version prints no version"; }
  expect_rc 0 "$sbx" config --help && { grep -q "sbx config check" "$out/o" || fail "config --help"; }
  expect_rc 0 "$sbx" config check --help
  expect_rc 2 "$sbx"
  expect_rc 2 "$sbx" frobnicate
  expect_rc 2 "$sbx" config
  expect_rc 2 "$sbx" config check a.yaml b.yaml
  expect_rc 2 "$sbx" config check --frob
  expect_rc 2 "$sbx" --config
  expect_rc 3 "$sbx" config check "$out/does-not-exist.yaml" &&
    { grep -q "does not exist" "$out/e" || fail "missing file: message"; }
  expect_rc 3 env SBX_CONFIG="$out/nope.yaml" "$sbx" config check
  expect_rc 3 "$sbx" --config "$out/nope.yaml" config check
  expect_rc 0 env -u SBX_CONFIG "$sbx" config check &&
    { grep -q "built-in default" "$out/o" || fail "no-file check does not say built-in default"; }
  expect_rc 0 env -u SBX_CONFIG "$sbx" config check --json &&
    { /usr/bin/python3 -m json.tool <"$out/o" >/dev/null || fail "--json after the command"; }
  # A worker whose callers act for several principals: the check says when nothing bounds the
  # sandboxes one of them holds, and prints the bound when one is set.
  printf 'sandbox:\n  worker:\n    auth:\n      callers:\n        - {name: a, token_env: SBX_T_A, subjects: [tenant-a]}\n        - {name: b, token_env: SBX_T_B, subjects: [tenant-b]}\n' >"$out/tenants.yaml"
  expect_rc 0 env SBX_T_A=x SBX_T_B=y "$sbx" config check "$out/tenants.yaml" &&
    { grep -q "^  note: .*set principal_sandboxes" "$out/o" || fail "no note on an unbounded shared worker"; }
  printf '  principal_sandboxes: 8\n' >>"$out/tenants.yaml"
  expect_rc 0 env SBX_T_A=x SBX_T_B=y "$sbx" config check "$out/tenants.yaml" &&
    { grep -q "^sandboxes: at most 8 " "$out/o" && ! grep -q "note: .*principal_sandboxes" "$out/o" ||
        fail "a bounded shared worker: the bound is not printed, or the note still is"; }
  ;;
*) echo "usage: check_cli.sh bad-exact|bad|good|good-builtin|usage SBX DIR"; exit 2 ;;
esac
[ "$fails" -eq 0 ] && echo "ok: $mode ($count files)"
[ "$fails" -eq 0 ]
