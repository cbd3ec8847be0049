/* test_docker_contract.c - the provider contract suite (tests/contract) on docker against the
 * real private dockerd: attached to a container the test made, and managed (containers whose
 * PID 1 is sbx-agent) where this tree builds the agent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "contract/contract_suite.h"
#include "docker_test.h"

static void test_docker_contract_attached(void **state)
{
    (void)state;
    dt_env env;
    dt_env_load(&env);
    const char *argv[] = {"sleep", "600", NULL};
    char *id = dt_container_run(&env, env.image_python, argv);
    char *rt = dt_tempdir();
    char yaml[4096];
    /* An attached container is as its owner made it: the policy asks for nothing sbx would
     * have to enforce on it (network allow restricts nothing). */
    snprintf(yaml, sizeof(yaml),
             "sandbox:\n"
             "  runtime_dir: %s\n"
             "  profiles:\n"
             "    ext:\n"
             "      type: docker\n"
             "      environment: attached\n"
             "      attach_to: %s\n"
             "      policy: { network_egress: allow, cpu: 0, memory_mb: 0, pids: 0 }\n"
             "      docker: { socket: %s }\n",
             rt, id, env.socket);
    assert_int_equal(sbx_contract_run_yaml(yaml, "ext"), 0);
    dt_container_remove(&env, id);
    free(id);
    dt_rmtree(rt);
    free(rt);
    dt_env_free(&env);
}

static void test_docker_contract_managed(void **state)
{
    (void)state;
    const char *agent = dt_agent_path();
    if (agent == NULL)
        skip(); /* managed containers run sbx-agent; this tree does not build it */
    dt_env env;
    dt_env_load(&env);
    char *rt = dt_tempdir();
    char yaml[4096];
    snprintf(yaml, sizeof(yaml),
             "sandbox:\n"
             "  runtime_dir: %s\n"
             "  profiles:\n"
             "    default:\n"
             "      type: docker\n"
             "      policy: { network_egress: deny, memory_mb: 256, pids: 128, cpu: 1 }\n"
             "      docker: { socket: %s, image: %s, agent: %s }\n",
             rt, env.socket, env.image_python, agent);
    assert_int_equal(sbx_contract_run_yaml(yaml, "default"), 0);
    dt_rmtree(rt);
    free(rt);
    dt_env_free(&env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_contract_attached),
        cmocka_unit_test(test_docker_contract_managed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
