/* die_with_parent.h - a process a test forks to run a daemon (nats-server, sbx-worker, the fake
 * Kubernetes API server, an agent, a parked server) ends with the test: a test binary killed by
 * ctest's timeout (SIGKILL) or by a crash runs no teardown, and its daemons used to live on,
 * holding ports, temp dirs and CPU for the rest of the suite. Header-only (a static function).
 *
 * Call it in the child, between fork and exec, with the parent's pid taken before the fork:
 *
 *     pid_t parent = getpid();
 *     pid_t pid = fork();
 *     if (pid == 0) {
 *         sbx_test_die_with_parent(parent, SIGKILL);
 *         execv(...);
 *     }
 *
 * The kernel sends sig when the *thread* that forked exits, not the process: fork a daemon
 * from the main thread (or one that outlives the daemon), never from a short-lived thread,
 * which would kill it as soon as that thread returns. The signal survives execve, except of a
 * set-user-ID or set-group-ID program or one with file capabilities, and any change of the
 * child's credentials (setuid and friends) clears it: call this after those. */
#ifndef SBX_TESTS_SUPPORT_DIE_WITH_PARENT_H
#define SBX_TESTS_SUPPORT_DIE_WITH_PARENT_H

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

/* In a forked child: sig (SIGKILL; SIGTERM for a daemon that must clean up after itself) once
 * the thread that forked it exits; exits at once when the parent (pid parent, taken before the
 * fork) is already gone, a death the kernel would not signal any more. */
static inline void sbx_test_die_with_parent(pid_t parent, int sig)
{
    if (prctl(PR_SET_PDEATHSIG, sig) != 0 || getppid() != parent)
        _exit(127);
}

#endif
