/* seccomp_policy.h - the programs' seccomp policy as libseccomp rules (seccomp_policy.c), for
 * the build-time generator only; the agent embeds the BPF it produces (seccomp_policy_bpf.h in
 * the build tree) and never links libseccomp.
 */
#ifndef SBX_AGENT_SECCOMP_POLICY_H
#define SBX_AGENT_SECCOMP_POLICY_H

#include <seccomp.h>

#include <stdbool.h>

/* Builds the programs' filter into *out (the caller releases it); 0 or -errno. With for_agent,
 * the agent's: the same but clone3 allowed (seccomp_delta.h takes it back for programs). */
int seccomp_policy_build(scmp_filter_ctx *out, bool for_agent);

#endif
