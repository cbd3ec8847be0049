#!/usr/bin/python3
"""bench_cli.py - first-byte latency of `sbx run`'s live output: a program inside a local
sandbox prints the wall-clock time (date +%s%N) LINES times; the bench stamps each line when
`sbx` hands it over on its stdout and reports the median of (arrival - written). Rows: the
embedded broker, the remote broker through an sbx-worker on h2c loopback, and the peer: the
same program as a plain host process through a pipe (no sandbox, no sbx).

The sandbox shares the host's CLOCK_REALTIME (no time namespace), so the two stamps compare.

usage: bench_cli.py --sbx build/cli/sbx --worker build/worker/sbx-worker
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

LINES = 200     # lines per run: enough for a stable median
GAP_S = 0.02    # pause between lines, so each one is a first byte after an idle pipe
PROGRAM = "for i in $(seq %d); do sleep %s; date +%%s%%N; done" % (LINES, GAP_S)


def latencies(argv, env):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    out = []
    for line in p.stdout:
        now = time.time_ns()
        try:
            out.append((now - int(line)) / 1000.0)
        except ValueError:
            pass
    p.wait()
    if p.returncode != 0 or len(out) != LINES:
        raise RuntimeError("%s: exit %d, %d lines" % (argv[:3], p.returncode, len(out)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sbx", required=True)
    ap.add_argument("--worker", required=True)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-cli-")
    os.chmod(tmp, 0o755)
    env = dict(os.environ, HOME=tmp, XDG_STATE_HOME=os.path.join(tmp, "state"))
    env.pop("SBX_CONFIG", None)
    cfg = os.path.join(tmp, "worker.yaml")
    with open(cfg, "w") as f:
        f.write("sandbox:\n  secret_file: %s/secret\n  runtime_dir: %s/run\n"
                "  worker: { listen: 127.0.0.1:0 }\n"
                "  profiles:\n    default: { type: local, scope: per_session }\n" % (tmp, tmp))
    worker = subprocess.Popen([args.worker, "--config", cfg], stderr=subprocess.PIPE, text=True)
    try:
        m = re.search(r"listening on port (\d+)", worker.stderr.readline())
        if not m:
            raise RuntimeError("sbx-worker did not start")
        endpoint = "http://127.0.0.1:%s" % m.group(1)
        rows = [
            ("host pipe (peer: no sandbox)", ["sh", "-c", PROGRAM]),
            ("sbx run, embedded broker", [args.sbx, "run", "--", "sh", "-c", PROGRAM]),
            ("sbx run, remote broker (h2c loopback)",
             [args.sbx, "--broker", "remote", "--endpoint", endpoint, "run", "--", "sh", "-c",
              PROGRAM]),
        ]
        print("cli live output: first-byte latency, program write -> sbx stdout (%d lines)"
              % LINES)
        for name, argv in rows:
            lat = latencies(argv, env)
            print("  %-40s median %8.1f us   p90 %8.1f us"
                  % (name, statistics.median(lat), sorted(lat)[int(len(lat) * 0.9)]))
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
