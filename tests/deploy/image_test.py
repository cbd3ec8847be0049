#!/usr/bin/env python3
"""image_test.py - the worker image recipe (deploy/image) built and run on the private Docker
engine of the ctest fixture (scripts/dockerd-test.sh: its own socket, no bridge, nothing
pulled), from a root filesystem made here out of a `cmake --install` of this build.

  1. `cmake --install` into a temporary prefix, deploy/image/make-rootfs.sh, `docker build`:
     one layer FROM scratch, user 10001, the probe as HEALTHCHECK.
  2. The Kubernetes shape, read from deploy/kubernetes: the init container's own command copies
     the binding key out of a volume laid out as kubelet lays out a Secret (a group-readable
     symlink into ..data, owned by root); then the worker container's args and env, with the
     ConfigMap's worker.yaml, TLS and the key mounted where deployment.yaml mounts them, a
     read-only root, every capability dropped, no network but loopback. The worker listens on
     7443; the Deployment's exec probe command says SERVING over TLS and fails on a wrong port;
     Docker's HEALTHCHECK turns healthy; on SIGTERM the probe fails (NOT_SERVING during the drain
     notice) and the worker exits 0.
  3. The Secrets as secret.yaml ships them (empty key, empty token) stop the worker with exit 3
     and a message naming what is wrong.
  4. Host network, a fake profile, h2c on an ephemeral loopback port: grpc.health.v1 Check from
     the host's grpcio says SERVING, and `sbx --broker remote` runs a command through the
     containerised worker.

Every container and the image are removed at the end, whatever happened.

usage: image_test.py --build DIR --source DIR --state DOCKERD_STATE --sbx PATH
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import grpc
import yaml

DOCKER = "/usr/bin/docker"  # Debian's docker.io client (never /usr/local/bin/docker)
WORKER_UID = 10001
# Bounded waits (not timing assertions): a loaded 2-core machine may take a while, a minute
# means something is broken.
WAIT_S = 90
HEALTH_OK = b"\x08\x01"  # HealthCheckResponse{status: SERVING}

results = []


def check(name, ok, detail=""):
    results.append(ok)
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok or not detail else ": " + detail),
          flush=True)
    return ok


def docker(*args, check_rc=True, timeout=300, **kw):
    p = subprocess.run([DOCKER, *args], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout, **kw)
    if check_rc and p.returncode != 0:
        raise RuntimeError("docker %s exited %d: %s" % (" ".join(args[:3]), p.returncode,
                                                         p.stderr.strip()))
    return p


def wait_for(what, fn):
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.3)
    raise RuntimeError("%s did not happen within %d s" % (what, WAIT_S))


def listening_port(name):
    """The port of the worker's "listening on port N" line; an error once it exited without."""
    def seen():
        m = re.search(r"sbx-worker listening on port (\d+)", logs(name))
        if m:
            return m.group(1)
        if docker("inspect", "--format", "{{.State.Running}}", name).stdout.strip() != "true":
            raise RuntimeError("the worker exited before listening: " + logs(name).strip())
        return None
    return wait_for("the worker's listening line", seen)


def logs(name):
    p = docker("logs", name, check_rc=False)
    return p.stdout + p.stderr


def manifests(source):
    """The ConfigMap's worker.yaml and the Deployment's pod spec, from deploy/kubernetes."""
    kdir = os.path.join(source, "deploy/kubernetes")
    with open(os.path.join(kdir, "configmap.yaml"), encoding="utf-8") as f:
        worker_yaml = yaml.safe_load(f)["data"]["worker.yaml"]
    with open(os.path.join(kdir, "deployment.yaml"), encoding="utf-8") as f:
        pod = yaml.safe_load(f)["spec"]["template"]["spec"]
    return worker_yaml, pod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--sbx", required=True)
    a = ap.parse_args()

    state = dict(l.rstrip("\n").split("=", 1) for l in open(a.state) if "=" in l)
    os.environ["DOCKER_HOST"] = state["DOCKER_HOST"]
    tag = "sbx-deploy-test:%d" % os.getpid()
    label = "sbx.test.deploy=%d" % os.getpid()
    names = ["sbx-deploy-%d-%s" % (os.getpid(), s) for s in ("k8s", "nokey", "notoken", "host")]
    sanitizer_env = []
    for v in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        if v in os.environ:
            sanitizer_env += ["-e", "%s=%s" % (v, os.environ[v])]
    tmp = tempfile.mkdtemp(prefix="sbx-deploy-image-")
    try:
        build_image(a, tmp, tag)
        run_kubernetes_shape(a, tmp, tag, label, names[0], sanitizer_env)
        run_empty_secrets(a, tmp, tag, label, names[1], names[2], sanitizer_env)
        run_host_network(a, tmp, tag, label, names[3], sanitizer_env)
    except Exception as e:  # a step that could not run is a failure, and cleanup still runs
        check("the image test ran to its end", False, str(e))
    finally:
        ids = docker("ps", "-aq", "--filter", "label=" + label, check_rc=False).stdout.split()
        if ids:
            docker("rm", "-f", *ids, check_rc=False)
        docker("rmi", "-f", tag, check_rc=False)
        left = docker("ps", "-aq", "--filter", "label=" + label, check_rc=False).stdout.split()
        img = docker("images", "-q", tag, check_rc=False).stdout.split()
        check("every container and the image are removed", not left and not img,
              "left: containers %s, image %s" % (left, img))
        shutil.rmtree(tmp, ignore_errors=True)
    failed = results.count(False)
    print("image_test: %d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


def build_image(a, tmp, tag):
    prefix, context = os.path.join(tmp, "prefix"), os.path.join(tmp, "context")
    subprocess.run(["cmake", "--install", a.build, "--prefix", prefix], check=True,
                   stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    subprocess.run([os.path.join(a.source, "deploy/image/make-rootfs.sh"), prefix, context],
                   check=True, stdin=subprocess.DEVNULL)
    p = docker("build", "-q", "-t", tag, context, check_rc=False)
    if not check("docker build of deploy/image", p.returncode == 0, p.stderr.strip()):
        raise RuntimeError("no image")
    info = json.loads(docker("image", "inspect", tag).stdout)[0]
    cfg = info["Config"]
    check("the image is one layer FROM scratch", len(info["RootFS"]["Layers"]) == 1,
          str(info["RootFS"]["Layers"]))
    check("the image runs sbx-worker as uid %d" % WORKER_UID,
          cfg.get("User") == "%d:%d" % (WORKER_UID, WORKER_UID) and
          cfg.get("Entrypoint") == ["/usr/bin/sbx-worker"], "%s %s" % (cfg.get("User"),
                                                                       cfg.get("Entrypoint")))
    check("the image's HEALTHCHECK is the probe",
          (cfg.get("Healthcheck") or {}).get("Test") ==
          ["CMD", "/usr/libexec/sbx/sbx-health-probe"], str(cfg.get("Healthcheck")))


def make_tls():
    """A self-signed certificate for 127.0.0.1: {file name: bytes}, as in sbx-worker-tls."""
    d = tempfile.mkdtemp(prefix="sbx-deploy-tls-")
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-keyout", os.path.join(d, "tls.key"), "-out", os.path.join(d, "tls.crt"),
                        "-subj", "/CN=sbx-worker",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True, stdin=subprocess.DEVNULL)
        return {f: open(os.path.join(d, f), "rb").read() for f in ("tls.crt", "tls.key")}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def make_key_dir(d, content):
    """The binding key as the worker accepts it (for the host-network run)."""
    os.makedirs(d)
    os.chown(d, WORKER_UID, WORKER_UID)
    os.chmod(d, 0o700)
    path = os.path.join(d, "binding-key")
    with open(path, "wb") as f:
        f.write(content)
    os.chown(path, WORKER_UID, WORKER_UID)
    os.chmod(path, 0o600)


def secret_volume(d, files, mode, group):
    """A directory laid out as kubelet lays out a Secret volume: the files in ..data/, owned by
    root, group fsGroup, mode defaultMode, and a symlink per file into ..data."""
    os.makedirs(os.path.join(d, "..data"))
    for name, content in files.items():
        real = os.path.join(d, "..data", name)
        with open(real, "wb") as f:
            f.write(content)
        os.chown(real, 0, group)
        os.chmod(real, mode)
        os.symlink(os.path.join("..data", name), os.path.join(d, name))


class Pod:
    """deployment.yaml's pod on this Docker engine: its volumes as host directories (ConfigMap
    and Secret volumes laid out as kubelet does, emptyDirs world-writable and owned by fsGroup),
    its containers as `docker run` with their args, env, mounts and security context."""

    def __init__(self, a, tmp, sub, label, sanitizer_env, secrets):
        self.worker_yaml, self.spec = manifests(a.source)
        self.label, self.sanitizer_env = label, sanitizer_env
        self.secrets = secrets  # {secret name: {key: bytes}}
        sc = self.spec["securityContext"]
        self.fs_group = sc["fsGroup"]
        self.user = "%d:%d" % (sc["runAsUser"], sc["runAsGroup"])
        self.dirs = {}
        for v in self.spec["volumes"]:
            d = os.path.join(tmp, sub, v["name"])
            if "configMap" in v:
                os.makedirs(d)
                for it in v["configMap"]["items"]:
                    assert it["key"] == "worker.yaml", it  # the ConfigMap's only key
                    with open(os.path.join(d, it["path"]), "w", encoding="utf-8") as f:
                        f.write(self.worker_yaml)
            elif "secret" in v:
                data = secrets[v["secret"]["secretName"]]
                items = v["secret"].get("items")
                files = ({it["path"]: data[it["key"]] for it in items} if items else data)
                secret_volume(d, files, v["secret"]["defaultMode"], self.fs_group)
            elif "emptyDir" in v:
                os.makedirs(d)
                os.chown(d, 0, self.fs_group)
                os.chmod(d, 0o2777)
            else:
                raise RuntimeError("volume %s: a kind this test does not lay out" % v["name"])
            self.dirs[v["name"]] = d

    def run_args(self, c, name):
        args = ["run", "--name", name, "--label", self.label, "--network", "none",
                "--user", self.user, "--group-add", str(self.fs_group), *self.sanitizer_env]
        sc = c["securityContext"]
        if sc.get("readOnlyRootFilesystem"):
            args.append("--read-only")
        for cap in sc["capabilities"]["drop"]:
            args += ["--cap-drop", cap]
        if sc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        for m in c.get("volumeMounts", []):
            args += ["-v", "%s:%s%s" % (self.dirs[m["name"]], m["mountPath"],
                                        ":ro" if m.get("readOnly") else "")]
        for e in c.get("env", []):
            ref = e["valueFrom"]["secretKeyRef"]
            args += ["-e", "%s=%s" % (e["name"],
                                      self.secrets[ref["name"]][ref["key"]].decode())]
        return args

    def init(self, tag, name):
        """Runs the init container to its end; returns the docker run result."""
        c = self.spec["initContainers"][0]
        return docker(*self.run_args(c, name), "--rm", "--entrypoint", c["command"][0], tag,
                      *c["command"][1:], check_rc=False, timeout=120)

    def worker(self, tag, name, detach=True):
        c = self.spec["containers"][0]
        return docker(*self.run_args(c, name), *(["-d"] if detach else []), tag, *c["args"],
                      check_rc=detach, timeout=120)

    def probe_command(self):
        c = self.spec["containers"][0]
        return c["readinessProbe"]["exec"]["command"]

    def key_file(self):
        return os.path.join(self.dirs["binding-key"], "binding-key")


def secrets_of(key, token):
    return {"sbx-worker": {"binding-key": key, "token-agents": token.encode(),
                           "e2b-api-key": b"not-a-real-key"},
            "sbx-worker-tls": make_tls()}


def probe(name, *url):
    return docker("exec", name, "/usr/libexec/sbx/sbx-health-probe", *url, check_rc=False)


def run_kubernetes_shape(a, tmp, tag, label, name, sanitizer_env):
    key = os.urandom(32)
    pod = Pod(a, tmp, "k8s", label, sanitizer_env, secrets_of(key, "t0ken-agents"))
    p = pod.init(tag, name + "-init")
    st = os.lstat(pod.key_file()) if os.path.lexists(pod.key_file()) else None
    check("the init container's command copies the key out of the Secret volume, 0600, uid %d"
          % WORKER_UID,
          p.returncode == 0 and st is not None and (st.st_mode & 0o170777) == 0o100600 and
          st.st_uid == WORKER_UID and open(pod.key_file(), "rb").read() == key,
          "exit %d %s; %s" % (p.returncode, p.stderr.strip(),
                              st and (oct(st.st_mode), st.st_uid)))
    pod.worker(tag, name)
    port = listening_port(name)
    check("the ConfigMap's worker listens on 7443 in the image", port == "7443", logs(name))
    p = docker("exec", name, *pod.probe_command(), check_rc=False)
    check("the Deployment's exec probe says SERVING over TLS", p.returncode == 0,
          p.stderr.strip())
    p = probe(name, "https://127.0.0.1:1")
    check("sbx-health-probe fails where no worker listens", p.returncode == 1, p.stderr.strip())
    p = probe(name, "http://127.0.0.1:7443")
    check("sbx-health-probe fails in plaintext against the TLS listener", p.returncode == 1,
          p.stderr.strip())
    p = docker("exec", name, "sh", "-c", "id -u; touch /etc/x 2>/dev/null && echo writable",
               check_rc=False)
    check("the worker runs as uid %d on a read-only root" % WORKER_UID,
          p.stdout.split() == [str(WORKER_UID)], p.stdout + p.stderr)

    def healthy():
        s = docker("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()
        return s if s in ("healthy", "unhealthy") else None

    check("Docker's HEALTHCHECK turns healthy", wait_for("a health verdict", healthy) == "healthy")
    docker("kill", "--signal", "TERM", name)
    p = docker("exec", name, *pod.probe_command(), check_rc=False)
    check("after SIGTERM the probe fails (NOT_SERVING, then no worker)", p.returncode != 0,
          p.stdout + p.stderr)
    print("     (the probe saw: %s)" % (p.stderr.strip() or p.stdout.strip()), flush=True)
    rc = docker("wait", name, timeout=120).stdout.strip()
    check("the worker drains and exits 0", rc == "0" and "drained" in logs(name),
          "exit %s: %s" % (rc, logs(name)))


def run_empty_secrets(a, tmp, tag, label, nokey, notoken, sanitizer_env):
    for name, sub, key, token, expect in (
            (nokey, "nokey", b"", "t0ken", "secret_file"),
            (notoken, "notoken", os.urandom(32), "", "SBX_TOKEN_AGENTS")):
        pod = Pod(a, tmp, sub, label, sanitizer_env, secrets_of(key, token))
        p = pod.init(tag, name + "-init")
        if not check("the init container copies the %s key" % sub, p.returncode == 0,
                     p.stderr.strip()):
            continue
        p = pod.worker(tag, name, detach=False)
        out = p.stdout + p.stderr
        check("secret.yaml's empty %s stops the worker with exit 3 naming it" %
              ("binding key" if sub == "nokey" else "token"),
              p.returncode == 3 and expect in out, "exit %d: %s" % (p.returncode, out.strip()))


def run_host_network(a, tmp, tag, label, name, sanitizer_env):
    base = os.path.join(tmp, "host")
    os.makedirs(os.path.join(base, "config"))
    make_key_dir(os.path.join(base, "key"), os.urandom(32))
    with open(os.path.join(base, "config", "worker.yaml"), "w") as f:
        f.write("sandbox:\n"
                "  secret_file: /var/lib/sbx/secret/binding-key\n"
                "  runtime_dir: /run/sbx\n"
                "  broker: { flavor: thread, threads: 2 }\n"
                "  profiles:\n"
                "    default: { type: fake, scope: per_call }\n")
    docker("run", "-d", "--name", name, "--label", label, "--network", "host", "--read-only",
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
           "--tmpfs", "/run/sbx:uid=%d,gid=%d,mode=0700" % (WORKER_UID, WORKER_UID),
           "-v", "%s:/etc/sbx/config:ro" % os.path.join(base, "config"),
           "-v", "%s:/var/lib/sbx/secret:ro" % os.path.join(base, "key"),
           *sanitizer_env, tag, "--config", "/etc/sbx/config/worker.yaml",
           "--listen", "127.0.0.1:0")
    port = int(listening_port(name))
    with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
        check_call = ch.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        try:
            got = check_call(b"", timeout=30)
        except grpc.RpcError as e:
            got = "%s %s" % (e.code(), e.details())
        check("grpc.health.v1 Check from the host's grpcio says SERVING", got == HEALTH_OK,
              repr(got))
    p = probe(name, "http://127.0.0.1:%d" % port)
    check("sbx-health-probe says SERVING over h2c on loopback", p.returncode == 0,
          p.stderr.strip())
    p = subprocess.run([a.sbx, "--broker", "remote", "--endpoint", "http://127.0.0.1:%d" % port,
                        "run", "--", "echo", "from the image"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=120)
    check("sbx --broker remote runs a command through the containerised worker",
          p.returncode == 0 and p.stdout == "from the image\n",
          "exit %d: %s %s" % (p.returncode, p.stdout, p.stderr))
    docker("stop", "--time", "60", name, timeout=120)
    rc = docker("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
    check("docker stop drains it (exit 0)", rc == "0", "exit %s: %s" % (rc, logs(name)))


if __name__ == "__main__":
    sys.exit(main())
