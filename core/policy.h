/* policy.h - merging a request's policy over its profile's, refusing any widening, and listing
 * the dimensions a provider cannot enforce (DESIGN §4, §5 step 4). Private to core/.
 *
 * A request may narrow the profile's envelope (less memory, DENY instead of ALLOW), never widen
 * it. This module must not call providers: the engine hands it the capabilities (or the
 * provider's own list) and decides what to do with the answer.
 */
#ifndef SBX_CORE_POLICY_H
#define SBX_CORE_POLICY_H

#include "sbx/contract.h"
#include "sbx/provider.h"
#include "sbx/status.h"

/* Fills *effective (an initialised, empty policy owned by the caller) with request over profile.
 * Every dimension where the request asks for more than the profile allows is appended to
 * *widened as "memory_mb 1024 > 512"-style text. request may be NULL (profile applies). */
sbx_status sbx_policy_merge(const sbx_policy *profile, const sbx_policy *request,
                            sbx_policy *effective, sbx_strlist *widened, sbx_error *err);

/* Appends every non-default dimension of p that caps cannot enforce ("network_egress=deny",
 * "fs_write", "cpu", "memory_mb", ...). timeout_ms and output_limit_bytes are enforced by the
 * engine itself and never listed. */
sbx_status sbx_policy_unenforceable(const sbx_capabilities *caps, const sbx_policy *p,
                                    sbx_strlist *out);

/* Appends, as "memory_mb 512 > 64"-style text, every sandbox dimension (egress and its
 * allowlist, fs_read, fs_write, cpu, memory_mb, pids, disk_mb) in which an existing sandbox's
 * policy grants more than the effective policy want asks for: such a request cannot run there,
 * the sandbox's limits being fixed when it was made. false on ENOMEM. */
bool sbx_policy_sandbox_wider(const sbx_policy *sandbox, const sbx_policy *want,
                              sbx_strlist *wider);

/* Name of an egress value: "deny", "allow", "allowlist", "unspecified". */
const char *sbx_policy_egress_name(Sbx__V1__NetworkEgress e);

#endif
