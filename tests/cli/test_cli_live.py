#!/usr/bin/python3
"""test_cli_live.py - the built `sbx` prints a program's output while it runs (stdout to stdout,
stderr to stderr), embedded and through a real sbx-worker (ExecuteStream); forwards stdin
(piped, or a terminal with -i) up to its named limit; and SIGINT/SIGTERM/SIGHUP stop the
program and leave no sandbox behind (no state directory, no agent process).
"""
import hashlib
import os
import pty
import signal
import subprocess
import threading
import time
import unittest

import cli_util

# Hang guard for the first line of a program that then sleeps SLEEP_S: far shorter than the
# sleep, so output held back until the end can never pass.
FIRST_LINE_GUARD_S = 120
SLEEP_S = 600
STDIN_MAX = 8 * 1024 * 1024  # CLI_STDIN_MAX in cli/cmd_plane.h


def read_line(stream, guard_s):
    """The first line of stream, or None when guard_s passed first."""
    box = []
    t = threading.Thread(target=lambda: box.append(stream.readline()), daemon=True)
    t.start()
    t.join(guard_s)
    return box[0] if box else None


class Live(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()
        # the built-in default profile, with a private runtime directory to look into
        cls.run_dir = os.path.join(cls.e.tmp, "run")
        cls.cfg = os.path.join(cls.e.tmp, "sbx.yaml")
        with open(cls.cfg, "w") as f:
            f.write("sandbox:\n  secret_file: %s/secret\n  runtime_dir: %s\n"
                    "  profiles:\n    default: { type: local, scope: per_session }\n"
                    % (cls.e.tmp, cls.run_dir))
        cls.worker = cli_util.Worker(cls.e.tmp, profiles="    wlocal: { type: local, "
                                     "scope: per_session }\n",
                                     extra="  runtime_dir: %s/wrun\n" % cls.e.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.e.close()

    def remote(self):
        return ["--broker", "remote", "--endpoint", self.worker.endpoint]

    def leftovers(self, run_dir):
        """Sandbox state directories and agent processes of run_dir still there."""
        dirs = [d for d in os.listdir(run_dir) if not d.startswith(".")] \
            if os.path.isdir(run_dir) else []  # not the provider's sweep stamp
        procs = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if run_dir.encode() + b"/" in f.read():
                        procs.append(pid)
            except OSError:
                pass
        return dirs, procs

    def test_output_arrives_while_the_program_runs(self):
        for broker in ([], self.remote()):
            p = self.e.popen("--config", self.cfg, *broker, "run", "--", "sh", "-c",
                             "echo first; echo to-stderr >&2; sleep %d" % SLEEP_S,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
            try:
                self.assertEqual(read_line(p.stdout, FIRST_LINE_GUARD_S), b"first\n", broker)
                self.assertEqual(read_line(p.stderr, FIRST_LINE_GUARD_S), b"to-stderr\n")
                self.assertIsNone(p.poll())  # still sleeping: this was live output
                p.send_signal(signal.SIGINT)
                self.assertEqual(p.wait(cli_util.RUN_TIMEOUT_S), 128 + signal.SIGINT)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                p.stdout.close()
                p.stderr.close()

    def test_signals_stop_and_clean_up(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            p = self.e.popen("--config", self.cfg, "run", "--", "sh", "-c",
                             "echo started; sleep %d" % SLEEP_S, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            try:
                self.assertEqual(read_line(p.stdout, FIRST_LINE_GUARD_S), b"started\n")
                self.assertNotEqual(self.leftovers(self.run_dir), ([], []))  # it is there
                p.send_signal(sig)
                self.assertEqual(p.wait(cli_util.RUN_TIMEOUT_S), 128 + sig)
                err = p.stderr.read()
                self.assertIn(b"stopped by signal %d" % sig, err)
                self.assertEqual(self.leftovers(self.run_dir), ([], []), err)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
                p.stdout.close()
                p.stderr.close()

    def test_interrupted_remote_run_leaves_no_sandbox(self):
        """SIGINT of a remote `sbx run`: the stream is cancelled before any completion reaches
        the client, so the worker destroys the fresh session's sandbox itself."""
        wrun = os.path.join(self.e.tmp, "wrun")
        p = self.e.popen(*self.remote(), "run", "--", "sh", "-c", "echo started; sleep %d"
                         % SLEEP_S, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
        try:
            self.assertEqual(read_line(p.stdout, FIRST_LINE_GUARD_S), b"started\n")
            self.assertNotEqual(self.leftovers(wrun), ([], []))  # it is there
            p.send_signal(signal.SIGINT)
            self.assertEqual(p.wait(cli_util.RUN_TIMEOUT_S), 128 + signal.SIGINT)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        # the worker finishes the cancelled execution after the client left: wait for it
        # (a hang guard, not a measurement)
        for _ in range(cli_util.RUN_TIMEOUT_S * 10):
            if self.leftovers(wrun) == ([], []):
                break
            time.sleep(0.1)
        self.assertEqual(self.leftovers(wrun), ([], []))

    def test_streams_stay_apart(self):
        for broker in ([], self.remote()):
            r = self.e.run(*broker, "run", "--", "sh", "-c",
                           "for i in 1 2 3; do echo out$i; echo err$i >&2; done")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, b"out1\nout2\nout3\n")
            self.assertEqual(r.stderr, b"err1\nerr2\nerr3\n")

    def test_large_output_is_whole(self):
        for broker in ([], self.remote()):
            r = self.e.run(*broker, "run", "--", "sh", "-c",
                           "head -c 3000000 /dev/urandom >/tmp/f; cat /tmp/f >&2; "
                           "sha256sum </tmp/f")
            self.assertEqual(r.returncode, 0, r.stderr[-300:])
            self.assertEqual(len(r.stderr), 3000000)
            self.assertEqual(r.stdout.split()[0].decode(), hashlib.sha256(r.stderr).hexdigest())

    def test_stdin_piped(self):
        data = os.urandom(1 << 20)
        for broker in ([], self.remote()):
            r = self.e.run(*broker, "run", "--", "sha256sum", stdin=data)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.split()[0].decode(), hashlib.sha256(data).hexdigest())
        r = self.e.run("code", "-l", "bash", "tr a-z A-Z", stdin=b"shout\n")
        self.assertEqual(r.stdout, b"SHOUT\n", r.stderr)
        # the stateful python kernel reads it as sys.stdin, each call its own
        r = self.e.run("code", "-l", "python",
                       "import sys\n_ = sys.stdout.buffer.write(sys.stdin.buffer.read())",
                       stdin=data)
        self.assertEqual((r.returncode, len(r.stdout)), (0, len(data)), r.stderr)
        self.assertEqual(r.stdout, data)
        sid = self.e.run("session", "new").stdout.decode().strip()
        try:
            r = self.e.run("code", "-s", sid, "-l", "python", "x = 1", stdin=b"unread\n" * 30000)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.e.run("code", "-s", sid, "-l", "python", "print(input().upper(), x)",
                           stdin=b"mine\n")
            self.assertEqual((r.returncode, r.stdout), (0, b"MINE 1\n"), r.stderr)
            r = self.e.run("code", "-s", sid, "-l", "python", "import sys; sys.stdin.read()")
            self.assertEqual((r.returncode, r.stdout), (0, b"''\n"), r.stderr)
        finally:
            self.e.run("session", "rm", sid)
        sid = self.e.run("session", "new").stdout.decode().strip()
        try:
            r = self.e.run("exec", "-s", sid, "--", "wc", "-c", stdin=b"12345")
            self.assertEqual(r.stdout.strip(), b"5", r.stderr)
        finally:
            self.e.run("session", "rm", sid)

    def test_stdin_limit(self):
        r = self.e.run("run", "--", "wc", "-c", stdin=b"x" * (STDIN_MAX + 1))
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"stdin is larger than %d bytes" % STDIN_MAX, r.stderr)
        r = self.e.run("run", "--", "wc", "-c", stdin=b"x" * STDIN_MAX)
        self.assertEqual((r.returncode, r.stdout.strip()), (0, b"%d" % STDIN_MAX), r.stderr)

    def test_terminal_stdin_needs_i(self):
        for flag, want in (([], b"0"), (["-i"], b"6")):
            master, slave = pty.openpty()
            try:
                p = self.e.popen("run", *flag, "--", "wc", "-c", stdin=slave,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                os.close(slave)
                slave = -1
                if flag:
                    os.write(master, b"hello\n\x04")  # a line, then end of file
                out, err = p.communicate(timeout=cli_util.RUN_TIMEOUT_S)
                self.assertEqual((p.returncode, out.strip()), (0, want), err)
            finally:
                os.close(master)
                if slave >= 0:
                    os.close(slave)

    def test_closed_stdout_stops_the_program(self):
        p = self.e.popen("run", "--", "yes", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL)
        p.stdout.read(10)
        p.stdout.close()
        _, err = p.communicate(timeout=cli_util.RUN_TIMEOUT_S)
        self.assertEqual(p.returncode, 128 + signal.SIGPIPE, err)


if __name__ == "__main__":
    cli_util.main()
