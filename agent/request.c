/* request.c - decoding one AgentRequest frame into sbx-agent's static requests.
 *
 * nanopb zeroes a oneof member's whole struct before decoding it, and an AgentExec is 59 KiB
 * (15 pages: argv 64 x 512 and env 16 x 1152, inline). After each spare's fork every page the
 * agent writes is a copy-on-write fault (20-35 us each on a paravirtualised host): that
 * zeroing was most of the agent's faults on an exec's path. So an exec after an exec is
 * decoded into the same struct, which keeps its member, after resetting it field by field to
 * what the decoder's initialisation would give (a count, a string's first byte, a scalar), and
 * without the decoder's own initialisation (PB_DECODE_NOINIT). Any other request, and the first
 * exec, is decoded as before. fuzz_agent_request_reuse checks the result against a decoding
 * into a zeroed request.
 */
#include "request.h"

#include <string.h>

#include <pb_common.h>
#include <pb_decode.h>

/* The member of AgentRequest's body a frame carries (the last one, which the decoder keeps), 0
 * when none (unknown fields, which the decoder skips, are no member). */
static pb_size_t body_tag(const uint8_t *frame, size_t n, sbx_v1_AgentRequest *scratch)
{
    pb_istream_t s = pb_istream_from_buffer(frame, n);
    pb_wire_type_t wt;
    uint32_t tag;
    bool eof = false;
    pb_size_t body = 0;
    while (pb_decode_tag(&s, &wt, &tag, &eof)) {
        pb_field_iter_t it;
        if (pb_field_iter_begin(&it, sbx_v1_AgentRequest_fields, scratch) &&
            pb_field_iter_find(&it, tag) && PB_HTYPE(it.type) == PB_HTYPE_ONEOF)
            body = (pb_size_t)tag;
        if (!pb_skip_field(&s, wt))
            return 0;
    }
    return body;
}

/* Resets msg's fields to the decoder's initial values (proto3 zero values) writing only what
 * each needs: a repeated field's count, a string's first byte, a bytes field's size, a scalar; a
 * singular submessage recursively (the decoder decodes it without initialising it; a repeated
 * one's elements it initialises itself). false: a field this does not know how to reset (then
 * the caller lets the decoder initialise). */
static bool reset_fields(const pb_msgdesc_t *desc, void *msg)
{
    pb_field_iter_t it;
    if (desc->default_value != NULL)
        return false; /* explicit defaults: only the decoder knows them */
    if (!pb_field_iter_begin(&it, desc, msg))
        return true; /* no fields */
    do {
        if (PB_ATYPE(it.type) != PB_ATYPE_STATIC)
            return false;
        if (PB_HTYPE(it.type) == PB_HTYPE_REPEATED || PB_HTYPE(it.type) == PB_HTYPE_ONEOF) {
            if (it.pSize == NULL)
                return false; /* a fixed-count array */
            *(pb_size_t *)it.pSize = 0;
            continue;
        }
        if (PB_HTYPE(it.type) == PB_HTYPE_OPTIONAL && it.pSize != NULL && it.pSize != it.pData)
            *(bool *)it.pSize = false;
        if (PB_LTYPE(it.type) == PB_LTYPE_STRING)
            *(char *)it.pData = '\0';
        else if (PB_LTYPE(it.type) == PB_LTYPE_BYTES)
            ((pb_bytes_array_t *)it.pData)->size = 0;
        else if (PB_LTYPE_IS_SUBMSG(it.type)) {
            if (!reset_fields(it.submsg_desc, it.pData))
                return false;
        } else
            memset(it.pData, 0, it.data_size);
    } while (pb_field_iter_next(&it));
    return true;
}

bool agent_request_decode(agent_requests *rq, const uint8_t *frame, size_t n,
                          sbx_v1_AgentRequest **out, const char **error)
{
    bool exec = body_tag(frame, n, &rq->any) == sbx_v1_AgentRequest_exec_tag;
    sbx_v1_AgentRequest *r = exec ? &rq->exec : &rq->any;
    bool light = exec && r->which_body == sbx_v1_AgentRequest_exec_tag &&
                 reset_fields(&sbx_v1_AgentExec_msg, &r->body.exec);
    memset(r, 0, offsetof(sbx_v1_AgentRequest, body)); /* every field before the body */
    if (light)
        r->which_body = sbx_v1_AgentRequest_exec_tag; /* kept: the decoder skips its zeroing */
    *out = r;
    pb_istream_t is = pb_istream_from_buffer(frame, n);
    if (pb_decode_ex(&is, sbx_v1_AgentRequest_fields, r, light ? PB_DECODE_NOINIT : 0))
        return true;
    *error = PB_GET_ERROR(&is);
    return false;
}
