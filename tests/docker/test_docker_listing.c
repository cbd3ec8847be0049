/* test_docker_listing.c - the docker provider's container listing (list_held: what each principal
 * holds, read when a restarted worker enforces sandbox.principal_sandboxes) against a scripted
 * fake_daemon on a unix socket, no dockerd: a fake_daemon that fails the list makes the listing
 * fail and report nothing (the engine then refuses to count from zero, as for E2B and Daytona), and
 * a list is read for exactly the live per_session containers, each with its principal. The same
 * fake_daemon fails the network check of a network_egress allow create.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "sbx/contract.h"
#include "sbx/provider.h"

extern const sbx_provider_ops sbx_provider_docker;

/* The scripted daemon: GET /version answers API 1.41; GET .../containers/json answers
 * list_status with list_body; anything else 404. One answer per connection, then close (the
 * provider connects anew for each call). */
typedef struct fake_daemon {
    char dir[32], path[64];
    int fd;
    pthread_t th;
    pthread_mutex_t mu;
    int list_status;
    const char *list_body;
    char last_list_query[4096]; /* as long as a target the daemon reads */
    int lists;
    int net_status; /* GET /networks/{name} */
    const char *net_body;
    int others; /* requests for anything else */
} fake_daemon;

static void answer(int c, int status, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, strlen(body));
    (void)!write(c, head, (size_t)n);
    (void)!write(c, body, strlen(body));
}

static void *daemon_main(void *arg)
{
    fake_daemon *d = arg;
    for (;;) {
        int c = accept(d->fd, NULL, NULL);
        if (c < 0)
            return NULL; /* the socket was shut down */
        char req[8192] = "";
        size_t len = 0;
        while (len < sizeof req - 1 && strstr(req, "\r\n\r\n") == NULL) {
            ssize_t r = read(c, req + len, sizeof req - 1 - len);
            if (r <= 0)
                break;
            len += (size_t)r;
            req[len] = '\0';
        }
        req[len] = '\0';
        char method[16] = "", target[4096] = "";
        if (sscanf(req, "%15s %4095s", method, target) != 2) {
            close(c);
            continue;
        }
        pthread_mutex_lock(&d->mu);
        if (strcmp(target, "/version") == 0) {
            answer(c, 200, "{\"ApiVersion\":\"1.41\",\"MinAPIVersion\":\"1.12\"}");
        } else if (strstr(target, "/networks/") != NULL) {
            answer(c, d->net_status, d->net_body);
        } else if (strstr(target, "/containers/json") != NULL) {
            d->lists++;
            snprintf(d->last_list_query, sizeof d->last_list_query, "%s", target);
            answer(c, d->list_status, d->list_body);
        } else {
            d->others++;
            answer(c, 404, "{\"message\":\"not scripted\"}");
        }
        pthread_mutex_unlock(&d->mu);
        close(c);
    }
}

static int setup(void **state)
{
    fake_daemon *d = calloc(1, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/sbx-dl-XXXXXX");
    assert_non_null(mkdtemp(d->dir));
    snprintf(d->path, sizeof d->path, "%s/docker.sock", d->dir);
    pthread_mutex_init(&d->mu, NULL);
    d->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d->path);
    assert_int_equal(bind(d->fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(d->fd, 16), 0);
    d->list_status = 200;
    d->list_body = "[]";
    d->net_status = 404;
    d->net_body = "{\"message\":\"network bridge not found\"}";
    assert_int_equal(pthread_create(&d->th, NULL, daemon_main, d), 0);
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    fake_daemon *d = *state;
    shutdown(d->fd, SHUT_RDWR);
    pthread_join(d->th, NULL);
    close(d->fd);
    unlink(d->path);
    char cmd[256]; /* the provider made its runtime dir below d->dir */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
    (void)!system(cmd);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return 0;
}

static void script(fake_daemon *d, int status, const char *body)
{
    pthread_mutex_lock(&d->mu);
    d->list_status = status;
    d->list_body = body;
    pthread_mutex_unlock(&d->mu);
}

static void *open_managed(fake_daemon *d, sbx_scope scope)
{
    sbx_error err;
    sbx_options *o = sbx_options_new(sbx_provider_docker.options);
    assert_non_null(o);
    assert_int_equal(sbx_options_set(o, "socket", d->path, &err), SBX_OK);
    assert_int_equal(sbx_options_set(o, "agent", "/bin/true", &err), SBX_OK);
    char run[128];
    snprintf(run, sizeof run, "%s/run", d->dir);
    sbx_provider_ctx ctx = {.profile = "dk",
                            .options = o,
                            .environment = SBX_ENV_MANAGED,
                            .scope = scope,
                            .node = "n1",
                            .runtime_dir = run};
    void *st = NULL;
    sbx_status s = sbx_provider_docker.open(&ctx, &st, &err);
    sbx_options_free(o);
    if (s != SBX_OK)
        fail_msg("open: %s", err.message);
    return st;
}

typedef struct held_log {
    char ids[8][80], subjects[8][80];
    size_t n;
} held_log;

static void held_cb(void *arg, const char *id, const char *subject)
{
    held_log *l = arg;
    if (l->n < 8) {
        snprintf(l->ids[l->n], sizeof l->ids[0], "%s", id);
        snprintf(l->subjects[l->n], sizeof l->subjects[0], "%s", subject);
    }
    l->n++;
}

#define ID(c) c c c c c c c c c c c c c c c c /* a 64-hex container id of one digit */

/* Only live per_session containers count, each for the principal its sbx.owner label names:
 * not an exited one, not a per_call one, not one without an owner or with an id that is not a
 * container reference. The fake_daemon is asked for this node's and this profile's managed ones. */
static void test_docker_list_held_reports_live_per_session_containers(void **state)
{
    fake_daemon *d = *state;
    void *st = open_managed(d, SBX_SCOPE_PER_SESSION);
    script(d, 200,
           "[{\"Id\":\"" ID(
               "1111") "\",\"State\":\"running\",\"Labels\":{\"sbx.owner\":\"alice\"}},"
                       "{\"Id\":\"" ID(
                           "2222") "\",\"State\":\"exited\",\"Labels\":{\"sbx.owner\":\"bob\"}},"
                                   "{\"Id\":\"" ID(
                                       "3333") "\",\"State\":\"running\",\"Labels\":{\"sbx.owner\":"
                                               "\"carol\","
                                               "\"sbx.scope\":\"per_call\"}},"
                                               "{\"Id\":\"" ID(
                                                   "4444") "\",\"State\":\"paused\",\"Labels\":{"
                                                           "\"sbx.owner\":\"dave\"}},"
                                                           "{\"Id\":\"" ID(
                                                               "5555") "\",\"State\":\"running\","
                                                                       "\"Labels\":{}},"
                                                                       "{\"Id\":\"../"
                                                                       "etc\",\"State\":"
                                                                       "\"running\",\"Labels\":{"
                                                                       "\"sbx.owner\":\"eve\"}},"
                                                                       "{\"State\":\"running\","
                                                                       "\"Labels\":{\"sbx.owner\":"
                                                                       "\"frank\"}}]");
    held_log l = {0};
    sbx_error err;
    if (sbx_provider_docker.list_held(st, held_cb, &l, &err) != SBX_OK)
        fail_msg("list_held: %s", err.message);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.ids[0], ID("1111"));
    assert_string_equal(l.subjects[0], "alice");
    assert_string_equal(l.ids[1], ID("4444"));
    assert_string_equal(l.subjects[1], "dave");
    /* the filter names this node and this profile (URL-escaped JSON) */
    assert_non_null(strstr(d->last_list_query, "all=1"));
    assert_non_null(strstr(d->last_list_query, "sbx.node%3Dn1"));
    assert_non_null(strstr(d->last_list_query, "sbx.profile%3Ddk"));
    sbx_provider_docker.close(st);
}

/* A fake_daemon that fails the list, or answers something that is not a list: the listing fails,
 * names what the fake_daemon did, and reports nothing (never a partial count). */
static void test_docker_list_held_failure_reports_nothing(void **state)
{
    fake_daemon *d = *state;
    void *st = open_managed(d, SBX_SCOPE_PER_SESSION);
    const char *bodies[][2] = {
        {"500", "{\"message\":\"injected failure\"}"},
        {"200", "{\"Id\":\"" ID("1111") "\",\"State\":\"running\"}"},
        {"200", "not json"},
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        script(d, atoi(bodies[i][0]), bodies[i][1]);
        held_log l = {0};
        sbx_error err;
        sbx_error_clear(&err);
        sbx_status s = sbx_provider_docker.list_held(st, held_cb, &l, &err);
        if (s == SBX_OK)
            fail_msg("answer %zu: the listing succeeded", i);
        assert_true(err.message[0] != '\0');
        assert_int_equal(l.n, 0);
    }
    sbx_provider_docker.close(st);
}

/* per_call containers end with their request: nothing to count, no call. */
static void test_docker_list_held_per_call_lists_nothing(void **state)
{
    fake_daemon *d = *state;
    void *st = open_managed(d, SBX_SCOPE_PER_CALL);
    int before = d->lists;
    held_log l = {0};
    sbx_error err;
    assert_int_equal(sbx_provider_docker.list_held(st, held_cb, &l, &err), SBX_OK);
    assert_int_equal(l.n, 0);
    assert_int_equal(d->lists, before);
    sbx_provider_docker.close(st);
}

/* network_egress allow asks the daemon about docker.network before anything is made: a daemon
 * that answers the inspect with an error fails the create with its status and words, a network
 * it does not have is named as such, and nothing else is asked for (no container, no image). */
static void test_docker_allow_create_fails_on_the_network_check_answer(void **state)
{
    fake_daemon *d = *state;
    void *st = open_managed(d, SBX_SCOPE_PER_CALL);
    sbx_policy *pol = sbx_policy_new();
    pol->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    const struct {
        int status;
        const char *body, *want;
    } cases[] = {
        {500, "{\"message\":\"daemon is shutting down\"}",
         "inspect of network 'bridge' answered HTTP 500: daemon is shutting down"},
        {503, "not json", "inspect of network 'bridge' answered HTTP 503: not json"},
        {404, "{\"message\":\"network bridge not found\"}",
         "docker.network 'bridge' does not exist (Docker daemon: network bridge not found)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pthread_mutex_lock(&d->mu);
        d->net_status = cases[i].status;
        d->net_body = cases[i].body;
        pthread_mutex_unlock(&d->mu);
        sbx_sandbox *sb = NULL;
        sbx_error err;
        sbx_error_clear(&err);
        assert_int_equal(sbx_provider_docker.create(st, NULL, NULL, pol, &sb, &err),
                         SBX_E_PROVISION);
        assert_null(sb);
        if (strstr(err.message, cases[i].want) == NULL)
            fail_msg("answer %d: '%s' does not say '%s'", cases[i].status, err.message,
                     cases[i].want);
    }
    pthread_mutex_lock(&d->mu);
    int others = d->others;
    pthread_mutex_unlock(&d->mu);
    assert_int_equal(others, 0);
    sbx_message_free((ProtobufCMessage *)pol);
    sbx_provider_docker.close(st);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_docker_list_held_reports_live_per_session_containers),
        T(test_docker_list_held_failure_reports_nothing),
        T(test_docker_list_held_per_call_lists_nothing),
        T(test_docker_allow_create_fails_on_the_network_check_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
