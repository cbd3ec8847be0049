/* test_kubernetes.c - the kubernetes provider through the real engine against the fake API
 * server (fake_k8s.py), whose pods run the real sbx-agent on loopback addresses: managed
 * create / exec / files / destroy through the agent, the pod and NetworkPolicy manifests, no
 * orphan when a create fails, bounded waits, gone only by proof, and the agent's credential.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "contract/contract_suite.h"
#include "kubernetes/k8s_fixture.h"
#include "providers/common/agent_client.h"

static int setup(void **state)
{
    kt_fake *f = calloc(1, sizeof(*f));
    kt_fake_start(f, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    kt_fake *f = *state;
    kt_fake_stop(f);
    free(f);
    return 0;
}

static bool succeeded(const sbx_completion *c)
{
    return c != NULL && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED;
}

static void expect_ok(const sbx_completion *c)
{
    if (!succeeded(c))
        fail_msg("completion failed: %s (%s)", c->error,
                 sbx_status_name((sbx_status)c->error_code));
}

/* The body of the n-th logged request (method, path substring); borrowed from `log`. */
static json_t *nth_body(json_t *log, size_t n)
{
    json_t *r = json_array_get(log, n);
    assert_non_null(r);
    return json_object_get(r, "body");
}

static sbx_completion *destroy(kt_env *e, sbx_session_handle **s)
{
    sbx_request *r = sbx_request_new();
    r->destroy = malloc(sizeof(*r->destroy));
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    return kt_submit(e, r, s);
}

static const char *pod_name(const sbx_session_handle *s)
{
    const char *slash = strchr(s->sandbox_id, '/');
    assert_non_null(slash);
    return slash + 1;
}

static long object_status(const kt_fake *f, const char *group, const char *resource,
                          const char *name, json_t **body)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/namespaces/" KT_NS "/%s/%s", group, resource, name);
    return kt_fake_get(f, path, body);
}

/* A pod that was deleted is gone once the fake's grace period ran: poll (bounded) until 404. */
static bool pod_goes(const kt_fake *f, const char *name)
{
    for (int i = 0; i < 200; i++) {
        if (object_status(f, "/api/v1", "pods", name, NULL) == 404)
            return true;
        usleep(50000);
    }
    return false;
}

/* ---- managed sandboxes through the agent ---- */

static void test_k8s_managed_exec_files_and_destroy(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: deny", "network_policy: true");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "echo hello from the pod; id -u");
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "hello from the pod\n65534\n");
    assert_non_null(s);
    assert_true(strncmp(s->sandbox_id, KT_NS "/sbx-sandbox-", strlen(KT_NS "/sbx-sandbox-")) == 0);
    sbx_completion_free(c);
    /* the same pod again (reattach by id), its python kernel keeps variables */
    sbx_request *r = sbx_request_new();
    r->run_code = malloc(sizeof(*r->run_code));
    sbx__v1__run_code__init(r->run_code);
    sbx_set_string(&r->run_code->language, "python");
    sbx_set_string(&r->run_code->code, "x = 41\nprint('set')");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE;
    c = kt_submit(&e, r, &s);
    expect_ok(c);
    sbx_completion_free(c);
    r = sbx_request_new();
    r->run_code = malloc(sizeof(*r->run_code));
    sbx__v1__run_code__init(r->run_code);
    sbx_set_string(&r->run_code->language, "python");
    sbx_set_string(&r->run_code->code, "print(x + 1)");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE;
    c = kt_submit(&e, r, &s);
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "42\n");
    sbx_completion_free(c);
    /* files through the agent */
    r = sbx_request_new();
    r->write_file = malloc(sizeof(*r->write_file));
    sbx__v1__write_file__init(r->write_file);
    sbx_set_string(&r->write_file->path, "notes.txt");
    sbx_set_bytes(&r->write_file->content, "pod bytes", 9);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    c = kt_submit(&e, r, &s);
    expect_ok(c);
    sbx_completion_free(c);
    c = kt_shell(&e, &s, "cat notes.txt");
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "pod bytes");
    sbx_completion_free(c);
    char name[128];
    snprintf(name, sizeof(name), "%s", pod_name(s));
    /* destroy removes every object the create made */
    c = destroy(&e, &s);
    expect_ok(c);
    sbx_completion_free(c);
    assert_int_equal(object_status(f, "/api/v1", "secrets", name, NULL), 404);
    assert_int_equal(object_status(f, "/apis/networking.k8s.io/v1", "networkpolicies", name, NULL),
                     404);
    assert_true(pod_goes(f, name));
    sbx_message_free(&s->base);
    kt_env_close(&e);
}

/* The pod is hardened and sized by the policy; its NetworkPolicy exists before it. */
static void test_k8s_pod_manifest_is_hardened_and_policy_comes_first(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: deny, cpu: 0.5, memory_mb: 256, disk_mb: 64",
                      "network_policy: true, active_deadline_s: 900");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    expect_ok(c);
    sbx_completion_free(c);
    json_t *posts = kt_requests_matching(f, "POST", "/namespaces/" KT_NS "/");
    assert_int_equal(json_array_size(posts), 3);
    /* Secret, then NetworkPolicy, then Pod */
    assert_non_null(
        strstr(json_string_value(json_object_get(json_array_get(posts, 0), "path")), "/secrets"));
    assert_non_null(strstr(json_string_value(json_object_get(json_array_get(posts, 1), "path")),
                           "/networkpolicies"));
    assert_non_null(
        strstr(json_string_value(json_object_get(json_array_get(posts, 2), "path")), "/pods"));
    json_t *np = nth_body(posts, 1);
    json_t *spec = json_object_get(np, "spec");
    assert_int_equal(json_array_size(json_object_get(spec, "egress")), 0);
    assert_true(json_is_array(json_object_get(spec, "egress")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(spec, "policyTypes"), 0)),
                        "Egress");
    json_t *pod = nth_body(posts, 2);
    json_t *ps = json_object_get(pod, "spec");
    assert_int_equal(json_integer_value(json_object_get(ps, "activeDeadlineSeconds")), 900);
    assert_true(json_is_false(json_object_get(ps, "automountServiceAccountToken")));
    assert_string_equal(json_string_value(json_object_get(ps, "restartPolicy")), "Never");
    json_t *ctr = json_array_get(json_object_get(ps, "containers"), 0);
    json_t *sc = json_object_get(ctr, "securityContext");
    assert_true(json_is_true(json_object_get(sc, "runAsNonRoot")));
    assert_true(json_is_false(json_object_get(sc, "allowPrivilegeEscalation")));
    assert_true(json_is_true(json_object_get(sc, "readOnlyRootFilesystem")));
    assert_string_equal(json_string_value(json_array_get(
                            json_object_get(json_object_get(sc, "capabilities"), "drop"), 0)),
                        "ALL");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(sc, "seccompProfile"), "type")),
        "RuntimeDefault");
    json_t *res = json_object_get(ctr, "resources");
    assert_true(json_equal(json_object_get(res, "requests"), json_object_get(res, "limits")));
    json_t *lim = json_object_get(res, "limits");
    assert_string_equal(json_string_value(json_object_get(lim, "cpu")), "500m");
    assert_string_equal(json_string_value(json_object_get(lim, "memory")), "256Mi");
    assert_string_equal(json_string_value(json_object_get(lim, "ephemeral-storage")), "64Mi");
    /* the agent's credential comes from the Secret, never from the pod spec */
    json_t *env = json_array_get(json_object_get(ctr, "env"), 0);
    assert_non_null(json_object_get(json_object_get(env, "valueFrom"), "secretKeyRef"));
    assert_null(json_object_get(env, "value"));
    json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    assert_string_equal(json_string_value(json_object_get(labels, "app.kubernetes.io/managed-by")),
                        "sbx");
    assert_string_equal(json_string_value(json_object_get(labels, "sbx.dev/profile")), "k");
    json_decref(posts);
    c = destroy(&e, &s);
    sbx_completion_free(c);
    sbx_message_free(&s->base);
    kt_env_close(&e);
}

/* ---- the agent's credential ---- */

static void test_k8s_agent_refuses_a_wrong_credential(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: allow", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    expect_ok(c);
    sbx_completion_free(c);
    json_t *pod = NULL;
    assert_int_equal(object_status(f, "/api/v1", "pods", pod_name(s), &pod), 200);
    const char *ip = json_string_value(json_object_get(json_object_get(pod, "status"), "podIP"));
    assert_non_null(ip);
    uint8_t wrong[SBX_AGENT_TOKEN_LEN];
    memset(wrong, 0x5a, sizeof(wrong));
    sbx_agent_conn *conn = NULL;
    sbx_error err;
    assert_int_equal(sbx_agent_connect_tcp(ip, 7070, wrong, 0, &conn, &err), SBX_OK);
    sbx_agent_pong pong;
    assert_int_not_equal(sbx_agent_ping(conn, sbx_monotonic_ms() + 5000, &pong, &err), SBX_OK);
    sbx_agent_close(conn);
    json_decref(pod);
    c = destroy(&e, &s);
    sbx_completion_free(c);
    sbx_message_free(&s->base);
    kt_env_close(&e);
}

/* ---- failed creates leave nothing ---- */

static void assert_nothing_left(const kt_fake *f)
{
    json_t *list = NULL;
    const char *kinds[][2] = {{"/api/v1", "secrets"},
                              {"/apis/networking.k8s.io/v1", "networkpolicies"}};
    for (int i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/namespaces/" KT_NS "/%s", kinds[i][0], kinds[i][1]);
        assert_int_equal(kt_fake_get(f, path, &list), 200);
        assert_int_equal(json_array_size(json_object_get(list, "items")), 0);
        json_decref(list);
    }
    for (int i = 0; i < 200; i++) {
        assert_int_equal(kt_fake_get(f, "/api/v1/namespaces/" KT_NS "/pods", &list), 200);
        size_t n = json_array_size(json_object_get(list, "items"));
        json_decref(list);
        if (n == 0)
            return;
        usleep(50000);
    }
    fail_msg("a pod was left behind");
}

static void test_k8s_failed_pod_leaves_no_object(void **state)
{
    kt_fake *f = *state;
    kt_fake_control(f, "config", "{\"pod_mode\": \"fail\"}");
    char *y = kt_yaml(f, NULL, "network_egress: deny", "network_policy: true");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_PROVISION);
    assert_non_null(strstr(c->error, "exec format error"));
    sbx_completion_free(c);
    assert_nothing_left(f);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
}

static void test_k8s_refused_pod_create_removes_secret_and_policy(void **state)
{
    kt_fake *f = *state;
    kt_fake_control(f, "config",
                    "{\"fail\": [{\"method\": \"POST\", \"path\": \"/pods$\", \"status\": 403, "
                    "\"reason\": \"Forbidden\", \"message\": \"pods is forbidden: quota\"}]}");
    char *y = kt_yaml(f, NULL, "network_egress: deny", "network_policy: true");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(c->error, "pods is forbidden: quota"));
    sbx_completion_free(c);
    assert_nothing_left(f);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
}

/* A pod that never runs: the wait ends at create_timeout_s with the kubelet's reason, and the
 * objects go. */
static void test_k8s_pending_pod_wait_is_bounded(void **state)
{
    kt_fake *f = *state;
    kt_fake_control(f, "config", "{\"pod_mode\": \"pending\"}");
    char *y = kt_yaml(f, NULL, "network_egress: allow", "create_timeout_s: 2");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_PROVISION);
    assert_non_null(strstr(c->error, "ImagePullBackOff"));
    sbx_completion_free(c);
    assert_nothing_left(f);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
}

/* The API's documented errors, as Status bodies: each maps to its code, says what the server
 * said, and leaves nothing behind. */
static void test_k8s_api_errors_map_and_leave_nothing(void **state)
{
    kt_fake *f = *state;
    struct {
        const char *fail;
        sbx_status code;
        const char *words;
    } cases[] = {
        {"{\"method\": \"POST\", \"path\": \"/secrets$\", \"status\": 409, \"reason\": "
         "\"AlreadyExists\", \"message\": \"secrets \\\"x\\\" already exists\"}",
         SBX_E_PROVISION, "AlreadyExists"},
        {"{\"method\": \"POST\", \"path\": \"/networkpolicies$\", \"status\": 401, "
         "\"reason\": \"Unauthorized\", \"message\": \"Unauthorized\"}",
         SBX_E_CONFIG, "credentials"},
        {"{\"method\": \"GET\", \"path\": \"/pods/\", \"status\": 403, \"reason\": "
         "\"Forbidden\", \"message\": \"pods is forbidden: get\"}",
         SBX_E_PERMISSION_DENIED, "forbidden: get"},
        /* a proxy in front of the API server answering its own page */
        {"{\"method\": \"GET\", \"path\": \"/pods/\", \"status\": 200, \"raw\": "
         "\"<html>sign in</html>\"}",
         SBX_E_PROVISION, "answered 200 with a body that is not a JSON object"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char cfg[512];
        snprintf(cfg, sizeof(cfg), "{\"fail\": [%s]}", cases[i].fail);
        kt_fake_control(f, "config", cfg);
        char *y = kt_yaml(f, NULL, "network_egress: deny", "network_policy: true");
        kt_env e;
        kt_env_open(&e, f, y);
        free(y);
        sbx_session_handle *s = NULL;
        sbx_completion *c = kt_shell(&e, &s, "true");
        if ((sbx_status)c->error_code != cases[i].code || strstr(c->error, cases[i].words) == NULL)
            fail_msg("case %zu: got %s: %s", i, sbx_status_name((sbx_status)c->error_code),
                     c->error);
        sbx_completion_free(c);
        assert_nothing_left(f);
        if (s != NULL)
            sbx_message_free(&s->base);
        kt_env_close(&e);
    }
    /* 422 from the server's own validation: a label value the profile gave is not one */
    kt_fake_control(f, "config", "{\"fail\": []}");
    char *y = kt_yaml(f, NULL, "network_egress: allow", "labels: [\"team=not a label!\"]");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_PROVISION);
    assert_non_null(strstr(c->error, "422 (Invalid)"));
    assert_non_null(strstr(c->error, "metadata.labels"));
    sbx_completion_free(c);
    assert_nothing_left(f);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
}

/* ---- the contract suite ---- */

static void test_k8s_contract_managed(void **state)
{
    kt_fake *f = *state;
    char *y =
        kt_yaml(f, NULL, "network_egress: deny, cpu: 1, memory_mb: 256", "network_policy: true");
    assert_int_equal(sbx_contract_run_yaml(y, "k"), 0);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_k8s_managed_exec_files_and_destroy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_pod_manifest_is_hardened_and_policy_comes_first,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_agent_refuses_a_wrong_credential, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_failed_pod_leaves_no_object, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_refused_pod_create_removes_secret_and_policy,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_pending_pod_wait_is_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_api_errors_map_and_leave_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_contract_managed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
