/* test_netns.c - providers/common/netns.c: a socket made through sbx_netns_call lives in the
 * target's network namespace (a listener there is unreachable from the caller's namespace and
 * reachable from inside), the caller stays where it was, a function's errno comes back as the
 * error, sbx_netns_enter moves a helper process there, and a target that is gone is GONE. Needs
 * root (unshare(CLONE_NEWNET)). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/common/netns.h"
#include "support/die_with_parent.h"

/* A child parked in a network namespace of its own. */
static pid_t park(void)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        close(p[0]);
        char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
        (void)!write(p[1], &ok, 1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    close(p[0]);
    assert_int_equal(ok, 'y');
    return pid;
}

static void unpark(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static int lo_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
        rc = errno;
    ifr.ifr_flags |= IFF_UP;
    if (rc == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        rc = errno;
    close(s);
    return rc;
}

/* In the child: lo up, a TCP listener on 127.0.0.1, ephemeral port. */
static int make_listener(void *arg, int *fds, size_t max, size_t *n)
{
    (void)arg;
    if (max < 1)
        return EINVAL;
    int rc = lo_up();
    if (rc)
        return rc;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return errno;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 4) != 0)
        return errno;
    fds[0] = s;
    *n = 1;
    return 0;
}

/* In the child: a socket connected to 127.0.0.1:*port there. */
static int make_client(void *arg, int *fds, size_t max, size_t *n)
{
    if (max < 1)
        return EINVAL;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return errno;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = *(const in_port_t *)arg,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0)
        return errno;
    fds[0] = s;
    *n = 1;
    return 0;
}

static int fails_with_eacces(void *arg, int *fds, size_t max, size_t *n)
{
    (void)arg, (void)fds, (void)max, (void)n;
    return EACCES;
}

static ino_t netns_ino(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_ino;
}

static void test_netns_sockets_live_in_the_target(void **state)
{
    (void)state;
    pid_t pid = park();
    ino_t mine = netns_ino("/proc/self/ns/net");
    int fds[2];
    size_t n = 0;
    sbx_error err = {0};
    assert_int_equal(sbx_netns_call(pid, make_listener, NULL, fds, 2, &n, &err), SBX_OK);
    assert_int_equal(n, 1);
    assert_int_equal(netns_ino("/proc/self/ns/net"), mine); /* the caller did not move */
    assert_true(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fds[0], (struct sockaddr *)&a, &len), 0);

    /* From here (another namespace) the port is not that listener. */
    int here = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(here >= 0);
    (void)connect(here, (struct sockaddr *)&a, sizeof a);
    close(here);
    int fl = fcntl(fds[0], F_GETFL);
    fcntl(fds[0], F_SETFL, fl | O_NONBLOCK);
    usleep(20000);
    assert_int_equal(accept(fds[0], NULL, NULL), -1);

    /* From inside it is. */
    int cfd;
    size_t cn = 0;
    assert_int_equal(sbx_netns_call(pid, make_client, &a.sin_port, &cfd, 1, &cn, &err), SBX_OK);
    assert_int_equal(cn, 1);
    fcntl(fds[0], F_SETFL, fl);
    int acc = accept(fds[0], NULL, NULL);
    assert_true(acc >= 0);
    assert_int_equal(write(cfd, "hi", 2), 2);
    char buf[2];
    assert_int_equal(read(acc, buf, 2), 2);
    assert_memory_equal(buf, "hi", 2);
    close(acc);
    close(cfd);
    close(fds[0]);
    unpark(pid);
}

static void test_netns_errno_and_gone(void **state)
{
    (void)state;
    pid_t pid = park();
    int fd;
    size_t n = 7;
    sbx_error err = {0};
    assert_int_equal(sbx_netns_call(pid, fails_with_eacces, NULL, &fd, 1, &n, &err),
                     SBX_E_PROVISION);
    assert_int_equal(n, 0);
    assert_non_null(strstr(err.message, strerror(EACCES)));
    unpark(pid);
    assert_int_equal(sbx_netns_call(pid, make_listener, NULL, &fd, 1, &n, &err), SBX_E_GONE);
}

/* sbx_netns_enter moves the calling process (a forked helper here) into the target's network
 * namespace: its /proc/self/ns/net is then the target's; and a target that is gone is GONE. */
static void test_netns_enter_moves_the_caller(void **state)
{
    (void)state;
    pid_t pid = park();
    char target[64];
    snprintf(target, sizeof target, "/proc/%d/ns/net", (int)pid);
    ino_t want = netns_ino(target);
    ino_t mine = netns_ino("/proc/self/ns/net");
    assert_true(want != mine);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(p[0]);
        sbx_error err = {0};
        struct stat st = {0};
        ino_t got = 0;
        if (sbx_netns_enter(pid, &err) == SBX_OK && stat("/proc/self/ns/net", &st) == 0)
            got = st.st_ino;
        (void)!write(p[1], &got, sizeof got);
        _exit(0);
    }
    close(p[1]);
    ino_t got = 0;
    assert_int_equal(read(p[0], &got, sizeof got), (ssize_t)sizeof got);
    close(p[0]);
    assert_int_equal(waitpid(child, NULL, 0), child);
    assert_int_equal(got, want);
    assert_int_equal(netns_ino("/proc/self/ns/net"), mine); /* only the child moved */
    unpark(pid);
    sbx_error err = {0};
    assert_int_equal(sbx_netns_enter(pid, &err), SBX_E_GONE);
    assert_int_equal(netns_ino("/proc/self/ns/net"), mine);
}

int main(void)
{
    if (geteuid() != 0) {
        print_message("skipped: needs root for unshare(CLONE_NEWNET)\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_netns_sockets_live_in_the_target),
        cmocka_unit_test(test_netns_errno_and_gone),
        cmocka_unit_test(test_netns_enter_moves_the_caller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
