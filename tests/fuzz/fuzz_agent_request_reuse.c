/* fuzz_agent_request_reuse.c - libFuzzer harness for sbx-agent's decoding of AgentRequest frames
 * into the requests it keeps from one frame to the next (agent/request.c: an exec after an exec
 * is reset field by field, not zeroed). Each input is decoded after whatever earlier inputs left
 * there, as in the agent, and into a zeroed request with nanopb's own initialisation: both must
 * succeed or fail together, and succeed with the same message (compared by re-encoding), so no
 * field of an earlier request ever survives into a later one. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "agent/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Static, as in sbx-agent; kept across inputs on purpose. */
static agent_requests kept;
static sbx_v1_AgentRequest fresh;
static uint8_t enc_kept[70000], enc_fresh[70000];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sbx_v1_AgentRequest *r = NULL;
    const char *why = NULL;
    bool ok = agent_request_decode(&kept, data, size, &r, &why);
    memset(&fresh, 0, sizeof fresh);
    pb_istream_t is = pb_istream_from_buffer(data, size);
    bool ok_fresh = pb_decode(&is, sbx_v1_AgentRequest_fields, &fresh);
    if (ok != ok_fresh) {
        fprintf(stderr, "reused request %s, fresh one %s\n", ok ? "decoded" : why,
                ok_fresh ? "decoded" : PB_GET_ERROR(&is));
        abort();
    }
    if (!ok)
        return 0;
    pb_ostream_t a = pb_ostream_from_buffer(enc_kept, sizeof enc_kept);
    pb_ostream_t b = pb_ostream_from_buffer(enc_fresh, sizeof enc_fresh);
    bool ea = pb_encode(&a, sbx_v1_AgentRequest_fields, r);
    bool eb = pb_encode(&b, sbx_v1_AgentRequest_fields, &fresh);
    if (ea != eb || (ea && (a.bytes_written != b.bytes_written ||
                            memcmp(enc_kept, enc_fresh, a.bytes_written) != 0))) {
        fprintf(stderr, "the reused request differs from a fresh decoding of the same frame\n");
        abort();
    }
    return 0;
}
