/* test_engine_nodes.c - a session is only ever declared gone by the node that owns it: a
 * host-local handle seen by another node is answered WRONG_NODE naming the owner (nothing is
 * created or destroyed), recreate_elsewhere starts it over only when asked, and node-free
 * (cloud) providers' handles carry no node at all.
 *
 * "Another node" is the same engine with cfg->node swapped: exactly what a second worker that
 * shares the fleet's secret sees, without a second process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/fixture.h"
#include "providers/fake/fake.h"
#include "sbx/provider.h"

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED
#define FAILED SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED

typedef struct env {
    sbx_config *cfg;
    sbx_engine *e;
    char *own_node;
} env;

/* The fake's ops without SBX_PROVIDER_HOST_LOCAL: a stand-in for a cloud API any worker reaches. */
static sbx_provider_ops cloudlike;

static int setup(void **state)
{
    static int registered;
    if (!registered) {
        cloudlike = *sbx_provider_lookup("fake");
        cloudlike.name = "cloudlike";
        cloudlike.traits = SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_ATTACHES;
        sbx_error err;
        assert_int_equal(sbx_provider_register(&cloudlike, &err), SBX_OK);
        registered = 1;
    }
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    fx_add_profile(t->cfg, "default", "fake");
    fx_add_profile(t->cfg, "cloud", "cloudlike");
    t->e = fx_engine(t->cfg);
    t->own_node = t->cfg->node;
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    env *t = *state;
    t->cfg->node = t->own_node;
    sbx_engine_free(t->e);
    fx_config_free(t->cfg);
    free(t);
    return 0;
}

/* From now on the engine answers as node name. */
static void become(env *t, const char *name)
{
    t->cfg->node = (char *)name;
}

static void test_engine_host_local_session_elsewhere_is_wrong_node_naming_its_owner(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fx_process(t->e, fx_shell("default", "echo one"));
    assert_int_equal(c1->status, OK_STATUS);
    assert_string_equal(c1->session->node, "test-node");
    sbx_fake *f = sbx_fake_get("default");
    uint64_t ops = sbx_fake_ops(f);
    become(t, "node-b");
    sbx_request *r = fx_shell("default", "echo two");
    fx_session(r, c1->session);
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->status, FAILED);
    assert_int_equal(c2->error_code, SBX_E_WRONG_NODE);
    assert_string_equal(c2->node, "test-node");
    assert_non_null(strstr(c2->error, "lives on node 'test-node'"));
    assert_non_null(strstr(c2->error, "recreate_elsewhere"));
    /* The handle comes back as it was, and nothing was created, attached or run. */
    assert_string_equal(c2->session->sandbox_id, c1->session->sandbox_id);
    assert_string_equal(c2->session->node, "test-node");
    assert_int_equal(sbx_fake_created_count(f), 1);
    assert_int_equal(sbx_fake_ops(f), ops);
    assert_true(sbx_fake_alive(f, c1->session->sandbox_id));
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_recreate_elsewhere_starts_the_session_over_here_with_notice(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fx_process(t->e, fx_shell("default", "echo one"));
    become(t, "node-b");
    sbx_request *r = fx_shell("default", "echo two");
    fx_session(r, c1->session);
    r->recreate_elsewhere = 1;
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->status, OK_STATUS);
    assert_string_equal(fx_stdout(c2), "two\n");
    assert_string_equal(c2->session->session_id, c1->session->session_id);
    assert_string_equal(c2->session->node, "node-b");
    assert_string_not_equal(c2->session->sandbox_id, c1->session->sandbox_id);
    assert_non_null(strstr(c2->notice, "lived on node 'test-node'"));
    sbx_fake *f = sbx_fake_get("default");
    assert_int_equal(sbx_fake_created_count(f), 2);
    /* The old sandbox is its node's business: never destroyed from here. */
    assert_true(sbx_fake_alive(f, c1->session->sandbox_id));
    /* The new handle is this node's now. */
    sbx_request *r3 = fx_shell("default", "echo three");
    fx_session(r3, c2->session);
    sbx_completion *c3 = fx_process(t->e, r3);
    assert_int_equal(c3->status, OK_STATUS);
    assert_string_equal(c3->session->sandbox_id, c2->session->sandbox_id);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
    sbx_completion_free(c3);
}

static void test_engine_destroy_elsewhere_is_wrong_node_and_destroys_nothing(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fx_process(t->e, fx_shell("default", "echo one"));
    become(t, "node-b");
    sbx_completion *c2 = fx_process(t->e, fx_destroy(c1->session));
    assert_int_equal(c2->status, FAILED);
    assert_int_equal(c2->error_code, SBX_E_WRONG_NODE);
    assert_string_equal(c2->node, "test-node");
    sbx_fake *f = sbx_fake_get("default");
    assert_int_equal(sbx_fake_destroy_calls(f), 0);
    assert_true(sbx_fake_alive(f, c1->session->sandbox_id));
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_forged_handle_elsewhere_is_denied_not_told_the_node(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fx_process(t->e, fx_shell("default", "echo one"));
    become(t, "node-b");
    sbx_request *r = fx_shell("default", "echo two");
    fx_session(r, c1->session);
    fx_subject(r, "mallory");
    r->recreate_elsewhere = 1;
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->error_code, SBX_E_PERMISSION_DENIED);
    assert_string_equal(c2->node, "");
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("default")), 1);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_node_free_provider_handles_carry_no_node_and_run_anywhere(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fx_process(t->e, fx_shell("cloud", "echo one"));
    assert_int_equal(c1->status, OK_STATUS);
    assert_string_equal(c1->session->node, "");
    become(t, "node-b");
    sbx_request *r = fx_shell("cloud", "echo two");
    fx_session(r, c1->session);
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->status, OK_STATUS);
    assert_string_equal(c2->session->sandbox_id, c1->session->sandbox_id);
    assert_string_equal(c2->session->node, "");
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("cloud")), 1);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_wrong_node_has_its_status_name(void **state)
{
    (void)state;
    assert_string_equal(sbx_status_name(SBX_E_WRONG_NODE), "WRONG_NODE");
    assert_int_equal(sbx_status_from_name("WRONG_NODE"), SBX_E_WRONG_NODE);
    assert_int_equal((int)SBX__V1__ERROR_CODE__ERROR_CODE_WRONG_NODE, (int)SBX_E_WRONG_NODE);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_engine_host_local_session_elsewhere_is_wrong_node_naming_its_owner),
        T(test_engine_recreate_elsewhere_starts_the_session_over_here_with_notice),
        T(test_engine_destroy_elsewhere_is_wrong_node_and_destroys_nothing),
        T(test_engine_forged_handle_elsewhere_is_denied_not_told_the_node),
        T(test_engine_node_free_provider_handles_carry_no_node_and_run_anywhere),
        T(test_engine_wrong_node_has_its_status_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
