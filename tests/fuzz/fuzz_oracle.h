/* fuzz_oracle.h - checks shared by the fuzz harnesses: a violated property prints what was
 * violated and aborts, which libFuzzer (and the corpus replay under ctest) reports as a finding.
 * Harness-only code: never include it from libsbx. */
#ifndef SBX_FUZZ_ORACLE_H
#define SBX_FUZZ_ORACLE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/contract.h"

/* Largest message the harnesses let the host decoders accept: the worker's default
 * max_message_bytes (DESIGN §10), far above any input libFuzzer generates (-max_len). */
#define FUZZ_MAX_MESSAGE (16u << 20)

#define FUZZ_REQUIRE(cond, ...)                                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz finding: %s: ", #cond);                                          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* What a decoder of untrusted bytes promises on refusal: no message, one of the two documented
 * codes, and a message for a person. */
static inline void fuzz_check_refusal(sbx_status st, const void *out, const sbx_error *err)
{
    FUZZ_REQUIRE(out == NULL, "a refused input left a message behind");
    FUZZ_REQUIRE(st == SBX_E_INVALID_ARGUMENT || st == SBX_E_RESOURCE_EXHAUSTED,
                 "refused with status %d", (int)st);
    FUZZ_REQUIRE(err->code == st && err->message[0] != '\0', "refusal without an error text");
}

/* Copies are lossless and packing is stable: pack(m) == pack(copy(m)), and decoding pack(m)
 * and packing again gives pack(m) once more. */
static inline void fuzz_check_protobuf_c_round_trip(const ProtobufCMessage *m)
{
    size_t a_len = 0, b_len = 0, c_len = 0;
    uint8_t *a = sbx_message_pack(m, &a_len);
    FUZZ_REQUIRE(a != NULL, "pack failed");
    ProtobufCMessage *copy = sbx_message_copy(m);
    FUZZ_REQUIRE(copy != NULL, "copy of a decoded message failed");
    uint8_t *b = sbx_message_pack(copy, &b_len);
    FUZZ_REQUIRE(b != NULL && a_len == b_len && memcmp(a, b, a_len) == 0,
                 "the copy packs to other bytes (%zu vs %zu)", a_len, b_len);
    ProtobufCMessage *again = protobuf_c_message_unpack(m->descriptor, NULL, a_len, a);
    FUZZ_REQUIRE(again != NULL, "our own packing of %zu bytes does not decode", a_len);
    uint8_t *c = sbx_message_pack(again, &c_len);
    FUZZ_REQUIRE(c != NULL && c_len == a_len && memcmp(a, c, a_len) == 0,
                 "packing is not stable (%zu vs %zu)", a_len, c_len);
    free(a);
    free(b);
    free(c);
    sbx_message_free(copy);
    sbx_message_free(again);
}

#endif
