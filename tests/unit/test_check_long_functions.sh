#!/bin/sh
# scripts/check-long-functions.py on a fixture tree: a 101-line function without a reason fails
# naming it; the same with "Long because" above it passes; 100 lines pass without one.
set -eu
script=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/core"
body() { i=0; while [ "$i" -lt "$1" ]; do echo "    x++;"; i=$((i + 1)); done; }
{ echo "static int x;"; echo "void short_one(void)"; echo "{"; body 100; echo "}"; } >"$dir/core/a.c"
{ echo "void long_one(void)"; echo "{"; body 101; echo "}"; } >"$dir/core/b.c"
if python3 "$script" --root "$dir" 2>"$dir/err"; then
  echo "FAIL: a 101-line function without a reason passed" >&2; exit 1
fi
grep -q "core/b.c:1: long_one has 101 lines" "$dir/err" || { cat "$dir/err" >&2; exit 1; }
grep -q short_one "$dir/err" && { echo "FAIL: a 100-line function was reported" >&2; exit 1; }
{ echo "/* Long because it is a test. */"; echo "void long_one(void)"; echo "{"; body 101; echo "}"; } >"$dir/core/b.c"
python3 "$script" --root "$dir"
echo "ok"
