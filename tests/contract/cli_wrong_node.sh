#!/bin/sh
# cli_wrong_node.sh SBX - a session kept by the CLI on node A, used from node B: exit 7 naming
# node A (cp and exec), and exec --recreate-elsewhere starts it
# over on B. Two configs share one secret, as two workers of a fleet do.
set -u
sbx=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_STATE_HOME="$tmp/state"
for n in a b; do
    printf 'sandbox:\n  node: node-%s\n  secret_file: %s/secret\n  profiles:\n    default:\n      type: fake\n      policy: { network_egress: deny }\n' \
        "$n" "$tmp" >"$tmp/$n.yaml"
done
fail() { echo "FAIL: $*" >&2; exit 1; }
"$sbx" --config "$tmp/a.yaml" session new --name s1 >/dev/null || fail "session new"
"$sbx" --config "$tmp/a.yaml" exec --session s1 -- true || fail "first exec on node-a"
echo hi >"$tmp/f"
"$sbx" --config "$tmp/b.yaml" cp "$tmp/f" s1:/f 2>"$tmp/err"
rc=$?
[ "$rc" -eq 7 ] || fail "cp from node-b exited $rc, want 7: $(cat "$tmp/err")"
grep -q "lives on node 'node-a'" "$tmp/err" || fail "message does not name node-a: $(cat "$tmp/err")"
"$sbx" --config "$tmp/b.yaml" exec --session s1 -- true 2>"$tmp/err"
rc=$?
[ "$rc" -eq 7 ] || fail "exec from node-b exited $rc, want 7"
"$sbx" --config "$tmp/b.yaml" exec --recreate-elsewhere --session s1 -- true 2>"$tmp/err" ||
    fail "exec --recreate-elsewhere: $(cat "$tmp/err")"
grep -q "started over here on node 'node-b'" "$tmp/err" || fail "no notice: $(cat "$tmp/err")"
# The session is node-b's now.
"$sbx" --config "$tmp/b.yaml" cp "$tmp/f" s1:/f || fail "cp on node-b after the move"
echo ok
