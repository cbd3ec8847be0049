#!/usr/bin/python3
"""flip_and_run.py - proves the golden test can fail: copies the vectors, flips one byte of one
vector, runs the golden test binary on the copy and succeeds only if that run FAILS (exits
non-zero by itself; a crash or a signal is not the failure we want and counts as an error).

    flip_and_run.py VECTOR_DIR WORK_DIR VECTOR OFFSET -- TEST_BINARY [ARGS...]

OFFSET may be negative (from the end). The copy goes to WORK_DIR (replaced each run); the
committed vectors are never touched. The binary is run as TEST_BINARY ARGS... WORK_DIR.
"""
import os
import shutil
import subprocess
import sys


def main(argv):
    if len(argv) < 7 or argv[5] != "--":
        sys.stderr.write(__doc__)
        return 2
    src, work, vector, offset, cmd = argv[1], argv[2], argv[3], int(argv[4]), argv[6:]
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    path = os.path.join(work, vector + ".bin")
    with open(path, "r+b") as fh:
        data = bytearray(fh.read())
        if not data:
            sys.stderr.write("flip_and_run: %s is empty, nothing to flip\n" % path)
            return 2
        i = offset % len(data)
        data[i] ^= 0xFF
        fh.seek(0)
        fh.write(data)
    print("flip_and_run: flipped byte %d of %s; the golden test must now fail" % (i, vector))
    # A failing cmocka test leaves by longjmp and leaks what it held; under ASan that leak
    # report would abort the run and hide the failure we want. Every other sanitizer error
    # still aborts and counts as a crash below.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
    rc = subprocess.run(cmd + [work], env=env).returncode
    if rc > 0:
        print("flip_and_run: the golden test failed (exit %d), as it must" % rc)
        return 0
    if rc == 0:
        print("flip_and_run: the golden test PASSED on a corrupted vector")
    else:
        print("flip_and_run: the golden test crashed (signal %d)" % -rc)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
