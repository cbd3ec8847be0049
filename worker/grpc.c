/* grpc.c - the gRPC-over-HTTP/2 wire rules the worker needs (grpc/grpc doc/PROTOCOL-HTTP2.md):
 * grpc-timeout parsing, grpc-message percent-encoding, the status mapping for transport-level
 * failures, and the 5-byte length prefix. Pure functions; no sockets, no nghttp2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/worker_internal.h"

/* grpc-timeout: TimeoutValue is at most 8 ASCII digits (the spec's bound). */
#define GRPC_TIMEOUT_MAX_DIGITS 8

bool grpc_parse_timeout(const char *value, size_t len, int64_t *out_us)
{
    if (len < 2 || len > GRPC_TIMEOUT_MAX_DIGITS + 1)
        return false;
    int64_t n = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (value[i] < '0' || value[i] > '9')
            return false;
        n = n * 10 + (value[i] - '0');
    }
    int64_t us;
    switch (value[len - 1]) {
    case 'H': us = n * 3600 * 1000000; break;
    case 'M': us = n * 60 * 1000000; break;
    case 'S': us = n * 1000000; break;
    case 'm': us = n * 1000; break;
    case 'u': us = n; break;
    case 'n': us = n / 1000; break;
    default: return false;
    }
    *out_us = us;
    return true;
}

void grpc_percent_encode(const char *in, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    if (cap == 0)
        return;
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if (*p >= 0x20 && *p <= 0x7E && *p != '%') {
            if (o + 1 >= cap)
                break;
            out[o++] = (char)*p;
        } else {
            if (o + 3 >= cap)
                break;
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
}

int grpc_code_for_status(sbx_status s)
{
    switch (s) {
    case SBX_OK: return GRPC_OK;
    case SBX_E_INVALID_ARGUMENT: return GRPC_INVALID_ARGUMENT;
    case SBX_E_TIMEOUT: return GRPC_DEADLINE_EXCEEDED;
    case SBX_E_PERMISSION_DENIED: return GRPC_PERMISSION_DENIED;
    case SBX_E_UNAUTHENTICATED: return GRPC_UNAUTHENTICATED;
    case SBX_E_RESOURCE_EXHAUSTED: return GRPC_RESOURCE_EXHAUSTED;
    case SBX_E_BROKER: return GRPC_UNAVAILABLE;
    /* The request is fine but must be sent to the node the completion names. */
    case SBX_E_WRONG_NODE: return GRPC_FAILED_PRECONDITION;
    default: return GRPC_INTERNAL;
    }
}

uint8_t *grpc_frame_message(const ProtobufCMessage *m, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > UINT32_MAX)
        return NULL;
    uint8_t *buf = malloc(GRPC_PREFIX_LEN + n + 1);
    if (!buf)
        return NULL;
    buf[0] = 0;
    buf[1] = (uint8_t)(n >> 24);
    buf[2] = (uint8_t)(n >> 16);
    buf[3] = (uint8_t)(n >> 8);
    buf[4] = (uint8_t)n;
    protobuf_c_message_pack(m, buf + GRPC_PREFIX_LEN);
    *len = GRPC_PREFIX_LEN + n;
    return buf;
}
