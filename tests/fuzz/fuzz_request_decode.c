/* fuzz_request_decode.c - libFuzzer harness for sbx_request_decode(), the bounded decoder the
 * worker runs on every ExecutionRequest that arrives over gRPC (untrusted bytes).
 * Properties: never crashes or leaks; a refusal is clean (no message, documented code, text);
 * the size bound is enforced; an accepted request copies losslessly and re-packs stably. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz/fuzz_oracle.h"
#include "sbx/contract.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sbx_request *req = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    sbx_status st = sbx_request_decode(data, size, FUZZ_MAX_MESSAGE, &req, &err);
    if (st != SBX_OK) {
        fuzz_check_refusal(st, req, &err);
        return 0;
    }
    FUZZ_REQUIRE(req != NULL, "SBX_OK without a request");

    if (size > 0) { /* one byte over the bound is refused before any parsing */
        sbx_request *over = NULL;
        sbx_status bounded = sbx_request_decode(data, size, size - 1, &over, &err);
        FUZZ_REQUIRE(bounded == SBX_E_RESOURCE_EXHAUSTED && over == NULL,
                     "an input over max_len was not refused (%d)", (int)bounded);
    }
    const char *op = sbx_request_op_name(req);
    FUZZ_REQUIRE(op != NULL && op[0] != '\0', "no op name");
    fuzz_check_protobuf_c_round_trip(&req->base);
    sbx_request_free(req);
    return 0;
}
