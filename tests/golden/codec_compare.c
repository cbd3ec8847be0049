/* codec_compare.c - field-by-field comparison of protobuf-c and nanopb decodings (see
 * codec_compare.h). */
#include "codec_compare.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_common.h>

/* Longest difference text kept. */
#define GOLDEN_WHY_MAX 1024

/* ---- protobuf-c field access -------------------------------------------------------------- */

const void *codec_pbc_member(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    return (const char *)m + f->offset;
}

size_t codec_pbc_elem_size(ProtobufCType type)
{
    switch (type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
    default: return 4; /* 32-bit integers, enums, float */
    }
}

/* A scalar as 64 bits: signed types sign-extended, floating point as its bit pattern. */
uint64_t codec_pbc_scalar(ProtobufCType type, const void *p)
{
    switch (type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM: {
        int32_t v;
        memcpy(&v, p, sizeof(v));
        return (uint64_t)(int64_t)v;
    }
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    case PROTOBUF_C_TYPE_BOOL: {
        protobuf_c_boolean v;
        memcpy(&v, p, sizeof(v));
        return v ? 1 : 0;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    }
}

bool codec_pbc_oneof_is_set(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    uint32_t which;
    memcpy(&which, (const char *)m + f->quantifier_offset, sizeof(which));
    return which == f->id;
}

/* ---- nanopb field access ------------------------------------------------------------------ */

static uint64_t nano_scalar(const pb_field_iter_t *it, const void *p)
{
    pb_type_t ltype = PB_LTYPE(it->type);
    if (ltype == PB_LTYPE_BOOL) {
        bool v;
        memcpy(&v, p, sizeof(v));
        return v ? 1 : 0;
    }
    bool is_signed = ltype == PB_LTYPE_VARINT || ltype == PB_LTYPE_SVARINT;
    if (it->data_size == 4) {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        return is_signed ? (uint64_t)(int64_t)(int32_t)v : v;
    }
    uint64_t v = 0;
    memcpy(&v, p, it->data_size < sizeof(v) ? it->data_size : sizeof(v));
    return v;
}

/* ---- field-by-field comparison ------------------------------------------------------------ */

typedef struct cmp_ctx {
    char path[512];
    char why[512 + GOLDEN_WHY_MAX + 8]; /* path, ": ", text */
} cmp_ctx;

static bool cmp_fail(cmp_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool cmp_fail(cmp_ctx *c, const char *fmt, ...)
{
    char text[GOLDEN_WHY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    snprintf(c->why, sizeof(c->why), "%s: %s", c->path[0] ? c->path : "(top)", text);
    return false;
}

static bool cmp_message(cmp_ctx *c, const ProtobufCMessage *pm, const pb_msgdesc_t *nd,
                        const void *nm);

/* Compares one element (a singular value or one entry of a repeated field). */
static bool cmp_element(cmp_ctx *c, const ProtobufCFieldDescriptor *f, const void *pp,
                        const pb_field_iter_t *it, const void *np)
{
    pb_type_t ltype = PB_LTYPE(it->type);
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        if (ltype != PB_LTYPE_STRING)
            return cmp_fail(c, "string in protobuf-c, nanopb type %#x", (unsigned)ltype);
        const char *ps = *(const char *const *)pp;
        if (ps == NULL)
            ps = "";
        const char *ns = np;
        if (strnlen(ns, it->data_size) == it->data_size)
            return cmp_fail(c, "nanopb string is not terminated within %u bytes",
                            (unsigned)it->data_size);
        if (strcmp(ps, ns) != 0)
            return cmp_fail(c, "protobuf-c \"%s\" != nanopb \"%s\"", ps, ns);
        return true;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        if (ltype != PB_LTYPE_BYTES)
            return cmp_fail(c, "bytes in protobuf-c, nanopb type %#x", (unsigned)ltype);
        const ProtobufCBinaryData *pb = pp;
        const pb_bytes_array_t *nb = np;
        if (pb->len != nb->size)
            return cmp_fail(c, "protobuf-c %zu bytes != nanopb %u bytes", pb->len,
                            (unsigned)nb->size);
        if (pb->len > 0 && memcmp(pb->data, nb->bytes, pb->len) != 0)
            return cmp_fail(c, "%zu bytes differ in content", pb->len);
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        if (ltype != PB_LTYPE_SUBMESSAGE || it->submsg_desc == NULL)
            return cmp_fail(c, "message in protobuf-c, nanopb type %#x", (unsigned)ltype);
        return cmp_message(c, *(const ProtobufCMessage *const *)pp, it->submsg_desc, np);
    }
    default: {
        if (ltype == PB_LTYPE_STRING || ltype == PB_LTYPE_BYTES || ltype == PB_LTYPE_SUBMESSAGE)
            return cmp_fail(c, "scalar in protobuf-c, nanopb type %#x", (unsigned)ltype);
        uint64_t pv = codec_pbc_scalar(f->type, pp), nv = nano_scalar(it, np);
        /* An enum is an int32 on the wire. protobuf-c holds it signed; nanopb holds an enum
         * without negative values unsigned (UVARINT), so a wire value of 2^31 or more (unknown
         * to both) is the same 32 bits read as -x by one and 2^32-x by the other. */
        if (f->type == PROTOBUF_C_TYPE_ENUM) {
            pv = (uint32_t)pv;
            nv = (uint32_t)nv;
        }
        if (pv != nv)
            return cmp_fail(c, "protobuf-c %#" PRIx64 " != nanopb %#" PRIx64, pv, nv);
        return true;
    }
    }
}

static bool cmp_field(cmp_ctx *c, const ProtobufCMessage *pm, const ProtobufCFieldDescriptor *f,
                      const pb_field_iter_t *it)
{
    pb_type_t htype = PB_HTYPE(it->type);
    const void *member = codec_pbc_member(pm, f);
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        if (htype != PB_HTYPE_REPEATED || PB_ATYPE(it->type) != PB_ATYPE_STATIC)
            return cmp_fail(c, "repeated in protobuf-c, not a static repeated field in nanopb");
        size_t pn;
        memcpy(&pn, (const char *)pm + f->quantifier_offset, sizeof(pn));
        pb_size_t nn = *(const pb_size_t *)it->pSize;
        if (pn != nn)
            return cmp_fail(c, "protobuf-c has %zu elements, nanopb %u", pn, (unsigned)nn);
        const char *parr = *(const char *const *)member;
        size_t base = strlen(c->path);
        for (size_t i = 0; i < pn; i++) {
            snprintf(c->path + base, sizeof(c->path) - base, "[%zu]", i);
            if (!cmp_element(c, f, parr + i * codec_pbc_elem_size(f->type), it,
                             (const char *)it->pData + i * it->data_size))
                return false;
        }
        c->path[base] = '\0';
        return true;
    }
    if (PB_ATYPE(it->type) != PB_ATYPE_STATIC)
        return cmp_fail(c, "nanopb field is not static (missing .options bound?)");

    bool p_present = true, n_present = true;
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        p_present = codec_pbc_oneof_is_set(pm, f);
    else if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        p_present = *(const ProtobufCMessage *const *)member != NULL;
    if (htype == PB_HTYPE_ONEOF)
        n_present = *(const pb_size_t *)it->pSize == it->tag;
    else if (htype == PB_HTYPE_OPTIONAL && it->pSize != NULL) /* has_ flag; proto3 scalars */
        n_present = *(const bool *)it->pSize;                 /* have none: always present */
    if (p_present != n_present)
        return cmp_fail(c, "present in %s only", p_present ? "protobuf-c" : "nanopb");
    if (!p_present)
        return true;
    return cmp_element(c, f, member, it, it->pData);
}

static bool cmp_message(cmp_ctx *c, const ProtobufCMessage *pm, const pb_msgdesc_t *nd,
                        const void *nm)
{
    const ProtobufCMessageDescriptor *pd = pm->descriptor;
    pb_field_iter_t it;
    if (!pb_field_iter_begin_const(&it, nd, nm)) {
        if (pd->n_fields != 0)
            return cmp_fail(c, "%s has %u fields in protobuf-c, none in nanopb", pd->name,
                            pd->n_fields);
        return true;
    }
    unsigned n_nano = 0;
    do
        n_nano++;
    while (pb_field_iter_next(&it));
    if (n_nano != pd->n_fields)
        return cmp_fail(c, "%s has %u fields in protobuf-c, %u in nanopb", pd->name, pd->n_fields,
                        n_nano);

    size_t base = strlen(c->path);
    for (unsigned i = 0; i < pd->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &pd->fields[i];
        snprintf(c->path + base, sizeof(c->path) - base, "%s%s", base ? "." : "", f->name);
        if (!pb_field_iter_find(&it, f->id))
            return cmp_fail(c, "field %u is missing from nanopb", f->id);
        if (!cmp_field(c, pm, f, &it))
            return false;
    }
    c->path[base] = '\0';
    return true;
}

bool codec_compare(const ProtobufCMessage *pm, const pb_msgdesc_t *nd, const void *nm, char *why,
                   size_t why_len)
{
    cmp_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(why, why_len, "out of memory");
        return false;
    }
    bool same = cmp_message(c, pm, nd, nm);
    if (!same)
        snprintf(why, why_len, "%s", c->why);
    free(c);
    return same;
}
