/* fuzz_queue_record.c - libFuzzer harness for what the NATS queue decodes from the bucket and
 * its subjects (broker/jetstream.c, broker/queue.c): a task record (anyone who may write the
 * bucket can put anything there), the completion inside a DONE record, and an output chunk.
 * The first byte chooses: even, a record; odd, an output chunk.
 *
 * Properties: no crash; a parsed record's node is at most SBXQ_NODE_MAX bytes and NUL-ended,
 * its completion lies inside the input and only a DONE record has one; packing a parsed record
 * again gives the input back (a record without a completion, whose node has no NUL); a DONE
 * record's completion decodes or is refused, boundedly (contract.c's budget). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/jetstream.h"
#include "fuzz/fuzz_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void record(const uint8_t *data, size_t size)
{
    sbxq_record r;
    if (!sbxq_record_parse(data, size, &r))
        return;
    size_t node_len = strnlen(r.node, sizeof r.node);
    FUZZ_REQUIRE(node_len <= SBXQ_NODE_MAX, "node of %zu bytes", node_len);
    FUZZ_REQUIRE(r.completion >= data && r.completion + r.completion_len == data + size,
                 "completion outside the input");
    FUZZ_REQUIRE(r.state == SBXQ_DONE || r.completion_len == 0, "state %d with a completion",
                 (int)r.state);
    if (r.completion_len == 0) {
        size_t len = 0;
        uint8_t *again =
            sbxq_record_pack(r.state, r.digest, r.seq, r.deliveries, r.node, NULL, &len);
        FUZZ_REQUIRE(again != NULL, "out of memory packing a record");
        size_t header = len - node_len, node_in = (size_t)(r.completion - data) - header;
        if (node_in == node_len)
            FUZZ_REQUIRE(len == size && memcmp(again, data, size) == 0,
                         "a parsed record packs to other bytes");
        else /* only a node with a NUL inside reads shorter than it was written */
            FUZZ_REQUIRE(node_in > node_len && memchr(data + header, 0, node_in) != NULL,
                         "node of %zu bytes read as %zu", node_in, node_len);
        free(again);
    }
    sbx_completion *c = sbxq_record_completion(&r, NULL);
    FUZZ_REQUIRE(c == NULL || r.state == SBXQ_DONE, "a completion from a state-%d record",
                 (int)r.state);
    if (c != NULL)
        FUZZ_REQUIRE(c->deliveries == r.deliveries, "deliveries not the record's");
    sbx_completion_free(c);
}

static void chunk(const uint8_t *data, size_t size)
{
    ProtobufCMessage *m = NULL;
    sbx_error err;
    sbx_status st =
        sbx_message_decode(&sbx__v1__output_chunk__descriptor, data, size, size, &m, &err);
    if (st != SBX_OK) {
        fuzz_check_refusal(st, m, &err);
        return;
    }
    Sbx__V1__OutputChunk *ch = (Sbx__V1__OutputChunk *)m;
    FUZZ_REQUIRE(ch->data.len <= size, "a chunk of %zu bytes from %zu", ch->data.len, size);
    sbx_message_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        record(data + 1, size - 1);
    else
        chunk(data + 1, size - 1);
    return 0;
}
