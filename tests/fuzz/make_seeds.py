#!/usr/bin/python3
"""make_seeds.py - writes the committed seed corpora under tests/fuzz/corpus/<target>/: the
golden vectors of the target's message type (tests/golden/vectors) plus hand-made malformed
inputs. Run from anywhere; it rewrites the corpus directories it knows and nothing else.
A corpus is data, not a test: ctest replays it, libFuzzer starts from it."""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "golden", "vectors")


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, wire, payload):
    head = varint(num << 3 | wire)
    if wire == 2:
        return head + varint(len(payload)) + payload
    return head + payload


def nest(depth, num):
    """a submessage inside a submessage ... depth times (field num each time)."""
    body = b""
    for _ in range(depth):
        body = field(num, 2, body)
    return body


# Malformed inputs every decoder must refuse or survive, whatever its message type.
COMMON = {
    "empty": b"",
    "overlong_varint": b"\x08" + b"\xff" * 11,
    "truncated_varint": b"\x08\x80",
    "length_past_end": b"\x0a\x10abc",
    "huge_length": b"\x12\xff\xff\xff\xff\x0f",
    "huge_length_64bit": b"\x12\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
    "wire_type_6": b"\x0e\x00",
    "wire_type_7": b"\x0f\x00",
    "start_group": b"\x0b\x08\x01\x0c",
    "end_group_alone": b"\x0c",
    "zero_tag_then_garbage": b"\x08\x01\x00\xff\xff\xff",
    "field_max_number": varint((2**29 - 1) << 3 | 0) + b"\x01",
    "fixed64_truncated": b"\x09\x01\x02\x03",
    "fixed32_truncated": b"\x0d\x01\x02",
    # found by fuzz_completion_decode: protobuf-c took field number 0 as a two-byte tag
    "zero_field_number_two_byte_tag": b"\x80\x00\x6f",
    "field_number_over_2_29": b"\x80\x80\x80\x80\x10\x01",
}


def write(target, seeds, golden_prefixes):
    d = os.path.join(HERE, "corpus", target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name in sorted(os.listdir(GOLDEN)):
        if name.endswith(".bin") and name.startswith(golden_prefixes):
            shutil.copyfile(os.path.join(GOLDEN, name), os.path.join(d, "golden_" + name))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(d, "malformed_" + name + ".bin"), "wb") as fh:
            fh.write(data)


def golden(name):
    with open(os.path.join(GOLDEN, name + ".bin"), "rb") as fh:
        return fh.read()


def main():
    req = dict(COMMON)
    full = golden("req_run_code")
    req["truncated_run_code"] = full[: len(full) // 2]
    req["deep_nesting_run_code"] = nest(200, 10)  # run_code inside run_code... (wrong types)
    req["policy_many_fs_read"] = field(4, 2, b"".join(field(3, 2, b"/p%d" % i) for i in range(2000)))
    req["two_ops_in_oneof"] = field(10, 2, field(1, 2, b"python")) + field(16, 2, b"")
    req["string_with_nul"] = field(1, 2, b"abc\x00def")
    req["invalid_utf8_string"] = field(1, 2, b"\xc3\x28\xff")
    # found by fuzz_request_decode: field number 0 (two-byte tag) inside run_code
    req["zero_field_number_nested"] = field(10, 2, field(1, 2, b"python") + b"\x82\x00\x00")
    req["op_then_same_op_merged"] = field(11, 2, field(1, 2, b"a")) + field(11, 2, field(1, 2, b"b"))
    write("fuzz_request_decode", req, ("req_",))
    # fuzz_policy reads the same requests (its CMake CORPUS); its own seeds pair a request's
    # policy with a session policy (standing for the profile's) in the shapes that matter
    pol = lambda body: field(4, 2, body)
    sess = lambda body: field(5, 2, field(1, 2, b"s-1") + field(11, 2, body))
    write("fuzz_policy", {
        "fs_under_profile": pol(field(3, 2, b"/data/in")) + sess(field(3, 2, b"/data")),
        "fs_dotdot": pol(field(3, 2, b"/data/../etc")) + sess(field(3, 2, b"/data")),
        "fs_prefix_only": pol(field(3, 2, b"/database")) + sess(field(3, 2, b"/data")),
        "egress_allow_over_unspecified": pol(field(1, 0, b"\x02")) + sess(field(6, 0, b"\x80\x04")),
        "allowlist_entries": pol(field(1, 0, b"\x03") + field(2, 2, b"pypi.org"))
                             + sess(field(1, 0, b"\x03") + field(2, 2, b"*.pypi.org")),
        "memory_narrower": pol(field(6, 0, b"\x40")) + sess(field(6, 0, b"\x80\x04")),
        "cpu_tiny": pol(field(5, 1, b"\x00" * 7 + b"\x3c")),
    }, ())

    comp = dict(COMMON)
    full = golden("completion_succeeded")
    comp["truncated_succeeded"] = full[: len(full) - 7]
    comp["many_files"] = field(3, 2, b"".join(field(8, 2, field(1, 2, b"/f")) for _ in range(3000)))
    comp["long_notice"] = field(7, 2, b"n" * 5000)
    comp["map_entry_without_key"] = field(3, 2, field(13, 2, field(2, 2, b"v")))
    comp["negative_enum"] = b"\x10" + b"\xff" * 9 + b"\x01"
    write("fuzz_completion_decode", comp, ("completion_", "event_completion"))

    areq = dict(COMMON)
    areq["argv_over_bound"] = field(2, 2, b"".join(field(1, 2, b"x") for _ in range(65)))
    areq["argv_element_over_bound"] = field(2, 2, field(1, 2, b"y" * 512))
    areq["argv_element_at_bound"] = field(2, 2, field(1, 2, b"y" * 511))
    areq["env_over_bound"] = field(2, 2, b"".join(field(3, 2, field(1, 2, b"K")) for _ in range(17)))
    areq["int32_as_5_byte_varint"] = field(8, 2, b"\x10\xff\xff\xff\xff\x0f")  # signo 2^32-1
    areq["uint32_over_range"] = field(2, 2, b"\x28" + varint(2**40))  # uid 2^40
    areq["oneof_switch"] = field(9, 2, b"\x08\x01") + field(2, 2, field(2, 2, b"sh"))
    areq["zero_tag_inside_body"] = field(9, 2, b"\x08\x01\x00\x00\x99")
    areq["data_over_bound"] = field(4, 2, field(2, 2, b"d" * 32769))
    # found by fuzz_agent_request_nanopb: the same oneof member twice (nanopb merges,
    # protobuf-c kept the last part; sbx_message_decode now refuses it)
    areq["oneof_member_twice"] = field(10, 2, b"\x08\x2a\x10\x64") + field(10, 2, b"\x08\x2a")
    write("fuzz_agent_request_nanopb", areq, ("agent_req_",))

    aevt = dict(COMMON)
    aevt["output_over_bound"] = field(3, 2, field(4, 2, b"o" * 32769))
    aevt["entry_name_at_bound"] = field(6, 2, field(1, 2, b"n" * 255))
    aevt["entry_name_over_bound"] = field(6, 2, field(1, 2, b"n" * 256))
    aevt["exit_value_nul"] = field(4, 2, field(12, 2, b"a\x00b"))
    aevt["bool_as_2"] = field(4, 2, b"\x40\x02")
    aevt["deep_nesting"] = nest(100, 2)
    # found by fuzz_agent_event_nanopb: started{42, 7} then started{unknown field}
    aevt["oneof_member_twice"] = bytes.fromhex("1204082a10071204f8de1007")
    # found by fuzz_agent_event_nanopb: an entry whose kind is 0xc91fffff on the wire (signed
    # to protobuf-c, unsigned to nanopb: the same 32 bits, codec_compare)
    aevt["enum_value_over_int32_max"] = bytes.fromhex(
        "080332200a0ad985d8b128add8a8d8a710ffffffc80c18032880e6d6ffffffffff013001")
    write("fuzz_agent_event_nanopb", aevt, ("agent_evt_",))
    write_recording_seeds()
    write_worker_seeds()
    write_agent_client_seeds()
    write_http_json_seeds()
    write_remote_response_seeds()
    write_session_store_seeds()
    write_local_meta_seeds()
    write_agent_files_seeds()
    write_docker_api_seeds()
    write_egress_seeds()
    write_expose_head_seeds()
    write_kubernetes_seeds()
    write_kernel_reply_seeds()
    write_worker_metrics_seeds()
    for t in ("fuzz_e2b", "fuzz_daytona", "fuzz_ssm"):
        write_cloud_variants(t)


def write_cloud_variants(target):
    """Variants of a cloud harness's recorded seed (recorded_fake.bin, written by the harness
    itself with SBX_FUZZ_RECORD from the project's fake): for each answer in turn, the same
    traffic with that answer turned into a 404 (index 9), cut in half, or emptied."""
    d = os.path.join(HERE, "corpus", target)
    rec = os.path.join(d, "recorded_fake.bin")
    if not os.path.exists(rec):
        return
    for name in os.listdir(d):
        if name.startswith("variant_"):
            os.remove(os.path.join(d, name))
    with open(rec, "rb") as fh:
        data = fh.read()
    answers = []
    off = 0
    while off + 4 <= len(data):
        n = data[off + 2] << 8 | data[off + 3]
        answers.append((data[off:off + 2], data[off + 4:off + 4 + n]))
        off += 4 + n

    def script(items):
        return b"".join(h + len(b).to_bytes(2, "big") + b for h, b in items)

    for i in range(len(answers)):
        head, body = answers[i]
        for kind, new in (("404", (bytes([9, head[1]]), b'{"message":"not found"}')),
                          ("half", (head, body[: len(body) // 2])),
                          ("empty", (head, b""))):
            items = answers[:i] + [new] + answers[i + 1:]
            with open(os.path.join(d, "variant_%02d_%s.bin" % (i, kind)), "wb") as fh:
                fh.write(script(items))


def write_dir(target, seeds, ext=".bin"):
    d = os.path.join(HERE, "corpus", target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(d, name + ext), "wb") as fh:
            fh.write(data)


def write_agent_client_seeds():
    """fuzz_agent_client: byte 0 picks the call (low 4 bits % 10: 0 ping, 1 argv, 2 shell,
    3 stateful code, 4 code, 5 reattach, 6 signal, 7 write, 8 read, 9 list; 0x40 a second
    call; 0x80 a small output limit), then records: tag%4 0 event (for id 1 + (tag>>2 & 3)),
    1 verbatim frame, 2 lying prefix, 3 raw bytes. Events are the golden agent events."""
    def ev(name, req=1):
        data = golden(name)
        return bytes([(req - 1) << 2]) + len(data).to_bytes(2, "little") + data

    def evb(body, req=1):
        data = field(1, 0, varint(req)) + body
        return bytes([(req - 1) << 2]) + len(data).to_bytes(2, "little") + data

    def file_data(offset, data, eof):
        return field(5, 2, field(1, 2, b"/workspace/a.txt") + field(2, 0, varint(offset))
                     + field(3, 2, data) + field(4, 0, varint(11)) + field(5, 0, varint(0o644))
                     + (field(6, 0, b"\x01") if eof else b""))

    run = ev("agent_evt_started") + ev("agent_evt_output_32k") + ev("agent_evt_exit")
    seeds = {
        "ping_pong": b"\x00" + ev("agent_evt_pong"),
        "run_argv": b"\x01" + run,
        "run_shell_small_limit": b"\x82" + run,
        "run_code_stateful": b"\x03" + run,
        "run_code": b"\x04" + ev("agent_evt_started") + ev("agent_evt_exit"),
        "reattach": b"\x05" + run,
        "signal_error": b"\x06" + ev("agent_evt_error"),
        "write_written": b"\x07" + ev("agent_evt_written"),
        # found by fuzz_agent_client: the out-of-order refusal read the offset from the
        # event it had just freed (heap use after free)
        "read_out_of_order_offset": b"\x08" + ev("agent_evt_file_data"),
        "read_two_chunks": b"\x08" + evb(file_data(0, b"hello ", False)) + evb(file_data(6, b"world", True)),
        "read_gap": b"\x08" + evb(file_data(0, b"hello ", False)) + evb(file_data(9, b"x", True)),
        "list_entry": b"\x09" + ev("agent_evt_entry") * 3,
        "run_error": b"\x01" + ev("agent_evt_started") + ev("agent_evt_error"),
        "stale_events_first": b"\x01" + ev("agent_evt_output_32k", 3) + run,
        "unknown_fields": b"\x01" + ev("agent_evt_unknown_fields") + run,
        "second_call": b"\x51" + run + ev("agent_evt_started", 2) + ev("agent_evt_exit", 2),
        "frame_over_limit": b"\x01\x02\x00\x00\x03\x00\x00",
        "lying_prefix": b"\x08\x02\x00\x10\x00\x00\x04abcd",
        "raw_garbage": b"\x09\x03\x08\xff\xff\xff\xff\x00\x00\x00\x00",
        "verbatim_empty_frame": b"\x01\x01\x00\x00",
        "truncated_header": b"\x00\x03\x02\x05\x00",
    }
    write_dir("fuzz_agent_client", seeds)


def write_http_json_seeds():
    """fuzz_http_json: byte 0 picks the HTTP status (index into the harness's table: 0 200,
    3 400, 5 403, 6 404, 11 429, 12 500), the rest is the body. Bodies in the shapes the cloud
    APIs answer (reference/cloud-apis.md): E2B {code,message}, Daytona's NestJS error,
    AWS JSON 1.1 __type/message, Docker {message}."""
    seeds = {
        "e2b_sandbox": b"\x01" + b'{"sandboxID":"i1x2","clientID":"c","templateID":"base",'
                       b'"envdVersion":"0.1.1","envdAccessToken":"tok","domain":"e2b.app"}',
        "e2b_error_404": b"\x06" + b'{"code":404,"message":"sandbox \\"i1x2\\" not found"}',
        "daytona_nest_error": b"\x03" + b'{"path":"/sandbox","timestamp":"2024-01-01T00:00:00Z",'
                              b'"statusCode":400,"error":"Bad Request","message":"invalid"}',
        "daytona_sandbox": b"\x00" + b'{"id":"d1","state":"started","labels":{"sbx":"1"},'
                           b'"cpu":1,"memory":1,"disk":3}',
        "ssm_error": b"\x03" + b'{"__type":"InvalidInstanceId","message":"Instances not in a valid state"}',
        "ssm_invocation": b"\x00" + b'{"Status":"Success","ResponseCode":0,'
                          b'"StandardOutputContent":"hi\\n","StandardErrorContent":""}',
        "docker_error": b"\x06" + b'{"message":"No such container: abc"}',
        "error_object": b"\x0c" + b'{"error":{"message":"internal"}}',
        "error_string": b"\x0c" + b'{"error":"bad gateway"}',
        "secret_in_message": b"\x04" + b'{"message":"key sk-fuzz-SECRET-4242 is invalid"}',
        "secret_in_text": b"\x0c" + b"upstream said sk-fuzz-SECRET-4242\n",
        "html_error": b"\x0d" + b"<html><body>502 Bad Gateway</body></html>",
        "duplicate_keys": b"\x00" + b'{"a":1,"a":2}',
        "deep_nesting": b"\x00" + b"[" * 100 + b"]" * 100,
        "deeper_than_limit": b"\x00" + b"[" * 5000,
        "escaped_quote_brackets": b"\x00" + b'{"s":"\\"[[[[{{{{"}',
        "nul_escape": b"\x03" + b'{"message":"a\\u0000b"}',
        "invalid_utf8": b"\x03" + b'{"message":"\xc3\x28\xff"}',
        "control_bytes": b"\x0c" + b"\x01\x02\x1b[31mred\x7f",
        "top_level_array": b"\x00" + b"[1,2,3]",
        "top_level_string": b"\x00" + b'"just a string"',
        "empty_body": b"\x0c",
        "whitespace": b"\x0c" + b"   \n\t ",
        "long_message": b"\x0c" + b'{"message":"' + b"m" * 3000 + b'"}',
        "big_number": b"\x00" + b'{"n":1e999999,"m":-0,"k":123456789012345678901234567890}',
    }
    write_dir("fuzz_http_json", seeds)


def write_remote_response_seeds():
    """fuzz_remote_response: byte 0 flags (bit 0 stream, bit 1 small limit, bits 2-4 curl's
    result), byte 1 HTTP status, then records: 0 grpc-status, 1 grpc-message, 2 header line,
    3 framed message (2-byte length), 4 raw body (2-byte length). Messages are the golden
    completions and events, in the order a worker sends them."""
    def status(v):
        return b"\x00" + bytes([len(v)]) + v

    def message(v):
        return b"\x01" + bytes([len(v)]) + v

    def hline(v):
        return b"\x02" + bytes([len(v)]) + v

    def msg(data):
        return b"\x03" + len(data).to_bytes(2, "big") + data

    def raw(data):
        return b"\x04" + len(data).to_bytes(2, "big") + data

    head = hline(b"HTTP/2 200\r\n") + hline(b"content-type: application/grpc\r\n")
    ok = golden("completion_succeeded")
    ev_out = golden("event_output_32k")
    ev_done = golden("event_completion")
    framed_done = b"\x00" + len(ev_done).to_bytes(4, "big") + ev_done
    seeds = {
        "execute_ok": b"\x00\x00" + head + msg(ok) + status(b"0"),
        "execute_failed": b"\x00\x00" + head + msg(golden("completion_failed")) + status(b"0"),
        "execute_timed_out": b"\x00\x00" + head + msg(golden("completion_timed_out")) + status(b"0"),
        "trailers_only_error": b"\x00\x00" + head + status(b"16")
        + message(b"no credentials: present a client certificate%2C or a token"),
        "percent_edge": b"\x00\x00" + head + status(b"3") + message(b"100%% %4 %zz %C3%A9 %"),
        "status_junk": b"\x00\x00" + head + status(b"1x") + msg(ok),
        "status_huge": b"\x00\x00" + head + status(b"99999999999") + msg(ok),
        "no_status": b"\x00\x00" + head + msg(ok),
        "two_messages": b"\x00\x00" + head + msg(ok) + msg(ok) + status(b"0"),
        "lying_prefix": b"\x00\x00" + head + raw(b"\x00\x00\x00\x10\x00" + ok) + status(b"0"),
        "compressed_flag": b"\x00\x00" + head + raw(b"\x01" + len(ok).to_bytes(4, "big") + ok)
        + status(b"0"),
        "over_small_limit": b"\x02\x00" + head + msg(golden("completion_unknown_enum_values"))
        + status(b"0"),
        "http_505": b"\x00\x02" + hline(b"HTTP/1.1 505 HTTP Version Not Supported\r\n"),
        "curl_http2_error": b"\x04\x00" + head,
        "stream_ok": b"\x01\x00" + head + msg(ev_out) + msg(ev_out) + msg(ev_done) + status(b"0"),
        "stream_split_everywhere": b"\x01\x00" + head
        + b"".join(raw(framed_done[i:i + 7]) for i in range(0, len(framed_done), 7)) + status(b"0"),
        "stream_no_completion": b"\x01\x00" + head + msg(ev_out) + status(b"0"),
        "stream_bad_event": b"\x01\x00" + head + msg(b"\x0f\x00") + msg(ev_done) + status(b"0"),
        "stream_small_limit": b"\x03\x00" + head + msg(ev_out) + msg(ev_done) + status(b"0"),
        "stream_then_error": b"\x01\x00" + head + msg(ev_out) + status(b"4")
        + message(b"deadline exceeded (grpc-timeout); the execution was cancelled"),
        # found by fuzz_remote_response: a worker's FAILED completion without an error code
        # (or text) was handed on as it was; the broker now replaces it with a BROKER failure
        "failed_without_error_code": b"\x00\x00" + head
        + msg(field(1, 2, b"t-1") + field(2, 0, b"\x02") + field(5, 2, b"it broke")) + status(b"0"),
        "failed_without_error_text": b"\x00\x00" + head
        + msg(field(1, 2, b"t-1") + field(2, 0, b"\x02") + field(4, 0, b"\x05")) + status(b"0"),
        "stream_failed_without_error": b"\x01\x00" + head
        + msg(field(2, 2, field(1, 2, b"t-1") + field(2, 0, b"\x02"))) + status(b"0"),
        "status_outside_enum": b"\x00\x00" + head
        + msg(field(1, 2, b"t-1") + field(2, 0, b"\x09")) + status(b"0"),
        "empty": b"",
    }
    write_dir("fuzz_remote_response", seeds)


def write_session_store_seeds():
    """fuzz_session_store: records [name length (bit 7: no ".session" suffix)][name]
    [2-byte length][content]; contents are packed SessionHandles as the CLI writes them."""
    def handle(sid, name=b"", sandbox=b"l-0123456789abcdef"):
        return (field(1, 2, sid) + (field(2, 2, name) if name else b"") + field(3, 2, b"local")
                + field(4, 2, b"local") + field(5, 2, sandbox) + field(6, 2, b"node-1")
                + field(7, 2, bytes(range(32))) + field(8, 0, varint(1700000000000))
                + field(9, 0, varint(1700000001000)) + field(10, 0, b"\x01"))

    def f(name, content, suffix=True):
        return bytes([len(name) | (0 if suffix else 0x80)]) + name + len(content).to_bytes(2, "big") + content

    h = handle(b"s-1", b"work")
    seeds = {
        "one": f(b"s-1", h),
        "two": f(b"s-1", h) + f(b"s-2", handle(b"s-2")),
        # a file whose name is not its handle's id, and a second claim on that id
        "name_mismatch": f(b"other", h),
        "duplicate_id": f(b"s-1", h) + f(b"copy", h),
        "name_equals_other_id": f(b"s-1", handle(b"s-1", b"s-2")) + f(b"s-2", handle(b"s-2")),
        "bad_id_chars": f(b"bad", handle(b"../etc")),
        "dot_id": f(b".hidden", handle(b".hidden")),
        "empty_file": f(b"s-3", b""),
        "truncated": f(b"s-1", h[: len(h) // 2]),
        "not_a_session_suffix": f(b"s-1", h, suffix=False),
        "garbage": f(b"s-4", b"\xff" * 40),
        "unknown_fields": f(b"s-5", handle(b"s-5") + field(99, 2, b"future")),
    }
    write_dir("fuzz_session_store", seeds)


def write_local_meta_seeds():
    """fuzz_local_meta: the text of a meta file of sandbox l-0123456789abcdef."""
    ok = b"pid 4242\nstart 123456789\ncgroup /sys/fs/cgroup/user.slice/sbx/l-0123456789abcdef\n"
    v1 = (b"pid 4242\nstart 1\n" + b"".join(b"cgroup /sys/fs/cgroup/%s/sbx/l-0123456789abcdef\n" % c
                                      for c in (b"memory", b"pids", b"cpu")))
    seeds = {
        "v2": ok,
        "v1_three": v1,
        # found while writing fuzz_local_meta: "/.." at the end, "/./" and other names were
        # accepted, and destroy kills every pid listed in the named cgroup
        "trailing_dotdot": b"pid 4242\nstart 1\ncgroup /sys/fs/cgroup/user.slice/..\n",
        "dot_component": b"pid 4242\nstart 1\ncgroup /sys/fs/cgroup/./l-0123456789abcdef\n",
        "dotdot_component": b"pid 4242\nstart 1\ncgroup /sys/fs/cgroup/a/../l-0123456789abcdef\n",
        "other_sandbox": b"pid 4242\nstart 1\ncgroup /sys/fs/cgroup/sbx/l-ffffffffffffffff\n",
        "double_slash": b"pid 4242\nstart 1\ncgroup /sys/fs/cgroup//l-0123456789abcdef\n",
        "root_itself": b"pid 4242\nstart 1\ncgroup /sys/fs/cgroup/\n",
        "four_cgroups": v1 + b"cgroup /sys/fs/cgroup/x/l-0123456789abcdef\n",
        "pid_junk": b"pid 12abc\nstart 5\n",
        "pid_one": b"pid 1\nstart 5\n",
        "pid_negative": b"pid -5\n",
        "pid_huge": b"pid 99999999999999999999\n",
        "long_line": b"cgroup /sys/fs/cgroup/" + b"a/" * 600 + b"l-0123456789abcdef\n",
        "no_newline": b"pid 77",
        "empty": b"",
        # the owner, scope and uid_slot lines a sandbox's meta has carried since the sweep
        "owner_per_call": b"pid 4242\nstart 123456\nowner 777 99887766\nscope per_call\n"
                          b"uid_slot 3\ncgroup /sys/fs/cgroup/pids/sbx/l-0123456789abcdef\n",
        # whose a per_session sandbox is (provider list_held): the subject and profile in hex
        "principal": b"pid 4242\nstart 1\nowner 777 1\nprincipal " + b"tenant-a\n".hex().encode()
                     + b"\nprofile " + b"default".hex().encode() + b"\n",
        "principal_odd_hex": b"pid 4242\nstart 1\nprincipal 616\nprofile 61\n",
        "principal_nul": b"pid 4242\nstart 1\nprincipal 6100\nprofile 61\n",
        "principal_long": b"pid 4242\nstart 1\nprincipal " + b"61" * 257 + b"\nprofile 61\n",
        "principal_upper": b"pid 4242\nstart 1\nprincipal 4A\nprofile 61\n",
        # a one-shot sandbox's reaper (agent/reap.c), and ones that name no process
        "reaper": b"pid 4242\nstart 123456\nowner 777 99887766\nscope per_call\nuid_slot 3\n"
                  b"reaper 4241 123455\ncgroup /sys/fs/cgroup/pids/sbx/l-0123456789abcdef\n",
        "reaper_bad": b"pid 4242\nstart 1\nreaper 1 5\nreaper 12x 5\nreaper 99999999 1\nreaper 7\n",
    }
    write_dir("fuzz_local_meta", seeds, ext=".meta")


def tls_hello(sni_list, ext_extra=b""):
    """A TLS 1.3-style ClientHello whose server_name extension lists sni_list (None: no SNI)."""
    ext = b""
    if sni_list is not None:
        names = b"".join(b"\x00" + u16(len(n)) + n for n in sni_list)
        ext += b"\x00\x00" + u16(len(names) + 2) + u16(len(names)) + names
    ext += b"\x00\x2b\x00\x03\x02\x03\x04" + ext_extra
    body = b"\x03\x03" + b"\x11" * 32 + b"\x20" + b"\x22" * 32 + u16(4) + b"\x13\x01\x13\x02"
    body += b"\x01\x00" + u16(len(ext)) + ext
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + u16(len(hs)) + hs


def dns_name_bytes(name):
    return b"".join(bytes([len(l)]) + l for l in name.split(b".")) + b"\x00"


def dns_query(name, qtype=1, qid=0x1234, extra=b""):
    return (u16(qid) + b"\x01\x00" + u16(1) + u16(0) + u16(0) + u16(1 if extra else 0)
            + dns_name_bytes(name) + u16(qtype) + u16(1) + extra)


def dns_answer(name, rrs, qid=0x1234, rcode=0):
    return (u16(qid) + u16(0x8180 | rcode) + u16(1) + u16(len(rrs)) + u16(0) + u16(0)
            + dns_name_bytes(name) + u16(1) + u16(1) + b"".join(rrs))


def write_egress_seeds():
    """fuzz_egress_sni, fuzz_egress_http, fuzz_egress_dns: what a sandbox sends the egress
    proxy (ClientHello, HTTP head, DNS query) and what a resolver answers it."""
    hello = tls_hello([b"allowed.test"])
    write_dir("fuzz_egress_sni", {
        "sni": hello,
        "sni_upper_trailing_dot": tls_hello([b"Allowed.Test."]),
        "no_sni": tls_hello(None),
        "two_names": tls_hello([b"allowed.test", b"evil.test"]),
        "ip_literal": tls_hello([b"198.51.100.1"]),
        "nul_in_name": tls_hello([b"allowed.test\x00.evil.test"]),
        "grease_ext": tls_hello([b"a.wild.test"], b"\x0a\x0a\x00\x00"),
        "truncated": hello[:60],
        "http_instead": b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "empty": b"",
    })
    write_dir("fuzz_egress_http", {
        "get": b"GET / HTTP/1.1\r\nHost: allowed.test\r\nAccept: */*\r\n\r\n",
        "port": b"GET /x HTTP/1.0\r\nhost: a.wild.test:8080\r\n\r\nbody",
        "absolute": b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "absolute_mismatch": b"GET http://evil.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "two_hosts": b"GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\n\r\n",
        "no_host": b"GET / HTTP/1.1\r\n\r\n",
        "connect": b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "unfinished": b"GET / HTTP/1.1\r\nHost: allowed.test\r\n",
        "folded": b"GET / HTTP/1.1\r\n x\r\nHost: allowed.test\r\n\r\n",
    })
    opt = b"\x00" + u16(41) + u16(1232) + b"\x00\x00\x00\x00" + u16(0)
    a = lambda ip: b"\xc0\x0c" + u16(1) + u16(1) + b"\x00\x00\x00\x3c" + u16(4) + bytes(ip)
    cname = (b"\xc0\x0c" + u16(5) + u16(1) + b"\x00\x00\x00\x3c" + u16(6)
             + b"\x03cdn\xc0\x14")
    cdn_a = b"\xc0\x2a" + u16(1) + u16(1) + b"\x00\x00\x00\x3c" + u16(4) + bytes([198, 51, 100, 7])
    write_dir("fuzz_egress_dns", {
        "query_a": b"\x00" + dns_query(b"allowed.test"),
        "query_aaaa": b"\x00" + dns_query(b"allowed.test", qtype=28),
        "query_edns": b"\x00" + dns_query(b"a.wild.test", extra=opt),
        "query_bad_name": b"\x00" + dns_query(b"a\x00b.test"),
        "query_pointer": b"\x00" + u16(1) + b"\x01\x00" + u16(1) + u16(0) * 3 + b"\xc0\x0c" + u16(1) * 2,
        "answer_a": b"\x01" + dns_answer(b"allowed.test", [a([198, 51, 100, 1]), a([198, 51, 100, 2])]),
        "answer_cname": b"\x01" + dns_answer(b"allowed.test", [cname, cdn_a]),
        "answer_nxdomain": b"\x01" + dns_answer(b"allowed.test", [], rcode=3),
        "answer_loop": b"\x01" + dns_answer(b"allowed.test", [b"\xc0\x1e" + u16(1) * 2]),
        "answer_other_name": b"\x01" + dns_answer(b"evil.test", [a([1, 2, 3, 4])]),
    })
    write_dir("fuzz_egress_table", {
        "table": b"4 evil.test\n1 198.51.100.2:80\n2 (other)\n",
        "zero_count": b"0 evil.test\n",
        "huge_count": b"99999999999 evil.test\n",
        "bad_chars": b"1 evil test\n1 EVIL.test\n1 a/b\n",
        "no_newline": b"3 allowed.test",
        "long_dest": b"1 " + b"a" * 300 + b"\n",
        "many": b"".join(b"%d d%d.test\n" % (i + 1, i) for i in range(80)),
        "empty": b"",
    }, ext=".txt")


def write_agent_files_seeds():
    """fuzz_agent_files: byte 0 = flags index (bits 0-2), mkdirs (bit 3), walk (bit 4), then
    the path, as a model would send it in a file operation."""
    paths = [b"file.txt", b"/workspace/file.txt", b"sub/deeper", b"../../etc/passwd",
             b"/etc/passwd", b"to_root/etc", b"to_etc/passwd", b"up_up/x", b"sub/up3/created",
             b"proc_root/etc/hostname", b"loop_a", b"to_outside/created", b"/proc/self/environ",
             b"/sys/kernel", b"./././file.txt", b"//workspace//file.txt", b"/", b"..",
             b"new/dir/a.txt", b"to_file", b"to_outside", b"/.sbx/agent.sock", b"a" * 300,
             b"x/" * 200 + b"y"]
    seeds = {}
    for i, p in enumerate(paths):
        for sel in (0, 1 | 8, 0x10, 0x11 | 8, 3):
            seeds["p%02d_sel%02x" % (i, sel)] = bytes([sel]) + p
    # found by fuzz_agent_files: the component walk opened "/" with O_CREAT and no mode (an
    # invalid openat call, which _FORTIFY_SOURCE turns into an abort of the agent, PID 1)
    seeds["found_walk_create_root"] = bytes([0x11]) + b"/"
    write_dir("fuzz_agent_files", seeds)


def write_docker_api_seeds():
    """fuzz_docker_api: answers [kind][2-byte length][bytes] (kind bit 0: raw bytes, else JSON
    with status index kind >> 1: 0 200, 1 201, 2 204, 3 404, 4 409, 5 500, 6 400, 7 101), in
    the order the client asks: GET /version, GET /containers/x/json, DELETE, then exec create,
    the hijacked start, exec inspect. Bodies in the Engine API v1.41's shapes."""
    def js(status_index, body):
        return bytes([status_index << 1]) + len(body).to_bytes(2, "big") + body

    def raw(data):
        return b"\x01" + len(data).to_bytes(2, "big") + data

    version = js(0, b'{"Version":"20.10.24","ApiVersion":"1.41","MinAPIVersion":"1.12","Os":"linux"}')
    inspect = js(0, b'{"Id":"' + b"a" * 64 + b'","State":{"Status":"running","Running":true,'
                 b'"Pid":4242},"Config":{"WorkingDir":"/workspace","Labels":{"sbx.managed":"1"}}}')
    delete = js(2, b"")
    create = js(1, b'{"Id":"' + b"e" * 64 + b'","Warnings":[]}')
    frames = (b"\x01\x00\x00\x00\x00\x00\x00\x06hello\n"
              + b"\x02\x00\x00\x00\x00\x00\x00\x04err\n")
    start = raw(b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.multiplexed-stream"
                b"\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n" + frames)
    exec_inspect = js(0, b'{"ID":"' + b"e" * 64 + b'","Running":false,"ExitCode":3,"Pid":4243}')
    seeds = {
        "exec_ok": version + inspect + delete + create + start + exec_inspect,
        "old_daemon": js(0, b'{"ApiVersion":"1.12"}'),
        "not_docker": js(3, b"404 page not found"),
        "gone_container": version + js(3, b'{"message":"No such container: sbx-fuzz"}') + js(3,
            b'{"message":"No such container: sbx-fuzz"}') + js(4, b'{"message":"is not running"}'),
        "start_200_not_101": version + inspect + delete + create
        + raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello") + exec_inspect,
        "start_bad_frame": version + inspect + delete + create
        + raw(b"HTTP/1.1 101 UPGRADED\r\n\r\n\x07\x00\x00\x00\xff\xff\xff\xffjunk") + exec_inspect,
        "start_no_head_end": version + inspect + delete + create + raw(b"HTTP/1.1 101 UPGRADED\r\n"),
        "start_error_json": version + inspect + delete + create
        + raw(b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 38"
              b"\r\n\r\n{\"message\":\"container is not running\"}"),
        "inspect_exitcode_huge": version + inspect + delete + create + start
        + js(0, b'{"Running":false,"ExitCode":99999999999,"Pid":1}'),
        "inspect_still_running": version + inspect + delete + create + start
        + js(0, b'{"Running":true,"ExitCode":0,"Pid":0}'),
        "version_not_json": js(0, b"<html>"),
        "error_body_long": version + inspect + js(5, b'{"message":"' + b"m" * 2000 + b'"}'),
        "empty": b"",
    }
    write_dir("fuzz_docker_api", seeds)


def frame(data):
    return len(data).to_bytes(4, "big") + data


def write_recording_seeds():
    rec = golden("recording")
    seeds = {
        "one": frame(rec),
        "three": frame(rec) * 3,
        "zero_length": b"\x00\x00\x00\x00",
        "length_past_end": b"\x00\x00\x10\x00" + rec,
        "huge_length": b"\xff\xff\xff\xff" + rec,
        "truncated_header": frame(rec) + b"\x00\x00",
        "not_a_recording": frame(b"\x0f\x00\x00"),
        "empty": b"",
    }
    d = os.path.join(HERE, "corpus", "fuzz_recordings_load")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(d, name + ".rec"), "wb") as fh:
            fh.write(data)


def u16(n):
    return n.to_bytes(2, "big")


def sel(method=0, path=0, ctype=0):
    """the first header selector byte of fuzz_worker_h2 (method, path, content-type)."""
    return bytes([method | path << 2 | ctype << 5])


def write_worker_seeds():
    """fuzz_worker_h2: records of its input format (see the harness): 0 headers, 1 message,
    2 raw frame, 3 raw bytes, 4 health check, 5 Execute (op&8: ExecuteStream), 6 Describe."""
    alice_echo = (field(1, 2, b"5c6f1b4e-0d55-4b0c-9d6e-9a4f2b7c1d10")
                  + field(3, 2, field(2, 2, b"alice"))
                  + field(11, 2, field(2, 2, b"echo hello")))
    alice_argv = (field(1, 2, b"7d1c2b3a-1111-4222-8333-444455556666")
                  + field(3, 2, field(2, 2, b"alice"))
                  + field(11, 2, field(1, 2, b"printf") + field(1, 2, b"%s\\n") + field(1, 2, b"x")))

    def execute(msg, stream=False, split=None):
        op = 12 if stream else 5
        if split is not None:
            op |= 16  # 21 % 7 == 0: pick 33 (33 % 7 == 5, 33 & 16) instead
            op = 54 if stream else 33  # 54 % 7 == 5, 54 & 8, 54 & 16; 33 % 7 == 5, 33 & 16
        rec = bytes([op]) + sel() + b"\x00" + u16(len(msg)) + msg
        return rec + (bytes([split]) if split is not None else b"")

    def health(service=b""):
        return b"\x04" + sel() + b"\x00" + bytes([len(service)]) + service

    def headers(a, b, end_stream=False, extra=b""):
        return b"\x00" + a + bytes([b]) + extra + bytes([1 if end_stream else 0])

    def message(msg, end_stream=True, stream_pick=0):
        return b"\x01" + bytes([1 if end_stream else 0, stream_pick]) + u16(len(msg)) + msg

    def raw_frame(ftype, flags, pick, payload):
        return b"\x02" + bytes([ftype, flags, pick, len(payload)]) + payload

    seeds = {
        "health": health(),
        "health_known_service": health(b"sbx.v1.Execution"),
        "health_unknown_service": health(b"no.such.Service"),
        "execute_echo": execute(alice_echo),
        "execute_stream_argv": execute(alice_argv, stream=True),
        "execute_split_prefix": execute(alice_echo, split=3),
        "execute_stream_split": execute(alice_argv, stream=True, split=40),
        "describe": b"\x06" + sel() + b"\x00" + u16(0),
        # headers without credentials, then the message: UNAUTHENTICATED
        "unauthenticated": headers(sel(), 0) + message(alice_echo),
        # a token that is not the caller's
        "wrong_token": headers(sel(), 4, extra=b"\x05wrong") + message(alice_echo),
        "too_long_authorization": headers(sel(), 3) + message(alice_echo),
        "grpc_timeout_fuzzed": headers(sel(), 1 | 2 << 3, extra=b"\x0399H") + message(alice_echo),
        "grpc_timeout_bad": headers(sel(), 1 | 2 << 3, extra=b"\x0a123456789S") + message(alice_echo),
        "grpc_timeout_1ms": headers(sel(), 1 | 1 << 3 | 0x80) + message(alice_echo),
        "gzip_encoding": headers(sel(), 1 | 1 << 5) + message(alice_echo),
        "x_sbx_node": headers(sel(), 1 | 2 << 5) + message(alice_echo),
        "x_sbx_node_fuzzed": headers(sel(), 1 | 3 << 5 | 0x80, extra=b"\x06node-9") + message(alice_echo),
        "get_method": headers(sel(method=1), 1, end_stream=True),
        "text_plain": headers(sel(ctype=4), 1, end_stream=True),
        "unknown_path": headers(sel(path=4), 1) + message(b""),
        "fuzzed_path": headers(sel(path=6), 1, extra=b"\x05/a/b/") + message(b""),
        "no_message": headers(sel(), 1) + message(b"", end_stream=True)[:0]
        + b"\x01\x01\x00\x00\x00",
        # a prefix announcing more bytes than the stream carries
        "lying_prefix": headers(sel(), 1) + b"\x01\x05\x00" + u16(len(alice_echo)) + alice_echo
        + b"\x7f\xff\xff\xff",
        "compressed_flag": headers(sel(), 1) + b"\x01\x03\x00" + u16(len(alice_echo)) + alice_echo + b"\x01",
        "two_messages": headers(sel(), 1) + message(alice_echo, end_stream=False) + message(alice_echo),
        "trailers_from_client": headers(sel(), 1) + headers(sel(), 1, end_stream=True, extra=b"")[:-1]
        + b"\x03\x00",
        "rst_stream": headers(sel(), 1) + raw_frame(3, 0, 0x80, b"\x00\x00\x00\x08"),
        "window_update_zero": raw_frame(8, 0, 0x40, b"\x00\x00\x00\x00") + health(),
        "settings_max_frame": raw_frame(4, 0, 0x40, b"\x00\x05\x00\x00\xff\xff") + health(),
        "ping_then_health": raw_frame(6, 0, 0x40, b"12345678") + health(),
        "priority_self": headers(sel(), 1) + raw_frame(2, 0, 0x80, b"\x00\x00\x00\x01\x10"),
        "data_on_stream_zero": b"\x01\x01\xff" + u16(3) + b"abc",
        "headers_split_continuation": b"\x00" + sel() + b"\x01\x04\x05" + message(alice_echo),
        "garbage_after_preface": b"\x03\x10" + b"\xff" * 16,
        "many_health_checks": health() * 20,
        "empty": b"",
    }
    for name in ("req_run_code", "req_run_command_shell", "req_read_file", "req_list_files",
                 "req_destroy", "req_unknown_fields", "req_map_entry_default_value"):
        seeds["golden_" + name] = execute(golden(name))
        seeds["golden_stream_" + name] = execute(golden(name), stream=True)
    d = os.path.join(HERE, "corpus", "fuzz_worker_h2")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(d, name + ".bin"), "wb") as fh:
            fh.write(data)




def write_expose_head_seeds():
    """fuzz_expose_head: first bytes of a connection to an exposed port (token 0123...cdef)."""
    tok = b"0123456789abcdef0123456789abcdef"
    seeds = {
        "header_ok": b"GET / HTTP/1.1\r\nHost: x\r\nX-Sbx-Expose-Token: " + tok + b"\r\n\r\n",
        "header_case": b"GET / HTTP/1.1\r\nx-sbx-EXPOSE-token:\t " + tok + b" \r\n\r\nbody",
        "cookie_ok": b"GET / HTTP/1.1\r\nCookie: a=b; sbx_expose_token=" + tok + b"; c=d\r\n\r\n",
        "cookie_prefix": b"GET / HTTP/1.1\r\nCookie: xsbx_expose_token=" + tok + b"\r\n\r\n",
        "wrong": b"GET / HTTP/1.1\r\nX-Sbx-Expose-Token: " + b"1" * 32 + b"\r\n\r\n",
        "long": b"GET / HTTP/1.1\r\nX-Sbx-Expose-Token: " + tok + b"0\r\n\r\n",
        "no_header": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "partial": b"GET / HTTP/1.1\r\nX-Sbx-Expose-Token: " + tok[:10],
        "bare_lf": b"GET / HTTP/1.1\nX-Sbx-Expose-Token: " + tok + b"\n\n",
        "no_colon": b"GET / HTTP/1.1\r\nX-Sbx-Expose-Token " + tok + b"\r\n\r\n",
        "oversize": b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n",
        "empty": b"",
        "end_only": b"\r\n\r\n",
    }
    write_dir("fuzz_expose_head", seeds)


def write_kubernetes_seeds():
    """fuzz_kubernetes: byte 0 picks the provider (bits 0-1: 0 managed, 1 attached through the
    exec API, 2 attached with the agent, 3 managed for per_session sessions) and flags (4 user mode, 8 the agent closes at the first
    operation, 16 a sweep, 32 network allowlist); then answers [kind][2-byte big-endian length]
    [bytes] in the order the provider calls: kind & 3 0 JSON with status index kind >> 2 (0 200,
    2 201, 4 202, 5 404, 6 400, 7 401, 8 403, 9 409, 10 410, 11 422, 12 429, 13 500), 1 raw
    bytes to an exec request, 2 a computed 101 head (4 v4, 8 wrong accept, 16 no subprotocol)
    and frames [ctl][2-byte length][payload] (ctl: opcode, 16 masked, 32 64-bit length, 64 a
    lying length, 128 not FIN), 3 a computed 101 head and raw bytes. Shapes from fake_k8s.py."""
    import json

    def js(status_index, obj):
        body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        return bytes([status_index << 2]) + len(body).to_bytes(2, "big") + body

    def ws(frames, kind=2):
        return bytes([kind]) + len(frames).to_bytes(2, "big") + frames

    def raw(data):
        return b"\x01" + len(data).to_bytes(2, "big") + data

    def fr(opcode, payload, ctl=0):
        return bytes([ctl | opcode]) + len(payload).to_bytes(2, "big") + payload

    def status(code, reason, message):
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": message, "reason": reason, "code": code}

    def pod(name, phase="Running", ip="127.0.0.1", labels=True, extra_status=None, meta=None):
        m = {"name": name, "namespace": "sbx", "uid": "u-1", "resourceVersion": "7"}
        if labels:
            m["labels"] = {"app.kubernetes.io/managed-by": "sbx", "sbx.dev/sandbox": "true",
                           "sbx.dev/profile": "fuzz", "sbx.dev/node": "n1"}
        m.update(meta or {})
        st = {"phase": phase}
        if ip:
            st["podIP"] = ip
        st.update(extra_status or {})
        return {"apiVersion": "v1", "kind": "Pod", "metadata": m, "status": st}

    name = "sbx-sandbox-0123456789abcdef"
    ok = {"metadata": {}, "status": "Success"}
    nonzero = {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
               "message": "command terminated with non-zero exit code: exit status 3",
               "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
    close = fr(8, b"\x03\xe8")

    def run(out, st=ok, extra=b""):
        return ws(fr(2, b"\x01" + out) + extra + fr(2, b"\x03" + json.dumps(st).encode()) + close)

    created = js(2, {"kind": "Secret"}) + js(2, {"kind": "NetworkPolicy"}) + js(2, pod(name, "Pending", None))
    deleted = js(0, pod(name)) + js(0, {"kind": "Status", "status": "Success"}) * 3
    attach = js(0, pod("target")) * 2  # attach reads the pod, then waits for it to run
    pending = js(0, pod("target", "Pending", None, extra_status={"containerStatuses": [
        {"name": "sandbox", "state": {"waiting": {"reason": "ContainerCreating"}}}]}))
    failed = js(0, pod("target", "Failed", None, extra_status={
        "containerStatuses": [{"state": {"terminated": {"reason": "Error", "message": "exit 1"}}}],
        "conditions": [{"type": "Ready", "reason": "PodFailed", "message": "failed"}]}))
    forbidden = js(8, status(403, "Forbidden", 'pods "target" is forbidden: User "alice" cannot '
                             'create resource "pods/exec"'))
    old = "2020-01-01T00:00:00Z"
    pods = {"kind": "PodList", "items": [
        pod(name, "Failed"),
        pod("sbx-sandbox-1111111111111111", labels=True, meta={
            "labels": {"app.kubernetes.io/managed-by": "sbx", "sbx.dev/sandbox": "true",
                       "sbx.dev/node": "n1", "sbx.dev/scope": "per_call"},
            "annotations": {"sbx.dev/owner-process": "1 123"}}),
        pod("sbx-sandbox-2222222222222222", meta={"deletionTimestamp": old}),
        pod("someone-else", "Failed"),
        {"metadata": {"name": 7}}, 12]}
    secrets = {"kind": "SecretList", "items": [
        {"metadata": {"name": "sbx-sandbox-3333333333333333", "creationTimestamp": old}},
        {"metadata": {"name": name, "creationTimestamp": old}},
        {"metadata": {"name": "sbx-sandbox-4444444444444444", "creationTimestamp": "yesterday"}}]}
    seeds = {
        "managed_create_ops_destroy": b"\x00" + created + js(0, pod(name)) + deleted,
        "managed_user_mode_allowlist": b"\x24" + created + js(0, pod(name)) + deleted,
        "managed_pending_then_running": b"\x00" + created + js(0, pod(name, "Pending", None))
        + js(0, pod(name)) + deleted,
        "managed_pod_failed": b"\x00" + created + js(0, pod(name, "Failed", None, extra_status={
            "initContainerStatuses": [{"state": {"terminated": {"reason": "ErrImagePull",
                                                               "message": "no such image"}}}]}))
        + js(0, {}) * 3,
        "managed_conflict": b"\x00" + js(9, status(409, "AlreadyExists", "secrets already exists")),
        "managed_namespace_missing": b"\x00" + js(5, status(404, "NotFound", "namespaces not found")),
        "managed_invalid": b"\x00" + js(2, {}) + js(2, {}) + js(11, status(422, "Invalid",
                                                                      "Pod is invalid")) + js(0, {}) * 3,
        "managed_unauthorized": b"\x00" + js(7, status(401, "Unauthorized", "Unauthorized")),
        "managed_agent_breaks": b"\x08" + created + js(0, pod(name)) + js(0, pod(name)) * 6 + deleted,
        "managed_agent_breaks_pod_gone": b"\x08" + created + js(0, pod(name)) + js(5, status(
            404, "NotFound", "gone")) + js(0, pod(name, meta={"deletionTimestamp": old})) + deleted,
        "managed_destroy_not_ours": b"\x00" + created + js(0, pod(name)) + js(0, pod(name, labels=False)),
        "managed_sweep": b"\x10" + js(8, status(403, "Forbidden", "no")) + js(5, {})
        + js(0, pods) + js(0, {"kind": "Status"}) * 9 + js(0, secrets) + js(0, {}) * 2
        + js(0, {"kind": "NetworkPolicyList", "items": []}),
        "managed_sweep_no_items": b"\x10" + js(8, {}) + js(5, {}) + js(0, {"items": 3}),
        # found by fuzz_kubernetes: the sweep put listed names into DELETE paths as they were
        # (a pod "sbx-sandbox-012345$789abcdef"; with "../" in a name curl deleted another object)
        "sweep_names_not_kubernetes": b"\x10" + js(8, {}) + js(5, {}) + js(0, {"items": [
            pod("sbx-sandbox-012345$789abcdef", "Failed"),
            pod("sbx-sandbox-x/../../secrets/victim", "Failed"),
            pod("sbx-sandbox-Upper", "Failed")]}) + js(0, {"items": [
                {"metadata": {"name": "sbx-sandbox-y/../victim2", "creationTimestamp": old}}]})
        + js(0, {"items": []}),
        # per_session (provider 3): a pod with its principal's annotation, then the sweep and
        # list_held over pods of ours, of another node, finishing, or without the annotation
        "session_create_sweep_list_held": b"\x13" + created + js(0, pod(name)) + deleted
        + js(0, {"items": []}) * 3 + js(0, {"items": [
            pod(name, meta={"annotations": {"sbx.dev/principal": "alice \u00ff"}}),
            pod("sbx-sandbox-5555555555555555", meta={"annotations": {"sbx.dev/principal": 7}}),
            pod("sbx-sandbox-6666666666666666", meta={
                "labels": {"app.kubernetes.io/managed-by": "sbx", "sbx.dev/sandbox": "true",
                           "sbx.dev/node": "n2"},
                "annotations": {"sbx.dev/principal": "bob"}}),
            pod("sbx-sandbox-7777777777777777", meta={"deletionTimestamp": old,
                                                     "annotations": {"sbx.dev/principal": "c"}}),
            pod("sbx-sandbox-x/../victim", meta={"annotations": {"sbx.dev/principal": "d"}}),
            pod("sbx-sandbox-8888888888888888")]}),
        "session_list_held_error": b"\x13" + js(13, status(500, "InternalError", "etcd down")) * 8,
        "managed_not_json": b"\x00" + js(13, b"<html>502 Bad Gateway</html>"),
        "exec_ok": b"\x01" + attach + run(b"hello world\n") + run(b"input\ndone\n", nonzero)
        + run(b"1\n") + run(b"1\n"),
        "exec_user_mode": b"\x05" + attach + run(b"hi\n"),
        "exec_ping_fragments": b"\x01" + attach + ws(
            fr(9, b"ping") + fr(2, b"\x01hel", 128) + fr(10, b"") + fr(0, b"lo\n")
            + fr(2, b"\x02err\n", 16) + fr(1, b"\x03" + json.dumps(ok).encode(), 32)),
        "exec_misordered_fragment": b"\x01" + attach + ws(fr(0, b"\x01x")) + ws(
            fr(2, b"\x01a", 128) + fr(2, b"\x01b")),
        "exec_lying_length": b"\x01" + attach + ws(fr(2, b"\x01abc", 64)),
        "exec_close_without_status": b"\x01" + attach + ws(fr(2, b"\x01out") + close),
        "exec_output_over_limit": b"\x01" + attach + run(b"o" * 5000),
        "exec_v4_stdin_refused": b"\x01" + attach + run(b"x") + ws(fr(2, b"\x01y"), kind=6),
        "exec_wrong_accept": b"\x01" + attach + ws(fr(2, b"\x03{}"), kind=10),
        "exec_no_subprotocol": b"\x01" + attach + run(b"a") + ws(fr(2, b"\x01y"), kind=18),
        "exec_forbidden": b"\x01" + attach + forbidden + attach,
        "exec_refusal_by_hand": b"\x01" + attach + raw(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 60"
            b"\r\n\r\n" + json.dumps(status(400, "BadRequest", "pod is not running"))[:60].encode()),
        "exec_head_unended": b"\x01" + attach + raw(b"HTTP/1.1 101 Switching Protocols\r\n"),
        "exec_raw_stream": b"\x01" + attach + bytes([3]) + (10).to_bytes(2, "big")
        + b"\x82\x03\x01hi\x82\x03\x03{}",
        "exec_rsv_bits": b"\x01" + attach + bytes([3]) + (4).to_bytes(2, "big") + b"\xf2\x01\x01a",
        "exec_status_exitcode_over_range": b"\x01" + attach + run(b"", {
            "status": "Failure", "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": "256"}]}}),
        "exec_pending_then_failed": b"\x01" + pending * 2 + failed,
        "exec_gone": b"\x01" + js(5, status(404, "NotFound", 'pods "target" not found')),
        "agent_attached": b"\x02" + attach,
        "agent_attached_breaks": b"\x0a" + attach + attach * 7,
        "empty": b"",
    }
    write_dir("fuzz_kubernetes", seeds)



def write_kernel_reply_seeds():
    """fuzz_agent_kernel_reply: one read of the python kernel's reply pipe: u32 status (0 ok,
    1 exception, 2 SystemExit), i32 exit code, u32 value length, the value (little endian)."""
    import struct

    def rep(status, code, value, claimed=None):
        n = len(value) if claimed is None else claimed
        return struct.pack("<IiI", status, code, n) + value

    seeds = {
        "ok_value": rep(0, 0, b"42"),
        "ok_no_value": rep(0, 0, b""),
        "exception": rep(1, 1, b""),
        "exception_code_0": rep(1, 0, b""),
        "exception_code_256": rep(1, 256, b""),
        "system_exit_3": rep(2, 3, b""),
        "system_exit_0": rep(2, 0, b""),
        "unknown_status": rep(7, -1, b"x"),
        "value_claims_more": rep(0, 0, b"short", 100),
        "value_claims_huge": rep(0, 0, b"v" * 50, 0xFFFFFFFF),
        "value_at_max": rep(0, 0, b"v" * 4000),
        "value_over_max": rep(0, 0, b"v" * 4000, 5000),
        "value_with_nul": rep(0, 0, b"a\x00b\x00c"),
        "value_utf8_cut": rep(0, 0, ("'" + "\u00e9" * 2100).encode()[:4000]),
        "two_replies": rep(0, 0, b"1") + rep(1, 1, b"2"),
        "header_only_short": b"\x00" * 11,
        "empty": b"",
    }
    write_dir("fuzz_agent_kernel_reply", seeds)



def write_worker_metrics_seeds():
    """fuzz_worker_metrics: byte 0 is where the request is cut in two sends (0: one send), then
    the request a scraper (or anyone reaching metrics_listen) sends."""
    prom = (b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nUser-Agent: Prometheus/2.45.0\r\n"
            b"Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
            b"\r\nAccept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n")
    seeds = {
        "prometheus": b"\x00" + prom,
        "prometheus_split_in_head_end": bytes([len(prom) - 2]) + prom,
        "prometheus_split_in_path": b"\x07" + prom,
        "head": b"\x00HEAD /metrics HTTP/1.1\r\n\r\n",
        "head_not_found": b"\x00HEAD /nope HTTP/1.1\r\n\r\n",
        "query": b"\x00GET /metrics?name[]=up HTTP/1.1\r\n\r\n",
        "root": b"\x00GET / HTTP/1.1\r\n\r\n",
        "longer_path": b"\x00GET /metricsx HTTP/1.1\r\n\r\n",
        "tab_after_path": b"\x00GET /metrics\t HTTP/1.1\r\n\r\n",
        "two_spaces": b"\x00GET  /metrics HTTP/1.1\r\n\r\n",
        "post": b"\x00POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\n",
        "lowercase_method": b"\x00get /metrics HTTP/1.1\r\n\r\n",
        "bare_lf": b"\x00GET /metrics HTTP/1.0\n\n",
        "http09": b"\x00GET /metrics\r\n\r\n",
        "no_head_end": b"\x00GET /metrics HTTP/1.1\r\nHost: x",
        "nul_before_head_end": b"\x00GET /metrics\x00 HTTP/1.1\r\n\r\n",
        "oversize": b"\x00GET /metrics HTTP/1.1\r\nX-Pad: " + b"p" * 8500,
        "oversize_path": b"\x00GET /" + b"m" * 8300,
        "nothing": b"\x00",
        "head_end_only": b"\x00\r\n\r\n",
    }
    write_dir("fuzz_worker_metrics", seeds)


if __name__ == "__main__":
    main()
