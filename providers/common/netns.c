/* netns.c - see netns.h. */
#include "netns.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int open_ns(pid_t target, const char *which)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/ns/%s", (long)target, which);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Joins target's network namespace; on EPERM first its user namespace (a rootless sandbox's
 * namespaces are owned by a user namespace the caller is not privileged in). Returns 0 or an
 * errno value. Needs a single-threaded caller for the user namespace step. */
static int join(pid_t target)
{
    int net = open_ns(target, "net");
    if (net < 0)
        return errno;
    int rc = 0;
    if (setns(net, CLONE_NEWNET) != 0) {
        rc = errno;
        if (rc == EPERM) {
            int user = open_ns(target, "user");
            if (user < 0)
                rc = errno;
            else if (setns(user, CLONE_NEWUSER) != 0)
                rc = errno;
            else
                rc = setns(net, CLONE_NEWNET) == 0 ? 0 : errno;
            if (user >= 0)
                close(user);
        }
    }
    close(net);
    return rc;
}

static int send_fds(int sock, int rc, const int *fds, size_t n)
{
    char cbuf[CMSG_SPACE(sizeof(int) * SBX_NETNS_MAX_FDS)];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = {.iov_base = &rc, .iov_len = sizeof rc};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n) {
        msg.msg_control = cbuf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* The target's process (or its /proc entry) is gone: GONE; anything else: PROVISION. */
static sbx_status gone_or_provision(int rc)
{
    return rc == ENOENT || rc == ESRCH ? SBX_E_GONE : SBX_E_PROVISION;
}

static void child(int sock, pid_t target, sbx_netns_fn fn, void *arg, size_t max)
{
    int fds[SBX_NETNS_MAX_FDS];
    size_t n = 0;
    int rc = join(target);
    if (rc == 0)
        rc = fn(arg, fds, max, &n);
    /* fn's contract (at most max) is what guards fds; this only refuses a count that lies. */
    if (rc == 0 && n > max)
        rc = EOVERFLOW;
    if (rc != 0)
        n = 0;
    _exit(send_fds(sock, rc, fds, n) == 0 ? 0 : 1);
}

sbx_status sbx_netns_call(pid_t target, sbx_netns_fn fn, void *arg, int *fds, size_t max, size_t *n,
                          sbx_error *err)
{
    *n = 0;
    if (max > SBX_NETNS_MAX_FDS)
        max = SBX_NETNS_MAX_FDS;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return sbx_error_set(err, SBX_E_INTERNAL, "netns: socketpair: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "netns: fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(sv[0]);
        child(sv[1], target, fn, arg, max);
    }
    close(sv[1]);
    int rc = -1;
    char cbuf[CMSG_SPACE(sizeof(int) * SBX_NETNS_MAX_FDS)];
    struct iovec iov = {.iov_base = &rc, .iov_len = sizeof rc};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    ssize_t got;
    do
        got = recvmsg(sv[0], &msg, MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    close(sv[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    size_t have = 0;
    for (struct cmsghdr *c = got > 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (have < max)
                fds[have++] = fd;
            else
                close(fd);
        }
    }
    if (got != (ssize_t)sizeof rc || rc != 0) {
        for (size_t i = 0; i < have; i++)
            close(fds[i]);
        if (got != (ssize_t)sizeof rc)
            return sbx_error_set(err, SBX_E_INTERNAL,
                                 "netns: the helper for process %ld ended without an answer",
                                 (long)target);
        return sbx_error_set(err, gone_or_provision(rc),
                             "netns: in the network namespace of process %ld: %s", (long)target,
                             strerror(rc));
    }
    *n = have;
    return SBX_OK;
}

sbx_status sbx_netns_enter(pid_t target, sbx_error *err)
{
    int rc = join(target);
    if (rc != 0)
        return sbx_error_set(err, gone_or_provision(rc),
                             "netns: joining the network namespace of process %ld: %s",
                             (long)target, strerror(rc));
    return SBX_OK;
}
