/* worker_fixture.c - see worker_fixture.h. */
#include "worker/worker_fixture.h"
#include "support/pki.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static void *loop_main(void *arg)
{
    worker_fixture *f = arg;
    sbx_error err = {0};
    sbx_status st = sbx_worker_run(f->worker, &err);
    if (st != SBX_OK)
        fprintf(stderr, "worker loop: %s\n", err.message);
    return NULL;
}

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

void fixture_make_pki(const char *dir)
{
    if (!sbx_test_make_pki(dir)) {
        fprintf(stderr, "openssl could not make the test certificates in %s\n", dir);
        fail();
    }
}

static char *path_in(const char *dir, const char *name)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return strdup(buf);
}

void fixture_start(worker_fixture *f, const worker_fixture_opts *opts)
{
    static const worker_fixture_opts none = {0};
    if (!opts)
        opts = &none;
    memset(f, 0, sizeof *f);
    signal(SIGPIPE, SIG_IGN);
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(f->dir, sizeof f->dir, "%s/sbx-worker-test-XXXXXX", tmp);
    assert_non_null(mkdtemp(f->dir));
    if (opts->tls)
        fixture_make_pki(f->dir);

    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n"
             "  default_profile: fake\n"
             "  secret_file: %s/secret\n"
             "  runtime_dir: %s/run\n"
             "  node: test-node\n"
             "  broker: { flavor: thread, threads: %d, queue_depth: 4096 }\n"
             "  profiles:\n"
             "    fake: { type: fake, scope: per_call }\n",
             f->dir, f->dir, opts->threads > 0 ? opts->threads : 4);
    sbx_error err = {0};
    sbx_status st = opts->config_path ? sbx_config_load(opts->config_path, &f->cfg, &err)
                                      : sbx_config_load_string(yaml, strlen(yaml),
                                                               "worker-test.yaml", &f->cfg, &err);
    if (st == SBX_OK && opts->config_path) {
        free(f->cfg->secret_file);
        f->cfg->secret_file = path_in(f->dir, "secret");
    }
    if (st != SBX_OK)
        fprintf(stderr, "config: %s\n", err.message);
    assert_int_equal(st, SBX_OK);

    sbx_worker_config *wc = &f->cfg->worker;
    free(wc->listen);
    wc->listen = strdup("127.0.0.1:0");
    if (opts->max_message_bytes)
        wc->max_message_bytes = opts->max_message_bytes;
    if (opts->tls) {
        wc->tls_cert_file = path_in(f->dir, "server.pem");
        wc->tls_key_file = path_in(f->dir, "server.key");
        if (opts->mtls)
            wc->tls_client_ca_file = path_in(f->dir, "ca.pem");
    }
    size_t n = (opts->token_env ? 1 : 0) + (opts->cert_subject ? 1 : 0);
    if (n) {
        wc->callers = calloc(n, sizeof *wc->callers);
        wc->n_callers = n;
        for (size_t i = 0; i < n; i++) {
            sbx_worker_caller *c = &wc->callers[i];
            bool token = opts->token_env && i == 0;
            c->name = strdup(token ? "token-caller" : "cert-caller");
            c->token_env = token ? xstrdup(opts->token_env) : NULL;
            c->cert_subject = token ? NULL : xstrdup(opts->cert_subject);
            char *list = strdup(opts->subjects ? opts->subjects : "*");
            for (char *save = NULL, *s = strtok_r(list, ",", &save); s;
                 s = strtok_r(NULL, ",", &save)) {
                c->subjects = realloc(c->subjects, (c->n_subjects + 1) * sizeof *c->subjects);
                c->subjects[c->n_subjects++] = strdup(s);
            }
            free(list);
        }
    }

    st = sbx_engine_new(f->cfg, &f->engine, &err);
    if (st != SBX_OK)
        fprintf(stderr, "engine: %s\n", err.message);
    assert_int_equal(st, SBX_OK);
    sbx_thread_broker_opts bo = {
        .threads = opts->threads > 0 ? opts->threads : 4, .queue_depth = 4096, .lru_size = 4096};
    st = sbx_broker_open_thread(f->engine, &bo, &f->broker, &err);
    assert_int_equal(st, SBX_OK);
    st = sbx_worker_new(f->cfg, f->engine, f->broker, &f->worker, &err);
    if (st != SBX_OK)
        fprintf(stderr, "worker: %s\n", err.message);
    assert_int_equal(st, SBX_OK);
    if (opts->before_run)
        opts->before_run(f->worker);
    f->port = sbx_worker_port(f->worker);
    snprintf(f->endpoint, sizeof f->endpoint, "%s://%s:%d", opts->tls ? "https" : "http",
             opts->tls ? "localhost" : "127.0.0.1", f->port);
    assert_int_equal(pthread_create(&f->thread, NULL, loop_main, f), 0);
    f->running = true;
}

void fixture_stop(worker_fixture *f)
{
    if (f->running) {
        sbx_worker_shutdown(f->worker);
        pthread_join(f->thread, NULL);
        f->running = false;
    }
    sbx_worker_free(f->worker);
    sbx_broker_free(f->broker);
    sbx_engine_free(f->engine);
    sbx_config_free(f->cfg);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", f->dir);
}

sbx_broker *fixture_client(worker_fixture *f, const char *cert, const char *key,
                           const char *token_env)
{
    sbx_remote_config rc = {0};
    rc.endpoint = f->endpoint;
    char *ca = strncmp(f->endpoint, "https", 5) == 0 ? path_in(f->dir, "ca.pem") : NULL;
    char *c = cert ? path_in(f->dir, cert) : NULL;
    char *k = key ? path_in(f->dir, key) : NULL;
    rc.ca_file = ca;
    rc.cert_file = c;
    rc.key_file = k;
    rc.token_env = (char *)token_env;
    rc.connect_timeout_ms = 10000;
    sbx_broker *b = NULL;
    sbx_error err = {0};
    sbx_status st = sbx_broker_open_remote(&rc, &b, &err);
    if (st != SBX_OK)
        fprintf(stderr, "remote: %s\n", err.message);
    assert_int_equal(st, SBX_OK);
    free(ca);
    free(c);
    free(k);
    return b;
}

sbx_request *fixture_command(const char *shell, const char *subject)
{
    sbx_request *req = sbx_request_new();
    assert_non_null(req);
    sbx_set_string(&req->profile, "fake");
    if (subject) {
        req->principal = sbx_principal_new();
        req->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT;
        sbx_set_string(&req->principal->subject, subject);
    }
    Sbx__V1__RunCommand *rc = malloc(sizeof *rc);
    sbx__v1__run_command__init(rc);
    sbx_set_string(&rc->shell, shell);
    req->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    req->run_command = rc;
    return req;
}
