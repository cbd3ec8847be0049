/* pbfield.c - protobuf-c field values by descriptor (pbfield.h). */
#include "core/pbfield.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/contract.h"

bool sbx_pb_is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return *(const uint32_t *)p == 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return *(const uint64_t *)p == 0;
    case PROTOBUF_C_TYPE_FLOAT: return *(const float *)p == 0 && !signbit(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE: return *(const double *)p == 0 && !signbit(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL: return !*(const protobuf_c_boolean *)p;
    case PROTOBUF_C_TYPE_ENUM: return *(const int *)p == 0;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return s == NULL || s[0] == '\0';
    }
    case PROTOBUF_C_TYPE_BYTES: return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE: return *(ProtobufCMessage *const *)p == NULL;
    }
    return true;
}

size_t sbx_pb_value_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return 8;
    case PROTOBUF_C_TYPE_DOUBLE: return sizeof(double);
    case PROTOBUF_C_TYPE_FLOAT: return sizeof(float);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM: return sizeof(int);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    default: return 4; /* the 32-bit integers */
    }
}

/* ---- deep copy ---------------------------------------------------------------------------- */

static void *dup_mem(const void *p, size_t n)
{
    void *d = malloc(n > 0 ? n : 1);
    if (d != NULL && n > 0)
        memcpy(d, p, n);
    return d;
}

/* Copies the value of type f at src into dst (both singular slots or array elements), whose
 * pointers dst does not own yet. False when memory ran out (dst then holds NULL there). */
static bool copy_value(const ProtobufCFieldDescriptor *f, const void *src, void *dst)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)src;
        if (s == NULL || s == f->default_value)
            return true; /* shared, like unpack's */
        return (*(char **)dst = dup_mem(s, strlen(s) + 1)) != NULL;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = src;
        const ProtobufCBinaryData *def = f->default_value;
        if (b->data == NULL || (def != NULL && def->data == b->data))
            return true;
        return (((ProtobufCBinaryData *)dst)->data = dup_mem(b->data, b->len)) != NULL;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sm = *(ProtobufCMessage *const *)src;
        if (sm == NULL || sm == f->default_value)
            return true;
        return (*(ProtobufCMessage **)dst = sbx_pb_copy(sm)) != NULL;
    }
    default: return true; /* the bits copied with the struct are the value */
    }
}

static bool owns_pointers(const ProtobufCFieldDescriptor *f)
{
    return f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES ||
           f->type == PROTOBUF_C_TYPE_MESSAGE;
}

/* Clears what the struct copy aliased in field f of copy (after which free_unpacked may run on
 * copy at any point), and normalises as a pack and unpack would. */
static void detach_field(const ProtobufCFieldDescriptor *f, ProtobufCMessage *copy)
{
    char *slot = (char *)copy + f->offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        *(void **)slot = NULL;
        *(size_t *)((char *)copy + f->quantifier_offset) = 0;
        return;
    }
    if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const void *p = *(void **)slot;
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && (p == NULL || p == f->default_value))
            *(uint32_t *)((char *)copy + f->quantifier_offset) = 0; /* packs to nothing */
        *(const void **)slot = f->type == PROTOBUF_C_TYPE_STRING ? f->default_value : NULL;
    } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
        ProtobufCBinaryData *b = (ProtobufCBinaryData *)slot;
        const ProtobufCBinaryData *def = f->default_value;
        if (def == NULL || def->data != b->data)
            b->data = NULL;
    }
}

/* True when field f of m is a oneof member other than the one set. */
static bool other_oneof(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m)
{
    return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
           f->id != *(const uint32_t *)((const char *)m + f->quantifier_offset);
}

static bool copy_field(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m,
                       ProtobufCMessage *copy)
{
    const char *src = (const char *)m + f->offset;
    char *dst = (char *)copy + f->offset;
    if (f->label != PROTOBUF_C_LABEL_REPEATED)
        return copy_value(f, src, dst);
    size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
    const char *arr = *(char *const *)src;
    if (n == 0 || arr == NULL)
        return true;
    size_t size = sbx_pb_value_size(f);
    char *out = owns_pointers(f) ? calloc(n, size) : dup_mem(arr, n * size);
    if (out == NULL)
        return false;
    *(void **)dst = out;
    *(size_t *)((char *)copy + f->quantifier_offset) = n;
    if (!owns_pointers(f))
        return true;
    for (size_t i = 0; i < n; i++) {
        if (f->type == PROTOBUF_C_TYPE_BYTES) /* the length rides along with the data */
            ((ProtobufCBinaryData *)out)[i].len = ((const ProtobufCBinaryData *)arr)[i].len;
        if (!copy_value(f, arr + i * size, out + i * size))
            return false;
    }
    return true;
}

static bool copy_unknown(const ProtobufCMessage *m, ProtobufCMessage *copy)
{
    copy->n_unknown_fields = 0;
    copy->unknown_fields = NULL;
    if (m->n_unknown_fields == 0)
        return true;
    copy->unknown_fields = calloc(m->n_unknown_fields, sizeof(*copy->unknown_fields));
    if (copy->unknown_fields == NULL)
        return false;
    copy->n_unknown_fields = m->n_unknown_fields;
    for (unsigned i = 0; i < m->n_unknown_fields; i++) {
        copy->unknown_fields[i] = m->unknown_fields[i];
        copy->unknown_fields[i].data = dup_mem(m->unknown_fields[i].data, m->unknown_fields[i].len);
        if (copy->unknown_fields[i].data == NULL)
            return false;
    }
    return true;
}

ProtobufCMessage *sbx_pb_copy(const ProtobufCMessage *m)
{
    if (m == NULL)
        return NULL;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    ProtobufCMessage *copy = dup_mem(m, d->sizeof_message);
    if (copy == NULL)
        return NULL;
    /* first nothing shared, so that a failure half way frees exactly what was copied */
    copy->n_unknown_fields = 0;
    copy->unknown_fields = NULL;
    for (unsigned i = 0; i < d->n_fields; i++)
        if (!other_oneof(&d->fields[i], m))
            detach_field(&d->fields[i], copy);
    bool ok = copy_unknown(m, copy);
    for (unsigned i = 0; ok && i < d->n_fields; i++)
        if (!other_oneof(&d->fields[i], copy))
            ok = copy_field(&d->fields[i], m, copy);
    if (!ok) {
        sbx_message_free(copy);
        return NULL;
    }
    return copy;
}
