"""The client: a Client holds one gRPC channel to an sbx-worker (or a balancer in front of a
fleet); a Sandbox is one session on it, created by its first operation and reconnected from its
handle by any later Client. Everything goes through sbx.v1.Execution (Execute, ExecuteStream,
Describe); the request and completion are the contract's own messages (sbx.v1.*_pb2, generated
when this package is installed).
"""
import os
import threading
import uuid

import grpc

from . import errors

try:
    from .v1 import execution_pb2 as pb
    from .v1 import execution_pb2_grpc as pb_grpc
except ImportError as e:  # running from a source tree that was never built
    raise ImportError(
        "sbx: the generated contract modules (sbx/v1/execution_pb2*.py) are missing; install "
        "the package (pip install ./sdk/python), which generates them from proto/") from e

# The worker's default worker.max_message_bytes (16 MiB). gRPC clients default to receiving
# 4 MiB, which cannot carry a completion with a few MiB of output: both directions are set to
# the worker's limit. Raise both here and in the worker's configuration together.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024

_OUTCOMES = {v.number: v.name[len("OUTCOME_"):] for v in pb.Outcome.DESCRIPTOR.values}
_ERROR_CODES = {v.number: v.name[len("ERROR_CODE_"):] for v in pb.ErrorCode.DESCRIPTOR.values}
_STREAMS = {pb.STREAM_STDOUT: "stdout", pb.STREAM_STDERR: "stderr"}
_SUCCEEDED = pb.COMPLETION_STATUS_SUCCEEDED


class Result:
    """What one operation produced. A failing program is a Result (exit_code, outcome), never
    an exception; the raw ExecutionCompletion is `completion`."""

    def __init__(self, completion):
        r = completion.result
        self.completion = completion
        self.exit_code = r.exit_code
        self.signal = r.signal
        self.outcome = _OUTCOMES.get(r.outcome, "UNSPECIFIED")  # "OK", "NONZERO", ...
        self.stdout = r.stdout
        self.stderr = r.stderr
        self.stdout_truncated = r.stdout_truncated
        self.stderr_truncated = r.stderr_truncated
        self.value = r.value
        self.files = list(r.files)
        self.wall_us = r.wall_us
        self.cpu_us = r.cpu_us
        self.max_rss_kb = r.max_rss_kb
        self.command_id = r.command_id  # the sandbox's id of the command (start, attach)
        self.stdout_offset = r.stdout_offset  # stream offset of stdout[0] (attach from one)
        self.stderr_offset = r.stderr_offset
        self.notice = completion.notice

    @property
    def ok(self):
        """True when the program exited 0 (or a file operation succeeded)."""
        return self.outcome in ("OK", "UNSPECIFIED") and self.exit_code == 0

    @property
    def text(self):
        """stdout as text (UTF-8, undecodable bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    def __repr__(self):
        return "Result(outcome=%s, exit_code=%d, stdout=%r, stderr=%r)" % (
            self.outcome, self.exit_code, self.stdout[:80], self.stderr[:80])


class Output:
    """One chunk of output while a program runs: stream "stdout" or "stderr", its bytes, and
    the offset of data[0] within that stream."""

    __slots__ = ("stream", "data", "offset")

    def __init__(self, stream, data, offset):
        self.stream, self.data, self.offset = stream, data, offset

    def __repr__(self):
        return "Output(%s, %r, offset=%d)" % (self.stream, self.data, self.offset)


class Execution:
    """Iterates over the Output of a streaming operation; once exhausted, `result` holds the
    Result (a machinery failure is raised at the end of the iteration instead)."""

    def __init__(self, sandbox, call, locked=True):
        self._sandbox = sandbox
        self._call = call
        self._locked = locked  # holds the sandbox's lock until the end (not when following)
        self.result = None

    def __iter__(self):
        try:
            for event in self._call:
                kind = event.WhichOneof("event")
                if kind == "output":
                    o = event.output
                    yield Output(_STREAMS.get(o.stream, "stdout"), o.data, o.offset)
                elif kind == "completion":
                    self.result = self._sandbox._finish(event.completion)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
        finally:
            if self._locked:
                self._sandbox._lock.release()
        if self.result is None:
            raise errors.BrokerError("the stream ended without a completion")

    def cancel(self):
        """Stops the execution (the worker cancels it)."""
        self._call.cancel()


class Files:
    """File operations inside a sandbox (sandbox.files)."""

    def __init__(self, sandbox):
        self._sandbox = sandbox

    def write(self, path, content, mode=0o644, mkdirs=True):
        """Writes the whole file (bytes, or str as UTF-8)."""
        if isinstance(content, str):
            content = content.encode()
        req = self._sandbox._request()
        req.write_file.path = path
        req.write_file.content = content
        req.write_file.mode = mode
        req.write_file.mkdirs = mkdirs
        self._sandbox._execute(req)

    def read(self, path, offset=0, max_bytes=0):
        """The file's bytes (from offset, at most max_bytes; 0 = the whole rest)."""
        req = self._sandbox._request()
        req.read_file.path = path
        req.read_file.offset = offset
        req.read_file.max_bytes = max_bytes
        r = self._sandbox._execute(req)
        return r.files[0].content if r.files else r.stdout

    def list(self, path):
        """The directory's entries: sbx.v1.File messages (path, size, mode, kind, mtime_ms),
        sorted by path; each path is `path` joined with the entry's name ("." gives "./a"),
        whichever provider answered."""
        req = self._sandbox._request()
        req.list_files.path = path
        return self._sandbox._execute(req).files


class Sandbox:
    """One session: its first operation creates the sandbox (or, for a per_call profile, each
    operation gets a fresh one); later operations reuse it through the session handle, which the
    worker re-signs on every completion. `handle_bytes()` saves it; `Client.attach()` reconnects
    from it, in this process or another. Use as a context manager to destroy it at the end.
    Operations on one Sandbox run one at a time (the worker serializes a session anyway)."""

    def __init__(self, client, profile=None, handle=None, policy=None, name=None,
                 from_snapshot=None):
        self._client = client
        self.profile = profile
        self.policy = policy
        self.name = name
        self.from_snapshot = from_snapshot
        self._handle = handle
        self._lock = threading.Lock()
        self.files = Files(self)

    # ---- the session ----------------------------------------------------------------------

    @property
    def handle(self):
        """The session handle (sbx.v1.SessionHandle), None before the first operation."""
        return self._handle

    @property
    def session_id(self):
        return self._handle.session_id if self._handle is not None else None

    def handle_bytes(self):
        """The handle, serialized: pass it to Client.attach() to reconnect later."""
        if self._handle is None:
            raise errors.SessionNotFoundError("this sandbox has not run anything yet")
        return self._handle.SerializeToString()

    def close(self):
        """Destroys the sandbox (idempotent; nothing to do before the first operation)."""
        if self._handle is None or not self._handle.session_id:
            return
        if self._handle.status == pb.SESSION_STATUS_CLOSED:
            return
        req = self._request()
        req.destroy.SetInParent()
        self._execute(req)

    destroy = close

    def detach(self):
        """Forgets the session without destroying it (attach again from handle_bytes())."""
        h = self._handle
        self._handle = None
        return h

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- operations -----------------------------------------------------------------------

    def run(self, command, env=None, cwd=None, stdin=None, timeout=None):
        """Runs a command: a str is a /bin/sh line, a list an argv. Returns a Result."""
        return self._execute(self._command(command, env, cwd, stdin), timeout)

    def code(self, source, language="python", env=None, cwd=None, stdin=None, timeout=None):
        """Runs source code (stateful where the provider keeps a kernel). Returns a Result;
        `value` holds the display of the last expression."""
        return self._execute(self._code(source, language, env, cwd, stdin), timeout)

    def stream(self, command=None, code=None, language="python", env=None, cwd=None,
               stdin=None, timeout=None):
        """Like run() (or code() when code= is given), streaming: iterate over the returned
        Execution for Output chunks as they are printed; then read its `result`."""
        if (command is None) == (code is None):
            raise errors.InvalidArgumentError("stream() needs exactly one of command or code")
        req = (self._command(command, env, cwd, stdin) if code is None
               else self._code(code, language, env, cwd, stdin))
        self._lock.acquire()
        try:
            call = self._client._stub.ExecuteStream(req, **self._client._call_kwargs(timeout))
        except BaseException:
            self._lock.release()
            raise
        return Execution(self, call)

    # ---- detached commands ----------------------------------------------------------------
    # A detached command runs on in the sandbox (providers whose capabilities say `detach`:
    # local, managed docker); the sandbox keeps the last 256 KiB of each of its streams.
    # attach/follow/cancel do not wait for the sandbox's other operations (an attach may
    # follow for hours; a cancel must reach what another thread follows).

    def start(self, command, env=None, cwd=None, stdin=None, timeout=None):
        """Starts a command detached (stdin, if any, is sent first) and returns its id."""
        req = self._command(command, env, cwd, stdin)
        req.run_command.detach = True
        return self._execute(req, timeout).command_id

    def attach(self, command_id, stdout_offset=0, stderr_offset=0, timeout=None):
        """Waits for the end of a detached command and returns its Result, with its output from
        the offsets on (stdout_offset/stderr_offset say where it starts). timeout= stops
        waiting (TimeoutError), never the command. An offset older than what the sandbox keeps
        is an InvalidArgumentError naming the range kept; an unknown id is GoneError."""
        req = self._request()
        a = req.attach_command
        a.command_id, a.stdout_offset, a.stderr_offset = command_id, stdout_offset, stderr_offset
        return self._execute(req, timeout, locked=False)

    def follow(self, command_id, stdout_offset=0, stderr_offset=0, timeout=None):
        """Like attach(), streaming: iterate over the returned Execution for what the command
        printed from the offsets on, then its live output; then read its `result`."""
        req = self._request()
        a = req.attach_command
        a.command_id, a.stdout_offset, a.stderr_offset = command_id, stdout_offset, stderr_offset
        try:
            call = self._client._stub.ExecuteStream(req, **self._client._call_kwargs(timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
        return Execution(self, call, locked=False)

    def cancel(self, command_id, signal=0, timeout=None):
        """Stops a detached command (signal 0: SIGKILL to its whole tree) and returns how it
        ended (a command that ended already keeps its end)."""
        req = self._request()
        req.cancel_command.command_id = command_id
        req.cancel_command.signal = signal
        return self._execute(req, timeout, locked=False)

    def pause(self, timeout=None):
        """Freezes every process of the sandbox (memory, files and programs kept, no CPU) where
        the provider offers it (Capabilities.pause). Any later call resumes it first."""
        req = self._request()
        req.pause.SetInParent()
        self._execute(req, timeout)

    def resume(self, timeout=None):
        """Thaws a paused sandbox (a running one is left as it is)."""
        req = self._request()
        req.resume.SetInParent()
        self._execute(req, timeout)

    def expose(self, port, timeout=None):
        """Makes TCP port `port` of the sandbox reachable from outside it where the provider
        offers it (Capabilities.expose); returns (url, token): token is "" unless the listener
        needs one (send it as header X-Sbx-Expose-Token). The same port again returns the same
        URL; it closes with the sandbox. Through a worker, the URL is on the worker's host."""
        req = self._request()
        req.expose.port = port
        r = self._execute(req, timeout).completion.result
        return r.expose_url, r.expose_token

    def snapshot(self, name, timeout=None):
        """Keeps the sandbox's workspace as snapshot `name` (the worker's store, this
        principal's only) where the provider offers it (Capabilities.snapshot); returns the
        sbx.v1.Snapshot (name, size, created_at_ms). Client.sandbox(from_snapshot=name) forks
        a new sandbox from it."""
        req = self._request()
        req.snapshot.name = name
        return self._execute(req, timeout).completion.result.snapshots[0]

    def install(self, manager, packages, timeout=None):
        """Installs packages with a package manager ("pip", "npm", "apt", ...)."""
        req = self._request()
        req.install_packages.manager = manager
        req.install_packages.packages.extend(packages)
        return self._execute(req, timeout)

    # ---- plumbing -------------------------------------------------------------------------

    def _request(self):
        c = self._client
        req = pb.ExecutionRequest(task_id=str(uuid.uuid4()))
        if self._handle is not None:
            req.session.CopyFrom(self._handle)
        elif self.profile:
            req.profile = self.profile
        if self.name and self._handle is None:
            req.session.name = self.name
        if self.from_snapshot and (self._handle is None or not self._handle.sandbox_id):
            req.from_snapshot = self.from_snapshot
        if c.principal is not None:
            req.principal.CopyFrom(c.principal)
        if self.policy:
            for key, value in self.policy.items():
                if key == "network_egress" and isinstance(value, str):
                    value = pb.NetworkEgress.Value("NETWORK_EGRESS_" + value.upper())
                if isinstance(value, (list, tuple)):
                    getattr(req.policy, key).extend(value)
                else:
                    setattr(req.policy, key, value)
        if c.agent:
            req.agent = c.agent
        return req

    def _command(self, command, env, cwd, stdin):
        req = self._request()
        rc = req.run_command
        if isinstance(command, str):
            rc.shell = command
        else:
            rc.argv.extend(command)
        self._fill(rc, env, cwd, stdin)
        return req

    def _code(self, source, language, env, cwd, stdin):
        req = self._request()
        req.run_code.language = language
        req.run_code.code = source
        self._fill(req.run_code, env, cwd, stdin)
        return req

    @staticmethod
    def _fill(op, env, cwd, stdin):
        if env:
            op.env.update(env)
        if cwd:
            op.cwd = cwd
        if stdin is not None:
            op.stdin = stdin.encode() if isinstance(stdin, str) else stdin

    def _execute(self, req, timeout=None, locked=True):
        if not locked:
            return self._call(req, timeout)
        with self._lock:
            return self._call(req, timeout)

    def _call(self, req, timeout):
        try:
            completion = self._client._stub.Execute(req, **self._client._call_kwargs(timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
        return self._finish(completion)

    def _finish(self, completion):
        if completion.HasField("session") and completion.session.session_id:
            self._handle = pb.SessionHandle()
            self._handle.CopyFrom(completion.session)
        if completion.status != _SUCCEEDED:
            raise errors.from_completion(completion,
                                         _ERROR_CODES.get(completion.error_code, "UNKNOWN"))
        return Result(completion)


class Client:
    """A connection to an sbx-worker.

    target: "host:port". Loopback workers speak h2c (the default here); anything else needs
    tls=True (or ca_file=) and, usually, a token (or token_env= naming the variable holding
    it) or a client certificate (cert_file= and key_file=). subject= is the principal subject
    the calls assert (the worker checks that the caller may). max_message_bytes must match the
    worker's worker.max_message_bytes (default 16 MiB). timeout= is the default deadline of
    every call, in seconds (None: no deadline).
    """

    def __init__(self, target, token=None, token_env=None, tls=False, ca_file=None,
                 cert_file=None, key_file=None, server_name=None, subject=None, agent=None,
                 max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, timeout=None, options=()):
        if token is None and token_env:
            token = os.environ.get(token_env)
            if not token:
                raise errors.ConfigError("token_env %s is not set (or empty)" % token_env)
        self.target = target
        self.agent = agent
        self.timeout = timeout
        self.principal = pb.Principal(subject=subject) if subject else None
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        opts = [("grpc.max_send_message_length", max_message_bytes),
                ("grpc.max_receive_message_length", max_message_bytes)]
        if server_name:
            opts.append(("grpc.ssl_target_name_override", server_name))
        opts.extend(options)
        if tls or ca_file or cert_file:
            def read(path):
                with open(path, "rb") as f:
                    return f.read()
            creds = grpc.ssl_channel_credentials(
                root_certificates=read(ca_file) if ca_file else None,
                private_key=read(key_file) if key_file else None,
                certificate_chain=read(cert_file) if cert_file else None)
            self._channel = grpc.secure_channel(target, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(target, options=opts)
        self._stub = pb_grpc.ExecutionStub(self._channel)

    def _call_kwargs(self, timeout):
        t = timeout if timeout is not None else self.timeout
        kw = {"metadata": self._metadata}
        if t is not None:
            kw["timeout"] = t
        return kw

    def sandbox(self, profile=None, policy=None, name=None, from_snapshot=None):
        """A new sandbox on profile (None: the worker's default profile); created by its first
        operation. policy: a dict of sbx.v1.Policy fields that narrow the profile's policy
        (e.g. {"timeout_ms": 5000, "network_egress": "deny"}). from_snapshot: the name of one
        of this principal's snapshots; the sandbox starts with its workspace (a fork)."""
        return Sandbox(self, profile=profile, policy=policy, name=name,
                       from_snapshot=from_snapshot)

    def snapshots(self, timeout=None):
        """This principal's snapshots on the worker (sbx.v1.Snapshot: name, size,
        created_at_ms), sorted by name."""
        req = self._store_request()
        req.list_snapshots.SetInParent()
        return list(self._store_call(req, timeout).result.snapshots)

    def delete_snapshot(self, name, timeout=None):
        """Deletes one of this principal's snapshots (GoneError when there is none)."""
        req = self._store_request()
        req.delete_snapshot.name = name
        self._store_call(req, timeout)

    def _store_request(self):
        req = pb.ExecutionRequest(task_id=str(uuid.uuid4()))
        if self.principal is not None:
            req.principal.CopyFrom(self.principal)
        return req

    def _store_call(self, req, timeout):
        try:
            c = self._stub.Execute(req, **self._call_kwargs(timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
        if c.status != _SUCCEEDED:
            raise errors.from_completion(c, _ERROR_CODES.get(c.error_code, "UNKNOWN"))
        return c

    def attach(self, handle, policy=None):
        """The sandbox of a saved handle (handle_bytes() or an sbx.v1.SessionHandle)."""
        if isinstance(handle, (bytes, bytearray)):
            h = pb.SessionHandle()
            h.ParseFromString(bytes(handle))
            handle = h
        if not handle.session_id:
            raise errors.InvalidArgumentError("the handle has no session_id")
        return Sandbox(self, profile=handle.profile, handle=handle, policy=policy)

    def describe(self, timeout=None):
        """The worker's profiles and their capabilities (sbx.v1.DescribeResponse)."""
        try:
            return self._stub.Describe(pb.DescribeRequest(), **self._call_kwargs(timeout))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def wait_ready(self, timeout=10):
        """Waits until the channel is connected (raises BrokerError after timeout seconds)."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise errors.BrokerError("no connection to %s within %ss" % (self.target, timeout))

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
