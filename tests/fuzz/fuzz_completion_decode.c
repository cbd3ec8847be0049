/* fuzz_completion_decode.c - libFuzzer harness for sbx_completion_decode(), which the remote
 * broker runs on every ExecutionCompletion a worker returns (untrusted bytes: the worker may be
 * compromised or an impostor). Properties: as fuzz_request_decode.c, and a notice can be
 * appended to whatever notice the decoded completion carries. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "sbx/contract.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sbx_completion *c = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    sbx_status st = sbx_completion_decode(data, size, FUZZ_MAX_MESSAGE, &c, &err);
    if (st != SBX_OK) {
        fuzz_check_refusal(st, c, &err);
        return 0;
    }
    FUZZ_REQUIRE(c != NULL, "SBX_OK without a completion");
    if (size > 0) {
        sbx_completion *over = NULL;
        sbx_status bounded = sbx_completion_decode(data, size, size - 1, &over, &err);
        FUZZ_REQUIRE(bounded == SBX_E_RESOURCE_EXHAUSTED && over == NULL,
                     "an input over max_len was not refused (%d)", (int)bounded);
    }
    fuzz_check_protobuf_c_round_trip(&c->base);

    /* The engine appends notices to completions that came from elsewhere. */
    sbx_completion_add_notice(c, "output truncated at %d bytes", 1024);
    size_t n = strlen(c->notice);
    static const char tail[] = "output truncated at 1024 bytes";
    FUZZ_REQUIRE(n >= sizeof(tail) - 1 && strcmp(c->notice + n - (sizeof(tail) - 1), tail) == 0,
                 "the notice was not appended");
    sbx_completion_free(c);
    return 0;
}
