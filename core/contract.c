/* contract.c - helpers over the sbx.v1 protobuf-c messages (see include/sbx/contract.h):
 * uuids, clocks, request/completion builders, copies and field setters.
 * Every message built here follows the ownership rule of contract.h so that
 * protobuf_c_message_free_unpacked(msg, NULL) releases it whole. */
#include "sbx/contract.h"

#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/limits.h"
#include "core/pbfield.h"
#include "core/sha256.h"
#include "sbx/provider.h"

/* Random bytes for uuids come from getrandom a block at a time, one syscall per
 * UUID_POOL_BYTES / 16 uuids instead of one per uuid: on a VM that syscall (~2 us) and the
 * 16-argument snprintf (~1 us) cost as much as the rest of a request through the thread broker,
 * which mints a uuid per request (task ids, per_call session ids). The pool is per thread (no
 * lock) and never outlives a fork: a fork()ed child (uuid_atfork_child) bumps the generation
 * every pool is checked against, so it draws fresh bytes instead of handing out the ids its
 * parent will. Bytes are used once and erased as they are taken. */
#define UUID_POOL_BYTES 512

typedef struct uuid_pool {
    uint8_t bytes[UUID_POOL_BYTES];
    size_t left;  /* unused bytes, at the end of bytes[] */
    unsigned gen; /* uuid_gen when filled */
} uuid_pool;

static _Thread_local uuid_pool uuid_bytes;
static atomic_uint uuid_gen = 1; /* a zeroed pool (gen 0) is stale */
static pthread_once_t uuid_once = PTHREAD_ONCE_INIT;

static void uuid_atfork_child(void)
{
    atomic_fetch_add(&uuid_gen, 1);
}

static void uuid_register_atfork(void)
{
    pthread_atfork(NULL, NULL, uuid_atfork_child);
}

static void random_fill(uint8_t *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(b + got, n - got, 0);
        if (r > 0)
            got += (size_t)r;
    }
}

void sbx_uuid_v4(char out[SBX_UUID_LEN])
{
    static const char hex[] = "0123456789abcdef";
    pthread_once(&uuid_once, uuid_register_atfork);
    uuid_pool *p = &uuid_bytes;
    unsigned gen = atomic_load(&uuid_gen);
    if (p->left < 16 || p->gen != gen) {
        random_fill(p->bytes, sizeof p->bytes);
        p->left = sizeof p->bytes;
        p->gen = gen;
    }
    uint8_t *src = p->bytes + sizeof p->bytes - p->left;
    uint8_t b[16];
    memcpy(b, src, sizeof b);
    explicit_bzero(src, sizeof b);
    p->left -= sizeof b;
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    char *o = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *o++ = '-';
        *o++ = hex[b[i] >> 4];
        *o++ = hex[b[i] & 0x0f];
    }
    *o = '\0';
}

int64_t sbx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sbx_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sbx_monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- setters ------------------------------------------------------------------------------ */

/* First allocation of a bytes field that is appended to: one typical output chunk, so a small
 * output needs one allocation and a large one doubles from there. */
#define SBX_APPEND_MIN_CAPACITY 256

bool sbx_set_string(char **field, const char *value)
{
    char *copy = (char *)protobuf_c_empty_string;
    if (value != NULL && value[0] != '\0') {
        copy = strdup(value);
        if (copy == NULL)
            return false;
    }
    if (*field != NULL && *field != protobuf_c_empty_string)
        free(*field);
    *field = copy;
    return true;
}

bool sbx_set_bytes(ProtobufCBinaryData *field, const void *data, size_t len)
{
    uint8_t *copy = NULL;
    if (len > 0) {
        copy = malloc(len);
        if (copy == NULL)
            return false;
        memcpy(copy, data, len);
    }
    free(field->data);
    field->data = copy;
    field->len = len;
    return true;
}

bool sbx_append_bytes(ProtobufCBinaryData *field, const void *data, size_t len)
{
    if (len == 0)
        return true;
    if (len > SIZE_MAX - field->len)
        return false;
    size_t need = field->len + len;
    uint8_t *grown = field->data;
    /* ProtobufCBinaryData has no capacity field: the allocation's usable size is the capacity,
     * and it grows geometrically. Growing by exactly len made a program printing many small
     * chunks cost O(n^2) copies (an allocator that never grows in place, like ASan's, copied
     * 40 GB for 400 KB of two-byte writes). */
    if (grown == NULL || malloc_usable_size(grown) < need) {
        size_t cap = field->len > SIZE_MAX / 2 ? need : field->len * 2;
        if (cap < need)
            cap = need;
        if (cap < SBX_APPEND_MIN_CAPACITY)
            cap = SBX_APPEND_MIN_CAPACITY;
        grown = realloc(field->data, cap);
        if (grown == NULL)
            return false;
    }
    memcpy(grown + field->len, data, len);
    field->data = grown;
    field->len += len;
    return true;
}

bool sbx_add_string(size_t *n, char ***items, const char *value)
{
    char *copy = strdup(value != NULL ? value : "");
    if (copy == NULL)
        return false;
    char **grown = realloc(*items, (*n + 1) * sizeof(**items));
    if (grown == NULL) {
        free(copy);
        return false;
    }
    grown[*n] = copy;
    *items = grown;
    (*n)++;
    return true;
}

bool sbx_result_add_file(sbx_result *r, sbx_file *f)
{
    sbx_file **grown = realloc(r->files, (r->n_files + 1) * sizeof(*r->files));
    if (grown == NULL)
        return false;
    grown[r->n_files++] = f;
    r->files = grown;
    return true;
}

bool sbx_result_set_data(sbx_result *r, const char *key, const char *value)
{
    for (size_t i = 0; i < r->n_provider_data; i++)
        if (strcmp(r->provider_data[i]->key, key) == 0)
            return sbx_set_string(&r->provider_data[i]->value, value);
    Sbx__V1__Result__ProviderDataEntry *e = malloc(sizeof(*e));
    if (e == NULL)
        return false;
    sbx__v1__result__provider_data_entry__init(e);
    Sbx__V1__Result__ProviderDataEntry **grown =
        realloc(r->provider_data, (r->n_provider_data + 1) * sizeof(*grown));
    if (grown == NULL || !sbx_set_string(&e->key, key) || !sbx_set_string(&e->value, value)) {
        if (grown != NULL)
            r->provider_data = grown;
        protobuf_c_message_free_unpacked(&e->base, NULL);
        return false;
    }
    grown[r->n_provider_data++] = e;
    r->provider_data = grown;
    return true;
}

/* ---- constructors ------------------------------------------------------------------------- */

#define SBX_DEFINE_NEW(fn, type, init)                                                             \
    type *fn(void)                                                                                 \
    {                                                                                              \
        type *m = malloc(sizeof(*m));                                                              \
        if (m != NULL)                                                                             \
            init(m);                                                                               \
        return m;                                                                                  \
    }

SBX_DEFINE_NEW(sbx_result_new, sbx_result, sbx__v1__result__init)
SBX_DEFINE_NEW(sbx_policy_new, sbx_policy, sbx__v1__policy__init)
SBX_DEFINE_NEW(sbx_principal_new, sbx_principal, sbx__v1__principal__init)
SBX_DEFINE_NEW(sbx_session_handle_new, sbx_session_handle, sbx__v1__session_handle__init)
SBX_DEFINE_NEW(sbx_file_new, sbx_file, sbx__v1__file__init)

sbx_request *sbx_request_new(void)
{
    sbx_request *req = malloc(sizeof(*req));
    if (req == NULL)
        return NULL;
    sbx__v1__execution_request__init(req);
    char id[SBX_UUID_LEN];
    sbx_uuid_v4(id);
    if (!sbx_set_string(&req->task_id, id)) {
        free(req);
        return NULL;
    }
    return req;
}

void sbx_message_free(ProtobufCMessage *m)
{
    if (m != NULL)
        protobuf_c_message_free_unpacked(m, NULL);
}

void sbx_request_free(sbx_request *req)
{
    sbx_message_free((ProtobufCMessage *)req);
}

void sbx_completion_free(sbx_completion *c)
{
    sbx_message_free((ProtobufCMessage *)c);
}

uint8_t *sbx_message_pack(const ProtobufCMessage *m, size_t *out_len)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    if (buf == NULL)
        return NULL;
    *out_len = protobuf_c_message_pack(m, buf);
    return buf;
}

ProtobufCMessage *sbx_message_copy(const ProtobufCMessage *m)
{
    return sbx_pb_copy(m);
}

sbx_request *sbx_request_copy(const sbx_request *req)
{
    return (sbx_request *)sbx_message_copy((const ProtobufCMessage *)req);
}

sbx_completion *sbx_completion_copy(const sbx_completion *c)
{
    return (sbx_completion *)sbx_message_copy((const ProtobufCMessage *)c);
}

sbx_completion *sbx_completion_new(const char *task_id)
{
    sbx_completion *c = malloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    sbx__v1__execution_completion__init(c);
    c->status = SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED;
    c->result = sbx_result_new();
    if (c->result == NULL || !sbx_set_string(&c->task_id, task_id)) {
        sbx_completion_free(c);
        return NULL;
    }
    return c;
}

static sbx_completion *completion_fail_text(const char *task_id, sbx_status code, const char *text)
{
    /* A FAILED completion with error_code NONE would tell the caller nothing: a caller that
     * passes SBX_OK here has a bug, which is what INTERNAL reports. */
    if (code == SBX_OK)
        code = SBX_E_INTERNAL;
    sbx_completion *c = malloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    sbx__v1__execution_completion__init(c);
    c->status = code == SBX_E_TIMEOUT ? SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT
                                      : SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED;
    c->error_code = (Sbx__V1__ErrorCode)code;
    if (!sbx_set_string(&c->task_id, task_id) || !sbx_set_string(&c->error, text)) {
        sbx_completion_free(c);
        return NULL;
    }
    return c;
}

/* Formats into text (SBX_ERROR_MAX bytes); a text that does not fit ends with "...", as
 * sbx_error messages do, so a reader knows it was cut. */
static void format_text(char text[SBX_ERROR_MAX], const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void format_text(char text[SBX_ERROR_MAX], const char *fmt, va_list ap)
{
    int n = vsnprintf(text, SBX_ERROR_MAX, fmt, ap);
    if (n < 0)
        snprintf(text, SBX_ERROR_MAX, "(unformattable message)");
    else if (n >= SBX_ERROR_MAX)
        memcpy(text + SBX_ERROR_MAX - 4, "...", 4);
}

sbx_completion *sbx_completion_fail(const char *task_id, sbx_status code, const char *fmt, ...)
{
    char text[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    format_text(text, fmt, ap);
    va_end(ap);
    return completion_fail_text(task_id, code, text);
}

sbx_completion *sbx_completion_from_error(const char *task_id, const sbx_error *err)
{
    if (err == NULL)
        return completion_fail_text(task_id, SBX_E_INTERNAL, "failed without an error message");
    return completion_fail_text(task_id, err->code, err->message);
}

void sbx_completion_add_notice(sbx_completion *c, const char *fmt, ...)
{
    char text[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    format_text(text, fmt, ap);
    va_end(ap);
    if (c->notice == NULL || c->notice[0] == '\0') {
        sbx_set_string(&c->notice, text);
        return;
    }
    size_t len = strlen(c->notice) + 2 + strlen(text) + 1;
    char *joined = malloc(len);
    if (joined == NULL)
        return;
    snprintf(joined, len, "%s; %s", c->notice, text);
    free(c->notice);
    c->notice = joined;
}

/* ---- idempotency ------------------------------------------------------------------------ */

/* A ProtobufCBuffer that feeds what protobuf-c packs into a digest: no copy of the request,
 * however large its payload. */
typedef struct digest_sink {
    ProtobufCBuffer base;
    sbx_sha256 sha;
} digest_sink;

static void digest_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
    digest_sink *sink = (digest_sink *)buffer;
    sbx_sha256_update(&sink->sha, data, len);
}

bool sbx_request_digest(const sbx_request *req, uint8_t out[SBX_REQUEST_DIGEST_LEN])
{
    /* A shallow copy shares every submessage; only the transport fields differ. deadline_ms is
     * recomputed by a client on each retry, so it cannot be part of what "the same request"
     * means. */
    sbx_request canonical = *req;
    canonical.deadline_ms = 0;
    _Static_assert(SBX_REQUEST_DIGEST_LEN == SBX_SHA256_LEN, "a request digest is one SHA-256");
    digest_sink sink = {.base = {.append = digest_append}};
    sbx_sha256_init(&sink.sha);
    protobuf_c_message_pack_to_buffer(&canonical.base, &sink.base);
    sbx_sha256_final(&sink.sha, out);
    return true;
}

const char *sbx_request_subject(const sbx_request *req)
{
    if (req == NULL || req->principal == NULL || req->principal->subject == NULL)
        return "";
    return req->principal->subject;
}

const char *sbx_request_op_name(const sbx_request *req)
{
    switch (req->op_case) {
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE: return "run_code";
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND: return "run_command";
    case SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES: return "install_packages";
    case SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE: return "write_file";
    case SBX__V1__EXECUTION_REQUEST__OP_READ_FILE: return "read_file";
    case SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES: return "list_files";
    case SBX__V1__EXECUTION_REQUEST__OP_DESTROY: return "destroy";
    case SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND: return "attach_command";
    case SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND: return "cancel_command";
    case SBX__V1__EXECUTION_REQUEST__OP_PAUSE: return "pause";
    case SBX__V1__EXECUTION_REQUEST__OP_RESUME: return "resume";
    case SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT: return "snapshot";
    case SBX__V1__EXECUTION_REQUEST__OP_LIST_SNAPSHOTS: return "list_snapshots";
    case SBX__V1__EXECUTION_REQUEST__OP_DELETE_SNAPSHOT: return "delete_snapshot";
    case SBX__V1__EXECUTION_REQUEST__OP_EXPOSE: return "expose";
    default: return "none";
    }
}

/* Largest field number protobuf allows (2^29 - 1). */
#define CONTRACT_MAX_FIELD_NUMBER 536870911u
/* Nesting the strictness pass follows; sbx.v1 has no recursive message, so real depth < 8. */
#define CONTRACT_MAX_DEPTH 32
/* Fields of a message tracked with a bit each; longer messages get a heap array. */
#define CONTRACT_SEEN_BITS 64

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *value)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *value = v;
            return true;
        }
    }
    return false;
}

/* Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF) at s[0..n), n > 0; 0 when there is none or when it is a NUL. */
static size_t utf8_sequence(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    size_t extra;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) {
        extra = 1, cp = c & 0x1fu, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        extra = 2, cp = c & 0x0fu, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        extra = 3, cp = c & 0x07u, min = 0x10000;
    } else {
        return 0;
    }
    if (n <= extra)
        return 0;
    for (size_t k = 1; k <= extra; k++) {
        if ((s[k] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[k] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return extra + 1;
}

bool sbx_text_valid(const void *text, size_t len)
{
    const uint8_t *s = text;
    for (size_t i = 0, n; i < len; i += n)
        if ((n = utf8_sequence(s + i, len - i)) == 0)
            return false;
    return true;
}

bool sbx_set_text(char **field, const void *bytes, size_t len)
{
    static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
    if (len > (SIZE_MAX - 1) / 3)
        return false;
    char *text = malloc(len * 3 + 1); /* every byte may become U+FFFD */
    if (text == NULL)
        return false;
    const uint8_t *s = bytes;
    size_t out = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_sequence(s + i, len - i);
        if (n == 0) {
            memcpy(text + out, replacement, 3);
            out += 3;
            i++;
        } else {
            memcpy(text + out, s + i, n);
            out += n;
            i += n;
        }
    }
    text[out] = '\0';
    bool ok = sbx_set_string(field, text);
    free(text);
    return ok;
}

/* The strictness pass, run on bytes protobuf-c already accepted. It refuses what protobuf-c
 * 1.4 accepts but reads differently from the protobuf spec (and from Python and nanopb):
 *  - field number 0 written as a multi-byte varint (80 00), or above 2^29-1: protobuf-c keeps
 *    them as unknown fields and packs them into bytes it then refuses itself, so the message
 *    could not be copied or forwarded;
 *  - a oneof message member that appears more than once: the spec merges the parts, protobuf-c
 *    keeps only the last one. A proxy or auditor reading the merged message would see another
 *    operation than the one sbx runs (e.g. other argv), so such input is refused outright;
 *  - a string field that is not UTF-8 (proto3 requires it; Python and C++ clients refuse the
 *    whole message, so a task_id or path echoed back would make the completion unreadable), or
 *    that holds a NUL byte (protobuf-c's char * ends there: "a\0b" would be read, and
 *    forwarded, as "a").
 * With max_list > 0 it also refuses a repeated field or map with more than max_list elements
 * in one message, so it can run before decoding and keep a list of millions of empty strings
 * from being allocated.
 * Walks every message-typed field recursively. Returns false with a reason in why. */
/* Long because it is one protobuf wire-format walker (tag, wire type, each type's length rule, the
 * recursion into submessages, the list bound), which reads best as one loop. */
static bool wire_strict(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                        int depth, size_t max_list, char *why, size_t why_len)
{
    if (depth > CONTRACT_MAX_DEPTH) {
        snprintf(why, why_len, "nests messages deeper than %d levels", CONTRACT_MAX_DEPTH);
        return false;
    }
    const uint8_t *end = p + len;
    uint64_t seen_bits = 0;
    uint8_t *seen_heap = NULL;
    uint32_t list_stack[CONTRACT_SEEN_BITS];
    uint32_t *lists = list_stack; /* elements of each repeated field so far (max_list > 0) */
    if (d->n_fields > CONTRACT_SEEN_BITS) {
        seen_heap = calloc(d->n_fields, 1);
        lists = max_list > 0 ? calloc(d->n_fields, sizeof *lists) : NULL;
        if (seen_heap == NULL || (max_list > 0 && lists == NULL)) {
            free(seen_heap);
            free(lists);
            snprintf(why, why_len, "could not be checked: out of memory");
            return false;
        }
    } else if (max_list > 0) {
        memset(list_stack, 0, sizeof list_stack);
    }
    bool ok = true;
    while (ok && p < end) {
        uint64_t key = 0, value = 0;
        if (!wire_varint(&p, end, &key)) {
            snprintf(why, why_len, "has a malformed field key");
            ok = false;
            break;
        }
        uint64_t number = key >> 3;
        if (number == 0 || number > CONTRACT_MAX_FIELD_NUMBER) {
            snprintf(why, why_len, "has a field numbered %" PRIu64 " (valid: 1 to 2^29-1)", number);
            ok = false;
            break;
        }
        if (max_list > 0) {
            const ProtobufCFieldDescriptor *lf =
                protobuf_c_message_descriptor_get_field(d, (unsigned)number);
            if (lf != NULL && lf->label == PROTOBUF_C_LABEL_REPEATED &&
                ++lists[lf - d->fields] > max_list) {
                snprintf(why, why_len,
                         "has more than %zu elements in '%s' of %s (the limit of a list or map "
                         "in one request): send fewer",
                         max_list, lf->name, d->name);
                ok = false;
                break;
            }
        }
        switch (key & 7) {
        case 0: ok = wire_varint(&p, end, &value); break;
        case 1:
        case 5: {
            size_t n = (key & 7) == 1 ? 8 : 4;
            ok = (size_t)(end - p) >= n;
            p += ok ? n : 0;
            break;
        }
        case 2: {
            ok = wire_varint(&p, end, &value) && value <= (uint64_t)(end - p);
            if (!ok)
                break;
            const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field(d, (unsigned)number);
            if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING &&
                !sbx_text_valid(p, (size_t)value)) {
                snprintf(why, why_len,
                         "has a string field '%s' of %s that is not UTF-8 text without NUL "
                         "bytes (send binary data in a bytes field)",
                         f->name, d->name);
                ok = false;
                break;
            }
            if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                    size_t idx = (size_t)(f - d->fields);
                    bool again = seen_heap ? seen_heap[idx] != 0 : (seen_bits >> idx) & 1;
                    if (again) {
                        snprintf(why, why_len,
                                 "has the oneof member '%s' of %s more than once (send it once)",
                                 f->name, d->name);
                        ok = false;
                        break;
                    }
                    if (seen_heap)
                        seen_heap[idx] = 1;
                    else
                        seen_bits |= UINT64_C(1) << idx;
                }
                ok =
                    wire_strict(f->descriptor, p, (size_t)value, depth + 1, max_list, why, why_len);
                if (!ok)
                    break;
            }
            p += value;
            break;
        }
        default:
            snprintf(why, why_len, "has a field of wire type %u", (unsigned)(key & 7));
            ok = false;
        }
        if (!ok && why[0] == '\0')
            snprintf(why, why_len, "is truncated inside a field");
    }
    free(seen_heap);
    if (lists != list_stack)
        free(lists);
    return ok;
}

/* Bytes malloc adds to each allocation (its header and alignment), counted by the budget. */
#define CONTRACT_ALLOC_OVERHEAD 16

/* A protobuf-c allocator that fails once the allocations it made pass a budget: what decoding
 * takes is bounded by a multiple of the input, whatever its shape (unknown fields, lists). */
typedef struct decode_budget {
    size_t used, limit;
    bool exceeded;
} decode_budget;

static void *budget_alloc(void *data, size_t size)
{
    decode_budget *b = data;
    if (size > b->limit - b->used || CONTRACT_ALLOC_OVERHEAD > b->limit - b->used - size) {
        b->exceeded = true;
        return NULL;
    }
    b->used += size + CONTRACT_ALLOC_OVERHEAD;
    return malloc(size);
}

static void budget_free(void *data, void *ptr)
{
    (void)data;
    free(ptr); /* what it frees came from malloc: sbx_message_free frees it the same way */
}

/* Decoding may allocate at most SBX_REQUEST_DECODE_FACTOR x len + SBX_REQUEST_DECODE_SLACK
 * bytes, whatever the message (completions come from workers, the queue's bucket and recording
 * files, as untrusted as requests). max_list > 0: lists are checked (and the strictness pass
 * runs) before decoding. */
static sbx_status message_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *buf,
                                 size_t len, size_t max_len, size_t max_list,
                                 ProtobufCMessage **out, sbx_error *err)
{
    *out = NULL;
    const char *what = desc->short_name;
    if (len > max_len)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "%s of %zu bytes exceeds the limit of %zu bytes; send a smaller "
                             "message or raise max_message_bytes",
                             what, len, max_len);
    char why[256] = "";
    if (max_list > 0 && !wire_strict(desc, buf, len, 0, max_list, why, sizeof(why)))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "%s of %zu bytes %s; it is not a valid sbx.v1 protobuf message", what,
                             len, why);
    decode_budget budget = {
        .limit = len <= (SIZE_MAX - SBX_REQUEST_DECODE_SLACK) / SBX_REQUEST_DECODE_FACTOR
                     ? len * SBX_REQUEST_DECODE_FACTOR + SBX_REQUEST_DECODE_SLACK
                     : SIZE_MAX};
    ProtobufCAllocator counted = {
        .alloc = budget_alloc, .free = budget_free, .allocator_data = &budget};
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &counted, len, buf);
    if (m == NULL && budget.exceeded)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "%s of %zu bytes would take more than %zu bytes once decoded (%dx "
                             "its size + %u MiB): send fewer, larger fields",
                             what, len, budget.limit, SBX_REQUEST_DECODE_FACTOR,
                             SBX_REQUEST_DECODE_SLACK >> 20);
    if (m == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "%s of %zu bytes is not a valid sbx.v1 protobuf message", what, len);
    if (max_list == 0 && !wire_strict(desc, buf, len, 0, 0, why, sizeof(why))) {
        protobuf_c_message_free_unpacked(m, NULL);
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "%s of %zu bytes %s; it is not a valid sbx.v1 protobuf message", what,
                             len, why);
    }
    *out = m;
    return SBX_OK;
}

sbx_status sbx_message_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *buf,
                              size_t len, size_t max_len, ProtobufCMessage **out, sbx_error *err)
{
    return message_decode(desc, buf, len, max_len, 0, out, err);
}

sbx_status sbx_request_decode(const uint8_t *buf, size_t len, size_t max_len, sbx_request **out,
                              sbx_error *err)
{
    return message_decode(&sbx__v1__execution_request__descriptor, buf, len, max_len,
                          SBX_REQUEST_MAX_LIST, (ProtobufCMessage **)out, err);
}

sbx_status sbx_completion_decode(const uint8_t *buf, size_t len, size_t max_len,
                                 sbx_completion **out, sbx_error *err)
{
    return sbx_message_decode(&sbx__v1__execution_completion__descriptor, buf, len, max_len,
                              (ProtobufCMessage **)out, err);
}

/* ---- sbx_strlist (provider.h) ------------------------------------------------------------- */

bool sbx_strlist_add(sbx_strlist *l, const char *item)
{
    return sbx_add_string(&l->n, &l->items, item);
}

bool sbx_strlist_contains(const sbx_strlist *l, const char *item)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i], item) == 0)
            return true;
    return false;
}

void sbx_strlist_clear(sbx_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

char *sbx_strlist_join(const sbx_strlist *l, const char *sep)
{
    if (sep == NULL)
        sep = "";
    size_t sep_len = strlen(sep), len = 1;
    for (size_t i = 0; i < l->n; i++)
        len += strlen(l->items[i]) + (i ? sep_len : 0);
    char *out = malloc(len);
    if (out == NULL)
        return NULL;
    char *p = out;
    for (size_t i = 0; i < l->n; i++) {
        if (i > 0) {
            memcpy(p, sep, sep_len);
            p += sep_len;
        }
        size_t n = strlen(l->items[i]);
        memcpy(p, l->items[i], n);
        p += n;
    }
    *p = '\0';
    return out;
}
