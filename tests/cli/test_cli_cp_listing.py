#!/usr/bin/python3
"""test_cli_cp_listing.py - `sbx cp -r` out of a sandbox writes each listed entry under the
destination by its last path component: a provider that lists whole paths (E2B's envd, the
fake) copies like one that lists names (the local agent), and an entry that names no file of
the directory (".." or "", which a hostile sandbox can answer) is skipped with a notice, never
joined onto the host path. The sandboxes are the fake provider's, in a real sbx-worker.
"""
import os
import unittest

import cli_util


class Listing(unittest.TestCase):
    def run_case(self, extra, files):
        e = cli_util.Env()
        self.addCleanup(e.close)
        opts = ", fake: { list_extra: '%s' }" % extra if extra is not None else ""
        worker = cli_util.Worker(
            e.tmp, profiles="    default: { type: fake, scope: per_session%s }\n" % opts)
        self.addCleanup(worker.stop)
        env = {"SBX_BROKER": "remote", "SBX_ENDPOINT": worker.endpoint}
        r = e.run("session", "new", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        src = os.path.join(e.tmp, "tree")
        for rel, body in files.items():
            os.makedirs(os.path.dirname(os.path.join(src, rel)), exist_ok=True)
            with open(os.path.join(src, rel), "wb") as f:
                f.write(body)
        r = e.run("cp", "-r", src, "%s:/w/tree" % sid, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        # the destination sits two levels down: an entry joined as "../x" would land in e.tmp
        out = os.path.join(e.tmp, "a", "b", "out")
        os.makedirs(os.path.dirname(out))
        r = e.run("cp", "-r", "%s:/w/tree" % sid, out, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {}
        for d, _, names in os.walk(out):
            for n in names:
                with open(os.path.join(d, n), "rb") as f:
                    got[os.path.relpath(os.path.join(d, n), out)] = f.read()
        self.assertEqual(got, files)
        self.assertEqual(sorted(os.listdir(os.path.join(e.tmp, "a"))), ["b"])
        self.assertEqual(sorted(os.listdir(os.path.join(e.tmp, "a", "b"))), ["out"])
        return r.stderr.decode()

    def test_a_listing_of_whole_paths_copies_like_one_of_names(self):
        self.run_case(None, {"x": b"one", "sub/y": b"two", "sub/deeper/z": b""})

    def test_entries_that_name_no_file_of_the_directory_are_skipped(self):
        for extra in ("..", "/w/tree/..", "/w/tree/sub/."):
            with self.subTest(extra=extra):
                stderr = self.run_case(extra, {"x": b"one", "sub/y": b"two"})
                # the engine leaves it out of the listing and says so, whatever the provider
                self.assertIn("sbx cp: notice: 1 entries of the listing of /w/tree", stderr)
                self.assertIn("were left out", stderr)


if __name__ == "__main__":
    unittest.main()
