/* test_local_snapshot.c - workspace snapshots through the engine on the local provider: a
 * snapshot keeps the workspace as it was (files, directories, modes, bytes over several 4 MiB
 * chunks) and a new session from it starts with exactly that (a fork; the original goes on
 * unchanged); snapshots are the principal's own (another cannot list, use, delete or take one of
 * a session it does not own); past snapshot_max_mb nothing is kept; names are checked; a
 * from_snapshot never lands in a session that already has a sandbox; an unknown snapshot creates
 * no sandbox.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/fixture.h"
#include "sbx/engine.h"

/* Generous per-request limit (2 shared cores; ASan slows the host side). */
#define LS_TIMEOUT_MS 120000

typedef struct ls {
    sbx_config *cfg;
    sbx_engine *e;
} ls;

static int setup(void **state)
{
    ls *f = calloc(1, sizeof(*f));
    f->cfg = fx_config_new();
    sbx_profile_config *p = fx_add_profile(f->cfg, "l", "local");
    p->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->policy->timeout_ms = LS_TIMEOUT_MS;
    f->e = fx_engine(f->cfg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    ls *f = *state;
    sbx_engine_free(f->e);
    fx_config_free(f->cfg);
    free(f);
    return 0;
}

static bool succeeded(const sbx_completion *c)
{
    return c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED;
}

static sbx_completion *submit(ls *f, sbx_request *r)
{
    sbx_completion *c = sbx_engine_process(f->e, r, NULL);
    sbx_request_free(r);
    assert_non_null(c);
    return c;
}

/* A shell line in session h (NULL: a new one), as subject (NULL: the fixture's), from snapshot
 * `from` (NULL: none). */
static sbx_completion *run_in(ls *f, const sbx_session_handle *h, const char *line,
                              const char *subject, const char *from)
{
    sbx_request *r = fx_shell("l", line);
    if (h != NULL)
        fx_session(r, h);
    if (subject != NULL)
        fx_subject(r, subject);
    if (from != NULL)
        sbx_set_string(&r->from_snapshot, from);
    return submit(f, r);
}

static sbx_session_handle *session_with(ls *f, const char *line)
{
    sbx_completion *c = run_in(f, NULL, line, NULL, NULL);
    if (!succeeded(c) || c->result->exit_code != 0)
        fail_msg("create: %s %.*s", c->error, (int)c->result->stderr.len,
                 (const char *)c->result->stderr.data);
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    return h;
}

/* An op request with no session (list, delete) or on session h (snapshot). */
static sbx_request *snapshot_req(const sbx_session_handle *h, const char *name, const char *subject)
{
    sbx_request *r = fx_shell("l", "true");
    sbx_message_free((ProtobufCMessage *)r->run_command);
    r->run_command = NULL;
    r->snapshot = malloc(sizeof(*r->snapshot));
    sbx__v1__snapshot_workspace__init(r->snapshot);
    sbx_set_string(&r->snapshot->name, name);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT;
    if (h != NULL)
        fx_session(r, h);
    if (subject != NULL)
        fx_subject(r, subject);
    return r;
}

static sbx_request *list_req(const char *subject)
{
    sbx_request *r = fx_shell("l", "true");
    sbx_message_free((ProtobufCMessage *)r->run_command);
    r->run_command = NULL;
    r->list_snapshots = malloc(sizeof(*r->list_snapshots));
    sbx__v1__list_snapshots__init(r->list_snapshots);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_LIST_SNAPSHOTS;
    if (subject != NULL)
        fx_subject(r, subject);
    return r;
}

static sbx_request *delete_req(const char *name, const char *subject)
{
    sbx_request *r = fx_shell("l", "true");
    sbx_message_free((ProtobufCMessage *)r->run_command);
    r->run_command = NULL;
    r->delete_snapshot = malloc(sizeof(*r->delete_snapshot));
    sbx__v1__delete_snapshot__init(r->delete_snapshot);
    sbx_set_string(&r->delete_snapshot->name, name);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DELETE_SNAPSHOT;
    if (subject != NULL)
        fx_subject(r, subject);
    return r;
}

static void expect_code(sbx_completion *c, sbx_status code, const char *needle)
{
    if (succeeded(c) || c->error_code != (Sbx__V1__ErrorCode)code)
        fail_msg("expected %s, got status %d %s: %s", sbx_status_name(code), c->status,
                 sbx_status_name((sbx_status)c->error_code), c->error);
    if (needle != NULL && strstr(c->error, needle) == NULL)
        fail_msg("error does not say '%s': %s", needle, c->error);
    sbx_completion_free(c);
}

static void destroy(ls *f, sbx_session_handle *h)
{
    sbx_completion *c = submit(f, fx_destroy(h));
    sbx_completion_free(c);
    sbx_message_free(&h->base);
}

/* Names of the subject's snapshots, "a,b," (sorted by the engine). */
static void names_of(ls *f, const char *subject, char *out, size_t cap)
{
    sbx_completion *c = submit(f, list_req(subject));
    assert_true(succeeded(c));
    out[0] = '\0';
    for (size_t i = 0; i < c->result->n_snapshots; i++) {
        strncat(out, c->result->snapshots[i]->name, cap - strlen(out) - 2);
        strcat(out, ",");
    }
    sbx_completion_free(c);
}

/* Files whose names start with '.' in the store: temp files a failure must not leave. */
static int store_temps(const ls *f)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "find '%s' -name '.tmp-*' 2>/dev/null | grep -q .",
             f->cfg->snapshot_dir);
    return system(cmd) == 0 ? 1 : 0;
}

/* The workspace: a tree, an executable, and 9 MiB of random bytes (three chunks). */
#define WORKSPACE                                                                                  \
    "mkdir -p src/deep && echo one > src/deep/a.txt && printf '#!/bin/sh\\necho ran\\n' > "        \
    "run.sh && chmod 755 run.sh && head -c 9437184 /dev/urandom > blob && sha256sum blob > sum"
#define CHECK "cat src/deep/a.txt && ./run.sh && sha256sum -c sum >/dev/null && echo same"

static void test_snapshot_forks_the_workspace(void **state)
{
    ls *f = *state;
    sbx_session_handle *a = session_with(f, WORKSPACE);
    sbx_completion *c = submit(f, snapshot_req(a, "base", NULL));
    if (!succeeded(c))
        fail_msg("snapshot: %s", c->error);
    assert_int_equal(c->result->n_snapshots, 1);
    assert_string_equal(c->result->snapshots[0]->name, "base");
    assert_true(c->result->snapshots[0]->size > 9437184);
    assert_true(c->result->snapshots[0]->created_at_ms > 0);
    sbx_completion_free(c);
    /* the original changes afterwards; the fork must not see it */
    sbx_completion_free(run_in(f, a, "echo changed > src/deep/a.txt", NULL, NULL));

    c = run_in(f, NULL, CHECK, NULL, "base");
    if (!succeeded(c))
        fail_msg("fork: %s", c->error);
    assert_string_equal(fx_stdout(c), "one\nran\nsame\n");
    sbx_session_handle *b = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    assert_string_not_equal(b->sandbox_id, a->sandbox_id);
    sbx_completion_free(c);
    /* nothing of the copy is left in the fork's /tmp */
    c = run_in(f, b, "ls -A /tmp | grep -c sbx-snapshot || true", NULL, NULL);
    assert_string_equal(fx_stdout(c), "0\n");
    sbx_completion_free(c);
    c = run_in(f, a, "cat src/deep/a.txt", NULL, NULL);
    assert_string_equal(fx_stdout(c), "changed\n");
    sbx_completion_free(c);

    /* the name is taken now; the snapshot is listed once */
    expect_code(submit(f, snapshot_req(a, "base", NULL)), SBX_E_INVALID_ARGUMENT, "exists");
    char names[256];
    names_of(f, NULL, names, sizeof names);
    assert_string_equal(names, "base,");
    sbx_completion_free(submit(f, delete_req("base", NULL)));
    names_of(f, NULL, names, sizeof names);
    assert_string_equal(names, "");
    destroy(f, a);
    destroy(f, b);
}

static void test_snapshots_are_the_principals_own(void **state)
{
    ls *f = *state;
    sbx_session_handle *a = session_with(f, "echo mine > secret.txt");
    sbx_completion *c = submit(f, snapshot_req(a, "private", NULL));
    assert_true(succeeded(c));
    sbx_completion_free(c);

    char names[256];
    names_of(f, "mallory", names, sizeof names);
    assert_string_equal(names, "");
    c = run_in(f, NULL, "cat secret.txt", "mallory", "private");
    assert_false(succeeded(c));
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_INVALID_ARGUMENT);
    assert_null(strstr(c->error, f->cfg->snapshot_dir)); /* no host path in the answer */
    assert_true(c->session == NULL || c->session->sandbox_id[0] == '\0');
    sbx_completion_free(c);
    expect_code(submit(f, delete_req("private", "mallory")), SBX_E_GONE, NULL);
    /* nor can another principal snapshot a session it does not own */
    expect_code(submit(f, snapshot_req(a, "stolen", "mallory")), SBX_E_PERMISSION_DENIED,
                "not bound");
    names_of(f, NULL, names, sizeof names);
    assert_string_equal(names, "private,");
    names_of(f, "mallory", names, sizeof names);
    assert_string_equal(names, "");
    sbx_completion_free(submit(f, delete_req("private", NULL)));
    destroy(f, a);
}

static void test_snapshot_past_the_limit_keeps_nothing(void **state)
{
    ls *f = *state;
    sbx_session_handle *a = session_with(f, "head -c 3145728 /dev/urandom > big");
    int64_t saved = f->cfg->snapshot_max_mb;
    f->cfg->snapshot_max_mb = 2;
    expect_code(submit(f, snapshot_req(a, "huge", NULL)), SBX_E_RESOURCE_EXHAUSTED,
                "snapshot_max_mb");
    f->cfg->snapshot_max_mb = saved;
    char names[256];
    names_of(f, NULL, names, sizeof names);
    assert_string_equal(names, "");
    assert_int_equal(store_temps(f), 0);
    sbx_completion *c = run_in(f, a, "ls -A /tmp | grep -c sbx-snapshot || true", NULL, NULL);
    assert_string_equal(fx_stdout(c), "0\n");
    sbx_completion_free(c);
    destroy(f, a);
}

static void test_snapshot_requests_are_checked(void **state)
{
    ls *f = *state;
    sbx_session_handle *a = session_with(f, "true");
    static const char *const bad[] = {
        "../x",
        ".hidden",
        "a/b",
        "",
        "sp ace",
        "x123456789012345678901234567890123456789012345678901234567890"
        "12345"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_code(submit(f, snapshot_req(a, bad[i], NULL)), SBX_E_INVALID_ARGUMENT,
                    "not a snapshot name");
    expect_code(submit(f, delete_req("../../etc", NULL)), SBX_E_INVALID_ARGUMENT, NULL);
    /* a session that already has a sandbox is never overwritten by a snapshot */
    sbx_completion *c = submit(f, snapshot_req(a, "s", NULL));
    assert_true(succeeded(c));
    sbx_completion_free(c);
    expect_code(run_in(f, a, "true", NULL, "s"), SBX_E_INVALID_ARGUMENT, "already has one");
    /* a snapshot needs a session with a sandbox */
    expect_code(submit(f, snapshot_req(NULL, "t", NULL)), SBX_E_INVALID_ARGUMENT, "has a sandbox");
    /* an unknown snapshot creates nothing */
    c = run_in(f, NULL, "true", NULL, "nope");
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_INVALID_ARGUMENT);
    assert_non_null(strstr(c->error, "no snapshot named 'nope'"));
    sbx_completion_free(c);
    sbx_completion_free(submit(f, delete_req("s", NULL)));
    destroy(f, a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_snapshot_forks_the_workspace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshots_are_the_principals_own, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_past_the_limit_keeps_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_requests_are_checked, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
