#!/usr/bin/env python3
"""check_layers.py - proves the direction of the layers of libsbx (top-level CMakeLists.txt).

Each argument is NAME=ARCHIVE=BELOW1,BELOW2 (cmake/SbxLayers.cmake writes them, bottom layer
first). For every symbol an archive leaves undefined, the layer that defines it must be the
archive itself or one below it (transitively); a symbol taken from a layer above or beside is
named with the object that uses it, and the check fails. Symbols no layer defines (libc,
libcurl, the generated contract) are not this check's business. It must not build anything.
"""
import subprocess
import sys


def symbols(archive):
    """(defined: {symbol: object}, undefined: [(object, symbol)]) of one archive."""
    out = subprocess.run(["nm", "-P", "-A", "-g", archive], check=True, capture_output=True,
                         text=True).stdout
    defined, undefined = {}, []
    for line in out.splitlines():
        # POSIX format: "archive.a[member.o]: name type [value size]"
        head, sep, rest = line.partition("]: ")
        if not sep:
            continue
        member = head[head.rfind("[") + 1:]
        fields = rest.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind == "U":
            undefined.append((member, name))
        elif kind not in ("w", "v"):
            defined[name] = member
    return defined, undefined


def main(argv):
    layers, below = [], {}
    archives = {}
    for spec in argv:
        name, archive, deps = spec.split("=", 2)
        layers.append(name)
        archives[name] = archive
        below[name] = [d for d in deps.split(",") if d]
    reach = {}

    def reachable(name):
        if name not in reach:
            seen = set()
            for d in below.get(name, []):
                seen.add(d)
                seen |= reachable(d)
            reach[name] = seen
        return reach[name]

    table = {name: symbols(archives[name]) for name in layers}
    owner = {}
    for name in layers:
        for sym in table[name][0]:
            owner.setdefault(sym, name)
    bad = []
    for name in layers:
        allowed = reachable(name) | {name}
        for member, sym in table[name][1]:
            where = owner.get(sym)
            if where is not None and where not in allowed:
                bad.append(f"{name} ({member}) calls {sym}, defined in {where} "
                           f"({table[where][0][sym]}), which is not below {name}")
    for name in layers:
        print(f"{name}: {len(table[name][0])} symbols defined, "
              f"below it: {', '.join(sorted(reachable(name) & set(layers))) or '(none)'}")
    if bad:
        print("\nupward (or sideways) calls between layers -- move the code to the layer that "
              "owns it, or the caller up:", file=sys.stderr)
        for b in sorted(set(bad)):
            print("  " + b, file=sys.stderr)
        return 1
    print("every layer calls only the layers below it")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
