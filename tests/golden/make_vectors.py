#!/usr/bin/python3
"""make_vectors.py - encodes the golden vectors of the sbx.v1 contract with Python's protobuf.

Python's protobuf (Debian's python3-protobuf) is the third, independent encoder: its bytes are
decoded by protobuf-c and by nanopb in tests/golden/test_golden.c, which proves the two C
codecs agree with it and with each other, field by field and byte for byte.

    make_vectors.py --protoc PROTOC --proto-dir proto --gen-dir BUILD/gen/python --out DIR

generates the Python modules with `protoc --python_out` into --gen-dir (the build tree; never
committed), then writes DIR/<name>.bin for every vector and DIR/MANIFEST describing them.
--check-coverage refuses to write when some field of a message the vectors reach is set by no
vector (ctest runs it so: a field added to the .proto needs a value here).
Serialization is deterministic, so running it again must reproduce the committed bytes
exactly (ctest checks that). This script must not depend on anything but python3-protobuf.

MANIFEST lines (one vector, then the values the test checks explicitly):
    vector NAME TYPE SHA256 [FLAG...]
        FLAG unknown:        carries fields unknown to the .proto (nanopb drops them)
        nanopb_rejects:      exceeds a nanopb .options bound; nanopb must refuse it
        map_defaults:        a map entry holds a default value, which Python writes and the C
                             codecs omit: re-encodings must agree with each other and decode
                             to the same message, not equal the vector's bytes
    expect NAME PATH KIND VALUE
        PATH like principal.credentials[1].value (protobuf-c field names; [i] indexes a
        repeated field or a map's entries in wire order)
        KIND str (VALUE is the UTF-8 bytes in hex, "-" for empty), bytes (hex, "-" for empty),
             i64, u64, f64, bool (0/1), count (elements of a repeated field or bytes length),
             sha256 (of a bytes field), case (PATH is a message, "." for the top one; VALUE is
             ONEOF=FIELD, the member of that oneof which is set, "-" for none)
"""
import argparse
import hashlib
import os
import subprocess
import sys

# Bytes of the large vectors: 32 KiB is exactly the nanopb bound of WriteFile.content and of
# AgentFileWrite.data (the agent's chunk size); one byte more must be refused by nanopb.
CHUNK = 32768

CJK = "日本語のテキスト"
EMOJI = "🦀🚀👩‍💻"
COMBINING = "e\u0301 a\u0308 \u1100\u1161\u11a8"  # decomposed é, ä and a Hangul syllable
RTL = "مرحبا"


def pattern(n, mul=7, add=3):
    """n deterministic bytes that cover all 256 values."""
    return bytes(((i * mul + add) & 0xFF) for i in range(n))


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def unknown_fields():
    """Fields a newer contract might add: varint 100, string 101, fixed64 102, fixed32 103."""
    return (varint(100 << 3 | 0) + varint(1234567) +
            varint(101 << 3 | 2) + varint(len("from the future")) + b"from the future" +
            varint(102 << 3 | 1) + (0x1122334455667788).to_bytes(8, "little") +
            varint(103 << 3 | 5) + (0xCAFEBABE).to_bytes(4, "little"))


class Vectors:
    def __init__(self):
        self.items = []  # (name, type, bytes, flags, expects)

    def add(self, name, msg, flags=(), expects=(), raw=None):
        data = raw if raw is not None else msg.SerializeToString(deterministic=True)
        self.items.append((name, msg.DESCRIPTOR.full_name, data, list(flags), list(expects)))


def hexs(s):
    if isinstance(s, str):
        s = s.encode("utf-8")
    return s.hex() if s else "-"


def build(ex, ag):
    v = Vectors()
    E = ex

    def principal(p):
        p.mode = E.PRINCIPAL_MODE_USER
        p.subject = "alice@example.com " + CJK
        p.groups.extend(["admins", "", "développeurs", EMOJI])
        p.credentials["role_arn"] = "arn:aws:iam::123456789012:role/sbx-user"
        p.credentials["run_as"] = "alice"
        p.credentials["note"] = COMBINING

    def policy(p):
        p.network_egress = E.NETWORK_EGRESS_ALLOWLIST
        p.network_allow.extend(["pypi.org", "*.github.com", "10.0.0.0/8", "2001:db8::/32"])
        p.fs_read.extend(["/data", "/opt/" + CJK])
        p.fs_write.extend(["/workspace/out"])
        p.cpu = 1.5
        p.memory_mb = 2**64 - 1
        p.pids = 2**32 - 1
        p.disk_mb = 2**40
        p.timeout_ms = 120000
        p.output_limit_bytes = 1 << 20
        p.lenient = True

    def session(s):
        s.session_id = "3f2c1d9e-7b6a-4c5d-8e9f-0a1b2c3d4e5f"
        s.name = "my session " + EMOJI
        s.profile = "default"
        s.provider = "local"
        s.sandbox_id = "sbx-0123456789abcdef"
        s.node = "host-a"
        s.binding = pattern(32, 13, 1)
        s.created_at_ms = -1234567890123  # negative int64: 10-byte varint
        s.last_used_at_ms = 1764374400000
        s.status = E.SESSION_STATUS_ACTIVE
        s.policy.network_egress = E.NETWORK_EGRESS_DENY  # the sandbox's: its sandbox dimensions
        s.policy.fs_write.extend(["/workspace/out"])
        s.policy.cpu = 0.25
        s.policy.memory_mb = 512
        s.policy.pids = 64

    def envelope(r, task):
        r.task_id = task
        r.profile = "default"
        principal(r.principal)
        policy(r.policy)
        session(r.session)
        r.agent = "claude"
        r.conversation_id = "conv-" + RTL
        r.deadline_ms = 9223372036854775807  # int64 max

    # --- ExecutionRequest: every op of the oneof -------------------------------------------
    r = E.ExecutionRequest()
    envelope(r, "11111111-1111-4111-8111-111111111111")
    r.run_code.language = "python"
    r.run_code.code = "print('%s %s %s')\nx = 1\n" % (CJK, EMOJI, COMBINING)
    r.run_code.env["LANG"] = "C.UTF-8"
    r.run_code.env["PYTHONHASHSEED"] = "0"
    r.run_code.cwd = "/workspace"
    r.run_code.stdin = b"\x00\x01\xfe\xff line\n"
    v.add("req_run_code", r, expects=[
        (".", "case", "op=run_code"),
        ("task_id", "str", hexs("11111111-1111-4111-8111-111111111111")),
        ("principal.mode", "i64", "2"),
        ("principal.subject", "str", hexs(r.principal.subject)),
        ("principal.groups", "count", "4"),
        ("principal.groups[1]", "str", "-"),
        ("principal.groups[3]", "str", hexs(EMOJI)),
        ("principal.credentials", "count", "3"),
        ("principal.credentials[0].key", "str", hexs("note")),  # deterministic: sorted keys
        ("principal.credentials[0].value", "str", hexs(COMBINING)),
        ("policy.network_egress", "i64", "3"),
        ("policy.cpu", "f64", "1.5"),
        ("policy.memory_mb", "u64", str(2**64 - 1)),
        ("policy.pids", "u64", str(2**32 - 1)),
        ("policy.disk_mb", "u64", str(2**40)),
        ("policy.lenient", "bool", "1"),
        ("session.binding", "bytes", hexs(pattern(32, 13, 1))),
        ("session.created_at_ms", "i64", "-1234567890123"),
        ("session.status", "i64", "1"),
        ("session.policy.network_egress", "i64", "1"),
        ("session.policy.cpu", "f64", "0.25"),
        ("session.policy.memory_mb", "u64", "512"),
        ("deadline_ms", "i64", "9223372036854775807"),
        ("conversation_id", "str", hexs("conv-" + RTL)),
        ("run_code.code", "str", hexs(r.run_code.code)),
        ("run_code.env", "count", "2"),
        ("run_code.env[1].key", "str", hexs("PYTHONHASHSEED")),
        ("run_code.env[1].value", "str", hexs("0")),
        ("run_code.stdin", "bytes", hexs(b"\x00\x01\xfe\xff line\n")),
    ])

    # A map entry whose value is the default (""): Python writes key AND value of every map
    # entry; protobuf-c and nanopb omit the empty value. Both encodings are valid and mean the
    # same message, so this vector is checked for agreement, not for byte equality.
    r = E.ExecutionRequest()
    r.task_id = "12121212-1212-4121-8121-121212121212"
    r.run_code.language = "bash"
    r.run_code.env["EMPTY"] = ""
    r.run_code.env["SET"] = "1"
    v.add("req_map_entry_default_value", r, flags=["map_defaults"], expects=[
        ("run_code.env", "count", "2"),
        ("run_code.env[0].key", "str", hexs("EMPTY")),
        ("run_code.env[0].value", "str", "-")])

    r = E.ExecutionRequest()
    r.task_id = "22222222-2222-4222-8222-222222222222"
    r.run_command.argv.extend(["python3", "-c", "print('" + CJK + "')", "", "--flag=" + EMOJI])
    r.run_command.env["PATH"] = "/usr/bin:/bin"
    r.run_command.cwd = "/tmp"
    v.add("req_run_command_argv", r, expects=[
        (".", "case", "op=run_command"),
        ("run_command.argv", "count", "5"),
        ("run_command.argv[2]", "str", hexs("print('" + CJK + "')")),
        ("run_command.argv[3]", "str", "-"),
        ("run_command.shell", "str", "-"),
        ("run_command.stdin", "count", "0"),
    ])

    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-333333333333"
    r.run_command.shell = "echo hello | tr a-z A-Z; exit 3"
    r.run_command.stdin = pattern(1000)
    v.add("req_run_command_shell", r, expects=[
        ("run_command.shell", "str", hexs("echo hello | tr a-z A-Z; exit 3")),
        ("run_command.stdin", "sha256", hashlib.sha256(pattern(1000)).hexdigest()),
    ])

    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-333333333334"
    session(r.session)
    r.run_command.argv.extend(["make", "test"])
    r.run_command.detach = True
    v.add("req_run_command_detach", r, expects=[
        (".", "case", "op=run_command"),
        ("run_command.detach", "bool", "1"),
    ])

    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-333333333335"
    session(r.session)
    r.attach_command.command_id = 2**64 - 1
    r.attach_command.stdout_offset = 2**40 + 3
    r.attach_command.stderr_offset = 7
    v.add("req_attach_command", r, expects=[
        (".", "case", "op=attach_command"),
        ("attach_command.command_id", "u64", str(2**64 - 1)),
        ("attach_command.stdout_offset", "u64", str(2**40 + 3)),
    ])

    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-333333333336"
    session(r.session)
    r.cancel_command.command_id = 42
    r.cancel_command.signal = 15
    v.add("req_cancel_command", r, expects=[
        (".", "case", "op=cancel_command"),
        ("cancel_command.signal", "i64", "15"),
    ])

    # empty messages: the oneof case alone carries the operation
    for op in ("pause", "resume"):
        r = E.ExecutionRequest()
        r.task_id = "33333333-3333-4333-8333-33333333333%d" % (7 if op == "pause" else 8)
        session(r.session)
        getattr(r, op).SetInParent()
        v.add("req_%s" % op, r, expects=[(".", "case", "op=%s" % op)])

    # snapshots: take one of a session, list, delete, and a fork from one
    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-33333333333a"
    session(r.session)
    r.snapshot.name = "base-2026.12_03"
    v.add("req_snapshot", r, expects=[(".", "case", "op=snapshot"),
                                      ("snapshot.name", "str", hexs("base-2026.12_03"))])
    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-33333333333b"
    r.list_snapshots.SetInParent()
    v.add("req_list_snapshots", r, expects=[(".", "case", "op=list_snapshots")])
    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-33333333333c"
    r.delete_snapshot.name = "old"
    v.add("req_delete_snapshot", r, expects=[(".", "case", "op=delete_snapshot"),
                                             ("delete_snapshot.name", "str", hexs("old"))])
    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-33333333333d"
    r.from_snapshot = "base"
    r.run_command.argv.extend(["make", "test"])
    v.add("req_from_snapshot", r, expects=[(".", "case", "op=run_command"),
                                           ("from_snapshot", "str", hexs("base"))])

    r = E.ExecutionRequest()
    r.task_id = "33333333-3333-4333-8333-33333333333e"
    session(r.session)
    r.expose.port = 8080
    v.add("req_expose", r, expects=[(".", "case", "op=expose"), ("expose.port", "u64", "8080")])

    r = E.ExecutionRequest()
    r.task_id = "44444444-4444-4444-8444-444444444444"
    r.install_packages.manager = "pip"
    r.install_packages.packages.extend(["numpy==1.26.4", "requests>=2", "pandas[excel]"])
    v.add("req_install_packages", r, expects=[
        (".", "case", "op=install_packages"),
        ("install_packages.packages", "count", "3"),
        ("install_packages.packages[2]", "str", hexs("pandas[excel]")),
    ])

    r = E.ExecutionRequest()
    r.task_id = "55555555-5555-4555-8555-555555555555"
    r.write_file.path = "/workspace/" + CJK + ".bin"
    r.write_file.content = pattern(CHUNK)
    r.write_file.mode = 0o755
    r.write_file.mkdirs = True
    r.write_file.offset = 1 << 33  # a chunk appended past 8 GiB
    v.add("req_write_file_32k", r, expects=[
        (".", "case", "op=write_file"),
        ("write_file.content", "count", str(CHUNK)),
        ("write_file.content", "sha256", hashlib.sha256(pattern(CHUNK)).hexdigest()),
        ("write_file.mode", "u64", str(0o755)),
        ("write_file.mkdirs", "bool", "1"),
        ("write_file.offset", "u64", str(1 << 33)),
    ])

    r = E.ExecutionRequest()
    r.task_id = "66666666-6666-4666-8666-666666666666"
    r.write_file.path = "/workspace/empty"
    r.write_file.content = b""
    v.add("req_write_file_empty", r, expects=[
        (".", "case", "op=write_file"),
        ("write_file.content", "count", "0"),
        ("write_file.mode", "u64", "0"),
        ("write_file.mkdirs", "bool", "0"),
    ])

    r = E.ExecutionRequest()
    r.task_id = "77777777-7777-4777-8777-777777777777"
    r.read_file.path = "/etc/hostname"
    r.read_file.offset = 2**63 + 5
    r.read_file.max_bytes = 4096
    v.add("req_read_file", r, expects=[
        (".", "case", "op=read_file"),
        ("read_file.offset", "u64", str(2**63 + 5)),
    ])

    r = E.ExecutionRequest()
    r.task_id = "88888888-8888-4888-8888-888888888888"
    r.list_files.path = "/"
    v.add("req_list_files", r, expects=[(".", "case", "op=list_files")])

    r = E.ExecutionRequest()
    r.task_id = "99999999-9999-4999-8999-999999999999"
    session(r.session)
    r.destroy.SetInParent()  # an empty message still selects the oneof member
    v.add("req_destroy", r, expects=[(".", "case", "op=destroy")])

    r = E.ExecutionRequest()
    r.task_id = "99999999-9999-4999-8999-99999999999a"
    session(r.session)
    r.recreate_elsewhere = True
    r.run_command.shell = "ls /workspace"
    v.add("req_recreate_elsewhere", r, expects=[
        ("recreate_elsewhere", "bool", "1"), (".", "case", "op=run_command")])

    v.add("req_empty", E.ExecutionRequest(), expects=[
        (".", "case", "op=-"), ("task_id", "str", "-")])

    # Unknown fields at the top and inside a nested message, as a newer contract would send.
    r = E.ExecutionRequest()
    r.task_id = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
    r.list_files.path = "/workspace"
    pol = E.Policy()
    pol.MergeFromString(E.Policy(pids=64, strict=True).SerializeToString() + unknown_fields())
    r.policy.CopyFrom(pol)
    r.MergeFromString(unknown_fields())
    v.add("req_unknown_fields", r, flags=["unknown"], expects=[
        ("policy.pids", "u64", "64"), ("policy.strict", "bool", "1"),
        ("list_files.path", "str", hexs("/workspace"))])

    # Beyond nanopb's bounds: protobuf-c (the host) accepts, nanopb must refuse.
    r = E.ExecutionRequest()
    r.task_id = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
    r.write_file.path = "/workspace/big"
    r.write_file.content = pattern(CHUNK + 1)
    v.add("req_write_file_over_nanopb_bound", r, flags=["nanopb_rejects"], expects=[
        ("write_file.content", "count", str(CHUNK + 1))])

    r = E.ExecutionRequest()
    r.task_id = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
    r.run_command.argv.extend("a%d" % i for i in range(17))  # bound: max_count 16
    v.add("req_argv_over_nanopb_count", r, flags=["nanopb_rejects"], expects=[
        ("run_command.argv", "count", "17")])

    # --- ExecutionCompletion --------------------------------------------------------------
    c = E.ExecutionCompletion()
    c.task_id = "11111111-1111-4111-8111-111111111111"
    c.status = E.COMPLETION_STATUS_SUCCEEDED
    res = c.result
    res.exit_code = -1
    res.signal = 0
    res.outcome = E.OUTCOME_NONZERO
    res.stdout = ("out " + CJK + "\n").encode() + b"\xff\xfe raw"
    res.stderr = b"Traceback (most recent call last):\n"
    res.stdout_truncated = True
    f = res.files.add()
    f.path = "/workspace/a.txt"
    f.content = b"hello"
    f.mode = 0o644
    f.size = 5
    f.kind = E.FILE_KIND_REGULAR
    f.mtime_ms = -1
    f = res.files.add()
    f.path = "/workspace/" + EMOJI
    f.kind = E.FILE_KIND_DIRECTORY
    f.mode = 0o755
    res.wall_us = 1234567
    res.cpu_us = 2**53 + 1
    res.max_rss_kb = 65536
    res.value = "[1, 2, 3] " + COMBINING
    res.provider_data["container_id"] = "abc123"
    res.provider_data["image"] = "debian:12"
    session(c.session)
    c.notice = "the sandbox behind session X no longer existed and was recreated empty"
    c2 = E.ExecutionCompletion()
    c2.task_id = "33333333-3333-4333-8333-333333333335"
    c2.status = E.COMPLETION_STATUS_SUCCEEDED
    c2.result.outcome = E.OUTCOME_OK
    c2.result.stdout = b"tail of the output\n"
    c2.result.command_id = 17
    c2.result.stdout_offset = 300000
    c2.result.stderr_offset = 2**33
    snap = c2.result.snapshots.add()
    snap.name = "base"
    snap.size = 2**33 + 10240
    snap.created_at_ms = 1764720000123
    ref = c2.result.egress_refused.add()
    ref.destination = "evil.example:443"
    ref.count = 3
    c2.result.egress_refused.add().destination = "dns:evil.example"
    c2.result.expose_url = "http://127.0.0.1:41234/"
    c2.result.expose_token = "0123456789abcdef0123456789abcdef"
    v.add("completion_attached", c2, expects=[
        ("result.egress_refused", "count", "2"),
        ("result.egress_refused[0].destination", "str", hexs("evil.example:443")),
        ("result.egress_refused[0].count", "u64", "3"),
        ("result.expose_url", "str", hexs("http://127.0.0.1:41234/")),
        ("result.snapshots", "count", "1"),
        ("result.snapshots[0].size", "u64", str(2**33 + 10240)),
        ("result.snapshots[0].created_at_ms", "i64", "1764720000123"),
        ("result.command_id", "u64", "17"),
        ("result.stdout_offset", "u64", "300000"),
        ("result.stderr_offset", "u64", str(2**33)),
    ])
    v.add("completion_succeeded", c, expects=[
        ("status", "i64", "1"),
        ("result.exit_code", "i64", "-1"),
        ("result.outcome", "i64", "2"),
        ("result.stdout", "bytes", hexs(res.stdout)),
        ("result.stdout_truncated", "bool", "1"),
        ("result.stderr_truncated", "bool", "0"),
        ("result.files", "count", "2"),
        ("result.files[0].mtime_ms", "i64", "-1"),
        ("result.files[1].path", "str", hexs("/workspace/" + EMOJI)),
        ("result.files[1].content", "count", "0"),
        ("result.cpu_us", "u64", str(2**53 + 1)),
        ("result.provider_data[1].key", "str", hexs("image")),
        ("result.value", "str", hexs(res.value)),
        ("error_code", "i64", "0"),
    ])

    c = E.ExecutionCompletion()
    c.task_id = "22222222-2222-4222-8222-222222222222"
    c.status = E.COMPLETION_STATUS_FAILED
    c.error_code = E.ERROR_CODE_PERMISSION_DENIED
    c.error = "session '" + CJK + "' belongs to another principal; use your own session"
    v.add("completion_failed", c, expects=[
        ("status", "i64", "2"), ("error_code", "i64", "9"), ("error", "str", hexs(c.error))])

    c = E.ExecutionCompletion()
    c.task_id = "22222222-2222-4222-8222-222222222223"
    c.status = E.COMPLETION_STATUS_FAILED
    c.error_code = E.ERROR_CODE_WRONG_NODE
    c.error = "session 'x' (provider local) lives on node 'host-a', not on this node 'host-b'"
    c.node = "host-a"
    c.deliveries = 2**32 - 1
    session(c.session)
    v.add("completion_wrong_node", c, expects=[
        ("error_code", "i64", "14"), ("node", "str", hexs("host-a")),
        ("deliveries", "u64", str(2**32 - 1))])

    c = E.ExecutionCompletion()
    c.task_id = "33333333-3333-4333-8333-333333333333"
    c.status = E.COMPLETION_STATUS_TIMED_OUT
    c.error_code = E.ERROR_CODE_TIMEOUT
    c.result.outcome = E.OUTCOME_TIMED_OUT
    c.result.signal = 9
    c.result.stdout = b"partial output before the deadline\n"
    c.result.stderr_truncated = True
    v.add("completion_timed_out", c, expects=[
        ("status", "i64", "3"), ("error_code", "i64", "4"), ("result.signal", "i64", "9")])

    # proto3 enums are open: a value this contract does not name survives both codecs.
    c = E.ExecutionCompletion()
    c.task_id = "44444444-4444-4444-8444-444444444444"
    c.status = 77
    c.error_code = 99
    v.add("completion_unknown_enum_values", c, expects=[
        ("status", "i64", "77"), ("error_code", "i64", "99")])

    # --- ExecuteEvent, DescribeResponse, Capabilities --------------------------------------
    e = E.ExecuteEvent()
    e.output.stream = E.STREAM_STDERR
    e.output.data = pattern(CHUNK, 31, 17)
    e.output.offset = 2**40 + 7
    v.add("event_output_32k", e, expects=[
        (".", "case", "event=output"),
        ("output.data", "sha256", hashlib.sha256(pattern(CHUNK, 31, 17)).hexdigest()),
        ("output.offset", "u64", str(2**40 + 7))])

    e = E.ExecuteEvent()
    e.completion.task_id = "55555555-5555-4555-8555-555555555555"
    e.completion.status = E.COMPLETION_STATUS_SUCCEEDED
    e.completion.result.outcome = E.OUTCOME_OK
    v.add("event_completion", e, expects=[
        (".", "case", "event=completion"), ("completion.result.outcome", "i64", "1")])

    d = E.DescribeResponse()
    for name, prov, iso in (("default", "local", E.ISOLATION_OS_POLICY),
                            ("cloud", "e2b", E.ISOLATION_MICRO_VM)):
        p = d.profiles.add()
        p.name = name
        p.provider = prov
        p.scope = "per_session"
        p.environment = "managed"
        caps = p.capabilities
        caps.isolation = iso
        caps.languages.extend(["python", "bash", "node"])
        for fld in ("shell", "files", "package_install", "stateful", "attach", "provisions",
                    "attaches_external", "principal_user", "policy_network",
                    "policy_network_domains", "policy_filesystem", "policy_resources",
                    "streaming", "detach", "pause", "snapshot", "expose"):
            setattr(caps, fld, True)
        p.idle_timeout_s = 1800
        p.idle_pause = True
    d.default_profile = "default"
    d.node = "host-a"
    d.version = "0.1.0"
    v.add("describe_response", d, expects=[
        ("profiles", "count", "2"),
        ("profiles[1].capabilities.isolation", "i64", "4"),
        ("profiles[1].capabilities.streaming", "bool", "1"),
        ("profiles[0].capabilities.languages[2]", "str", hexs("node"))])

    # Recording (the recorder's file format): protobuf-c only -- too large for nanopb structs.
    rec = E.Recording()
    rec.request.task_id = "13131313-1313-4131-8131-131313131313"
    rec.request.run_command.argv.extend(["uname", "-a"])
    rec.completion.task_id = rec.request.task_id
    rec.completion.status = E.COMPLETION_STATUS_SUCCEEDED
    rec.completion.result.stdout = b"Linux\n"
    rec.broker = "thread"
    rec.started_at_ms = 1764374400000
    rec.finished_at_ms = 1764374400123
    v.add("recording", rec, expects=[
        ("broker", "str", hexs("thread")),
        ("completion.result.stdout", "bytes", hexs(b"Linux\n")),
        ("request.run_command.argv[1]", "str", hexs("-a")),
        ("finished_at_ms", "i64", "1764374400123")])

    # --- AgentRequest: every body of the oneof ---------------------------------------------
    A = ag
    q = A.AgentRequest(id=1)
    q.exec.argv.extend(["/bin/sh", "-c", "echo " + CJK])
    q.exec.env.add(name="PATH", value="/usr/bin:/bin")
    q.exec.env.add(name="GREETING", value=EMOJI)
    q.exec.cwd = "/workspace"
    q.exec.uid = 65534
    q.exec.gid = 2**32 - 1
    q.exec.timeout_ms = 30000
    q.exec.output_limit_bytes = 2**64 - 1
    q.exec.stdin_follows = True
    v.add("agent_req_exec", q, expects=[
        (".", "case", "body=exec"), ("id", "u64", "1"),
        ("exec.env[1].value", "str", hexs(EMOJI)), ("exec.gid", "u64", str(2**32 - 1)),
        ("exec.output_limit_bytes", "u64", str(2**64 - 1))])

    # Many repeated elements, exactly at the bounds (argv 64, env 16): a pb_size_t mismatch
    # between the generated code and libprotobuf-nanopb.a would show here.
    q = A.AgentRequest(id=2)
    q.exec.argv.extend("arg-%02d-%s" % (i, "x" * i) for i in range(64))
    for i in range(16):
        q.exec.env.add(name="VAR_%02d" % i, value="value-%02d" % i)
    q.exec.shell = ""
    v.add("agent_req_exec_many", q, expects=[
        ("exec.argv", "count", "64"), ("exec.env", "count", "16"),
        ("exec.argv[63]", "str", hexs("arg-63-" + "x" * 63)),
        ("exec.env[15].name", "str", hexs("VAR_15"))])

    q = A.AgentRequest(id=3)
    q.exec.argv.extend("a%d" % i for i in range(65))  # bound: max_count 64
    v.add("agent_req_exec_argv_over_nanopb_count", q, flags=["nanopb_rejects"],
          expects=[("exec.argv", "count", "65")])

    q = A.AgentRequest(id=4)
    q.code.language = "python"
    q.code.code = ("import math\nprint(math.pi, '" + CJK + "')\nmath.e\n").encode()
    q.code.more = True
    q.code.cwd = "/workspace"
    q.code.uid = 1000
    q.code.gid = 1000
    q.code.output_limit_bytes = 1 << 20
    q.code.stateful = True
    q.code.env.add(name="A", value="")
    q.code.timeout_ms = 5000
    q.code.stdin_follows = True
    v.add("agent_req_code", q, expects=[(".", "case", "body=code"),
                                        ("code.stateful", "bool", "1")])

    q = A.AgentRequest(id=13)
    q.exec.argv.extend(["sleep", "600"])
    q.exec.detach = True
    v.add("agent_req_exec_detach", q, expects=[(".", "case", "body=exec"),
                                               ("exec.detach", "bool", "1")])

    q = A.AgentRequest(id=14)
    q.code.language = "sh"
    q.code.code = b"make test"
    q.code.detach = True
    v.add("agent_req_code_detach", q, expects=[(".", "case", "body=code"),
                                               ("code.detach", "bool", "1")])

    q = A.AgentRequest(id=5)
    q.stdin.command_id = 42
    q.stdin.data = b""
    q.stdin.eof = True
    v.add("agent_req_stdin_eof", q, expects=[(".", "case", "body=stdin"),
                                             ("stdin.data", "count", "0")])

    q = A.AgentRequest(id=13)
    q.stdin.command_id = 42
    q.stdin.data = pattern(300) + "\n\u00e9".encode()
    v.add("agent_req_stdin_data", q, expects=[("stdin.data", "count", "303")])

    q = A.AgentRequest(id=14)
    q.exec.shell = "for i in 1 2 3; do echo \"$i " + CJK + "\"; done | sort -r"
    v.add("agent_req_exec_shell", q, expects=[("exec.shell", "str", hexs(q.exec.shell)),
                                              ("exec.argv", "count", "0")])

    q = A.AgentRequest(id=6)
    q.file_write.path = "/workspace/" + COMBINING
    q.file_write.data = pattern(CHUNK, 5, 250)
    q.file_write.offset = CHUNK * 3
    q.file_write.mode = 0o600
    q.file_write.mkdirs = True
    q.file_write.last = True
    q.file_write.uid = 1000
    q.file_write.gid = 1000
    q.file_write.append = True
    v.add("agent_req_file_write_32k", q, expects=[
        (".", "case", "body=file_write"),
        ("file_write.append", "bool", "1"),
        ("file_write.data", "sha256", hashlib.sha256(pattern(CHUNK, 5, 250)).hexdigest())])

    q = A.AgentRequest(id=7)
    q.file_write.path = "/workspace/too-big"
    q.file_write.data = pattern(CHUNK + 1)
    v.add("agent_req_file_write_over_nanopb_bound", q, flags=["nanopb_rejects"],
          expects=[("file_write.data", "count", str(CHUNK + 1))])

    q = A.AgentRequest(id=8)
    q.file_read.path = "/etc/os-release"
    q.file_read.offset = 10
    q.file_read.max_bytes = CHUNK
    v.add("agent_req_file_read", q, expects=[(".", "case", "body=file_read")])

    q = A.AgentRequest(id=9)
    q.file_list.path = "/"
    v.add("agent_req_file_list", q, expects=[(".", "case", "body=file_list")])

    q = A.AgentRequest(id=10)
    q.signal.command_id = 42
    q.signal.signo = -15  # negative int32: 10-byte varint; the agent must reject it, not crash
    v.add("agent_req_signal", q, expects=[(".", "case", "body=signal"),
                                          ("signal.signo", "i64", "-15")])

    q = A.AgentRequest(id=2**64 - 1)
    q.ping.nonce = 0xDEADBEEFCAFEF00D
    v.add("agent_req_ping", q, expects=[(".", "case", "body=ping"),
                                        ("id", "u64", str(2**64 - 1))])

    q = A.AgentRequest(id=12)
    q.attach.command_id = 42
    q.attach.stdout_offset = 100
    q.attach.stderr_offset = 7
    v.add("agent_req_attach", q, expects=[(".", "case", "body=attach")])

    # --- AgentEvent: every body of the oneof -----------------------------------------------
    ev = A.AgentEvent(id=1)
    ev.started.command_id = 42
    ev.started.pid = 7
    v.add("agent_evt_started", ev, expects=[(".", "case", "body=started")])

    ev = A.AgentEvent(id=1)
    ev.output.command_id = 42
    ev.output.stream = A.AGENT_STREAM_STDOUT
    ev.output.offset = 1 << 40
    ev.output.data = pattern(CHUNK, 3, 0)
    v.add("agent_evt_output_32k", ev, expects=[(".", "case", "body=output"),
                                               ("output.data", "count", str(CHUNK))])

    ev = A.AgentEvent(id=1)
    ev.exit.command_id = 42
    ev.exit.exit_code = -2
    ev.exit.signal = 9
    ev.exit.outcome = A.AGENT_OUTCOME_SIGNALED
    ev.exit.wall_us = 10
    ev.exit.cpu_us = 20
    ev.exit.max_rss_kb = 30
    ev.exit.stdout_truncated = True
    ev.exit.stderr_truncated = True
    ev.exit.stdout_bytes = 2**63
    ev.exit.stderr_bytes = 1
    ev.exit.value = "3.141592653589793 " + CJK
    ev.exit.kernel_restarted = True
    v.add("agent_evt_exit", ev, expects=[(".", "case", "body=exit"),
                                         ("exit.exit_code", "i64", "-2"),
                                         ("exit.stdout_bytes", "u64", str(2**63))])

    ev = A.AgentEvent(id=2)
    ev.file_data.path = "/etc/" + CJK
    ev.file_data.offset = 65536
    ev.file_data.data = ("ID=debian\n" + EMOJI).encode()
    ev.file_data.size = 1 << 33
    ev.file_data.mode = 0o644
    ev.file_data.eof = True
    v.add("agent_evt_file_data", ev, expects=[(".", "case", "body=file_data")])

    ev = A.AgentEvent(id=3)
    ev.entry.name = RTL
    ev.entry.kind = A.AGENT_FILE_KIND_SYMLINK
    ev.entry.mode = 0o777
    ev.entry.size = 12
    ev.entry.mtime_ms = -86400000
    ev.entry.last = True
    v.add("agent_evt_entry", ev, expects=[(".", "case", "body=entry"),
                                          ("entry.mtime_ms", "i64", "-86400000")])

    ev = A.AgentEvent(id=4)
    ev.error.code = 6
    ev.error.message = "no such command: 42 (" + EMOJI + ")"
    v.add("agent_evt_error", ev, expects=[(".", "case", "body=error")])

    ev = A.AgentEvent(id=5)
    ev.pong.nonce = 0xDEADBEEFCAFEF00D
    ev.pong.version = "0.1.0"
    ev.pong.uptime_ms = 1
    ev.pong.running = 3
    ev.pong.uid = 65534
    ev.pong.shared_uid = True
    v.add("agent_evt_pong", ev, expects=[(".", "case", "body=pong"), ("pong.uid", "u64", "65534"),
                                         ("pong.shared_uid", "bool", "1")])

    ev = A.AgentEvent(id=6)
    ev.written.path = "/workspace/out.bin"
    ev.written.size = CHUNK * 4
    v.add("agent_evt_written", ev, expects=[(".", "case", "body=written")])

    # An event from a newer agent: unknown fields at the top and inside the body.
    ev = A.AgentEvent(id=7)
    st = A.AgentStarted()
    st.MergeFromString(A.AgentStarted(command_id=9, pid=99).SerializeToString() + unknown_fields())
    ev.started.CopyFrom(st)
    ev.MergeFromString(unknown_fields())
    v.add("agent_evt_unknown_fields", ev, flags=["unknown"], expects=[
        ("started.pid", "i64", "99")])
    return v


def uncovered_fields(vectors, modules):
    """Fields of every message reachable from the vectors' types that no vector sets."""
    seen, reachable = set(), {}

    def reach(d):
        if d.full_name not in reachable:
            reachable[d.full_name] = d
            for f in d.fields:
                if f.message_type is not None:
                    reach(f.message_type)

    def mark(m):
        for f, value in m.ListFields():
            seen.add(m.DESCRIPTOR.full_name + "." + f.name)
            if f.message_type is None:
                continue
            if f.message_type.GetOptions().map_entry:
                for k, val in value.items():
                    if k:
                        seen.add(f.message_type.full_name + ".key")
                    if val:
                        seen.add(f.message_type.full_name + ".value")
            elif f.label == f.LABEL_REPEATED:
                for item in value:
                    mark(item)
            else:
                mark(value)

    for name, typ, data, flags, expects in vectors.items:
        short = typ.split(".")[-1]
        cls = next(getattr(mod, short) for mod in modules if hasattr(mod, short))
        msg = cls()
        msg.ParseFromString(data)
        reach(msg.DESCRIPTOR)
        mark(msg)
    return sorted(full + "." + f.name for full, d in reachable.items() for f in d.fields
                  if full + "." + f.name not in seen)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--protoc", default="protoc")
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--gen-dir", required=True, help="where protoc writes the _pb2 modules")
    ap.add_argument("--out", required=True, help="directory for the .bin files and MANIFEST")
    ap.add_argument("--check-coverage", action="store_true",
                    help="fail when a field of a reachable message is set by no vector")
    a = ap.parse_args()

    os.makedirs(a.gen_dir, exist_ok=True)
    subprocess.run([a.protoc, "-I", a.proto_dir, "--python_out", a.gen_dir,
                    os.path.join(a.proto_dir, "sbx/v1/execution.proto"),
                    os.path.join(a.proto_dir, "sbx/v1/agent.proto")], check=True)
    sys.path.insert(0, a.gen_dir)
    from sbx.v1 import agent_pb2, execution_pb2  # noqa: E402 (generated just above)

    vectors = build(execution_pb2, agent_pb2)
    if a.check_coverage:
        missing = uncovered_fields(vectors, (execution_pb2, agent_pb2))
        if missing:
            sys.stderr.write(
                "no golden vector sets these fields of the contract:\n  " + "\n  ".join(missing) +
                "\nset each in build() of tests/golden/make_vectors.py (a non-default value, in an"
                " existing vector or a new one), then run\n  /usr/bin/python3 "
                "tests/golden/make_vectors.py --proto-dir proto --gen-dir /tmp/sbx-golden-py "
                "--out tests/golden/vectors --check-coverage\nand commit the vectors.\n")
            return 1
    os.makedirs(a.out, exist_ok=True)
    lines = ["# Golden vectors of the sbx.v1 contract, written by tests/golden/make_vectors.py",
             "# (Python protobuf, deterministic serialization). Format: see make_vectors.py."]
    names = set()
    for name, typ, data, flags, expects in vectors.items:
        assert name not in names, name
        names.add(name)
        with open(os.path.join(a.out, name + ".bin"), "wb") as fh:
            fh.write(data)
        lines.append(" ".join(["vector", name, typ, hashlib.sha256(data).hexdigest()] + flags))
        for path, kind, value in expects:
            lines.append(" ".join(["expect", name, path, kind, value]))
    with open(os.path.join(a.out, "MANIFEST"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
