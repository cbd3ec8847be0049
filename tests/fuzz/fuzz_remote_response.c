/* fuzz_remote_response.c - libFuzzer harness for what the remote broker reads from a worker
 * (broker/remote.c through broker/remote_wire.h): header and trailer lines (grpc-status
 * parsing, grpc-message percent-decoding), the body's gRPC length-prefixed framing of Execute
 * (one completion) and ExecuteStream (output events then a completion event, reassembled
 * across arbitrary body pieces), the size bounds, and the completion made of it all. The
 * worker is another host, so every byte is hostile.
 *
 * Input: byte 0 = flags (bit 0 stream, bit 1 a small client message limit, bits 2-4 curl's
 * result), byte 1 = the HTTP status, then records: 0 grpc-status line, 1 grpc-message line,
 * 2 any header line, 3 a body piece framed as one gRPC message, 4 raw body bytes.
 *
 * Properties: no crash or leak; always a completion; a FAILED completion carries an error code
 * and a text; output handed on never exceeds the body bytes; a completion is SUCCEEDED only
 * when the worker's grpc-status said OK. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "broker/remote_wire.h"
#include "fuzz/fuzz_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Pieces one input may make (each record is one piece). */
#define FUZZ_MAX_PIECES 256
/* The small client limit (bit 1 of the flags): far below the default, to reach the bounds. */
#define FUZZ_SMALL_MESSAGE 512

static const int CURL_CODES[8] = {0,
                                  16 /* HTTP2 */,
                                  56 /* RECV_ERROR */,
                                  28 /* TIMEOUT */,
                                  7 /* COULDNT_CONNECT */,
                                  52 /* GOT_NOTHING */,
                                  0,
                                  92};
static const long HTTP_STATUSES[4] = {200, 200, 505, 404};

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd;

static uint8_t u8(rd *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static const uint8_t *take(rd *r, size_t want, size_t *got)
{
    *got = want < r->n ? want : r->n;
    const uint8_t *p = r->p;
    r->p += *got;
    r->n -= *got;
    return p;
}

static uint64_t output_bytes;

static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *d, size_t len,
                      uint64_t offset)
{
    (void)arg;
    (void)stream;
    (void)offset;
    if (len)
        FUZZ_REQUIRE(d != NULL, "output without bytes");
    output_bytes += len;
}

/* A line "name: <bytes>\r\n" into a new buffer. */
static uint8_t *line(const char *name, const uint8_t *v, size_t vlen, size_t *len)
{
    size_t nl = strlen(name);
    uint8_t *b = malloc(nl + vlen + 2);
    if (!b)
        abort();
    memcpy(b, name, nl);
    if (vlen)
        memcpy(b + nl, v, vlen);
    memcpy(b + nl + vlen, "\r\n", 2);
    *len = nl + vlen + 2;
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rd r = {data, size};
    uint8_t flags = u8(&r), st = u8(&r);
    remote_piece pieces[FUZZ_MAX_PIECES];
    uint8_t *owned[FUZZ_MAX_PIECES];
    size_t n = 0;
    uint64_t body_bytes = 0;
    while (r.n > 0 && n < FUZZ_MAX_PIECES) {
        uint8_t tag = u8(&r);
        size_t len, got;
        const uint8_t *p;
        uint8_t *b = NULL;
        bool header = true;
        switch (tag % 5) {
        case 0:
            p = take(&r, u8(&r) & 15, &got);
            b = line("grpc-status: ", p, got, &len);
            break;
        case 1:
            p = take(&r, u8(&r), &got);
            b = line((tag & 8) ? "Grpc-Message:" : "grpc-message: ", p, got, &len);
            break;
        case 2:
            p = take(&r, u8(&r), &got);
            b = malloc(got ? got : 1);
            if (!b)
                abort();
            memcpy(b, p, got);
            len = got;
            break;
        case 3: { /* one gRPC message: flag byte 0 (or from the tag), correct length */
            size_t want = (size_t)u8(&r) << 8;
            want |= u8(&r);
            p = take(&r, want, &got);
            b = malloc(5 + got);
            if (!b)
                abort();
            b[0] = (tag & 0x80) ? (uint8_t)(tag >> 3) : 0;
            b[1] = (uint8_t)(got >> 24);
            b[2] = (uint8_t)(got >> 16);
            b[3] = (uint8_t)(got >> 8);
            b[4] = (uint8_t)got;
            if (got)
                memcpy(b + 5, p, got);
            len = 5 + got;
            header = false;
            break;
        }
        default: {
            size_t want = (size_t)u8(&r) << 8;
            want |= u8(&r);
            p = take(&r, want, &got);
            b = malloc(got ? got : 1);
            if (!b)
                abort();
            memcpy(b, p, got);
            len = got;
            header = false;
            break;
        }
        }
        if (!header)
            body_bytes += len;
        owned[n] = b;
        pieces[n++] = (remote_piece){.header = header, .data = b, .len = len};
    }
    remote_response resp = {.stream = flags & 1,
                            .max_message = (flags & 2) ? FUZZ_SMALL_MESSAGE : 0,
                            .pieces = pieces,
                            .n_pieces = n,
                            .curl_code = CURL_CODES[flags >> 2 & 7],
                            .http_status = HTTP_STATUSES[st & 3]};
    output_bytes = 0;
    sbx_completion *c = remote_decode_response(&resp, on_output, NULL);
    FUZZ_REQUIRE(c != NULL, "no completion");
    FUZZ_REQUIRE(output_bytes <= body_bytes, "%llu output bytes from %llu body bytes",
                 (unsigned long long)output_bytes, (unsigned long long)body_bytes);
    if (c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED)
        FUZZ_REQUIRE(c->error_code != 0 && c->error && c->error[0],
                     "a FAILED completion without a code and text");
    /* The completion is the worker's only after "grpc-status: 0" (or " 0", "00"): */
    bool said_ok = false;
    for (size_t i = 0; i < n; i++) {
        static const char k[] = "grpc-status:";
        size_t len = pieces[i].len;
        while (len > 0 && (pieces[i].data[len - 1] == '\r' || pieces[i].data[len - 1] == '\n'))
            len--;
        if (!pieces[i].header || len < sizeof k ||
            strncasecmp((const char *)pieces[i].data, k, sizeof k - 1) != 0)
            continue;
        bool digits = false, zero = true, other = false;
        for (size_t j = sizeof k - 1; j < len; j++) {
            char ch = (char)pieces[i].data[j];
            if (ch == ' ')
                continue;
            if (ch >= '0' && ch <= '9') {
                digits = true;
                zero = zero && ch == '0';
            } else {
                other = true;
            }
        }
        said_ok = digits && zero && !other; /* the last grpc-status line counts */
    }
    if (!said_ok)
        FUZZ_REQUIRE(c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED,
                     "SUCCEEDED without grpc-status 0");
    sbx_completion_free(c);
    for (size_t i = 0; i < n; i++)
        free(owned[i]);
    return 0;
}
