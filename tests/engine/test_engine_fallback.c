/* test_engine_fallback.c - a profile's fallback chain (sbx.profiles.<name>.fallback): a new
 * session whose provider cannot provision moves to the next profile that holds the same (or a
 * narrower) policy strictly, with a notice naming what was tried; a refusal never falls back,
 * a program that ran never runs again elsewhere, and a fallback never widens the policy. */
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

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED
#define FAILED SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED

typedef fx_env env;

static void fallback_to(sbx_config *cfg, const char *name, const char *to)
{
    for (size_t i = 0; i < cfg->n_profiles; i++)
        if (strcmp(cfg->profiles[i].name, name) == 0)
            assert_true(
                sbx_add_string(&cfg->profiles[i].n_fallback, &cfg->profiles[i].fallback, to));
}

static int setup(void **state)
{
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    fx_add_profile(t->cfg, "default", "fake");
    sbx_profile_config *broken = fx_add_profile(t->cfg, "broken", "fake");
    fx_opt(broken, "fail_create", "true");
    broken->policy->lenient = true; /* lenient, yet a fallback must hold the policy strictly */
    fx_add_profile(t->cfg, "backup", "fake");
    /* cannot enforce the network dimension: passed over under strict, even for lenient */
    fx_opt(fx_add_profile(t->cfg, "weakling", "fake"), "policy_network", "false");
    sbx_profile_config *big = fx_add_profile(t->cfg, "big_broken", "fake");
    fx_opt(big, "fail_create", "true");
    big->policy->memory_mb = 1024;
    fx_add_profile(t->cfg, "small", "fake")->policy->memory_mb = 256;
    fx_add_profile(t->cfg, "ran", "fake");
    fx_opt(fx_add_profile(t->cfg, "broken_too", "fake"), "fail_create", "true");
    fx_opt(fx_add_profile(t->cfg, "all_broken", "fake"), "fail_create", "true");
    fallback_to(t->cfg, "broken", "weakling");
    fallback_to(t->cfg, "broken", "backup");
    fallback_to(t->cfg, "big_broken", "small");
    fallback_to(t->cfg, "big_broken", "backup");
    fallback_to(t->cfg, "ran", "backup");
    fallback_to(t->cfg, "all_broken", "broken_too");
    t->e = fx_engine(t->cfg);
    *state = t;
    return 0;
}

static void assert_notice_has(const sbx_completion *c, const char *part)
{
    if (c->notice == NULL || strstr(c->notice, part) == NULL)
        fprintf(stderr, "notice lacks \"%s\": %s\n", part, c->notice ? c->notice : "(none)");
    assert_non_null(c->notice);
    assert_non_null(strstr(c->notice, part));
}

static void test_fallback_runs_on_the_next_profile_that_holds_the_policy(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("broken", "echo moved");
    r->policy = sbx_policy_new();
    r->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    sbx_completion *c = fx_process(t->e, r);
    if (c->status != OK_STATUS)
        fprintf(stderr, "error %d: %s / notice %s\n", c->error_code, c->error, c->notice);
    assert_int_equal(c->status, OK_STATUS);
    assert_string_equal(fx_stdout(c), "moved\n");
    /* the session now belongs to the profile that made its sandbox */
    assert_string_equal(c->session->profile, "backup");
    assert_true(c->session->sandbox_id[0] != '\0');
    assert_notice_has(c, "ran on fallback profile 'backup'");
    assert_notice_has(c, "profile 'broken'");
    assert_notice_has(c, "fallback 'weakling' refused");
    sbx_completion_free(c);
}

static void test_fallback_never_widens_the_first_profiles_policy(void **state)
{
    env *t = *state;
    /* big_broken's effective memory is 1024 MB; `small` caps at 256 MB, so holding the request
     * to 1024 would widen small's policy: it is passed over, and backup (no cap) runs it with
     * the 1024 MB of the first profile. */
    sbx_completion *c = fx_process(t->e, fx_shell("big_broken", "echo ok"));
    assert_int_equal(c->status, OK_STATUS);
    assert_string_equal(c->session->profile, "backup");
    assert_notice_has(c, "fallback 'small' refused");
    sbx_completion_free(c);
}

static void test_a_refusal_never_falls_back(void **state)
{
    env *t = *state;
    /* the request widens broken's policy: POLICY, decided before any provider call */
    sbx_request *r = fx_shell("big_broken", "echo no");
    r->policy = sbx_policy_new();
    r->policy->memory_mb = 4096;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, FAILED);
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_true(c->notice == NULL || strstr(c->notice, "fallback") == NULL);
    sbx_completion_free(c);
}

static void test_a_program_that_ran_is_never_run_again_elsewhere(void **state)
{
    env *t = *state;
    sbx_completion *c = fx_process(t->e, fx_shell("ran", "echo once; exit 3"));
    assert_int_equal(c->status, OK_STATUS);
    assert_int_equal(c->result->exit_code, 3);
    assert_string_equal(c->session->profile, "ran");
    assert_true(c->notice == NULL || strstr(c->notice, "fallback") == NULL);
    sbx_completion_free(c);
}

static void test_when_every_fallback_fails_the_first_error_stands_with_what_was_tried(void **state)
{
    env *t = *state;
    sbx_completion *c = fx_process(t->e, fx_shell("all_broken", "echo never"));
    assert_int_equal(c->status, FAILED);
    assert_int_equal(c->error_code, SBX_E_PROVISION);
    assert_notice_has(c, "no fallback could take the request");
    assert_notice_has(c, "fallback 'broken_too' failed too");
    sbx_completion_free(c);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, fx_env_teardown)
    const struct CMUnitTest tests[] = {
        T(test_fallback_runs_on_the_next_profile_that_holds_the_policy),
        T(test_fallback_never_widens_the_first_profiles_policy),
        T(test_a_refusal_never_falls_back),
        T(test_a_program_that_ran_is_never_run_again_elsewhere),
        T(test_when_every_fallback_fails_the_first_error_stands_with_what_was_tried),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
