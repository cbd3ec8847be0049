/* reflect.c - gRPC server reflection (grpc.reflection.v1 and v1alpha, which share one wire
 * format): answers ServerReflectionRequest messages from the FileDescriptorSet of the served
 * protos, which the build compiles in (proto/CMakeLists.txt, sbx_descriptor_set), so generic
 * clients (grpcurl, Postman, grpc-js reflection clients) list and call the services without the
 * .proto files. Requests are untrusted and decoded by protobuf-c; the descriptor set is ours
 * and is indexed once with a bounded wire reader. This file must not touch connections.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/reflection/v1/reflection.pb-c.h"
#include "worker/reflect.h"
#include "worker/worker_internal.h"

extern const unsigned char sbx_descriptor_set[];
extern const size_t sbx_descriptor_set_len;

/* Files and symbols indexed from the compiled-in set: a handful of files with a few hundred
 * names; the bounds only guard against a build that embeds far more than it should. */
#define REFLECT_MAX_FILES 16
#define REFLECT_MAX_SYMBOLS 1024
#define REFLECT_MAX_DEPS 16
#define REFLECT_NAME_MAX 256

/* The services this worker serves, as reflection lists them. */
static const char *const served_services[] = {
    "sbx.v1.Execution",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
};

typedef struct reflect_file {
    char name[REFLECT_NAME_MAX];
    const uint8_t *bytes;
    size_t len;
    char deps[REFLECT_MAX_DEPS][REFLECT_NAME_MAX];
    size_t n_deps;
} reflect_file;

typedef struct reflect_symbol {
    char name[REFLECT_NAME_MAX]; /* fully qualified, no leading dot */
    size_t file;
} reflect_symbol;

static struct {
    reflect_file files[REFLECT_MAX_FILES];
    size_t n_files;
    reflect_symbol symbols[REFLECT_MAX_SYMBOLS];
    size_t n_symbols;
} idx;
static pthread_once_t idx_once = PTHREAD_ONCE_INIT;

/* ---- a bounded protobuf wire reader (for our own descriptors) ----------------------------- */

typedef struct wire {
    const uint8_t *p, *end;
} wire;

static bool wire_varint(wire *w, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
        uint8_t b = *w->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* Next field: its number, and for length-delimited fields the bytes. false at the end or on
 * malformed input. */
static bool wire_next(wire *w, uint32_t *field, const uint8_t **data, size_t *len)
{
    uint64_t tag, v;
    if (w->p >= w->end || !wire_varint(w, &tag))
        return false;
    *field = (uint32_t)(tag >> 3);
    *data = NULL;
    *len = 0;
    switch (tag & 7) {
    case 0: return wire_varint(w, &v);
    case 1:
        if (w->end - w->p < 8)
            return false;
        w->p += 8;
        return true;
    case 2:
        if (!wire_varint(w, &v) || v > (uint64_t)(w->end - w->p))
            return false;
        *data = w->p;
        *len = (size_t)v;
        w->p += v;
        return true;
    case 5:
        if (w->end - w->p < 4)
            return false;
        w->p += 4;
        return true;
    default: return false;
    }
}

static void copy_name(char *out, const uint8_t *data, size_t len)
{
    size_t n = len < REFLECT_NAME_MAX - 1 ? len : REFLECT_NAME_MAX - 1;
    memcpy(out, data, n);
    out[n] = '\0';
}

/* Records scope.name; out_full (REFLECT_NAME_MAX) gets the full name for nested scopes. A name
 * longer than REFLECT_NAME_MAX is not indexed (no served proto has one). */
static void add_symbol(const char *scope, const uint8_t *name, size_t len, size_t file,
                       char *out_full)
{
    size_t scope_len = strlen(scope);
    size_t full_len = scope_len + (scope_len ? 1 : 0) + len;
    if (out_full)
        out_full[0] = '\0';
    if (full_len >= REFLECT_NAME_MAX || idx.n_symbols >= REFLECT_MAX_SYMBOLS)
        return;
    char *full = idx.symbols[idx.n_symbols].name;
    memcpy(full, scope, scope_len);
    if (scope_len)
        full[scope_len] = '.';
    memcpy(full + full_len - len, name, len);
    full[full_len] = '\0';
    idx.symbols[idx.n_symbols].file = file;
    idx.n_symbols++;
    if (out_full)
        memcpy(out_full, full, full_len + 1);
}

/* The name (field 1) of a DescriptorProto / EnumDescriptorProto / ServiceDescriptorProto. */
static bool name_of(const uint8_t *data, size_t len, const uint8_t **name, size_t *name_len)
{
    wire w = {data, data + len};
    uint32_t f;
    const uint8_t *d;
    size_t l;
    while (wire_next(&w, &f, &d, &l))
        if (f == 1 && d) {
            *name = d;
            *name_len = l;
            return true;
        }
    return false;
}

/* A message and, recursively, its nested messages (field 3) and enums (field 4). */
static void index_message(const char *scope, const uint8_t *data, size_t len, size_t file,
                          int depth)
{
    const uint8_t *name;
    size_t name_len;
    if (depth > 8 || !name_of(data, len, &name, &name_len))
        return;
    char full[REFLECT_NAME_MAX];
    add_symbol(scope, name, name_len, file, full);
    wire w = {data, data + len};
    uint32_t f;
    const uint8_t *d;
    size_t l;
    while (wire_next(&w, &f, &d, &l)) {
        if (f == 3 && d)
            index_message(full, d, l, file, depth + 1);
        else if (f == 4 && d && name_of(d, l, &name, &name_len))
            add_symbol(full, name, name_len, file, NULL);
    }
}

static void index_service(const char *scope, const uint8_t *data, size_t len, size_t file)
{
    const uint8_t *name;
    size_t name_len;
    if (!name_of(data, len, &name, &name_len))
        return;
    char full[REFLECT_NAME_MAX];
    add_symbol(scope, name, name_len, file, full);
    wire w = {data, data + len};
    uint32_t f;
    const uint8_t *d;
    size_t l;
    while (wire_next(&w, &f, &d, &l))
        if (f == 2 && d && name_of(d, l, &name, &name_len)) /* MethodDescriptorProto */
            add_symbol(full, name, name_len, file, NULL);
}

static void index_file(const uint8_t *data, size_t len)
{
    if (idx.n_files >= REFLECT_MAX_FILES)
        return;
    size_t fi = idx.n_files++;
    reflect_file *rf = &idx.files[fi];
    rf->bytes = data;
    rf->len = len;
    char pkg[REFLECT_NAME_MAX] = "";
    wire w = {data, data + len};
    uint32_t f;
    const uint8_t *d;
    size_t l;
    while (wire_next(&w, &f, &d, &l)) { /* name and package first: symbols need the package */
        if (f == 1 && d)
            copy_name(rf->name, d, l);
        else if (f == 2 && d)
            copy_name(pkg, d, l);
        else if (f == 3 && d && rf->n_deps < REFLECT_MAX_DEPS)
            copy_name(rf->deps[rf->n_deps++], d, l);
    }
    w = (wire){data, data + len};
    while (wire_next(&w, &f, &d, &l)) {
        const uint8_t *name;
        size_t name_len;
        if (f == 4 && d)
            index_message(pkg, d, l, fi, 0);
        else if (f == 5 && d && name_of(d, l, &name, &name_len))
            add_symbol(pkg, name, name_len, fi, NULL);
        else if (f == 6 && d)
            index_service(pkg, d, l, fi);
    }
}

static void build_index(void)
{
    wire w = {sbx_descriptor_set, sbx_descriptor_set + sbx_descriptor_set_len};
    uint32_t f;
    const uint8_t *d;
    size_t l;
    while (wire_next(&w, &f, &d, &l))
        if (f == 1 && d) /* FileDescriptorSet.file */
            index_file(d, l);
}

static ssize_t file_by_name(const char *name)
{
    for (size_t i = 0; i < idx.n_files; i++)
        if (strcmp(idx.files[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

static ssize_t file_by_symbol(const char *symbol)
{
    if (symbol[0] == '.')
        symbol++;
    for (size_t i = 0; i < idx.n_symbols; i++)
        if (strcmp(idx.symbols[i].name, symbol) == 0)
            return (ssize_t)idx.symbols[i].file;
    return -1;
}

/* The file and its transitive dependencies, each once (reflection clients need them all). */
static size_t with_deps(size_t file, ProtobufCBinaryData *out, bool *taken)
{
    if (taken[file])
        return 0;
    taken[file] = true;
    size_t n = 0;
    out[n].data = (uint8_t *)idx.files[file].bytes;
    out[n].len = idx.files[file].len;
    n++;
    for (size_t d = 0; d < idx.files[file].n_deps; d++) {
        ssize_t dep = file_by_name(idx.files[file].deps[d]);
        if (dep >= 0)
            n += with_deps((size_t)dep, out + n, taken);
    }
    return n;
}

uint8_t *worker_reflection_answer(const uint8_t *msg, size_t len, size_t *out_len)
{
    pthread_once(&idx_once, build_index);
    Grpc__Reflection__V1__ServerReflectionResponse resp =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__INIT;
    Grpc__Reflection__V1__ErrorResponse error = GRPC__REFLECTION__V1__ERROR_RESPONSE__INIT;
    Grpc__Reflection__V1__FileDescriptorResponse files =
        GRPC__REFLECTION__V1__FILE_DESCRIPTOR_RESPONSE__INIT;
    Grpc__Reflection__V1__ListServiceResponse list =
        GRPC__REFLECTION__V1__LIST_SERVICE_RESPONSE__INIT;
    Grpc__Reflection__V1__ExtensionNumberResponse ext =
        GRPC__REFLECTION__V1__EXTENSION_NUMBER_RESPONSE__INIT;
    enum { N_SERVED = sizeof served_services / sizeof served_services[0] };
    Grpc__Reflection__V1__ServiceResponse services[N_SERVED];
    Grpc__Reflection__V1__ServiceResponse *service_ptrs[N_SERVED];
    ProtobufCBinaryData blobs[REFLECT_MAX_FILES];
    bool taken[REFLECT_MAX_FILES] = {false};
    char message[REFLECT_NAME_MAX + 64];

    Grpc__Reflection__V1__ServerReflectionRequest *req =
        grpc__reflection__v1__server_reflection_request__unpack(NULL, len, msg);
    if (req) {
        resp.valid_host = req->host;
        resp.original_request = req;
    }
    ssize_t file = -1;
    const char *missing = NULL;
    switch (req ? req->message_request_case
                : GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST__NOT_SET) {
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
        for (size_t i = 0; i < N_SERVED; i++) {
            grpc__reflection__v1__service_response__init(&services[i]);
            services[i].name = (char *)served_services[i];
            service_ptrs[i] = &services[i];
        }
        list.n_service = N_SERVED;
        list.service = service_ptrs;
        resp.message_response_case =
            GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
        resp.list_services_response = &list;
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
        file = file_by_name(req->file_by_filename);
        missing = req->file_by_filename;
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL:
        file = file_by_symbol(req->file_containing_symbol);
        missing = req->file_containing_symbol;
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE:
        /* proto3 files declare no extensions: a known type has none, an unknown one is an error */
        if (file_by_symbol(req->all_extension_numbers_of_type) >= 0) {
            ext.base_type_name = req->all_extension_numbers_of_type;
            resp.message_response_case =
                GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE;
            resp.all_extension_numbers_response = &ext;
        } else {
            missing = req->all_extension_numbers_of_type;
        }
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION:
        missing = req->file_containing_extension && req->file_containing_extension->containing_type
                      ? req->file_containing_extension->containing_type
                      : "";
        break;
    default: break;
    }
    if (file >= 0) {
        files.n_file_descriptor_proto = with_deps((size_t)file, blobs, taken);
        files.file_descriptor_proto = blobs;
        resp.message_response_case =
            GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
        resp.file_descriptor_response = &files;
    } else if (resp.message_response_case ==
               GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE__NOT_SET) {
        if (!req) {
            error.error_code = SBX_GRPC_INVALID_ARGUMENT;
            snprintf(message, sizeof message, "malformed ServerReflectionRequest");
        } else if (missing) {
            error.error_code = SBX_GRPC_NOT_FOUND;
            snprintf(message, sizeof message, "not found: '%.*s'", REFLECT_NAME_MAX, missing);
        } else {
            error.error_code = SBX_GRPC_UNIMPLEMENTED;
            snprintf(message, sizeof message, "unsupported reflection request");
        }
        error.error_message = message;
        resp.message_response_case =
            GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
        resp.error_response = &error;
    }
    uint8_t *framed = sbx_grpc_frame_message(&resp.base, out_len);
    if (req)
        grpc__reflection__v1__server_reflection_request__free_unpacked(req, NULL);
    return framed;
}
