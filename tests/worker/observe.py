#!/usr/bin/python3
"""observe.py - what an operator sees of a real sbx-worker process: one JSON log line per call
and per authentication failure on stderr (or worker.log_file, reopened on SIGHUP), the level
setting (config key and --log-level), and the Prometheus metrics on their own listener, fetched
over HTTP and parsed by an independent parser (Debian's python3-prometheus-client). Also the
worker's command line: one exit-status table for sbx-worker and `sbx worker serve`, and
--listen applied before the file is validated.

usage: observe.py --worker PATH/sbx-worker --sbx PATH/sbx --stubs BUILD/gen/python
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from die_with_parent import die_with_parent  # noqa: E402 (tests/support)

ARGS = None
TOKEN = "observe-token-0123456789abcdef"


def load_stubs():
    sys.path.insert(0, ARGS.stubs)
    global grpc, pb, pb_grpc, health_pb2, health_pb2_grpc, prom_parser
    import grpc  # noqa: F401
    from sbx.v1 import execution_pb2 as pb  # noqa: F401
    from sbx.v1 import execution_pb2_grpc as pb_grpc  # noqa: F401
    import health_pb2  # noqa: F401
    import health_pb2_grpc  # noqa: F401
    from prometheus_client import parser as prom_parser  # noqa: F401


def write_config(tmp, worker_yaml, name="worker.yaml"):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(
            "sandbox:\n"
            "  default_profile: fake\n"
            "  secret_file: %s/secret\n"
            "  runtime_dir: %s/run\n"
            "  broker: { flavor: thread, threads: 4 }\n"
            "  worker:\n"
            "%s"
            "  profiles:\n"
            "    fake: { type: fake, scope: per_call }\n" % (tmp, tmp, worker_yaml))
    return path


class Worker:
    """An sbx-worker subprocess; stderr lines are collected in self.lines."""

    def __init__(self, tmp, worker_yaml, args=(), env=None):
        cfg = write_config(tmp, worker_yaml, "worker-%d.yaml" % id(self))
        self.proc = subprocess.Popen([ARGS.worker, "--config", cfg] + list(args),
                                     stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})),
                                     preexec_fn=die_with_parent())
        first = self.proc.stderr.readline()
        m = re.search(r"listening on port (\d+)", first)
        if not m:
            rest = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError("worker did not start: %r %r" % (first, rest))
        self.port = int(m.group(1))
        mm = re.search(r"metrics on port (\d+)", first)
        self.metrics_port = int(mm.group(1)) if mm else None
        self.lines = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()

    def json_lines(self):
        with self.cond:
            return [json.loads(l) for l in self.lines if l.startswith("{")]

    def wait_for(self, pred, what):
        """Waits until pred(json_lines) holds (log lines are written by their own thread)."""
        deadline = time.monotonic() + 30
        with self.cond:
            while True:
                lines = [json.loads(l) for l in self.lines if l.startswith("{")]
                if pred(lines):
                    return lines
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no log line for %s in %r" % (what, self.lines))
                self.cond.wait(left)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise


def command(shell, subject="agent-1", task_id=None):
    req = pb.ExecutionRequest(profile="fake", principal=pb.Principal(subject=subject))
    req.task_id = task_id or os.urandom(8).hex()
    req.run_command.shell = shell
    return req


def scrape(port, path="/metrics"):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30) as r:
        return r.headers.get("Content-Type"), r.read().decode()


def samples(text):
    """{(name, frozenset(labels.items())): value} through prometheus_client's parser."""
    out = {}
    for fam in prom_parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(smp, name, **labels):
    return smp.get((name, frozenset(labels.items())), 0)


class ObservedWorker(unittest.TestCase):
    """One worker with a token caller and a metrics listener; calls of every kind."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-observe-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.w = Worker(cls.tmp,
                       "    listen: 127.0.0.1:0\n"
                       "    metrics_listen: 127.0.0.1:0\n"
                       "    auth:\n"
                       "      callers:\n"
                       "        - { name: ci, token_env: OBSERVE_TOKEN, subjects: [agent-1] }\n",
                       env={"OBSERVE_TOKEN": TOKEN})
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.w.port)
        cls.stub = pb_grpc.ExecutionStub(cls.channel)
        good = [("authorization", "Bearer " + TOKEN)]
        cls.ok_task = "observe-ok-task"
        cls.stub.Execute(command("echo hello", task_id=cls.ok_task), metadata=good, timeout=30)
        list(cls.stub.ExecuteStream(command("echo streamed"), metadata=good, timeout=30))
        cls.stub.Execute(command("exit 3"), metadata=good, timeout=30)
        cls.stub.Describe(pb.DescribeRequest(), metadata=good, timeout=30)
        attach = pb.ExecutionRequest(profile="fake", principal=pb.Principal(subject="agent-1"),
                                     task_id="observe-attach")
        attach.attach_command.command_id = 1  # no session: refused, but labelled by its op
        cls.stub.Execute(attach, metadata=good, timeout=30)
        health_pb2_grpc.HealthStub(cls.channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        cls.codes = []
        for md, subject in (([("authorization", "Bearer wrong-token")], "agent-1"),
                            ([], "agent-1"), (good, "someone-else")):
            try:
                cls.stub.Execute(command("echo no", subject=subject), metadata=md, timeout=30)
                cls.codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as e:
                cls.codes.append(e.code())
        # nghttp2 closes a stream (and the worker counts the call) while it sends the end of the
        # response, so every call above is counted by now; later tests add their own calls.
        cls.metrics = scrape(cls.w.metrics_port)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.w.stop()

    def test_refused_calls_have_the_expected_codes(self):
        self.assertEqual(self.codes, [grpc.StatusCode.UNAUTHENTICATED,
                                      grpc.StatusCode.UNAUTHENTICATED,
                                      grpc.StatusCode.PERMISSION_DENIED])

    def test_one_json_line_per_call_with_its_fields(self):
        lines = self.w.wait_for(lambda ls: sum(1 for l in ls if l["event"] == "call") >= 4,
                                "four calls")
        ok = [l for l in lines if l.get("task_id") == self.ok_task]
        self.assertEqual(len(ok), 1, lines)
        line = ok[0]
        for key in ("time", "level", "task_id", "caller", "principal", "profile", "provider",
                    "operation", "grpc_status", "status", "error_code", "duration_ms",
                    "bytes_out"):
            self.assertIn(key, line)
        self.assertRegex(line["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(line["level"], "info")
        self.assertEqual(line["caller"], "ci")
        self.assertEqual(line["principal"], "agent-1")
        self.assertEqual(line["profile"], "fake")
        self.assertEqual(line["provider"], "fake")
        self.assertEqual(line["operation"], "run_command")
        self.assertEqual(line["method"], "Execute")
        self.assertEqual(line["grpc_status"], "OK")
        self.assertEqual(line["status"], "SUCCEEDED")
        self.assertEqual(line["error_code"], "NONE")
        self.assertGreater(line["bytes_out"], 5)
        self.assertGreaterEqual(line["duration_ms"], 0)
        methods = sorted(l["method"] for l in lines if l["event"] == "call")
        self.assertIn("ExecuteStream", methods)
        self.assertIn("Describe", methods)

    def test_health_probes_are_not_logged_at_info(self):
        lines = self.w.wait_for(lambda ls: sum(1 for l in ls if l["event"] == "call") >= 4,
                                "four calls")
        self.assertFalse([l for l in lines if l.get("method") == "Check"], lines)

    def test_auth_failures_have_their_own_lines_without_the_token(self):
        lines = self.w.wait_for(
            lambda ls: sum(1 for l in ls if l["event"] == "auth_failure") >= 3, "auth failures")
        fails = [l for l in lines if l["event"] == "auth_failure"]
        self.assertEqual(sorted(l["reason"] for l in fails),
                         ["principal_not_allowed", "unauthenticated", "unauthenticated"])
        for l in fails:
            self.assertEqual(l["level"], "warn")
            self.assertIn("message", l)
        denied = [l for l in fails if l["reason"] == "principal_not_allowed"][0]
        self.assertEqual(denied["caller"], "ci")
        self.assertEqual(denied["principal"], "someone-else")
        with self.w.cond:
            text = "".join(self.w.lines)
        self.assertNotIn(TOKEN, text)
        self.assertNotIn("wrong-token", text)

    def test_metrics_are_prometheus_text_with_the_calls(self):
        ctype, text = self.metrics
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        smp = samples(text)
        calls = "sbx_worker_calls_total"
        self.assertEqual(value(smp, calls, operation="run_command", status="SUCCEEDED",
                               error_code="NONE"), 3)  # echo, streamed echo, exit 3
        self.assertEqual(value(smp, calls, operation="describe", status="NONE",
                               error_code="NONE"), 1)
        self.assertEqual(value(smp, calls, operation="attach_command", status="FAILED",
                               error_code="INVALID_ARGUMENT"), 1)
        grpcs = "sbx_worker_grpc_responses_total"
        self.assertEqual(value(smp, grpcs, method="Execute", grpc_code="UNAUTHENTICATED"), 2)
        self.assertEqual(value(smp, grpcs, method="Execute", grpc_code="PERMISSION_DENIED"), 1)
        self.assertEqual(value(smp, grpcs, method="ExecuteStream", grpc_code="OK"), 1)
        self.assertEqual(value(smp, grpcs, method="Check", grpc_code="OK"), 1)
        auth = "sbx_worker_auth_failures_total"
        self.assertEqual(value(smp, auth, reason="unauthenticated"), 2)
        self.assertEqual(value(smp, auth, reason="principal_not_allowed"), 1)
        hist = "sbx_worker_call_duration_seconds"
        # the refused principal's request was decoded (a run_command without a completion)
        self.assertEqual(value(smp, calls, operation="run_command", status="NONE",
                               error_code="NONE"), 1)
        self.assertEqual(value(smp, calls, operation="none", status="NONE",
                               error_code="NONE"), 2)  # refused before decoding
        self.assertEqual(value(smp, hist + "_count", operation="run_command"), 4)
        self.assertEqual(value(smp, hist + "_bucket", operation="run_command", le="+Inf"), 4)
        self.assertGreaterEqual(value(smp, hist + "_sum", operation="run_command"), 0)
        self.assertGreater(value(smp, "sbx_worker_response_bytes_total",
                                 operation="run_command"), 0)
        # per_call: each of the three runs made its sandbox and removed it again
        sb = dict(profile="fake", provider="fake")
        self.assertEqual(value(smp, "sbx_sandboxes_created_total", **sb), 3)
        self.assertEqual(value(smp, "sbx_sandboxes_removed_total", **sb), 3)
        self.assertEqual(value(smp, "sbx_sandboxes_live", **sb), 0)
        self.assertEqual(value(smp, "sbx_worker_executions_queue_limit"), 1024)
        self.assertEqual(value(smp, "sbx_worker_draining"), 0)
        info = [v for (name, _), v in smp.items() if name == "sbx_worker_info"]
        self.assertEqual(info, [1])

    def test_in_flight_gauge_counts_a_running_execution(self):
        good = [("authorization", "Bearer " + TOKEN)]
        fut = self.stub.Execute.future(command("sleep 60000"), metadata=good, timeout=120)
        try:
            deadline = time.monotonic() + 30
            while True:
                smp = samples(scrape(self.w.metrics_port)[1])
                if value(smp, "sbx_worker_executions_in_flight") >= 1 and \
                        value(smp, "sbx_sandboxes_live", profile="fake", provider="fake") >= 1:
                    break
                self.assertLess(time.monotonic(), deadline, "the execution never showed")
                time.sleep(0.05)
        finally:
            fut.cancel()

    def test_other_paths_are_404(self):
        with self.assertRaises(urllib.error.HTTPError) as cm:
            scrape(self.w.metrics_port, "/")
        self.assertEqual(cm.exception.code, 404)

    def test_a_nul_byte_in_the_request_is_400_at_once(self):
        """A NUL in the request is refused with 400 as soon as it arrives. Before, the search for
        the end of the head stopped at the NUL, so the one scrape thread waited out its 5 s
        deadline and then served /metrics anyway (the path ended at the NUL)."""
        import socket
        s = socket.create_connection(("127.0.0.1", self.w.metrics_port), timeout=4)
        self.addCleanup(s.close)
        s.sendall(b"GET /metrics\x00 HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while True:
            chunk = s.recv(4096)  # socket.timeout (a failure) if nothing comes within 4 s
            if not chunk:
                break
            answer += chunk
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:80])
        self.assertIn(b"NUL", answer)

    def test_a_scraper_sending_a_byte_at_a_time_holds_the_listener_5_s_at_most(self):
        """The scrape thread serves one scraper at a time: one that trickles its request (a
        byte every 0.4 s, never done) is dropped 5 s after it connected, and a real scrape
        behind it is answered. Before, each byte renewed the 5 s socket timeout, so it held
        the thread for as long as it kept trickling (here 14 s) and the scrape timed out."""
        import socket
        slow = socket.create_connection(("127.0.0.1", self.w.metrics_port))
        self.addCleanup(slow.close)
        stop = threading.Event()

        def trickle():
            for ch in b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 20:
                if stop.wait(0.4):
                    return
                try:
                    slow.send(bytes([ch]))
                except OSError:
                    return

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        time.sleep(0.3)  # the trickler holds the scrape thread now
        started = time.monotonic()
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.w.metrics_port,
                                    timeout=9) as r:
            self.assertEqual(r.status, 200)
        waited = time.monotonic() - started
        stop.set()
        t.join()
        self.assertLess(waited, 8.0)


class LogSettings(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-observe-log-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.workers = []

    def tearDown(self):
        for w in self.workers:
            w.stop()

    def start(self, worker_yaml, args=()):
        w = Worker(self.tmp, "    listen: 127.0.0.1:0\n" + worker_yaml, args=args)
        self.workers.append(w)
        return w

    def call(self, w, shell="echo x", subject="agent-1"):
        with grpc.insecure_channel("127.0.0.1:%d" % w.port) as ch:
            pb_grpc.ExecutionStub(ch).Execute(command(shell, subject=subject), timeout=30)

    def test_level_warn_in_the_file_drops_call_lines(self):
        w = self.start("    log_level: warn\n")
        self.call(w)
        self.call(w, "exit 1")
        self.assertEqual(w.stop(), 0)
        self.assertEqual(w.json_lines(), [])

    def test_log_level_flag_overrides_the_file(self):
        w = self.start("    log_level: warn\n", args=["--log-level", "info"])
        self.call(w)
        w.wait_for(lambda ls: any(l["event"] == "call" for l in ls), "a call at info")

    def test_log_file_is_reopened_on_sighup(self):
        path = os.path.join(self.tmp, "worker.log")
        w = self.start("    log_file: %s\n" % path)
        self.call(w, subject="before-rotation")
        wait_file_has(path, "before-rotation")
        os.rename(path, path + ".1")
        w.proc.send_signal(signal.SIGHUP)
        wait_file_has(path, '"event":"reopened"')
        self.call(w, subject="after-rotation")
        wait_file_has(path, "after-rotation")
        self.assertEqual(w.stop(), 0, "SIGHUP must not stop the worker")
        with open(path + ".1") as f:
            self.assertNotIn("after-rotation", f.read())
        for name in (path, path + ".1"):
            with open(name) as f:
                for line in f:
                    json.loads(line)  # every line is one JSON object


class RecordFile(unittest.TestCase):
    """worker.record rotates by size, keeps record_keep old files, and is reopened on SIGHUP."""

    def frames(self, path):
        out = []
        with open(path, "rb") as f:
            data = f.read()
        off = 0
        while off < len(data):
            n = int.from_bytes(data[off:off + 4], "big")
            rec = pb.Recording()
            rec.ParseFromString(data[off + 4:off + 4 + n])
            out.append(rec)
            off += 4 + n
        self.assertEqual(off, len(data), "%s ends inside a frame" % path)
        return out

    def test_record_rotates_by_size_and_keeps_a_bounded_number_of_files(self):
        tmp = tempfile.mkdtemp(prefix="sbx-observe-rec-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        rec = os.path.join(tmp, "record.bin")
        w = Worker(tmp, "    listen: 127.0.0.1:0\n    record: %s\n"
                        "    record_max_bytes: 2048\n    record_keep: 2\n" % rec)
        try:
            with grpc.insecure_channel("127.0.0.1:%d" % w.port) as ch:
                stub = pb_grpc.ExecutionStub(ch)
                for i in range(40):
                    stub.Execute(command("echo call-%d" % i), timeout=30)
                names = sorted(os.listdir(tmp))
                self.assertIn("record.bin", names)
                self.assertIn("record.bin.1", names)
                self.assertIn("record.bin.2", names)
                self.assertNotIn("record.bin.3", names)
                for name in ("record.bin", "record.bin.1", "record.bin.2"):
                    path = os.path.join(tmp, name)
                    self.assertLessEqual(os.path.getsize(path), 2048)
                    self.assertTrue(self.frames(path), name)
                # the newest frames are in the current file, in order
                last = self.frames(rec)[-1]
                self.assertEqual(last.request.run_command.shell, "echo call-39")
                # SIGHUP after the file was moved: a new file receives the next frames
                os.rename(rec, rec + ".moved")
                w.proc.send_signal(signal.SIGHUP)
                w.wait_for(lambda ls: any(l["event"] == "reopened" for l in ls), "reopened")
                stub.Execute(command("echo after-hup"), timeout=30)
                got = self.frames(rec)
                self.assertEqual([r.request.run_command.shell for r in got], ["echo after-hup"])
        finally:
            self.assertEqual(w.stop(), 0)


def wait_file_has(path, text):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                if text in f.read():
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise AssertionError("%s never contained %r" % (path, text))


class CommandLine(unittest.TestCase):
    """sbx-worker and `sbx worker serve` share options and one exit-status table."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-observe-cli-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def programs(self):
        return ([ARGS.worker], [ARGS.sbx, "worker", "serve"])

    def run_prog(self, argv):
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    def test_config_error_exits_3_from_both(self):
        cfg = write_config(self.tmp, "    listen: 127.0.0.1:0\n    bogus_key: 1\n")
        for prog in self.programs():
            r = self.run_prog(prog + ["--config", cfg])
            self.assertEqual(r.returncode, 3, (prog, r.stderr))
            self.assertIn("bogus_key", r.stderr)

    def test_usage_error_exits_2_from_both(self):
        for prog in self.programs():
            r = self.run_prog(prog + ["--no-such-flag"])
            self.assertEqual(r.returncode, 2, (prog, r.stderr))
            r = self.run_prog(prog + ["--listen"])
            self.assertEqual(r.returncode, 2, (prog, r.stderr))

    def test_bad_log_level_flag_is_a_config_error_naming_the_flag(self):
        cfg = write_config(self.tmp, "    listen: 127.0.0.1:0\n")
        for prog in self.programs():
            r = self.run_prog(prog + ["--config", cfg, "--log-level", "loud"])
            self.assertEqual(r.returncode, 3, (prog, r.stderr))
            self.assertIn("--log-level", r.stderr)

    def test_listen_flag_replaces_the_file_before_it_is_checked(self):
        # The file's address is not loopback and has no TLS: alone it is refused...
        cfg = write_config(self.tmp, "    listen: 0.0.0.0:7443\n")
        r = self.run_prog([ARGS.worker, "--config", cfg])
        self.assertEqual(r.returncode, 3, r.stderr)
        # ...but --listen replaces it before validation, so the worker starts.
        w = subprocess.Popen([ARGS.worker, "--config", cfg, "--listen", "127.0.0.1:0"],
                             stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
        first = w.stderr.readline()
        w.send_signal(signal.SIGTERM)
        rest = w.stderr.read()
        self.assertEqual(w.wait(timeout=60), 0, first + rest)
        self.assertIn("listening on port", first, rest)

    def test_listen_flag_off_loopback_is_checked_and_named(self):
        cfg = write_config(self.tmp, "    listen: 127.0.0.1:0\n")
        for prog in self.programs():
            r = self.run_prog(prog + ["--config", cfg, "--listen", "0.0.0.0:0"])
            self.assertEqual(r.returncode, 3, (prog, r.stderr))
            self.assertIn("--listen", r.stderr)
            self.assertIn("TLS", r.stderr)

    def test_secret_file_in_a_missing_directory_is_a_config_error(self):
        cfg = write_config(self.tmp, "    listen: 127.0.0.1:0\n")
        with open(cfg) as f:
            text = f.read().replace("secret_file: %s/secret" % self.tmp,
                                    "secret_file: %s/typo/secret" % self.tmp)
        with open(cfg, "w") as f:
            f.write(text)
        for prog in self.programs():
            r = self.run_prog(prog + ["--config", cfg])
            self.assertEqual(r.returncode, 3, (prog, r.stderr))
            self.assertIn("sandbox.secret_file", r.stderr)
            self.assertIn("does not exist", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "typo")))

    def test_host_network_profile_needs_callers(self):
        # A local profile with network allow and host_network: true, or a docker one with
        # allow on network host accepted by shared_network: true, runs programs in the host's
        # network namespace, where they reach this loopback listener: without callers any of
        # them could act as any principal, so the worker refuses to start.
        cfg = os.path.join(self.tmp, "hostnet.yaml")
        for block in ("      type: local\n"
                      "      policy: { network_egress: allow }\n"
                      "      local: { host_network: true }\n",
                      "      type: docker\n"
                      "      policy: { network_egress: allow }\n"
                      "      docker: { image: busybox, network: host, shared_network: true }\n"):
            with open(cfg, "w") as f:
                f.write("sandbox:\n"
                        "  default_profile: net\n"
                        "  secret_file: %s/secret\n"
                        "  runtime_dir: %s/run\n"
                        "  broker: { flavor: thread, threads: 2 }\n"
                        "  worker: { listen: '127.0.0.1:0' }\n"
                        "  profiles:\n"
                        "    net:\n" % (self.tmp, self.tmp) + block)
            for prog in self.programs():
                r = self.run_prog(prog + ["--config", cfg])
                self.assertEqual(r.returncode, 3, (prog, block, r.stderr))
                self.assertIn("profile 'net' runs programs in the host's network namespace",
                              r.stderr)
                self.assertIn("worker.auth.callers", r.stderr)

    def test_metrics_listen_in_use_is_a_config_error(self):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        cfg = write_config(self.tmp, "    listen: 127.0.0.1:0\n")
        r = self.run_prog([ARGS.worker, "--config", cfg, "--metrics-listen",
                           "127.0.0.1:%d" % s.getsockname()[1]])
        s.close()
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("metrics_listen", r.stderr)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--sbx", required=True)
    ap.add_argument("--stubs", required=True)
    ARGS, rest = ap.parse_known_args()
    load_stubs()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
