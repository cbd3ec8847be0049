/* reap.c - the reaper of a one-shot sandbox (`sbx-agent boot --reap`).
 *
 * A one-shot sandbox is destroyed right after its command. Its teardown (the kernel ending the
 * init and its namespaces, then the removal of its cgroups, its state dir and its uid slot) took
 * the destroy 0.6-0.9 ms here, on the path of every per_call request, which waited for PID 1 to
 * be gone before it could remove anything. bwrap returns as soon as its command's status reaches
 * it and leaves its init to end on its own. Here the launcher, once it has reported the sandbox
 * ready, stays as the sandbox's reaper instead of exiting: the init is its child (on v2, the
 * child of the launcher it forked into the cgroup, so it is inherited by this one, a child
 * subreaper). The provider's destroy then only kills the init; the reaper waits for it and
 * removes what it leaves, in the order the provider did (the uid slot last: its ids are free
 * for another sandbox only once nothing of this one runs). The reaper has left the sandbox's
 * cgroups before (boot_local.c), has its own session (no terminal signal of the caller's
 * reaches it) and none of the provider's pipes. It is the provider's child: the provider waits
 * for it at its close, so it never lingers as a zombie of an init that does not reap. If it is
 * killed, the sandbox is left to its destroy, or to the provider's sweep once its owner or its
 * init has ended.
 *
 * It also watches the provider's process, its parent, which names itself (--owner; pidfds of
 * both): an owner that dies before its destroy (a killed `sbx run`, a crashed embedder or
 * worker) leaves a per_call sandbox nobody can reach, which the provider's sweep removes
 * (local.c sweep_one), but only at the next open or sweep of the same runtime dir, maybe never;
 * its command ran on meanwhile. The reaper ends it at once instead, as bwrap's --die-with-parent
 * does. An owner that died before this launcher's main ran has already handed it to a subreaper
 * or init, so getppid() there is no way to learn the owner; --owner is.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "providers/common/teardown.h"

/* Until the init ends or the owner does (then SIGKILL to the init, which ends everything in its
 * pid namespace). Returns at once when either cannot be watched (no pidfd_open: the sweep
 * remains). The init is this process's child, so its pid is not reused before the wait below. */
static void end_with_owner(const agent_reap_plan *plan)
{
    if (plan->owner <= 1 || plan->init <= 1)
        return;
    int init = (int)syscall(SYS_pidfd_open, plan->init, 0);
    int owner = (int)syscall(SYS_pidfd_open, plan->owner, 0);
    /* opened, then still its child: the pidfd is of the owner, not of a pid reused since; no
     * longer its child (reparented): the owner died while the sandbox booted */
    bool gone = getppid() != plan->owner;
    struct pollfd pf[2] = {{init, POLLIN, 0}, {owner, POLLIN, 0}};
    while (init >= 0 && owner >= 0 && !gone) {
        int n = poll(pf, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || pf[0].revents != 0)
            break; /* the init ended (its destroy, or on its own) */
        gone = pf[1].revents != 0;
    }
    if (gone)
        (void)kill(plan->init, SIGKILL);
    if (init >= 0)
        close(init);
    if (owner >= 0)
        close(owner);
}

void agent_reap(const agent_reap_plan *plan)
{
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; nul >= 0 && fd <= 2; fd++)
        (void)dup2(nul, fd);
    if (nul > 2)
        close(nul);
    (void)setsid();
    alarm(0);
    end_with_owner(plan);
    for (;;) { /* the init (and on v2 the launcher it was born to, already gone) */
        pid_t w = waitpid(-1, NULL, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            break; /* ECHILD: nothing of the sandbox runs */
    }
    for (int i = 0; i < plan->n_cgroups; i++)
        sbx_teardown_cgroup(plan->cgroup_dirs[i]);
    sbx_teardown_state_dir(plan->state_dir);
    if (plan->slot_dir[0] != '\0')
        sbx_uid_slot_release(plan->slot_dir, plan->slot, plan->state_dir);
    _exit(0);
}
