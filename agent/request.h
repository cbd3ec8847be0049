/* request.h - decoding one AgentRequest frame into sbx-agent's static requests (request.c). */
#ifndef SBX_AGENT_REQUEST_H
#define SBX_AGENT_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/v1/agent.pb.h"

/* Where frames are decoded, kept from one frame to the next: exec requests in one struct of their
 * own (reset field by field), every other request in another. */
typedef struct agent_requests {
    sbx_v1_AgentRequest any;
    sbx_v1_AgentRequest exec;
} agent_requests;

/* Decodes frame into one of rq's requests and points *out at it, also when the frame is malformed
 * (its id, if decoded, is there); false with *error naming what is wrong. The result equals a
 * decoding into a zeroed request, whatever earlier frames left in rq. */
bool agent_request_decode(agent_requests *rq, const uint8_t *frame, size_t n,
                          sbx_v1_AgentRequest **out, const char **error);

#endif
