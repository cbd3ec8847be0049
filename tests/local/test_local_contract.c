/* test_local_contract.c - the provider contract suite (tests/contract) on the local provider,
 * through the real engine, with a private runtime directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "contract/contract_suite.h"
#include "tests/local/local_helpers.h"

static void test_local_contract_suite(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbxc-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n"
             "  runtime_dir: %s\n"
             "  profiles:\n"
             "    default:\n"
             "      type: local\n"
             "      policy: { network_egress: deny%s }\n",
             dir, getuid() == 0 ? ", memory_mb: 512, pids: 256" : "");
    assert_int_equal(sbx_contract_run_yaml(yaml, "default"), 0);
    lt_remove_runtime_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_contract_suite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
