/* test_grpc_wire.c - the worker's gRPC wire helpers: grpc-timeout parsing, grpc-message
 * percent-encoding, the 5-byte prefix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker/worker_internal.h"

static void test_grpc_timeout_units_parse_to_microseconds(void **state)
{
    (void)state;
    int64_t us = 0;
    assert_true(grpc_parse_timeout("250m", 4, &us));
    assert_int_equal(us, 250000);
    assert_true(grpc_parse_timeout("2S", 2, &us));
    assert_int_equal(us, 2000000);
    assert_true(grpc_parse_timeout("1H", 2, &us));
    assert_int_equal(us, 3600LL * 1000000);
    assert_true(grpc_parse_timeout("7u", 2, &us));
    assert_int_equal(us, 7);
    assert_true(grpc_parse_timeout("5000n", 5, &us));
    assert_int_equal(us, 5);
}

static void test_grpc_timeout_rejects_malformed_values(void **state)
{
    (void)state;
    int64_t us;
    assert_false(grpc_parse_timeout("123456789S", 10, &us)); /* more than 8 digits */
    assert_false(grpc_parse_timeout("10", 2, &us));          /* no unit */
    assert_false(grpc_parse_timeout("S", 1, &us));
    assert_false(grpc_parse_timeout("1x", 2, &us));
    assert_false(grpc_parse_timeout("-1S", 3, &us));
}

static void test_grpc_message_is_percent_encoded(void **state)
{
    (void)state;
    char out[64];
    grpc_percent_encode("a%b\nc\xc3\xa9", out, sizeof out);
    assert_string_equal(out, "a%25b%0Ac%C3%A9");
    grpc_percent_encode("abcdef", out, 4);
    assert_string_equal(out, "abc");
}

static void test_grpc_frame_has_big_endian_length_prefix(void **state)
{
    (void)state;
    Sbx__V1__ExecutionCompletion c = SBX__V1__EXECUTION_COMPLETION__INIT;
    c.task_id = "t-1";
    size_t len = 0;
    uint8_t *buf = grpc_frame_message(&c.base, &len);
    assert_non_null(buf);
    size_t n = protobuf_c_message_get_packed_size(&c.base);
    assert_int_equal(len, n + 5);
    assert_int_equal(buf[0], 0);
    assert_int_equal(
        ((size_t)buf[1] << 24) | ((size_t)buf[2] << 16) | ((size_t)buf[3] << 8) | buf[4], n);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grpc_timeout_units_parse_to_microseconds),
        cmocka_unit_test(test_grpc_timeout_rejects_malformed_values),
        cmocka_unit_test(test_grpc_message_is_percent_encoded),
        cmocka_unit_test(test_grpc_frame_has_big_endian_length_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
