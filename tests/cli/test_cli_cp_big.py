#!/usr/bin/python3
"""test_cli_cp_big.py - `sbx cp` of 1 GiB each way through the built `sbx`: host -> sandbox ->
host, embedded and through a real sbx-worker (remote broker over h2c), the content compared by
SHA-256 on both sides of each hop (sha256sum inside the sandbox, hashlib on the host), never by
size alone. Every message stays under the transport's 16 MiB limit (4 MiB chunks), so this is
the case that would hang or truncate if chunking, offsets or the size check broke at scale.

Under ASan+UBSan (the second pass of the test command) the same code paths run about ten times
slower, so that build sets SBX_TEST_CP_BIG_MIB=256 (tests/cli/CMakeLists.txt): still 64 chunks
each way and far above the 16 MiB limit, so chunking and offsets are checked there for memory
errors, while the normal build proves the full 1 GiB.

The sandbox's workspace is a tmpfs whose pages count against its memory cgroup, so the profile
gives it room: a 1536 MiB workspace in a 2048 MiB memory limit. Files are removed as soon as a
hop is checked, so at most one sandbox copy and two host copies exist at once.
"""
import hashlib
import os
import unittest

import cli_util

GIB = 1 << 30
SIZE = int(os.environ.get("SBX_TEST_CP_BIG_MIB", GIB >> 20)) << 20
BLOCK = 16 << 20  # host write/hash granularity
PROFILE = ("    default: { type: local, scope: per_session, policy: { memory_mb: 2048 },\n"
           "               local: { workspace_mb: 1536 } }\n")


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            h.update(block)
    return h.hexdigest()


class CopyOneGiB(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()
        cfg = os.path.join(cls.e.tmp, "client.yaml")
        with open(cfg, "w") as f:
            f.write("sandbox:\n  profiles:\n" + PROFILE)
        cls.embedded = {"SBX_CONFIG": cfg}
        cls.worker = cli_util.Worker(cls.e.tmp, profiles=PROFILE,
                                     extra="  runtime_dir: %s/wrun\n" % cls.e.tmp)
        cls.remote = {"SBX_BROKER": "remote", "SBX_ENDPOINT": cls.worker.endpoint}
        # SIZE of random bytes (a shifted or repeated chunk changes the digest), hashed as
        # it is written
        cls.src = os.path.join(cls.e.tmp, "big.src")
        h = hashlib.sha256()
        with open(cls.src, "wb") as f:
            for _ in range(SIZE // BLOCK):
                block = os.urandom(BLOCK)
                h.update(block)
                f.write(block)
        cls.src_digest = h.hexdigest()

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.e.close()

    def round_trip(self, env, name):
        r = self.e.run("session", "new", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        self.addCleanup(self.e.run, "session", "rm", sid, env=env)
        r = self.e.run("cp", self.src, "%s:/workspace/big" % sid, env=env, timeout=600)
        self.assertEqual(r.returncode, 0, (name, r.stderr))
        r = self.e.run("exec", "-s", sid, "--", "sha256sum", "/workspace/big", env=env,
                       timeout=600)
        self.assertEqual(r.returncode, 0, (name, r.stderr))
        self.assertEqual(r.stdout.split()[0].decode(), self.src_digest, "%s: upload" % name)
        dst = os.path.join(self.e.tmp, "big.%s" % name)
        self.addCleanup(lambda: os.path.exists(dst) and os.unlink(dst))
        r = self.e.run("cp", "%s:/workspace/big" % sid, dst, env=env, timeout=600)
        self.assertEqual(r.returncode, 0, (name, r.stderr))
        self.assertEqual(os.path.getsize(dst), SIZE, name)
        self.assertEqual(digest(dst), self.src_digest, "%s: download" % name)

    def test_one_gib_each_way_embedded(self):
        self.round_trip(self.embedded, "embedded")

    def test_one_gib_each_way_through_a_worker(self):
        self.round_trip(self.remote, "remote")


if __name__ == "__main__":
    cli_util.main()
