/* fuzz_policy.c - libFuzzer harness for core/policy.c: a caller's policy over a profile's, and
 * a later request's against its session sandbox's. The input is an ExecutionRequest (decoded
 * as the worker decodes it): its policy is the request's, its session handle's policy stands
 * for the profile's. Properties: never crashes or leaks; what the merge accepts without a
 * widening never grants more than the profile (the session check finds nothing wider in it);
 * every policy is as wide as itself; a request that narrows any dimension of a sandbox's
 * policy is found narrower in that dimension.
 */
#include <stddef.h>
#include <stdint.h>

#include "core/path.h"
#include "core/policy.h"
#include "fuzz/fuzz_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool any_dotted(size_t n, char *const *paths)
{
    for (size_t i = 0; i < n; i++)
        if (paths[i][0] != '/' || sbx_path_has_dot_component(paths[i]))
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sbx_request *req = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    if (sbx_request_decode(data, size, FUZZ_MAX_MESSAGE, &req, &err) != SBX_OK)
        return 0;
    static const sbx_policy none = SBX__V1__POLICY__INIT;
    const sbx_policy *prof =
        req->session != NULL && req->session->policy != NULL ? req->session->policy : &none;
    sbx_policy *eff = sbx_policy_new();
    FUZZ_REQUIRE(eff != NULL, "out of memory");
    sbx_strlist widened = {0}, wider = {0};
    sbx_status st = sbx_policy_merge(prof, req->policy, eff, &widened, &err);
    FUZZ_REQUIRE(st == SBX_OK || st == SBX_E_INVALID_ARGUMENT, "merge returned %d", (int)st);
    if (st == SBX_OK) {
        FUZZ_REQUIRE(sbx_policy_sandbox_wider(eff, eff, &wider), "out of memory");
        FUZZ_REQUIRE(wider.n == 0, "a policy is wider than itself: %s", wider.items[0]);
        /* Lenient only if the profile is and the request did not ask for strict. */
        FUZZ_REQUIRE(!eff->lenient || (prof->lenient && !(req->policy && req->policy->strict)),
                     "lenient although the profile is strict or the request asked for strict");
        /* A profile as the config accepts it (absolute paths without dot components): what the
         * merge accepted without a widening stays within it. */
        if (widened.n == 0 && !any_dotted(prof->n_fs_read, prof->fs_read) &&
            !any_dotted(prof->n_fs_write, prof->fs_write)) {
            FUZZ_REQUIRE(sbx_policy_sandbox_wider(eff, prof, &wider), "out of memory");
            FUZZ_REQUIRE(wider.n == 0, "the merge accepted a policy wider than the profile: %s",
                         wider.items[0]);
        }
        /* A request asking for less memory than the sandbox it runs in has is refused. */
        if (eff->memory_mb > 1) {
            sbx_policy *less = (sbx_policy *)sbx_message_copy(&eff->base);
            FUZZ_REQUIRE(less != NULL, "out of memory");
            less->memory_mb = eff->memory_mb - 1;
            FUZZ_REQUIRE(sbx_policy_sandbox_wider(eff, less, &wider), "out of memory");
            FUZZ_REQUIRE(wider.n == 1, "memory_mb narrowed by one was not found narrower");
            sbx_message_free(&less->base);
        }
    } else {
        FUZZ_REQUIRE(err.message[0] != '\0', "a refusal without a text");
    }
    sbx_strlist_clear(&widened);
    sbx_strlist_clear(&wider);
    sbx_message_free(&eff->base);
    sbx_request_free(req);
    return 0;
}
