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

/* A string literal to descriptor 2. */
#define RAW_SAY(lit) sbx_raw3(SYS_write, 2, (long)(lit), (long)sizeof(lit) - 1)

/* In the child, on the caller's memory: raw system calls only, no sanitizer (its shadow memory
 * and TLS are the caller's). The descriptors go up first, so that one of fds[] being 0, 1 or 2
 * is not overwritten by another's dup3 before its own. */
SBX_RAW_BARE __attribute__((noinline)) static int launch_child(void *arg)
{
    const launch_args *a = arg;
    long up[3];
    for (int i = 0; i < 3; i++)
        up[i] = sbx_raw3(SYS_fcntl, a->fds[i], F_DUPFD, 3);
    for (int i = 0; i < 3; i++)
        if (up[i] < 0 || sbx_raw3(SYS_dup3, up[i], i, 0) < 0)
            sbx_raw3(SYS_exit, 127, 0, 0);
    sbx_raw3(SYS_close_range, 3, ~0L, 0); /* absent before Linux 5.9: the program closes them too */
    long e = sbx_raw3(SYS_execve, (long)a->path, (long)a->argv, (long)a->envp);
    char digits[24];
    int n = (int)sizeof digits - 1;
    digits[n] = '\0';
    unsigned long v = (unsigned long)-e;
    do {
        digits[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n > 0);
    RAW_SAY("cannot run ");
    sbx_raw3(SYS_write, 2, (long)a->path, (long)a->path_len);
    RAW_SAY(": execve error ");
    sbx_raw3(SYS_write, 2, (long)(digits + n), (long)(sizeof digits - 1 - (size_t)n));
    RAW_SAY("\n");
    sbx_raw3(SYS_exit, 127, 0, 0);
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
    static const char tag[] = ": execve error ";
    char *p = strncmp(text, "cannot run ", 11) == 0 ? strstr(text, tag) : NULL;
    if (p == NULL)
        return;
    char *end = NULL;
    long e = strtol(p + sizeof tag - 1, &end, 10);
    if (end == p + sizeof tag - 1 || e <= 0 || e > 4095)
        return;
    snprintf(p, cap - (size_t)(p - text), ": %s", strerror((int)e));
}

void sbx_launch_release(sbx_launched *l)
{
#if SBX_RAW_SYSCALL
    if (l->stack != NULL)
        munmap(l->stack, LAUNCH_STACK);
#endif
    l->stack = NULL;
}
