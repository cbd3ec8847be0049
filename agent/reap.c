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
 * killed, the provider's sweep removes the sandbox as one whose init has ended.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "providers/common/teardown.h"

void agent_reap(const agent_reap_plan *plan)
{
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; nul >= 0 && fd <= 2; fd++)
        (void)dup2(nul, fd);
    if (nul > 2)
        close(nul);
    (void)setsid();
    alarm(0);
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
