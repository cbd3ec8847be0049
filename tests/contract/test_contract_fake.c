/* test_contract_fake.c - the provider contract suite on the fake provider, with every
 * capability on, and with the optional ones switched off (undeclared operations must refuse).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "contract/contract_suite.h"

static void test_contract_fake_full_capabilities(void **state)
{
    (void)state;
    const char *yaml = "sandbox:\n"
                       "  profiles:\n"
                       "    default:\n"
                       "      type: fake\n"
                       "      policy: { network_egress: deny }\n";
    assert_int_equal(sbx_contract_run_yaml(yaml, "default"), 0);
}

static void test_contract_fake_minimal_capabilities(void **state)
{
    (void)state;
    const char *yaml = "sandbox:\n"
                       "  profiles:\n"
                       "    bare:\n"
                       "      type: fake\n"
                       "      policy: { network_egress: deny }\n"
                       "      fake: { languages: [python], shell: false, files: false,\n"
                       "              package_install: false, attach: false }\n";
    assert_int_equal(sbx_contract_run_yaml(yaml, "bare"), 0);
}

static void test_contract_fake_attached_profile(void **state)
{
    (void)state;
    const char *yaml = "sandbox:\n"
                       "  profiles:\n"
                       "    ext:\n"
                       "      type: fake\n"
                       "      environment: attached\n"
                       "      attach_to: box-1\n"
                       "      policy: { network_egress: allow }\n";
    assert_int_equal(sbx_contract_run_yaml(yaml, "ext"), 0);
}

static void test_contract_suite_detects_a_broken_provider(void **state)
{
    (void)state;
    /* A fake that claims bash but fails every create: the suite must report failures. */
    const char *yaml = "sandbox:\n"
                       "  profiles:\n"
                       "    broken:\n"
                       "      type: fake\n"
                       "      policy: { network_egress: deny }\n"
                       "      fake: { fail_create: true }\n";
    assert_true(sbx_contract_run_yaml(yaml, "broken") > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contract_fake_full_capabilities),
        cmocka_unit_test(test_contract_fake_minimal_capabilities),
        cmocka_unit_test(test_contract_fake_attached_profile),
        cmocka_unit_test(test_contract_suite_detects_a_broken_provider),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
