/* test_engine_session_policy.c - a session's sandbox keeps the policy it was made under (the
 * handle records it, signed), and a later request that asks for less cannot run there: its
 * network, filesystem and resource limits would silently be wider than it asked for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/binding.h"
#include "engine/fixture.h"
#include "providers/fake/fake.h"

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED
#define DENY SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY
#define ALLOW SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW

typedef fx_env env;

static int setup(void **state)
{
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    /* "open": network allowed, 512 MiB, 64 pids, /data readable; the fake enforces every
     * dimension (its capabilities say so), so what is tried here is the engine's rule alone */
    sbx_profile_config *open = fx_add_profile(t->cfg, "open", "fake");
    open->policy->network_egress = ALLOW;
    open->policy->memory_mb = 512;
    open->policy->pids = 64;
    open->policy->timeout_ms = 60000;
    sbx_add_string(&open->policy->n_fs_read, &open->policy->fs_read, "/data");
    t->e = fx_engine(t->cfg);
    *state = t;
    return 0;
}

/* A request in the session of h, with the policy narrowing set by fill (or none). */
static sbx_request *in_session(const sbx_session_handle *h, void (*fill)(sbx_policy *))
{
    sbx_request *r = fx_shell("open", "echo x");
    if (h != NULL)
        fx_session(r, h);
    if (fill != NULL) {
        r->policy = sbx_policy_new();
        fill(r->policy);
    }
    return r;
}

static void memory_256(sbx_policy *p)
{
    p->memory_mb = 256;
}

static void memory_128(sbx_policy *p)
{
    p->memory_mb = 128;
}

static void deny(sbx_policy *p)
{
    p->network_egress = DENY;
}

static void timeout_only(sbx_policy *p)
{
    p->timeout_ms = 1000;
}

static void same_fs(sbx_policy *p)
{
    sbx_add_string(&p->n_fs_read, &p->fs_read, "/data");
}

static void assert_refused(sbx_completion *c, const char *names)
{
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    if ((sbx_status)c->error_code != SBX_E_POLICY || !strstr(c->error, names) ||
        !strstr(c->error, "fixed when it is made"))
        fail_msg("expected a POLICY refusal naming '%s', got %d: %s", names, c->error_code,
                 c->error);
}

static void test_session_policy_is_recorded_without_the_per_request_dimensions(void **state)
{
    env *t = *state;
    sbx_request *r = in_session(NULL, memory_256);
    r->policy->timeout_ms = 5000;
    r->policy->output_limit_bytes = 4096;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, OK_STATUS);
    const sbx_policy *p = c->session->policy;
    assert_non_null(p);
    assert_int_equal(p->memory_mb, 256); /* the request's narrowing */
    assert_int_equal(p->pids, 64);       /* the profile's */
    assert_int_equal(p->network_egress, ALLOW);
    assert_int_equal(p->n_fs_read, 1);
    assert_string_equal(p->fs_read[0], "/data");
    assert_int_equal(p->timeout_ms, 0); /* per request: not the sandbox's */
    assert_int_equal(p->output_limit_bytes, 0);
    assert_false(p->lenient);

    /* a destroy leaves a handle without a sandbox, and so without its policy */
    sbx_completion *d = fx_process(t->e, fx_destroy(c->session));
    assert_int_equal(d->status, OK_STATUS);
    assert_null(d->session->policy);
    assert_string_equal(d->session->sandbox_id, "");
    sbx_completion_free(d);
    sbx_completion_free(c);
}

/* The sandbox enforces its own limits; a request that asks for as much or more runs there. */
static void test_session_request_asking_as_much_or_more_runs(void **state)
{
    env *t = *state;
    sbx_completion *c = fx_process(t->e, in_session(NULL, memory_128));
    assert_int_equal(c->status, OK_STATUS);
    void (*fills[])(sbx_policy *) = {NULL, memory_128, memory_256, timeout_only, same_fs};
    for (size_t i = 0; i < sizeof fills / sizeof fills[0]; i++) {
        sbx_completion *n = fx_process(t->e, in_session(c->session, fills[i]));
        if (n->status != OK_STATUS)
            fail_msg("request %zu refused: %s", i, n->error);
        assert_string_equal(n->session->sandbox_id, c->session->sandbox_id);
        assert_int_equal(n->session->policy->memory_mb, 128); /* still the sandbox's */
        sbx_completion_free(c);
        c = n;
    }
    sbx_completion_free(c);
}

/* The leak this closes: a session made under the profile's limits, then a request asking for
 * less (no network, less memory, a narrower fs_read) ran there with the wider ones. */
static void test_session_request_asking_for_less_is_refused_before_the_provider(void **state)
{
    env *t = *state;
    sbx_completion *c = fx_process(t->e, in_session(NULL, NULL));
    assert_int_equal(c->status, OK_STATUS);
    sbx_fake *f = sbx_fake_get("open");
    uint64_t ops = sbx_fake_ops(f);
    struct {
        void (*fill)(sbx_policy *);
        const char *names;
    } cases[] = {
        {memory_256, "memory_mb 512 > 256"},
        {deny, "network_egress allow > deny"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sbx_completion *n = fx_process(t->e, in_session(c->session, cases[i].fill));
        assert_refused(n, cases[i].names);
        sbx_completion_free(n);
    }
    sbx_request *r = in_session(c->session, NULL);
    r->policy = sbx_policy_new();
    sbx_add_string(&r->policy->n_fs_read, &r->policy->fs_read, "/data/in");
    r->policy->pids = 8;
    sbx_completion *n = fx_process(t->e, r);
    assert_refused(n, "fs_read '/data' not asked for, pids 64 > 8");
    sbx_completion_free(n);
    assert_int_equal(sbx_fake_ops(f), ops); /* refused before any provider call */

    /* the same request in a new session is made under its own policy */
    n = fx_process(t->e, in_session(NULL, deny));
    assert_int_equal(n->status, OK_STATUS);
    assert_int_equal(n->session->policy->network_egress, DENY);
    sbx_completion_free(n);
    sbx_completion_free(c);
}

/* The recorded policy is signed: a handle edited to claim a narrower sandbox, or stripped of
 * its policy, does not verify. */
static void test_session_policy_in_the_handle_cannot_be_edited(void **state)
{
    env *t = *state;
    sbx_completion *c = fx_process(t->e, in_session(NULL, NULL));
    assert_int_equal(c->status, OK_STATUS);

    sbx_session_handle *edited = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    edited->policy->memory_mb = 256;
    sbx_completion *n = fx_process(t->e, in_session(edited, memory_256));
    assert_int_equal(n->error_code, SBX_E_PERMISSION_DENIED);
    sbx_completion_free(n);

    sbx_message_free(&edited->policy->base);
    edited->policy = NULL;
    n = fx_process(t->e, in_session(edited, NULL));
    assert_int_equal(n->error_code, SBX_E_PERMISSION_DENIED);
    sbx_completion_free(n);

    sbx_message_free(&edited->base);
    sbx_completion_free(c);
}

/* A handle from before handles recorded the policy (signed without one) still works; its
 * sandbox is taken to have the profile's policy, the widest it can have. */
static void test_session_handle_without_a_policy_is_taken_as_the_profiles(void **state)
{
    env *t = *state;
    sbx_completion *c = fx_process(t->e, in_session(NULL, memory_128));
    assert_int_equal(c->status, OK_STATUS);
    sbx_session_handle *old = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_message_free(&old->policy->base);
    old->policy = NULL;
    sbx_binding_key *k = NULL;
    assert_int_equal(sbx_binding_key_load(t->cfg->secret_file, &k, NULL), SBX_OK);
    assert_true(sbx_binding_stamp(k, old, "alice"));
    sbx_binding_key_free(k);

    sbx_completion *n = fx_process(t->e, in_session(old, NULL));
    assert_int_equal(n->status, OK_STATUS);
    sbx_completion_free(n);
    n = fx_process(t->e, in_session(old, memory_128));
    assert_refused(n, "memory_mb 512 > 128");
    assert_non_null(strstr(n->error, "records no policy, so it is taken to be the profile's"));
    sbx_completion_free(n);

    sbx_message_free(&old->base);
    sbx_completion_free(c);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, fx_env_teardown)
    const struct CMUnitTest tests[] = {
        T(test_session_policy_is_recorded_without_the_per_request_dimensions),
        T(test_session_request_asking_as_much_or_more_runs),
        T(test_session_request_asking_for_less_is_refused_before_the_provider),
        T(test_session_policy_in_the_handle_cannot_be_edited),
        T(test_session_handle_without_a_policy_is_taken_as_the_profiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
