#!/usr/bin/python3
"""test_cli_detach.py - detached commands through the built `sbx`, embedded (local provider) and
through a real sbx-worker: `sbx exec --detach` prints a command id, `sbx attach` prints what the
command printed (from an offset) then its live output and exits with its status, `sbx kill`
stops it, a client killed with SIGKILL loses nothing (attaching again prints everything), an
interrupted attach leaves the command running, an offset older than the journal keeps is refused
naming the range kept, and a provider without journals refuses to detach.
"""
import os
import re
import signal
import subprocess
import threading
import unittest

import cli_util

# Hang guard for a line a followed command prints before it waits: a test fails only when
# nothing arrived within it.
LINE_GUARD_S = 120
JOURNAL_BYTES = 256 * 1024  # AGENT_JOURNAL_BYTES in agent/agent.h


def read_line(stream, guard_s=LINE_GUARD_S):
    box = []
    t = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    t.start()
    t.join(guard_s)
    return box[0] if box else None


class Detach(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()
        cls.worker = cli_util.Worker(cls.e.tmp, profiles="    wlocal: { type: local, "
                                     "scope: per_session }\n",
                                     extra="  runtime_dir: %s/wrun\n" % cls.e.tmp)
        cls.fake_cfg = os.path.join(cls.e.tmp, "fake.yaml")
        with open(cls.fake_cfg, "w") as f:
            f.write("sandbox:\n  secret_file: %s/secret\n"
                    "  profiles:\n    f: { type: fake, scope: per_session }\n" % cls.e.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.e.close()

    def brokers(self):
        return ([], ["--broker", "remote", "--endpoint", self.worker.endpoint])

    def sbx(self, broker, *args, **kw):
        return self.e.run(*broker, *args, **kw)

    def session(self, broker):
        r = self.sbx(broker, "session", "new")
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        self.addCleanup(self.sbx, broker, "session", "rm", sid)
        return sid

    def detach(self, broker, sid, *argv):
        r = self.sbx(broker, "exec", "--detach", "-s", sid, "--", *argv)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, rb"^[0-9]+\n$")
        return r.stdout.decode().strip()

    def test_attach_prints_everything_and_exits_with_the_status(self):
        for broker in self.brokers():
            sid = self.session(broker)
            cid = self.detach(broker, sid, "sh", "-c",
                              "echo out1; echo err1 >&2; cat; echo out2; exit 3")
            r = self.sbx(broker, "attach", sid, cid)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (3, b"out1\nout2\n", b"err1\n"),
                             broker)
            # a finished command answers again, as often as asked
            r = self.sbx(broker, "attach", sid, cid)
            self.assertEqual((r.returncode, r.stdout), (3, b"out1\nout2\n"))

    def test_stdin_goes_in_before_the_detach(self):
        for broker in self.brokers():
            sid = self.session(broker)
            r = self.sbx(broker, "exec", "-d", "-s", sid, "--", "tr", "a-z", "A-Z",
                         stdin=b"quiet\n")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.sbx(broker, "attach", sid, r.stdout.decode().strip())
            self.assertEqual((r.returncode, r.stdout), (0, b"QUIET\n"), r.stderr)

    def test_attach_from_an_offset(self):
        for broker in self.brokers():
            sid = self.session(broker)
            cid = self.detach(broker, sid, "sh", "-c", "echo 0123456789; echo abc >&2")
            r = self.sbx(broker, "attach", "--offset", "5", "--stderr-offset=1", sid, cid)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"56789\n", b"bc\n"))
            r = self.sbx(broker, "--json", "attach", "--offset", "5", sid, cid)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b'"stdoutOffset": "5"', r.stdout)

    def test_killed_client_loses_nothing(self):
        for broker in self.brokers():
            sid = self.session(broker)
            cid = self.detach(broker, sid, "sh", "-c",
                              "echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done; "
                              "echo second; exit 7")
            p = self.e.popen(*broker, "attach", sid, cid, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            try:
                self.assertEqual(read_line(p.stdout), b"first\n", broker)
                p.kill()  # SIGKILL: no clean-up of any kind
                p.wait()
            finally:
                p.stdout.close()
                p.stderr.close()
            r = self.sbx(broker, "exec", "-s", sid, "--", "touch", "/workspace/go")
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.sbx(broker, "attach", sid, cid)
            self.assertEqual((r.returncode, r.stdout), (7, b"first\nsecond\n"), r.stderr)

    def test_killed_exec_loses_nothing(self):
        """A plain `sbx exec` runs its command detached and follows it: killed with SIGKILL, it
        leaves the command running, and `sbx attach S` (no id: the last exec) prints it all."""
        for broker in self.brokers():
            sid = self.session(broker)
            p = self.e.popen(*broker, "exec", "-s", sid, "--", "sh", "-c",
                             "echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done; "
                             "echo second; exit 7", stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            try:
                self.assertEqual(read_line(p.stdout), b"first\n", broker)
                p.kill()
                p.wait()
            finally:
                p.stdout.close()
                p.stderr.close()
            r = self.sbx(broker, "exec", "-d", "-s", sid, "--", "touch", "/workspace/go")
            self.assertEqual(r.returncode, 0, r.stderr)
            touch = r.stdout.decode().strip()
            self.assertEqual(self.sbx(broker, "attach", sid, touch).returncode, 0)
            r = self.sbx(broker, "attach", sid, str(int(touch) - 1))
            self.assertEqual((r.returncode, r.stdout), (7, b"first\nsecond\n"), r.stderr)
            # the plain exec noted its command: attach without an id finds it
            r = self.sbx(broker, "exec", "-s", sid, "--", "sh", "-c", "echo again; exit 4")
            self.assertEqual((r.returncode, r.stdout), (4, b"again\n"), r.stderr)
            r = self.sbx(broker, "attach", sid)
            self.assertEqual((r.returncode, r.stdout), (4, b"again\n"), r.stderr)

    def test_the_last_command_note_goes_with_the_session(self):
        r = self.e.run("session", "new")
        sid = r.stdout.decode().strip()
        note = os.path.join(self.e.env["XDG_STATE_HOME"], "sbx", "sessions", sid + ".command")
        self.assertEqual(self.e.run("exec", "-s", sid, "--", "true").returncode, 0)
        with open(note) as f:
            self.assertRegex(f.read(), r"^[0-9]+\n$")
        self.assertEqual(self.e.run("session", "rm", sid).returncode, 0)
        self.assertFalse(os.path.exists(note))

    def test_interrupted_exec_stops_its_command(self):
        for broker in self.brokers():
            sid = self.session(broker)
            p = self.e.popen(*broker, "exec", "-s", sid, "--", "sh", "-c", "echo up; sleep 600",
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
            try:
                self.assertEqual(read_line(p.stdout), b"up\n")
                p.send_signal(signal.SIGINT)
                self.assertEqual(p.wait(cli_util.RUN_TIMEOUT_S), 128 + signal.SIGINT)
                self.assertIn(b"stopped by signal 2", p.stderr.read())
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                p.stdout.close()
                p.stderr.close()
            r = self.sbx(broker, "attach", sid)  # it was stopped, not left running
            self.assertEqual((r.returncode, r.stdout), (128 + signal.SIGKILL, b"up\n"), r.stderr)

    def test_interrupted_attach_leaves_the_command_running(self):
        for broker in self.brokers():
            sid = self.session(broker)
            cid = self.detach(broker, sid, "sh", "-c", "echo up; sleep 600")
            p = self.e.popen(*broker, "attach", sid, cid, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            try:
                self.assertEqual(read_line(p.stdout), b"up\n")
                p.send_signal(signal.SIGINT)
                self.assertEqual(p.wait(cli_util.RUN_TIMEOUT_S), 128 + signal.SIGINT)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                p.stdout.close()
                p.stderr.close()
            # still running: a follower started now sees the kill
            p = self.e.popen(*broker, "attach", "--offset", "3", sid, cid,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
            try:
                r = self.sbx(broker, "kill", sid, cid)
                self.assertEqual((r.returncode, r.stdout), (0, b""), r.stderr)
                out, err = p.communicate(timeout=cli_util.RUN_TIMEOUT_S)
                self.assertEqual((p.returncode, out), (128 + signal.SIGKILL, b""), err)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()

    def test_kill(self):
        for broker in self.brokers():
            sid = self.session(broker)
            cid = self.detach(broker, sid, "sleep", "600")
            r = self.sbx(broker, "--json", "kill", sid, cid)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b'"outcome": "OUTCOME_SIGNALED"', r.stdout)
            r = self.sbx(broker, "attach", sid, cid)
            self.assertEqual(r.returncode, 128 + signal.SIGKILL, r.stderr)
            cid = self.detach(broker, sid, "sleep", "600")
            r = self.sbx(broker, "kill", "--signal", "15", sid, cid)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.sbx(broker, "attach", sid, cid).returncode,
                             128 + signal.SIGTERM)
            r = self.sbx(broker, "kill", sid, "999999")
            self.assertEqual(r.returncode, 6, r.stderr)
            self.assertIn(b"command 999999 is not known", r.stderr)

    def test_offset_older_than_the_journal_is_refused(self):
        total = JOURNAL_BYTES + 40000
        for broker in self.brokers():
            sid = self.session(broker)
            cid = self.detach(broker, sid, "sh", "-c",
                              "head -c %d /dev/zero | tr '\\0' x" % total)
            r = self.sbx(broker, "attach", "--offset", str(total - 1), sid, cid)
            self.assertEqual((r.returncode, r.stdout), (0, b"x"), r.stderr)
            r = self.sbx(broker, "attach", sid, cid)
            self.assertEqual(r.returncode, 2, r.stderr)
            first = total - JOURNAL_BYTES
            self.assertIn(b"stdout offset 0 of command %s is no longer kept" % cid.encode(),
                          r.stderr)
            self.assertIn(b"holds stdout bytes %d to %d" % (first, total), r.stderr)
            r = self.sbx(broker, "attach", "--offset", str(first), sid, cid)
            self.assertEqual((r.returncode, r.stdout), (0, b"x" * JOURNAL_BYTES), r.stderr[-300:])

    def test_refusals(self):
        r = self.e.run("--config", self.fake_cfg, "session", "new")
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        r = self.e.run("--config", self.fake_cfg, "exec", "-d", "-s", sid, "--", "true")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn(b"does not offer detached commands", r.stderr)
        # a plain exec there runs attached, as before
        r = self.e.run("--config", self.fake_cfg, "exec", "-s", sid, "--", "echo", "hi")
        self.assertEqual((r.returncode, r.stdout), (0, b"hi\n"), r.stderr)
        self.e.run("--config", self.fake_cfg, "session", "rm", sid)
        self.assertEqual(self.e.run("attach", "s").returncode, 2)
        self.assertEqual(self.e.run("attach", "s", "x1").returncode, 2)
        self.assertEqual(self.e.run("attach", "--offset", "-3", "s", "1").returncode, 2)
        self.assertEqual(self.e.run("kill", "--signal", "99", "s", "1").returncode, 2)
        self.assertEqual(self.e.run("attach", "no-such-session", "1").returncode, 6)

    def test_help(self):
        for cmd in ("attach", "kill", "exec"):
            r = self.e.run(cmd, "--help")
            self.assertEqual(r.returncode, 0)
            self.assertIn(b"Usage: sbx " + cmd.encode(), r.stdout)
        self.assertIn(b"--detach", self.e.run("exec", "--help").stdout)
        r = self.e.run("--help")
        self.assertTrue(re.search(rb"\n  attach ", r.stdout) and re.search(rb"\n  kill ", r.stdout))

    def test_providers_declare_it(self):
        for broker in self.brokers():
            r = self.sbx(broker, "--json", "providers")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b'"detach": true', r.stdout)
        r = self.e.run("--config", self.fake_cfg, "--json", "providers")
        self.assertIn(b'"detach": false', r.stdout)


if __name__ == "__main__":
    cli_util.main()
