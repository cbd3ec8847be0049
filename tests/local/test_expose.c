/* test_expose.c - providers/common/expose.c: the token check of a request head (pure: complete
 * or not, header and cookie, any header case, wrong/short/long tokens, no head end within the
 * bound), the options' validation, and relays into a network namespace of the test's own
 * (root: unshare(CLONE_NEWNET)): the listener is on the host, the connection reaches a server
 * that listens only on 127.0.0.1 inside, the same port twice is the same URL, a token-guarded
 * port answers 401 without it, and the relay ends when the namespace's process is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "providers/common/expose.h"
#include "support/die_with_parent.h"
#include "support/switches.h"

#define TOKEN "0123456789abcdef0123456789abcdef"

static sbx_expose_head check(const char *head)
{
    return sbx_expose_check_head(head, strlen(head), TOKEN);
}

static void test_head_token_check(void **state)
{
    (void)state;
    assert_int_equal(check(""), SBX_EXPOSE_HEAD_MORE);
    assert_int_equal(check("GET / HTTP/1.1\r\nHost: x\r\n"), SBX_EXPOSE_HEAD_MORE);
    assert_int_equal(check("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), SBX_EXPOSE_HEAD_DENIED);
    assert_int_equal(check("GET / HTTP/1.1\r\nX-Sbx-Expose-Token: " TOKEN "\r\n\r\n"),
                     SBX_EXPOSE_HEAD_OK);
    assert_int_equal(check("GET / HTTP/1.1\r\nx-sbx-EXPOSE-token:\t " TOKEN "  \r\n\r\nbody"),
                     SBX_EXPOSE_HEAD_OK);
    assert_int_equal(
        check("GET / HTTP/1.1\r\nCookie: a=b; sbx_expose_token=" TOKEN "; c=d\r\n\r\n"),
        SBX_EXPOSE_HEAD_OK);
    assert_int_equal(check("GET / HTTP/1.1\r\ncookie: sbx_expose_token=" TOKEN "\r\n\r\n"),
                     SBX_EXPOSE_HEAD_OK);
    /* wrong, short, long, in the wrong place */
    assert_int_equal(check("GET / HTTP/1.1\r\nX-Sbx-Expose-Token: " TOKEN "0\r\n\r\n"),
                     SBX_EXPOSE_HEAD_DENIED);
    assert_int_equal(check("GET / HTTP/1.1\r\nX-Sbx-Expose-Token: 0123\r\n\r\n"),
                     SBX_EXPOSE_HEAD_DENIED);
    assert_int_equal(check("GET / HTTP/1.1\r\nX-Sbx-Expose-Token: 1123456789abcdef0123456789abcdef"
                           "\r\n\r\n"),
                     SBX_EXPOSE_HEAD_DENIED);
    assert_int_equal(check("GET /?sbx_expose_token=" TOKEN " HTTP/1.1\r\n\r\n"),
                     SBX_EXPOSE_HEAD_DENIED);
    assert_int_equal(check("GET / HTTP/1.1\r\nCookie: xsbx_expose_token=" TOKEN "\r\n\r\n"),
                     SBX_EXPOSE_HEAD_DENIED);
    assert_int_equal(check("GET / HTTP/1.1\r\nX-Other: X-Sbx-Expose-Token: " TOKEN "\r\n\r\n"),
                     SBX_EXPOSE_HEAD_DENIED);
    /* an empty token never matches */
    const char *h = "GET / HTTP/1.1\r\nX-Sbx-Expose-Token: \r\n\r\n";
    assert_int_equal(sbx_expose_check_head(h, strlen(h), ""), SBX_EXPOSE_HEAD_DENIED);
    /* no head end within the bound */
    char *big = malloc(SBX_EXPOSE_HEAD_MAX + 64);
    assert_non_null(big);
    memset(big, 'a', SBX_EXPOSE_HEAD_MAX + 64);
    assert_int_equal(sbx_expose_check_head(big, SBX_EXPOSE_HEAD_MAX - 1, TOKEN),
                     SBX_EXPOSE_HEAD_MORE);
    assert_int_equal(sbx_expose_check_head(big, SBX_EXPOSE_HEAD_MAX, TOKEN),
                     SBX_EXPOSE_HEAD_TOO_LARGE);
    assert_int_equal(sbx_expose_check_head(big, SBX_EXPOSE_HEAD_MAX + 64, TOKEN),
                     SBX_EXPOSE_HEAD_TOO_LARGE);
    free(big);
}

static void test_config(void **state)
{
    (void)state;
    sbx_expose_cfg c;
    sbx_error err;
    assert_int_equal(sbx_expose_config(NULL, NULL, false, &c, &err), SBX_OK);
    assert_string_equal(c.address, "127.0.0.1");
    assert_string_equal(c.host, "127.0.0.1");
    assert_false(c.token);
    assert_int_equal(sbx_expose_config("127.0.0.2", "", false, &c, &err), SBX_OK);
    assert_false(c.token); /* all of 127/8 is loopback */
    assert_int_equal(sbx_expose_config("127.0.0.1", "", true, &c, &err), SBX_OK);
    assert_true(c.token);
    assert_int_equal(sbx_expose_config("::1", "", false, &c, &err), SBX_OK);
    assert_string_equal(c.host, "[::1]");
    assert_false(c.token);
    assert_int_equal(sbx_expose_config("10.1.2.3", "box.example", false, &c, &err), SBX_OK);
    assert_string_equal(c.host, "box.example");
    assert_true(c.token);
    assert_int_equal(sbx_expose_config("0.0.0.0", "", false, &c, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "expose_host"));
    assert_int_equal(sbx_expose_config("localhost", "", false, &c, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "expose_address 'localhost'"));
    assert_int_equal(sbx_expose_config("127.0.0.1", "a/b", false, &c, &err), SBX_E_CONFIG);
    assert_int_equal(sbx_expose_config("127.0.0.1", "u@h", false, &c, &err), SBX_E_CONFIG);
}

/* ---- relays (root) ---------------------------------------------------------------------- */

static int lo_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr) == 0 ? 0 : errno;
    ifr.ifr_flags |= IFF_UP;
    if (rc == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        rc = errno;
    close(s);
    return rc;
}

/* A child in a network namespace of its own serving "pong\n" to each connection (after reading its
 * request) on 127.0.0.1:*port (there). */
static pid_t park_server(unsigned *port)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        close(p[0]);
        unsigned got = 0;
        int l = -1;
        if (unshare(CLONE_NEWNET) == 0 && lo_up() == 0) {
            l = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = {.sin_family = AF_INET};
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            socklen_t len = sizeof a;
            if (l >= 0 && bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, 16) == 0 &&
                getsockname(l, (struct sockaddr *)&a, &len) == 0)
                got = ntohs(a.sin_port);
        }
        (void)!write(p[1], &got, sizeof got);
        close(p[1]);
        for (;;) {
            int c = accept(l, NULL, NULL);
            if (c < 0)
                _exit(1);
            /* Like an HTTP server: read what the client sent before answering (closing with
             * unread bytes would reset the connection and could drop the answer). */
            struct pollfd pf = {.fd = c, .events = POLLIN};
            char scratch[512];
            if (poll(&pf, 1, 300) == 1)
                (void)!read(c, scratch, sizeof scratch);
            (void)!write(c, "pong\n", 5);
            shutdown(c, SHUT_WR);
            close(c);
        }
    }
    close(p[1]);
    assert_int_equal(read(p[0], port, sizeof *port), (ssize_t)sizeof *port);
    close(p[0]);
    assert_true(*port > 0);
    return pid;
}

/* Connects to the URL's port on 127.0.0.1, sends send (may be NULL), returns what comes back. */
static void fetch(const char *url, const char *send, char *out, size_t cap)
{
    const char *colon = strrchr(url, ':');
    assert_non_null(colon);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {10, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    out[0] = '\0';
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return;
    }
    if (send != NULL)
        assert_int_equal(write(s, send, strlen(send)), (ssize_t)strlen(send));
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(s, out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(s);
}

static void test_relay_into_namespace(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    char dir[] = "/tmp/sbx-expose-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char xdir[64];
    snprintf(xdir, sizeof xdir, "%s/x", dir);
    unsigned inner = 0;
    pid_t target = park_server(&inner);
    sbx_expose_cfg cfg;
    sbx_error err;
    assert_int_equal(sbx_expose_config("127.0.0.1", "", false, &cfg, &err), SBX_OK);
    char *url = NULL, *token = NULL;
    assert_int_equal(sbx_expose_port(&cfg, xdir, target, inner, &url, &token, &err), SBX_OK);
    assert_null(token);
    assert_non_null(strstr(url, "http://127.0.0.1:"));
    char buf[512];
    fetch(url, NULL, buf, sizeof buf);
    assert_string_equal(buf, "pong\n");
    char *url2 = NULL, *token2 = NULL;
    assert_int_equal(sbx_expose_port(&cfg, xdir, target, inner, &url2, &token2, &err), SBX_OK);
    assert_string_equal(url2, url);
    free(url2);
    assert_int_equal(sbx_expose_count(xdir), 1);
    /* a port with a token: 401 without it, through with it */
    sbx_expose_cfg tcfg;
    assert_int_equal(sbx_expose_config("127.0.0.1", "", true, &tcfg, &err), SBX_OK);
    char tdir[64];
    snprintf(tdir, sizeof tdir, "%s/t", dir);
    char *turl = NULL, *ttoken = NULL;
    assert_int_equal(sbx_expose_port(&tcfg, tdir, target, inner, &turl, &ttoken, &err), SBX_OK);
    assert_non_null(ttoken);
    assert_int_equal(strlen(ttoken), SBX_EXPOSE_TOKEN_LEN);
    fetch(turl, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", buf, sizeof buf);
    assert_non_null(strstr(buf, "HTTP/1.1 401"));
    char req[256];
    snprintf(req, sizeof req, "GET / HTTP/1.1\r\nX-Sbx-Expose-Token: %s\r\n\r\n", ttoken);
    fetch(turl, req, buf, sizeof buf);
    assert_string_equal(buf, "pong\n");
    /* the namespace's process gone: the relays end by themselves */
    kill(target, SIGKILL);
    waitpid(target, NULL, 0);
    for (int i = 0; i < 100 && (sbx_expose_count(xdir) > 0 || sbx_expose_count(tdir) > 0); i++)
        usleep(50000);
    assert_int_equal(sbx_expose_count(xdir), 0);
    assert_int_equal(sbx_expose_count(tdir), 0);
    fetch(url, NULL, buf, sizeof buf);
    assert_string_equal(buf, "");
    /* a target that is gone: GONE */
    assert_int_equal(sbx_expose_port(&cfg, xdir, target, inner, &url2, &token2, &err), SBX_E_GONE);
    sbx_expose_close_all(xdir);
    sbx_expose_close_all(tdir);
    struct stat st;
    assert_int_not_equal(stat(xdir, &st), 0);
    free(url);
    free(turl);
    free(ttoken);
    rmdir(dir);
}

/* An idle relay sleeps until something happens (it woke every second); close_all kills a
 * running relay. */
static void test_close_all_kills(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
    }
    char dir[] = "/tmp/sbx-expose-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char xdir[64];
    snprintf(xdir, sizeof xdir, "%s/x", dir);
    unsigned inner = 0;
    pid_t target = park_server(&inner);
    sbx_expose_cfg cfg;
    sbx_error err;
    assert_int_equal(sbx_expose_config(NULL, NULL, false, &cfg, &err), SBX_OK);
    char *url = NULL, *token = NULL;
    assert_int_equal(sbx_expose_port(&cfg, xdir, target, inner, &url, &token, &err), SBX_OK);
    assert_int_equal(sbx_expose_count(xdir), 1);
    char rec[96];
    snprintf(rec, sizeof rec, "%s/%u", xdir, inner);
    FILE *f = fopen(rec, "r");
    long relay = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &relay), 1);
    fclose(f);
    usleep(100000); /* past its start */
    long before = sbx_test_switches(relay);
    usleep(2200000);
    long woke = sbx_test_switches(relay) - before;
    assert_true(before >= 0 && woke <= 1); /* 2 or 3 when it woke every second */
    sbx_expose_close_all(xdir);
    char buf[64];
    fetch(url, NULL, buf, sizeof buf);
    assert_string_equal(buf, "");
    kill(target, SIGKILL);
    waitpid(target, NULL, 0);
    free(url);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_token_check),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_relay_into_namespace),
        cmocka_unit_test(test_close_all_kills),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
