/* test_kubernetes_more.c - the kubernetes provider's capability rows, policy lowering, identity
 * and lifecycle against the fake API server: `sbx providers` shows its table; CIDR allowlists
 * become ipBlocks and domains are refused (strict) or dropped (lenient); deny without
 * network_policy is refused; fs_write paths are emptyDirs; output streams; an ended pod is GONE
 * and recreated with a notice while a stopped agent is not; attach_to an external pod; user mode
 * by impersonation; the sweep.
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

#include "kubernetes/k8s_fixture.h"
#include "sbx/provider.h"

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

static sbx_completion *destroy(kt_env *e, sbx_session_handle **s)
{
    sbx_request *r = sbx_request_new();
    r->destroy = malloc(sizeof(*r->destroy));
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    return kt_submit(e, r, s);
}

static void done(kt_env *e, sbx_session_handle **s)
{
    if (*s != NULL && (*s)->sandbox_id[0] != '\0')
        sbx_completion_free(destroy(e, s));
    if (*s != NULL)
        sbx_message_free(&(*s)->base);
    *s = NULL;
    kt_env_close(e);
}

static size_t count(const kt_fake *f, const char *method, const char *path)
{
    json_t *l = kt_requests_matching(f, method, path);
    size_t n = json_array_size(l);
    json_decref(l);
    return n;
}

/* The body of the last logged request matching method and path. */
static json_t *last_body(const kt_fake *f, const char *method, const char *path)
{
    json_t *l = kt_requests_matching(f, method, path);
    assert_true(json_array_size(l) > 0);
    json_t *b = json_incref(json_object_get(json_array_get(l, json_array_size(l) - 1), "body"));
    json_decref(l);
    return b;
}

/* ---- `sbx providers` ---- */

static void test_k8s_providers_shows_capability_table(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: deny",
                      "network_policy: true, impersonate: true, languages: [python, sh, bash]");
    char path[160];
    snprintf(path, sizeof(path), "%s/sbx.yaml", f->dir);
    FILE *cf = fopen(path, "w");
    fputs(y, cf);
    fclose(cf);
    free(y);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "SBX_CONFIG=%s %s/cli/sbx providers --json", path,
             getenv("SBX_BUILD_DIR"));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    json_t *j = json_loads(out, 0, NULL);
    assert_non_null(j);
    json_t *row = json_array_get(j, 0);
    assert_string_equal(json_string_value(json_object_get(row, "provider")), "kubernetes");
    assert_true(json_is_true(json_object_get(row, "available")));
    json_t *caps = json_object_get(row, "capabilities");
    assert_string_equal(json_string_value(json_object_get(caps, "isolation")), "container");
    assert_int_equal(json_array_size(json_object_get(caps, "languages")), 3);
    const char *yes[] = {
        "shell",          "files",          "stateful",          "attach",           "provisions",
        "principal_user", "policy_network", "policy_filesystem", "policy_resources", "streaming"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!json_is_true(json_object_get(caps, yes[i])))
            fail_msg("%s is not declared", yes[i]);
    const char *no[] = {"package_install", "attaches_external", "policy_network_domains"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (!json_is_false(json_object_get(caps, no[i])))
            fail_msg("%s is declared", no[i]);
    json_decref(j);
    /* the human table too */
    snprintf(cmd, sizeof(cmd), "SBX_CONFIG=%s %s/cli/sbx providers", path, getenv("SBX_BUILD_DIR"));
    p = popen(cmd, "r");
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    assert_int_equal(pclose(p), 0);
    assert_non_null(strstr(out, "kubernetes"));
    assert_non_null(strstr(out, "container"));
}

/* ---- policy lowering ---- */

static void test_k8s_allowlist_cidrs_become_ip_blocks_domains_refused(void **state)
{
    kt_fake *f = *state;
    /* strict: a domain is refused before any API call */
    char *y = kt_yaml(f, NULL, "network_egress: allowlist, network_allow: [10.1.0.0/16, pypi.org]",
                      "network_policy: true");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "network_allow"));
    sbx_completion_free(c);
    assert_int_equal(count(f, "POST", "/"), 0);
    done(&e, &s);
    /* lenient: the domain is dropped (narrower), the CIDRs are ipBlocks */
    y = kt_yaml(f, NULL,
                "network_egress: allowlist, network_allow: [10.1.0.0/16, 192.168.7.9, pypi.org], "
                "lenient: true",
                "network_policy: true");
    kt_env_open(&e, f, y);
    free(y);
    c = kt_shell(&e, &s, "true");
    expect_ok(c);
    sbx_completion_free(c);
    json_t *np = last_body(f, "POST", "/networkpolicies");
    json_t *egress = json_object_get(json_object_get(np, "spec"), "egress");
    assert_int_equal(json_array_size(egress), 1);
    json_t *to = json_object_get(json_array_get(egress, 0), "to");
    assert_int_equal(json_array_size(to), 2);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(to, 0), "ipBlock"), "cidr")),
                        "10.1.0.0/16");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(to, 1), "ipBlock"), "cidr")),
                        "192.168.7.9/32");
    json_decref(np);
    done(&e, &s);
}

static void test_k8s_deny_without_network_policy_is_refused(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: deny", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "network_egress=deny"));
    sbx_completion_free(c);
    assert_int_equal(count(f, "POST", "/"), 0);
    done(&e, &s);
}

static void test_k8s_fs_write_paths_are_empty_dirs_and_fs_read_refused(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: allow, fs_write: [/data]", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    expect_ok(c);
    sbx_completion_free(c);
    json_t *pod = last_body(f, "POST", "/pods");
    json_t *ctr = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    json_t *mounts = json_object_get(ctr, "volumeMounts");
    bool data = false;
    size_t i;
    json_t *m;
    json_array_foreach(mounts, i, m)
    {
        data |= strcmp(json_string_value(json_object_get(m, "mountPath")), "/data") == 0 &&
                json_is_false(json_object_get(m, "readOnly"));
    }
    assert_true(data);
    json_decref(pod);
    done(&e, &s);
    y = kt_yaml(f, NULL, "network_egress: allow, fs_read: [/etc]", NULL);
    kt_env_open(&e, f, y);
    free(y);
    c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "fs_read"));
    sbx_completion_free(c);
    done(&e, &s);
}

/* ---- streaming ---- */

typedef struct seen {
    char text[256];
    size_t chunks;
} seen;

static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                      uint64_t offset)
{
    seen *s = arg;
    (void)offset;
    if (stream != SBX__V1__STREAM__STREAM_STDOUT)
        return;
    size_t have = strlen(s->text);
    if (have + len < sizeof(s->text)) {
        memcpy(s->text + have, data, len);
        s->text[have + len] = '\0';
    }
    s->chunks++;
}

static void test_k8s_output_streams_through_the_agent(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: allow", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_request *r = sbx_request_shell("k", "echo one; sleep 0.2; echo two");
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "tester");
    seen got = {{0}, 0};
    sbx_engine_hooks hooks = {.on_output = on_output, .on_output_arg = &got};
    sbx_completion *c = sbx_engine_process(e.engine, r, &hooks);
    sbx_request_free(r);
    expect_ok(c);
    assert_string_equal(got.text, "one\ntwo\n");
    assert_true(got.chunks >= 1);
    sbx_session_handle *s =
        c->session != NULL ? (sbx_session_handle *)sbx_message_copy(&c->session->base) : NULL;
    sbx_completion_free(c);
    done(&e, &s);
}

/* ---- gone only by proof ---- */

static void pod_of(const sbx_session_handle *s, char *ns, char *pod)
{
    const char *slash = strchr(s->sandbox_id, '/');
    assert_non_null(slash);
    snprintf(ns, 64, "%.*s", (int)(slash - s->sandbox_id), s->sandbox_id);
    snprintf(pod, 128, "%s", slash + 1);
}

static void test_k8s_ended_pod_is_gone_and_recreated_with_notice(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: allow", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "echo first > mark; echo ok");
    expect_ok(c);
    sbx_completion_free(c);
    char ns[64], pod[128], what[256];
    pod_of(s, ns, pod);
    snprintf(what, sizeof(what), "pods/%s/%s/end", ns, pod);
    kt_fake_control(f, what, NULL);
    /* the kubelet reports the phase once the container is reaped: wait for the proof */
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, pod);
    for (int i = 0; i < 200; i++) {
        json_t *j = NULL;
        kt_fake_get(f, path, &j);
        const char *ph = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
        bool ended = ph != NULL && strcmp(ph, "Failed") == 0;
        json_decref(j);
        if (ended)
            break;
        usleep(50000);
    }
    c = kt_shell(&e, &s, "cat mark 2>/dev/null || echo empty");
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "empty\n");
    assert_non_null(strstr(c->notice, "recreated"));
    assert_string_not_equal(strchr(s->sandbox_id, '/') + 1, pod);
    sbx_completion_free(c);
    done(&e, &s);
}

/* sandbox.principal_sandboxes across a restart of the engine (a worker): the pod a principal
 * made through the first engine still counts in the next, which finds it by its
 * sbx.dev/principal annotation when it opens the profile. Before, the new engine counted from
 * zero and made a second pod. A listing the API server fails refuses the request. */
static void test_k8s_principal_sandboxes_count_what_a_restarted_engine_finds(void **state)
{
    kt_fake *f = *state;
    char *base = kt_yaml(f, NULL, "network_egress: allow", NULL);
    char *y = NULL;
    assert_true(
        asprintf(&y, "sandbox:\n  principal_sandboxes: 1\n%s", base + strlen("sandbox:\n")) > 0);
    free(base);
    kt_env e;
    kt_env_open(&e, f, y);
    sbx_session_handle *held = NULL, *other = NULL;
    sbx_completion *c = kt_shell(&e, &held, "echo one");
    expect_ok(c);
    sbx_completion_free(c);
    kt_env_close(&e); /* the worker restarts; the pod lives on */
    kt_env_open(&e, f, y);
    size_t pods = count(f, "POST", "/api/v1/namespaces/" KT_NS "/pods");
    /* a listing that fails refuses the profile (the bound cannot be counted) and makes nothing;
     * the next request lists again */
    kt_fake_control(f, "config",
                    "{\"fail\": [{\"method\": \"GET\", \"path\": \"^/api/v1/namespaces/" KT_NS
                    "/pods$\", \"status\": 500, \"count\": 1}]}");
    c = kt_shell(&e, &other, "echo two");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_non_null(strstr(c->error, "principal_sandboxes"));
    assert_non_null(strstr(c->error, "500"));
    sbx_completion_free(c);
    assert_int_equal(count(f, "POST", "/api/v1/namespaces/" KT_NS "/pods"), pods);
    c = kt_shell(&e, &other, "echo two");
    assert_int_equal(c->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(c->error, "principal 'tester' holds 1 sandbox of per_session"));
    sbx_completion_free(c);
    assert_int_equal(count(f, "POST", "/api/v1/namespaces/" KT_NS "/pods"), pods);
    /* the held session still runs through the new engine, and its destroy frees the place */
    c = kt_shell(&e, &held, "echo again");
    expect_ok(c);
    sbx_completion_free(c);
    c = destroy(&e, &held);
    expect_ok(c);
    sbx_completion_free(c);
    sbx_message_free(&held->base);
    c = kt_shell(&e, &other, "echo three");
    expect_ok(c);
    sbx_completion_free(c);
    done(&e, &other);
    free(y);
}

static void test_k8s_stopped_agent_is_unavailable_not_gone(void **state)
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
    char ns[64], pod[128], what[256];
    pod_of(s, ns, pod);
    snprintf(what, sizeof(what), "pods/%s/%s/stop", ns, pod);
    kt_fake_control(f, what, NULL);
    size_t pods_before = count(f, "POST", "/pods");
    c = kt_shell(&e, &s, "true");
    assert_false(succeeded(c));
    assert_true((int)c->error_code == SBX_E_PROVISION || (int)c->error_code == SBX_E_TIMEOUT);
    assert_non_null(strstr(c->error, "not recreated"));
    sbx_completion_free(c);
    assert_int_equal(count(f, "POST", "/pods"), pods_before);
    snprintf(what, sizeof(what), "pods/%s/%s/cont", ns, pod);
    kt_fake_control(f, what, NULL);
    c = kt_shell(&e, &s, "echo back");
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "back\n");
    sbx_completion_free(c);
    done(&e, &s);
}

/* ---- attached pods ---- */

#define EXT_TOKEN "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_k8s_attach_to_external_pod(void **state)
{
    kt_fake *f = *state;
    kt_fake_control(f, "external",
                    "{\"namespace\": \"" KT_NS "\", \"name\": \"team-box\", \"token\": \"" EXT_TOKEN
                    "\"}");
    setenv("KT_EXT_TOKEN", EXT_TOKEN, 1);
    char *y =
        kt_yaml(f, "      environment: attached\n      attach_to: " KT_NS "/team-box\n",
                "network_egress: allow, cpu: 0, memory_mb: 0", "attach_token_env: KT_EXT_TOKEN");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "echo attached");
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "attached\n");
    assert_string_equal(s->sandbox_id, KT_NS "/team-box");
    sbx_completion_free(c);
    /* sbx creates nothing for an attached profile, and destroy leaves the pod */
    assert_int_equal(count(f, "POST", "/"), 0);
    c = destroy(&e, &s);
    expect_ok(c);
    sbx_completion_free(c);
    assert_int_equal(count(f, "DELETE", "/"), 0);
    assert_int_equal(kt_fake_get(f, "/api/v1/namespaces/" KT_NS "/pods/team-box", NULL), 200);
    sbx_message_free(&s->base);
    kt_env_close(&e);
    /* a wrong credential never reaches the agent */
    setenv("KT_EXT_TOKEN", "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", 1);
    y = kt_yaml(f, "      environment: attached\n      attach_to: " KT_NS "/team-box\n",
                "network_egress: allow, cpu: 0, memory_mb: 0", "attach_token_env: KT_EXT_TOKEN");
    kt_env_open(&e, f, y);
    free(y);
    s = NULL;
    c = kt_shell(&e, &s, "echo attached");
    assert_false(succeeded(c));
    assert_int_not_equal(c->error_code, SBX_E_GONE);
    sbx_completion_free(c);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
    unsetenv("KT_EXT_TOKEN");
}

/* An attached pod without the agent: commands through the exec API (WebSocket, v5), with the
 * capabilities that path has (no files, no kernel). */
static void test_k8s_attached_pod_without_agent_through_exec_api(void **state)
{
    kt_fake *f = *state;
    kt_fake_control(f, "external",
                    "{\"namespace\": \"" KT_NS "\", \"name\": \"plain\", \"plain\": true}");
    char *y = kt_yaml(f, "      environment: attached\n      attach_to: " KT_NS "/plain\n",
                      "network_egress: allow, cpu: 0, memory_mb: 0", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    /* the pod may still be Pending: attach waits for it */
    sbx_completion *c = kt_shell(&e, &s, "echo out; echo err >&2; exit 3");
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "out\n");
    assert_int_equal(c->result->stderr.len, 4);
    assert_int_equal(c->result->exit_code, 3);
    assert_int_equal(c->result->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    sbx_completion_free(c);
    json_t *ex = kt_requests_matching(f, "GET", "/pods/plain/exec");
    assert_int_equal(json_array_size(ex), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ex, 0), "protocol")),
                        "v5.channel.k8s.io");
    json_decref(ex);
    /* argv, env, cwd and stdin (v5 closes stdin) */
    sbx_request *r = sbx_request_shell("k", "cat; echo \" $SBX_T in $(pwd)\"");
    r->run_command->stdin.data = (uint8_t *)strdup("piped");
    r->run_command->stdin.len = 5;
    r->run_command->cwd = strdup("/tmp");
    r->run_command->env = calloc(1, sizeof(*r->run_command->env));
    r->run_command->env[0] = malloc(sizeof(**r->run_command->env));
    sbx__v1__run_command__env_entry__init(r->run_command->env[0]);
    r->run_command->env[0]->key = strdup("SBX_T");
    r->run_command->env[0]->value = strdup("v");
    r->run_command->n_env = 1;
    c = kt_submit(&e, r, &s);
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "piped v in /tmp\n");
    sbx_completion_free(c);
    r = sbx_request_code("k", "python", "print(6 * 7)");
    c = kt_submit(&e, r, &s);
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "42\n");
    sbx_completion_free(c);
    /* files are not offered on this path */
    r = sbx_request_write_file("k", "x.txt", "x", 1, 0);
    c = kt_submit(&e, r, &s);
    assert_int_equal(c->error_code, SBX_E_CAPABILITY);
    sbx_completion_free(c);
    /* the pod is deleted: GONE, and an attached profile never recreates */
    sbx_completion_free(kt_shell(&e, &s, "true"));
    size_t posts = count(f, "POST", "/");
    assert_int_equal(kt_fake_delete(f, "/api/v1/namespaces/" KT_NS "/pods/plain"), 200);
    for (int i = 0;
         i < 200 && kt_fake_get(f, "/api/v1/namespaces/" KT_NS "/pods/plain", NULL) != 404; i++)
        usleep(50000);
    c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_GONE);
    sbx_completion_free(c);
    assert_int_equal(count(f, "POST", "/"), posts);
    sbx_message_free(&s->base);
    s = NULL;
    kt_env_close(&e);
}

/* The policy's timeout: the agent kills the whole tree in a managed pod (TIMED_OUT with the
 * output so far); the exec API cannot kill, and says so. */
static void test_k8s_timeouts_end_the_call(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, NULL, "network_egress: allow, timeout_ms: 1000", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "echo started; sleep 30");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    assert_non_null(c->result);
    assert_int_equal(c->result->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    assert_string_equal(kt_stdout(c), "started\n");
    sbx_completion_free(c);
    done(&e, &s);
    kt_fake_control(f, "external",
                    "{\"namespace\": \"" KT_NS "\", \"name\": \"slow\", \"plain\": true}");
    y = kt_yaml(f, "      environment: attached\n      attach_to: " KT_NS "/slow\n",
                "network_egress: allow, cpu: 0, memory_mb: 0, timeout_ms: 1000", NULL);
    kt_env_open(&e, f, y);
    free(y);
    c = kt_shell(&e, &s, "echo started; sleep 4");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    assert_non_null(strstr(c->error, "may still run"));
    sbx_completion_free(c);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
}

/* ---- user mode ---- */

static sbx_completion *as_user(kt_env *e, sbx_session_handle **s, const char *subject,
                               const char *groups)
{
    sbx_request *r = sbx_request_shell("k", "echo hi");
    r->principal = sbx_principal_new();
    r->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    sbx_set_string(&r->principal->subject, subject);
    if (groups != NULL) {
        r->principal->credentials = calloc(1, sizeof(*r->principal->credentials));
        r->principal->credentials[0] = malloc(sizeof(**r->principal->credentials));
        sbx__v1__principal__credentials_entry__init(r->principal->credentials[0]);
        r->principal->credentials[0]->key = strdup("groups");
        r->principal->credentials[0]->value = strdup(groups);
        r->principal->n_credentials = 1;
    }
    return kt_submit(e, r, s);
}

static void test_k8s_user_mode_impersonates_the_principal(void **state)
{
    kt_fake *f = *state;
    kt_fake_control(f, "config", "{\"allowed_users\": [\"alice\"]}");
    char *y = kt_yaml(f, "      identity: { mode: user }\n", "network_egress: allow",
                      "impersonate: true");
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = as_user(&e, &s, "alice", "devs,ml");
    expect_ok(c);
    assert_string_equal(kt_stdout(c), "hi\n");
    sbx_completion_free(c);
    json_t *posts = kt_requests_matching(f, "POST", "/pods");
    json_t *req = json_array_get(posts, 0);
    assert_string_equal(json_string_value(json_object_get(req, "user")), "alice");
    json_t *groups = json_object_get(req, "groups");
    assert_int_equal(json_array_size(groups), 2);
    assert_string_equal(json_string_value(json_array_get(groups, 0)), "devs");
    assert_string_equal(json_string_value(json_array_get(groups, 1)), "ml");
    json_decref(posts);
    /* disposal runs under the worker's own identity */
    sbx_request *r = sbx_request_new();
    r->destroy = malloc(sizeof(*r->destroy));
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    r->principal = sbx_principal_new();
    r->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    sbx_set_string(&r->principal->subject, "alice");
    c = kt_submit(&e, r, &s);
    expect_ok(c);
    sbx_completion_free(c);
    json_t *dels = kt_requests_matching(f, "DELETE", "/pods/");
    assert_true(json_array_size(dels) > 0);
    assert_true(json_is_null(json_object_get(json_array_get(dels, 0), "user")));
    json_decref(dels);
    sbx_message_free(&s->base);
    s = NULL;
    /* another user the cluster does not allow: PERMISSION_DENIED, nothing left */
    c = as_user(&e, &s, "mallory", NULL);
    assert_int_equal(c->error_code, SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(c->error, "mallory"));
    sbx_completion_free(c);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
}

static void test_k8s_user_mode_needs_impersonate(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, "      identity: { mode: user }\n", "network_egress: allow", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = as_user(&e, &s, "alice", NULL);
    assert_false(succeeded(c));
    assert_int_equal(count(f, "POST", "/"), 0);
    sbx_completion_free(c);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
}

/* ---- the sweep ---- */

static void test_k8s_sweep_removes_ended_and_orphaned_per_call_pods(void **state)
{
    kt_fake *f = *state;
    char *y = kt_yaml(f, "      scope: per_call\n", "network_egress: allow", NULL);
    /* A per_call sandbox made by a process that died before its destroy (a killed worker). */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sbx_config *cfg = NULL;
        sbx_error err;
        if (sbx_config_load_string(y, strlen(y), "k8s.yaml", &cfg, &err) != SBX_OK)
            _exit(2);
        const sbx_profile_config *pc = sbx_config_profile(cfg, "k");
        const sbx_provider_ops *ops = sbx_provider_lookup("kubernetes");
        sbx_provider_ctx ctx = {
            .profile = "k", .options = pc->options, .node = cfg->node, .scope = SBX_SCOPE_PER_CALL};
        void *st = NULL;
        sbx_sandbox *sb = NULL;
        sbx_session_handle h = SBX__V1__SESSION_HANDLE__INIT;
        sbx_principal pr = SBX__V1__PRINCIPAL__INIT;
        if (ops->open(&ctx, &st, &err) != SBX_OK ||
            ops->create(st, &h, &pr, pc->policy, &sb, &err) != SBX_OK)
            _exit(3);
        _exit(0); /* no destroy */
    }
    int wst;
    waitpid(child, &wst, 0);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    /* Its agent saw its owner's connection close and ended the pod (before: the pod ran on
     * until the sweep). */
    bool orphan_ended = false;
    for (int i = 0; i < 200 && !orphan_ended; i++) {
        if (i > 0)
            usleep(50000);
        json_t *j = NULL;
        kt_fake_get(f, "/api/v1/namespaces/" KT_NS "/pods", &j);
        json_t *items = json_object_get(j, "items");
        const char *ph = json_string_value(
            json_object_get(json_object_get(json_array_get(items, 0), "status"), "phase"));
        orphan_ended = ph != NULL && strcmp(ph, "Succeeded") == 0;
        bool one = json_array_size(items) == 1;
        json_decref(j);
        assert_true(one);
    }
    if (!orphan_ended)
        fail_msg("the orphaned per_call pod still runs 10 s after its owner died");
    /* Two made by this (live) process: one keeps running, one ends. */
    sbx_config *cfg = NULL;
    sbx_error err;
    assert_int_equal(sbx_config_load_string(y, strlen(y), "k8s.yaml", &cfg, &err), SBX_OK);
    const sbx_profile_config *pc = sbx_config_profile(cfg, "k");
    const sbx_provider_ops *ops = sbx_provider_lookup("kubernetes");
    sbx_provider_ctx ctx = {
        .profile = "k", .options = pc->options, .node = cfg->node, .scope = SBX_SCOPE_PER_CALL};
    void *pst = NULL;
    sbx_sandbox *live = NULL, *ended = NULL;
    sbx_session_handle h = SBX__V1__SESSION_HANDLE__INIT;
    sbx_principal pr = SBX__V1__PRINCIPAL__INIT;
    assert_int_equal(ops->open(&ctx, &pst, &err), SBX_OK);
    assert_int_equal(ops->create(pst, &h, &pr, pc->policy, &live, &err), SBX_OK);
    assert_int_equal(ops->create(pst, &h, &pr, pc->policy, &ended, &err), SBX_OK);
    char what[256], path[256];
    snprintf(what, sizeof(what), "pods/%s/end", ended->id);
    kt_fake_control(f, what, NULL);
    snprintf(path, sizeof(path), "/api/v1/namespaces/%.*s/pods/%s",
             (int)(strchr(ended->id, '/') - ended->id), ended->id, strchr(ended->id, '/') + 1);
    for (int i = 0; i < 200; i++) {
        json_t *j = NULL;
        kt_fake_get(f, path, &j);
        const char *ph = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
        bool done_ = ph != NULL && strcmp(ph, "Failed") == 0;
        json_decref(j);
        if (done_)
            break;
        usleep(50000);
    }
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_strlist removed = {0};
    assert_int_equal(sbx_engine_sweep(e.engine, &removed, &err), SBX_OK);
    assert_int_equal(removed.n, 2);
    bool saw_ended = false;
    for (size_t i = 0; i < removed.n; i++) {
        assert_non_null(strstr(removed.items[i], KT_NS "/sbx-sandbox-"));
        assert_null(strstr(removed.items[i], live->id));
        saw_ended |= strstr(removed.items[i], ended->id) != NULL;
    }
    assert_true(saw_ended);
    sbx_strlist_clear(&removed);
    /* the live one still answers */
    sbx_request *r = sbx_request_shell("k", "echo alive");
    sbx_result *res = sbx_result_new();
    sbx_exec_opts o = {.principal = &pr, .policy = pc->policy};
    assert_int_equal(ops->run_command(live, r->run_command, &o, res, &err), SBX_OK);
    assert_int_equal(res->stdout.len, 6);
    sbx_message_free(&res->base);
    sbx_request_free(r);
    assert_int_equal(ops->destroy(pst, live->id, &err), SBX_OK);
    ops->sandbox_close(live);
    ops->sandbox_close(ended);
    ops->close(pst);
    sbx_config_free(cfg);
    assert_int_equal(sbx_engine_sweep(e.engine, &removed, &err), SBX_OK);
    assert_int_equal(removed.n, 0);
    sbx_strlist_clear(&removed);
    kt_env_close(&e);
}

/* A list answer's names are the API server's bytes: the sweep deletes only Kubernetes names.
 * Found by fuzz_kubernetes: listed names went into DELETE paths as they were, and curl resolved
 * a pod "sbx-sandbox-x/../../secrets/victim" to the secret victim. */
static void test_k8s_sweep_deletes_only_kubernetes_names(void **state)
{
    kt_fake *f = *state;
    static const char labels[] = "\"labels\": {\"app.kubernetes.io/managed-by\": \"sbx\", "
                                 "\"sbx.dev/sandbox\": \"true\", \"sbx.dev/profile\": \"k\"}";
    kt_fake_control(f, "object",
                    "{\"resource\": \"secrets\", \"object\": {\"metadata\": "
                    "{\"name\": \"victim\"}}}");
    kt_fake_control(f, "object",
                    "{\"resource\": \"secrets\", \"object\": {\"metadata\": "
                    "{\"name\": \"victim2\"}}}");
    char obj[1024];
    snprintf(obj, sizeof(obj),
             "{\"resource\": \"pods\", \"object\": {\"metadata\": {\"name\": "
             "\"sbx-sandbox-x/../../secrets/victim\", %s}, \"status\": {\"phase\": \"Failed\"}}}",
             labels);
    kt_fake_control(f, "object", obj);
    snprintf(obj, sizeof(obj),
             "{\"resource\": \"secrets\", \"object\": {\"metadata\": {\"name\": "
             "\"sbx-sandbox-y/../victim2\", \"creationTimestamp\": \"2020-01-01T00:00:00Z\", %s}}}",
             labels);
    kt_fake_control(f, "object", obj);
    char *y = kt_yaml(f, NULL, "network_egress: allow", NULL);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_strlist removed = {0};
    sbx_error err;
    assert_int_equal(sbx_engine_sweep(e.engine, &removed, &err), SBX_OK);
    assert_int_equal(removed.n, 0);
    sbx_strlist_clear(&removed);
    assert_int_equal(kt_fake_get(f, "/api/v1/namespaces/" KT_NS "/secrets/victim", NULL), 200);
    assert_int_equal(kt_fake_get(f, "/api/v1/namespaces/" KT_NS "/secrets/victim2", NULL), 200);
    json_t *dels = kt_requests_matching(f, "DELETE", "/");
    assert_int_equal(json_array_size(dels), 0);
    json_decref(dels);
    kt_env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_k8s_providers_shows_capability_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_allowlist_cidrs_become_ip_blocks_domains_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_deny_without_network_policy_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_k8s_fs_write_paths_are_empty_dirs_and_fs_read_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_output_streams_through_the_agent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_ended_pod_is_gone_and_recreated_with_notice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_k8s_stopped_agent_is_unavailable_not_gone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_k8s_attach_to_external_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_attached_pod_without_agent_through_exec_api, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_k8s_user_mode_impersonates_the_principal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_k8s_user_mode_needs_impersonate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_timeouts_end_the_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_sweep_removes_ended_and_orphaned_per_call_pods,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_k8s_principal_sandboxes_count_what_a_restarted_engine_finds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_k8s_sweep_deletes_only_kubernetes_names, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
