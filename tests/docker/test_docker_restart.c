/* test_docker_restart.c - the Docker daemon restarted in the middle of a session, through the
 * engine: a managed session self-heals into a new container (with the engine's notice, the
 * dead container removed); an attached session is GONE and nothing is recreated.
 *
 * This test runs its own private daemon (scripts/dockerd-test.sh with a state file of its own),
 * so restarting it cannot disturb the docker tests that share the fixture's daemon; owned by
 * this process (SBX_DOCKERD_OWNER), so it does not outlive a killed test. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "docker_test.h"
#include "engine/fixture.h"

typedef struct fixture {
    char *dir; /* temp dir holding the daemon's state file */
    char state[600];
    dt_env env;
} fixture;

static void script(fixture *f, const char *verb)
{
    const char *src = getenv("SBX_SOURCE_DIR");
    assert_non_null(src);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "SBX_DOCKERD_IMAGES=busybox '%s/scripts/dockerd-test.sh' %s '%s'",
             src, verb, f->state);
    if (system(cmd) != 0)
        fail_msg("%s failed", cmd);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->dir = dt_tempdir();
    snprintf(f->state, sizeof(f->state), "%s/dockerd.state", f->dir);
    /* The daemon is this process's: the script's watchdog stops it if this test is killed. */
    char owner[32];
    snprintf(owner, sizeof(owner), "%d", (int)getpid());
    setenv("SBX_DOCKERD_OWNER", owner, 1);
    script(f, "start");
    setenv("SBX_DOCKERD_STATE", f->state, 1);
    dt_env_load(&f->env);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    dt_env_free(&f->env);
    script(f, "stop");
    dt_rmtree(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static sbx_config *docker_config(fixture *f, sbx_environment env, const char *attach_to)
{
    sbx_config *cfg = fx_config_new();
    sbx_profile_config *p = fx_add_profile(cfg, "d", "docker");
    p->environment = env;
    p->attach_to = attach_to != NULL ? strdup(attach_to) : NULL;
    p->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    fx_opt(p, "socket", f->env.socket);
    fx_opt(p, "image", f->env.image_busybox);
    const char *agent = dt_agent_path();
    if (agent != NULL)
        fx_opt(p, "agent", agent);
    return cfg;
}

static void test_docker_restart_managed_session_self_heals_into_a_new_container(void **state)
{
    fixture *f = *state;
    if (dt_agent_path() == NULL)
        skip(); /* managed containers run sbx-agent; this tree does not build it */
    sbx_config *cfg = docker_config(f, SBX_ENV_MANAGED, NULL);
    sbx_engine *e = fx_engine(cfg);

    sbx_request *r = fx_shell("d", "echo before");
    sbx_completion *c = sbx_engine_process(e, r, NULL);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("first run: %s", c->error);
    assert_string_equal(fx_stdout(c), "before\n");
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    char *old_id = strdup(h->sandbox_id);
    sbx_completion_free(c);
    sbx_request_free(r);

    script(f, "restart");

    r = fx_shell("d", "echo after");
    fx_session(r, h);
    c = sbx_engine_process(e, r, NULL);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("run after restart: %s", c->error);
    assert_string_equal(fx_stdout(c), "after\n");
    assert_non_null(strstr(c->notice, "recreated"));
    assert_string_not_equal(c->session->sandbox_id, old_id);
    assert_string_equal(c->session->session_id, h->session_id);
    /* The container the restart stopped was removed, not left behind. */
    assert_null(dt_container_inspect(&f->env, old_id));

    sbx_request *d = fx_destroy(c->session);
    sbx_completion *dc = sbx_engine_process(e, d, NULL);
    assert_int_equal(dc->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(dc);
    sbx_request_free(d);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_message_free(&h->base);
    free(old_id);
    sbx_engine_free(e);
    fx_config_free(cfg);
}

static void test_docker_restart_attached_session_is_gone_not_recreated(void **state)
{
    fixture *f = *state;
    const char *argv[] = {"sleep", "600", NULL};
    char *id = dt_container_run(&f->env, f->env.image_busybox, argv);
    sbx_config *cfg = docker_config(f, SBX_ENV_ATTACHED, id);
    cfg->profiles[0].policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_UNSPECIFIED;
    sbx_engine *e = fx_engine(cfg);

    sbx_request *r = fx_shell("d", "echo before");
    sbx_completion *c = sbx_engine_process(e, r, NULL);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("first run: %s", c->error);
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    sbx_request_free(r);

    script(f, "restart");

    r = fx_shell("d", "echo after");
    fx_session(r, h);
    c = sbx_engine_process(e, r, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_GONE);
    /* The container is stopped, not removed: it is not ours. */
    json_t *j = dt_container_inspect(&f->env, id);
    assert_non_null(j);
    json_decref(j);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_message_free(&h->base);
    sbx_engine_free(e);
    fx_config_free(cfg);
    dt_container_remove(&f->env, id);
    free(id);
}

typedef struct exec_arg {
    sbx_engine *e;
    sbx_request *r;
    sbx_completion *c;
} exec_arg;

static void *exec_main(void *p)
{
    exec_arg *a = p;
    a->c = sbx_engine_process(a->e, a->r, NULL);
    return NULL;
}

/* True once the container's PID 1 (the agent) has a child: the program runs. */
static bool program_runs(fixture *f, const char *id)
{
    json_t *j = dt_container_inspect(&f->env, id);
    if (j == NULL)
        return false;
    long pid = (long)json_integer_value(json_object_get(json_object_get(j, "State"), "Pid"));
    json_decref(j);
    char path[128], buf[64];
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", pid, pid);
    FILE *ch = pid > 1 ? fopen(path, "r") : NULL;
    bool runs = ch != NULL && fread(buf, 1, sizeof(buf), ch) > 0;
    if (ch != NULL)
        fclose(ch);
    return runs;
}

static void test_docker_restart_mid_exec_is_a_failure_not_signal_15(void **state)
{
    fixture *f = *state;
    if (dt_agent_path() == NULL)
        skip();
    sbx_config *cfg = docker_config(f, SBX_ENV_MANAGED, NULL);
    sbx_engine *e = fx_engine(cfg);
    sbx_request *r = fx_shell("d", "true");
    sbx_completion *c = sbx_engine_process(e, r, NULL);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("first run: %s", c->error);
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    sbx_request_free(r);

    exec_arg a = {.e = e, .r = fx_shell("d", "sleep 60")};
    fx_session(a.r, h);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, exec_main, &a), 0);
    bool runs = false;
    for (int i = 0; i < 3000 && !runs; i++) {
        usleep(20000);
        runs = program_runs(f, h->sandbox_id);
    }
    assert_true(runs);
    script(f, "restart"); /* the daemon stops the container (SIGTERM to its PID 1) */
    pthread_join(t, NULL);
    c = a.c;
    assert_non_null(c);
    /* the machinery's failure, not the program's answer */
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_true(c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_PROVISION ||
                c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_GONE);
    assert_true(c->result == NULL || c->result->signal == 0);
    sbx_completion_free(c);
    sbx_request_free(a.r);

    sbx_request *d = fx_destroy(h);
    sbx_completion *dc = sbx_engine_process(e, d, NULL);
    assert_int_equal(dc->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(dc);
    sbx_request_free(d);
    sbx_message_free(&h->base);
    sbx_engine_free(e);
    fx_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_restart_managed_session_self_heals_into_a_new_container),
        cmocka_unit_test(test_docker_restart_attached_session_is_gone_not_recreated),
        cmocka_unit_test(test_docker_restart_mid_exec_is_a_failure_not_signal_15),
    };
    /* One private daemon for all (each test restarts it once). */
    return cmocka_run_group_tests(tests, setup, teardown);
}
