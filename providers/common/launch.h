/* launch.h - starts a helper program (a sandbox's launcher) without waiting for its execve.
 *
 * posix_spawn returns only once the child has execed: glibc clones with CLONE_VM|CLONE_VFORK,
 * which suspends the caller while the kernel replaces the child's memory, 0.5-0.6 ms of a cold
 * create on a VM. sbx_launch clones with CLONE_VM alone, on a stack of its own: the caller goes
 * on as soon as the child exists, and the exec runs beside whatever the caller does next.
 *
 * The price is what the child may touch before its exec: it shares the caller's memory and the
 * calling thread's TLS while the caller runs, so it makes raw system calls only (no errno, no
 * libc, no sanitizer), and reads only argv, envp and path, which the caller keeps unchanged
 * until the child has execed or exited (sbx_launch_release after waitpid, or after the child
 * said something on a pipe only the exec'd program writes). The child starts with every signal
 * blocked and the caller's signal dispositions: the program must set the mask and dispositions
 * it wants first thing (sbx-agent boot does). On hosts without the raw system calls here (other
 * than x86-64 and arm64) it is posix_spawn, with the same contract.
 */
#ifndef SBX_PROVIDERS_LAUNCH_H
#define SBX_PROVIDERS_LAUNCH_H

#include <stddef.h>
#include <sys/types.h>

typedef struct sbx_launched {
    pid_t pid;
    void *stack; /* the child's, until sbx_launch_release */
} sbx_launched;

/* Starts path with argv and envp, its descriptors 0, 1 and 2 being fds[0..2] and no other.
 * Returns 0, or an errno value (nothing started). A failed execve ends the child with status
 * 127 after it wrote "cannot run PATH: execve error N" to its descriptor 2 (or "cannot run PATH:
 * descriptor error N" to fds[2] when one of fds cannot be handed over). */
int sbx_launch(const char *path, char *const argv[], char *const envp[], const int fds[3],
               sbx_launched *out);

/* Rewrites the child's "cannot run PATH: execve error N" in text (NUL-terminated, cap bytes)
 * as "cannot run PATH: <strerror(N)>", and its "descriptor error N" as "cannot hand it its
 * descriptors: <strerror(N)>"; other text is left alone. */
void sbx_launch_explain(char *text, size_t cap);

/* Frees what the child used; call once it has execed or exited. */
void sbx_launch_release(sbx_launched *l);

#endif
