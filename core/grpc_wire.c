/* grpc_wire.c - see grpc_wire.h: the gRPC wire rules both ends share. Pure functions. */
#include "core/grpc_wire.h"

#include <stdlib.h>

/* grpc-timeout: TimeoutValue is at most 8 ASCII digits (the spec's bound). */
#define GRPC_TIMEOUT_MAX_DIGITS 8
/* grpc-status values parsed at most this high (the codes end at 16; a bound against digits
 * without end). */
#define GRPC_STATUS_MAX 1000

size_t sbx_grpc_frame_len(const uint8_t *p)
{
    return ((size_t)p[1] << 24) | ((size_t)p[2] << 16) | ((size_t)p[3] << 8) | p[4];
}

void sbx_grpc_frame_prefix(uint8_t *p, size_t n)
{
    p[0] = 0;
    p[1] = (uint8_t)(n >> 24);
    p[2] = (uint8_t)(n >> 16);
    p[3] = (uint8_t)(n >> 8);
    p[4] = (uint8_t)n;
}

uint8_t *sbx_grpc_frame_message(const ProtobufCMessage *m, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    if (n > UINT32_MAX)
        return NULL;
    uint8_t *buf = malloc(SBX_GRPC_PREFIX_LEN + n + 1);
    if (!buf)
        return NULL;
    sbx_grpc_frame_prefix(buf, n);
    protobuf_c_message_pack(m, buf + SBX_GRPC_PREFIX_LEN);
    *len = SBX_GRPC_PREFIX_LEN + n;
    return buf;
}

bool sbx_grpc_parse_timeout(const char *value, size_t len, int64_t *out_us)
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

int sbx_grpc_parse_status(const char *value, size_t len)
{
    int v = 0;
    bool digits = false;
    for (size_t i = 0; i < len; i++) {
        if (value[i] == ' ')
            continue;
        if (value[i] < '0' || value[i] > '9' || v > GRPC_STATUS_MAX)
            return SBX_GRPC_UNKNOWN;
        v = v * 10 + (value[i] - '0');
        digits = true;
    }
    return digits ? v : SBX_GRPC_UNKNOWN;
}

void sbx_grpc_percent_encode(const char *in, char *out, size_t cap)
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

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t sbx_grpc_percent_decode(const char *value, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int h1, h2;
        if (value[i] == '%' && i + 2 < len && (h1 = hexval(value[i + 1])) >= 0 &&
            (h2 = hexval(value[i + 2])) >= 0) {
            out[o++] = (char)(h1 * 16 + h2);
            i += 2;
        } else {
            out[o++] = value[i];
        }
    }
    out[o] = '\0';
    return o;
}

int sbx_grpc_code_for_status(sbx_status s)
{
    switch (s) {
    case SBX_OK: return SBX_GRPC_OK;
    case SBX_E_INVALID_ARGUMENT: return SBX_GRPC_INVALID_ARGUMENT;
    case SBX_E_TIMEOUT: return SBX_GRPC_DEADLINE_EXCEEDED;
    case SBX_E_PERMISSION_DENIED: return SBX_GRPC_PERMISSION_DENIED;
    case SBX_E_UNAUTHENTICATED: return SBX_GRPC_UNAUTHENTICATED;
    case SBX_E_RESOURCE_EXHAUSTED: return SBX_GRPC_RESOURCE_EXHAUSTED;
    case SBX_E_BROKER: return SBX_GRPC_UNAVAILABLE;
    /* The request is fine but must be sent to the node the completion names. */
    case SBX_E_WRONG_NODE: return SBX_GRPC_FAILED_PRECONDITION;
    default: return SBX_GRPC_INTERNAL;
    }
}

sbx_status sbx_grpc_status_for_code(int code)
{
    switch (code) {
    case SBX_GRPC_INVALID_ARGUMENT: return SBX_E_INVALID_ARGUMENT;
    case SBX_GRPC_DEADLINE_EXCEEDED: return SBX_E_TIMEOUT;
    case SBX_GRPC_PERMISSION_DENIED: return SBX_E_PERMISSION_DENIED;
    case SBX_GRPC_RESOURCE_EXHAUSTED: return SBX_E_RESOURCE_EXHAUSTED;
    /* the worker maps only WRONG_NODE to FAILED_PRECONDITION */
    case SBX_GRPC_FAILED_PRECONDITION: return SBX_E_WRONG_NODE;
    case SBX_GRPC_INTERNAL: return SBX_E_INTERNAL;
    case SBX_GRPC_UNAUTHENTICATED: return SBX_E_UNAUTHENTICATED;
    default: return SBX_E_BROKER; /* UNAVAILABLE, UNIMPLEMENTED, UNKNOWN, ...: the transport */
    }
}
