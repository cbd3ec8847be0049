/* pbjson.c - protobuf-c messages as canonical proto3 JSON (see pbjson.h), walking the
 * generated descriptors, so every message of the contract prints the same way. It must not
 * print: callers dump the json_t. Text fields that are not valid UTF-8 (an error message
 * quoting program bytes) get U+FFFD for each bad byte, so the document always stays JSON.
 */
#include "cli/pbjson.h"

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pbfield.h"

/* Longest JSON field name: the contract's names are under 32 characters; longer ones are cut
 * (never overflow). */
#define PBJSON_NAME_MAX 128

/* protoc's ToJsonName: "stdout_truncated" -> "stdoutTruncated". */
static void json_name(const char *proto_name, char out[PBJSON_NAME_MAX])
{
    size_t o = 0;
    bool upper = false;
    for (const char *c = proto_name; *c != '\0' && o + 1 < PBJSON_NAME_MAX; c++) {
        if (*c == '_') {
            upper = true;
            continue;
        }
        out[o++] = upper && *c >= 'a' && *c <= 'z' ? (char)(*c - 'a' + 'A') : *c;
        upper = false;
    }
    out[o] = '\0';
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static json_t *bytes_json(const ProtobufCBinaryData *d)
{
    size_t n = (d->len + 2) / 3 * 4;
    char *out = malloc(n + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < d->len; i += 3) {
        uint32_t v = (uint32_t)d->data[i] << 16;
        if (i + 1 < d->len)
            v |= (uint32_t)d->data[i + 1] << 8;
        if (i + 2 < d->len)
            v |= d->data[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < d->len ? b64[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < d->len ? b64[v & 63] : '=';
    }
    json_t *j = json_stringn_nocheck(out, o);
    free(out);
    return j;
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, surrogates or values above
 * U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t left)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t min, v;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        n = 2, min = 0x80, v = c & 0x1fu;
    else if ((c & 0xf0) == 0xe0)
        n = 3, min = 0x800, v = c & 0x0fu;
    else if ((c & 0xf8) == 0xf0)
        n = 4, min = 0x10000, v = c & 0x07u;
    else
        return 0;
    if (n > left)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    return n;
}

static json_t *text_json(const char *s)
{
    size_t len = strlen(s);
    json_t *j = json_stringn(s, len);
    if (j != NULL)
        return j;
    char *fixed = malloc(len * 3 + 1); /* each bad byte becomes the 3 bytes of U+FFFD */
    if (fixed == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq((const unsigned char *)s + i, len - i);
        if (n == 0) {
            memcpy(fixed + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(fixed + o, s + i, n);
            o += n;
            i += n;
        }
    }
    j = json_stringn(fixed, o);
    free(fixed);
    return j;
}

static json_t *double_json(double v)
{
    if (isnan(v))
        return json_string("NaN");
    if (isinf(v))
        return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static json_t *u64_json(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    return json_string(buf);
}

static json_t *i64_json(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return json_string(buf);
}

static json_t *enum_json(const ProtobufCEnumDescriptor *d, int v)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
    return ev != NULL ? json_string(ev->name) : json_integer(v); /* unknown: the number */
}

/* One value of field f stored at p (an element of a repeated field, or the field itself). */
static json_t *value_json(const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: return json_integer(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: return json_integer(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: return i64_json(*(const int64_t *)p);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: return u64_json(*(const uint64_t *)p);
    case PROTOBUF_C_TYPE_FLOAT: return double_json(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE: return double_json(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL: return json_boolean(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: return enum_json(f->descriptor, *(const int *)p);
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return text_json(s != NULL ? s : "");
    }
    case PROTOBUF_C_TYPE_BYTES: return bytes_json((const ProtobufCBinaryData *)p);
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m = *(ProtobufCMessage *const *)p;
        return m != NULL ? cli_pb_to_json(m) : json_object();
    }
    }
    return json_null();
}

/* protoc's map<K,V> is a repeated XxxEntry message of fields key = 1, value = 2. */
static bool is_map_entry(const ProtobufCMessageDescriptor *d)
{
    size_t n = strlen(d->name);
    return d->n_fields == 2 && n > 5 && strcmp(d->name + n - 5, "Entry") == 0 &&
           strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0;
}

/* A map key as JSON object key text. */
static char *map_key(const ProtobufCFieldDescriptor *f, const void *p)
{
    json_t *v = value_json(f, p);
    char *out = NULL;
    if (v == NULL)
        return NULL;
    if (json_is_string(v))
        out = strdup(json_string_value(v));
    else if (json_is_boolean(v))
        out = strdup(json_is_true(v) ? "true" : "false");
    else
        out = json_dumps(v, JSON_ENCODE_ANY);
    json_decref(v);
    return out;
}

static json_t *repeated_json(const ProtobufCFieldDescriptor *f, const void *array, size_t n)
{
    size_t es = sbx_pb_value_size(f);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor)) {
        const ProtobufCMessageDescriptor *ed = f->descriptor;
        json_t *obj = json_object();
        for (size_t i = 0; obj != NULL && i < n; i++) {
            const uint8_t *entry = ((const uint8_t *const *)array)[i];
            char *key = map_key(&ed->fields[0], entry + ed->fields[0].offset);
            json_t *v = value_json(&ed->fields[1], entry + ed->fields[1].offset);
            if (key == NULL || v == NULL || json_object_set_new(obj, key, v) != 0) {
                json_decref(obj);
                obj = NULL;
            }
            free(key);
        }
        return obj;
    }
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++)
        if (json_array_append_new(arr, value_json(f, (const uint8_t *)array + i * es)) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    return arr;
}

json_t *cli_pb_to_json(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const uint8_t *base = (const uint8_t *)m;
    json_t *obj = json_object();
    for (unsigned i = 0; obj != NULL && i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *p = base + f->offset;
        json_t *v = NULL;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            if (n == 0)
                continue;
            v = repeated_json(f, *(void *const *)p, n);
        } else {
            if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
                    continue;
            } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset != 0 &&
                       f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING) {
                if (!*(const protobuf_c_boolean *)(base + f->quantifier_offset))
                    continue;
            } else if (sbx_pb_is_default(f, p)) {
                continue;
            }
            v = value_json(f, p);
        }
        char name[PBJSON_NAME_MAX];
        json_name(f->name, name);
        if (v == NULL || json_object_set_new(obj, name, v) != 0) {
            json_decref(obj);
            obj = NULL;
        }
    }
    return obj;
}
