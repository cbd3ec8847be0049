#!/usr/bin/env python3
"""check_symbols.py - what libsbx.a exports to an embedding program (cmake/SbxLayers.cmake).

Usage: check_symbols.py LIBSBX_A INCLUDE_DIR

Every global symbol libsbx.a defines must carry the sbx_ prefix, and be either declared in a
public header (INCLUDE_DIR/sbx/*.h) or part of the generated contract (sbx__v1__*). Anything
else -- an unprefixed helper, an internal sbx_ function of a folder-private header -- is
listed and the check fails: make it static, or leave it out of include/sbx/ (it is then
hidden, and local in libsbx.a). It must not build anything.
"""
import glob
import os
import re
import subprocess
import sys

GENERATED = "sbx__v1__"


def public_names(include_dir):
    names = set()
    for path in glob.glob(os.path.join(include_dir, "sbx", "*.h")):
        with open(path, encoding="utf-8") as f:
            names |= set(re.findall(r"\bsbx_[A-Za-z0-9_]*", f.read()))
    return names


def exported(archive):
    out = subprocess.run(["nm", "-P", "-g", "--defined-only", archive], check=True,
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and not line.endswith(":"):
            syms[fields[0]] = fields[1]
    return syms


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    archive, include_dir = argv
    public = public_names(include_dir)
    # ASan's one-definition-rule indicators (__odr_asan.<global>) shadow instrumented globals:
    # they are the sanitizer's, not ours, and stand or fall with the global they name.
    syms = {s: t for s, t in exported(archive).items() if not s.startswith("__odr_asan.")}
    unprefixed = sorted(s for s in syms if not s.startswith("sbx_"))
    internal = sorted(s for s in syms
                      if s.startswith("sbx_") and not s.startswith(GENERATED) and s not in public)
    api = len([s for s in syms if s in public])
    print(f"{archive}: {len(syms)} global symbols: {api} public API, "
          f"{len([s for s in syms if s.startswith(GENERATED)])} generated contract")
    if unprefixed:
        print(f"\n{len(unprefixed)} global symbols without the sbx_ prefix:", file=sys.stderr)
        for s in unprefixed:
            print(f"  {s} ({syms[s]})", file=sys.stderr)
    if internal:
        print(f"\n{len(internal)} sbx_ symbols exported but declared in no public header:",
              file=sys.stderr)
        for s in internal:
            print(f"  {s} ({syms[s]})", file=sys.stderr)
    if unprefixed or internal:
        print("\nmake them static, or keep their declarations out of include/sbx/ (hidden)",
              file=sys.stderr)
        return 1
    print("only the public API is exported")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
