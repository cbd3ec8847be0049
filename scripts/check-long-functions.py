#!/usr/bin/env python3
"""check-long-functions.py - no function over 100 lines without a reason stated at its top.

CONVENTIONS asks for functions of about a screen; a longer one must say why in the comment
right above its definition, with the words "Long because" (for example: "Long because it is
one switch over the contract's operations; each case is a few lines"). Run by scripts/test.sh
beside the format and lint steps, so a new long function without a reason fails CI.

Scans the tracked .c files of the source folders (not tests, bench, fuzz targets or generated
code). The file layout is clang-format's (.clang-format): a function's body opens with '{' at
column 0 on the line after its signature and closes with '}' at column 0, which is what this
counts (body lines between the braces).

  scripts/check-long-functions.py [--list] [--root DIR]
      --list   prints every long function, reason or not
      --root   the tree to check (default: this script's checkout; the test uses a fixture)
"""
import os
import re
import subprocess
import sys

LIMIT = 100
FOLDERS = ("agent", "broker", "cli", "client", "core", "providers", "worker")
REASON = re.compile(r"\bLong because\b")


def sources(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--", *FOLDERS],
                             check=True, capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [os.path.relpath(os.path.join(d, f), root)
               for top in FOLDERS for d, _, fs in os.walk(os.path.join(root, top)) for f in fs]
    return sorted(p for p in out if p.endswith(".c") and "/fuzz" not in p)


def long_functions(path):
    """Yields (name, first signature line, body lines, has reason) for bodies over LIMIT."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    i = 1
    while i < len(lines):
        if lines[i] != "{":
            i += 1
            continue
        # the signature: back from the brace to the line holding the name's '('
        sig = i - 1
        while sig > 0 and "(" not in lines[sig]:
            sig -= 1
        m = re.search(r"(\w+)\s*\(", lines[sig])
        name = m.group(1) if m else "?"
        # a declaration's return type may sit on the line above the name (K&R-like splits)
        top = sig
        if top > 0 and lines[top - 1] and not lines[top - 1].startswith(("/", " ", "*", "#", "}")) \
                and not lines[top - 1].rstrip().endswith((";", "*/")):
            top -= 1
        end = i + 1
        while end < len(lines) and lines[end] != "}":
            end += 1
        body = end - i - 1
        if body > LIMIT:
            # the comment block directly above the signature
            j, comment = top - 1, []
            while j >= 0 and (lines[j].startswith(("/*", " *", "//")) or lines[j].endswith("*/")):
                comment.append(lines[j])
                j -= 1
            yield name, sig + 1, body, bool(REASON.search("\n".join(comment)))
        i = end + 1


def main():
    args = sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--root" in args:
        i = args.index("--root")
        if i + 1 >= len(args):
            print("check-long-functions: --root needs a directory", file=sys.stderr)
            return 2
        root = args[i + 1]
    listing = "--list" in args
    missing, total = [], 0
    for rel in sources(root):
        for name, line, body, ok in long_functions(os.path.join(root, rel)):
            total += 1
            if listing:
                print(f"{rel}:{line}: {name}: {body} lines{'' if ok else ' (no reason)'}")
            if not ok:
                missing.append((rel, line, name, body))
    for rel, line, name, body in missing:
        print(f"{rel}:{line}: {name} has {body} lines (limit {LIMIT}): split it, or state why it "
              f"is one piece in a comment right above it containing 'Long because'",
              file=sys.stderr)
    if missing:
        print(f"check-long-functions: {len(missing)} function(s) over {LIMIT} lines without a "
              f"reason", file=sys.stderr)
        return 1
    print(f"check-long-functions: {total} function(s) over {LIMIT} lines, each with its reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
