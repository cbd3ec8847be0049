/* test_kubernetes_agent.c - sbx-agent's TCP listener as a pod runs it (`--listen IPV4:PORT
 * --token-env NAME`), started here as a real process on a loopback address: the right credential
 * is served, a wrong one and garbage are dropped, at most AGENT_MAX_UNAUTH (8) silent peers hold
 * a slot (the host's connection evicts the oldest), the token is wiped from the agent's
 * environment, and --listen without a credential does not start.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "kubernetes/k8s_fixture.h"
#include "providers/common/agent_client.h"
#include "support/die_with_parent.h"

#define TOKEN_HEX "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

typedef struct agent_proc {
    pid_t pid;
    char dir[64];
    int port;
} agent_proc;

/* Agents started (0 once stopped), for the group teardown. */
static pid_t started[8];
static size_t n_started;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    socklen_t len = sizeof(sa);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Starts the agent as a pod runs it, with up to three more arguments (NULL ends them). */
static void agent_start_with(agent_proc *a, const char *x1, const char *x2, const char *x3)
{
    snprintf(a->dir, sizeof(a->dir), "/tmp/sbx-k8s-agent-XXXXXX");
    assert_non_null(mkdtemp(a->dir));
    a->port = free_port();
    char sock[128], listen[64];
    snprintf(sock, sizeof(sock), "%s/agent.sock", a->dir);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", a->port);
    pid_t parent = getpid();
    a->pid = fork();
    assert_true(a->pid >= 0);
    if (a->pid == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        /* not our output pipes: a test that fails before agent_stop must not hold ctest */
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        setenv("SBX_T", TOKEN_HEX, 1);
        execl(kt_agent(), "sbx-agent", "--socket", sock, "--workdir", a->dir, "--shared-uid",
              "--listen", listen, "--token-env", "SBX_T", x1, x2, x3, (char *)NULL);
        _exit(127);
    }
    if (n_started < 8)
        started[n_started++] = a->pid;
}

static void agent_start(agent_proc *a)
{
    agent_start_with(a, NULL, NULL, NULL);
}

/* Group teardown: agents of tests that failed before agent_stop. */
static int kill_leftovers(void **state)
{
    (void)state;
    for (size_t i = 0; i < n_started; i++)
        if (started[i] > 0 && kill(started[i], SIGKILL) == 0)
            waitpid(started[i], NULL, 0);
    return 0;
}

static void agent_stop(agent_proc *a)
{
    kill(a->pid, SIGKILL);
    waitpid(a->pid, NULL, 0);
    for (size_t i = 0; i < n_started; i++)
        if (started[i] == a->pid)
            started[i] = 0;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", a->dir);
    assert_int_equal(system(cmd), 0);
}

static void token(uint8_t out[SBX_AGENT_TOKEN_LEN])
{
    for (unsigned i = 0; i < SBX_AGENT_TOKEN_LEN; i++) {
        unsigned v;
        sscanf(TOKEN_HEX + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

/* Connects with the right credential (retrying while the agent starts) and pings. */
static sbx_status ping_with(const agent_proc *a, const uint8_t *tok)
{
    sbx_status st = SBX_E_GONE;
    for (int i = 0; i < 200; i++) {
        sbx_agent_conn *c = NULL;
        sbx_error err;
        st = sbx_agent_connect_tcp("127.0.0.1", a->port, tok, 0, &c, &err);
        if (st == SBX_OK) {
            sbx_agent_pong pong;
            st = sbx_agent_ping(c, sbx_monotonic_ms() + 5000, &pong, &err);
            sbx_agent_close(c);
            return st;
        }
        usleep(20000);
    }
    return st;
}

static int raw_connect(const agent_proc *a)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)a->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* True when the agent closed fd within 3 s (end of stream, or a reset when our bytes were
 * left unread). */
static bool closed_by_agent(int fd)
{
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char b;
    ssize_t r = recv(fd, &b, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
}

static void test_k8s_agent_serves_only_its_credential(void **state)
{
    (void)state;
    agent_proc a;
    agent_start(&a);
    uint8_t good[SBX_AGENT_TOKEN_LEN], bad[SBX_AGENT_TOKEN_LEN];
    token(good);
    memcpy(bad, good, sizeof(bad));
    bad[31] ^= 1;
    assert_int_equal(ping_with(&a, good), SBX_OK);
    assert_int_not_equal(ping_with(&a, bad), SBX_OK);
    /* garbage instead of the credential: dropped */
    int fd = raw_connect(&a);
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\nmore bytes to fill";
    assert_true(send(fd, junk, sizeof(junk), 0) > 0);
    assert_true(closed_by_agent(fd));
    close(fd);
    /* the token is gone from the agent's environment */
    char path[64], env[8192];
    snprintf(path, sizeof(path), "/proc/%ld/environ", (long)a.pid);
    FILE *f = fopen(path, "r");
    if (f != NULL) { /* readable as root; either way the value must not be there */
        size_t n = fread(env, 1, sizeof(env) - 1, f);
        fclose(f);
        env[n] = '\0';
        for (size_t i = 0; i < n; i++)
            if (env[i] == '\0')
                env[i] = '\n';
        assert_null(strstr(env, TOKEN_HEX));
    }
    agent_stop(&a);
}

static void test_k8s_agent_bounds_silent_peers(void **state)
{
    (void)state;
    agent_proc a;
    agent_start(&a);
    uint8_t good[SBX_AGENT_TOKEN_LEN];
    token(good);
    assert_int_equal(ping_with(&a, good), SBX_OK);
    int fds[8];
    for (int i = 0; i < 8; i++)
        fds[i] = raw_connect(&a);
    usleep(200000); /* the agent accepts them */
    /* the host still gets in: its connection evicts the oldest silent peer */
    assert_int_equal(ping_with(&a, good), SBX_OK);
    assert_true(closed_by_agent(fds[0]));
    for (int i = 0; i < 8; i++)
        close(fds[i]);
    agent_stop(&a);
}

static void test_k8s_agent_listen_needs_a_credential(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", 1);
        dup2(devnull, 2);
        execl(kt_agent(), "sbx-agent", "--socket", "/tmp/sbx-k8s-never.sock", "--listen",
              "127.0.0.1:1", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", 1);
        dup2(devnull, 2);
        setenv("SBX_T", "short", 1);
        execl(kt_agent(), "sbx-agent", "--socket", "/tmp/sbx-k8s-never.sock", "--listen",
              "127.0.0.1:1", "--token-env", "SBX_T", (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
}

/* The agent's exit status within ms, or -1 while it still runs then. */
static int exited_within(agent_proc *a, int ms)
{
    for (int i = 0; i <= ms / 20; i++) {
        int ws;
        if (waitpid(a->pid, &ws, WNOHANG) == a->pid) {
            for (size_t k = 0; k < n_started; k++)
                if (started[k] == a->pid)
                    started[k] = 0;
            a->pid = 0;
            return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        }
        usleep(20000);
    }
    return -1;
}

static void remove_dir(agent_proc *a)
{
    if (a->pid > 0) {
        kill(a->pid, SIGKILL);
        waitpid(a->pid, NULL, 0);
    }
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", a->dir);
    assert_int_equal(system(cmd), 0);
}

/* A worker killed between starting a one-shot pod (or container) and connecting to it: before,
 * the box waited for a host until its idle TTL (a day) or a sweep; now it ends after
 * --first-host-s (AGENT_FIRST_HOST_S when not given). A peer without the credential is no
 * host: it does not keep the box. */
static void test_k8s_one_shot_agent_whose_host_never_came_ends(void **state)
{
    (void)state;
    agent_proc a;
    agent_start_with(&a, "--one-shot", "--first-host-s", "1");
    int fd = -1;
    for (int i = 0; i < 200 && fd < 0; i++) { /* listening yet? */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)a.port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
            close(fd);
            fd = -1;
            usleep(10000);
        }
    }
    assert_true(fd >= 0);
    assert_int_equal(exited_within(&a, 500), -1); /* not before its time */
    int st = exited_within(&a, 4000);
    close(fd);
    if (st != 0)
        fail_msg("a one-shot agent nobody connected to: %s",
                 st < 0 ? "still running 4.5 s later" : "did not exit 0");
    remove_dir(&a);
}

static void test_k8s_one_shot_agent_with_its_host_outlives_the_first_host_wait(void **state)
{
    (void)state;
    agent_proc a;
    agent_start_with(&a, "--one-shot", "--first-host-s", "1");
    uint8_t tok[SBX_AGENT_TOKEN_LEN];
    token(tok);
    sbx_agent_conn *c = NULL;
    sbx_error err;
    sbx_status st = SBX_E_GONE;
    for (int i = 0; i < 200 && st != SBX_OK; i++) {
        st = sbx_agent_connect_tcp("127.0.0.1", a.port, tok, 0, &c, &err);
        if (st != SBX_OK)
            usleep(10000);
    }
    assert_int_equal(st, SBX_OK);
    assert_int_equal(exited_within(&a, 1600), -1); /* past --first-host-s: it has its host */
    sbx_agent_pong pong;
    assert_int_equal(sbx_agent_ping(c, sbx_monotonic_ms() + 5000, &pong, &err), SBX_OK);
    sbx_agent_close(c); /* the host hangs up: the one-shot ends */
    assert_int_equal(exited_within(&a, 4000), 0);
    remove_dir(&a);
}

static int agent_exit_status(const char *a1, const char *a2, const char *a3)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", 1);
        dup2(devnull, 2);
        execl(kt_agent(), "sbx-agent", "--socket", "/tmp/sbx-k8s-never.sock", a1, a2, a3,
              (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_k8s_agent_first_host_wait_is_a_one_shots_and_positive(void **state)
{
    (void)state;
    assert_int_equal(agent_exit_status("--first-host-s", "5", NULL), 2);
    assert_int_equal(agent_exit_status("--one-shot", "--first-host-s", "0"), 2);
    assert_int_equal(agent_exit_status("--one-shot", "--first-host-s", "-1"), 2);
    assert_int_equal(agent_exit_status("--one-shot", "--first-host-s", "99999999999"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_k8s_agent_serves_only_its_credential),
        cmocka_unit_test(test_k8s_agent_bounds_silent_peers),
        cmocka_unit_test(test_k8s_agent_listen_needs_a_credential),
        cmocka_unit_test(test_k8s_one_shot_agent_whose_host_never_came_ends),
        cmocka_unit_test(test_k8s_one_shot_agent_with_its_host_outlives_the_first_host_wait),
        cmocka_unit_test(test_k8s_agent_first_host_wait_is_a_one_shots_and_positive),
    };
    return cmocka_run_group_tests(tests, NULL, kill_leftovers);
}
