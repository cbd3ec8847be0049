/* jetstream.c - the NATS plumbing both ends of the queue transport share (see jetstream.h):
 * connection options (TLS, user/password, nkey), the stream and the completion bucket, the
 * names, and the task record with its bounded decoder. Secrets (password, nkey seed) are read
 * from the environment at connect time and never kept or printed. */
#include "core/clock.h"
#include "broker/jetstream.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

/* Record layout: magic "SBXQ", version, state, digest, stream sequence (u64 BE), deliveries
 * (u32 BE), node length (u16 BE), node, then (DONE) the packed completion. */
#define RECORD_MAGIC "SBXQ"
#define RECORD_VERSION 1
#define RECORD_HEADER (4 + 1 + 1 + SBX_REQUEST_DIGEST_LEN + 8 + 4 + 2)

/* JetStream API calls (stream info, create) wait this long: a loaded cluster electing a leader
 * answers within a few seconds. */
#define JS_API_WAIT_MS 10000
/* Reconnect attempts before the library gives up on a server list: effectively "keep trying"
 * (a worker outlives a NATS restart), at QUEUE_RECONNECT_WAIT_MS apart. */
#define QUEUE_MAX_RECONNECT (-1)
#define QUEUE_RECONNECT_WAIT_MS 250
/* Attempts (JS_READY_RETRY_MS apart) at the stream and bucket while JetStream is not ready. */
#define JS_READY_ATTEMPTS 40
#define JS_READY_RETRY_MS 250
/* History of the bucket: one revision per key is all a task needs (claim then done). */
#define BUCKET_HISTORY 1

sbx_status sbxq_fail(sbx_error *err, sbx_status code, natsStatus s, const char *what, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, what);
    vsnprintf(text, sizeof text, what, ap);
    va_end(ap);
    const char *last = nats_GetLastError(NULL);
    bool detail = last != NULL && last[0] != '\0';
    return sbx_error_set(err, code, "queue broker: %s: %s%s%s%s", text, natsStatus_GetText(s),
                         detail ? " (" : "", detail ? last : "", detail ? ")" : "");
}

/* SHA-256 of a, a NUL, then b (NULL: a alone), as hex_len hex digits into out (NUL ended). */
static void sha256_hex(const char *a, const char *b, char *out, int hex_len)
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    /* a NUL b: no (a, b) pair shares its bytes with another. */
    bool ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(ctx, a, strlen(a) + (b != NULL ? 1 : 0)) == 1 &&
              (b == NULL || EVP_DigestUpdate(ctx, b, strlen(b)) == 1) &&
              EVP_DigestFinal_ex(ctx, md, &n) == 1 && n == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        memset(md, 0, sizeof md); /* never happens with OpenSSL's built-in SHA-256 */
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < hex_len; i++)
        out[i] = hex[i % 2 == 0 ? md[i / 2] >> 4 : md[i / 2] & 15];
    out[hex_len] = '\0';
}

void sbxq_partition(const char *subject, char out[SBXQ_PARTITION_LEN])
{
    size_t n = strlen(subject);
    bool plain = n >= 1 && n <= SBXQ_PARTITION_LEN - 3;
    for (size_t i = 0; plain && i < n; i++)
        plain = isalnum((unsigned char)subject[i]) || subject[i] == '_' || subject[i] == '-';
    if (plain) {
        snprintf(out, SBXQ_PARTITION_LEN, "s-%s", subject);
        return;
    }
    out[0] = 'h';
    out[1] = '-';
    sha256_hex(subject, NULL, out + 2, 32);
}

void sbxq_key(const char *subject, const char *task_id, char out[SBXQ_KEY_LEN])
{
    sbxq_partition(subject, out);
    size_t n = strlen(out);
    out[n] = '.';
    sha256_hex(subject, task_id, out + n + 1, 64);
}

void sbxq_subject(const sbxq_conn *c, const char *verb, const char *key, char out[SBXQ_SUBJECT_MAX])
{
    snprintf(out, SBXQ_SUBJECT_MAX, "%s.%s.%s", c->name, verb, key);
}

static void escape_node(const char *node, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)node; *p && o + 4 < cap; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-') {
            out[o++] = (char)*p;
        } else {
            out[o++] = '_';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    out[o] = '\0';
}

void sbxq_node_subject(const sbxq_conn *c, const char *node, char out[SBXQ_SUBJECT_MAX])
{
    char esc[SBXQ_SUBJECT_MAX / 2];
    escape_node(node, esc, sizeof esc);
    snprintf(out, SBXQ_SUBJECT_MAX, "%s.node.%s", c->name, esc);
}

void sbxq_node_consumer(const char *node, char out[SBXQ_SUBJECT_MAX])
{
    char esc[SBXQ_SUBJECT_MAX / 2];
    escape_node(node, esc, sizeof esc);
    snprintf(out, SBXQ_SUBJECT_MAX, "node_%s", esc);
}

/* ---- records ------------------------------------------------------------------------------ */

uint8_t *sbxq_record_pack(sbxq_state state, const uint8_t digest[SBX_REQUEST_DIGEST_LEN],
                          uint64_t seq, uint32_t deliveries, const char *node,
                          const sbx_completion *c, size_t *len)
{
    size_t node_len = node != NULL ? strnlen(node, SBXQ_NODE_MAX) : 0;
    size_t body = c != NULL ? protobuf_c_message_get_packed_size(&c->base) : 0;
    size_t n = RECORD_HEADER + node_len + body;
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL)
        return NULL;
    uint8_t *p = buf;
    memcpy(p, RECORD_MAGIC, 4);
    p += 4;
    *p++ = RECORD_VERSION;
    *p++ = (uint8_t)state;
    memcpy(p, digest, SBX_REQUEST_DIGEST_LEN);
    p += SBX_REQUEST_DIGEST_LEN;
    for (int shift = 56; shift >= 0; shift -= 8)
        *p++ = (uint8_t)(seq >> shift);
    *p++ = (uint8_t)(deliveries >> 24);
    *p++ = (uint8_t)(deliveries >> 16);
    *p++ = (uint8_t)(deliveries >> 8);
    *p++ = (uint8_t)deliveries;
    *p++ = (uint8_t)(node_len >> 8);
    *p++ = (uint8_t)node_len;
    memcpy(p, node, node_len);
    p += node_len;
    if (c != NULL)
        protobuf_c_message_pack(&c->base, p);
    *len = n;
    return buf;
}

bool sbxq_record_parse(const void *data, size_t len, sbxq_record *out)
{
    const uint8_t *p = data;
    memset(out, 0, sizeof(*out));
    if (data == NULL || len < RECORD_HEADER || memcmp(p, RECORD_MAGIC, 4) != 0 ||
        p[4] != RECORD_VERSION || p[5] < SBXQ_QUEUED || p[5] > SBXQ_DONE)
        return false;
    out->state = (sbxq_state)p[5];
    memcpy(out->digest, p + 6, SBX_REQUEST_DIGEST_LEN);
    const uint8_t *q = p + 6 + SBX_REQUEST_DIGEST_LEN;
    for (int i = 0; i < 8; i++)
        out->seq = out->seq << 8 | q[i];
    q += 8;
    out->deliveries = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
    size_t node_len = (size_t)q[4] << 8 | q[5];
    if (node_len > SBXQ_NODE_MAX || RECORD_HEADER + node_len > len)
        return false;
    memcpy(out->node, p + RECORD_HEADER, node_len);
    out->node[node_len] = '\0';
    out->completion = p + RECORD_HEADER + node_len;
    out->completion_len = len - RECORD_HEADER - node_len;
    if (out->state != SBXQ_DONE && out->completion_len != 0)
        return false;
    return true;
}

sbx_completion *sbxq_record_completion(const sbxq_record *r, const char *task_id)
{
    if (r->state != SBXQ_DONE)
        return NULL;
    sbx_completion *c = NULL;
    sbx_error err;
    /* The bucket is as untrusted as the network: the same bounded decoder as every wire. */
    if (sbx_completion_decode(r->completion, r->completion_len, SIZE_MAX, &c, &err) != SBX_OK)
        return NULL;
    if (task_id != NULL && (c->task_id == NULL || strcmp(c->task_id, task_id) != 0)) {
        sbx_completion_free(c);
        return NULL;
    }
    c->deliveries = r->deliveries;
    return c;
}

int sbxq_get(sbxq_conn *c, const char *key, uint8_t **data, size_t *len, uint64_t *rev,
             sbx_error *err)
{
    kvEntry *e = NULL;
    natsStatus s = kvStore_Get(&e, c->kv, key);
    if (s == NATS_NOT_FOUND)
        return 0;
    if (s != NATS_OK) {
        sbxq_fail(err, SBX_E_BROKER, s, "reading task record %s", key);
        return -1;
    }
    int n = kvEntry_ValueLen(e);
    *data = malloc(n > 0 ? (size_t)n : 1);
    if (*data == NULL) {
        kvEntry_Destroy(e);
        sbx_error_set(err, SBX_E_INTERNAL, "out of memory reading a task record");
        return -1;
    }
    if (n > 0)
        memcpy(*data, kvEntry_Value(e), (size_t)n);
    *len = (size_t)(n > 0 ? n : 0);
    *rev = kvEntry_Revision(e);
    kvEntry_Destroy(e);
    return 1;
}

void sbxq_notify(sbxq_conn *c, const char *key, const void *record, size_t len)
{
    char subject[SBXQ_SUBJECT_MAX];
    sbxq_subject(c, "done", key, subject);
    if ((int64_t)len <= c->max_payload)
        natsConnection_Publish(c->nc, subject, record, (int)len);
}

sbx_completion *sbxq_unavailable(const char *task_id, const char *node, int64_t wait_ms)
{
    sbx_completion *c = sbx_completion_fail(
        task_id, SBX_E_BROKER,
        "queue broker: node '%s' did not take the request within %lld ms (node_wait_ms): its "
        "worker is down or not consuming; the session's sandbox lives there, so retry when the "
        "node is back, or set recreate_elsewhere to start the session over on another node",
        node, (long long)wait_ms);
    if (c != NULL)
        sbx_set_string(&c->node, node);
    return c;
}

/* ---- connection --------------------------------------------------------------------------- */

static sbx_status secret_env(const char *name, const char *what, const char **out, sbx_error *err)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return sbx_error_set(err, SBX_E_CONFIG,
                             "queue broker: environment variable %s (sandbox.broker.queue.%s) is "
                             "not set or empty; export the NATS %s in it",
                             name, what, strcmp(what, "password_env") == 0 ? "password" : "seed");
    *out = v;
    return SBX_OK;
}

/* nats.c asks for the server's nonce to be signed with the nkey seed at every (re)connect. The
 * seed is read from its environment variable each time and never copied. */
static natsStatus sign_nonce(char **custom_err, unsigned char **sig, int *sig_len,
                             const char *nonce, void *closure)
{
    (void)custom_err;
    const char *seed = getenv((const char *)closure);
    if (seed == NULL || seed[0] == '\0')
        return NATS_ERR;
    return nats_Sign(seed, nonce, sig, sig_len);
}

static sbx_status ensure_stream(sbxq_conn *c, sbx_error *err)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, c->js, c->stream, NULL, &jerr);
    if (s == NATS_OK) {
        jsStreamInfo_Destroy(si);
        return SBX_OK;
    }
    if (s != NATS_NOT_FOUND)
        return sbxq_fail(err, SBX_E_BROKER, s, "looking up stream %s", c->stream);
    char work[SBXQ_SUBJECT_MAX], nodes[SBXQ_SUBJECT_MAX];
    snprintf(work, sizeof work, "%s.work", c->name);
    snprintf(nodes, sizeof nodes, "%s.node.>", c->name);
    const char *subjects[] = {work, nodes};
    jsStreamConfig sc;
    jsStreamConfig_Init(&sc);
    sc.Name = c->stream;
    sc.Subjects = subjects;
    sc.SubjectsLen = 2;
    sc.Retention = js_WorkQueuePolicy;
    sc.Storage = js_FileStorage;
    sc.Replicas = c->cfg->replicas;
    sc.Duplicates = c->cfg->dedup_window_s * 1000000000LL;
    /* A request nobody took within the completion TTL is past anyone's interest. */
    sc.MaxAge = c->cfg->completion_ttl_s * 1000000000LL;
    s = js_AddStream(&si, c->js, &sc, NULL, &jerr);
    jsStreamInfo_Destroy(si);
    if (s != NATS_OK && jerr != JSStreamNameExistErr)
        return sbxq_fail(err, SBX_E_BROKER, s, "creating stream %s (JetStream error %d)", c->stream,
                         (int)jerr);
    return SBX_OK;
}

static sbx_status ensure_bucket(sbxq_conn *c, sbx_error *err)
{
    char bucket[80];
    snprintf(bucket, sizeof bucket, "%s_done", c->name);
    natsStatus s = js_KeyValue(&c->kv, c->js, bucket);
    if (s == NATS_OK)
        return SBX_OK;
    if (s != NATS_NOT_FOUND)
        return sbxq_fail(err, SBX_E_BROKER, s, "opening bucket %s", bucket);
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = bucket;
    kc.History = BUCKET_HISTORY;
    kc.TTL = c->cfg->completion_ttl_s * 1000000000LL;
    kc.StorageType = js_FileStorage;
    kc.Replicas = (int)c->cfg->replicas;
    s = js_CreateKeyValue(&c->kv, c->js, &kc);
    if (s != NATS_OK) /* another process may have created it meanwhile */
        s = js_KeyValue(&c->kv, c->js, bucket);
    if (s != NATS_OK)
        return sbxq_fail(err, SBX_E_BROKER, s, "creating bucket %s", bucket);
    return SBX_OK;
}

/* The connection's options from cfg (*out, the caller destroys it, also on failure). */
static sbx_status connect_options(const sbx_queue_config *cfg, const char *client,
                                  natsOptions **out, sbx_error *err)
{
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    *out = o;
    const char *what = "creating options";
    /* A comma separated list: every server of a cluster, tried in random order. */
    char urls[2048];
    const char *servers[SBXQ_MAX_SERVERS];
    int n_servers = 0;
    snprintf(urls, sizeof urls, "%s", cfg->url != NULL ? cfg->url : "");
    for (char *save = NULL, *u = strtok_r(urls, ",", &save);
         u != NULL && n_servers < SBXQ_MAX_SERVERS; u = strtok_r(NULL, ",", &save))
        servers[n_servers++] = u;
    if (s == NATS_OK && (what = "server url", 1))
        s = natsOptions_SetServers(o, servers, n_servers);
    if (s == NATS_OK && (what = "client name", 1))
        s = natsOptions_SetName(o, client);
    if (s == NATS_OK && (what = "connect timeout", 1))
        s = natsOptions_SetTimeout(o, cfg->connect_timeout_ms);
    /* Every subscription's handler runs on the library's shared delivery threads: a caller
     * waits on one subscription per task, and a thread each would not scale. */
    if (s == NATS_OK && (what = "message delivery", 1))
        s = natsOptions_UseGlobalMessageDelivery(o, true);
    /* Every publish is written at once. Without it libnats 3.4 hands a plain publish (a
     * completion's notice to its waiter, a pull request for the next task, an ack) to a flusher
     * thread that waits a millisecond for more to batch: half of a no-op task's time through
     * the queue. Requests (records, JetStream publishes) were always written at once. */
    if (s == NATS_OK && (what = "send as soon as possible", 1))
        s = natsOptions_SetSendAsap(o, true);
    if (s == NATS_OK && cfg->inbox_prefix != NULL && (what = "inbox_prefix", 1))
        s = natsOptions_SetCustomInboxPrefix(o, cfg->inbox_prefix);
    if (s == NATS_OK && (what = "reconnect policy", 1))
        s = natsOptions_SetMaxReconnect(o, QUEUE_MAX_RECONNECT);
    if (s == NATS_OK)
        s = natsOptions_SetReconnectWait(o, QUEUE_RECONNECT_WAIT_MS);
    bool tls = cfg->ca_file != NULL || cfg->cert_file != NULL ||
               (cfg->url != NULL && strncmp(cfg->url, "tls://", 6) == 0);
    if (s == NATS_OK && tls && (what = "TLS", 1))
        s = natsOptions_SetSecure(o, true);
    /* A TLS file that does not load names its setting and the fix. */
    const char *file = NULL, *fix = NULL;
    if (s == NATS_OK && cfg->ca_file != NULL) {
        what = "ca_file";
        file = cfg->ca_file;
        fix = "give a readable PEM file of the CA that signs the NATS servers' certificates";
        s = natsOptions_LoadCATrustedCertificates(o, cfg->ca_file);
    }
    if (s == NATS_OK && cfg->cert_file != NULL) {
        what = "cert_file";
        file = cfg->cert_file;
        fix = "give the client certificate (PEM) in cert_file and, in key_file, its unencrypted "
              "key (the one it was issued for)";
        s = natsOptions_LoadCertificatesChain(o, cfg->cert_file, cfg->key_file);
    }
    if (s == NATS_OK)
        file = NULL;
    sbx_status st = SBX_OK;
    if (s == NATS_OK && cfg->user != NULL) {
        const char *password = "";
        if (cfg->password_env != NULL)
            st = secret_env(cfg->password_env, "password_env", &password, err);
        if (st == SBX_OK && (what = "user and password", 1))
            s = natsOptions_SetUserInfo(o, cfg->user, password);
    }
    if (st == SBX_OK && s == NATS_OK && cfg->nkey != NULL) {
        const char *seed = NULL;
        st = secret_env(cfg->nkey_seed_env, "nkey_seed_env", &seed, err);
        if (st == SBX_OK && (what = "nkey", 1))
            s = natsOptions_SetNKey(o, cfg->nkey, sign_nonce, (void *)cfg->nkey_seed_env);
    }
    if (st == SBX_OK && s != NATS_OK && file != NULL) {
        st = sbxq_fail(err, SBX_E_CONFIG, s, "sandbox.broker.queue.%s '%s' does not load", what,
                       file);
        if (err != NULL) { /* the fix after libnats' reason */
            size_t n = strlen(err->message);
            snprintf(err->message + n, sizeof err->message - n, "; %s", fix);
        }
    } else if (st == SBX_OK && s != NATS_OK) {
        st = sbxq_fail(err, SBX_E_CONFIG, s, "sandbox.broker.queue: %s", what);
    }
    return st;
}

/* What to check after a connect failed with s. */
static const char *connect_hint(natsStatus s)
{
    switch (s) {
    case NATS_SSL_ERROR:
        return "the TLS handshake failed: check ca_file (the CA that signs the NATS servers' "
               "certificates; default: the system's CAs) and that the url names the servers";
    case NATS_SECURE_CONNECTION_REQUIRED: return "the server demands TLS: use tls:// and ca_file";
    case NATS_SECURE_CONNECTION_WANTED:
        return "ca_file, cert_file or a tls:// url asks for TLS, and the server does not offer it";
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_NOT_PERMITTED: return "do user and password_env, or nkey and nkey_seed_env, match?";
    case NATS_PROTOCOL_ERROR:
        return "the server closed the connection as it opened: does it demand a client "
               "certificate (cert_file and key_file, signed by a CA it trusts) or credentials "
               "this client does not send?";
    default: return "is nats-server running with JetStream, and do the credentials match?";
    }
}

sbx_status sbxq_connect(const sbx_queue_config *cfg, const char *client, sbxq_conn **out,
                        sbx_error *err)
{
    *out = NULL;
    sbxq_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    c->cfg = cfg;
    pthread_mutex_init(&c->retired_mu, NULL);
    snprintf(c->name, sizeof c->name, "%s", cfg->name != NULL ? cfg->name : "sbx");
    snprintf(c->stream, sizeof c->stream, "%s_tasks", c->name);

    natsOptions *o = NULL;
    sbx_status st = connect_options(cfg, client, &o, err);
    natsStatus s = NATS_OK;
    if (st == SBX_OK) {
        s = natsConnection_Connect(&c->nc, o);
        if (s != NATS_OK)
            st =
                sbxq_fail(err, SBX_E_BROKER, s, "connecting to %s (%s)", cfg->url, connect_hint(s));
    }
    natsOptions_Destroy(o);
    if (st == SBX_OK) {
        jsOptions jo;
        jsOptions_Init(&jo);
        jo.Wait = JS_API_WAIT_MS;
        s = natsConnection_JetStream(&c->js, c->nc, &jo);
        if (s != NATS_OK)
            st = sbxq_fail(err, SBX_E_BROKER, s, "JetStream context on %s", cfg->url);
    }
    /* A cluster that is electing its JetStream leader (just started, or a server just died)
     * answers "temporarily unavailable" for a few seconds: wait for it, boundedly. */
    for (int attempt = 0; st == SBX_OK; attempt++) {
        sbx_error e = {0};
        sbx_status s2 = ensure_stream(c, &e);
        if (s2 == SBX_OK)
            s2 = ensure_bucket(c, &e);
        if (s2 == SBX_OK || attempt + 1 >= JS_READY_ATTEMPTS) {
            if (s2 != SBX_OK && err != NULL)
                *err = e;
            st = s2;
            break;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = JS_READY_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (st != SBX_OK) {
        sbxq_close(c);
        return st;
    }
    c->max_payload = natsConnection_GetMaxPayload(c->nc);
    *out = c;
    return SBX_OK;
}

typedef struct close_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sbxq_conn *c;
    bool done;
    int refs; /* the closing thread and the waiter: the last one frees */
} close_wait;

static void close_wait_release(close_wait *w)
{
    pthread_mutex_lock(&w->mu);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (last) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
    }
}

static void *close_thread(void *arg)
{
    close_wait *w = arg;
    sbxq_close(w->c);
    pthread_mutex_lock(&w->mu);
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    close_wait_release(w);
    return NULL;
}

bool sbxq_close_within(sbxq_conn *c, int ms)
{
    if (c == NULL)
        return true;
    close_wait *w = calloc(1, sizeof *w);
    pthread_t tid;
    pthread_attr_t attr;
    bool threaded = false;
    if (w != NULL && pthread_attr_init(&attr) == 0) {
        pthread_mutex_init(&w->mu, NULL);
        sbx_cond_init_mono(&w->cv);
        w->c = c;
        w->refs = 2;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        threaded = pthread_create(&tid, &attr, close_thread, w) == 0;
        pthread_attr_destroy(&attr);
        if (!threaded) {
            pthread_cond_destroy(&w->cv);
            pthread_mutex_destroy(&w->mu);
        }
    }
    if (!threaded) { /* no thread to wait on: close here, unbounded */
        free(w);
        sbxq_close(c);
        return true;
    }
    struct timespec until = sbx_mono_after_ms(ms);
    pthread_mutex_lock(&w->mu);
    while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT) {
    }
    bool done = w->done;
    pthread_mutex_unlock(&w->mu);
    close_wait_release(w);
    return done;
}

/* Frees the first n of subs. */
static void destroy_subs(natsSubscription **subs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        natsSubscription_Destroy(subs[i]);
}

/* Takes the batch waiting, proves the read loop past it with a flush and frees it. A flush
 * that fails (the connection is away) puts the batch back, before what ended meanwhile, for
 * the next try. */
static void reap_retired(sbxq_conn *c)
{
    pthread_mutex_lock(&c->retired_mu);
    natsSubscription **batch = c->retired;
    size_t n = c->n_retired;
    c->retired = NULL;
    c->n_retired = c->cap_retired = 0;
    pthread_mutex_unlock(&c->retired_mu);
    bool past = natsConnection_Status(c->nc) == NATS_CONN_STATUS_CONNECTED &&
                natsConnection_FlushTimeout(c->nc, SBXQ_RETIRE_FLUSH_MS) == NATS_OK;
    if (past) {
        destroy_subs(batch, n);
        free(batch);
    }
    pthread_mutex_lock(&c->retired_mu);
    if (!past) {
        natsSubscription **all = realloc(batch, (n + c->n_retired) * sizeof(*all));
        if (all != NULL) { /* else out of memory: the batch leaks rather than is freed early */
            if (c->n_retired > 0)
                memcpy(all + n, c->retired, c->n_retired * sizeof(*all));
            free(c->retired);
            c->retired = all;
            c->n_retired += n;
            c->cap_retired = c->n_retired;
        }
    }
    c->reaping = false;
    pthread_mutex_unlock(&c->retired_mu);
}

void sbxq_unsubscribe(sbxq_conn *c, natsSubscription *sub, bool drained)
{
    if (sub == NULL)
        return;
    if (!drained)
        natsSubscription_Unsubscribe(sub);
    pthread_mutex_lock(&c->retired_mu);
    bool kept = true;
    if (c->n_retired == c->cap_retired) {
        size_t cap = c->cap_retired ? 2 * c->cap_retired : SBXQ_RETIRE_BATCH;
        natsSubscription **grown = realloc(c->retired, cap * sizeof(*grown));
        if (grown != NULL) {
            c->retired = grown;
            c->cap_retired = cap;
        } else {
            kept = false; /* out of memory: leak this one rather than free it early */
        }
    }
    if (kept)
        c->retired[c->n_retired++] = sub;
    bool reap = c->n_retired >= SBXQ_RETIRE_BATCH && !c->reaping;
    if (reap)
        c->reaping = true;
    pthread_mutex_unlock(&c->retired_mu);
    if (reap)
        reap_retired(c);
}

void sbxq_close(sbxq_conn *c)
{
    if (c == NULL)
        return;
    kvStore_Destroy(c->kv);
    jsCtx_Destroy(c->js);
    if (c->nc != NULL)
        natsConnection_Close(c->nc); /* joins the read loop */
    /* No thread is reaping: the owner stopped every caller before closing. */
    destroy_subs(c->retired, c->n_retired);
    free(c->retired);
    natsConnection_Destroy(c->nc);
    pthread_mutex_destroy(&c->retired_mu);
    free(c);
}
