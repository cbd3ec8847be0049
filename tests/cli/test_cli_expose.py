#!/usr/bin/python3
"""test_cli_expose.py - `sbx expose SESSION PORT` through the built `sbx` with the local
provider, embedded and through a real sbx-worker: an HTTP server inside a session's sandbox
(network deny, the default) is reached from the host at the printed URL; exposing the port
again prints the same URL; the 17th port of a sandbox is refused; a profile with
expose_require_token answers 401 without the token and serves with it (header or cookie); after
`sbx session rm` the URL refuses connections and the relay is gone. Usage errors exit 2, and
`sbx providers` shows the EXPOSE column.
"""
import os
import socket
import time
import unittest
import urllib.error
import urllib.request

import cli_util

# a web server on 127.0.0.1:8000 inside the sandbox serving /workspace, started detached
SERVE = ("cd /workspace && echo exposed-bytes > hello.txt && "
         "nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & "
         "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection("
         "(\"127.0.0.1\", 8000), 1)' 2>/dev/null && exit 0; sleep 0.1; done; exit 1")


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def refused(url):
    host, port = url.split("//")[1].rstrip("/").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        return False
    except OSError:
        return True


class Expose(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.e = cli_util.Env()
        cfg = os.path.join(cls.e.tmp, "embedded.yaml")
        with open(cfg, "w") as f:
            f.write("sandbox:\n"
                    "  default_profile: default\n"
                    "  runtime_dir: %s/erun\n"
                    "  profiles:\n"
                    "    default: { type: local, scope: per_session }\n"
                    "    tok:\n"
                    "      type: local\n"
                    "      scope: per_session\n"
                    "      local: { expose_require_token: true }\n" % cls.e.tmp)
        cls.embedded = {"SBX_CONFIG": cfg}
        cls.worker = cli_util.Worker(
            cls.e.tmp, profiles="    default: { type: local, scope: per_session }\n"
                                "    tok:\n"
                                "      type: local\n"
                                "      scope: per_session\n"
                                "      local: { expose_require_token: true }\n",
            extra="  runtime_dir: %s/wrun\n" % cls.e.tmp)
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

    def serving_session(self, env, *extra):
        sid = self.ok("session", "new", *extra, env=env).strip()
        self.addCleanup(self.sbx, "session", "rm", sid, env=env)
        self.ok("exec", "-s", sid, "--", "sh", "-c", SERVE, env=env)
        return sid

    def relays(self, rundir):
        """Pids recorded by the relays of the sandboxes under runtime dir rundir."""
        pids = []
        base = os.path.join(rundir, "expose")
        for box in os.listdir(base) if os.path.isdir(base) else []:
            for port in os.listdir(os.path.join(base, box)):
                with open(os.path.join(base, box, port)) as f:
                    pids.append(int(f.read().split()[0]))
        return pids

    def test_expose_embedded_and_remote(self):
        for env, rundir in ((self.embedded, "erun"), (self.remote, "wrun")):
            sid = self.serving_session(env)
            out = self.ok("expose", sid, "8000", env=env).split("\n")
            url = out[0]
            self.assertRegex(url, r"^http://127\.0\.0\.1:\d+/$")
            self.assertEqual(out[1:], [""], "no token on loopback")
            status, body = get(url + "hello.txt")
            self.assertEqual((status, body), (200, b"exposed-bytes\n"))
            # the same port again: the same URL, still served
            self.assertEqual(self.ok("expose", sid, "8000", env=env).split("\n")[0], url)
            self.assertEqual(get(url + "hello.txt")[0], 200)
            # a port nobody listens on inside: the connection is closed, nothing served
            url2 = self.ok("expose", sid, "8001", env=env).split("\n")[0]
            self.assertNotEqual(url2, url)
            with self.assertRaises(OSError):
                get(url2)
            pids = self.relays(os.path.join(self.e.tmp, rundir))
            self.assertEqual(len(pids), 2)
            # sixteen ports at most
            for p in range(8002, 8016):
                self.ok("expose", sid, str(p), env=env)
            r = self.sbx("expose", sid, "9000", env=env)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(b"16 exposed ports", r.stderr)
            pids = self.relays(os.path.join(self.e.tmp, rundir))
            self.assertEqual(len(pids), 16)
            # destroyed with the session
            self.ok("session", "rm", sid, env=env)
            self.assertTrue(refused(url), "the URL must refuse connections after session rm")
            deadline = time.time() + 10
            while time.time() < deadline and any(alive(p) for p in pids):
                time.sleep(0.1)
            self.assertFalse([p for p in pids if alive(p)], "relays left after session rm")
            self.assertEqual(self.relays(os.path.join(self.e.tmp, rundir)), [])

    def test_token_required(self):
        for env in (self.embedded, self.remote):
            sid = self.serving_session(env, "--profile", "tok")
            out = self.ok("expose", sid, "8000", env=env).split("\n")
            url, token = out[0], out[1]
            self.assertRegex(token, r"^[0-9a-f]{32}$")
            self.assertEqual(get(url + "hello.txt")[0], 401)
            self.assertEqual(get(url + "hello.txt", {"X-Sbx-Expose-Token": "0" * 32})[0], 401)
            self.assertEqual(get(url + "hello.txt", {"X-Sbx-Expose-Token": token}),
                             (200, b"exposed-bytes\n"))
            self.assertEqual(
                get(url + "hello.txt", {"Cookie": "a=b; sbx_expose_token=" + token})[0], 200)
            again = self.ok("expose", sid, "8000", env=env).split("\n")
            self.assertEqual(again[:2], [url, token])

    def test_usage_and_providers(self):
        for bad in ("0", "65536", "80x", "-1"):
            r = self.sbx("expose", "some-session", bad)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))
        self.assertEqual(self.sbx("expose", "only-one").returncode, 2)
        r = self.sbx("expose", "--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"Usage: sbx expose SESSION PORT", r.stdout)
        r = self.sbx("expose", "no-such-session", "80")
        self.assertEqual(r.returncode, 6, r.stderr)
        r = self.sbx("providers")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"EXPOSE", r.stdout)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


if __name__ == "__main__":
    cli_util.main()
