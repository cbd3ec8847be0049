/* test_queue_tls.c - the queue over TLS with client certificates: a real nats-server that demands
 * TLS and a certificate of the fleet's CA (verify), one sbx-worker and queue brokers connecting
 * with ca_file, cert_file and key_file. A task runs end to end; a plain connection, a connection
 * without a client certificate and one with a certificate of another CA are refused; and a TLS
 * file that does not load names its setting and the fix before anything connects.
 *
 * usage: test_queue_tls PATH/sbx-worker
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "queue/fleet.h"
#include "sbx/broker.h"

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED
#define WAIT_MS 60000

static const char *worker_bin;
static fleet F;

static int group_setup(void **state)
{
    (void)state;
    fleet_init(&F, worker_bin);
    F.tls = true;
    fleet_start_nats(&F, 1);
    fleet_start_worker(&F, 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    fleet_stop(&F);
    return 0;
}

static char *in_dir(const char *name)
{
    char buf[600];
    snprintf(buf, sizeof buf, "%s/%s", F.dir, name);
    return strdup(buf);
}

/* The fleet's client configuration with its TLS files replaced (NULL: none; names are in the
 * fleet's dir) and, when url is not NULL, another url; opens a queue broker on it and returns
 * the status, the broker (closed when opened) or the error in *err. */
static sbx_status open_with(const char *url, const char *ca, const char *cert, const char *key,
                            sbx_error *err)
{
    sbx_config *c = fleet_client_config(&F);
    sbx_queue_config *q = &c->broker.queue;
    free(q->ca_file);
    free(q->cert_file);
    free(q->key_file);
    q->ca_file = ca != NULL ? in_dir(ca) : NULL;
    q->cert_file = cert != NULL ? in_dir(cert) : NULL;
    q->key_file = key != NULL ? in_dir(key) : NULL;
    if (url != NULL) {
        free(q->url);
        q->url = strdup(url);
    }
    sbx_broker *b = NULL;
    memset(err, 0, sizeof *err);
    sbx_status st = sbx_broker_open_queue(q, &b, err);
    sbx_broker_free(b);
    sbx_config_free(c);
    return st;
}

static void test_queue_task_runs_over_mutual_tls(void **state)
{
    (void)state;
    assert_non_null(strstr(F.url, "tls://127.0.0.1:"));
    sbx_broker *b = fleet_broker(&F, NULL);
    sbx_request *r = sbx_request_shell("oneshot", "echo over-tls");
    assert_true(sbx_request_set_principal(r, 0, "alice"));
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, WAIT_MS, NULL, &c), SBX_OK);
    assert_non_null(c);
    if (c->status != OK_STATUS)
        fail_msg("the task failed: %s", c->error);
    assert_memory_equal(c->result->stdout.data, "over-tls\n", 9);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* What nats-server refuses (it demands TLS and verifies the client's certificate), and what the
 * client refuses (a server certificate its ca_file does not vouch for): no connection, and the
 * error carries libnats' own reason (before, its text was dropped: "SSL Error ()"). */
static void test_queue_connections_without_the_fleets_client_certificate_are_refused(void **state)
{
    (void)state;
    char plain[64];
    const char *port = strrchr(F.url, ':');
    snprintf(plain, sizeof plain, "nats://127.0.0.1%s", port);
    static const struct {
        const char *what, *ca, *cert, *key, *reason, *hint;
        bool plain;
    } cases[] = {
        /* the server's INFO demands TLS; without ca_file the system's CAs do not know its CA */
        {"a plain connection", NULL, NULL, NULL,
         "SSL handshake error: 20:unable to get local issuer certificate",
         "the TLS handshake failed: check ca_file", true},
        {"no client certificate", "ca.pem", NULL, NULL, "Expected 'PONG'",
         "does it demand a client certificate (cert_file and key_file", false},
        {"a certificate of another CA", "ca.pem", "rogue.pem", "rogue.key", "Expected 'PONG'",
         "signed by a CA it trusts", false},
        {"a server certificate of another CA", "other-ca.pem", "client.pem", "client.key",
         "SSL handshake error: 20:unable to get local issuer certificate",
         "the TLS handshake failed: check ca_file (the CA that signs the NATS servers'", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sbx_error err;
        sbx_status st = open_with(cases[i].plain ? plain : NULL, cases[i].ca, cases[i].cert,
                                  cases[i].key, &err);
        if (st == SBX_OK)
            fail_msg("%s was accepted", cases[i].what);
        if (strstr(err.message, "queue broker: connecting to ") == NULL ||
            strstr(err.message, cases[i].reason) == NULL ||
            strstr(err.message, cases[i].hint) == NULL)
            fail_msg("%s: '%s' lacks '%s' or '%s'", cases[i].what, err.message, cases[i].reason,
                     cases[i].hint);
    }
}

static void test_queue_tls_files_that_do_not_load_name_their_setting(void **state)
{
    (void)state;
    static const struct {
        const char *ca, *cert, *key, *setting, *file, *fix;
    } cases[] = {
        {"none.pem", "client.pem", "client.key", "ca_file", "none.pem",
         "give a readable PEM file of the CA that signs the NATS servers' certificates"},
        {"client.key", "client.pem", "client.key", "ca_file", "client.key", "of the CA"},
        {"ca.pem", "none.pem", "client.key", "cert_file", "none.pem",
         "give the client certificate (PEM) in cert_file and, in key_file, its unencrypted key"},
        {"ca.pem", "client.pem", "rogue.key", "cert_file", "client.pem",
         "the one it was issued for"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sbx_error err;
        assert_int_equal(open_with(NULL, cases[i].ca, cases[i].cert, cases[i].key, &err),
                         SBX_E_CONFIG);
        char want[700];
        snprintf(want, sizeof want, "sandbox.broker.queue.%s '%s/%s' does not load",
                 cases[i].setting, F.dir, cases[i].file);
        if (strstr(err.message, want) == NULL || strstr(err.message, cases[i].fix) == NULL)
            fail_msg("case %zu: '%s' lacks '%s' or '%s'", i, err.message, want, cases[i].fix);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/sbx-worker\n", argv[0]);
        return 2;
    }
    worker_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_task_runs_over_mutual_tls),
        cmocka_unit_test(test_queue_connections_without_the_fleets_client_certificate_are_refused),
        cmocka_unit_test(test_queue_tls_files_that_do_not_load_name_their_setting),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
