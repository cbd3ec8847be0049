/* fuzz_nanopb.h - the body of the nanopb fuzz harnesses: decode untrusted bytes into a static
 * struct the way sbx-agent (AgentRequest) and the host (AgentEvent) do, and check:
 *   - nanopb never crashes, overruns a bound or leaks (static structs, no heap);
 *   - what nanopb accepts it re-encodes, decodes again, and re-encodes to the same bytes;
 *   - differential: nanopb's re-encoding decodes in protobuf-c to the same values, and when
 *     the host's strict decoder (sbx_message_decode) also accepts the raw input, both
 *     decodings agree field by field.
 * Harness-only code. */
#ifndef SBX_FUZZ_NANOPB_H
#define SBX_FUZZ_NANOPB_H

#include <pb.h>
#include <pb_decode.h>
#include <pb_encode.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "golden/codec_compare.h"

static inline uint8_t *fuzz_nanopb_encode(const pb_msgdesc_t *fields, const void *msg, size_t *len)
{
    size_t n = 0;
    FUZZ_REQUIRE(pb_get_encoded_size(&n, fields, msg), "nanopb cannot size what it decoded");
    uint8_t *buf = malloc(n > 0 ? n : 1);
    FUZZ_REQUIRE(buf != NULL, "out of memory");
    pb_ostream_t out = pb_ostream_from_buffer(buf, n);
    FUZZ_REQUIRE(pb_encode(&out, fields, msg) && out.bytes_written == n,
                 "nanopb cannot re-encode what it decoded: %s", PB_GET_ERROR(&out));
    *len = n;
    return buf;
}

/* msg and again: two static structs of msg_size bytes (the agent has no heap). */
static inline void fuzz_nanopb_check(const uint8_t *data, size_t size, const pb_msgdesc_t *fields,
                                     void *msg, void *again, size_t msg_size,
                                     const ProtobufCMessageDescriptor *pbc)
{
    char why[2048];
    memset(msg, 0, msg_size);
    pb_istream_t in = pb_istream_from_buffer(data, size);
    if (!pb_decode(&in, fields, msg))
        return; /* refused: fine, as long as it did not crash */

    size_t len = 0, len2 = 0;
    uint8_t *enc = fuzz_nanopb_encode(fields, msg, &len);
    memset(again, 0, msg_size);
    pb_istream_t in2 = pb_istream_from_buffer(enc, len);
    FUZZ_REQUIRE(pb_decode(&in2, fields, again), "nanopb refuses its own encoding: %s",
                 PB_GET_ERROR(&in2));
    uint8_t *enc2 = fuzz_nanopb_encode(fields, again, &len2);
    FUZZ_REQUIRE(len == len2 && memcmp(enc, enc2, len) == 0,
                 "nanopb re-encoding is not stable (%zu vs %zu bytes)", len, len2);

    ProtobufCMessage *norm = protobuf_c_message_unpack(pbc, NULL, len, enc);
    FUZZ_REQUIRE(norm != NULL, "protobuf-c refuses nanopb's encoding of %zu bytes", len);
    FUZZ_REQUIRE(codec_compare(norm, fields, msg, why, sizeof(why)),
                 "protobuf-c reads nanopb's encoding differently: %s", why);
    protobuf_c_message_free_unpacked(norm, NULL);

    /* The host's strict decoder refuses what protobuf-c would read unlike the spec (a oneof
     * member sent twice, field number 0); whatever it accepts must mean what nanopb read. */
    ProtobufCMessage *raw = NULL;
    sbx_error err;
    if (sbx_message_decode(pbc, data, size, FUZZ_MAX_MESSAGE, &raw, &err) == SBX_OK) {
        FUZZ_REQUIRE(codec_compare(raw, fields, msg, why, sizeof(why)),
                     "protobuf-c and nanopb decode the input differently: %s", why);
        sbx_message_free(raw);
    }
    free(enc);
    free(enc2);
}

#endif
