#!/usr/bin/python3
"""test_cli_startup.py - how the built `sbx` starts (cli/lazy/lazy.h): the dynamic loader maps
only libc and libm before main, the heavy libraries (libcurl, libnats, libssl, libcrypto,
libnghttp2) are loaded when a command first calls them, and a command whose library cannot be
loaded says which one and which package ships it. Timing is bench/local's, not this file's.
"""
import os
import shutil
import subprocess
import unittest

import cli_util

# What `sbx` may name as NEEDED. Another library here costs every command (`sbx version`
# included) its mapping and relocation: load it on demand (cli/lazy/) or link its static
# archive (cli/CMakeLists.txt) instead of widening this set.
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6"}
# What an ASan+UBSan build (SBX_SANITIZE) adds: the sanitizer runtimes and what they need.
SANITIZER_PREFIXES = ("libasan.so", "libubsan.so", "libstdc++.so", "libgcc_s.so")


def needed(path):
    out = subprocess.run(["readelf", "-d", path], check=True, capture_output=True,
                         text=True).stdout
    return {line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines()
            if "(NEEDED)" in line}


class Startup(unittest.TestCase):
    def setUp(self):
        self.e = cli_util.Env()

    def tearDown(self):
        self.e.close()

    def test_only_libc_is_needed(self):
        extra = {lib for lib in needed(cli_util.SBX) - ALLOWED_NEEDED
                 if not lib.startswith(SANITIZER_PREFIXES)}
        self.assertEqual(extra, set(),
                         "sbx names %s as NEEDED: a call into a library without its stub in "
                         "cli/lazy/<library>.c (add an SBX_LAZY line there)" % sorted(extra))

    def test_version_maps_no_heavy_library(self):
        # LD_DEBUG=libs lists every object the loader maps for the process
        r = self.e.run("version", env={"LD_DEBUG": "libs"})
        self.assertEqual(r.returncode, 0, r.stderr)
        loaded = r.stderr.decode()
        for lib in ("libcurl", "libnats", "libssl", "libcrypto", "libnghttp2", "libgnutls"):
            self.assertNotIn(lib + ".so", loaded)

    def test_a_command_loads_its_library_on_first_use(self):
        # the remote broker talks to its worker with libcurl (none listens on port 1)
        r = self.e.run("--endpoint=http://127.0.0.1:1", "--broker=remote", "run", "true",
                       env={"LD_DEBUG": "libs"})
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertRegex(r.stderr, rb"calling init: \S*/libcurl\.so")
        self.assertIn(b"Couldn't connect to server", r.stderr)
        self.assertNotIn(b"cannot be loaded", r.stderr)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare"),
                         "hiding a library needs a private mount namespace (root)")
    def test_a_missing_library_is_named_with_its_package(self):
        real = os.path.realpath("/usr/lib/x86_64-linux-gnu/libcurl.so.4")
        if not os.path.exists(real):
            self.skipTest("libcurl.so.4 is not where Debian puts it")
        # libcurl replaced by an empty file in a mount namespace of this test only
        script = 'mount --bind /dev/null "$1" && shift && exec "$@"'
        r = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", real,
             cli_util.SBX, "--endpoint=http://127.0.0.1:1", "--broker=remote", "run", "true"],
            env=self.e.env, capture_output=True, timeout=cli_util.RUN_TIMEOUT_S)
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertIn(b"needs libcurl.so.4, which cannot be loaded", r.stderr)
        self.assertIn(b"install the package libcurl4", r.stderr)


if __name__ == "__main__":
    unittest.main()
