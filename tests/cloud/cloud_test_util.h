/* cloud_test_util.h - small helpers shared by the cloud provider tests: opening a provider on
 * a config block, collecting streamed output, unique environment variable names, and the
 * policy/request builders. Header-only (static functions) so each test stays one file.
 */
#ifndef SBX_TESTS_CLOUD_TEST_UTIL_H
#define SBX_TESTS_CLOUD_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

/* Streamed output as the provider delivered it. */
typedef struct cloud_stream {
    char out[65536];
    size_t out_len;
    char err[65536];
    size_t err_len;
    int chunks;
    int bad_offsets; /* a chunk whose offset was not the running total */
} cloud_stream;

static void cloud_stream_cb(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                            uint64_t offset)
{
    cloud_stream *s = arg;
    char *buf = stream == SBX__V1__STREAM__STREAM_STDERR ? s->err : s->out;
    size_t *n = stream == SBX__V1__STREAM__STREAM_STDERR ? &s->err_len : &s->out_len;
    if (offset != *n)
        s->bad_offsets++;
    size_t room = sizeof s->out - 1 - *n;
    if (len > room)
        len = room;
    memcpy(buf + *n, data, len);
    *n += len;
    buf[*n] = 0;
    s->chunks++;
}

/* A variable name no other test process uses (secrets are named by env var). */
static void cloud_unique_env(char *buf, size_t cap, const char *prefix)
{
    snprintf(buf, cap, "%s_%ld", prefix, (long)getpid());
}

static sbx_options *cloud_options(const sbx_provider_ops *ops, const char *const *kv)
{
    sbx_options *o = sbx_options_new(ops->options);
    sbx_error err;
    for (size_t i = 0; kv && kv[i]; i += 2) {
        if (sbx_options_set(o, kv[i], kv[i + 1], &err) != SBX_OK) {
            fprintf(stderr, "option %s: %s\n", kv[i], err.message);
            abort();
        }
    }
    return o;
}

static sbx_policy *cloud_policy(Sbx__V1__NetworkEgress egress)
{
    sbx_policy *p = sbx_policy_new();
    p->network_egress = egress;
    return p;
}

static sbx_exec_opts cloud_opts(const sbx_policy *policy, const sbx_principal *principal,
                                cloud_stream *stream, int64_t timeout_ms)
{
    sbx_exec_opts o = {.deadline_mono_ms = timeout_ms > 0 ? sbx_monotonic_ms() + timeout_ms : 0,
                       .policy = policy,
                       .principal = principal};
    if (stream) {
        o.on_output = cloud_stream_cb;
        o.on_output_arg = stream;
    }
    return o;
}

/* What list_held reported, in order (the first 8). */
typedef struct cloud_held_log {
    char ids[8][128];
    char subjects[8][300];
    size_t n;
} cloud_held_log;

__attribute__((unused)) static void cloud_held_cb(void *arg, const char *sandbox_id,
                                                  const char *subject)
{
    cloud_held_log *l = arg;
    if (l->n < 8) {
        snprintf(l->ids[l->n], sizeof l->ids[0], "%s", sandbox_id);
        snprintf(l->subjects[l->n], sizeof l->subjects[0], "%s", subject);
    }
    l->n++;
}

/* A managed provider of profile, node and scope on opts; NULL when it does not open. */
__attribute__((unused)) static void *cloud_open_as(const sbx_provider_ops *ops,
                                                   const sbx_options *opts, const char *profile,
                                                   const char *node, sbx_scope scope)
{
    sbx_provider_ctx ctx = {.profile = profile,
                            .options = opts,
                            .environment = SBX_ENV_MANAGED,
                            .node = node,
                            .scope = scope};
    void *st = NULL;
    sbx_error err;
    return ops->open(&ctx, &st, &err) == SBX_OK ? st : NULL;
}

/* Creates a sandbox for subject (left alive) and copies its id into id. */
__attribute__((unused)) static sbx_status cloud_create_for(const sbx_provider_ops *ops, void *state,
                                                           const sbx_session_handle *session,
                                                           const sbx_policy *policy,
                                                           const char *subject, char *id,
                                                           size_t cap, sbx_error *err)
{
    sbx_principal *pr = sbx_principal_new();
    sbx_set_string(&pr->subject, subject);
    sbx_sandbox *sb = NULL;
    sbx_status st = ops->create(state, session, pr, policy, &sb, err);
    if (st == SBX_OK) {
        snprintf(id, cap, "%s", sb->id);
        ops->sandbox_close(sb);
    }
    sbx_message_free(&pr->base);
    return st;
}

static char *cloud_str(const ProtobufCBinaryData *b)
{
    char *s = calloc(1, b->len + 1);
    if (b->len)
        memcpy(s, b->data, b->len);
    return s;
}

#endif
