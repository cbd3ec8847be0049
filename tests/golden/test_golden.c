/* test_golden.c - the golden vectors (bytes written by Python's protobuf, see make_vectors.py)
 * decode identically with protobuf-c (host) and nanopb (agent), and re-encode to the same bytes.
 *
 *     test_golden_vectors [--no-digest] VECTOR_DIR
 *
 * For every vector listed in VECTOR_DIR/MANIFEST:
 *   - its SHA-256 matches the manifest (skipped with --no-digest, which the byte-flip test uses
 *     to prove the decoding checks alone catch a corrupted vector);
 *   - protobuf-c decodes it and re-encodes the identical bytes (unknown fields included), and
 *     the host's strict decoder (sbx_message_decode) accepts it;
 *   - nanopb decodes it (or, for vectors flagged nanopb_rejects, refuses it), the two decodings
 *     agree field by field, and nanopb re-encodes the identical bytes -- except for vectors with
 *     unknown fields (nanopb drops them by design) or a map entry holding a default value (the
 *     C codecs omit it, Python writes it): their re-encoding must mean the same message;
 *   - the values the manifest names explicitly are what protobuf-c decoded, so both codecs
 *     being wrong the same way is caught too.
 * The field-by-field comparison walks protobuf-c's descriptors and nanopb's field iterator
 * together, so every field of every message type is compared, including fields added later;
 * a field present in one codec's view and missing from the other's is itself a failure.
 * This file must not write into VECTOR_DIR.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dirent.h>
#include <openssl/evp.h>
#include <pb.h>
#include <pb_common.h>
#include <pb_decode.h>
#include <pb_encode.h>

#include "codec_compare.h"
#include "sbx/contract.h"
#include "sbx/v1/agent.pb-c.h"
#include "sbx/v1/agent.pb.h"
#include "sbx/v1/execution.pb-c.h"
#include "sbx/v1/execution.pb.h"

/* The library and the generated code must agree on pb_size_t (see proto/nanopb_abi_check.c). */
_Static_assert(sizeof(pb_size_t) == 2, "Debian's libprotobuf-nanopb.a uses a 16-bit pb_size_t");

/* Bounds of the manifest this test reads; the committed one is far below them. */
#define GOLDEN_MAX_VECTORS 256
#define GOLDEN_MAX_EXPECTS 1024
#define GOLDEN_MAX_LINE 4096
#define GOLDEN_MAX_FILE (1u << 20) /* no vector is near 1 MiB; a bigger file is a mistake */

/* ---- message types the vectors may name --------------------------------------------------- */

typedef struct golden_type {
    const char *name;                      /* full protobuf name, as in the manifest */
    const ProtobufCMessageDescriptor *pbc; /* protobuf-c */
    const pb_msgdesc_t *nano;              /* nanopb */
    size_t nano_size;                      /* sizeof the nanopb struct */
} golden_type;

#define GOLDEN_TYPE(full, pbc_desc, nano_name)                                                     \
    {                                                                                              \
        full, &pbc_desc, nano_name##_fields, sizeof(nano_name)                                     \
    }

static const golden_type golden_types[] = {
    GOLDEN_TYPE("sbx.v1.ExecutionRequest", sbx__v1__execution_request__descriptor,
                sbx_v1_ExecutionRequest),
    GOLDEN_TYPE("sbx.v1.ExecutionCompletion", sbx__v1__execution_completion__descriptor,
                sbx_v1_ExecutionCompletion),
    GOLDEN_TYPE("sbx.v1.ExecuteEvent", sbx__v1__execute_event__descriptor, sbx_v1_ExecuteEvent),
    GOLDEN_TYPE("sbx.v1.DescribeResponse", sbx__v1__describe_response__descriptor,
                sbx_v1_DescribeResponse),
    GOLDEN_TYPE("sbx.v1.Capabilities", sbx__v1__capabilities__descriptor, sbx_v1_Capabilities),
    GOLDEN_TYPE("sbx.v1.AgentRequest", sbx__v1__agent_request__descriptor, sbx_v1_AgentRequest),
    GOLDEN_TYPE("sbx.v1.AgentEvent", sbx__v1__agent_event__descriptor, sbx_v1_AgentEvent),
    /* Host-only: too large for nanopb's 16-bit structs (execution.options skips it). */
    {"sbx.v1.Recording", &sbx__v1__recording__descriptor, NULL, 0},
};

static const golden_type *golden_type_find(const char *name)
{
    for (size_t i = 0; i < sizeof(golden_types) / sizeof(golden_types[0]); i++)
        if (strcmp(golden_types[i].name, name) == 0)
            return &golden_types[i];
    return NULL;
}

/* ---- the manifest ------------------------------------------------------------------------- */

typedef struct golden_vector {
    char name[128];
    char type[128];
    char sha256[65];
    bool unknown;        /* carries unknown fields: nanopb drops them */
    bool nanopb_rejects; /* beyond a nanopb bound: nanopb must refuse it */
    bool map_defaults;   /* a map entry with a default value: Python writes it, C omits it */
} golden_vector;

typedef struct golden_expect {
    char vector[128];
    char path[256];
    char kind[16];
    char value[GOLDEN_MAX_LINE];
} golden_expect;

static struct {
    char dir[1024];
    bool check_digest;
    golden_vector vectors[GOLDEN_MAX_VECTORS];
    size_t n_vectors;
    golden_expect *expects; /* GOLDEN_MAX_EXPECTS entries, heap: they are large */
    size_t n_expects;
} golden;

static bool copy_token(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        return false;
    memcpy(dst, src, n + 1);
    return true;
}

/* Reads DIR/MANIFEST; on error prints the line and returns false. */
static bool manifest_load(void)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/MANIFEST", golden.dir);
    FILE *fh = fopen(path, "r");
    if (fh == NULL) {
        fprintf(stderr, "golden: cannot open %s: %s\n", path, strerror(errno));
        return false;
    }
    char line[GOLDEN_MAX_LINE + 512];
    int lineno = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof(line), fh) != NULL) {
        lineno++;
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *save = NULL;
        char *word = strtok_r(line, " ", &save);
        if (strcmp(word, "vector") == 0 && golden.n_vectors < GOLDEN_MAX_VECTORS) {
            golden_vector *v = &golden.vectors[golden.n_vectors];
            memset(v, 0, sizeof(*v));
            char *name = strtok_r(NULL, " ", &save), *type = strtok_r(NULL, " ", &save);
            char *sha = strtok_r(NULL, " ", &save);
            ok = name && type && sha && copy_token(v->name, sizeof(v->name), name) &&
                 copy_token(v->type, sizeof(v->type), type) &&
                 copy_token(v->sha256, sizeof(v->sha256), sha);
            for (char *flag; ok && (flag = strtok_r(NULL, " ", &save)) != NULL;) {
                if (strcmp(flag, "unknown") == 0)
                    v->unknown = true;
                else if (strcmp(flag, "nanopb_rejects") == 0)
                    v->nanopb_rejects = true;
                else if (strcmp(flag, "map_defaults") == 0)
                    v->map_defaults = true;
                else
                    ok = false;
            }
            golden.n_vectors++;
        } else if (strcmp(word, "expect") == 0 && golden.n_expects < GOLDEN_MAX_EXPECTS) {
            golden_expect *e = &golden.expects[golden.n_expects++];
            char *vec = strtok_r(NULL, " ", &save), *p = strtok_r(NULL, " ", &save);
            char *kind = strtok_r(NULL, " ", &save), *value = strtok_r(NULL, " ", &save);
            ok = vec && p && kind && value && copy_token(e->vector, sizeof(e->vector), vec) &&
                 copy_token(e->path, sizeof(e->path), p) &&
                 copy_token(e->kind, sizeof(e->kind), kind) &&
                 copy_token(e->value, sizeof(e->value), value);
        } else {
            ok = false;
        }
        if (!ok)
            fprintf(stderr, "golden: %s:%d: malformed or too many entries\n", path, lineno);
    }
    fclose(fh);
    return ok;
}

static const golden_vector *vector_find(const char *name)
{
    for (size_t i = 0; i < golden.n_vectors; i++)
        if (strcmp(golden.vectors[i].name, name) == 0)
            return &golden.vectors[i];
    return NULL;
}

static uint8_t *read_vector(const char *name, size_t *len)
{
    char path[1300];
    snprintf(path, sizeof(path), "%s/%s.bin", golden.dir, name);
    FILE *fh = fopen(path, "rb");
    if (fh == NULL)
        fail_msg("cannot open %s: %s", path, strerror(errno));
    uint8_t *buf = malloc(GOLDEN_MAX_FILE);
    assert_non_null(buf);
    *len = fread(buf, 1, GOLDEN_MAX_FILE, fh);
    bool too_big = !feof(fh);
    fclose(fh);
    if (too_big)
        fail_msg("%s is larger than %u bytes", path, GOLDEN_MAX_FILE);
    return buf;
}

static void sha256_hex(const uint8_t *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    assert_int_equal(EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL), 1);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* ---- explicit expectations (evaluated on the protobuf-c decoding) --------------------------- */

static size_t unhex(const char *hex, uint8_t *out, size_t cap)
{
    if (strcmp(hex, "-") == 0)
        return 0;
    size_t n = strlen(hex) / 2;
    assert_true(n <= cap);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    return n;
}

/* Splits "name[3]" into name and index (-1 without brackets). */
static void path_segment(const char *seg, char *name, size_t cap, long *index)
{
    const char *br = strchr(seg, '[');
    size_t n = br ? (size_t)(br - seg) : strlen(seg);
    assert_true(n < cap);
    memcpy(name, seg, n);
    name[n] = '\0';
    *index = -1;
    if (br != NULL) {
        char *end = NULL;
        errno = 0;
        *index = strtol(br + 1, &end, 10);
        assert_true(errno == 0 && *end == ']' && *index >= 0);
    }
}

/* Resolves one field of m by name; with an index, the element of a repeated field. Returns the
 * pointer to the value (a char *, ProtobufCBinaryData, ProtobufCMessage *, or scalar). */
static const void *resolve_field(const ProtobufCMessage *m, const char *seg,
                                 const ProtobufCFieldDescriptor **fout, long *index,
                                 const char *vector)
{
    char name[128];
    path_segment(seg, name, sizeof(name), index);
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
    if (f == NULL)
        fail_msg("%s: %s has no field '%s'", vector, m->descriptor->name, name);
    *fout = f;
    const void *member = codec_pbc_member(m, f);
    if (*index < 0)
        return member;
    if (f->label != PROTOBUF_C_LABEL_REPEATED)
        fail_msg("%s: '%s' is not repeated", vector, name);
    size_t n;
    memcpy(&n, (const char *)m + f->quantifier_offset, sizeof(n));
    if ((size_t)*index >= n)
        fail_msg("%s: %s[%ld] but only %zu elements", vector, name, *index, n);
    return *(const char *const *)member + (size_t)*index * codec_pbc_elem_size(f->type);
}

static void check_expect(const golden_expect *e, const ProtobufCMessage *top)
{
    const ProtobufCMessage *m = top;
    char path[sizeof(e->path)];
    memcpy(path, e->path, sizeof(path));
    const ProtobufCFieldDescriptor *f = NULL;
    const void *value = NULL;
    long index = -1;
    if (strcmp(path, ".") != 0) {
        char *save = NULL;
        char *seg = strtok_r(path, ".", &save);
        while (seg != NULL) {
            value = resolve_field(m, seg, &f, &index, e->vector);
            char *next = strtok_r(NULL, ".", &save);
            if (next == NULL && strcmp(e->kind, "case") != 0)
                break;
            if (f->type != PROTOBUF_C_TYPE_MESSAGE)
                fail_msg("%s: %s: '%s' is not a message", e->vector, e->path, seg);
            if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && !codec_pbc_oneof_is_set(m, f))
                fail_msg("%s: %s: oneof member '%s' is not set", e->vector, e->path, seg);
            m = *(const ProtobufCMessage *const *)value;
            if (m == NULL)
                fail_msg("%s: %s: '%s' is absent", e->vector, e->path, seg);
            seg = next;
        }
    }

    if (strcmp(e->kind, "case") == 0) {
        const char *member = strchr(e->value, '=');
        assert_non_null(member);
        member++;
        const ProtobufCMessageDescriptor *d = m->descriptor;
        for (unsigned i = 0; i < d->n_fields; i++) {
            const ProtobufCFieldDescriptor *of = &d->fields[i];
            if (!(of->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
                continue;
            bool want = strcmp(of->name, member) == 0;
            if (codec_pbc_oneof_is_set(m, of) != want)
                fail_msg("%s: %s: oneof member '%s' is %s, expected %s", e->vector, e->path,
                         of->name, want ? "not set" : "set", e->value);
        }
        return;
    }
    bool repeated_whole = f->label == PROTOBUF_C_LABEL_REPEATED && index < 0;
    if (strcmp(e->kind, "count") == 0) {
        size_t n = 0;
        if (repeated_whole)
            memcpy(&n, (const char *)m + f->quantifier_offset, sizeof(n));
        else if (f->type == PROTOBUF_C_TYPE_BYTES)
            n = ((const ProtobufCBinaryData *)value)->len;
        else if (f->type == PROTOBUF_C_TYPE_STRING)
            n = strlen(*(const char *const *)value);
        else
            fail_msg("%s: %s: count of a scalar", e->vector, e->path);
        char *end = NULL;
        unsigned long long want = strtoull(e->value, &end, 10);
        assert_true(*end == '\0');
        if (n != want)
            fail_msg("%s: %s: count %zu, expected %llu", e->vector, e->path, n, want);
        return;
    }
    assert_false(repeated_whole);
    if (strcmp(e->kind, "str") == 0) {
        assert_int_equal(f->type, PROTOBUF_C_TYPE_STRING);
        uint8_t want[GOLDEN_MAX_LINE];
        size_t n = unhex(e->value, want, sizeof(want) - 1);
        want[n] = '\0';
        const char *got = *(const char *const *)value;
        if (got == NULL)
            got = "";
        if (strlen(got) != n || memcmp(got, want, n) != 0)
            fail_msg("%s: %s: \"%s\", expected \"%s\"", e->vector, e->path, got,
                     (const char *)want);
    } else if (strcmp(e->kind, "bytes") == 0 || strcmp(e->kind, "sha256") == 0) {
        assert_int_equal(f->type, PROTOBUF_C_TYPE_BYTES);
        const ProtobufCBinaryData *b = value;
        if (strcmp(e->kind, "sha256") == 0) {
            char hex[65];
            sha256_hex(b->data, b->len, hex);
            if (strcmp(hex, e->value) != 0)
                fail_msg("%s: %s: sha256 %s, expected %s", e->vector, e->path, hex, e->value);
        } else {
            uint8_t want[GOLDEN_MAX_LINE];
            size_t n = unhex(e->value, want, sizeof(want));
            if (b->len != n || (n > 0 && memcmp(b->data, want, n) != 0))
                fail_msg("%s: %s: %zu bytes differ from the expected %zu", e->vector, e->path,
                         b->len, n);
        }
    } else {
        uint64_t got = codec_pbc_scalar(f->type, value);
        char *end = NULL;
        errno = 0;
        if (strcmp(e->kind, "i64") == 0) {
            long long want = strtoll(e->value, &end, 10);
            assert_true(errno == 0 && *end == '\0');
            if ((int64_t)got != (int64_t)want)
                fail_msg("%s: %s: %" PRId64 ", expected %lld", e->vector, e->path, (int64_t)got,
                         want);
        } else if (strcmp(e->kind, "u64") == 0 || strcmp(e->kind, "bool") == 0) {
            unsigned long long want = strtoull(e->value, &end, 10);
            assert_true(errno == 0 && *end == '\0');
            if (got != (uint64_t)want)
                fail_msg("%s: %s: %" PRIu64 ", expected %llu", e->vector, e->path, got, want);
        } else if (strcmp(e->kind, "f64") == 0) {
            double want = strtod(e->value, &end), have;
            assert_true(errno == 0 && *end == '\0');
            memcpy(&have, &got, sizeof(have));
            if (memcmp(&have, &want, sizeof(have)) != 0)
                fail_msg("%s: %s: %.17g, expected %.17g", e->vector, e->path, have, want);
        } else {
            fail_msg("%s: unknown expectation kind '%s'", e->vector, e->kind);
        }
    }
}

/* ---- the tests ---------------------------------------------------------------------------- */

/* One vector: digest, protobuf-c round trip, nanopb round trip, agreement, expectations. */
static void test_vector_round_trips_in_both_codecs(void **state)
{
    const golden_vector *v = *state;
    const golden_type *t = golden_type_find(v->type);
    if (t == NULL)
        fail_msg("%s: type %s is not one the golden test knows", v->name, v->type);
    size_t len = 0;
    uint8_t *bytes = read_vector(v->name, &len);

    if (golden.check_digest) {
        char hex[65];
        sha256_hex(bytes, len, hex);
        if (strcmp(hex, v->sha256) != 0)
            fail_msg("%s.bin: sha256 %s, the manifest says %s (vector changed or corrupted)",
                     v->name, hex, v->sha256);
    }

    /* protobuf-c: decodes, and re-encodes to the very same bytes, unknown fields included. */
    ProtobufCMessage *pm = protobuf_c_message_unpack(t->pbc, NULL, len, bytes);
    if (pm == NULL)
        fail_msg("%s: protobuf-c refuses the vector", v->name);
    size_t plen = protobuf_c_message_get_packed_size(pm);
    uint8_t *pout = malloc(plen + 1);
    assert_non_null(pout);
    assert_int_equal(protobuf_c_message_pack(pm, pout), plen);
    if (!v->map_defaults && (plen != len || memcmp(pout, bytes, len) != 0))
        fail_msg("%s: protobuf-c re-encodes %zu bytes that differ from the %zu of the vector",
                 v->name, plen, len);

    /* The host's strict decoder (what the worker and brokers run) accepts every vector too. */
    ProtobufCMessage *strict = NULL;
    sbx_error err;
    if (sbx_message_decode(t->pbc, bytes, len, len, &strict, &err) != SBX_OK)
        fail_msg("%s: sbx_message_decode refuses it: %s", v->name, err.message);
    sbx_message_free(strict);

    /* nanopb: decodes within its bounds (or refuses what exceeds them). */
    void *nm = t->nano != NULL ? calloc(1, t->nano_size) : NULL;
    if (t->nano != NULL) { /* host-only types have no nanopb struct */
        assert_non_null(nm);
        pb_istream_t in = pb_istream_from_buffer(bytes, len);
        bool decoded = pb_decode(&in, t->nano, nm);
        if (v->nanopb_rejects) {
            if (decoded)
                fail_msg("%s: nanopb accepted a vector beyond its .options bounds", v->name);
        } else {
            if (!decoded)
                fail_msg("%s: nanopb refuses the vector: %s", v->name, PB_GET_ERROR(&in));
            char why[2048];
            if (!codec_compare(pm, t->nano, nm, why, sizeof(why)))
                fail_msg("%s: protobuf-c and nanopb disagree at %s", v->name, why);
            size_t nlen = 0;
            assert_true(pb_get_encoded_size(&nlen, t->nano, nm));
            uint8_t *nout = malloc(nlen + 1);
            assert_non_null(nout);
            pb_ostream_t out = pb_ostream_from_buffer(nout, nlen);
            if (!pb_encode(&out, t->nano, nm))
                fail_msg("%s: nanopb cannot re-encode: %s", v->name, PB_GET_ERROR(&out));
            if (!v->unknown && !v->map_defaults) {
                if (out.bytes_written != len || memcmp(nout, bytes, len) != 0)
                    fail_msg("%s: nanopb re-encodes %zu bytes that differ from the %zu of the "
                             "vector",
                             v->name, out.bytes_written, len);
            } else {
                /* Not Python's bytes (nanopb drops unknown fields; both C codecs omit a map
                 * entry's default value), but the same message: protobuf-c reads nanopb's
                 * re-encoding as what nanopb decoded, and without unknown fields. */
                if (v->map_defaults && !v->unknown &&
                    (out.bytes_written != plen || memcmp(nout, pout, plen) != 0))
                    fail_msg("%s: nanopb and protobuf-c re-encode differently", v->name);
                ProtobufCMessage *again =
                    protobuf_c_message_unpack(t->pbc, NULL, out.bytes_written, nout);
                if (again == NULL)
                    fail_msg("%s: protobuf-c refuses nanopb's re-encoding", v->name);
                char why2[2048];
                if (!codec_compare(again, t->nano, nm, why2, sizeof(why2)))
                    fail_msg("%s: nanopb's re-encoding means another message: %s", v->name, why2);
                assert_int_equal(again->n_unknown_fields, 0);
                protobuf_c_message_free_unpacked(again, NULL);
            }
            free(nout);
        }
    }
    free(pout);

    /* Explicit values, so both codecs being wrong the same way fails too. */
    for (size_t i = 0; i < golden.n_expects; i++)
        if (strcmp(golden.expects[i].vector, v->name) == 0)
            check_expect(&golden.expects[i], pm);

    free(nm);
    protobuf_c_message_free_unpacked(pm, NULL);
    free(bytes);
}

/* The manifest and the directory list the same vectors, and each expectation names one. */
static void test_manifest_matches_vector_files(void **state)
{
    (void)state;
    assert_true(golden.n_vectors > 0);
    DIR *d = opendir(golden.dir);
    assert_non_null(d);
    size_t files = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 4, ".bin") != 0)
            continue;
        files++;
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)(n - 4), de->d_name);
        if (vector_find(name) == NULL)
            fail_msg("%s is not listed in the MANIFEST", de->d_name);
    }
    closedir(d);
    assert_int_equal(files, golden.n_vectors);
    for (size_t i = 0; i < golden.n_expects; i++)
        if (vector_find(golden.expects[i].vector) == NULL)
            fail_msg("expectation for unknown vector %s", golden.expects[i].vector);
}

/* Many repeated elements through libprotobuf-nanopb.a: a pb_size_t disagreement between the
 * library and the generated code would lose or garble them rather than fail loudly. */
static void test_nanopb_keeps_every_repeated_element(void **state)
{
    (void)state;
    size_t len = 0;
    uint8_t *bytes = read_vector("agent_req_exec_many", &len);
    sbx_v1_AgentRequest *req = calloc(1, sizeof(*req));
    assert_non_null(req);
    pb_istream_t in = pb_istream_from_buffer(bytes, len);
    if (!pb_decode(&in, sbx_v1_AgentRequest_fields, req))
        fail_msg("nanopb refuses agent_req_exec_many: %s", PB_GET_ERROR(&in));
    assert_int_equal(req->which_body, sbx_v1_AgentRequest_exec_tag);
    const sbx_v1_AgentExec *ex = &req->body.exec;
    assert_int_equal(ex->argv_count, 64);
    assert_int_equal(ex->env_count, 16);
    for (int i = 0; i < 64; i++) {
        char want[128];
        snprintf(want, sizeof(want), "arg-%02d-%.*s", i, i,
                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        assert_string_equal(ex->argv[i], want);
    }
    for (int i = 0; i < 16; i++) {
        char name[32], value[32];
        snprintf(name, sizeof(name), "VAR_%02d", i);
        snprintf(value, sizeof(value), "value-%02d", i);
        assert_string_equal(ex->env[i].name, name);
        assert_string_equal(ex->env[i].value, value);
    }
    free(req);
    free(bytes);
}

int main(int argc, char **argv)
{
    golden.check_digest = true;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-digest") == 0)
            golden.check_digest = false;
        else
            dir = argv[i];
    }
    if (dir == NULL) {
        fprintf(stderr, "usage: %s [--no-digest] VECTOR_DIR\n", argv[0]);
        return 2;
    }
    snprintf(golden.dir, sizeof(golden.dir), "%s", dir);
    golden.expects = calloc(GOLDEN_MAX_EXPECTS, sizeof(*golden.expects));
    if (golden.expects == NULL || !manifest_load())
        return 1;

    size_t n = golden.n_vectors + 2;
    struct CMUnitTest *tests = calloc(n, sizeof(*tests));
    if (tests == NULL)
        return 1;
    tests[0] = (struct CMUnitTest){"manifest_matches_vector_files",
                                   test_manifest_matches_vector_files, NULL, NULL, NULL};
    tests[1] = (struct CMUnitTest){"nanopb_keeps_every_repeated_element",
                                   test_nanopb_keeps_every_repeated_element, NULL, NULL, NULL};
    for (size_t i = 0; i < golden.n_vectors; i++)
        tests[i + 2] =
            (struct CMUnitTest){golden.vectors[i].name, test_vector_round_trips_in_both_codecs,
                                NULL, NULL, &golden.vectors[i]};
    int failed = _cmocka_run_group_tests("golden_vectors", tests, n, NULL, NULL);
    free(tests);
    free(golden.expects);
    return failed == 0 ? 0 : 1;
}
