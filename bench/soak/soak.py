#!/usr/bin/env python3
"""soak.py - a long mixed load through a real sbx-worker on the local provider, then a count of
what it left behind. Not a test: it runs for minutes (default 30) and reports figures.

The worker (thread broker) serves two profiles, a per_call one (`oneshot`) and a per_session
one (`sess`); client threads drive it through the built `sbx` CLI as a remote client, choosing
at random among:
  run       `sbx run -- sh -c 'echo ...'` (a fresh sandbox per call), output checked
  session   `sbx session new`, several `sbx exec` appending to a file in the sandbox (each
            one checks that no earlier line was lost), a file copied in and out with `sbx cp`
            and compared, sometimes an exec killed mid-call followed by one more exec (the
            session must survive it), then `sbx session rm`
  killed    `sbx run -- sleep 30` killed mid-call by SIGKILL, SIGTERM or SIGINT
It prints, every --report-s seconds and at the end: calls by kind, failures by kind and error
(the CLI's exit code and the error code it names), the worker's RSS over time, and at the end
the leftovers: sandbox state dirs in the worker's runtime dir, sbx-agent processes of those
sandboxes, and their cgroups -- before and after the worker's exit (SIGTERM, drain).

Usage: soak.py --worker PATH --sbx PATH [--minutes N] [--clients N] [--report-s S] [--keep]
(--minutes defaults to $SBX_SOAK_MINUTES, else 30). Exit status 1 when anything was left behind.
"""
import argparse
import collections
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

RSS_SAMPLE_S = 10  # the worker's RSS is sampled this often
CALL_TIMEOUT_S = 120  # one CLI call; a hang past this is reported as a failure "hang"
ERROR_CODE = re.compile(r"\b([A-Z][A-Z]+(?:_[A-Z]+)+|UNAVAILABLE|INTERNAL|TIMEOUT|BROKER|"
                        r"PROVISION|UNAUTHENTICATED|CANCELLED|GONE|CONFIG)\b")


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = collections.Counter()
        self.failures = collections.Counter()
        self.examples = {}

    def call(self, kind):
        with self.lock:
            self.calls[kind] += 1

    def fail(self, kind, rc, stderr):
        text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
        m = ERROR_CODE.search(text)
        key = (kind, "exit %s%s" % (rc, " " + m.group(1) if m else ""))
        with self.lock:
            self.failures[key] += 1
            self.examples.setdefault(key, text.strip().splitlines()[-1:] or [""])


class Soak:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="sbx-soak-")
        os.chmod(self.tmp, 0o755)  # the sandboxes' mapped root searches the runtime dir
        self.run_dir = os.path.join(self.tmp, "run")
        self.cfg = os.path.join(self.tmp, "soak.yaml")
        with open(self.cfg, "w") as f:
            f.write("sandbox:\n"
                    "  default_profile: oneshot\n"
                    "  secret_file: %s/secret\n"
                    "  runtime_dir: %s\n"
                    "  node: soak-node\n"
                    "  broker: { flavor: thread, threads: %d }\n"
                    "  worker:\n"
                    "    listen: 127.0.0.1:0\n"
                    "    log_level: warn\n"
                    "  profiles:\n"
                    "    oneshot: { type: local, scope: per_call }\n"
                    "    sess: { type: local, scope: per_session }\n"
                    % (self.tmp, self.run_dir, max(4, args.clients)))
        self.stats = Stats()
        self.rss = []  # (seconds, kB)
        self.ids_seen = set()
        self.stop = threading.Event()

    # ---- the worker ----------------------------------------------------------------------

    def start_worker(self):
        self.worker = subprocess.Popen([self.args.worker, "--config", self.cfg],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)
        line = self.worker.stderr.readline()
        m = re.search(r"listening on port (\d+)", line)
        if not m:
            raise SystemExit("soak: the worker did not start: %r" % line)
        self.log = []
        threading.Thread(target=lambda: self.log.extend(self.worker.stderr), daemon=True).start()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
        self.env.update({"HOME": self.tmp, "XDG_STATE_HOME": os.path.join(self.tmp, "state"),
                         "SBX_CONFIG": self.cfg, "SBX_BROKER": "remote",
                         "SBX_ENDPOINT": "http://127.0.0.1:%s" % m.group(1)})

    def sbx(self, kind, *argv, expect_rc=0, stdout=None):
        """Runs one CLI call; counts it and, unless it exits expect_rc (and prints stdout when
        given), a failure. Returns (rc, stdout)."""
        self.stats.call(kind)
        try:
            r = subprocess.run([self.args.sbx] + list(argv), env=self.env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.stats.fail(kind, "hang", "no answer in %d s" % CALL_TIMEOUT_S)
            return None, b""
        if r.returncode != expect_rc:
            self.stats.fail(kind, r.returncode, r.stderr)
        elif stdout is not None and r.stdout != stdout:
            self.stats.fail(kind, "wrong-output", "got %r, want %r" % (r.stdout[:80], stdout))
        return r.returncode, r.stdout

    def killed_call(self, kind, *argv):
        """Starts a long CLI call and kills it mid-call by a random signal."""
        self.stats.call(kind)
        p = subprocess.Popen([self.args.sbx] + list(argv), env=self.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(random.uniform(0.2, 1.0))
        p.send_signal(random.choice([signal.SIGKILL, signal.SIGTERM, signal.SIGINT]))
        try:
            p.wait(timeout=CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.stats.fail(kind, "hang", "did not exit after its signal")
            p.kill()
            p.wait()

    # ---- the load ------------------------------------------------------------------------

    def one_run(self, n):
        self.sbx("run", "run", "--", "sh", "-c", "echo soak-%d" % n,
                 stdout=b"soak-%d\n" % n)

    def one_session(self, n):
        rc, out = self.sbx("session new", "session", "new", "--profile", "sess")
        if rc != 0:
            return
        sid = out.decode().strip()
        lines = 0
        for _ in range(random.randint(2, 5)):
            lines += 1
            self.sbx("exec", "exec", "-s", sid, "--", "sh", "-c",
                     "echo x >> /tmp/soak.log; wc -l < /tmp/soak.log",
                     stdout=b"%d\n" % lines)
        blob = os.path.join(self.tmp, "blob-%d" % n)
        with open(blob, "wb") as f:
            f.write(os.urandom(random.randint(1, 1 << 20)))
        if self.sbx("cp in", "cp", blob, "%s:/tmp/blob" % sid)[0] == 0:
            back = blob + ".back"
            if self.sbx("cp out", "cp", "%s:/tmp/blob" % sid, back)[0] == 0:
                with open(blob, "rb") as a, open(back, "rb") as b:
                    if a.read() != b.read():
                        self.stats.fail("cp out", "wrong-output", "the copy differs")
                os.unlink(back)
        os.unlink(blob)
        if random.random() < 0.3:
            self.killed_call("exec killed", "exec", "-s", sid, "--", "sleep", "30")
            lines += 1  # the session survives a client killed mid-call
            self.sbx("exec", "exec", "-s", sid, "--", "sh", "-c",
                     "echo x >> /tmp/soak.log; wc -l < /tmp/soak.log",
                     stdout=b"%d\n" % lines)
        self.sbx("session rm", "session", "rm", sid)

    def client(self, seed):
        rnd = random.Random(seed)
        n = seed * 1000000
        while not self.stop.is_set():
            n += 1
            pick = rnd.random()
            if pick < 0.5:
                self.one_run(n)
            elif pick < 0.85:
                self.one_session(n)
            else:
                self.killed_call("run killed", "run", "--", "sleep", "30")

    # ---- observation ---------------------------------------------------------------------

    def sandboxes(self):
        return set(os.listdir(self.run_dir)) if os.path.isdir(self.run_dir) else set()

    def agents(self):
        found = []
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(d + "/cmdline", "rb") as f:
                    if (self.run_dir + "/").encode() in f.read():
                        found.append(int(d[6:]))
            except OSError:
                pass
        return found

    def cgroups(self):
        dirs = glob.glob("/sys/fs/cgroup/*/sbx/l-*") + glob.glob("/sys/fs/cgroup/sbx/l-*") + \
            glob.glob("/sys/fs/cgroup/memory/*/*/sbx/l-*")
        return sorted(d for d in dirs if os.path.basename(d) in self.ids_seen)

    def observe(self, t0):
        last = 0.0
        while not self.stop.wait(1.0):
            self.ids_seen |= self.sandboxes()
            if time.time() - last >= RSS_SAMPLE_S:
                last = time.time()
                self.rss.append((last - t0, rss_kb(self.worker.pid)))

    def report(self, t0, final=False):
        s = self.stats
        with s.lock:
            calls = sum(s.calls.values())
            fails = sum(s.failures.values())
        rss = rss_kb(self.worker.pid)
        print("[%6.0f s] %d calls, %d failures, worker RSS %d kB, %d sandboxes alive" %
              (time.time() - t0, calls, fails, rss, len(self.sandboxes())), flush=True)
        if not final:
            return
        print("\ncalls by kind:")
        for k, v in sorted(s.calls.items()):
            print("  %-14s %7d" % (k, v))
        print("failures by kind and error:" + (" none" if not s.failures else ""))
        for k, v in sorted(s.failures.items(), key=lambda kv: -kv[1]):
            print("  %-14s %-34s %5d  e.g. %s" % (k[0], k[1], v, s.examples[k][0][:100]))
        print("worker RSS over time (kB):")
        step = max(1, len(self.rss) // 12)
        for t, kb in self.rss[::step] + self.rss[-1:]:
            print("  %6.0f s  %8d" % (t, kb))

    def leftovers(self, when):
        boxes, agents, cgroups = self.sandboxes(), self.agents(), self.cgroups()
        print("leftovers %s: %d state dirs, %d sbx-agent processes, %d cgroups%s" %
              (when, len(boxes), len(agents), len(cgroups),
               "" if not boxes else " (%s)" % ", ".join(sorted(boxes)[:5])), flush=True)
        return len(boxes) + len(agents) + len(cgroups)

    def run(self):
        self.start_worker()
        t0 = time.time()
        print("soak: worker pid %d, %d clients, %g minutes, runtime dir %s" %
              (self.worker.pid, self.args.clients, self.args.minutes, self.run_dir), flush=True)
        threading.Thread(target=self.observe, args=(t0,), daemon=True).start()
        clients = [threading.Thread(target=self.client, args=(i + 1,))
                   for i in range(self.args.clients)]
        for c in clients:
            c.start()
        end = t0 + self.args.minutes * 60
        while time.time() < end:
            time.sleep(min(self.args.report_s, max(0.1, end - time.time())))
            self.report(t0)
        self.stop.set()
        for c in clients:
            c.join()
        self.ids_seen |= self.sandboxes()
        self.rss.append((time.time() - t0, rss_kb(self.worker.pid)))
        self.report(t0, final=True)
        time.sleep(2)  # a killed client's cancel reaches the engine
        left = self.leftovers("with the worker running")
        self.worker.send_signal(signal.SIGTERM)
        try:
            self.worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.worker.kill()
            self.worker.wait()
        left_after = self.leftovers("after the worker exited (rc %d)" % self.worker.returncode)
        if not self.args.keep:
            for pid in self.agents():  # never left running by the soak itself
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            shutil.rmtree(self.tmp, ignore_errors=True)
        return 1 if left or left_after else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", required=True, help="the sbx-worker binary")
    ap.add_argument("--sbx", required=True, help="the sbx CLI binary")
    ap.add_argument("--minutes", type=float,
                    default=float(os.environ.get("SBX_SOAK_MINUTES") or 30.0))
    ap.add_argument("--clients", type=int, default=4, help="concurrent client threads")
    ap.add_argument("--report-s", type=float, default=60.0, help="seconds between progress lines")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir and any leftovers")
    sys.exit(Soak(ap.parse_args()).run())


if __name__ == "__main__":
    main()
