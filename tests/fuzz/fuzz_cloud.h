/* fuzz_cloud.h - what the cloud provider harnesses (fuzz_e2b, fuzz_daytona, fuzz_ssm) share: a
 * scripted HTTP server on loopback (tests/fakes/fake_http) that answers the k-th request with
 * the k-th response of the input, whatever the request was, so every byte a provider reads back
 * -- JSON bodies, Connect envelopes, NDJSON lines, file contents, error bodies -- comes from
 * the fuzzer, in the order the provider's own calls ask for it.
 *
 * Script format: records of [status byte][flags byte][2-byte big-endian body length][body].
 * The status byte indexes FUZZ_CLOUD_STATUSES (only answers the HTTP client does not retry, so
 * no input sleeps through a backoff); flags bit 0 chunks the body in two pieces, bit 1 adds
 * the header X-Next-Token: fz-next (the same token each time: a server that loops), bit 2
 * X-Next-Token: fz-next-<k> for the k-th answer (E2B's list pages). After the script every
 * request gets 404 {"message":"script ended"}.
 *
 * Seeds are recorded from the project's fakes of each cloud (tests/fakes): with
 * SBX_FUZZ_RECORD=FILE a harness drives the same operations against the fake instead and
 * writes what the fake answered, in the script format, to FILE (see tests/fuzz/README.md).
 * URLs of the fake in the answers (Daytona's toolboxProxyUrl, ...) are recorded as
 * FUZZ_CLOUD_URL and replaced by the scripted server's URL when a script is read, so a seed
 * never points the provider at a port that is gone (or someone else's).
 * Harness-only code (header-only, static functions). */
#ifndef SBX_FUZZ_CLOUD_H
#define SBX_FUZZ_CLOUD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakes/fake_http.h"
#include "fuzz/fuzz_oracle.h"
#include "sbx/provider.h"

/* Responses one input may script. */
#define FUZZ_CLOUD_MAX_RESPONSES 24
/* Stands for the server's own URL in scripts (see above). */
#define FUZZ_CLOUD_URL "http://sbx-fuzz-server"

static const int FUZZ_CLOUD_STATUSES[16] = {200, 200, 200, 201, 204, 200, 400, 401,
                                            403, 404, 408, 409, 410, 422, 200, 202};

typedef struct fuzz_cloud_response {
    int status;
    bool chunked;
    uint8_t next_token; /* flags bits 1 and 2 */
    const uint8_t *body;
    size_t len;
} fuzz_cloud_response;

typedef struct fuzz_cloud {
    fake_http *http;
    pthread_mutex_t lock;
    fuzz_cloud_response script[FUZZ_CLOUD_MAX_RESPONSES];
    uint8_t *expanded[FUZZ_CLOUD_MAX_RESPONSES]; /* bodies with FUZZ_CLOUD_URL replaced */
    size_t n, next;
} fuzz_cloud;

/* Replaces every occurrence of from by to in (p, len) into a new buffer; NULL when none. */
static uint8_t *fuzz_cloud_replace(const uint8_t *p, size_t len, const char *from, const char *to,
                                   size_t *out_len)
{
    size_t fl = strlen(from), tl = strlen(to), hits = 0;
    for (size_t i = 0; i + fl <= len; i++)
        if (memcmp(p + i, from, fl) == 0)
            hits++, i += fl - 1;
    if (hits == 0)
        return NULL;
    uint8_t *b = malloc(len + hits * (tl > fl ? tl - fl : 0) + 1);
    if (!b)
        abort();
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        if (i + fl <= len && memcmp(p + i, from, fl) == 0) {
            memcpy(b + o, to, tl);
            o += tl;
            i += fl;
        } else {
            b[o++] = p[i++];
        }
    }
    *out_len = o;
    return b;
}

static void fuzz_cloud_handler(void *arg, const fake_request *req, fake_response *resp)
{
    (void)req;
    fuzz_cloud *c = arg;
    pthread_mutex_lock(&c->lock);
    if (c->next >= c->n) {
        pthread_mutex_unlock(&c->lock);
        fake_response_json(resp, 404, "{\"message\":\"script ended\"}");
        return;
    }
    size_t k = c->next;
    fuzz_cloud_response r = c->script[c->next++];
    pthread_mutex_unlock(&c->lock);
    fake_response_status(resp, r.status);
    fake_response_header(resp, "Content-Type", "application/json");
    if (r.next_token) {
        char tok[32];
        snprintf(tok, sizeof tok, (r.next_token & 2) ? "fz-next-%zu" : "fz-next", k);
        fake_response_header(resp, "X-Next-Token", tok);
    }
    if (r.chunked && r.len > 1) {
        fake_response_chunk(resp, r.body, r.len / 2, 0);
        fake_response_chunk(resp, r.body + r.len / 2, r.len - r.len / 2, 0);
    } else if (r.len) {
        fake_response_body(resp, r.body, r.len);
    }
}

static void fuzz_cloud_start(fuzz_cloud *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    c->http = fake_http_start();
    if (!c->http)
        abort();
    fake_http_route(c->http, NULL, "/**", fuzz_cloud_handler, c);
}

static void fuzz_cloud_stop(fuzz_cloud *c)
{
    fake_http_stop(c->http);
    for (size_t i = 0; i < FUZZ_CLOUD_MAX_RESPONSES; i++)
        free(c->expanded[i]);
    pthread_mutex_destroy(&c->lock);
}

/* Parses the script from data (the bytes stay borrowed until the next call). */
static void fuzz_cloud_script(fuzz_cloud *c, const uint8_t *data, size_t size)
{
    pthread_mutex_lock(&c->lock);
    c->n = c->next = 0;
    for (size_t i = 0; i < FUZZ_CLOUD_MAX_RESPONSES; i++) {
        free(c->expanded[i]);
        c->expanded[i] = NULL;
    }
    size_t off = 0;
    while (off + 4 <= size && c->n < FUZZ_CLOUD_MAX_RESPONSES) {
        fuzz_cloud_response *r = &c->script[c->n++];
        r->status = FUZZ_CLOUD_STATUSES[data[off] & 15];
        r->chunked = data[off + 1] & 1;
        r->next_token = (data[off + 1] >> 1) & 3;
        size_t len = (size_t)data[off + 2] << 8 | data[off + 3];
        off += 4;
        if (len > size - off)
            len = size - off;
        r->body = data + off;
        r->len = len;
        size_t elen = 0;
        uint8_t *e =
            fuzz_cloud_replace(data + off, len, FUZZ_CLOUD_URL, fake_http_url(c->http), &elen);
        if (e) {
            c->expanded[c->n - 1] = e;
            r->body = e;
            r->len = elen;
        }
        off += len;
    }
    fake_http_log_clear(c->http);
    pthread_mutex_unlock(&c->lock);
}

/* Writes every answer logged by h (in order) as a script into path: a seed recorded from a
 * fake. Answers with a status the script cannot express are written as 200. */
static void fuzz_cloud_record(fake_http *h, const char *path)
{
    const char *url = fake_http_url(h);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "fuzz_cloud: cannot write %s\n", path);
        exit(1);
    }
    size_t n = fake_http_log_count(h);
    for (size_t i = 0; i < n && i < FUZZ_CLOUD_MAX_RESPONSES; i++) {
        const fake_request *r = fake_http_log_at(h, i);
        uint8_t head[4] = {0, 0, 0, 0};
        for (uint8_t k = 0; k < 16; k++)
            if (FUZZ_CLOUD_STATUSES[k] == r->status) {
                head[0] = k;
                break;
            }
        size_t len = r->response_len;
        uint8_t *b = fuzz_cloud_replace(r->response, len, url, FUZZ_CLOUD_URL, &len);
        const uint8_t *body = b ? b : r->response;
        if (len > 0xffff)
            len = 0xffff;
        /* a list page the provider asked the next page of had X-Next-Token (E2B) */
        const fake_request *nx = i + 1 < n ? fake_http_log_at(h, i + 1) : NULL;
        if (nx != NULL && strcmp(nx->path, r->path) == 0 &&
            fake_request_query(nx, "nextToken") != NULL)
            head[1] |= 4;
        head[2] = (uint8_t)(len >> 8);
        head[3] = (uint8_t)len;
        fwrite(head, 1, 4, f);
        fwrite(body, 1, len, f);
        free(b);
    }
    fclose(f);
    fprintf(stderr, "fuzz_cloud: recorded %zu answers into %s\n", n, path);
}

/* A failure carries its code and a text; no text shows the secret. */
static void fuzz_cloud_check(sbx_status st, const sbx_error *err, const char *secret)
{
    if (st == SBX_OK)
        return;
    FUZZ_REQUIRE(err->code == st && err->message[0] != '\0', "failure %d without a text", (int)st);
    FUZZ_REQUIRE(strstr(err->message, secret) == NULL, "an error shows the secret: %s",
                 err->message);
}

/* Output the caller saw, checked against the limit the options set. */
typedef struct fuzz_cloud_seen {
    uint64_t bytes[3];
} fuzz_cloud_seen;

static void fuzz_cloud_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                              uint64_t offset)
{
    (void)data;
    (void)offset;
    fuzz_cloud_seen *s = arg;
    FUZZ_REQUIRE(stream == SBX__V1__STREAM__STREAM_STDOUT ||
                     stream == SBX__V1__STREAM__STREAM_STDERR,
                 "output on stream %d", (int)stream);
    s->bytes[stream] += len;
}

/* The output limit the harnesses set: small, so the limit paths are reached. */
#define FUZZ_CLOUD_OUTPUT_LIMIT 4096

static void fuzz_cloud_check_result(const sbx_result *r, const fuzz_cloud_seen *s)
{
    FUZZ_REQUIRE(r->stdout.len <= FUZZ_CLOUD_OUTPUT_LIMIT &&
                     r->stderr.len <= FUZZ_CLOUD_OUTPUT_LIMIT,
                 "output over the limit: %zu/%zu", r->stdout.len, r->stderr.len);
    FUZZ_REQUIRE(s->bytes[1] <= FUZZ_CLOUD_OUTPUT_LIMIT && s->bytes[2] <= FUZZ_CLOUD_OUTPUT_LIMIT,
                 "streamed output over the limit");
}

/* Drives one sandbox of an opened provider through every operation (each reads whatever the
 * script answers): create, then run_command (argv and shell), run_code, install_packages,
 * write_file, read_file, list_files, close, destroy; when create fails, an attach of attach_id
 * instead (attached-only providers). */
static void fuzz_cloud_drive(const sbx_provider_ops *ops, void *state, const char *secret,
                             const char *attach_id)
{
    sbx_session_handle *session = sbx_session_handle_new();
    sbx_principal *principal = sbx_principal_new();
    sbx_policy *policy = sbx_policy_new();
    if (!session || !principal || !policy)
        abort();
    sbx_set_string(&session->session_id, "fuzz-session");
    sbx_set_string(&principal->subject, "alice");
    policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    sbx_error err = {0};
    sbx_sandbox *sb = NULL;
    sbx_status st = ops->create ? ops->create(state, session, principal, policy, &sb, &err)
                                : sbx_error_set(&err, SBX_E_CAPABILITY, "attached only");
    fuzz_cloud_check(st, &err, secret);
    if (st != SBX_OK) {
        FUZZ_REQUIRE(sb == NULL, "a failed create left a sandbox");
        memset(&err, 0, sizeof err);
        st = ops->attach(state, attach_id, principal, policy, &sb, &err);
        fuzz_cloud_check(st, &err, secret);
    }
    if (st == SBX_OK) {
        FUZZ_REQUIRE(sb && sb->id && sb->id[0], "a sandbox without an id");
        for (int op = 0; op < 8; op++) {
            fuzz_cloud_seen seen = {{0}};
            sbx_exec_opts o = {.deadline_mono_ms = sbx_monotonic_ms() + 20000,
                               .output_limit_bytes = FUZZ_CLOUD_OUTPUT_LIMIT,
                               .on_output = fuzz_cloud_output,
                               .on_output_arg = &seen,
                               .principal = principal,
                               .policy = policy};
            sbx_result *res = sbx_result_new();
            if (!res)
                abort();
            memset(&err, 0, sizeof err);
            switch (op) {
            case 0: {
                Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
                char *argv[] = {"echo", "hello world"};
                rc.argv = argv;
                rc.n_argv = 2;
                st = !ops->run_command ? SBX_OK : ops->run_command(sb, &rc, &o, res, &err);
                break;
            }
            case 1: {
                Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
                rc.shell = "cat; echo done";
                rc.stdin.data = (uint8_t *)"input\n";
                rc.stdin.len = 6;
                st = !ops->run_command ? SBX_OK : ops->run_command(sb, &rc, &o, res, &err);
                break;
            }
            case 2: {
                Sbx__V1__RunCode code = SBX__V1__RUN_CODE__INIT;
                code.language = "python";
                code.code = "print(1)\n1+1";
                st = !ops->run_code ? SBX_OK : ops->run_code(sb, &code, &o, res, &err);
                break;
            }
            case 3: {
                Sbx__V1__InstallPackages ip = SBX__V1__INSTALL_PACKAGES__INIT;
                char *pkgs[] = {"requests"};
                ip.manager = "pip";
                ip.packages = pkgs;
                ip.n_packages = 1;
                st =
                    !ops->install_packages ? SBX_OK : ops->install_packages(sb, &ip, &o, res, &err);
                break;
            }
            case 4: {
                Sbx__V1__WriteFile wf = SBX__V1__WRITE_FILE__INIT;
                wf.path = "/home/user/a.txt";
                wf.content.data = (uint8_t *)"content\n";
                wf.content.len = 8;
                wf.mkdirs = true;
                st = !ops->write_file ? SBX_OK : ops->write_file(sb, &wf, &o, res, &err);
                break;
            }
            case 5: {
                Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
                rf.path = "/home/user/a.txt";
                st = !ops->read_file ? SBX_OK : ops->read_file(sb, &rf, &o, res, &err);
                if (st == SBX_OK)
                    FUZZ_REQUIRE(res->n_files == 1, "a read gave %zu files", res->n_files);
                break;
            }
            case 6: {
                Sbx__V1__ListFiles lf = SBX__V1__LIST_FILES__INIT;
                lf.path = "/home/user";
                st = !ops->list_files ? SBX_OK : ops->list_files(sb, &lf, &o, res, &err);
                for (size_t i = 0; st == SBX_OK && i < res->n_files; i++)
                    FUZZ_REQUIRE(res->files[i]->path != NULL, "an entry without a path");
                break;
            }
            default: st = SBX_OK; break;
            }
            fuzz_cloud_check(st, &err, secret);
            fuzz_cloud_check_result(res, &seen);
            sbx_message_free(&res->base);
        }
        char id[256];
        snprintf(id, sizeof id, "%s", sb->id);
        ops->sandbox_close(sb);
        memset(&err, 0, sizeof err);
        st = ops->destroy ? ops->destroy(state, id, &err) : SBX_OK;
        fuzz_cloud_check(st, &err, secret);
    }
    sbx_message_free(&session->base);
    sbx_message_free(&principal->base);
    sbx_message_free(&policy->base);
}

/* Record mode: a sandbox of the per_session provider made for subject, left alive (list_held
 * then finds it). */
__attribute__((unused)) static void fuzz_cloud_drive_create(const sbx_provider_ops *ops,
                                                            void *state, const char *subject)
{
    sbx_session_handle *session = sbx_session_handle_new();
    sbx_principal *principal = sbx_principal_new();
    sbx_policy *policy = sbx_policy_new();
    if (!session || !principal || !policy)
        abort();
    sbx_set_string(&session->session_id, subject);
    sbx_set_string(&principal->subject, subject);
    policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    sbx_error err = {0};
    sbx_sandbox *sb = NULL;
    if (ops->create(state, session, principal, policy, &sb, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_cloud: create for %s: %s\n", subject, err.message);
        abort();
    }
    ops->sandbox_close(sb);
    sbx_message_free(&session->base);
    sbx_message_free(&principal->base);
    sbx_message_free(&policy->base);
}

static void fuzz_cloud_held(void *arg, const char *sandbox_id, const char *subject)
{
    (void)arg;
    FUZZ_REQUIRE(sandbox_id != NULL && sandbox_id[0] != '\0', "list_held listed an empty id");
    FUZZ_REQUIRE(strlen(sandbox_id) <= 256 && strpbrk(sandbox_id, "/?#@%: ") == NULL,
                 "list_held listed an id that is not a name: %s", sandbox_id);
    FUZZ_REQUIRE(subject != NULL && subject[0] != '\0', "list_held listed %s without a subject",
                 sandbox_id);
}

/* list_held of a per_session provider (state): every listed sandbox has an id fit for a path
 * or a host name and a subject; a failure carries a text without the secret. */
__attribute__((unused)) static void fuzz_cloud_list_held(const sbx_provider_ops *ops, void *state,
                                                         const char *secret)
{
    if (ops->list_held == NULL)
        return;
    sbx_error err = {0};
    sbx_status st = ops->list_held(state, fuzz_cloud_held, NULL, &err);
    fuzz_cloud_check(st, &err, secret);
}

#endif
