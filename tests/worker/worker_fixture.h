/* worker_fixture.h - starts a real sbx-worker in-process for tests: the engine over the fake
 * provider, the thread broker, the worker's event loop on its own thread, bound to an ephemeral
 * loopback port; plus helpers for requests, remote clients and throwaway TLS material. */
#ifndef SBX_TESTS_WORKER_FIXTURE_H
#define SBX_TESTS_WORKER_FIXTURE_H

#include <pthread.h>
#include <stdbool.h>

#include "sbx/broker.h"
#include "sbx/worker.h"

typedef struct worker_fixture {
    char dir[256]; /* unique temp dir (secret file, certificates) */
    sbx_config *cfg;
    sbx_engine *engine;
    sbx_broker *broker;
    sbx_worker *worker;
    pthread_t thread;
    bool running;
    int port;
    char endpoint[128]; /* http://127.0.0.1:PORT or https://localhost:PORT */
} worker_fixture;

/* Options applied to cfg->worker before the worker starts. */
typedef struct worker_fixture_opts {
    bool tls;                 /* serve h2 over TLS with certificates from fixture_make_pki */
    bool mtls;                /* verify client certificates against the test CA */
    const char *token_env;    /* a token caller reading this env var */
    const char *cert_subject; /* a certificate caller with this CN */
    const char *subjects;     /* comma-separated subjects the callers may assert ("*") */
    long max_message_bytes;   /* 0: default */
    int threads;              /* executor threads (0: 4) */
    const char *config_path;  /* load this file instead of the built-in fake config (its
                                 secret_file is redirected into the temp dir) */
    void (*before_run)(sbx_worker *w); /* called after sbx_worker_new, before the loop starts */
} worker_fixture_opts;

/* Creates the temp dir, config (fake profile "fake"), engine, thread broker and worker, and
 * starts the loop. Asserts (cmocka) on failure. */
void fixture_start(worker_fixture *f, const worker_fixture_opts *opts);
/* Drains and frees everything, removes the temp dir. */
void fixture_stop(worker_fixture *f);

/* Generates support/pki.h's certificates into dir (a cmocka failure when openssl fails). */
void fixture_make_pki(const char *dir);

/* A remote broker to f (ca/cert/key relative to f->dir, or NULL). */
sbx_broker *fixture_client(worker_fixture *f, const char *cert, const char *key,
                           const char *token_env);

/* A run_command request with a shell line on profile "fake" for principal subject. */
sbx_request *fixture_command(const char *shell, const char *subject);

#endif
