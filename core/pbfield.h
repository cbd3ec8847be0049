/* pbfield.h - what protobuf-c's reflection leaves to its users, written once for the two that
 * walk messages by descriptor: the CLI's protobuf JSON mapping (cli/pbjson.c) and replay's
 * field-by-field comparison (client/replay.c). Internal to libsbx (not installed). */
#ifndef SBX_CORE_PBFIELD_H
#define SBX_CORE_PBFIELD_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/* True when the singular value at p is its type's proto3 default, the value a proto3 encoder
 * omits: 0, false, "", empty bytes, no message. -0.0 is not a default (its bits are not
 * zero: protobuf encodes it, and the JSON mapping prints it). */
bool sbx_pb_is_default(const ProtobufCFieldDescriptor *f, const void *p);

/* The size of one element of a repeated field of f's type (the stride of its array). */
size_t sbx_pb_value_size(const ProtobufCFieldDescriptor *f);

/* A deep copy of m that protobuf_c_message_free_unpacked frees (every part malloc'd, defaults
 * shared as unpack shares them), equal to what packing m and unpacking the bytes gives: a oneof
 * member that packs to nothing (a NULL message or string) comes out unset, a NULL string as its
 * default; unknown fields are kept. Walks the descriptors instead of encoding and decoding
 * (several times faster: the brokers copy every request and completion). NULL when m is NULL
 * or memory runs out. */
ProtobufCMessage *sbx_pb_copy(const ProtobufCMessage *m);

#endif
