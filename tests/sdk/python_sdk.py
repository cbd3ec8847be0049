#!/usr/bin/python3
"""python_sdk.py - the Python client (sdk/python) installed the way its README says, offline, and
used against a real sbx-worker: run, code, streaming, files, sessions reconnected from their
handle by another client, typed errors for every contract error code, TLS with a token and with
a client certificate, and a 10 MiB completion (which gRPC's default 4 MiB limit refuses).

The package is copied out of the source tree (so the test leaves no build/ in it), installed with
`pip install --no-index` into a venv that sees Debian's grpcio and protobuf, and this script then
runs its tests again under that venv's python.

usage: python_sdk.py --worker PATH/sbx-worker --sdk SRC/sdk/python --proto SRC/proto
"""
import argparse
import contextlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from die_with_parent import die_with_parent  # noqa: E402 (tests/support)

ARGS = None
TOKEN = "sdk-token-0123456789abcdef"
BIG = 10 * 1024 * 1024 + 4096  # a little over 10 MiB of output


def install(tmp):
    """The README's install, offline: a venv on Debian's packages, then pip."""
    src = os.path.join(tmp, "sdk-python")
    shutil.copytree(ARGS.sdk, src, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    venv = os.path.join(tmp, "venv")
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
    env = dict(os.environ, SBX_PROTO_DIR=os.path.abspath(ARGS.proto), PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
    subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "-q", src],
                   check=True, env=env)
    return os.path.join(venv, "bin", "python")


def make_pki(d):
    sh = """set -e; cd '%s'; exec >/dev/null 2>&1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=sdk-ca
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile san.ext
    openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=sdk-client
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2
    """ % d
    subprocess.run(["sh", "-c", sh], check=True)


README_ADDRESS = '"127.0.0.1:7443"'  # the worker address the README's lines name


def readme_python_lines(readme):
    """The Python block of a README's "From Python" part (the whole README.md) or its first one
    (sdk/python/README.md), as a reader copies it."""
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"(?:### From Python\n.*?)?```python\n(.*?)```", text, re.S)
    if not m:
        raise AssertionError("%s has no ```python block" % readme)
    return m.group(1)


def run_readme_lines(test, target):
    """Runs the README's lines as written, the worker address aside; returns what they print."""
    readme = os.path.join(os.path.abspath(ARGS.sdk), "..", "..", "README.md")
    src = readme_python_lines(readme)
    test.assertEqual(src, readme_python_lines(os.path.join(ARGS.sdk, "README.md")),
                     "README.md and sdk/python/README.md show different lines")
    test.assertEqual(len(src.splitlines()), 5, src)
    test.assertIn(README_ADDRESS, src)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(src.replace(README_ADDRESS, repr(target)), readme, "exec"), {})
    return out.getvalue()


class Worker:
    """An sbx-worker subprocess on an ephemeral loopback port with the fake provider (or the
    profiles given)."""

    def __init__(self, tmp, worker_yaml="", env=None, profiles=None):
        cfg = os.path.join(tmp, "worker-%d.yaml" % id(self))
        default = ""
        if profiles is None:
            default = "  default_profile: fake\n"
            profiles = ("    fake:\n"
                        "      type: fake\n"
                        "      scope: per_session\n"
                        "      policy: { output_limit_bytes: 12582912 }\n"
                        "    oneshot: { type: fake, scope: per_call }\n"
                        "    nofiles: { type: fake, scope: per_call, fake: { files: false } }\n"
                        "    local: { type: local, scope: per_session }\n")
        with open(cfg, "w") as f:
            f.write(
                "sandbox:\n"
                "%s"
                "  secret_file: %s/secret\n"
                "  runtime_dir: %s/run\n"
                "  snapshot_dir: %s/snapshots\n"
                "  broker: { flavor: thread, threads: 4 }\n"
                "  worker:\n"
                "    listen: 127.0.0.1:0\n"
                "    log_level: warn\n"
                "%s"
                "  profiles:\n"
                "%s"
                % (default, tmp, tmp, tmp, worker_yaml, profiles))
        # SIGTERM: it may serve local sandboxes, and stops as on stop() when the test dies.
        self.proc = subprocess.Popen([ARGS.worker, "--config", cfg], stderr=subprocess.PIPE,
                                     text=True, env=dict(os.environ, **(env or {})),
                                     preexec_fn=die_with_parent(signal.SIGTERM))
        first = self.proc.stderr.readline()
        m = re.search(r"listening on port (\d+)", first)
        if not m:
            rest = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError("worker did not start: %r %r" % (first, rest))
        self.port = int(m.group(1))
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


class Plain(unittest.TestCase):
    """h2c on loopback, no authentication."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-sdk-")
        os.chmod(cls.tmp, 0o755)  # the local provider's sandboxes search their runtime dir in it
        cls.worker = Worker(cls.tmp)
        cls.target = "127.0.0.1:%d" % cls.worker.port

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def client(self, **kw):
        return sbx.Client(self.target, timeout=60, **kw)

    def test_readme_lines_run_code_in_a_sandbox(self):
        self.assertEqual(run_readme_lines(self, self.target), "6 7\n\n42\n\n")

    def test_run_returns_a_result_and_a_failing_program_is_not_an_exception(self):
        with self.client() as c, c.sandbox("oneshot") as box:
            r = box.run(["echo", "a b"])
            self.assertEqual(r.stdout, b"a b\n")
            self.assertTrue(r.ok)
            self.assertEqual(r.outcome, "OK")
            r = box.run("warn oops; exit 3")
            self.assertEqual(r.exit_code, 3)
            self.assertEqual(r.outcome, "NONZERO")
            self.assertEqual(r.stderr, b"oops\n")
            self.assertFalse(r.ok)

    def test_code_keeps_state_and_returns_the_last_value(self):
        with self.client() as c, c.sandbox() as box:
            box.code("x = 20")
            r = box.code("x + 22")
            self.assertEqual(r.value, "42")

    def test_stream_yields_output_then_the_result(self):
        with self.client() as c, c.sandbox() as box:
            ex = box.stream("echo one; warn two; echo three")
            chunks = list(ex)
            out = b"".join(o.data for o in chunks if o.stream == "stdout")
            err = b"".join(o.data for o in chunks if o.stream == "stderr")
            self.assertEqual(out, b"one\nthree\n")
            self.assertEqual(err, b"two\n")
            self.assertTrue(all(isinstance(o.offset, int) for o in chunks))
            self.assertEqual(ex.result.stdout, b"one\nthree\n")
            self.assertEqual(ex.result.exit_code, 0)

    def test_detached_command_start_follow_attach_cancel(self):
        with self.client() as c, c.sandbox("local") as box:
            cid = box.start("echo 0123456789; echo err >&2; read line; echo got $line; exit 3",
                            stdin="go\n")
            self.assertGreater(cid, 0)
            r = box.attach(cid)  # waits for the end
            self.assertEqual((r.exit_code, r.stdout, r.stderr), (3, b"0123456789\ngot go\n",
                                                                  b"err\n"))
            self.assertEqual(r.command_id, cid)
            r = box.attach(cid, stdout_offset=4, stderr_offset=1)
            self.assertEqual((r.stdout, r.stderr, r.stdout_offset), (b"456789\ngot go\n",
                                                                     b"rr\n", 4))
            ex = box.follow(cid, stdout_offset=11)
            self.assertEqual(b"".join(o.data for o in ex if o.stream == "stdout"), b"got go\n")
            self.assertEqual(ex.result.exit_code, 3)
            # a long one: a follower in another thread sees the cancel from this one
            cid = box.start(["sh", "-c", "echo up; exec sleep 600"])
            box2 = c.attach(box.handle)
            done = []
            t = threading.Thread(target=lambda: done.append(box2.attach(cid)))
            t.start()
            with self.assertRaises(sbx.TimeoutError):  # stops following, not the command
                box.attach(cid, timeout=0.5)
            r = box.cancel(cid)
            self.assertEqual((r.outcome, r.signal), ("SIGNALED", 9))
            t.join(60)
            self.assertEqual((done[0].outcome, done[0].stdout), ("SIGNALED", b"up\n"))
            with self.assertRaises(sbx.GoneError):
                box.cancel(cid + 1000)
        with self.client() as c, c.sandbox() as box:  # the fake provider keeps no journals
            with self.assertRaises(sbx.CapabilityError):
                box.start("true")

    def test_pause_keeps_the_sandbox_and_the_next_call_resumes_it(self):
        if not os.access("/sys/fs/cgroup/freezer/cgroup.procs", os.W_OK):
            self.skipTest("needs root and the v1 freezer cgroup")
        with self.client() as c, c.sandbox("local") as box:
            box.run("echo kept > /tmp/f")
            box.pause()
            box.pause()  # idempotent
            r = box.run("cat /tmp/f")
            self.assertEqual(r.stdout, b"kept\n")
            self.assertIn("was paused; it was resumed", r.notice)
            box.resume()  # running: nothing to do
        with self.client() as c, c.sandbox() as box:  # the fake provider cannot pause
            box.run("true")
            with self.assertRaises(sbx.CapabilityError):
                box.pause()

    def test_expose_reaches_a_server_in_the_sandbox(self):
        with self.client() as c, c.sandbox("local") as box:
            cid = box.start(["sh", "-c", "cd /tmp && echo sdk-exposed > f.txt && "
                             "exec python3 -m http.server 8000 --bind 127.0.0.1"])
            # up to ~60 s for the server to listen (python starts slowly on a loaded CI host),
            # probed by one python (one per probe took seconds each on a loaded host, and the
            # loop then outlived the call's deadline); when it never listens the test says
            # whether the server ended and what it printed, rather than a reset fetch below
            ready = box.run(["python3", "-c",
                             "import socket, sys, time\n"
                             "for _ in range(300):\n"
                             "    try:\n"
                             "        socket.create_connection(('127.0.0.1', 8000), 1).close()\n"
                             "        sys.exit(0)\n"
                             "    except OSError:\n"
                             "        time.sleep(0.2)\n"
                             "sys.exit(1)\n"], timeout=180)
            if ready.exit_code != 0:
                try:
                    r = box.attach(cid, timeout=2)
                    why = "it ended with %d; stdout %r, stderr %r" % (r.exit_code, r.stdout,
                                                                      r.stderr)
                except sbx.TimeoutError:
                    why = "it still runs"
                self.fail("the server in the sandbox never listened: %s (the probe ended with %d, "
                          "stderr %r)" % (why, ready.exit_code, ready.stderr[-400:]))
            url, token = box.expose(8000)
            self.assertEqual(token, "")
            with urllib.request.urlopen(url + "f.txt", timeout=20) as r:
                self.assertEqual(r.read(), b"sdk-exposed\n")
            self.assertEqual(box.expose(8000), (url, ""))
        with self.client() as c, c.sandbox() as box:  # the fake provider cannot expose
            box.run("true")
            with self.assertRaises(sbx.CapabilityError):
                box.expose(8000)

    def test_snapshot_forks_a_new_sandbox(self):
        with self.client(subject="alice") as c:
            with c.sandbox("local") as box:
                box.run("echo v1 > /workspace/app.txt")
                snap = box.snapshot("sdk-v1")
                self.assertEqual(snap.name, "sdk-v1")
                self.assertGreater(snap.size, 0)
                box.run("echo v2 > /workspace/app.txt")
                with c.sandbox("local", from_snapshot="sdk-v1") as fork:
                    self.assertEqual(fork.run("cat /workspace/app.txt").stdout, b"v1\n")
                    self.assertNotEqual(fork.handle.sandbox_id, box.handle.sandbox_id)
            self.assertEqual([s.name for s in c.snapshots()], ["sdk-v1"])
            with self.client(subject="mallory") as m:
                self.assertEqual(m.snapshots(), [])
                with self.assertRaises(sbx.InvalidArgumentError):
                    m.sandbox("local", from_snapshot="sdk-v1").run("true")
                with self.assertRaises(sbx.GoneError):
                    m.delete_snapshot("sdk-v1")
            c.delete_snapshot("sdk-v1")
            self.assertEqual(c.snapshots(), [])
        with self.client() as c, c.sandbox() as box:  # the fake provider keeps no workspace
            box.run("true")
            with self.assertRaises(sbx.CapabilityError):
                box.snapshot("x")

    def test_files_write_read_list(self):
        with self.client() as c, c.sandbox() as box:
            box.files.write("/workspace/d/a.bin", b"\x00\x01binary", mode=0o600)
            box.files.write("/workspace/d/b.txt", "text")
            self.assertEqual(box.files.read("/workspace/d/a.bin"), b"\x00\x01binary")
            self.assertEqual(box.files.read("/workspace/d/a.bin", offset=2, max_bytes=3), b"bin")
            names = sorted(os.path.basename(f.path) for f in box.files.list("/workspace/d"))
            self.assertEqual(names, ["a.bin", "b.txt"])

    def test_session_reconnects_from_its_handle_in_another_client(self):
        with self.client() as c1:
            box = c1.sandbox()
            box.files.write("/workspace/kept.txt", "still here")
            saved = box.handle_bytes()
            sid = box.session_id
            box.detach()
        with self.client() as c2:
            again = c2.attach(saved)
            self.assertEqual(again.session_id, sid)
            self.assertEqual(again.files.read("/workspace/kept.txt"), b"still here")
            again.close()
            # destroyed: the handle of a closed session no longer reaches a sandbox
            self.assertEqual(again.handle.sandbox_id, "")

    def test_another_principal_cannot_use_the_handle(self):
        with self.client(subject="alice") as alice, self.client(subject="mallory") as mallory:
            box = alice.sandbox()
            box.run("true")
            stolen = mallory.attach(box.handle_bytes())
            with self.assertRaises(sbx.PermissionDeniedError) as cm:
                stolen.run("echo hi")
            self.assertEqual(cm.exception.code, "PERMISSION_DENIED")
            self.assertIsNotNone(cm.exception.completion)
            self.assertIsInstance(cm.exception, PermissionError)
            box.close()

    def test_typed_errors_for_machinery_failures(self):
        with self.client() as c:
            with self.assertRaises(sbx.ConfigError) as cm:
                c.sandbox("no-such-profile").run("true")
            self.assertIn("no-such-profile", cm.exception.message)
            with self.assertRaises(sbx.CapabilityError):
                c.sandbox("nofiles").files.read("/workspace/x")
            with self.assertRaises(sbx.InvalidArgumentError):
                c.sandbox("oneshot").files.read("")
            self.assertTrue(issubclass(sbx.TimeoutError, TimeoutError))

    def test_every_contract_error_code_has_its_error_class(self):
        for v in sbx.pb.ErrorCode.DESCRIPTOR.values:
            name = v.name[len("ERROR_CODE_"):]
            if name == "NONE":
                continue
            cls = sbx.errors.BY_CODE.get(name)
            self.assertIsNotNone(cls, name)
            self.assertTrue(issubclass(cls, sbx.SbxError))
            self.assertEqual(cls.code, name)

    def test_a_10_mib_completion_arrives(self):
        data = os.urandom(BIG)
        with self.client() as c, c.sandbox() as box:
            box.files.write("/workspace/big.bin", data)  # a 10 MiB request
            self.assertEqual(box.files.read("/workspace/big.bin"), data)  # a 10 MiB completion
            r = box.run("cat /workspace/big.bin")
            self.assertEqual(len(r.stdout), BIG)
            self.assertFalse(r.stdout_truncated)

    def test_grpc_default_message_limit_cannot_receive_it(self):
        # the reason max_message_bytes exists: a client with gRPC's 4 MiB default fails here
        with self.client() as c:
            box = c.sandbox()
            box.files.write("/workspace/big.bin", os.urandom(BIG))
            with self.client(max_message_bytes=4 * 1024 * 1024) as small:
                with self.assertRaises(sbx.ResourceExhaustedError):
                    small.attach(box.handle_bytes()).files.read("/workspace/big.bin")
            box.close()

    def test_describe_lists_the_profiles(self):
        with self.client() as c:
            d = c.describe()
            self.assertEqual(sorted(p.name for p in d.profiles),
                             ["fake", "local", "nofiles", "oneshot"])
            self.assertEqual(d.default_profile, "fake")

    def test_policy_timeout_is_a_timeout_error_with_the_completion(self):
        with self.client() as c, c.sandbox("oneshot", policy={"timeout_ms": 200}) as box:
            with self.assertRaises(sbx.TimeoutError) as cm:
                box.run("echo started; sleep 60000")
            self.assertEqual(cm.exception.code, "TIMEOUT")
            self.assertEqual(cm.exception.completion.result.stdout, b"started\n")

    def test_unreachable_worker_is_a_broker_error(self):
        with sbx.Client("127.0.0.1:1", timeout=5) as c:
            with self.assertRaises(sbx.BrokerError):
                c.sandbox().run("true")


class Local(unittest.TestCase):
    """The README's lines against a worker whose sandboxes are real: the built-in default's
    profile (local provider, per_session), as the README's `sbx-worker --listen
    127.0.0.1:7443` serves them, with the secret and runtime dir in a temporary dir."""

    def test_readme_lines_run_code_in_a_local_sandbox(self):
        tmp = tempfile.mkdtemp(prefix="sbx-sdk-local-")
        os.chmod(tmp, 0o755)  # the sandbox's unprivileged user reaches its runtime dir through it
        try:
            worker = Worker(tmp, profiles="    default: { type: local, scope: per_session }\n")
            try:
                out = run_readme_lines(self, "127.0.0.1:%d" % worker.port)
            finally:
                self.assertEqual(worker.stop(), 0)
            self.assertEqual(out, "6 7\n\n42\n\n")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Secure(unittest.TestCase):
    """h2 over TLS: a token caller and a client-certificate caller."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-sdk-tls-")
        make_pki(cls.tmp)
        cls.worker = Worker(
            cls.tmp,
            "    tls: { cert_file: %s/server.pem, key_file: %s/server.key,"
            " client_ca_file: %s/ca.pem }\n"
            "    auth:\n"
            "      callers:\n"
            "        - { name: cert, cert_subject: sdk-client, subjects: ['*'] }\n"
            "        - { name: tok, token_env: SDK_TOKEN, subjects: [bob] }\n"
            % (cls.tmp, cls.tmp, cls.tmp), env={"SDK_TOKEN": TOKEN})
        cls.target = "localhost:%d" % cls.worker.port

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def test_token_over_tls(self):
        os.environ["SDK_TEST_TOKEN"] = TOKEN
        with sbx.Client(self.target, ca_file=self.path("ca.pem"), token_env="SDK_TEST_TOKEN",
                        subject="bob", timeout=60) as c, c.sandbox("oneshot") as box:
            self.assertEqual(box.run("echo tls").text, "tls\n")

    def test_client_certificate(self):
        with sbx.Client(self.target, ca_file=self.path("ca.pem"),
                        cert_file=self.path("client.pem"), key_file=self.path("client.key"),
                        subject="anyone", timeout=60) as c, c.sandbox("oneshot") as box:
            self.assertEqual(box.run("echo mtls").text, "mtls\n")

    def test_wrong_token_is_unauthenticated(self):
        with sbx.Client(self.target, ca_file=self.path("ca.pem"), token="wrong",
                        subject="bob", timeout=60) as c:
            with self.assertRaises(sbx.UnauthenticatedError):
                c.sandbox("oneshot").run("true")

    def test_token_caller_may_not_assert_another_subject(self):
        with sbx.Client(self.target, ca_file=self.path("ca.pem"), token=TOKEN,
                        subject="alice", timeout=60) as c:
            with self.assertRaises(sbx.PermissionDeniedError):
                c.sandbox("oneshot").run("true")


def main():
    global ARGS, sbx
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--sdk", required=True)
    ap.add_argument("--proto", required=True)
    ap.add_argument("--installed", action="store_true", help=argparse.SUPPRESS)
    ARGS, rest = ap.parse_known_args()
    if not ARGS.installed:
        tmp = tempfile.mkdtemp(prefix="sbx-sdk-venv-")
        try:
            python = install(tmp)
            r = subprocess.run([python, os.path.abspath(__file__), "--installed"] + sys.argv[1:],
                               preexec_fn=die_with_parent())
            return r.returncode
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    import sbx as sbx_module  # the installed package, not a source tree
    sbx = sbx_module
    assert "site-packages" in sbx.__file__, sbx.__file__
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
