#!/usr/bin/python3
"""bench_worker.py - no-op Execute over h2c loopback: sbx-worker (embedded broker behind it)
against a C++ gRPC server answering the same no-op, both driven by h2load with the same framed
request (content-type application/grpc, te: trailers). Two shapes each: serial (1 connection,
1 stream) and loaded (4 connections x 16 streams). Prints medians (from h2load's per-request
log) and throughput side by side.

Note: h2load replays one body, so every request carries the same task_id; after the first, the
worker answers from the broker's dedup store. The row measures transport + worker + broker
(decode, auth, dedup, completion encode), not a provider.
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile

SERIAL_N = 20000
LOADED_N = 100000
WARMUP_N = 2000


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, payload):
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def request_body():
    run_command = field(1, b"true")                      # RunCommand.argv = ["true"]
    req = (field(1, b"00000000-0000-4000-8000-000000000001")  # task_id
           + field(2, b"fake")                              # profile
           + field(11, run_command))                        # run_command
    return b"\x00" + len(req).to_bytes(4, "big") + req


def start(argv, pattern):
    p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(pattern, line)
    if not m:
        p.kill()
        raise RuntimeError("%s did not start: %r" % (argv[0], line))
    return p, int(m.group(1))


def h2load(h2load_bin, port, body, n, c, m, tmp):
    log = os.path.join(tmp, "h2load-%d-%d-%d.log" % (port, c, m))
    out = subprocess.run(
        [h2load_bin, "-n", str(n), "-c", str(c), "-m", str(m), "-d", body,
         "-H", "content-type: application/grpc", "-H", "te: trailers",
         "--log-file", log, "http://127.0.0.1:%d/sbx.v1.Execution/Execute" % port],
        capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"finished in .*?, ([\d.]+) req/s", out).group(1))
    ok = int(re.search(r"(\d+) succeeded", out).group(1))
    lat = []
    with open(log) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                lat.append(int(parts[2]))
    os.unlink(log)
    return {"rps": rps, "ok": ok, "n": n, "median_us": statistics.median(lat) if lat else 0,
            "p99_us": sorted(lat)[int(len(lat) * 0.99)] if lat else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--peer", required=True)
    ap.add_argument("--h2load", default="h2load")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-worker-")
    body = os.path.join(tmp, "request.bin")
    with open(body, "wb") as f:
        f.write(request_body())
    cfgs = {}
    for flavor in ("embedded", "thread"):
        cfgs[flavor] = os.path.join(tmp, "worker-%s.yaml" % flavor)
        with open(cfgs[flavor], "w") as f:
            f.write("sandbox:\n  default_profile: fake\n  secret_file: %s/secret\n"
                    "  runtime_dir: %s/run\n"
                    "  broker: { flavor: %s, threads: 2 }\n"
                    "  worker: { listen: '127.0.0.1:0' }\n"
                    "  profiles:\n    fake: { type: fake, scope: per_call }\n"
                    % (tmp, tmp, flavor))
    procs = []
    try:
        worker, wport = start([args.worker, "--config", cfgs["embedded"]],
                              r"listening on port (\d+)")
        procs.append(worker)
        tworker, tport = start([args.worker, "--config", cfgs["thread"]],
                               r"listening on port (\d+)")
        procs.append(tworker)
        peer, pport = start([args.peer, "127.0.0.1:0"], r"listening on port (\d+)")
        procs.append(peer)
        rows = []
        for name, port in (("sbx-worker (embedded broker)", wport),
                           ("gRPC C++ 1.51 (callback)", pport),
                           ("sbx-worker (thread broker)", tport)):
            h2load(args.h2load, port, body, WARMUP_N, 1, 1, tmp)
            serial = h2load(args.h2load, port, body, SERIAL_N, 1, 1, tmp)
            loaded = h2load(args.h2load, port, body, LOADED_N, 4, 16, tmp)
            rows.append((name, serial, loaded))
        print("\nworker: no-op Execute over h2c loopback, h2load (same framed request)")
        print("%-30s %14s %12s %12s | %14s %12s %12s" % (
            "server", "serial median", "serial p99", "serial rps",
            "loaded median", "loaded p99", "loaded rps"))
        for name, s, l in rows:
            print("%-30s %11.0f us %9.0f us %12.0f | %11.0f us %9.0f us %12.0f%s" % (
                name, s["median_us"], s["p99_us"], s["rps"], l["median_us"], l["p99_us"],
                l["rps"], "" if s["ok"] == s["n"] and l["ok"] == l["n"] else "  (FAILURES)"))
        (_, ws, wl), (_, ps, pl) = rows[0], rows[1]
        print("targets compare the embedded-broker row with the peer; the thread-broker row (the\n"
              "production default) adds one hand-off to the broker's own threads")
        print("serial median ratio sbx/peer: %.2f (target <= 1.0 and <= 100 us)" %
              (ws["median_us"] / ps["median_us"]))
        print("loaded throughput ratio sbx/peer: %.2f (target >= 1.2)" % (wl["rps"] / pl["rps"]))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
