/* fuzz_agent_event_nanopb.c - libFuzzer harness for nanopb's decoding of AgentEvent, the frames
 * the host reads from an sbx-agent socket: the agent runs beside untrusted code, so every byte
 * is hostile. See fuzz_nanopb.h for the checks. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz/fuzz_nanopb.h"
#include "sbx/v1/agent.pb-c.h"
#include "sbx/v1/agent.pb.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sbx_v1_AgentEvent event, event_again;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_nanopb_check(data, size, sbx_v1_AgentEvent_fields, &event, &event_again, sizeof(event),
                      &sbx__v1__agent_event__descriptor);
    return 0;
}
