/* launch.c - a helper program started without waiting for its execve (launch.h). */
#include "providers/common/launch.h"
#include "providers/common/raw_syscall.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#if SBX_RAW_SYSCALL
/* The child's stack: its one frame and the arguments at the top; small, never grown. */
#define LAUNCH_STACK (16 * 1024)

typedef struct launch_args {
    const char *path;
    size_t path_len; /* measured by the caller: a loop here may become a call to strlen */
    char *const *argv;
    char *const *envp;
    int fds[3];
} launch_args;

/* In the child: "cannot run PATH: WHAT error N" to fd, then exit 127 (sbx_launch_explain reads
 * it). e is -errno. */
SBX_RAW_BARE __attribute__((noinline, noreturn)) static void
launch_fail(int fd, const launch_args *a, const char *what, size_t what_len, long e)
{
    char digits[24];
    int n = (int)sizeof digits - 1;
    digits[n] = '\0';
    unsigned long v = (unsigned long)-e;
    do {
        digits[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n > 0);
    sbx_raw3(SYS_write, fd, (long)"cannot run ", 11);
    sbx_raw3(SYS_write, fd, (long)a->path, (long)a->path_len);
    sbx_raw3(SYS_write, fd, (long)what, (long)what_len);
    sbx_raw3(SYS_write, fd, (long)(digits + n), (long)(sizeof digits - 1 - (size_t)n));
    sbx_raw3(SYS_write, fd, (long)"\n", 1);
    for (;;)
        sbx_raw3(SYS_exit, 127, 0, 0);
}

/* A string literal and its length, for launch_fail. */
#define LIT(s) (s), sizeof(s) - 1

/* In the child, on the caller's memory: raw system calls only, no sanitizer (its shadow memory
 * and TLS are the caller's). The descriptors go up first, so that one of fds[] being 0, 1 or 2
 * is not overwritten by another's dup3 before its own. One that cannot be handed over is said on
 * the stderr given (nothing is closed before the exec). */
SBX_RAW_BARE __attribute__((noinline)) static int launch_child(void *arg)
{
    const launch_args *a = arg;
    long up[3];
    for (int i = 0; i < 3; i++) {
        up[i] = sbx_raw3(SYS_fcntl, a->fds[i], F_DUPFD, 3);
        if (up[i] < 0)
            launch_fail(a->fds[2], a, LIT(": descriptor error "), up[i]);
    }
    for (int i = 0; i < 3; i++) {
        long r = sbx_raw3(SYS_dup3, up[i], i, 0);
        if (r < 0) /* to stderr's copy: a dup3 before may have replaced the original */
            launch_fail((int)up[2], a, LIT(": descriptor error "), r);
    }
    sbx_raw3(SYS_close_range, 3, ~0L, 0); /* absent before Linux 5.9: the program closes them too */
    long e = sbx_raw3(SYS_execve, (long)a->path, (long)a->argv, (long)a->envp);
    launch_fail(2, a, LIT(": execve error "), e);
    return 127;
}
#endif

int sbx_launch(const char *path, char *const argv[], char *const envp[], const int fds[3],
               sbx_launched *out)
{
    out->pid = -1;
    out->stack = NULL;
#if SBX_RAW_SYSCALL
    char *stack = mmap(NULL, LAUNCH_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return errno;
    /* the arguments live on the child's stack: this frame ends before the child reads them */
    launch_args *a = (launch_args *)(stack + LAUNCH_STACK - 128);
    *a = (launch_args){path, strlen(path), argv, envp, {fds[0], fds[1], fds[2]}};
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pid_t pid = clone(launch_child, stack + LAUNCH_STACK - 256, CLONE_VM | SIGCHLD, a);
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        munmap(stack, LAUNCH_STACK);
        return e;
    }
    out->pid = pid;
    out->stack = stack;
    return 0;
#else
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    for (int i = 0; i < 3; i++)
        posix_spawn_file_actions_adddup2(&fa, fds[i], i);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &all); /* as the raw path: the program sets its own */
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawn(&out->pid, path, &fa, &at, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0)
        out->pid = -1;
    return rc;
#endif
}

void sbx_launch_explain(char *text, size_t cap)
{
    static const struct {
        const char *tag, *says;
    } tags[] = {{": execve error ", ": "},
                {": descriptor error ", ": cannot hand it its descriptors: "}};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        size_t tag_len = strlen(tags[i].tag);
        char *p = strncmp(text, "cannot run ", 11) == 0 ? strstr(text, tags[i].tag) : NULL;
        if (p == NULL)
            continue;
        char *end = NULL;
        long e = strtol(p + tag_len, &end, 10);
        if (end == p + tag_len || e <= 0 || e > 4095)
            return;
        snprintf(p, cap - (size_t)(p - text), "%s%s", tags[i].says, strerror((int)e));
        return;
    }
}

void sbx_launch_release(sbx_launched *l)
{
#if SBX_RAW_SYSCALL
    if (l->stack != NULL)
        munmap(l->stack, LAUNCH_STACK);
#endif
    l->stack = NULL;
}
