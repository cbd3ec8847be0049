/* codec_compare.h - compares a protobuf-c message with a nanopb struct of the same type, field
 * by field, by walking protobuf-c's descriptors and nanopb's field iterator together: every
 * field of every message type, including fields added later. Used by the golden-vector test and
 * by the differential fuzz targets. Must not abort or print: it reports what differs. */
#ifndef SBX_TESTS_CODEC_COMPARE_H
#define SBX_TESTS_CODEC_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pb.h>
#include <protobuf-c/protobuf-c.h>

/* True when pm and nm hold the same values; otherwise false with why = "path: difference". A
 * field known to one codec but not the other, or a nanopb field without a static bound, is a
 * difference. Unknown fields (kept by protobuf-c only) are not compared. */
bool codec_compare(const ProtobufCMessage *pm, const pb_msgdesc_t *nd, const void *nm, char *why,
                   size_t why_len);

/* protobuf-c reflection helpers. */
const void *codec_pbc_member(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f);
/* Size of one element of a repeated field of this type. */
size_t codec_pbc_elem_size(ProtobufCType type);
/* A scalar as 64 bits: signed types sign-extended, floating point as its bit pattern. */
uint64_t codec_pbc_scalar(ProtobufCType type, const void *p);
/* Whether oneof member f is the one set in m. */
bool codec_pbc_oneof_is_set(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f);

#endif
