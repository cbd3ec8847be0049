"""cli_util.py - what the end-to-end tests of the `sbx` command share: the built binaries
(from the environment ctest sets), a private HOME and state directory per test class, running
`sbx` with a bounded wait, and a real sbx-worker on an ephemeral loopback port.

Environment (tests/cli/CMakeLists.txt sets it): SBX_CLI (the sbx binary), SBX_WORKER_BIN,
SBX_PROTOC, SBX_PROTO_DIR, SBX_GEN_DIR (where the Python protobuf code is generated).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from die_with_parent import die_with_parent  # noqa: E402 (tests/support)

SBX = os.environ.get("SBX_CLI", "")
WORKER = os.environ.get("SBX_WORKER_BIN", "")

# Longest a single sbx invocation may take in a test before it is a failure (a loaded CI
# machine creates a local sandbox in well under a second; this is only a hang guard).
RUN_TIMEOUT_S = 120


def protos():
    """The generated execution_pb2 module (protoc --python_out into SBX_GEN_DIR)."""
    gen = os.environ["SBX_GEN_DIR"]
    os.makedirs(gen, exist_ok=True)
    subprocess.run([os.environ["SBX_PROTOC"], "-I" + os.environ["SBX_PROTO_DIR"],
                    "--python_out=" + gen, "sbx/v1/execution.proto"], check=True)
    if gen not in sys.path:
        sys.path.insert(0, gen)
    from sbx.v1 import execution_pb2  # noqa: E402 (generated just above)
    return execution_pb2


class Env:
    """A private HOME (sessions, secrets) for the sbx invocations of one test class."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-cli-test-")
        os.chmod(self.tmp, 0o755)  # the sandboxes' mapped root searches runtime dirs in it
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_") or
                    k in ("SBX_CLI", "SBX_WORKER_BIN")}
        self.env.pop("XDG_STATE_HOME", None)
        self.env.pop("XDG_CONFIG_HOME", None)
        self.env["HOME"] = self.tmp
        self.env["XDG_STATE_HOME"] = os.path.join(self.tmp, "state")

    def run(self, *args, stdin=None, env=None, timeout=RUN_TIMEOUT_S, binary=True):
        """Runs sbx ARGS; returns CompletedProcess (stdout/stderr as bytes)."""
        e = dict(self.env, **(env or {}))
        return subprocess.run([SBX] + list(args), input=stdin, env=e, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=None if stdin is not None else subprocess.DEVNULL)

    def popen(self, *args, env=None, **kw):
        e = dict(self.env, **(env or {}))
        return subprocess.Popen([SBX] + list(args), env=e, preexec_fn=die_with_parent(), **kw)

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)


class Worker:
    """An sbx-worker on an ephemeral loopback port serving the local provider (h2c)."""

    def __init__(self, tmp, profiles=None, extra="", env=None):
        self.tmp = tmp
        cfg = os.path.join(tmp, "worker.yaml")
        profiles = profiles or "    wlocal: { type: local, scope: per_session }\n"
        with open(cfg, "w") as f:
            f.write("sandbox:\n"
                    "  default_profile: %s\n"
                    "  secret_file: %s/worker-secret\n"
                    "  node: cli-test-node\n"
                    "  broker: { flavor: thread, threads: 4 }\n"
                    "  worker:\n"
                    "    listen: 127.0.0.1:0\n"
                    "    drain_timeout_ms: 20000\n"
                    "%s"
                    "  profiles:\n%s" % (profiles.split(":")[0].strip(), tmp, extra, profiles))
        # SIGTERM: it serves local sandboxes, and stops as on stop() when the test dies.
        self.proc = subprocess.Popen([WORKER, "--config", cfg], stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True,
                                     env=dict(os.environ, **(env or {})),
                                     preexec_fn=die_with_parent(signal.SIGTERM))
        line = self.proc.stderr.readline()
        m = re.search(r"listening on port (\d+)", line)
        if not m:
            rest = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError("worker did not start: %r %r" % (line, rest))
        self.port = int(m.group(1))
        self.endpoint = "http://127.0.0.1:%d" % self.port
        self.log = []
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    if not SBX:
        print("SBX_CLI is not set (run through ctest)")
        sys.exit(2)
    unittest.main(verbosity=2)
