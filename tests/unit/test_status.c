/* test_status.c - sbx_status names (core/status.c) against the contract's ErrorCode enum, and
 * the sbx_error value: formatting, truncation with "...", prefixes, clearing.
 * Must not depend on anything but libsbx and the generated contract. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sbx/status.h"
#include "sbx/v1/execution.pb-c.h"

/* Every ErrorCode of execution.proto has an sbx_status of the same value, named like it
 * without the ERROR_CODE_ prefix, and the name parses back to the value. */
static void test_status_names_match_the_contract_and_round_trip(void **state)
{
    (void)state;
    const ProtobufCEnumDescriptor *d = &sbx__v1__error_code__descriptor;
    assert_true(d->n_values >= 14);
    for (unsigned i = 0; i < d->n_values; i++) {
        const ProtobufCEnumValue *v = &d->values[i];
        const char *want = v->name + strlen("ERROR_CODE_");
        assert_string_equal(sbx_status_name((sbx_status)v->value), want);
        assert_int_equal(sbx_status_from_name(want), v->value);
    }
}

static void test_status_name_of_an_unknown_code_is_unknown(void **state)
{
    (void)state;
    assert_string_equal(sbx_status_name((sbx_status)99), "UNKNOWN");
    assert_string_equal(sbx_status_name((sbx_status)-1), "UNKNOWN");
    assert_int_equal(sbx_status_from_name("UNKNOWN"), -1);
    assert_int_equal(sbx_status_from_name("config"), -1); /* names are exact */
    assert_int_equal(sbx_status_from_name(""), -1);
    assert_int_equal(sbx_status_from_name(NULL), -1);
}

static void test_error_set_formats_and_returns_the_code(void **state)
{
    (void)state;
    sbx_error err;
    assert_int_equal(
        sbx_error_set(&err, SBX_E_CONFIG, "%s:%d:%d: unknown key '%s'", "a.yaml", 3, 7, "profils"),
        SBX_E_CONFIG);
    assert_int_equal(err.code, SBX_E_CONFIG);
    assert_string_equal(err.message, "a.yaml:3:7: unknown key 'profils'");
}

static void test_error_set_without_an_error_value_still_returns_the_code(void **state)
{
    (void)state;
    assert_int_equal(sbx_error_set(NULL, SBX_E_GONE, "ignored %d", 1), SBX_E_GONE);
    sbx_error_prefix(NULL, "ignored");
    sbx_error_clear(NULL);
}

static void test_error_set_cuts_a_long_message_with_ellipsis(void **state)
{
    (void)state;
    char *big = malloc(SBX_ERROR_MAX * 2);
    assert_non_null(big);
    memset(big, 'k', SBX_ERROR_MAX * 2 - 1);
    big[SBX_ERROR_MAX * 2 - 1] = '\0';
    sbx_error err;
    sbx_error_set(&err, SBX_E_INVALID_ARGUMENT, "keys: %s", big);
    size_t n = strlen(err.message);
    assert_int_equal(n, SBX_ERROR_MAX - 1);
    assert_string_equal(err.message + n - 3, "...");
    assert_memory_equal(err.message, "keys: kkk", 9);
    free(big);
}

static void test_error_set_that_fits_exactly_is_not_cut(void **state)
{
    (void)state;
    char text[SBX_ERROR_MAX];
    memset(text, 'a', SBX_ERROR_MAX - 1);
    text[SBX_ERROR_MAX - 1] = '\0';
    sbx_error err;
    sbx_error_set(&err, SBX_E_INTERNAL, "%s", text);
    assert_string_equal(err.message, text);
}

/* Wrapping an error with its own text is common; it must not read what it is overwriting. */
static void test_error_set_may_quote_its_own_message(void **state)
{
    (void)state;
    sbx_error err;
    sbx_error_set(&err, SBX_E_PROVISION, "no space left");
    sbx_error_set(&err, SBX_E_PROVISION, "creating sandbox: %s (retry later)", err.message);
    assert_string_equal(err.message, "creating sandbox: no space left (retry later)");
}

static void test_error_prefix_prepends_context_and_keeps_the_code(void **state)
{
    (void)state;
    sbx_error err;
    sbx_error_set(&err, SBX_E_POLICY, "cpu cannot be enforced");
    sbx_error_prefix(&err, "profile '%s': ", "default");
    assert_int_equal(err.code, SBX_E_POLICY);
    assert_string_equal(err.message, "profile 'default': cpu cannot be enforced");
}

static void test_error_prefix_cuts_with_ellipsis(void **state)
{
    (void)state;
    char body[SBX_ERROR_MAX];
    memset(body, 'b', SBX_ERROR_MAX - 1);
    body[SBX_ERROR_MAX - 1] = '\0';
    sbx_error err;
    sbx_error_set(&err, SBX_E_CONFIG, "%s", body);
    sbx_error_prefix(&err, "file x: ");
    size_t n = strlen(err.message);
    assert_int_equal(n, SBX_ERROR_MAX - 1);
    assert_memory_equal(err.message, "file x: bbb", 11);
    assert_string_equal(err.message + n - 3, "...");
}

static void test_error_clear_resets_code_and_message(void **state)
{
    (void)state;
    sbx_error err;
    sbx_error_set(&err, SBX_E_BROKER, "down");
    sbx_error_clear(&err);
    assert_int_equal(err.code, SBX_OK);
    assert_string_equal(err.message, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names_match_the_contract_and_round_trip),
        cmocka_unit_test(test_status_name_of_an_unknown_code_is_unknown),
        cmocka_unit_test(test_error_set_formats_and_returns_the_code),
        cmocka_unit_test(test_error_set_without_an_error_value_still_returns_the_code),
        cmocka_unit_test(test_error_set_cuts_a_long_message_with_ellipsis),
        cmocka_unit_test(test_error_set_that_fits_exactly_is_not_cut),
        cmocka_unit_test(test_error_set_may_quote_its_own_message),
        cmocka_unit_test(test_error_prefix_prepends_context_and_keeps_the_code),
        cmocka_unit_test(test_error_prefix_cuts_with_ellipsis),
        cmocka_unit_test(test_error_clear_resets_code_and_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
