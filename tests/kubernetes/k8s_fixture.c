/* k8s_fixture.c - see k8s_fixture.h. The fake runs as a child process (python3
 * tests/kubernetes/fake_k8s.py); it is stopped with SIGTERM (which kills every agent it started)
 * and reaped by every test that started it.
 */
#include "kubernetes/k8s_fixture.h"

#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "support/die_with_parent.h"

const char *kt_agent(void)
{
    const char *a = getenv("SBX_AGENT");
    if (a == NULL || access(a, X_OK) != 0)
        fail_msg("SBX_AGENT must name the sbx-agent under test");
    return a;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0)
        fail_msg("command failed: %s", cmd);
}

/* A CA, a server certificate for 127.0.0.1 and a client certificate (CN sbx-worker), made with
 * openssl in dir. */
static void make_certs(const char *dir)
{
    sh("cd %s && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
       "-subj /CN=fake-k8s-ca >/dev/null 2>&1 && "
       "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
       "-subj /CN=127.0.0.1 >/dev/null 2>&1 && "
       "printf 'subjectAltName=IP:127.0.0.1\\n' > ext && "
       "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
       "-out server.pem -days 2 -extfile ext >/dev/null 2>&1 && "
       "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
       "-subj /CN=sbx-worker >/dev/null 2>&1 && "
       "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
       "-out client.pem -days 2 >/dev/null 2>&1",
       dir);
}

static void start(kt_fake *f, const char *const *extra, bool tls)
{
    memset(f, 0, sizeof(*f));
    f->tls = tls;
    snprintf(f->dir, sizeof(f->dir), "/tmp/sbx-k8s-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    if (tls)
        make_certs(f->dir);
    const char *src = getenv("SBX_SOURCE_DIR");
    char script[1024];
    snprintf(script, sizeof(script), "%s/tests/kubernetes/fake_k8s.py", src ? src : ".");
    char certs[4][160];
    snprintf(certs[0], sizeof(certs[0]), "%s/server.pem", f->dir);
    snprintf(certs[1], sizeof(certs[1]), "%s/server.key", f->dir);
    snprintf(certs[2], sizeof(certs[2]), "%s/ca.pem", f->dir);
    const char *argv[32] = {"python3", script,     "--token",     KT_TOKEN,
                            "--agent", kt_agent(), "--namespace", KT_NS};
    size_t n = 8;
    if (tls) {
        argv[n++] = "--tls-cert";
        argv[n++] = certs[0];
        argv[n++] = "--tls-key";
        argv[n++] = certs[1];
        argv[n++] = "--client-ca";
        argv[n++] = certs[2];
    }
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    /* The fake's own temporary files (its pods' directories) go here, so stop can check that
     * it left none behind; traversable, as /tmp is, by the agents it runs as other users. */
    snprintf(f->tmp, sizeof(f->tmp), "/tmp/sbx-k8s-tmp-XXXXXX");
    assert_non_null(mkdtemp(f->tmp));
    assert_int_equal(chmod(f->tmp, 0755), 0);
    int out[2];
    assert_int_equal(pipe(out), 0);
    /* SIGTERM, as kt_fake_stop sends: the fake then kills the agents it started and removes
     * its pods' dirs. Forked from the test's main thread (die_with_parent.h). */
    pid_t parent = getpid();
    f->pid = fork();
    assert_true(f->pid >= 0);
    if (f->pid == 0) {
        sbx_test_die_with_parent(parent, SIGTERM);
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        setenv("TMPDIR", f->tmp, 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    FILE *r = fdopen(out[0], "r");
    char line[64] = "";
    if (fgets(line, sizeof(line), r) == NULL || sscanf(line, "PORT %d", &f->port) != 1)
        fail_msg("the fake API server did not start (%s)", line);
    fclose(r);
    snprintf(f->url, sizeof(f->url), "%s://127.0.0.1:%d", tls ? "https" : "http", f->port);
    snprintf(f->kubeconfig, sizeof(f->kubeconfig), "%s/kubeconfig", f->dir);
    FILE *k = fopen(f->kubeconfig, "w");
    assert_non_null(k);
    fprintf(k,
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            "contexts:\n- name: fake\n  context: {cluster: fake, user: worker, namespace: %s}\n"
            "clusters:\n- name: fake\n  cluster:\n    server: \"%s\"\n%s"
            "users:\n- name: worker\n  user:\n%s",
            KT_NS, f->url, tls ? "    certificate-authority: ca.pem\n" : "",
            tls ? "    client-certificate: client.pem\n    client-key: client.key\n"
                : "    token: " KT_TOKEN "\n");
    fclose(k);
}

void kt_fake_start(kt_fake *f, const char *const *extra)
{
    start(f, extra, false);
}

void kt_fake_start_tls(kt_fake *f)
{
    start(f, NULL, true);
}

static void remove_dir(char *dir)
{
    if (dir[0] == '\0')
        return;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    dir[0] = '\0';
}

void kt_fake_stop(kt_fake *f)
{
    if (f->pid > 0) {
        kill(f->pid, SIGTERM);
        int st;
        waitpid(f->pid, &st, 0);
        f->pid = 0;
    }
    char left[sizeof(f->tmp) + 256] = "";
    if (f->tmp[0] != '\0') {
        DIR *d = opendir(f->tmp);
        for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
            if (e->d_name[0] != '.' && left[0] == '\0')
                snprintf(left, sizeof(left), "%s/%s", f->tmp, e->d_name);
        if (d != NULL)
            closedir(d);
    }
    remove_dir(f->dir);
    remove_dir(f->tmp);
    if (left[0] != '\0')
        fail_msg("the fake API server left %s behind after it stopped", left);
}

typedef struct buf {
    char *data;
    size_t len;
} buf;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    buf *b = arg;
    char *g = realloc(b->data, b->len + size * n + 1);
    if (g == NULL)
        return 0;
    b->data = g;
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* One call to the fake (the control endpoints need no credentials; API paths get the token or
 * the client certificate). */
static long call(const kt_fake *f, const char *method, const char *path, const char *body,
                 json_t **out)
{
    CURL *h = curl_easy_init();
    char url[512];
    snprintf(url, sizeof(url), "%s%s", f->url, path);
    buf b = {0};
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (!f->tls)
        hdr = curl_slist_append(hdr, "Authorization: Bearer " KT_TOKEN);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    char p[160];
    if (f->tls) {
        snprintf(p, sizeof(p), "%s/ca.pem", f->dir);
        curl_easy_setopt(h, CURLOPT_CAINFO, p);
        char c[160], k[160];
        snprintf(c, sizeof(c), "%s/client.pem", f->dir);
        snprintf(k, sizeof(k), "%s/client.key", f->dir);
        curl_easy_setopt(h, CURLOPT_SSLCERT, c);
        curl_easy_setopt(h, CURLOPT_SSLKEY, k);
    }
    if (body != NULL)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    long status = 0;
    if (curl_easy_perform(h) != CURLE_OK)
        fail_msg("fake: %s %s failed", method, path);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    if (out != NULL)
        *out = b.data != NULL ? json_loads(b.data, 0, NULL) : NULL;
    free(b.data);
    return status;
}

void kt_fake_control(const kt_fake *f, const char *what, const char *json)
{
    char path[256];
    snprintf(path, sizeof(path), "/_fake/%s", what);
    if (call(f, "POST", path, json != NULL ? json : "{}", NULL) != 200)
        fail_msg("fake control %s failed", what);
}

json_t *kt_fake_requests(const kt_fake *f)
{
    json_t *j = NULL;
    assert_int_equal(call(f, "GET", "/_fake/requests", NULL, &j), 200);
    json_t *r = json_incref(json_object_get(j, "requests"));
    json_decref(j);
    assert_true(json_is_array(r));
    return r;
}

json_t *kt_requests_matching(const kt_fake *f, const char *method, const char *path_part)
{
    json_t *all = kt_fake_requests(f), *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(all, i, r)
    {
        const char *m = json_string_value(json_object_get(r, "method"));
        const char *p = json_string_value(json_object_get(r, "path"));
        if (m != NULL && p != NULL && strcmp(m, method) == 0 && strstr(p, path_part) != NULL)
            json_array_append(out, r);
    }
    json_decref(all);
    return out;
}

long kt_fake_get(const kt_fake *f, const char *path, json_t **body)
{
    return call(f, "GET", path, NULL, body);
}

long kt_fake_delete(const kt_fake *f, const char *path)
{
    return call(f, "DELETE", path, NULL, NULL);
}

char *kt_yaml(const kt_fake *f, const char *profile_extra, const char *policy, const char *options)
{
    char *y = NULL;
    if (asprintf(&y,
                 "sandbox:\n"
                 "  node: kt-node\n"
                 "  secret_file: %s/secret\n"
                 "  profiles:\n"
                 "    k:\n"
                 "      type: kubernetes\n"
                 "%s"
                 "      policy: { pids: 0%s%s }\n"
                 "      kubernetes: { kubeconfig: \"%s\", agent_image: \"sbx/agent:test\", "
                 "image: \"python:3.12-slim\"%s%s }\n",
                 f->dir, profile_extra != NULL ? profile_extra : "", policy ? ", " : "",
                 policy ? policy : "", f->kubeconfig, options ? ", " : "",
                 options ? options : "") < 0)
        return NULL;
    return y;
}

void kt_env_open(kt_env *e, const kt_fake *f, const char *yaml)
{
    (void)f;
    memset(e, 0, sizeof(*e));
    sbx_error err;
    if (sbx_config_load_string(yaml, strlen(yaml), "k8s.yaml", &e->cfg, &err) != SBX_OK)
        fail_msg("config: %s", err.message);
    if (sbx_engine_new(e->cfg, &e->engine, &err) != SBX_OK)
        fail_msg("engine: %s", err.message);
    assert_int_equal(sbx_broker_open_embedded(e->engine, &e->broker, &err), SBX_OK);
}

void kt_env_close(kt_env *e)
{
    sbx_broker_free(e->broker);
    sbx_engine_free(e->engine);
    sbx_config_free(e->cfg);
    memset(e, 0, sizeof(*e));
}

sbx_completion *kt_submit(kt_env *e, sbx_request *r, sbx_session_handle **session)
{
    sbx_set_string(&r->profile, "k");
    if (r->principal == NULL) {
        r->principal = sbx_principal_new();
        sbx_set_string(&r->principal->subject, "tester");
    }
    if (session != NULL && *session != NULL)
        r->session = (sbx_session_handle *)sbx_message_copy(&(*session)->base);
    sbx_completion *c = NULL;
    sbx_broker_submit(e->broker, r, SBX_WAIT_FOREVER, NULL, &c);
    sbx_request_free(r);
    assert_non_null(c);
    if (session != NULL && c->session != NULL && c->session->session_id[0] != '\0') {
        if (*session != NULL)
            sbx_message_free(&(*session)->base);
        *session = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    }
    return c;
}

sbx_completion *kt_shell(kt_env *e, sbx_session_handle **session, const char *line)
{
    sbx_request *r = sbx_request_new();
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, line);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    return kt_submit(e, r, session);
}

const char *kt_stdout(const sbx_completion *c)
{
    static char out[8192];
    out[0] = '\0';
    if (c != NULL && c->result != NULL) {
        size_t n =
            c->result->stdout.len < sizeof(out) - 1 ? c->result->stdout.len : sizeof(out) - 1;
        memcpy(out, c->result->stdout.data, n);
        out[n] = '\0';
    }
    return out;
}
