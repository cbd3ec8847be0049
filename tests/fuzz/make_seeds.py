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
    write("fuzz_agent_event_nanopb", aevt, ("agent_evt_",))
    write_recording_seeds()


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


if __name__ == "__main__":
    main()
