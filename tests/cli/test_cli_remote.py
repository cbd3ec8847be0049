#!/usr/bin/python3
"""test_cli_remote.py - the built `sbx` as a remote client of a real sbx-worker (h2c loopback,
a token caller restricted to one subject): SBX_BROKER, SBX_ENDPOINT and SBX_TOKEN configure
it, --subject and --principal-mode set the principal, exit codes hold across the wire, and
--broker thread really runs on the thread broker.
"""
import socket
import struct
import threading
import unittest

import cli_util

TOKEN = "cli-test-token"


def resetting_endpoint():
    """An h2c endpoint that answers every request stream with RST_STREAM(CANCEL) and nothing
    else, as HAProxy 2.6 did for a request it had no server for while its body was arriving.
    Raw frames: nothing here may tidy up what the client sees. Returns (port, stop)."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    ls.settimeout(0.2)
    stop = threading.Event()

    def frame(ftype, flags, stream, payload=b""):
        return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
            struct.pack(">I", stream) + payload

    def serve(c):
        with c:
            c.settimeout(5)
            buf = b""
            try:
                c.sendall(frame(4, 0, 0))  # SETTINGS
                while not stop.is_set():
                    data = c.recv(65536)
                    if not data:
                        return
                    buf += data
                    if buf.startswith(b"PRI * HTTP/2.0"):
                        buf = buf[24:]
                    while len(buf) >= 9:
                        n = int.from_bytes(buf[:3], "big")
                        if len(buf) < 9 + n:
                            break
                        ftype, flags = buf[3], buf[4]
                        stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                        buf = buf[9 + n:]
                        if ftype == 4 and not flags & 1:
                            c.sendall(frame(4, 1, 0))  # SETTINGS ACK
                        elif ftype == 1:  # HEADERS: reset it, no answer (CANCEL = 8)
                            c.sendall(frame(3, 0, stream, struct.pack(">I", 8)))
            except OSError:
                return

    def accept():
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except socket.timeout:
                continue
            threading.Thread(target=serve, args=(c,), daemon=True).start()
        ls.close()

    threading.Thread(target=accept, daemon=True).start()
    return ls.getsockname()[1], stop


class Remote(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()
        cls.worker = cli_util.Worker(
            cls.e.tmp, profiles="    wlocal: { type: local, scope: per_session }\n",
            extra="    auth:\n      callers:\n"
                  "        - { name: tok, token_env: CLI_TEST_WORKER_TOKEN, subjects: [bob] }\n"
                  "  runtime_dir: %s/wrun\n" % cls.e.tmp,
            env={"CLI_TEST_WORKER_TOKEN": TOKEN})
        cls.env = {"SBX_BROKER": "remote", "SBX_ENDPOINT": cls.worker.endpoint}

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        cls.e.close()

    def run_(self, *args, token=TOKEN, **kw):
        env = dict(self.env)
        if token is not None:
            env["SBX_TOKEN"] = token
        return self.e.run(*args, env=env, **kw)

    def test_environment_and_token(self):
        r = self.run_("--subject", "bob", "run", "--", "echo", "hi")
        self.assertEqual((r.returncode, r.stdout), (0, b"hi\n"), r.stderr)
        r = self.run_("--subject=bob", "run", "--", "echo", "hi", token=None)
        self.assertEqual(r.returncode, 4)
        self.assertIn(b"UNAUTHENTICATED", r.stderr)
        r = self.run_("--subject=bob", "run", "--", "echo", "hi", token="wrong")
        self.assertEqual(r.returncode, 4)
        r = self.run_("--subject=bob", "--endpoint=http://127.0.0.1:1", "run", "true")
        self.assertEqual(r.returncode, 125, r.stderr)  # the flag wins over SBX_ENDPOINT

    def test_a_stream_reset_without_an_answer_is_named(self):
        # libcurl's name for it, "Stream error in the HTTP/2 framing layer", was all a caller
        # read; the reset's code (here a balancer's CANCEL) tells it from a broken connection
        port, stop = resetting_endpoint()
        try:
            r = self.run_("--subject=bob", "--endpoint=http://127.0.0.1:%d" % port, "run",
                          "true")
        finally:
            stop.set()
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertIn(b"BROKER", r.stderr)
        self.assertIn(b"was not closed cleanly: CANCEL (err 8)", r.stderr)

    def test_subject_is_checked_by_the_worker(self):
        r = self.run_("--subject", "eve", "run", "--", "echo", "hi")
        self.assertEqual(r.returncode, 4)
        self.assertIn(b"may not assert principal subject 'eve'", r.stderr)
        r = self.run_("run", "--", "echo", "hi")  # the default subject user:$LOGNAME
        self.assertEqual(r.returncode, 4)

    def test_principal_mode(self):
        r = self.run_("--subject", "bob", "--principal-mode", "agent", "run", "true")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_("--subject", "bob", "--principal-mode", "user", "run", "true")
        self.assertEqual(r.returncode, 4, r.stderr)  # local cannot act as a user
        self.assertIn(b"principal_user", r.stderr)
        self.assertEqual(self.run_("--principal-mode", "root", "run", "true").returncode, 2)

    def test_exit_codes_across_the_wire(self):
        rc = self.run_("--subject", "bob", "run", "--timeout-ms", "300", "sleep", "30").returncode
        self.assertEqual(rc, 5)
        self.assertEqual(self.run_("--subject", "bob", "run", "sh", "-c", "exit 9").returncode, 9)
        self.assertEqual(self.run_("--subject", "bob", "code", "-l", "cobol", "x").returncode, 4)

    def test_sessions_use_the_workers_profiles(self):
        """The worker has one profile, wlocal (the local default profile is `default`):
        `session new` takes the worker's default and checks names against the worker's."""
        r = self.run_("--subject", "bob", "session", "new")
        self.assertEqual(r.returncode, 0, r.stderr)
        sid = r.stdout.decode().strip()
        try:
            r = self.run_("--subject", "bob", "exec", "-s", sid, "--", "echo", "in-session")
            self.assertEqual((r.returncode, r.stdout), (0, b"in-session\n"), r.stderr)
            r = self.run_("--subject", "bob", "--json", "session", "ls")
            self.assertIn(b'"wlocal"', r.stdout)
        finally:
            self.run_("--subject", "bob", "session", "rm", sid)
        r = self.run_("--subject", "bob", "session", "new", "--profile", "wlocal")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.run_("--subject", "bob", "session", "rm", r.stdout.decode().strip())
        r = self.run_("--subject", "bob", "session", "new", "--profile", "default")
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn(b"wlocal", r.stderr)  # the worker's profiles are the ones listed
        r = self.run_("--subject", "bob", "providers")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"\nwlocal ", r.stdout)

    def test_thread_broker(self):
        r = self.e.run("--broker", "thread", "providers")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(b"broker: thread\n"), r.stdout)
        r = self.e.run("providers", env={"SBX_BROKER": "embedded"})
        self.assertTrue(r.stdout.startswith(b"broker: embedded\n"), r.stdout)
        r = self.e.run("--broker", "thread", "run", "--", "sh", "-c", "echo out; echo err >&2")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, b"out\n", b"err\n"))
        self.assertEqual(self.e.run("run", "true", env={"SBX_BROKER": "pigeon"}).returncode, 2)


if __name__ == "__main__":
    cli_util.main()
