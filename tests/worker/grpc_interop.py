#!/usr/bin/python3
"""grpc_interop.py - a real gRPC client (Debian's python3-grpcio, stubs generated from proto/
into the build tree) against a real sbx-worker process: Execute, ExecuteStream, Describe and
Health over h2c and over TLS (certificates made per run with openssl), and SIGTERM draining
with an execution in flight.

usage: grpc_interop.py --worker PATH/sbx-worker --stubs BUILD/gen/python
"""
import argparse
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from die_with_parent import die_with_parent  # noqa: E402 (tests/support)

ARGS = None


def load_stubs():
    sys.path.insert(0, ARGS.stubs)
    global grpc, pb, pb_grpc, health_pb2, health_pb2_grpc
    import grpc  # noqa: F401
    from sbx.v1 import execution_pb2 as pb  # noqa: F401
    from sbx.v1 import execution_pb2_grpc as pb_grpc  # noqa: F401
    import health_pb2  # noqa: F401
    import health_pb2_grpc  # noqa: F401


class Worker:
    """An sbx-worker subprocess on an ephemeral loopback port."""

    def __init__(self, tmp, extra_worker_yaml="", env=None, node="interop-node",
                 extra_profiles_yaml=""):
        self.tmp = tmp
        cfg = os.path.join(tmp, "worker-%d.yaml" % id(self))
        with open(cfg, "w") as f:
            f.write(
                "sandbox:\n"
                "  default_profile: fake\n"
                "  secret_file: %s/secret\n"
                "  runtime_dir: %s/run\n"
                "  node: %s\n"
                "  broker: { flavor: thread, threads: 4 }\n"
                "  worker:\n"
                "    listen: 127.0.0.1:0\n"
                "    drain_timeout_ms: 20000\n"
                "%s"
                "  profiles:\n"
                "    fake: { type: fake, scope: per_call }\n"
                "%s" % (tmp, tmp, node, extra_worker_yaml, extra_profiles_yaml))
        self.proc = subprocess.Popen([ARGS.worker, "--config", cfg], stderr=subprocess.PIPE,
                                     env=dict(os.environ, **(env or {})), text=True,
                                     preexec_fn=die_with_parent())
        line = self.proc.stderr.readline()
        m = re.search(r"listening on port (\d+)", line)
        if not m:
            rest = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError("worker did not start: %r %r" % (line, rest))
        self.port = int(m.group(1))
        self.log = []
        threading.Thread(target=self._drain_log, daemon=True).start()

    def _drain_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


def command(shell, subject=""):
    req = pb.ExecutionRequest(task_id=str(__import__("uuid").uuid4()), profile="fake")
    req.run_command.shell = shell
    if subject:
        req.principal.subject = subject
    return req


class Interop:
    """The calls every transport variant must pass."""

    def channel(self, options=None):
        raise NotImplementedError

    def metadata(self):
        return None

    def test_health_check_is_serving(self):
        with self.channel() as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
            self.assertEqual(resp.status, health_pb2.HealthCheckResponse.SERVING)

    def test_health_check_of_unknown_service_is_not_found(self):
        with self.channel() as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Check(health_pb2.HealthCheckRequest(service="nope.Nope"), timeout=30)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_execute_returns_the_completion(self):
        with self.channel() as ch:
            stub = pb_grpc.ExecutionStub(ch)
            req = command("echo from python")
            c = stub.Execute(req, timeout=60, metadata=self.metadata())
            self.assertEqual(c.task_id, req.task_id)
            self.assertEqual(c.status, pb.COMPLETION_STATUS_SUCCEEDED)
            self.assertEqual(c.result.stdout, b"from python\n")

    def test_execute_stream_sends_output_then_the_completion(self):
        with self.channel() as ch:
            stub = pb_grpc.ExecutionStub(ch)
            events = list(stub.ExecuteStream(command("yes 5000"), timeout=60,
                                             metadata=self.metadata()))
            self.assertGreaterEqual(len(events), 2)
            out = b"".join(e.output.data for e in events if e.WhichOneof("event") == "output")
            self.assertEqual(out, b"y\n" * 5000)
            self.assertEqual(events[-1].WhichOneof("event"), "completion")
            self.assertEqual(events[-1].completion.result.stdout, b"y\n" * 5000)

    def test_describe_lists_the_profiles(self):
        with self.channel() as ch:
            stub = pb_grpc.ExecutionStub(ch)
            d = stub.Describe(pb.DescribeRequest(), timeout=60, metadata=self.metadata())
            self.assertIn("fake", [p.name for p in d.profiles])

    def test_compressed_request_is_unimplemented(self):
        with self.channel() as ch:
            stub = pb_grpc.ExecutionStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Execute(command("echo zipped"), timeout=60, metadata=self.metadata(),
                             compression=grpc.Compression.Gzip)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)

    def test_large_output_streams_through_a_small_client_window(self):
        # no BDP probing: the client keeps its 64 KiB window, so 200 KB of output can only
        # arrive through HTTP/2 flow control (WINDOW_UPDATEs as the client reads)
        opts = [("grpc.http2.bdp_probe", 0), ("grpc.max_receive_message_length", 8 << 20)]
        with self.channel(opts) as ch:
            stub = pb_grpc.ExecutionStub(ch)
            got = 0
            last = None
            for ev in stub.ExecuteStream(command("yes 100000"), timeout=120,
                                         metadata=self.metadata()):
                if ev.WhichOneof("event") == "output":
                    self.assertEqual(ev.output.offset, got)
                    if got == 0:
                        time.sleep(0.5)  # a stalled reader: the worker must wait for window
                    got += len(ev.output.data)
                last = ev
            self.assertEqual(last.completion.error, "")
            self.assertEqual(got, 200000)
            self.assertEqual(last.completion.status, pb.COMPLETION_STATUS_SUCCEEDED)

    def test_deadline_exceeded_mid_execution(self):
        with self.channel() as ch:
            stub = pb_grpc.ExecutionStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Execute(command("sleep 60000"), timeout=0.5, metadata=self.metadata())
            self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)


class H2cInterop(Interop, unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-interop-")
        cls.worker = Worker(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def channel(self, options=None):
        return grpc.insecure_channel("127.0.0.1:%d" % self.worker.port, options=options)


def make_pki(d):
    sh = """set -e; cd '%s'; exec >/dev/null 2>&1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=interop-ca
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile san.ext
    openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=py-client
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2
    """ % d
    subprocess.run(["sh", "-c", sh], check=True)


class TlsInterop(Interop, unittest.TestCase):
    """h2 over TLS with mTLS (CN=py-client) and a token caller, both restricted by subject."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-interop-tls-")
        make_pki(cls.tmp)
        yaml = ("    tls: { cert_file: %s/server.pem, key_file: %s/server.key,"
                " client_ca_file: %s/ca.pem }\n"
                "    auth:\n"
                "      callers:\n"
                "        - { name: py, cert_subject: py-client, subjects: ['*'] }\n"
                "        - { name: tok, token_env: SBX_INTEROP_TOKEN, subjects: [bob] }\n"
                % (cls.tmp, cls.tmp, cls.tmp))
        cls.worker = Worker(cls.tmp, yaml, env={"SBX_INTEROP_TOKEN": "interop-token"})

    @classmethod
    def tearDownClass(cls):
        cls.worker.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def read(self, name):
        with open(os.path.join(self.tmp, name), "rb") as f:
            return f.read()

    def channel(self, options=None):
        creds = grpc.ssl_channel_credentials(self.read("ca.pem"), self.read("client.key"),
                                             self.read("client.pem"))
        return grpc.secure_channel("localhost:%d" % self.worker.port, creds, options=options)

    def test_token_caller_may_assert_its_subject(self):
        creds = grpc.ssl_channel_credentials(self.read("ca.pem"))
        with grpc.secure_channel("localhost:%d" % self.worker.port, creds) as ch:
            stub = pb_grpc.ExecutionStub(ch)
            c = stub.Execute(command("echo bob", "bob"), timeout=60,
                             metadata=[("authorization", "Bearer interop-token")])
            self.assertEqual(c.result.stdout, b"bob\n")

    def test_token_caller_may_not_assert_another_subject(self):
        creds = grpc.ssl_channel_credentials(self.read("ca.pem"))
        with grpc.secure_channel("localhost:%d" % self.worker.port, creds) as ch:
            stub = pb_grpc.ExecutionStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Execute(command("echo eve", "eve"), timeout=60,
                             metadata=[("authorization", "Bearer interop-token")])
            self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)

    def test_wrong_token_is_unauthenticated(self):
        creds = grpc.ssl_channel_credentials(self.read("ca.pem"))
        with grpc.secure_channel("localhost:%d" % self.worker.port, creds) as ch:
            stub = pb_grpc.ExecutionStub(ch)
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Execute(command("echo x", "bob"), timeout=60,
                             metadata=[("authorization", "Bearer wrong")])
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)

    def handshake(self, alpn):
        """A TLS handshake offering only the ALPN protocols alpn; returns the one chosen."""
        ctx = ssl.create_default_context(cafile=os.path.join(self.tmp, "ca.pem"))
        ctx.set_alpn_protocols(alpn)
        with socket.create_connection(("127.0.0.1", self.worker.port), timeout=30) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                return tls.selected_alpn_protocol()

    def test_client_that_does_not_offer_h2_is_refused_in_the_handshake(self):
        # gRPC is HTTP/2 only (RFC 7540 §3.3): a client offering only http/1.1 gets the
        # no_application_protocol alert, never a fallback to HTTP/1.1 over TLS.
        self.assertEqual(self.handshake(["h2"]), "h2")
        with self.assertRaises(ssl.SSLError) as cm:
            self.handshake(["http/1.1"])
        self.assertIn("alert no application protocol", str(cm.exception))
        self.assertEqual(self.handshake(["http/1.1", "h2"]), "h2")


class TlsFiles(unittest.TestCase):
    """A TLS file that does not load stops the worker before it listens, with an error naming
    the file, its setting and the fix."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-interop-tlsfiles-")
        make_pki(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start(self, cert, key, client_ca):
        d = self.tmp
        cfg = os.path.join(d, "bad.yaml")
        with open(cfg, "w") as f:
            f.write("sandbox:\n  default_profile: fake\n  secret_file: %s/secret\n"
                    "  runtime_dir: %s/run\n  worker:\n    listen: 127.0.0.1:0\n"
                    "    tls: { cert_file: %s/%s, key_file: %s/%s, client_ca_file: %s/%s }\n"
                    "    auth:\n      callers:\n"
                    "        - { name: py, cert_subject: py-client, subjects: ['*'] }\n"
                    "  profiles:\n    fake: { type: fake, scope: per_call }\n"
                    % (d, d, d, cert, d, key, d, client_ca))
        p = subprocess.run([ARGS.worker, "--config", cfg], capture_output=True, text=True,
                           timeout=60, preexec_fn=die_with_parent())
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("listening", p.stderr)
        return p.stderr

    def test_each_file_that_does_not_load_is_named_with_its_setting_and_fix(self):
        d = self.tmp
        cases = [
            (("none.pem", "server.key", "ca.pem"),
             "cannot load the server certificate chain '%s/none.pem' "
             "(sandbox.worker.tls.cert_file)" % d, "give a readable PEM file"),
            (("server.key", "server.key", "ca.pem"),
             "cannot load the server certificate chain '%s/server.key'" % d, "then its CA chain"),
            (("server.pem", "ca.pem", "ca.pem"),
             "cannot load the server key '%s/ca.pem' (sandbox.worker.tls.key_file)" % d,
             "unencrypted PEM private key"),
            (("server.pem", "client.key", "ca.pem"),
             "the key does not match the certificate of cert_file '%s/client.key' "
             "(sandbox.worker.tls.key_file)" % d,
             "give the key the server certificate was issued for"),
            (("server.pem", "server.key", "server.key"),
             "cannot load the client CA '%s/server.key' (sandbox.worker.tls.client_ca_file)" % d,
             "CA certificates that sign the callers' client certificates"),
        ]
        for files, what, fix in cases:
            with self.subTest(files=files):
                err = self.start(*files)
                self.assertIn("worker TLS: " + what, err)
                self.assertIn(fix, err)


class Drain(unittest.TestCase):
    def test_sigterm_lets_in_flight_executions_finish_and_exits_0(self):
        tmp = tempfile.mkdtemp(prefix="sbx-drain-")
        w = None
        try:
            w = Worker(tmp)
            ch = grpc.insecure_channel("127.0.0.1:%d" % w.port)
            stub = pb_grpc.ExecutionStub(ch)
            stream = stub.ExecuteStream(command("echo before; sleep 1500; echo after"),
                                        timeout=60)
            seen = b""
            while b"before\n" not in seen:  # the execution is running
                seen += next(stream).output.data
            w.proc.send_signal(signal.SIGTERM)
            rest = list(stream)
            self.assertEqual(rest[-1].completion.result.stdout, b"before\nafter\n")
            self.assertEqual(w.proc.wait(timeout=60), 0)
            ch.close()
            # and nothing listens any more: new calls are refused
            with grpc.insecure_channel("127.0.0.1:%d" % w.port) as ch2:
                with self.assertRaises(grpc.RpcError) as cm:
                    pb_grpc.ExecutionStub(ch2).Execute(command("echo late"), timeout=5)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        finally:
            if w and w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
            shutil.rmtree(tmp, ignore_errors=True)


class CliRemote(unittest.TestCase):
    """The `sbx` command with --broker remote --endpoint URL, against a real worker."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-cli-remote-")
        # the corpus' own configuration, with a private secret file
        with open(ARGS.corpus_config) as f:
            text = f.read()
        cls.config = os.path.join(cls.tmp, "corpus.yaml")
        with open(cls.config, "w") as f:
            f.write(text.replace("sandbox:\n", "sandbox:\n  secret_file: %s/secret\n" % cls.tmp, 1))
        cls.proc = subprocess.Popen([ARGS.worker, "--config", cls.config, "--listen",
                                     "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                                     preexec_fn=die_with_parent())
        m = re.search(r"listening on port (\d+)", cls.proc.stderr.readline())
        if not m:
            cls.proc.kill()
            raise RuntimeError("worker did not start")
        cls.endpoint = "http://127.0.0.1:%s" % m.group(1)
        threading.Thread(target=cls.proc.stderr.read, daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(timeout=60)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def sbx(self, *args):
        env = dict(os.environ, XDG_STATE_HOME=self.tmp, XDG_CONFIG_HOME=self.tmp)
        return subprocess.run([ARGS.sbx, "--config", self.config, "--broker", "remote",
                               "--endpoint", self.endpoint] + list(args),
                              capture_output=True, text=True, env=env, timeout=120,
                              stdin=subprocess.DEVNULL)  # sbx forwards a non-terminal stdin

    def test_sbx_run_through_the_remote_broker(self):
        r = self.sbx("run", "--", "echo", "remote", "hello")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "remote hello\n")

    def test_sbx_replay_through_the_remote_broker_is_identical(self):
        r = self.sbx("replay", ARGS.corpus)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--sbx")
    p.add_argument("--corpus")
    p.add_argument("--corpus-config")
    ARGS, rest = p.parse_known_args()
    load_stubs()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
