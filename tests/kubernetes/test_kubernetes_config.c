/* test_kubernetes_config.c - where the kubernetes provider finds its cluster: kubeconfig
 * contexts with a CA and client certificates (files and embedded -data) or bearer tokens against
 * the fake API server over TLS, the in-cluster service account, and kubeconfig errors that name
 * the file, line and column.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kubernetes/k8s_fixture.h"
#include "providers/common/http.h"
#include "sbx/provider.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Opens the provider on a profile whose kubernetes block is `block`; returns the status and
 * leaves the message in err. */
static sbx_status open_with(const char *block, sbx_error *err)
{
    char *y = NULL;
    assert_true(asprintf(&y,
                         "sandbox:\n  profiles:\n    k:\n      type: kubernetes\n"
                         "      kubernetes: { agent_image: a, %s }\n",
                         block) > 0);
    sbx_config *cfg = NULL;
    if (sbx_config_load_string(y, strlen(y), "k.yaml", &cfg, err) != SBX_OK)
        fail_msg("config: %s", err->message);
    free(y);
    const sbx_profile_config *pc = sbx_config_profile(cfg, "k");
    const sbx_provider_ops *ops = sbx_provider_lookup("kubernetes");
    sbx_provider_ctx ctx = {.profile = "k", .options = pc->options, .node = "n"};
    void *st = NULL;
    sbx_status s = ops->open(&ctx, &st, err);
    if (s == SBX_OK)
        ops->close(st);
    sbx_config_free(cfg);
    return s;
}

static void expect_error(const char *dir, const char *kubeconfig, const char *where,
                         const char *what)
{
    char path[256], block[512];
    snprintf(path, sizeof(path), "%s/bad-kubeconfig", dir);
    write_file(path, kubeconfig);
    snprintf(block, sizeof(block), "kubeconfig: \"%s\"", path);
    sbx_error err;
    assert_int_equal(open_with(block, &err), SBX_E_CONFIG);
    char loc[300];
    snprintf(loc, sizeof(loc), "kubeconfig %s:%s", path, where);
    if (strstr(err.message, loc) == NULL || strstr(err.message, what) == NULL)
        fail_msg("got: %s (want %s ... %s)", err.message, loc, what);
}

#define HEAD "apiVersion: v1\nkind: Config\n"
#define CTX "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
#define CLUSTER "clusters:\n- name: k\n  cluster: {server: \"https://10.0.0.1:6443\"}\n"
#define USER "users:\n- name: u\n  user: {token: t0k}\n"

static void test_k8s_kubeconfig_errors_are_located(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-k8s-cfg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* line 3 is the current-context naming a context that does not exist */
    expect_error(dir, HEAD "current-context: nope\n" CTX CLUSTER USER, "3:18",
                 "no contexts named 'nope'");
    /* the context names a cluster that is not defined: located at the context's cluster key */
    expect_error(dir,
                 HEAD "current-context: c\ncontexts:\n- name: c\n  context: {cluster: gone, "
                      "user: u}\n" CLUSTER USER,
                 "6:22", "no clusters named 'gone'");
    expect_error(dir,
                 HEAD "current-context: c\n" CTX CLUSTER
                      "users:\n- name: u\n  user:\n    exec: {command: aws}\n",
                 "13:11", "uses 'exec'");
    expect_error(dir,
                 HEAD "current-context: c\n" CTX
                      "clusters:\n- name: k\n  cluster:\n    server: \"https://10.0.0.1\"\n"
                      "    insecure-skip-tls-verify: true\n" USER,
                 "11:31", "insecure-skip-tls-verify is refused");
    expect_error(dir,
                 HEAD "current-context: c\n" CTX
                      "clusters:\n- name: k\n  cluster: {server: \"http://10.0.0.1:8080\"}\n" USER,
                 "9:12", "must be https://");
    /* plain http whose host only starts like loopback: the bearer token would go in clear text
     * to another machine (a prefix test accepted these) */
    static const char *const not_loopback[] = {
        "http://127.attacker.example/",     "http://127.0.0.1.nip.io:80",
        "http://localhost.evil:80",         "http://127.0.0.1@evil.example:80",
        "http://localhost:80@evil.example", "http://[::1].evil.example"};
    for (size_t i = 0; i < sizeof(not_loopback) / sizeof(not_loopback[0]); i++) {
        char doc[512];
        snprintf(doc, sizeof(doc),
                 HEAD "current-context: c\n" CTX
                      "clusters:\n- name: k\n  cluster: {server: \"%s\"}\n" USER,
                 not_loopback[i]);
        expect_error(dir, doc, "9:12", "https://"); /* must be, or is not a URL of the form */
    }
    /* a server libcurl would repair is refused as written (fuzz_k8s_kubeconfig kept
     * "https:/.10.0.0.1:6443", which then did not begin with https://) */
    expect_error(dir,
                 HEAD "current-context: c\n" CTX
                      "clusters:\n- name: k\n  cluster: {server: \"https:/.10.0.0.1:6443\"}\n" USER,
                 "9:12", "is not a URL of the form https://");
    expect_error(dir, HEAD "current-context: c\n" CTX CLUSTER "users:\n- name: u\n  user: {}\n",
                 "12:9", "has no credentials");
    expect_error(dir, HEAD "current-context: [c\n", "4:1", "");
    /* a missing file names the file */
    sbx_error err;
    assert_int_equal(open_with("kubeconfig: /nonexistent/kubeconfig", &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "/nonexistent/kubeconfig"));
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void run_one(kt_fake *f, const char *kubeconfig_path)
{
    char *y = NULL;
    assert_true(
        asprintf(&y,
                 "sandbox:\n  secret_file: %s/secret\n  profiles:\n    k:\n"
                 "      type: kubernetes\n      policy: { network_egress: allow, pids: 0 }\n"
                 "      kubernetes: { kubeconfig: \"%s\", agent_image: a }\n",
                 f->dir, kubeconfig_path) > 0);
    kt_env e;
    kt_env_open(&e, f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "echo over tls");
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("%s", c->error);
    assert_string_equal(kt_stdout(c), "over tls\n");
    sbx_completion_free(c);
    sbx_request *r = sbx_request_new();
    r->destroy = malloc(sizeof(*r->destroy));
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    sbx_completion_free(kt_submit(&e, r, &s));
    sbx_message_free(&s->base);
    kt_env_close(&e);
}

static char *b64_of_file(const char *path)
{
    char *text = slurp(path);
    char *b = sbx_http_base64_encode(text, strlen(text));
    free(text);
    return b;
}

static void test_k8s_tls_client_certificates_files_and_data(void **state)
{
    (void)state;
    kt_fake f;
    kt_fake_start_tls(&f);
    /* files, relative to the kubeconfig's directory */
    run_one(&f, f.kubeconfig);
    /* the same material embedded (-data) */
    char p[256];
    snprintf(p, sizeof(p), "%s/ca.pem", f.dir);
    char *ca = b64_of_file(p);
    snprintf(p, sizeof(p), "%s/client.pem", f.dir);
    char *cert = b64_of_file(p);
    snprintf(p, sizeof(p), "%s/client.key", f.dir);
    char *key = b64_of_file(p);
    char *kc = NULL;
    assert_true(asprintf(&kc,
                         HEAD "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, "
                              "user: u, namespace: " KT_NS "}\n"
                              "clusters:\n- name: k\n  cluster:\n    server: \"%s\"\n"
                              "    certificate-authority-data: %s\n"
                              "users:\n- name: u\n  user:\n    client-certificate-data: %s\n"
                              "    client-key-data: %s\n",
                         f.url, ca, cert, key) > 0);
    snprintf(p, sizeof(p), "%s/kubeconfig-data", f.dir);
    write_file(p, kc);
    run_one(&f, p);
    /* a bearer token over TLS, from a tokenFile */
    char tf[256];
    snprintf(tf, sizeof(tf), "%s/token", f.dir);
    write_file(tf, KT_TOKEN "\n");
    free(kc);
    assert_true(asprintf(&kc,
                         HEAD "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, "
                              "user: u, namespace: " KT_NS "}\n"
                              "clusters:\n- name: k\n  cluster:\n    server: \"%s\"\n"
                              "    certificate-authority-data: %s\n"
                              "users:\n- name: u\n  user: {tokenFile: token}\n",
                         f.url, ca) > 0);
    snprintf(p, sizeof(p), "%s/kubeconfig-token", f.dir);
    write_file(p, kc);
    run_one(&f, p);
    /* the exec API (WebSocket upgrade) over the same TLS: an attached pod without the agent */
    kt_fake_control(&f, "external",
                    "{\"namespace\": \"" KT_NS "\", \"name\": \"plain\", \"plain\": true}");
    char *ya = NULL;
    assert_true(asprintf(&ya,
                         "sandbox:\n  secret_file: %s/secret\n  profiles:\n    k:\n"
                         "      type: kubernetes\n      environment: attached\n"
                         "      attach_to: " KT_NS "/plain\n"
                         "      policy: { network_egress: allow, pids: 0, cpu: 0, memory_mb: 0 }\n"
                         "      kubernetes: { kubeconfig: \"%s\" }\n",
                         f.dir, f.kubeconfig) > 0);
    kt_env ea;
    kt_env_open(&ea, &f, ya);
    free(ya);
    sbx_session_handle *sa = NULL;
    sbx_completion *ca_ = kt_shell(&ea, &sa, "echo exec over tls");
    if (ca_->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("%s", ca_->error);
    assert_string_equal(kt_stdout(ca_), "exec over tls\n");
    sbx_completion_free(ca_);
    sbx_message_free(&sa->base);
    kt_env_close(&ea);
    /* a CA that did not sign the server: refused, nothing reaches the API */
    free(kc);
    assert_true(asprintf(&kc,
                         HEAD "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, "
                              "user: u, namespace: " KT_NS "}\n"
                              "clusters:\n- name: k\n  cluster:\n    server: \"%s\"\n"
                              "    certificate-authority: /etc/ssl/certs/ca-certificates.crt\n"
                              "users:\n- name: u\n  user: {tokenFile: token}\n",
                         f.url) > 0);
    snprintf(p, sizeof(p), "%s/kubeconfig-wrong-ca", f.dir);
    write_file(p, kc);
    char *y = NULL;
    assert_true(
        asprintf(&y,
                 "sandbox:\n  secret_file: %s/secret\n  profiles:\n    k:\n"
                 "      type: kubernetes\n      policy: { network_egress: allow, pids: 0 }\n"
                 "      kubernetes: { kubeconfig: \"%s\", agent_image: a }\n",
                 f.dir, p) > 0);
    kt_env e;
    kt_env_open(&e, &f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "true");
    assert_int_equal(c->error_code, SBX_E_PROVISION);
    sbx_completion_free(c);
    if (s != NULL)
        sbx_message_free(&s->base);
    kt_env_close(&e);
    json_t *posts = kt_requests_matching(&f, "POST", "/");
    /* the refused connection made no call; the three good ones made theirs */
    assert_int_equal(json_array_size(posts), 3 * 2);
    json_decref(posts);
    free(kc);
    free(ca);
    free(cert);
    free(key);
    kt_fake_stop(&f);
}

static void test_k8s_in_cluster_service_account(void **state)
{
    (void)state;
    kt_fake f;
    kt_fake_start_tls(&f);
    char sa[256], p[300];
    snprintf(sa, sizeof(sa), "%s/serviceaccount", f.dir);
    assert_int_equal(mkdir(sa, 0700), 0);
    snprintf(p, sizeof(p), "%s/token", sa);
    write_file(p, KT_TOKEN);
    snprintf(p, sizeof(p), "%s/namespace", sa);
    write_file(p, KT_NS "\n");
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "cp %s/ca.pem %s/ca.crt", f.dir, sa);
    assert_int_equal(system(cmd), 0);
    char port[16];
    snprintf(port, sizeof(port), "%d", f.port);
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", port, 1);
    char *y = NULL;
    assert_true(
        asprintf(&y,
                 "sandbox:\n  secret_file: %s/secret\n  profiles:\n    k:\n"
                 "      type: kubernetes\n      policy: { network_egress: allow, pids: 0 }\n"
                 "      kubernetes: { service_account_dir: \"%s\", agent_image: a }\n",
                 f.dir, sa) > 0);
    kt_env e;
    kt_env_open(&e, &f, y);
    free(y);
    sbx_session_handle *s = NULL;
    sbx_completion *c = kt_shell(&e, &s, "echo in cluster");
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("%s", c->error);
    /* the namespace came from the service account */
    assert_true(strncmp(s->sandbox_id, KT_NS "/", strlen(KT_NS "/")) == 0);
    sbx_completion_free(c);
    sbx_request *r = sbx_request_new();
    r->destroy = malloc(sizeof(*r->destroy));
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    sbx_completion_free(kt_submit(&e, r, &s));
    sbx_message_free(&s->base);
    kt_env_close(&e);
    /* outside a pod, without a kubeconfig: a CONFIG error saying what to set */
    unsetenv("KUBERNETES_SERVICE_HOST");
    sbx_error err;
    char block[400];
    snprintf(block, sizeof(block), "service_account_dir: \"%s\"", sa);
    assert_int_equal(open_with(block, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "kubernetes.kubeconfig"));
    unsetenv("KUBERNETES_SERVICE_PORT");
    kt_fake_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k8s_kubeconfig_errors_are_located),
        cmocka_unit_test(test_k8s_tls_client_certificates_files_and_data),
        cmocka_unit_test(test_k8s_in_cluster_service_account),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
