/* seccomp_policy.h - the programs' seccomp policy as libseccomp rules (seccomp_policy.c), for
 * the build-time generator only; the agent embeds the BPF it produces (seccomp_policy_bpf.h in
 * the build tree) and never links libseccomp.
 */
#ifndef SBX_AGENT_SECCOMP_POLICY_H
#define SBX_AGENT_SECCOMP_POLICY_H

#include <seccomp.h>

/* Builds the filter into *out (the caller releases it); 0 or -errno. */
int seccomp_policy_build(scmp_filter_ctx *out);

#endif
