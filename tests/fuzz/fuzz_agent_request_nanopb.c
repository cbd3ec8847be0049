/* fuzz_agent_request_nanopb.c - libFuzzer harness for nanopb's decoding of AgentRequest, the
 * frames sbx-agent reads from its socket (bytes from a host that may be compromised, and the
 * message sizes sbx-agent's static buffers are built for). See fuzz_nanopb.h for the checks. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz/fuzz_nanopb.h"
#include "sbx/v1/agent.pb-c.h"
#include "sbx/v1/agent.pb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Static, as in sbx-agent: no heap on the protocol path. */
static sbx_v1_AgentRequest request, request_again;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_nanopb_check(data, size, sbx_v1_AgentRequest_fields, &request, &request_again,
                      sizeof(request), &sbx__v1__agent_request__descriptor);
    return 0;
}
