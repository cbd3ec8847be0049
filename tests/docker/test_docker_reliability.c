/* test_docker_reliability.c - managed docker sandboxes through the engine: per_call containers
 * are removed by the engine whichever broker carried the call, a container whose owner was
 * killed mid-exec stops at once (its agent ends with its owner's connection) and is removed by
 * the sweep (and reported), and a stopped agent in a running
 * container is a timeout, never a reason to create a second container. A snapshot of a
 * container's workspace forks into a new container and into a local sandbox alike.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "docker_test.h"
#include "engine/fixture.h"
#include "sbx/engine.h"
#include "support/die_with_parent.h"

/* per_call executes that must leave no container (containers are slow to make: fewer than the
 * local provider's 100). */
#define DR_PER_CALL 10
#define DR_TIMEOUT_MS 120000

typedef struct fixture {
    dt_env env;
    sbx_config *cfg;
    sbx_engine *e;
    char profile[64]; /* unique per test process, so counting never sees other tests' boxes */
} fixture;

static int setup(void **state)
{
    *state = NULL;
    if (dt_agent_path() == NULL)
        return 0; /* tests skip */
    fixture *f = calloc(1, sizeof(*f));
    dt_env_load(&f->env);
    f->cfg = fx_config_new();
    snprintf(f->profile, sizeof(f->profile), "reliab%ld", (long)getpid());
    for (int i = 0; i < 2; i++) {
        char name[80];
        snprintf(name, sizeof(name), "%s%s", f->profile, i == 0 ? "" : "once");
        sbx_profile_config *p = fx_add_profile(f->cfg, name, "docker");
        p->scope = i == 0 ? SBX_SCOPE_PER_SESSION : SBX_SCOPE_PER_CALL;
        p->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
        p->policy->timeout_ms = DR_TIMEOUT_MS;
        fx_opt(p, "socket", f->env.socket);
        fx_opt(p, "image", f->env.image_busybox);
        fx_opt(p, "agent", dt_agent_path());
    }
    char local[80];
    snprintf(local, sizeof(local), "%slocal", f->profile);
    sbx_profile_config *p = fx_add_profile(f->cfg, local, "local");
    p->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->policy->timeout_ms = DR_TIMEOUT_MS;
    f->e = fx_engine(f->cfg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f == NULL)
        return 0;
    sbx_engine_free(f->e);
    fx_config_free(f->cfg);
    dt_env_free(&f->env);
    free(f);
    return 0;
}

/* Containers of profile name in state (Docker's State: "running", "exited"...; NULL: any). */
static size_t containers_in(fixture *f, const char *name, const char *state)
{
    char path[512];
    /* {"label":["sbx.profile=NAME"]}, URL-encoded */
    snprintf(path, sizeof(path),
             "/containers/json?all=1&filters=%%7B%%22label%%22%%3A%%5B%%22sbx.profile%%3D%s%%22%%"
             "5D%%7D",
             name);
    json_t *list = NULL;
    long status = 0;
    sbx_error err;
    assert_int_equal(docker_api_json(&f->env.api, "GET", path, NULL, &status, &list, &err), SBX_OK);
    assert_int_equal(status, 200);
    size_t n = 0, i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        const char *s = json_string_value(json_object_get(c, "State"));
        n += state == NULL || (s != NULL && strcmp(s, state) == 0);
    }
    json_decref(list);
    return n;
}

/* Containers (any state) of profile name. */
static size_t containers(fixture *f, const char *name)
{
    return containers_in(f, name, NULL);
}

static char *once(const fixture *f)
{
    static char name[80];
    snprintf(name, sizeof(name), "%sonce", f->profile);
    return name;
}

/* line in profile, for principal subject (NULL: the fixture's). */
static sbx_completion *run_as(fixture *f, const char *subject, const char *profile,
                              const sbx_session_handle *h, const char *line)
{
    sbx_request *r = fx_shell(profile, line);
    if (subject != NULL)
        fx_subject(r, subject);
    if (h != NULL)
        fx_session(r, h);
    sbx_completion *c = sbx_engine_process(f->e, r, NULL);
    sbx_request_free(r);
    assert_non_null(c);
    return c;
}

static sbx_completion *run_in(fixture *f, const char *profile, const sbx_session_handle *h,
                              const char *line)
{
    return run_as(f, NULL, profile, h, line);
}

static sbx_session_handle *handle_of(sbx_completion *c)
{
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("%s", c->error);
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    return h;
}

static void destroy(fixture *f, sbx_session_handle *h)
{
    sbx_request *r = fx_destroy(h);
    sbx_completion_free(sbx_engine_process(f->e, r, NULL));
    sbx_request_free(r);
    sbx_message_free(&h->base);
}

/* Snapshot of a container's workspace (busybox's tar, 5 MiB: two chunks), forked into a new
 * container and into a local sandbox: the same files and bytes in both. */
static void test_docker_snapshot_forks_into_docker_and_local(void **state)
{
    fixture *f = *state;
    if (f == NULL)
        skip();
    sbx_session_handle *a =
        handle_of(run_in(f, f->profile, NULL,
                         "mkdir -p d && echo hi > d/f && head -c 5242880 /dev/urandom > blob && "
                         "sha256sum blob > sum"));
    sbx_request *r = fx_shell(f->profile, "true");
    sbx_message_free((ProtobufCMessage *)r->run_command);
    r->run_command = NULL;
    r->snapshot = malloc(sizeof(*r->snapshot));
    sbx__v1__snapshot_workspace__init(r->snapshot);
    sbx_set_string(&r->snapshot->name, "dk");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT;
    fx_session(r, a);
    sbx_completion *c = sbx_engine_process(f->e, r, NULL);
    sbx_request_free(r);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("snapshot: %s", c->error);
    assert_true(c->result->n_snapshots == 1 && c->result->snapshots[0]->size > 5242880);
    sbx_completion_free(c);
    char local[80];
    snprintf(local, sizeof(local), "%slocal", f->profile);
    const char *profiles[] = {f->profile, local};
    for (int i = 0; i < 2; i++) {
        r = fx_shell(profiles[i], "cat d/f && sha256sum -c sum >/dev/null && echo same");
        sbx_set_string(&r->from_snapshot, "dk");
        c = sbx_engine_process(f->e, r, NULL);
        sbx_request_free(r);
        if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
            fail_msg("fork into %s: %s", profiles[i], c->error);
        assert_string_equal(fx_stdout(c), "hi\nsame\n");
        destroy(f, handle_of(c));
    }
    destroy(f, a);
}

static void test_docker_per_call_executes_leave_no_container(void **state)
{
    fixture *f = *state;
    if (f == NULL)
        skip();
    for (int i = 0; i < DR_PER_CALL; i++) {
        sbx_completion *c = run_in(f, once(f), NULL, "echo once");
        if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
            fail_msg("per_call %d: %s", i, c->error);
        assert_string_equal(fx_stdout(c), "once\n");
        assert_string_equal(c->session->sandbox_id, "");
        sbx_completion_free(c);
        assert_int_equal(containers(f, once(f)), 0);
    }
}

static void test_docker_owner_killed_mid_exec_ends_its_container(void **state)
{
    fixture *f = *state;
    if (f == NULL)
        skip();
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t parent = getpid();
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        close(ready[0]);
        sbx_engine *e = fx_engine(f->cfg);
        sbx_request *r = fx_shell(once(f), "sleep 120");
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        sbx_completion *c = sbx_engine_process(e, r, NULL);
        (void)c;
        _exit(0);
    }
    close(ready[1]);
    char x;
    assert_int_equal(read(ready[0], &x, 1), 1);
    close(ready[0]);
    /* wait until its container is up (created and started by the child) */
    for (int i = 0; i < 6000 && containers(f, once(f)) == 0; i++)
        usleep(20000);
    assert_int_equal(containers(f, once(f)), 1);
    usleep(500 * 1000);
    kill(child, SIGKILL);
    int ws;
    waitpid(child, &ws, 0);
    /* Nobody destroyed it, but its agent saw its owner's connection close and ended its
     * programs: the container stops at once (before: `sleep 120` ran on, the container
     * "running" until a sweep). */
    for (int i = 0; i < 500 && containers_in(f, once(f), "running") != 0; i++)
        usleep(20000);
    if (containers_in(f, once(f), "running") != 0)
        fail_msg("the orphaned per_call container is still running 10 s after its owner died");
    assert_int_equal(containers(f, once(f)), 1); /* stopped, left for the sweep to remove */

    sbx_strlist removed = {0};
    sbx_error err;
    assert_int_equal(sbx_engine_sweep(f->e, &removed, &err), SBX_OK);
    assert_int_equal(removed.n, 1);
    assert_non_null(strstr(removed.items[0], once(f)));
    sbx_strlist_clear(&removed);
    assert_int_equal(containers(f, once(f)), 0);
}

static void test_docker_stopped_agent_is_a_timeout_and_nothing_is_recreated(void **state)
{
    fixture *f = *state;
    if (f == NULL)
        skip();
    sbx_completion *c = run_in(f, f->profile, NULL, "true");
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("create: %s", c->error);
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    json_t *j = dt_container_inspect(&f->env, h->sandbox_id);
    assert_non_null(j);
    long pid = (long)json_integer_value(json_object_get(json_object_get(j, "State"), "Pid"));
    json_decref(j);
    assert_true(pid > 1);
    assert_int_equal(kill((pid_t)pid, SIGSTOP), 0);

    sbx_request *r = fx_shell(f->profile, "echo hi");
    fx_session(r, h);
    r->policy = sbx_policy_new();
    r->policy->timeout_ms = 3000;
    c = sbx_engine_process(f->e, r, NULL);
    sbx_request_free(r);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_TIMEOUT);
    assert_null(strstr(c->notice, "recreated"));
    sbx_completion_free(c);
    assert_int_equal(containers(f, f->profile), 1);

    assert_int_equal(kill((pid_t)pid, SIGCONT), 0);
    c = run_in(f, f->profile, h, "echo back");
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("after SIGCONT: %s", c->error);
    assert_string_equal(fx_stdout(c), "back\n");
    assert_string_equal(c->session->sandbox_id, h->sandbox_id);
    sbx_completion_free(c);

    /* a live per_session container survives a sweep */
    sbx_strlist removed = {0};
    sbx_error err;
    assert_int_equal(sbx_engine_sweep(f->e, &removed, &err), SBX_OK);
    assert_int_equal(removed.n, 0);
    sbx_strlist_clear(&removed);

    sbx_request *d = fx_destroy(h);
    c = sbx_engine_process(f->e, d, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
    sbx_request_free(d);
    assert_int_equal(containers(f, f->profile), 0);
    sbx_message_free(&h->base);
}

/* A session of the per_session profile made, or refused, for principal subject. */
static sbx_completion *made_for(fixture *f, const char *subject, const sbx_session_handle *h)
{
    return run_as(f, subject, f->profile, h, "true");
}

static void destroy_for(fixture *f, const char *subject, sbx_session_handle *h)
{
    sbx_request *r = fx_destroy(h);
    fx_subject(r, subject);
    sbx_completion *c = sbx_engine_process(f->e, r, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_message_free(&h->base);
}

/* sandbox.principal_sandboxes across a restart of the engine (a worker): the container a
 * principal made through the first engine still counts in the next, which finds it by its
 * labels (sbx.owner) when it opens the profile. Before, the new engine counted from zero. */
static void test_docker_principal_sandboxes_count_what_a_restarted_engine_finds(void **state)
{
    fixture *f = *state;
    if (f == NULL)
        skip();
    sbx_engine_free(f->e);
    f->cfg->principal_sandboxes = 1;
    f->e = fx_engine(f->cfg);
    sbx_session_handle *held = handle_of(made_for(f, "tenant-a", NULL));
    sbx_engine_free(f->e); /* the worker restarts; the container lives on */
    f->e = fx_engine(f->cfg);
    sbx_completion *c = made_for(f, "tenant-a", NULL);
    assert_int_equal(c->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(c->error, "principal 'tenant-a' holds 1 sandbox of per_session"));
    sbx_completion_free(c);
    assert_int_equal(containers(f, f->profile), 1);
    destroy_for(f, "tenant-a", held); /* through the new engine: its place is free */
    held = handle_of(made_for(f, "tenant-a", NULL));
    destroy_for(f, "tenant-a", held);
    assert_int_equal(containers(f, f->profile), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_docker_snapshot_forks_into_docker_and_local, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_docker_per_call_executes_leave_no_container, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_docker_owner_killed_mid_exec_ends_its_container, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_docker_stopped_agent_is_a_timeout_and_nothing_is_recreated, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_docker_principal_sandboxes_count_what_a_restarted_engine_finds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
