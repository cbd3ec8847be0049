/* grpc_wire.h - the gRPC-over-HTTP/2 wire rules (grpc/grpc doc/PROTOCOL-HTTP2.md) that both ends
 * of sbx's gRPC use, the worker (worker/server.c) and the remote broker (broker/remote.c): status
 * codes and their mapping to sbx statuses both ways, the 5-byte length prefix, grpc-timeout,
 * grpc-status and grpc-message (percent-encoding). Pure functions: no sockets, no nghttp2, no
 * libcurl. Internal to libsbx (not installed).
 */
#ifndef SBX_CORE_GRPC_WIRE_H
#define SBX_CORE_GRPC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "sbx/status.h"

/* gRPC status codes (grpc/grpc doc/statuscodes.md). */
enum sbx_grpc_code {
    SBX_GRPC_OK = 0,
    SBX_GRPC_CANCELLED = 1,
    SBX_GRPC_UNKNOWN = 2,
    SBX_GRPC_INVALID_ARGUMENT = 3,
    SBX_GRPC_DEADLINE_EXCEEDED = 4,
    SBX_GRPC_NOT_FOUND = 5,
    SBX_GRPC_ALREADY_EXISTS = 6,
    SBX_GRPC_PERMISSION_DENIED = 7,
    SBX_GRPC_RESOURCE_EXHAUSTED = 8,
    SBX_GRPC_FAILED_PRECONDITION = 9,
    SBX_GRPC_ABORTED = 10,
    SBX_GRPC_OUT_OF_RANGE = 11,
    SBX_GRPC_UNIMPLEMENTED = 12,
    SBX_GRPC_INTERNAL = 13,
    SBX_GRPC_UNAVAILABLE = 14,
    SBX_GRPC_DATA_LOSS = 15,
    SBX_GRPC_UNAUTHENTICATED = 16,
};

/* The length-prefixed message header: 1 flag byte (0: not compressed) + 4-byte big-endian
 * length. */
#define SBX_GRPC_PREFIX_LEN 5

/* The message length a prefix announces (p holds at least SBX_GRPC_PREFIX_LEN bytes). */
size_t sbx_grpc_frame_len(const uint8_t *p);
/* Writes the prefix of an uncompressed message of n bytes (n <= UINT32_MAX) into p. */
void sbx_grpc_frame_prefix(uint8_t *p, size_t n);
/* Packs m behind the prefix into a new malloc'd buffer (*len set); NULL on OOM or a message
 * too large for a prefix. */
uint8_t *sbx_grpc_frame_message(const ProtobufCMessage *m, size_t *len);

/* Parses a grpc-timeout value (1..8 ASCII digits then one of H M S m u n) into microseconds.
 * Returns false for anything else (the server answers INTERNAL, as gRPC servers do). */
bool sbx_grpc_parse_timeout(const char *value, size_t len, int64_t *out_us);

/* A grpc-status value (ASCII digits, spaces ignored) as its code; UNKNOWN for anything else
 * (empty, not digits, above 1000). */
int sbx_grpc_parse_status(const char *value, size_t len);

/* Percent-encodes a grpc-message value (bytes outside 0x20..0x7E, and '%', become %XX) into out
 * (NUL-terminated, cut at a whole character to fit cap). */
void sbx_grpc_percent_encode(const char *in, char *out, size_t cap);
/* Percent-decodes value[0..len) into out, which holds len + 1 bytes (NUL-terminated; a '%' not
 * followed by two hex digits stays as it is). Returns the decoded length. */
size_t sbx_grpc_percent_decode(const char *value, size_t len, char *out);

/* The gRPC status a transport-level sbx failure is answered with (a FAILED completion is never
 * mapped: it travels as a normal response), and back: the sbx status a client reports for a
 * gRPC status (transport failures it cannot tell apart are BROKER). */
int sbx_grpc_code_for_status(sbx_status s);
sbx_status sbx_grpc_status_for_code(int code);

#endif
