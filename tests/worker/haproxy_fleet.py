#!/usr/bin/python3
"""haproxy_fleet.py - deploy/haproxy.cfg, unmodified, in front of two real sbx-workers on
loopback: calls go through it (Execute, ExecuteStream, Health), and requests carrying the same
x-sbx-node header always reach the same worker while different keys spread over both.

usage: haproxy_fleet.py --worker PATH/sbx-worker --stubs BUILD/gen/python --config deploy/haproxy.cfg
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import grpc_interop as gi


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class HaproxyFleet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-haproxy-")
        cls.workers = []
        cls.haproxy = None
        cls.channel = None
        try:
            cls.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start(cls):
        cls.workers = [gi.Worker(cls.tmp, node="node-a"), gi.Worker(cls.tmp, node="node-b")]
        cls.port = free_port()
        env = dict(os.environ, SBX_LB_BIND="127.0.0.1:%d" % cls.port,
                   SBX_WORKER1="127.0.0.1:%d" % cls.workers[0].port,
                   SBX_WORKER2="127.0.0.1:%d" % cls.workers[1].port)
        cls.haproxy = subprocess.Popen([ARGS.haproxy, "-db", "-f", ARGS.config], env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", cls.port), timeout=1).close()
                break
            except OSError:
                if cls.haproxy.poll() is not None:
                    raise RuntimeError("haproxy exited with %d" % cls.haproxy.returncode)
                time.sleep(0.1)
        cls.channel = gi.grpc.insecure_channel("127.0.0.1:%d" % cls.port)

    @classmethod
    def tearDownClass(cls):
        if cls.channel:
            cls.channel.close()
        if cls.haproxy:
            cls.haproxy.terminate()
            try:
                cls.haproxy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.haproxy.kill()
        for w in cls.workers:
            w.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def node_for(self, key):
        stub = gi.pb_grpc.ExecutionStub(self.channel)
        d = stub.Describe(gi.pb.DescribeRequest(), timeout=30, metadata=[("x-sbx-node", key)])
        return d.node

    def test_execute_through_haproxy(self):
        stub = gi.pb_grpc.ExecutionStub(self.channel)
        c = stub.Execute(gi.command("echo via haproxy"), timeout=30)
        self.assertEqual(c.result.stdout, b"via haproxy\n")

    def test_execute_stream_through_haproxy(self):
        stub = gi.pb_grpc.ExecutionStub(self.channel)
        events = list(stub.ExecuteStream(gi.command("yes 3000"), timeout=30))
        self.assertEqual(events[-1].completion.result.stdout, b"y\n" * 3000)

    def test_health_through_haproxy(self):
        stub = gi.health_pb2_grpc.HealthStub(self.channel)
        resp = stub.Check(gi.health_pb2.HealthCheckRequest(), timeout=30)
        self.assertEqual(resp.status, gi.health_pb2.HealthCheckResponse.SERVING)

    def test_same_node_header_always_reaches_the_same_worker(self):
        for key in ("host-a", "host-b", "host-c"):
            first = self.node_for(key)
            for _ in range(8):
                self.assertEqual(self.node_for(key), first)

    def test_different_node_headers_spread_over_both_workers(self):
        seen = {self.node_for("host-%d" % i) for i in range(32)}
        self.assertEqual(seen, {"node-a", "node-b"})


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--stubs", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--haproxy", default="/usr/sbin/haproxy")
    ARGS, rest = p.parse_known_args()
    gi.ARGS = ARGS
    gi.load_stubs()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
