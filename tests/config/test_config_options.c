/* test_config_options.c - sbx_options, a provider's validated config block: schema defaults for
 * every option type, values set from text and from YAML, validation of each type, unknown
 * keys, deep copies, and a block with no schema. */
#include "tests/config/config_test_util.h"
#include "tests/config/test_providers.h"

static const sbx_option_spec schema[] = {
    {.key = "s", .type = SBX_OPT_STRING, .default_value = "dflt"},
    {.key = "i", .type = SBX_OPT_INT, .default_value = "5", .min = -3, .max = 9},
    {.key = "u", .type = SBX_OPT_INT},
    {.key = "b", .type = SBX_OPT_BOOL, .default_value = "true"},
    {.key = "e", .type = SBX_OPT_ENUM, .default_value = "x", .choices = "x|y|zz"},
    {.key = "l", .type = SBX_OPT_LIST, .default_value = "/a,/b"},
    {.key = "k", .type = SBX_OPT_ENV_NAME},
    {.key = NULL},
};

static void test_config_options_defaults_apply_when_unset(void **state)
{
    (void)state;
    sbx_options *o = sbx_options_new(schema);
    assert_non_null(o);
    assert_string_equal(sbx_options_get(o, "s"), "dflt");
    assert_int_equal(sbx_options_get_int(o, "i"), 5);
    assert_int_equal(sbx_options_get_int(o, "u"), 0);
    assert_null(sbx_options_get(o, "u"));
    assert_true(sbx_options_get_bool(o, "b"));
    assert_string_equal(sbx_options_get(o, "e"), "x");
    assert_null(sbx_options_get(o, "k"));
    const char *const *items;
    assert_int_equal(sbx_options_get_list(o, "l", &items), 2);
    assert_string_equal(items[0], "/a");
    assert_string_equal(items[1], "/b");
    assert_false(sbx_options_is_set(o, "s"));
    assert_ptr_equal(sbx_options_schema(o), schema);
    sbx_options_free(o);
}

static void test_config_options_set_values_override_defaults(void **state)
{
    (void)state;
    sbx_options *o = sbx_options_new(schema);
    assert_int_equal(sbx_options_set(o, "s", "v", NULL), SBX_OK);
    assert_int_equal(sbx_options_set(o, "i", "-3", NULL), SBX_OK);
    assert_int_equal(sbx_options_set(o, "b", "false", NULL), SBX_OK);
    assert_int_equal(sbx_options_set(o, "e", "zz", NULL), SBX_OK);
    assert_int_equal(sbx_options_set(o, "k", "MY_KEY_1", NULL), SBX_OK);
    assert_int_equal(sbx_options_set(o, "l", "/c", NULL), SBX_OK);
    assert_int_equal(sbx_options_set(o, "l", "/d", NULL), SBX_OK);
    assert_string_equal(sbx_options_get(o, "s"), "v");
    assert_int_equal(sbx_options_get_int(o, "i"), -3);
    assert_false(sbx_options_get_bool(o, "b"));
    assert_string_equal(sbx_options_get(o, "e"), "zz");
    assert_string_equal(sbx_options_get(o, "k"), "MY_KEY_1");
    const char *const *items;
    assert_int_equal(sbx_options_get_list(o, "l", &items), 2); /* replaces the default */
    assert_string_equal(items[0], "/c");
    assert_string_equal(items[1], "/d");
    assert_true(sbx_options_is_set(o, "s"));
    assert_true(sbx_options_is_set(o, "l"));
    sbx_options_free(o);
}

static void expect_refused(sbx_options *o, const char *key, const char *value, const char *fragment)
{
    sbx_error err = {0};
    assert_int_equal(sbx_options_set(o, key, value, &err), SBX_E_CONFIG);
    if (strstr(err.message, fragment) == NULL)
        fprintf(stderr, "message lacks \"%s\": %s\n", fragment, err.message);
    assert_non_null(strstr(err.message, fragment));
}

static void test_config_options_values_are_validated_by_type(void **state)
{
    (void)state;
    sbx_options *o = sbx_options_new(schema);
    expect_refused(o, "i", "ten", "expected an integer");
    expect_refused(o, "i", "10", "accepted: -3 to 9");
    expect_refused(o, "i", "-4", "accepted: -3 to 9");
    expect_refused(o, "i", "+1", "expected an integer");
    expect_refused(o, "i", "0x1", "expected an integer");
    expect_refused(o, "i", "99999999999999999999", "expected an integer");
    expect_refused(o, "b", "yes", "expected true or false");
    expect_refused(o, "e", "z", "accepted: x|y|zz");
    expect_refused(o, "k", "sk-live-123", "not an environment variable name");
    expect_refused(o, "k", "1ABC", "not an environment variable name");
    expect_refused(o, "k", "$MY_KEY", "without '$': MY_KEY");
    expect_refused(o, "nope", "1", "accepted keys: s, i, u, b, e, l, k");
    /* nothing above changed a value */
    assert_int_equal(sbx_options_get_int(o, "i"), 5);
    assert_false(sbx_options_is_set(o, "k"));
    /* unbounded int (min = max = 0) accepts anything in int64 */
    assert_int_equal(sbx_options_set(o, "u", "-9223372036854775808", NULL), SBX_OK);
    sbx_options_free(o);
}

static void test_config_options_copy_is_deep(void **state)
{
    (void)state;
    sbx_options *o = sbx_options_new(schema);
    assert_int_equal(sbx_options_set(o, "s", "one", NULL), SBX_OK);
    assert_int_equal(sbx_options_set(o, "l", "/x", NULL), SBX_OK);
    sbx_options *c = sbx_options_copy(o);
    assert_non_null(c);
    assert_int_equal(sbx_options_set(o, "s", "two", NULL), SBX_OK);
    sbx_options_free(o);
    assert_string_equal(sbx_options_get(c, "s"), "one");
    const char *const *items;
    assert_int_equal(sbx_options_get_list(c, "l", &items), 1);
    assert_string_equal(items[0], "/x");
    assert_true(sbx_options_is_set(c, "l"));
    sbx_options_free(c);
    assert_null(sbx_options_copy(NULL));
    sbx_options_free(NULL);
}

static void test_config_options_without_schema_return_nothing(void **state)
{
    (void)state;
    sbx_options *o = sbx_options_new(NULL);
    assert_non_null(o);
    assert_null(sbx_options_get(o, "any"));
    assert_int_equal(sbx_options_get_int(o, "any"), 0);
    assert_false(sbx_options_get_bool(o, "any"));
    assert_int_equal(sbx_options_get_list(o, "any", NULL), 0);
    assert_int_equal(sbx_options_set(o, "any", "1", NULL), SBX_E_CONFIG);
    sbx_options_free(o);
}

static void test_config_options_from_yaml_block(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok("sandbox:\n  profiles:\n    default:\n      type: test_managed\n"
                              "      test_managed:\n        count: 10\n        tags: []\n");
    const sbx_options *o = cfg->profiles[0].options;
    assert_int_equal(sbx_options_get_int(o, "count"), 10);
    /* an explicit empty list is set and empty, not the default "a,b" */
    assert_true(sbx_options_is_set(o, "tags"));
    assert_int_equal(sbx_options_get_list(o, "tags", NULL), 0);
    sbx_config_free(cfg);
}

static void test_config_options_yaml_types_are_strict(void **state)
{
    (void)state;
    const char *head = "sandbox:\n  profiles:\n    default:\n      type: test_managed\n"
                       "      test_managed:\n";
    char yaml[512];
    snprintf(yaml, sizeof(yaml), "%s        count: \"4\"\n", head);
    load_fails(yaml, "test.yaml:6:16:", "quoted string", NULL);
    snprintf(yaml, sizeof(yaml), "%s        tags: solo\n", head);
    load_fails(yaml, "test.yaml:6:15:", "expected a list of strings", NULL);
    snprintf(yaml, sizeof(yaml), "%s        image: [a]\n", head);
    load_fails(yaml, "test.yaml:6:16:", "expected string, got a list", NULL);
    snprintf(yaml, sizeof(yaml), "%s        tags: [[a]]\n", head);
    load_fails(yaml, "test.yaml:6:16:", "expected a string, got a list", NULL);
    snprintf(yaml, sizeof(yaml), "%s        key_env: \"not a name\"\n", head);
    load_fails(yaml, "test.yaml:6:18:", "not an environment variable name", NULL);
}

int main(void)
{
    config_test_register_providers();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_options_defaults_apply_when_unset),
        cmocka_unit_test(test_config_options_set_values_override_defaults),
        cmocka_unit_test(test_config_options_values_are_validated_by_type),
        cmocka_unit_test(test_config_options_copy_is_deep),
        cmocka_unit_test(test_config_options_without_schema_return_nothing),
        cmocka_unit_test(test_config_options_from_yaml_block),
        cmocka_unit_test(test_config_options_yaml_types_are_strict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
