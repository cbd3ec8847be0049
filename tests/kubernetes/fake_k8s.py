#!/usr/bin/env python3
"""fake_k8s.py - a fake Kubernetes API server for the kubernetes provider's tests.

It serves the part of the core/v1 and networking.k8s.io/v1 REST API the provider uses, as the
API documents it: pods, secrets and networkpolicies (create, get, list with labelSelector,
delete), Status bodies for every error (401 Unauthorized, 403 Forbidden, 404 NotFound,
409 AlreadyExists, 422 Invalid), metadata the server owns (uid, resourceVersion,
creationTimestamp, deletionTimestamp), and pod status transitions (Pending -> Running ->
Succeeded/Failed, deletion with a grace period). Authentication: a bearer token or a client
certificate (TLS with a client CA); impersonation with Impersonate-User / Impersonate-Group,
authorized per user.

A "kubelet" thread runs each pod for real where it can: a container whose command is the
sbx-agent the provider's init container copies (/.sbx-bin/sbx-agent) starts the real static
sbx-agent (--agent) on a loopback address of its own (127.A.B.C, the pod IP), with the
environment the pod spec resolves (env valueFrom.secretKeyRef read from the stored Secret), so
the provider's agent path is exercised end to end. In-pod paths (--workdir, --socket) map to a
per-pod temporary directory.

Exec (GET .../pods/NAME/exec?command=...&stdin=..., upgraded to a WebSocket with subprotocol
v5.channel.k8s.io or v4.channel.k8s.io): the command runs as a local process; each binary
message is one channel byte (0 stdin, 1 stdout, 2 stderr, 3 the final Status, 255 close a
channel: v5 only) and its data; the Status is Success or Failure/NonZeroExitCode with the exit
code in details.causes, as the kubelet reports it.

Test control (not part of the Kubernetes API), under /_fake/:
  GET  /_fake/requests              every API request so far (method, path, user, groups, body)
  POST /_fake/config                {"pod_mode": "run"|"pending"|"fail", "allowed_users": [...],
                                     "fail": [{"method", "path" (regex), "status", "reason",
                                     "message", "count", "raw"}]} ("raw": that text, as
                                     text/html, instead of a Status: a proxy's page)
  POST /_fake/pods/NS/NAME/end      the pod's container exits (phase Failed, like an eviction)
  POST /_fake/pods/NS/NAME/stop     SIGSTOP the pod's agent (a running pod, unavailable agent)
  POST /_fake/pods/NS/NAME/cont     SIGCONT it
  POST /_fake/external              {"namespace", "name", "token"}: a pod sbx did not make,
                                     running an agent with that credential (attach_to)
  POST /_fake/object                {"group", "resource", "object"}: the object stored as it is,
                                     unvalidated and without a kubelet (what a broken or lying
                                     API server lists)

Prints "PORT <n>" on stdout once it listens; stops (killing every agent) on SIGTERM.
"""
import argparse
import base64
import copy
import hashlib
import struct
import datetime
import json
import os
import random
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
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from die_with_parent import die_with_parent  # noqa: E402 (tests/support)

AGENT_IN_POD = "/.sbx-bin/sbx-agent"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

RESOURCES = {
    ("", "pods"): "Pod",
    ("", "secrets"): "Secret",
    ("networking.k8s.io", "networkpolicies"): "NetworkPolicy",
}


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code, reason, message, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details is not None:
        body["details"] = details
    return body


class State:
    def __init__(self, args):
        self.lock = threading.RLock()
        self.args = args
        self.objects = {}  # (group, resource, ns, name) -> object
        self.procs = {}  # (ns, name) -> Popen
        self.dirs = {}  # (ns, name) -> the pod's directory, under root
        # Every pod's directory lives under this one, removed when the fake stops: a pod that
        # is never deleted (or runs no agent) leaves nothing behind in /tmp.
        self.root = tempfile.mkdtemp(prefix="fake-k8s-")
        os.chmod(self.root, 0o755)  # programs (runAsUser) traverse it to their workdir
        self.requests = []
        self.pod_mode = "run"
        self.allowed_users = None  # None: every impersonated user may do everything
        self.fail = []
        self.namespaces = set(args.namespace)
        self.rv = 1

    def next_rv(self):
        self.rv += 1
        return str(self.rv)


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


def free_loopback_ip(port):
    for _ in range(200):
        ip = "127.%d.%d.%d" % (random.randint(100, 250), random.randint(0, 255),
                               random.randint(2, 254))
        s = socket.socket()
        try:
            s.bind((ip, port))
            return ip
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free loopback address")


class Kubelet:
    """Runs pods: resolves env, starts the agent, moves the phase along."""

    def __init__(self, st):
        self.st = st

    def set_status(self, ns, name, **kw):
        with self.st.lock:
            pod = self.st.objects.get(("", "pods", ns, name))
            if pod is None:
                return None
            pod["status"].update(kw)
            pod["metadata"]["resourceVersion"] = self.st.next_rv()
            return pod

    def container_state(self, ns, name, state):
        self.set_status(ns, name, containerStatuses=[{
            "name": "sandbox", "ready": "running" in state, "restartCount": 0,
            "state": state, "image": "", "imageID": ""}])

    def resolve_env(self, ns, container):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        for e in container.get("env", []) or []:
            if "value" in e:
                env[e["name"]] = e["value"]
                continue
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref is None:
                continue
            with self.st.lock:
                sec = self.st.objects.get(("", "secrets", ns, ref["name"]))
            if sec is None or ref["key"] not in sec.get("data", {}):
                raise ApiError(0, "CreateContainerConfigError",
                               'secret "%s" not found' % ref["name"])
            env[e["name"]] = base64.b64decode(sec["data"][ref["key"]]).decode()
        return env

    def start(self, ns, name):
        threading.Thread(target=self.run, args=(ns, name), daemon=True).start()

    def run(self, ns, name):
        time.sleep(0.05)  # scheduling
        with self.st.lock:
            pod = self.st.objects.get(("", "pods", ns, name))
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                return
            mode = self.st.pod_mode
            spec = copy.deepcopy(pod["spec"])
        self.set_status(ns, name, conditions=[{"type": "PodScheduled", "status": "True"}],
                        hostIP="127.0.0.1")
        if mode == "pending":
            self.container_state(ns, name, {"waiting": {
                "reason": "ImagePullBackOff",
                "message": 'Back-off pulling image "%s"' % spec["containers"][0]["image"]}})
            return
        if mode == "fail":
            self.container_state(ns, name, {"terminated": {"reason": "Error", "exitCode": 1,
                                                           "message": "exec format error"}})
            self.set_status(ns, name, phase="Failed")
            return
        c = spec["containers"][0]
        try:
            env = self.resolve_env(ns, c)
        except ApiError as e:
            self.container_state(ns, name, {"waiting": {"reason": e.reason, "message": e.message}})
            return
        cmd = list(c.get("command") or []) + list(c.get("args") or [])
        port = None
        for p in c.get("ports") or []:
            port = p.get("containerPort")
        ip = free_loopback_ip(port or 7070)
        d = tempfile.mkdtemp(prefix="pod-", dir=self.st.root)
        os.chmod(d, 0o755)  # programs (runAsUser) traverse it to their workdir
        os.makedirs(os.path.join(d, "workspace"))
        os.makedirs(os.path.join(d, "run"))
        argv = self.map_argv(cmd, ip, d)
        uid = (spec.get("securityContext") or {}).get("runAsUser")
        if os.geteuid() == 0 and uid:
            os.chown(os.path.join(d, "workspace"), uid, uid)  # fsGroup: the volume is theirs
        if argv is None:
            # Not an agent container: it "runs" without serving anything.
            self.set_status(ns, name, phase="Running", podIP=ip, startTime=now_rfc3339())
            self.container_state(ns, name, {"running": {"startedAt": now_rfc3339()}})
            return
        # Started from this pod's thread, which waits for it below: the agent dies with the
        # fake (die_with_parent), not when some shorter-lived thread ends.
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=sys.stderr,
                                preexec_fn=die_with_parent())
        with self.st.lock:
            self.st.procs[(ns, name)] = proc
            self.st.dirs[(ns, name)] = d
        self.set_status(ns, name, phase="Running", podIP=ip, podIPs=[{"ip": ip}],
                        startTime=now_rfc3339())
        self.container_state(ns, name, {"running": {"startedAt": now_rfc3339()}})
        code = proc.wait()
        with self.st.lock:
            pod = self.st.objects.get(("", "pods", ns, name))
            deleting = pod is not None and pod["metadata"].get("deletionTimestamp")
        if pod is not None and not deleting:
            self.container_state(ns, name, {"terminated": {
                "exitCode": code if code >= 0 else 128 - code,
                "reason": "Completed" if code == 0 else "Error"}})
            self.set_status(ns, name, phase="Succeeded" if code == 0 else "Failed")

    def map_argv(self, cmd, ip, d):
        if not cmd or cmd[0] != AGENT_IN_POD:
            return None
        out = [self.st.args.agent]
        i = 1
        while i < len(cmd):
            a = cmd[i]
            v = cmd[i + 1] if i + 1 < len(cmd) else None
            if a == "--listen" and v is not None:
                out += [a, ip + ":" + v.rsplit(":", 1)[1]]
                i += 2
            elif a == "--workdir":
                out += [a, os.path.join(d, "workspace")]
                i += 2
            elif a == "--socket":
                out += [a, os.path.join(d, "run", "agent.sock")]
                i += 2
            elif a in ("--uid", "--gid") and os.geteuid() != 0:
                out += [a, str(os.geteuid() if a == "--uid" else os.getegid())]
                i += 2
            else:
                out.append(a)
                i += 1
        return out

    def kill(self, ns, name, sig=signal.SIGKILL):
        with self.st.lock:
            proc = self.st.procs.get((ns, name))
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
        return proc

    def finalize(self, ns, name, grace):
        """A deleted pod: its containers get SIGTERM, then SIGKILL after the grace period,
        then the object goes."""
        proc = self.kill(ns, name, signal.SIGCONT)
        proc = self.kill(ns, name, signal.SIGTERM)
        if proc is not None:
            try:
                proc.wait(timeout=max(0.1, min(grace, 2)))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with self.st.lock:
            self.st.objects.pop(("", "pods", ns, name), None)
            self.st.procs.pop((ns, name), None)
            d = self.st.dirs.pop((ns, name), None)
        if d:
            shutil.rmtree(d, ignore_errors=True)


def match_selector(labels, selector):
    if not selector:
        return True
    for term in selector.split(","):
        term = term.strip()
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            k = k.rstrip("=")
            if labels.get(k) != v:
                return False
        elif term and term not in labels:
            return False
    return True


def validate(kind, obj, ns, name_in_path=None):
    causes = []
    meta = obj.get("metadata") or {}
    name = meta.get("name", "")
    if not name or not DNS_SUBDOMAIN.match(name) or len(name) > 253:
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                       "message": "Invalid value: %r: a lowercase RFC 1123 subdomain" % name})
    if meta.get("namespace") not in (None, ns):
        causes.append({"reason": "FieldValueInvalid", "field": "metadata.namespace",
                       "message": "does not match the namespace of the request"})
    for k, v in (meta.get("labels") or {}).items():
        if not isinstance(v, str) or len(v) > 63 or not LABEL_VALUE.match(v):
            causes.append({"reason": "FieldValueInvalid", "field": "metadata.labels",
                           "message": "Invalid value: %r: a valid label must be 63 characters "
                           "or less" % v})
    if kind == "Pod":
        spec = obj.get("spec") or {}
        cs = spec.get("containers") or []
        if not cs:
            causes.append({"reason": "FieldValueRequired", "field": "spec.containers",
                           "message": "Required value"})
        for i, c in enumerate(cs + (spec.get("initContainers") or [])):
            if not c.get("image"):
                causes.append({"reason": "FieldValueRequired",
                               "field": "spec.containers[%d].image" % i,
                               "message": "Required value"})
            res = c.get("resources") or {}
            for r, q in (res.get("requests") or {}).items():
                lim = (res.get("limits") or {}).get(r)
                if lim is not None and lim != q and r == "memory":
                    pass
        ads = spec.get("activeDeadlineSeconds")
        if ads is not None and (not isinstance(ads, int) or ads < 1):
            causes.append({"reason": "FieldValueInvalid", "field": "spec.activeDeadlineSeconds",
                           "message": "must be greater than or equal to 1"})
    if kind == "Secret":
        for k, v in (obj.get("data") or {}).items():
            try:
                base64.b64decode(v, validate=True)
            except Exception:
                causes.append({"reason": "FieldValueInvalid", "field": "data[%s]" % k,
                               "message": "illegal base64 data"})
    if causes:
        raise ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (
            kind, name, "; ".join(c["field"] + ": " + c["message"] for c in causes)),
            {"name": name, "kind": kind.lower() + "s", "causes": causes})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"

    def log_message(self, fmt, *args):  # quiet
        pass

    @property
    def st(self):
        return self.server.st

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_raw(self, code, data):
        self.send_response(code)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n == 0:
            return None
        raw = self.rfile.read(n)
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(400, "BadRequest", "the body of the request was in an unknown format")

    def authenticate(self):
        auth = self.headers.get("Authorization") or ""
        if self.st.args.token and auth == "Bearer " + self.st.args.token:
            return "sbx-worker"
        cert = None
        if isinstance(self.connection, ssl.SSLSocket):
            cert = self.connection.getpeercert()
        if cert:
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        return v
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def handle_any(self, method):
        parsed = urllib.parse.urlsplit(self.path)
        path, query = parsed.path, urllib.parse.parse_qs(parsed.query)
        entry = {"method": method, "path": path, "query": parsed.query}
        try:
            if path.startswith("/_fake/"):
                body = self.read_body()
                return self.send_json(200, self.control(method, path, body))
            user = self.authenticate()
            imp_user = self.headers.get("Impersonate-User")
            groups = self.headers.get_all("Impersonate-Group") or []
            entry.update({"auth_user": user, "user": imp_user, "groups": groups})
            body = self.read_body()
            entry["body"] = body
            raw = None
            with self.st.lock:
                self.st.requests.append(entry)
                for f in self.st.fail:
                    if f.get("count", 1) > 0 and f.get("method", method) == method and \
                            re.search(f["path"], path):
                        f["count"] = f.get("count", 1) - 1
                        if "raw" in f:
                            raw = f
                            break
                        raise ApiError(f["status"], f.get("reason", "InternalError"),
                                       f.get("message", "injected failure"))
            if raw is not None:
                entry["status"] = raw["status"]
                return self.send_raw(raw["status"], raw["raw"].encode())
            code, out = self.api(method, path, query, body, imp_user)
            entry["status"] = code
            return self.send_json(code, out)
        except ApiError as e:
            entry["status"] = e.code
            return self.send_json(e.code, status_body(e.code, e.reason, e.message, e.details))

    def do_GET(self):
        if self.path.split("?")[0].endswith("/exec") and \
                (self.headers.get("Upgrade") or "").lower() == "websocket":
            return self.exec_ws()
        self.handle_any("GET")

    # ---- exec over a WebSocket (RFC 6455 + the channel protocol) ----

    def ws_send(self, opcode, payload):
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        with self.ws_lock:
            self.wfile.write(head + payload)
            self.wfile.flush()

    def ws_recv(self):
        """One frame from the client: (opcode, payload); clients must mask."""
        b = self.rfile.read(2)
        if len(b) < 2:
            return None, None
        op, ln = b[0] & 0x0F, b[1] & 0x7F
        if not b[1] & 0x80:
            raise ApiError(400, "BadRequest", "unmasked client frame")
        if ln == 126:
            ln = struct.unpack("!H", self.rfile.read(2))[0]
        elif ln == 127:
            ln = struct.unpack("!Q", self.rfile.read(8))[0]
        mask = self.rfile.read(4)
        data = bytearray(self.rfile.read(ln))
        for i in range(len(data)):
            data[i] ^= mask[i % 4]
        return op, bytes(data)

    def exec_ws(self):
        parsed = urllib.parse.urlsplit(self.path)
        path, query = parsed.path, urllib.parse.parse_qs(parsed.query)
        entry = {"method": "GET", "path": path, "query": parsed.query, "exec": True}
        try:
            user = self.authenticate()
            entry.update({"auth_user": user, "user": self.headers.get("Impersonate-User")})
            with self.st.lock:
                self.st.requests.append(entry)
            m = re.match(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec$", path)
            if m is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            ns, name = m.groups()
            self.authorize(entry["user"], "create", "", "pods/exec", ns, name)
            with self.st.lock:
                pod = self.st.objects.get(("", "pods", ns, name))
            if pod is None:
                raise ApiError(404, "NotFound", 'pods "%s" not found' % name,
                               {"name": name, "kind": "pods"})
            if pod["status"].get("phase") != "Running":
                raise ApiError(400, "BadRequest", "pod %s is not running" % name)
            cmd = query.get("command") or []
            if not cmd:
                raise ApiError(400, "BadRequest", "you must specify at least 1 command")
            offered = [p.strip() for p in (self.headers.get("Sec-WebSocket-Protocol") or
                                           "").split(",")]
            proto = next((p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered),
                         None)
            if proto is None:
                raise ApiError(400, "BadRequest", "no supported subprotocol offered")
        except ApiError as e:
            entry["status"] = e.code
            return self.send_json(e.code, status_body(e.code, e.reason, e.message, e.details))
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", proto)
        self.end_headers()
        self.wfile.flush()
        entry["status"] = 101
        entry["protocol"] = proto
        self.close_connection = True
        self.ws_lock = threading.Lock()
        want_stdin = (query.get("stdin") or ["false"])[0] == "true"
        try:
            # this request's thread waits for it below (die_with_parent)
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if want_stdin else
                                    subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, preexec_fn=die_with_parent())
        except OSError as e:
            msg = json.dumps({"metadata": {}, "status": "Failure", "message":
                              "exec: %s" % e, "reason": "InternalError"}).encode()
            self.ws_send(2, b"\x03" + msg)
            self.ws_send(8, struct.pack("!H", 1000))
            return

        def pump(fd, ch):
            while True:
                chunk = os.read(fd.fileno(), 32768)
                if not chunk:
                    break
                self.ws_send(2, bytes([ch]) + chunk)

        ts = [threading.Thread(target=pump, args=(proc.stdout, 1)),
              threading.Thread(target=pump, args=(proc.stderr, 2))]
        for t in ts:
            t.start()

        def reader():
            while True:
                try:
                    op, data = self.ws_recv()
                except Exception:
                    op = None
                if op is None or op == 8:
                    if proc.poll() is None:
                        proc.kill()  # the client went away
                    return
                if op == 2 and data and data[0] == 0 and want_stdin:
                    try:
                        proc.stdin.write(data[1:])
                        proc.stdin.flush()
                    except BrokenPipeError:
                        pass
                elif op == 2 and len(data) == 2 and data[0] == 255 and proto.startswith("v5"):
                    if data[1] == 0 and want_stdin:
                        proc.stdin.close()
                elif op == 9:
                    self.ws_send(10, data)

        threading.Thread(target=reader, daemon=True).start()
        code = proc.wait()
        for t in ts:
            t.join()
        if code == 0:
            st = {"metadata": {}, "status": "Success"}
        else:
            st = {"metadata": {}, "status": "Failure",
                  "message": "command terminated with non-zero exit code: exit status %d" %
                  (code if code > 0 else 128 - code),
                  "reason": "NonZeroExitCode",
                  "details": {"causes": [{"reason": "ExitCode",
                                          "message": str(code if code > 0 else 128 - code)}]}}
        self.ws_send(2, b"\x03" + json.dumps(st).encode())
        self.ws_send(8, struct.pack("!H", 1000))

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_PATCH(self):
        self.handle_any("PATCH")

    # ---- the API ----

    def route(self, path):
        m = re.match(r"^/api/v1/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?$", path)
        if m:
            return "", m.group(2), m.group(1), m.group(3)
        m = re.match(r"^/apis/([^/]+)/v1/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?$", path)
        if m:
            return m.group(1), m.group(3), m.group(2), m.group(4)
        return None

    def authorize(self, user, verb, group, resource, ns, name):
        allowed = self.st.allowed_users
        if user is None or allowed is None or user in allowed:
            return
        what = ('%s "%s" is forbidden: ' % (resource, name)) if name else ("%s is forbidden: " %
                                                                           resource)
        raise ApiError(403, "Forbidden", '%sUser "%s" cannot %s resource "%s" in API group "%s" '
                       'in the namespace "%s"' % (what, user, verb, resource, group, ns),
                       {"name": name or "", "group": group, "kind": resource})

    def api(self, method, path, query, body, user):
        if path == "/version":
            return 200, {"major": "1", "minor": "29", "gitVersion": "v1.29.0-fake"}
        r = self.route(path)
        if r is None or (r[0], r[1]) not in RESOURCES:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        group, resource, ns, name = r
        kind = RESOURCES[(group, resource)]
        verb = {"GET": "get" if name else "list", "POST": "create", "DELETE": "delete"}.get(method)
        if verb is None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method")
        self.authorize(user, verb, group, resource, ns, name)
        if ns not in self.st.namespaces:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % ns,
                           {"name": ns, "kind": "namespaces"})
        st = self.st
        if method == "POST" and name is None:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request was in an unknown "
                               "format")
            validate(kind, body, ns)
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            meta["namespace"] = ns
            key = (group, resource, ns, meta["name"])
            with st.lock:
                if key in st.objects:
                    raise ApiError(409, "AlreadyExists", '%s "%s" already exists' %
                                   (resource, meta["name"]),
                                   {"name": meta["name"], "kind": resource})
                meta["uid"] = str(uuid.uuid4())
                meta["resourceVersion"] = st.next_rv()
                meta["creationTimestamp"] = now_rfc3339()
                if kind == "Pod":
                    obj["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
                st.objects[key] = obj
                out = copy.deepcopy(obj)
            if kind == "Pod":
                self.server.kubelet.start(ns, meta["name"])
            return 201, out
        if method == "GET" and name is None:
            sel = (query.get("labelSelector") or [""])[0]
            with st.lock:
                items = [copy.deepcopy(o) for (g, rs, n, _), o in sorted(st.objects.items())
                         if g == group and rs == resource and n == ns and
                         match_selector(o["metadata"].get("labels") or {}, sel)]
            return 200, {"kind": kind + "List", "apiVersion": "v1",
                         "metadata": {"resourceVersion": str(st.rv)}, "items": items}
        key = (group, resource, ns, name)
        with st.lock:
            obj = st.objects.get(key)
            if obj is None:
                raise ApiError(404, "NotFound", '%s "%s" not found' % (resource, name),
                               {"name": name, "kind": resource})
            if method == "GET":
                return 200, copy.deepcopy(obj)
            # DELETE
            if kind != "Pod":
                del st.objects[key]
                return 200, status_body(200, "", "")  # metav1.Status Success
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                return 200, copy.deepcopy(obj)
            grace = (body or {}).get("gracePeriodSeconds")
            if grace is None:
                grace = obj["spec"].get("terminationGracePeriodSeconds", 30)
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = grace
            out = copy.deepcopy(obj)
        threading.Thread(target=self.server.kubelet.finalize, args=(ns, name, grace),
                         daemon=True).start()
        return 200, out

    # ---- test control ----

    def control(self, method, path, body):
        st = self.st
        if path == "/_fake/requests":
            with st.lock:
                return {"requests": st.requests}
        if path == "/_fake/config":
            with st.lock:
                if "pod_mode" in body:
                    st.pod_mode = body["pod_mode"]
                if "allowed_users" in body:
                    st.allowed_users = body["allowed_users"]
                if "fail" in body:
                    st.fail = body["fail"]
            return {}
        if path == "/_fake/external":
            ns, name = body["namespace"], body["name"]
            if body.get("plain"):
                # a pod without the agent: it only runs (exec reaches it)
                pod = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": ns,
                                    "labels": {"app": "external"},
                                    "uid": str(uuid.uuid4()), "resourceVersion": st.next_rv(),
                                    "creationTimestamp": now_rfc3339()},
                       "spec": {"containers": [{"name": "main", "image": "external",
                                                "command": ["sleep", "infinity"]}]},
                       "status": {"phase": "Pending"}}
                with st.lock:
                    st.objects[("", "pods", ns, name)] = pod
                self.server.kubelet.start(ns, name)
                return {}
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": ns, "labels": {"app": "external"},
                                "uid": str(uuid.uuid4()), "resourceVersion": st.next_rv(),
                                "creationTimestamp": now_rfc3339()},
                   "spec": {"terminationGracePeriodSeconds": 1, "containers": [{
                       "name": "sandbox", "image": "external",
                       "command": [AGENT_IN_POD, "--socket", "/.sbx/agent.sock", "--workdir",
                                   "/workspace", "--shared-uid", "--listen",
                                   "0.0.0.0:%d" % body.get("port", 7070), "--token-env", "T"],
                       "env": [{"name": "T", "value": body["token"]}],
                       "ports": [{"containerPort": body.get("port", 7070)}]}]},
                   "status": {"phase": "Pending"}}
            with st.lock:
                st.objects[("", "pods", ns, name)] = pod
            self.server.kubelet.start(ns, name)
            return {}
        if path == "/_fake/object":
            obj = copy.deepcopy(body["object"])
            meta = obj.setdefault("metadata", {})
            ns = meta.setdefault("namespace", st.args.namespace[0])
            with st.lock:
                st.objects[(body.get("group", ""), body["resource"], ns, meta["name"])] = obj
            return {}
        m = re.match(r"^/_fake/pods/([^/]+)/([^/]+)/(end|stop|cont)$", path)
        if m:
            ns, name, what = m.groups()
            sig = {"end": signal.SIGKILL, "stop": signal.SIGSTOP, "cont": signal.SIGCONT}[what]
            self.server.kubelet.kill(ns, name, sig)
            return {}
        raise ApiError(404, "NotFound", "no such control endpoint")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token", default="")
    ap.add_argument("--agent", required=True)
    ap.add_argument("--namespace", action="append", default=[])
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca")
    args = ap.parse_args()
    if not args.namespace:
        args.namespace = ["default"]
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.st = State(args)
    srv.kubelet = Kubelet(srv.st)
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        if args.client_ca:
            ctx.load_verify_locations(args.client_ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)

    def stop(*_):
        with srv.st.lock:
            procs = list(srv.st.procs.values())
            dirs = list(srv.st.dirs.values())
        for p in procs:
            try:
                p.kill()
                p.wait()
            except Exception:
                pass
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(srv.st.root, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
