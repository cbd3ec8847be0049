/* test_config_environment.c - the environment matrix of DESIGN §5, checked at load:
 * managed x {provisions, attaches, both} and attached x the same, with and without attach_to.
 * Every refusal is a CONFIG error naming the profile and the fix. */
#include "tests/config/config_test_util.h"
#include "tests/config/test_providers.h"

static void test_config_env_managed_with_provisioning_provider_loads(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok("sandbox:\n  profiles:\n    m: {type: test_managed}\n");
    assert_int_equal(cfg->profiles[0].environment, SBX_ENV_MANAGED);
    sbx_config_free(cfg);
    cfg = load_ok("sandbox:\n  profiles:\n    m: {type: test_both, environment: managed}\n");
    sbx_config_free(cfg);
}

static void test_config_env_managed_with_attach_only_provider_is_refused(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    box: {type: test_attach}\n",
               "test.yaml:3:17:", "profile 'box'", "cannot create sandboxes",
               "environment: attached", NULL);
    load_fails("sandbox:\n  profiles:\n    box: {type: test_attach, environment: managed}\n",
               "test.yaml:3:43:", "profile 'box'", "environment: attached", NULL);
}

static void test_config_env_attached_with_attaching_provider_loads(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok("sandbox:\n  profiles:\n    a: {type: test_attach, environment: "
                              "attached, attach_to: i-1}\n");
    assert_int_equal(cfg->profiles[0].environment, SBX_ENV_ATTACHED);
    assert_string_equal(cfg->profiles[0].attach_to, "i-1");
    sbx_config_free(cfg);
    cfg = load_ok(
        "sandbox:\n  profiles:\n    a: {type: test_both, environment: attached, attach_to: c1}\n");
    sbx_config_free(cfg);
}

static void test_config_env_attached_with_provision_only_provider_is_refused(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n"
               "    a: {type: test_managed, environment: attached, attach_to: x}\n",
               "test.yaml:3:42:", "profile 'a'", "cannot attach", "environment: managed", NULL);
}

static void test_config_env_attached_without_attach_to_is_refused(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    a: {type: test_both, environment: attached}\n",
               "test.yaml:3:39:", "profile 'a'", "needs `attach_to", NULL);
    load_fails("sandbox:\n  profiles:\n"
               "    a: {type: test_both, environment: attached, attach_to: ''}\n",
               "profile 'a'", "needs `attach_to", NULL);
}

static void test_config_env_attach_to_under_managed_is_refused(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    a: {type: test_both, attach_to: c1}\n",
               "test.yaml:3:26:", "profile 'a'", "attach_to is only used with", NULL);
}

static void test_config_env_block_of_another_provider_is_refused(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    a: {type: test_managed, test_both: {}}\n",
               "test.yaml:3:29:", "a 'test_both' block in a profile of type 'test_managed'", NULL);
}

static void test_config_env_unknown_type_lists_the_providers(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    a: {type: nope}\n",
               "test.yaml:3:15:", "unknown provider type 'nope'", "test_managed", "test_attach",
               "test_both", NULL);
}

int main(void)
{
    config_test_register_providers();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_env_managed_with_provisioning_provider_loads),
        cmocka_unit_test(test_config_env_managed_with_attach_only_provider_is_refused),
        cmocka_unit_test(test_config_env_attached_with_attaching_provider_loads),
        cmocka_unit_test(test_config_env_attached_with_provision_only_provider_is_refused),
        cmocka_unit_test(test_config_env_attached_without_attach_to_is_refused),
        cmocka_unit_test(test_config_env_attach_to_under_managed_is_refused),
        cmocka_unit_test(test_config_env_block_of_another_provider_is_refused),
        cmocka_unit_test(test_config_env_unknown_type_lists_the_providers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
