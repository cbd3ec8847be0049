/* test_grpc_wire.c - the gRPC wire rules both ends share (core/grpc_wire.c): grpc-timeout
 * parsing, grpc-status parsing, grpc-message percent-encoding and -decoding, the 5-byte prefix,
 * and the status mapping: what the worker answers for a transport failure, the remote broker
 * reports as the same sbx status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/grpc_wire.h"
#include "sbx/contract.h"

static void test_grpc_timeout_units_parse_to_microseconds(void **state)
{
    (void)state;
    int64_t us = 0;
    assert_true(sbx_grpc_parse_timeout("250m", 4, &us));
    assert_int_equal(us, 250000);
    assert_true(sbx_grpc_parse_timeout("2S", 2, &us));
    assert_int_equal(us, 2000000);
    assert_true(sbx_grpc_parse_timeout("1H", 2, &us));
    assert_int_equal(us, 3600LL * 1000000);
    assert_true(sbx_grpc_parse_timeout("7u", 2, &us));
    assert_int_equal(us, 7);
    assert_true(sbx_grpc_parse_timeout("5000n", 5, &us));
    assert_int_equal(us, 5);
}

static void test_grpc_timeout_rejects_malformed_values(void **state)
{
    (void)state;
    int64_t us;
    assert_false(sbx_grpc_parse_timeout("123456789S", 10, &us)); /* more than 8 digits */
    assert_false(sbx_grpc_parse_timeout("10", 2, &us));          /* no unit */
    assert_false(sbx_grpc_parse_timeout("S", 1, &us));
    assert_false(sbx_grpc_parse_timeout("1x", 2, &us));
    assert_false(sbx_grpc_parse_timeout("-1S", 3, &us));
}

static void test_grpc_message_is_percent_encoded(void **state)
{
    (void)state;
    char out[64];
    sbx_grpc_percent_encode("a%b\nc\xc3\xa9", out, sizeof out);
    assert_string_equal(out, "a%25b%0Ac%C3%A9");
    sbx_grpc_percent_encode("abcdef", out, 4);
    assert_string_equal(out, "abc");
}

static void test_grpc_frame_has_big_endian_length_prefix(void **state)
{
    (void)state;
    Sbx__V1__ExecutionCompletion c = SBX__V1__EXECUTION_COMPLETION__INIT;
    c.task_id = "t-1";
    size_t len = 0;
    uint8_t *buf = sbx_grpc_frame_message(&c.base, &len);
    assert_non_null(buf);
    size_t n = protobuf_c_message_get_packed_size(&c.base);
    assert_int_equal(len, n + 5);
    assert_int_equal(buf[0], 0);
    assert_int_equal(
        ((size_t)buf[1] << 24) | ((size_t)buf[2] << 16) | ((size_t)buf[3] << 8) | buf[4], n);
    free(buf);
}

static void test_grpc_message_percent_decodes_what_was_encoded(void **state)
{
    (void)state;
    static const char original[] = "a%b\nc\xc3\xa9 end";
    char enc[128], dec[128];
    sbx_grpc_percent_encode(original, enc, sizeof enc);
    assert_int_equal(sbx_grpc_percent_decode(enc, strlen(enc), dec), strlen(original));
    assert_string_equal(dec, original);
    /* a '%' without two hex digits stays as it is */
    assert_int_equal(sbx_grpc_percent_decode("100%z%4", 7, dec), 7);
    assert_string_equal(dec, "100%z%4");
}

static void test_grpc_status_values_parse(void **state)
{
    (void)state;
    assert_int_equal(sbx_grpc_parse_status(" 14", 3), SBX_GRPC_UNAVAILABLE);
    assert_int_equal(sbx_grpc_parse_status("0", 1), SBX_GRPC_OK);
    assert_int_equal(sbx_grpc_parse_status("", 0), SBX_GRPC_UNKNOWN);
    assert_int_equal(sbx_grpc_parse_status("1x", 2), SBX_GRPC_UNKNOWN);
    assert_int_equal(sbx_grpc_parse_status("99999999999", 11), SBX_GRPC_UNKNOWN);
}

static void test_grpc_status_mapping_round_trips(void **state)
{
    (void)state;
    static const sbx_status carried[] = {
        SBX_E_INVALID_ARGUMENT,   SBX_E_TIMEOUT, SBX_E_PERMISSION_DENIED, SBX_E_UNAUTHENTICATED,
        SBX_E_RESOURCE_EXHAUSTED, SBX_E_BROKER,  SBX_E_WRONG_NODE,        SBX_E_INTERNAL};
    for (size_t i = 0; i < sizeof carried / sizeof carried[0]; i++)
        assert_int_equal(sbx_grpc_status_for_code(sbx_grpc_code_for_status(carried[i])),
                         carried[i]);
    assert_int_equal(sbx_grpc_status_for_code(SBX_GRPC_UNIMPLEMENTED), SBX_E_BROKER);
    assert_int_equal(sbx_grpc_status_for_code(SBX_GRPC_UNKNOWN), SBX_E_BROKER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grpc_timeout_units_parse_to_microseconds),
        cmocka_unit_test(test_grpc_timeout_rejects_malformed_values),
        cmocka_unit_test(test_grpc_message_is_percent_encoded),
        cmocka_unit_test(test_grpc_frame_has_big_endian_length_prefix),
        cmocka_unit_test(test_grpc_message_percent_decodes_what_was_encoded),
        cmocka_unit_test(test_grpc_status_values_parse),
        cmocka_unit_test(test_grpc_status_mapping_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
