#!/usr/bin/python3
"""test_cli_pause.py - `sbx pause` and `sbx resume` through the built `sbx`, embedded and through
a real sbx-worker: a paused session's background program stops counting and goes on after the
resume (state kept); a command on a paused session resumes it and prints the notice; both are
idempotent (exit 0); an unknown session exits 6; `sbx providers` shows the PAUSE column. A worker
whose profile says `idle_action: pause` pauses an idle session by itself; the next command
resumes it with its state.
"""
import os
import time
import unittest

import cli_util

# a counter written ten times a second: it stands still exactly while the sandbox is frozen
# The count is written beside and renamed over /tmp/n: a reader never sees the file empty (a
# plain `echo $i > /tmp/n` truncates first, and a `cat` between the two read nothing: CI, 2026).
COUNTER = ("nohup sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; "
           "sleep 0.1; done' >/dev/null 2>&1 &")


class PauseResume(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()
        cls.worker = cli_util.Worker(
            cls.e.tmp,
            profiles="    default: { type: local, scope: per_session }\n"
                     "    napping: { type: local, scope: per_session, idle_timeout_s: 1,"
                     " idle_action: pause }\n",
            extra="  runtime_dir: %s/wrun\n" % cls.e.tmp)
        cls.remote = {"SBX_BROKER": "remote", "SBX_ENDPOINT": cls.worker.endpoint}

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.e.close()

    def sbx(self, *args, env=None):
        return self.e.run(*args, env=env)

    def counter(self, sid, env):
        r = self.sbx("exec", "-s", sid, "--", "cat", "/tmp/n", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return int(r.stdout), r.stderr.decode()

    def test_pause_keeps_state_and_resume_goes_on(self):
        if not os.access("/sys/fs/cgroup/freezer/cgroup.procs", os.W_OK):
            self.skipTest("needs root and the v1 freezer cgroup")
        for env in (None, self.remote):
            r = self.sbx("session", "new", env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            sid = r.stdout.decode().strip()
            self.addCleanup(self.sbx, "session", "rm", sid, env=env)
            r = self.sbx("exec", "-s", sid, "--", "sh", "-c", COUNTER, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            time.sleep(0.5)
            r = self.sbx("pause", sid, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.sbx("pause", sid, env=env).returncode, 0)  # idempotent
            # while paused the counter cannot move; reading it resumes the sandbox (the
            # notice says so), so the first read is the value at the pause
            time.sleep(0.8)
            first, notice = self.counter(sid, env)
            self.assertIn("was paused; it was resumed", notice)
            time.sleep(0.5)
            later, notice = self.counter(sid, env)
            self.assertGreater(later, first, "the program goes on after the resume")
            self.assertNotIn("was paused", notice)
            # an explicit resume of a running session changes nothing
            self.assertEqual(self.sbx("pause", sid, env=env).returncode, 0)
            r = self.sbx("resume", sid, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.sbx("resume", sid, env=env).returncode, 0)
            self.assertGreater(self.counter(sid, env)[0], 0)

    def test_worker_pauses_idle_sessions(self):
        if not os.access("/sys/fs/cgroup/freezer/cgroup.procs", os.W_OK):
            self.skipTest("needs root and the v1 freezer cgroup")
        r = self.sbx("session", "new", "--profile", "napping", env=self.remote)
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        self.addCleanup(self.sbx, "session", "rm", sid, env=self.remote)
        r = self.sbx("exec", "-s", sid, "--", "sh", "-c", "echo kept > /workspace/f",
                     env=self.remote)
        self.assertEqual(r.returncode, 0, r.stderr)
        time.sleep(2.5)  # idle 1 s, then a pass (every 250 ms)
        r = self.sbx("exec", "-s", sid, "--", "cat", "/workspace/f", env=self.remote)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, b"kept\n")
        self.assertIn(b"was paused; it was resumed", r.stderr)
        self.assertNotIn(b"reset", r.stderr)

    def test_unknown_session_and_usage(self):
        r = self.sbx("pause", "no-such-session")
        self.assertEqual(r.returncode, 6, r.stderr)
        r = self.sbx("resume")
        self.assertEqual(r.returncode, 2, r.stderr)
        r = self.sbx("pause", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"Usage: sbx pause SESSION", r.stdout)

    def test_providers_shows_pause(self):
        r = self.sbx("providers")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"PAUSE", r.stdout)


if __name__ == "__main__":
    cli_util.main()
