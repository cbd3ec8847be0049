/* remote_wire.h - the remote broker's decoding of a worker's answer, reachable without a
 * transfer: the same header, body and completion code (broker/remote.c) run over a response
 * given piece by piece, as curl would hand it to the transfer callbacks. For the fuzz harness
 * and tests of hostile workers; private to broker/ and tests/ (never installed). */
#ifndef SBX_BROKER_REMOTE_WIRE_H
#define SBX_BROKER_REMOTE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/contract.h"
#include "sbx/provider.h"

/* One piece of a response: a header or trailer line as curl passes it ("name: value\r\n",
 * not NUL-terminated), or a piece of the body. */
typedef struct remote_piece {
    bool header;
    const uint8_t *data;
    size_t len;
} remote_piece;

typedef struct remote_response {
    bool stream;        /* ExecuteStream: output events to on_output, then a completion event */
    size_t max_message; /* the client's message limit; 0 = the remote broker's default */
    const remote_piece *pieces;
    size_t n_pieces;
    int curl_code;    /* what curl reported at the end (CURLcode; 0 = CURLE_OK) */
    long http_status; /* the response's :status */
} remote_response;

/* The completion the remote broker makes of resp (never NULL but on allocation failure):
 * the worker's completion, or a FAILED one naming what was wrong. Output chunks of a stream
 * go to on_output (may be NULL). A body piece the decoder refuses ends the feed, as it would
 * abort the transfer. Free with sbx_completion_free. */
sbx_completion *remote_decode_response(const remote_response *resp, sbx_output_fn on_output,
                                       void *arg);

#endif
