/* test_worker_auth.c - who may call a worker over TLS: mTLS client certificates verified
 * against the configured CA, bearer tokens, and the principal subjects each caller may assert.
 * Certificates are generated per run with the openssl CLI into a temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "providers/fake/fake.h"
#include "worker/worker_fixture.h"
#include "worker/worker_internal.h"

/* Test-only env var names, unique to this test program. */
#define TOKEN_ENV "SBX_WORKER_AUTH_TEST_TOKEN"
#define CLIENT_TOKEN_ENV "SBX_WORKER_AUTH_TEST_CLIENT_TOKEN"

static sbx_completion *call(sbx_broker *b, const char *subject)
{
    sbx_request *req = fixture_command("echo authorised", subject);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, req, 60000, NULL, &c), SBX_OK);
    assert_non_null(c);
    sbx_request_free(req);
    return c;
}

static void assert_code(sbx_completion *c, sbx_status code)
{
    if (code == SBX_OK) {
        if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
            fprintf(stderr, "unexpected: %s\n", c->error);
        assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    } else {
        assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
        if ((sbx_status)c->error_code != code)
            fprintf(stderr, "error: %s\n", c->error);
        assert_int_equal(c->error_code, code);
        /* and nothing ran: the fake provider saw no operation */
        sbx_fake *fake = sbx_fake_get("fake");
        assert_true(fake == NULL || sbx_fake_ops(fake) == 0);
    }
    sbx_completion_free(c);
}

static void start_mtls(worker_fixture *f)
{
    worker_fixture_opts o = {
        .tls = true, .mtls = true, .cert_subject = "agent-1", .subjects = "alice,bob"};
    fixture_start(f, &o);
}

static void test_worker_auth_client_certificate_of_a_caller_is_accepted(void **state)
{
    (void)state;
    worker_fixture f;
    start_mtls(&f);
    sbx_broker *b = fixture_client(&f, "client.pem", "client.key", NULL);
    assert_code(call(b, "alice"), SBX_OK);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_auth_many_calls_share_one_tls_client(void **state)
{
    (void)state;
    worker_fixture f;
    start_mtls(&f);
    sbx_broker *b = fixture_client(&f, "client.pem", "client.key", NULL);
    for (int i = 0; i < 5; i++)
        assert_code(call(b, "bob"), SBX_OK);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_auth_without_client_certificate_nothing_runs(void **state)
{
    (void)state;
    worker_fixture f;
    start_mtls(&f);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    /* the handshake itself fails: a transport failure */
    assert_code(call(b, "alice"), SBX_E_BROKER);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_auth_certificate_from_another_ca_is_refused(void **state)
{
    (void)state;
    worker_fixture f;
    start_mtls(&f);
    sbx_broker *b = fixture_client(&f, "rogue.pem", "rogue.key", NULL);
    assert_code(call(b, "alice"), SBX_E_BROKER);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* A remote broker whose own TLS files are wrong is told which setting to check, not whether
 * sbx-worker is running (it is, and was never asked). Files relative to f->dir. */
static void expect_client_tls_error(worker_fixture *f, const char *ca, const char *cert,
                                    const char *key, const char *hint)
{
    char ca_path[600], cert_path[600], key_path[600];
    snprintf(ca_path, sizeof ca_path, "%s/%s", f->dir, ca);
    snprintf(cert_path, sizeof cert_path, "%s/%s", f->dir, cert ? cert : "");
    snprintf(key_path, sizeof key_path, "%s/%s", f->dir, key ? key : "");
    sbx_remote_config rc = {.endpoint = f->endpoint,
                            .ca_file = ca_path,
                            .cert_file = cert ? cert_path : NULL,
                            .key_file = key ? key_path : NULL,
                            .connect_timeout_ms = 10000};
    sbx_broker *b = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_broker_open_remote(&rc, &b, &err), SBX_OK);
    sbx_completion *c = call(b, "alice");
    assert_int_equal(c->error_code, SBX_E_BROKER);
    if (!strstr(c->error, hint) || strstr(c->error, "is sbx-worker running"))
        fail_msg("ca %s cert %s: '%s' lacks '%s'", ca, cert ? cert : "-", c->error, hint);
    sbx_completion_free(c);
    sbx_broker_free(b);
}

static void test_worker_auth_client_tls_problems_name_the_setting_to_check(void **state)
{
    (void)state;
    worker_fixture f;
    start_mtls(&f);
    expect_client_tls_error(&f, "none.pem", "client.pem", "client.key",
                            "check ca_file (--ca-file): a readable PEM file of the CA");
    expect_client_tls_error(&f, "ca.pem", "none.pem", "client.key",
                            "check cert_file and key_file (--cert-file, --key-file)");
    expect_client_tls_error(&f, "ca.pem", "client.pem", "ca.pem",
                            "check cert_file and key_file (--cert-file, --key-file)");
    expect_client_tls_error(&f, "other-ca.pem", "client.pem", "client.key",
                            "the worker's certificate is not signed by the CA of ca_file");
    fixture_stop(&f);
}

static void test_worker_auth_certificate_of_unknown_subject_is_unauthenticated(void **state)
{
    (void)state;
    worker_fixture f;
    start_mtls(&f);
    sbx_broker *b = fixture_client(&f, "stranger.pem", "stranger.key", NULL);
    assert_code(call(b, "alice"), SBX_E_UNAUTHENTICATED);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_auth_principal_the_caller_may_not_assert_is_denied(void **state)
{
    (void)state;
    worker_fixture f;
    start_mtls(&f);
    sbx_broker *b = fixture_client(&f, "client.pem", "client.key", NULL);
    assert_code(call(b, "mallory"), SBX_E_PERMISSION_DENIED);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* A caller held to some subjects may not choose the identity a provider acts as: the
 * principal's credentials (kubernetes impersonates credentials.user, ec2_ssm assumes
 * credentials.role_arn) and groups are refused from it. Before: alice's caller could run as
 * credentials.user 'cluster-admin' in the groups 'system:masters'. */
static sbx_completion *call_as(sbx_broker *b, const char *subject, const char *cred_key,
                               const char *group)
{
    sbx_request *req = fixture_command("echo authorised", subject);
    if (cred_key != NULL) {
        Sbx__V1__Principal__CredentialsEntry *e = malloc(sizeof(*e));
        assert_non_null(e);
        sbx__v1__principal__credentials_entry__init(e);
        e->key = strdup(cred_key);
        e->value = strdup("cluster-admin");
        req->principal->credentials = malloc(sizeof(*req->principal->credentials));
        assert_non_null(req->principal->credentials);
        req->principal->credentials[0] = e;
        req->principal->n_credentials = 1;
    }
    if (group != NULL)
        sbx_add_string(&req->principal->n_groups, &req->principal->groups, group);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, req, 60000, NULL, &c), SBX_OK);
    assert_non_null(c);
    sbx_request_free(req);
    return c;
}

static void test_worker_auth_caller_held_to_subjects_may_not_choose_the_identity(void **state)
{
    (void)state;
    worker_fixture f;
    start_mtls(&f);
    sbx_broker *b = fixture_client(&f, "client.pem", "client.key", NULL);
    sbx_completion *c = call_as(b, "alice", "user", NULL);
    assert_non_null(strstr(c->error, "credentials or groups"));
    assert_code(c, SBX_E_PERMISSION_DENIED);
    assert_code(call_as(b, "alice", "role_arn", NULL), SBX_E_PERMISSION_DENIED);
    assert_code(call_as(b, "alice", NULL, "system:masters"), SBX_E_PERMISSION_DENIED);
    assert_code(call_as(b, "alice", NULL, NULL), SBX_OK);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void start_token(worker_fixture *f)
{
    setenv(TOKEN_ENV, "s3cret-token-for-tests", 1);
    worker_fixture_opts o = {.tls = true, .token_env = TOKEN_ENV, .subjects = "*"};
    fixture_start(f, &o);
}

static void test_worker_auth_right_token_is_accepted(void **state)
{
    (void)state;
    worker_fixture f;
    start_token(&f);
    setenv(CLIENT_TOKEN_ENV, "s3cret-token-for-tests", 1);
    sbx_broker *b = fixture_client(&f, NULL, NULL, CLIENT_TOKEN_ENV);
    assert_code(call(b, "anyone"), SBX_OK);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_auth_wrong_token_is_unauthenticated(void **state)
{
    (void)state;
    worker_fixture f;
    start_token(&f);
    setenv(CLIENT_TOKEN_ENV, "s3cret-token-for-tesTS", 1);
    sbx_broker *b = fixture_client(&f, NULL, NULL, CLIENT_TOKEN_ENV);
    assert_code(call(b, "anyone"), SBX_E_UNAUTHENTICATED);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_auth_no_token_is_unauthenticated(void **state)
{
    (void)state;
    worker_fixture f;
    start_token(&f);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    assert_code(call(b, "anyone"), SBX_E_UNAUTHENTICATED);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* sandbox.principal_sandboxes through the worker: what is counted is the principal the
 * authenticated caller asserted, so one tenant at its bound never refuses another's session. */
static void test_worker_auth_principal_sandboxes_bound_each_asserted_principal(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-worker-quota-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[sizeof dir + 16];
    snprintf(path, sizeof path, "%s/c.yaml", dir);
    FILE *fp = fopen(path, "we");
    assert_non_null(fp);
    fprintf(fp,
            "sandbox:\n  principal_sandboxes: 1\n  runtime_dir: %s/run\n  profiles:\n"
            "    fake: { type: fake, scope: per_session }\n",
            dir);
    fclose(fp);
    worker_fixture f;
    worker_fixture_opts o = {.tls = true,
                             .mtls = true,
                             .cert_subject = "agent-1",
                             .subjects = "alice,bob",
                             .config_path = path};
    fixture_start(&f, &o);
    sbx_broker *b = fixture_client(&f, "client.pem", "client.key", NULL);
    assert_code(call(b, "alice"), SBX_OK); /* frees the completion */
    sbx_completion *second = call(b, "alice");
    assert_int_equal(second->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_int_equal(second->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(second->error, "principal 'alice' holds 1 sandbox of per_session"));
    assert_code(call(b, "bob"), SBX_OK);
    sbx_completion_free(second);
    sbx_broker_free(b);
    fixture_stop(&f);
    unlink(path);
    snprintf(path, sizeof path, "%s/run", dir);
    rmdir(path);
    rmdir(dir);
}

/* ---- auth.c on its own: the callers as configured, and the headers and names they send ---- */

/* Each way a caller list cannot authenticate anybody is a config error naming the caller and
 * the fix, and leaves nothing allocated (LeakSanitizer checks under ASan). */
static void test_worker_auth_callers_that_cannot_authenticate_are_config_errors(void **state)
{
    (void)state;
    unsetenv("SBX_WORKER_AUTH_TEST_UNSET");
    setenv("SBX_WORKER_AUTH_TEST_EMPTY", "", 1);
    setenv(TOKEN_ENV, "a-token", 1);
    static const struct {
        const char *token_env, *cert_subject, *client_ca, *error;
    } cases[] = {
        {"SBX_WORKER_AUTH_TEST_UNSET", NULL, NULL,
         "worker caller 'c2': environment variable SBX_WORKER_AUTH_TEST_UNSET (token_env) is "
         "unset or empty; export the caller's bearer token in it"},
        {"SBX_WORKER_AUTH_TEST_EMPTY", NULL, NULL, "SBX_WORKER_AUTH_TEST_EMPTY (token_env) is"},
        {NULL, NULL, NULL,
         "worker caller 'c2' has neither token_env nor cert_subject; give it one of them"},
        {"", "", NULL, "has neither token_env nor cert_subject"},
        {NULL, "agent-2", NULL,
         "worker caller 'c2' is identified by a client certificate but "
         "worker.tls.client_ca_file is not set"},
    };
    char *star[] = {"*"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* the first caller is fine: the second one's fault is found, and the first freed */
        sbx_worker_caller callers[2] = {
            {.name = "c1", .token_env = TOKEN_ENV, .subjects = star, .n_subjects = 1},
            {.name = "c2",
             .token_env = (char *)cases[i].token_env,
             .cert_subject = (char *)cases[i].cert_subject,
             .subjects = star,
             .n_subjects = 1},
        };
        sbx_worker_config cfg = {
            .callers = callers, .n_callers = 2, .tls_client_ca_file = (char *)cases[i].client_ca};
        worker_auth auth;
        sbx_error err = {0};
        assert_int_equal(worker_auth_init(&auth, &cfg, &err), SBX_E_CONFIG);
        if (!strstr(err.message, cases[i].error))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.message, cases[i].error);
        assert_null(auth.callers);
        assert_int_equal(auth.n_callers, 0);
    }
    unsetenv("SBX_WORKER_AUTH_TEST_EMPTY");
}

/* The authorization header: the scheme is case-insensitive (RFC 9110 §11.1), the token is
 * compared whole, and anything else (another scheme, no token) matches no caller. */
static void test_worker_auth_bearer_header_forms(void **state)
{
    (void)state;
    setenv(TOKEN_ENV, "tok-one", 1);
    setenv(CLIENT_TOKEN_ENV, "tok-two", 1);
    char *star[] = {"*"}, *alice[] = {"alice"};
    sbx_worker_caller callers[3] = {
        {.name = "one", .token_env = TOKEN_ENV, .subjects = alice, .n_subjects = 1},
        {.name = "two", .token_env = CLIENT_TOKEN_ENV, .subjects = star, .n_subjects = 1},
        {.name = "cert", .cert_subject = "agent-1", .subjects = alice, .n_subjects = 1},
    };
    sbx_worker_config cfg = {.callers = callers, .n_callers = 3, .tls_client_ca_file = "ca.pem"};
    worker_auth auth;
    sbx_error err = {0};
    assert_int_equal(worker_auth_init(&auth, &cfg, &err), SBX_OK);
    assert_true(auth.required);
    static const struct {
        const char *header;
        int caller; /* index, or -1: none */
    } cases[] = {
        {"Bearer tok-one", 0},
        {"bearer tok-two", 1},
        {"BEARER tok-one", 0},
        {"Bearer tok-one ", -1},
        {"Bearer TOK-ONE", -1},
        {"Basic tok-one", -1},
        {"Bearer", -1},
        {"Bearer ", -1},
        {"Bearertok-one", -1},
        {"tok-one", -1},
        {"", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const worker_caller *c =
            worker_auth_by_token(&auth, cases[i].header, strlen(cases[i].header));
        const worker_caller *want = cases[i].caller < 0 ? NULL : &auth.callers[cases[i].caller];
        if (c != want)
            fail_msg("'%s': caller %s, expected %s", cases[i].header, c ? c->config->name : "none",
                     want ? want->config->name : "none");
    }
    /* a header is len bytes, not a C string: what follows it is not part of the token */
    assert_ptr_equal(worker_auth_by_token(&auth, "Bearer tok-onetwo", 14), &auth.callers[0]);

    assert_ptr_equal(worker_auth_by_cert(&auth, "agent-1"), &auth.callers[2]);
    assert_null(worker_auth_by_cert(&auth, "agent-2"));
    assert_null(worker_auth_by_cert(&auth, ""));
    assert_null(worker_auth_by_cert(&auth, NULL));

    assert_true(worker_caller_may_assert(&auth.callers[0], "alice"));
    assert_false(worker_caller_may_assert(&auth.callers[0], "alicia"));
    assert_true(worker_caller_may_assert(&auth.callers[1], "anyone"));
    /* credentials or groups choose the identity: only a "*" caller may send them */
    sbx_principal *p = sbx_principal_new();
    assert_true(worker_caller_may_choose_identity(&auth.callers[0], p));
    assert_true(worker_caller_may_choose_identity(&auth.callers[0], NULL));
    assert_true(sbx_add_string(&p->n_groups, &p->groups, "admins"));
    assert_false(worker_caller_may_choose_identity(&auth.callers[0], p));
    assert_true(worker_caller_may_choose_identity(&auth.callers[1], p));
    sbx_message_free(&p->base);
    worker_auth_free(&auth);
    assert_null(auth.callers);
    worker_auth_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_auth_client_certificate_of_a_caller_is_accepted),
        cmocka_unit_test(test_worker_auth_many_calls_share_one_tls_client),
        cmocka_unit_test(test_worker_auth_without_client_certificate_nothing_runs),
        cmocka_unit_test(test_worker_auth_certificate_from_another_ca_is_refused),
        cmocka_unit_test(test_worker_auth_certificate_of_unknown_subject_is_unauthenticated),
        cmocka_unit_test(test_worker_auth_client_tls_problems_name_the_setting_to_check),
        cmocka_unit_test(test_worker_auth_principal_the_caller_may_not_assert_is_denied),
        cmocka_unit_test(test_worker_auth_caller_held_to_subjects_may_not_choose_the_identity),
        cmocka_unit_test(test_worker_auth_principal_sandboxes_bound_each_asserted_principal),
        cmocka_unit_test(test_worker_auth_right_token_is_accepted),
        cmocka_unit_test(test_worker_auth_wrong_token_is_unauthenticated),
        cmocka_unit_test(test_worker_auth_no_token_is_unauthenticated),
        cmocka_unit_test(test_worker_auth_callers_that_cannot_authenticate_are_config_errors),
        cmocka_unit_test(test_worker_auth_bearer_header_forms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
