#!/usr/bin/python3
"""test_cli_cp.py - `sbx cp` both ways in 4 MiB chunks (WriteFile with an offset, ReadFile by
ranges) through the built `sbx`, embedded and through a real sbx-worker, with the size checked
at the end: empty, one byte, exactly one chunk and ~100 MiB files arrive whole; a file that
changes during the copy and a provider that cannot append are errors, never exit 0.
"""
import hashlib
import os
import unittest

import cli_util

CHUNK = 4 * 1024 * 1024  # CP_CHUNK in cli/cmd_cp.c
SIZES = (0, 1, CHUNK, 25 * CHUNK + 12345)


class Copy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()
        # the worker's profile has the client's default name: `session new` checks the name
        cls.worker = cli_util.Worker(
            cls.e.tmp, profiles="    default: { type: local, scope: per_session }\n",
            extra="  runtime_dir: %s/wrun\n" % cls.e.tmp)
        cls.remote = {"SBX_BROKER": "remote", "SBX_ENDPOINT": cls.worker.endpoint}

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.e.close()

    def session(self, env=None):
        r = self.e.run("session", "new", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        self.addCleanup(self.e.run, "session", "rm", sid, env=env)
        return sid

    def host_file(self, name, size):
        path = os.path.join(self.e.tmp, name)
        with open(path, "wb") as f:
            left = size
            while left > 0:
                n = min(left, 1 << 20)
                f.write(os.urandom(n))
                left -= n
        return path

    @staticmethod
    def digest(path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()

    def test_round_trips(self):
        for env in (None, self.remote):
            sid = self.session(env)
            for size in SIZES:
                src = self.host_file("src-%d" % size, size)
                r = self.e.run("cp", src, "%s:/workspace/f%d" % (sid, size), env=env)
                self.assertEqual(r.returncode, 0, (size, env, r.stderr))
                r = self.e.run("exec", "-s", sid, "--", "sha256sum", "/workspace/f%d" % size,
                               env=env)
                self.assertEqual(r.stdout.split()[0].decode(), self.digest(src), size)
                dst = os.path.join(self.e.tmp, "dst-%d" % size)
                r = self.e.run("cp", "%s:/workspace/f%d" % (sid, size), dst, env=env)
                self.assertEqual(r.returncode, 0, (size, env, r.stderr))
                self.assertEqual(os.path.getsize(dst), size)
                self.assertEqual(self.digest(dst), self.digest(src))
                os.unlink(src)
                os.unlink(dst)

    def test_download_mode_is_capped(self):
        # the sandbox's bits never reach the host: 0777 arrives as 0755, 0666 as 0644, then
        # less the caller's umask (here 027), as cp would make them
        sid = self.session()
        old = os.umask(0o027)
        try:
            for inside, want in ((0o777, 0o750), (0o666, 0o640), (0o4755, 0o750), (0o600, 0o640)):
                r = self.e.run("exec", "-s", sid, "--", "sh", "-c",
                               "echo x > /workspace/m && chmod %o /workspace/m" % inside)
                self.assertEqual(r.returncode, 0, r.stderr)
                dst = os.path.join(self.e.tmp, "mode-%o" % inside)
                r = self.e.run("cp", "%s:/workspace/m" % sid, dst)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(os.stat(dst).st_mode & 0o7777, want, "%o" % inside)
                os.unlink(dst)
        finally:
            os.umask(old)

    def test_into_a_directory(self):
        sid = self.session()
        src = self.host_file("named.bin", 1000)
        r = self.e.run("cp", src, "%s:/workspace/" % sid)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = os.path.join(self.e.tmp, "outdir")
        os.mkdir(out)
        r = self.e.run("cp", "%s:/workspace/named.bin" % sid, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.digest(os.path.join(out, "named.bin")), self.digest(src))

    def test_directories(self):
        for env in (None, self.remote):
            sid = self.session(env)
            src = os.path.join(self.e.tmp, "tree")
            os.makedirs(os.path.join(src, "sub", "deeper"), exist_ok=True)
            files = {"a": 10, "sub/big": CHUNK + 3, "sub/deeper/c": 0}
            for rel, size in files.items():
                self.host_file(os.path.join("tree", rel), size)
            r = self.e.run("cp", src, "%s:/workspace/" % sid, env=env)
            self.assertEqual(r.returncode, 2)  # a directory needs -r
            self.assertIn(b"-r", r.stderr)
            r = self.e.run("cp", "-r", src, "%s:/workspace/" % sid, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            out = os.path.join(self.e.tmp, "tree-out")
            os.makedirs(out, exist_ok=True)
            r = self.e.run("cp", "--recursive", "%s:/workspace/tree" % sid, out, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            for rel in files:
                self.assertEqual(self.digest(os.path.join(out, "tree", rel)),
                                 self.digest(os.path.join(src, rel)), rel)

    def test_a_file_changing_during_the_copy_is_an_error(self):
        sid = self.session()
        r = self.e.run("exec", "-s", sid, "--", "sh", "-c",
                       "head -c %d /dev/zero >/workspace/grow; (while :; do echo x >> "
                       "/workspace/grow; done) </dev/null >/dev/null 2>&1 &" % (3 * CHUNK))
        self.assertEqual(r.returncode, 0, r.stderr)
        dst = os.path.join(self.e.tmp, "grow")
        r = self.e.run("cp", "%s:/workspace/grow" % sid, dst)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"changed size during the copy", r.stderr)
        self.assertFalse(os.path.exists(dst))  # nothing half-written left in place
        self.assertEqual([n for n in os.listdir(self.e.tmp) if "sbx-cp" in n], [])

    def test_errors(self):
        sid = self.session()
        # a missing source is a failed operation (1), never a usage error (2)
        for flags in ([], ["-r"]):
            r = self.e.run("cp", *flags, "%s:/workspace/missing" % sid,
                           os.path.join(self.e.tmp, "m"))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(b"No such file", r.stderr)
        # a destination in a directory that does not exist: named as given (not the temporary
        # name the copy is written under first)
        dst = os.path.join(self.e.tmp, "no-such-dir", "out")
        r = self.e.run("exec", "-s", sid, "--", "sh", "-c", "echo hi >/workspace/h")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.e.run("cp", "%s:/workspace/h" % sid, dst)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(("cannot create '%s': No such file or directory" % dst).encode(), r.stderr)
        self.assertNotIn(b"sbx-cp", r.stderr)
        r = self.e.run("cp", os.path.join(self.e.tmp, "missing"), "%s:/workspace/m" % sid)
        self.assertEqual(r.returncode, 1, r.stderr)
        r = self.e.run("cp", self.e.tmp, "%s:/workspace/d" % sid)  # a directory without -r
        self.assertEqual(r.returncode, 2)
        self.assertEqual(self.e.run("cp", "a", "b").returncode, 2)

    def test_a_provider_that_cannot_append_refuses(self):
        cfg = os.path.join(self.e.tmp, "fake.yaml")
        with open(cfg, "w") as f:
            f.write("sandbox:\n  secret_file: %s/fake-secret\n  profiles:\n"
                    "    default: { type: fake, scope: per_session }\n" % self.e.tmp)
        r = self.e.run("--config", cfg, "session", "new", "--name", "fakecp")
        self.assertEqual(r.returncode, 0, r.stderr)
        src = self.host_file("two-chunks", CHUNK + 1)
        r = self.e.run("--config", cfg, "cp", src, "fakecp:/x")
        self.assertEqual(r.returncode, 4, r.stderr)  # refused, not a truncated file
        self.assertIn(b"cannot append", r.stderr)
        self.e.run("--config", cfg, "session", "rm", "fakecp")


if __name__ == "__main__":
    cli_util.main()
