#!/usr/bin/python3
"""test_cli_snapshot.py - `sbx snapshot create|ls|rm` and `--from-snapshot` through the built
`sbx`, embedded and through a real sbx-worker (whose store is on its side): a fork has the
snapshot's workspace and not what changed after it; `sbx run --from-snapshot` too; another
subject sees none of them; a taken name, a bad name and an unknown snapshot are refused with
their exit codes, and a failed `session new --from-snapshot` leaves no session behind.
"""
import json
import os
import unittest

import cli_util


class Snapshots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()
        cfg = os.path.join(cls.e.tmp, "embedded.yaml")
        with open(cfg, "w") as f:
            f.write("sandbox:\n  snapshot_dir: %s/esnap\n  snapshot_max_mb: 8\n" % cls.e.tmp)
        cls.embedded = {"SBX_CONFIG": cfg}
        cls.worker = cli_util.Worker(
            cls.e.tmp, profiles="    default: { type: local, scope: per_session }\n",
            extra="  runtime_dir: %s/wrun\n  snapshot_dir: %s/wsnap\n" % (cls.e.tmp, cls.e.tmp))
        cls.remote = {"SBX_BROKER": "remote", "SBX_ENDPOINT": cls.worker.endpoint}

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.e.close()

    def sbx(self, *args, env=None):
        return self.e.run(*args, env=env)

    def ok(self, *args, env=None):
        r = self.sbx(*args, env=env)
        self.assertEqual(r.returncode, 0, (args, r.stderr))
        return r.stdout.decode()

    def new_session(self, env, *extra):
        sid = self.ok("session", "new", *extra, env=env).strip()
        self.addCleanup(self.sbx, "session", "rm", sid, env=env)
        return sid

    def test_fork_embedded_and_remote(self):
        for env, store in ((self.embedded, "esnap"), (self.remote, "wsnap")):
            a = self.new_session(env)
            self.ok("exec", "-s", a, "--", "sh", "-c",
                    "mkdir -p src && echo v1 > src/app.py && head -c 300000 /dev/urandom > "
                    "data.bin && sha256sum data.bin > sum", env=env)
            out = self.ok("snapshot", "create", a, "v1", env=env)
            self.assertIn("snapshot v1:", out)
            self.addCleanup(self.sbx, "snapshot", "rm", "v1", env=env)
            self.assertTrue(os.path.isdir(os.path.join(self.e.tmp, store)),
                            "kept in the store of the side that runs the engine")
            self.ok("exec", "-s", a, "--", "sh", "-c", "echo v2 > src/app.py", env=env)

            b = self.new_session(env, "--from-snapshot", "v1")
            out = self.ok("exec", "-s", b, "--", "sh", "-c",
                          "cat src/app.py && sha256sum -c sum >/dev/null && echo same", env=env)
            self.assertEqual(out, "v1\nsame\n")
            self.assertEqual(self.ok("exec", "-s", a, "--", "cat", "src/app.py", env=env), "v2\n")
            self.assertEqual(self.ok("run", "--from-snapshot", "v1", "--", "cat", "src/app.py",
                                     env=env), "v1\n")

            ls = self.ok("snapshot", "ls", env=env)
            self.assertRegex(ls, r"(?m)^v1 +\d+ +\d{4}-\d\d-\d\dT")
            js = json.loads(self.ok("--json", "snapshot", "ls", env=env))
            self.assertEqual([s["name"] for s in js["result"]["snapshots"]], ["v1"])
            self.assertGreater(int(js["result"]["snapshots"][0]["size"]), 300000)

            # another subject: sees none, cannot fork from it, cannot delete it
            other = dict(env, SBX_SUBJECT="someone-else")
            self.assertNotIn("v1", self.ok("--subject", "someone-else", "snapshot", "ls",
                                           env=other))
            r = self.sbx("--subject", "someone-else", "run", "--from-snapshot", "v1", "--",
                         "true", env=other)
            self.assertEqual(r.returncode, 2, r.stderr)  # INVALID_ARGUMENT: nothing ran
            self.assertIn(b"no snapshot named 'v1'", r.stderr)
            r = self.sbx("--subject", "someone-else", "snapshot", "rm", "v1", env=other)
            self.assertEqual(r.returncode, 6, r.stderr)
            self.assertIn("v1", self.ok("snapshot", "ls", env=env))

            # refusals
            r = self.sbx("snapshot", "create", a, "v1", env=env)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(b"exists", r.stderr)
            r = self.sbx("snapshot", "create", a, "../x", env=env)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(b"not a snapshot name", r.stderr)
            before = self.ok("session", "ls", env=env)
            r = self.sbx("session", "new", "--from-snapshot", "nope", env=env)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(b"no snapshot named 'nope'", r.stderr)
            self.assertEqual(self.ok("session", "ls", env=env).count("\n"), before.count("\n"),
                             "a failed fork leaves no session")
            r = self.sbx("snapshot", "rm", "v1", env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("v1", self.ok("snapshot", "ls", env=env))

    def test_too_big_is_refused(self):
        a = self.new_session(self.embedded)
        self.ok("exec", "-s", a, "--", "sh", "-c", "head -c 9437184 /dev/urandom > big",
                env=self.embedded)
        r = self.sbx("snapshot", "create", a, "big", env=self.embedded)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"snapshot_max_mb", r.stderr)
        self.assertNotIn("big", self.ok("snapshot", "ls", env=self.embedded))

    def test_usage_and_providers(self):
        self.assertEqual(self.sbx("snapshot").returncode, 2)
        self.assertEqual(self.sbx("snapshot", "create", "only-one").returncode, 2)
        self.assertEqual(self.sbx("snapshot", "rm").returncode, 2)
        r = self.sbx("snapshot", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"Usage: sbx snapshot create SESSION NAME", r.stdout)
        self.assertIn(b"SNAP", self.sbx("providers").stdout)


if __name__ == "__main__":
    cli_util.main()
