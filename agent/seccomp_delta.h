/* seccomp_delta.h - what a program's filter adds to the agent's (confine.c).
 *
 * A sandbox's agent loads the agent filter once (seccomp_agent_bpf: the programs' policy of
 * seccomp_policy.c, but with clone3, which the agent's fork_into_cgroup uses on cgroup v2), and
 * every process it forks inherits it. Each program then adds only this: clone3 refused with
 * ENOSYS, as the programs' policy refuses it (its flags are in memory seccomp cannot read, so
 * libc falls back to clone, whose namespace flags the policy checks). The kernel runs both and
 * keeps the stricter answer, which is the programs' policy's answer for every syscall and
 * argument: sbx-seccomp-gen checks that at build time, comparing the two filters run together
 * with the programs' filter on every syscall number the filters name, on the native and foreign
 * architectures, with the arguments their rules compare. Loading these 4 instructions costs
 * ~20 us where the whole policy's ~750 cost ~250 us (the JIT), in every command's process.
 */
#ifndef SBX_AGENT_SECCOMP_DELTA_H
#define SBX_AGENT_SECCOMP_DELTA_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>

static struct sock_filter seccomp_delta_bpf[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

#endif
