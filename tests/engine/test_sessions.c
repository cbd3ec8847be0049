/* test_sessions.c - session scopes on the client side (client/sessions.c): per_call destroys in
 * every case, per_session never invents a session, per_runtime shares one, idle reset notices
 * (managed and attached), and the persistent handle store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "engine/fixture.h"
#include "providers/fake/fake.h"
#include "sbx/broker.h"
#include "sbx/sessions.h"

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED

typedef struct env {
    sbx_config *cfg;
    sbx_engine *e;
    sbx_broker *b;
    sbx_sessions *s;
    char store[512];
} env;

static int setup(void **state)
{
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    fx_add_profile(t->cfg, "default", "fake");
    fx_add_profile(t->cfg, "oneshot", "fake")->scope = SBX_SCOPE_PER_CALL;
    fx_add_profile(t->cfg, "shared", "fake")->scope = SBX_SCOPE_PER_RUNTIME;
    fx_add_profile(t->cfg, "idle", "fake")->idle_timeout_s = 1;
    sbx_profile_config *keep = fx_add_profile(t->cfg, "idlepause", "fake");
    keep->idle_timeout_s = 1;
    keep->idle_pause = true;
    sbx_profile_config *att = fx_add_profile(t->cfg, "ext", "fake");
    att->environment = SBX_ENV_ATTACHED;
    att->attach_to = strdup("external-7");
    att->idle_timeout_s = 1;
    t->e = fx_engine(t->cfg);
    assert_int_equal(sbx_broker_open_embedded(t->e, &t->b, NULL), SBX_OK);
    snprintf(t->store, sizeof(t->store), "%s/state/sbx/sessions", fx_tmpdir(t->cfg));
    assert_int_equal(sbx_sessions_open(t->cfg, t->b, t->store, &t->s, NULL), SBX_OK);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    env *t = *state;
    sbx_sessions_free(t->s);
    sbx_broker_free(t->b);
    sbx_engine_free(t->e);
    fx_config_free(t->cfg);
    free(t);
    return 0;
}

static sbx_completion *exec_in(env *t, const char *profile, const char *session, const char *line)
{
    sbx_request *r = fx_shell(profile, line);
    sbx_completion *c = NULL;
    sbx_sessions_execute(t->s, r, session, SBX_WAIT_FOREVER, &c, NULL);
    sbx_request_free(r);
    assert_non_null(c);
    return c;
}

static void test_sessions_per_call_destroys_after_success(void **state)
{
    env *t = *state;
    sbx_completion *c = exec_in(t, "oneshot", NULL, "echo hi");
    assert_int_equal(c->status, OK_STATUS);
    sbx_fake *f = sbx_fake_get("oneshot");
    assert_int_equal(sbx_fake_created_count(f), 1);
    assert_int_equal(sbx_fake_destroyed_count(f), 1);
    assert_true(sbx_fake_was_destroyed(f, "fk-1"));
    sbx_completion_free(c);
}

static void test_sessions_per_call_destroys_after_program_failure(void **state)
{
    env *t = *state;
    sbx_completion *c = exec_in(t, "oneshot", NULL, "exit 9");
    assert_int_equal(c->result->exit_code, 9);
    assert_true(sbx_fake_was_destroyed(sbx_fake_get("oneshot"), "fk-1"));
    sbx_completion_free(c);
}

static void test_sessions_per_call_destroys_after_machinery_failure(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("oneshot", "sleep 60000");
    r->policy = sbx_policy_new();
    r->policy->timeout_ms = 30;
    sbx_completion *c = NULL;
    sbx_sessions_execute(t->s, r, NULL, 0, &c, NULL);
    sbx_request_free(r);
    assert_non_null(c); /* per_call waits whatever wait_ms says */
    assert_int_equal(c->error_code, SBX_E_TIMEOUT);
    assert_true(sbx_fake_was_destroyed(sbx_fake_get("oneshot"), "fk-1"));
    sbx_completion_free(c);
}

/* The engine's destroy of a per_call sandbox failed: the sessions layer tries once more and
 * says how that went, after the engine's own notice. */
static void test_sessions_per_call_destroy_that_failed_is_tried_again(void **state)
{
    env *t = *state;
    sbx_completion *warm = exec_in(t, "oneshot", NULL, "true"); /* opens the provider: fk-1 */
    sbx_fake *f = sbx_fake_get("oneshot");
    sbx_fake_fail_destroys(f, 1); /* the engine's destroy of fk-2 fails, the second succeeds */
    sbx_completion *c = exec_in(t, "oneshot", NULL, "echo hi");
    assert_int_equal(c->status, OK_STATUS);
    assert_false(sbx_fake_alive(f, "fk-2"));
    assert_non_null(c->notice);
    assert_non_null(strstr(c->notice, "per_call sandbox fk-2 could not be destroyed: fake: "
                                      "destroy of 'fk-2' failed (fault injected); per_call "
                                      "sandbox fk-2 was destroyed on a second attempt"));
    sbx_fake_fail_destroys(f, 2); /* both fail: fk-3 lives on, and the notice says so twice */
    sbx_completion *c2 = exec_in(t, "oneshot", NULL, "echo hi");
    assert_int_equal(c2->status, OK_STATUS);
    assert_true(sbx_fake_alive(f, "fk-3"));
    assert_non_null(c2->notice);
    assert_non_null(strstr(c2->notice, "per_call sandbox fk-3 could not be destroyed: fake: "
                                       "destroy of 'fk-3' failed (fault injected); a second "
                                       "attempt to destroy it failed too: "));
    sbx_completion_free(warm);
    sbx_completion_free(c);
    sbx_completion_free(c2);
}

static void test_sessions_per_call_sandboxes_are_fresh_each_time(void **state)
{
    env *t = *state;
    sbx_completion *c1 = exec_in(t, "oneshot", NULL, "echo a");
    sbx_completion *c2 = exec_in(t, "oneshot", NULL, "echo b");
    assert_string_not_equal(c1->session->session_id, c2->session->session_id);
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("oneshot")), 2);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_sessions_unknown_id_is_not_found_and_creates_nothing(void **state)
{
    env *t = *state;
    sbx_completion *c = exec_in(t, "default", "no-such-session", "echo x");
    assert_int_equal(c->error_code, SBX_E_SESSION_NOT_FOUND);
    assert_null(sbx_fake_get("default"));
    sbx_completion_free(c);
}

static void test_sessions_created_session_keeps_its_sandbox(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    assert_int_equal(sbx_sessions_create(t->s, "default", "work", &h, NULL), SBX_OK);
    sbx_completion *c1 = exec_in(t, "", h->session_id, "echo one");
    sbx_completion *c2 = exec_in(t, "", "work", "echo two"); /* by name */
    assert_int_equal(c2->status, OK_STATUS);
    assert_string_equal(c1->session->sandbox_id, c2->session->sandbox_id);
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("default")), 1);
    sbx_message_free(&h->base);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_sessions_session_never_moves_to_another_profile(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    assert_int_equal(sbx_sessions_create(t->s, "default", NULL, &h, NULL), SBX_OK);
    sbx_completion *c = exec_in(t, "idle", h->session_id, "echo x");
    assert_int_equal(c->error_code, SBX_E_CONFIG);
    assert_non_null(strstr(c->error, "belongs to profile 'default'"));
    sbx_message_free(&h->base);
    sbx_completion_free(c);
}

static void test_sessions_create_refuses_per_call_profile(void **state)
{
    env *t = *state;
    sbx_error err;
    assert_int_equal(sbx_sessions_create(t->s, "oneshot", NULL, NULL, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "per_call"));
}

static void test_sessions_per_runtime_shares_one_sandbox(void **state)
{
    env *t = *state;
    sbx_completion *c1 = exec_in(t, "shared", NULL, "echo a");
    sbx_completion *c2 = exec_in(t, "shared", NULL, "echo b");
    assert_string_equal(c1->session->session_id, "runtime:shared");
    assert_string_equal(c1->session->sandbox_id, c2->session->sandbox_id);
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("shared")), 1);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

/* Ages a stored session past its idle timeout without waiting. */
static void age(env *t, const char *id)
{
    sbx_session_handle *h = sbx_sessions_get(t->s, id);
    assert_non_null(h);
    h->last_used_at_ms -= 10000;
    assert_int_equal(sbx_sessions_put(t->s, h, NULL), SBX_OK);
    sbx_message_free(&h->base);
}

static void test_sessions_idle_managed_session_is_reset_with_notice(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    assert_int_equal(sbx_sessions_create(t->s, "idle", NULL, &h, NULL), SBX_OK);
    sbx_completion *c1 = exec_in(t, "", h->session_id, "echo one");
    age(t, h->session_id);
    sbx_completion *c2 = exec_in(t, "", h->session_id, "echo two");
    assert_int_equal(c2->status, OK_STATUS);
    char want[256];
    snprintf(want, sizeof(want),
             "sandbox session '%s' was idle for more than 1s and has been reset; its previous "
             "workspace state was discarded",
             h->session_id);
    assert_string_equal(c2->notice, want);
    sbx_fake *f = sbx_fake_get("idle");
    assert_true(sbx_fake_was_destroyed(f, c1->session->sandbox_id));
    assert_string_not_equal(c2->session->sandbox_id, c1->session->sandbox_id);
    sbx_message_free(&h->base);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

/* An idle session used by another principal (the store is one per OS account, sessions are
 * found by name) is refused and left to its owner. Before: the other's failed destroy cleared
 * the handle, it got a new sandbox under the name, and the owner was refused its own session. */
static void test_sessions_idle_session_of_another_principal_stays_its_owners(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    assert_int_equal(sbx_sessions_create(t->s, "idle", NULL, &h, NULL), SBX_OK);
    sbx_request *r = fx_shell("", "echo mine");
    fx_subject(r, "tenant-b");
    sbx_completion *c = NULL;
    sbx_sessions_execute(t->s, r, h->session_id, SBX_WAIT_FOREVER, &c, NULL);
    assert_int_equal(c->status, OK_STATUS);
    sbx_completion_free(c);
    sbx_request_free(r);
    age(t, h->session_id);
    r = fx_shell("", "echo theirs");
    fx_subject(r, "tenant-a");
    c = NULL;
    sbx_sessions_execute(t->s, r, h->session_id, SBX_WAIT_FOREVER, &c, NULL);
    assert_int_equal(c->error_code, SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(c->error, "not yours"));
    sbx_completion_free(c);
    sbx_request_free(r);
    r = fx_shell("", "echo mine again");
    fx_subject(r, "tenant-b");
    c = NULL;
    sbx_sessions_execute(t->s, r, h->session_id, SBX_WAIT_FOREVER, &c, NULL);
    assert_int_equal(c->status, OK_STATUS);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_message_free(&h->base);
}

/* idle_action: pause: an idle session is never reset on its next use (the engine pauses it
 * instead and that use resumes it): the same sandbox, its workspace, no reset notice. */
static void test_sessions_idle_pause_profile_is_not_reset(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    assert_int_equal(sbx_sessions_create(t->s, "idlepause", NULL, &h, NULL), SBX_OK);
    sbx_completion *c1 = exec_in(t, "", h->session_id, "echo one");
    assert_int_equal(c1->status, OK_STATUS);
    age(t, h->session_id);
    sbx_completion *c2 = exec_in(t, "", h->session_id, "echo two");
    assert_int_equal(c2->status, OK_STATUS);
    assert_true(c2->notice == NULL || strstr(c2->notice, "reset") == NULL);
    assert_string_equal(c2->session->sandbox_id, c1->session->sandbox_id);
    assert_false(sbx_fake_was_destroyed(sbx_fake_get("idlepause"), c1->session->sandbox_id));
    sbx_message_free(&h->base);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_sessions_idle_attached_session_resets_binding_only(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    assert_int_equal(sbx_sessions_create(t->s, "ext", NULL, &h, NULL), SBX_OK);
    sbx_completion *c1 = exec_in(t, "", h->session_id, "echo one");
    assert_int_equal(c1->status, OK_STATUS);
    age(t, h->session_id);
    sbx_completion *c2 = exec_in(t, "", h->session_id, "echo two");
    assert_int_equal(c2->status, OK_STATUS);
    assert_non_null(strstr(c2->notice, "its binding was reset; the attached environment itself "
                                       "is untouched"));
    sbx_fake *f = sbx_fake_get("ext");
    assert_int_equal(sbx_fake_destroy_calls(f), 0);
    assert_true(sbx_fake_alive(f, "external-7"));
    sbx_message_free(&h->base);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

/* A session named name with one command run in it: its handle in *h, the path of its stored
 * file (which must exist) in path; returns the command's completion. */
static sbx_completion *stored_session(env *t, const char *name, sbx_session_handle **h, char *path,
                                      size_t size)
{
    assert_int_equal(sbx_sessions_create(t->s, "default", name, h, NULL), SBX_OK);
    sbx_completion *c = exec_in(t, "", name, "echo x");
    snprintf(path, size, "%s/%s.session", t->store, (*h)->session_id);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return c;
}

static void test_sessions_store_persists_handles_privately(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    char path[700];
    sbx_completion *c = stored_session(t, "kept", &h, path, sizeof path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(stat(t->store, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    sbx_sessions *again = NULL;
    assert_int_equal(sbx_sessions_open(t->cfg, t->b, t->store, &again, NULL), SBX_OK);
    sbx_session_handle *back = sbx_sessions_get(again, "kept");
    assert_non_null(back);
    assert_string_equal(back->sandbox_id, c->session->sandbox_id);
    assert_int_equal(back->binding.len, 32);
    sbx_message_free(&back->base);
    sbx_sessions_free(again);
    sbx_message_free(&h->base);
    sbx_completion_free(c);
}

static void test_sessions_destroy_removes_session_and_is_idempotent(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    assert_int_equal(sbx_sessions_create(t->s, "default", NULL, &h, NULL), SBX_OK);
    sbx_completion *c = exec_in(t, "", h->session_id, "echo x");
    sbx_principal *alice = sbx_principal_new();
    sbx_set_string(&alice->subject, "alice");
    assert_int_equal(sbx_sessions_destroy(t->s, h->session_id, alice, NULL), SBX_OK);
    assert_true(sbx_fake_was_destroyed(sbx_fake_get("default"), c->session->sandbox_id));
    assert_null(sbx_sessions_get(t->s, h->session_id));
    assert_int_equal(sbx_sessions_destroy(t->s, h->session_id, alice, NULL), SBX_OK);
    sbx_message_free(&alice->base);
    sbx_message_free(&h->base);
    sbx_completion_free(c);
}

/* forget drops the session (by name too) and its stored file, and leaves its sandbox alone:
 * for one whose sandbox cannot be reached any more. Unknown ids are fine. */
static void test_sessions_forget_drops_the_session_and_leaves_its_sandbox(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    char path[700];
    sbx_completion *c = stored_session(t, "gone", &h, path, sizeof path);
    struct stat st;
    sbx_sessions_forget(t->s, "gone");
    assert_null(sbx_sessions_get(t->s, h->session_id));
    assert_int_equal(stat(path, &st), -1);
    assert_false(sbx_fake_was_destroyed(sbx_fake_get("default"), c->session->sandbox_id));
    sbx_sessions *again = NULL; /* and it stays forgotten */
    assert_int_equal(sbx_sessions_open(t->cfg, t->b, t->store, &again, NULL), SBX_OK);
    assert_null(sbx_sessions_get(again, h->session_id));
    sbx_sessions_free(again);
    sbx_sessions_forget(t->s, "gone");
    sbx_sessions_forget(t->s, "no-such-session");
    sbx_message_free(&h->base);
    sbx_completion_free(c);
}

static void test_sessions_pending_completion_is_ingested_later(void **state)
{
    env *t = *state;
    sbx_thread_broker_opts o = {2, 8, 8, 0};
    sbx_broker *tb = NULL;
    assert_int_equal(sbx_broker_open_thread(t->e, &o, &tb, NULL), SBX_OK);
    sbx_sessions *s = NULL;
    assert_int_equal(sbx_sessions_open(t->cfg, tb, NULL, &s, NULL), SBX_OK);
    sbx_session_handle *h = NULL;
    assert_int_equal(sbx_sessions_create(s, "default", NULL, &h, NULL), SBX_OK);
    sbx_completion *c = NULL;
    sbx_request *warm = fx_shell("", "echo warm");
    sbx_sessions_execute(s, warm, h->session_id, SBX_WAIT_FOREVER, &c, NULL);
    sbx_completion_free(c);
    sbx_request_free(warm);
    sbx_fake_set_gate(sbx_fake_get("default"), true);
    sbx_request *r = fx_shell("", "echo late");
    assert_int_equal(sbx_sessions_execute(s, r, h->session_id, 10, &c, NULL), SBX_OK);
    assert_null(c); /* pending */
    sbx_fake_set_gate(sbx_fake_get("default"), false);
    assert_int_equal(
        sbx_broker_result(tb, sbx_request_subject(r), r->task_id, SBX_WAIT_FOREVER, &c), SBX_OK);
    sbx_sessions_ingest(s, c);
    sbx_session_handle *back = sbx_sessions_get(s, h->session_id);
    assert_int_equal(back->last_used_at_ms, c->session->last_used_at_ms);
    assert_memory_equal(back->binding.data, c->session->binding.data, 32);
    sbx_message_free(&back->base);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_message_free(&h->base);
    sbx_sessions_free(s);
    sbx_broker_free(tb);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_sessions_per_call_destroys_after_success),
        T(test_sessions_per_call_destroys_after_program_failure),
        T(test_sessions_per_call_destroy_that_failed_is_tried_again),
        T(test_sessions_per_call_destroys_after_machinery_failure),
        T(test_sessions_per_call_sandboxes_are_fresh_each_time),
        T(test_sessions_unknown_id_is_not_found_and_creates_nothing),
        T(test_sessions_created_session_keeps_its_sandbox),
        T(test_sessions_session_never_moves_to_another_profile),
        T(test_sessions_create_refuses_per_call_profile),
        T(test_sessions_per_runtime_shares_one_sandbox),
        T(test_sessions_idle_managed_session_is_reset_with_notice),
        T(test_sessions_idle_session_of_another_principal_stays_its_owners),
        T(test_sessions_idle_attached_session_resets_binding_only),
        T(test_sessions_idle_pause_profile_is_not_reset),
        T(test_sessions_store_persists_handles_privately),
        T(test_sessions_destroy_removes_session_and_is_idempotent),
        T(test_sessions_forget_drops_the_session_and_leaves_its_sandbox),
        T(test_sessions_pending_completion_is_ingested_later),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
