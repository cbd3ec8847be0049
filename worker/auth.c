/* auth.c - who is calling the worker: bearer tokens (compared in constant time over SHA-256
 * digests, so neither the content nor the length of a configured token leaks through timing),
 * client certificates (verified by OpenSSL against the configured CA, subject CN mapped to a
 * caller), the principal subjects each caller may assert, and the server TLS context.
 * Tokens are read from the environment once, hashed, and never stored, logged or echoed. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include "worker/worker_internal.h"

/* The only protocol we speak over TLS; a client that cannot do HTTP/2 gets no connection. */
static const unsigned char ALPN_H2[] = {2, 'h', '2'};

static void digest(const void *data, size_t len, unsigned char out[SHA256_DIGEST_LENGTH])
{
    unsigned int n = 0;
    EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

sbx_status worker_auth_init(worker_auth *auth, const sbx_worker_config *cfg, sbx_error *err)
{
    memset(auth, 0, sizeof *auth);
    if (cfg->n_callers == 0)
        return SBX_OK;
    auth->callers = calloc(cfg->n_callers, sizeof *auth->callers);
    if (!auth->callers)
        return sbx_error_set(err, SBX_E_INTERNAL, "worker: out of memory loading callers");
    auth->n_callers = cfg->n_callers;
    auth->required = true;
    for (size_t i = 0; i < cfg->n_callers; i++) {
        const sbx_worker_caller *c = &cfg->callers[i];
        worker_caller *wc = &auth->callers[i];
        wc->config = c;
        if (c->token_env && c->token_env[0]) {
            const char *token = getenv(c->token_env);
            if (!token || !token[0]) {
                worker_auth_free(auth);
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "worker caller '%s': environment variable %s (token_env) is "
                                     "unset or empty; export the caller's bearer token in it",
                                     c->name ? c->name : "?", c->token_env);
            }
            digest(token, strlen(token), wc->token_digest);
            wc->has_token = true;
        } else if (!c->cert_subject || !c->cert_subject[0]) {
            worker_auth_free(auth);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "worker caller '%s' has neither token_env nor cert_subject; "
                                 "give it one of them",
                                 c->name ? c->name : "?");
        }
        if (c->cert_subject && c->cert_subject[0] && !cfg->tls_client_ca_file) {
            worker_auth_free(auth);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "worker caller '%s' is identified by a client certificate but "
                                 "worker.tls.client_ca_file is not set; set it to the CA that "
                                 "signs client certificates",
                                 c->name ? c->name : "?");
        }
    }
    return SBX_OK;
}

void worker_auth_free(worker_auth *auth)
{
    if (!auth)
        return;
    if (auth->callers)
        OPENSSL_cleanse(auth->callers, auth->n_callers * sizeof *auth->callers);
    free(auth->callers);
    auth->callers = NULL;
    auth->n_callers = 0;
}

const worker_caller *worker_auth_by_token(const worker_auth *auth, const char *value, size_t len)
{
    static const char prefix[] = "Bearer ";
    size_t plen = sizeof prefix - 1;
    if (len <= plen || strncasecmp(value, prefix, plen) != 0)
        return NULL;
    unsigned char d[SHA256_DIGEST_LENGTH];
    digest(value + plen, len - plen, d);
    const worker_caller *found = NULL;
    /* Compare against every caller (no early exit) so timing says nothing about which one. */
    for (size_t i = 0; i < auth->n_callers; i++) {
        const worker_caller *c = &auth->callers[i];
        if (c->has_token && CRYPTO_memcmp(d, c->token_digest, sizeof d) == 0 && !found)
            found = c;
    }
    OPENSSL_cleanse(d, sizeof d);
    return found;
}

const worker_caller *worker_auth_by_cert(const worker_auth *auth, const char *cn)
{
    if (!cn || !cn[0])
        return NULL;
    for (size_t i = 0; i < auth->n_callers; i++) {
        const sbx_worker_caller *c = auth->callers[i].config;
        if (c->cert_subject && strcmp(c->cert_subject, cn) == 0)
            return &auth->callers[i];
    }
    return NULL;
}

bool worker_caller_may_assert(const worker_caller *caller, const char *subject)
{
    const sbx_worker_caller *c = caller->config;
    for (size_t i = 0; i < c->n_subjects; i++)
        if (strcmp(c->subjects[i], "*") == 0 || strcmp(c->subjects[i], subject) == 0)
            return true;
    return false;
}

bool worker_caller_may_choose_identity(const worker_caller *caller, const sbx_principal *p)
{
    if (p == NULL || (p->n_credentials == 0 && p->n_groups == 0))
        return true;
    const sbx_worker_caller *c = caller->config;
    for (size_t i = 0; i < c->n_subjects; i++)
        if (strcmp(c->subjects[i], "*") == 0)
            return true;
    return false;
}

static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, ALPN_H2, sizeof ALPN_H2, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL; /* no h2: refuse, never fall back to HTTP/1.1 */
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* A TLS file that does not load: names the file, the setting that gave it, OpenSSL's reason and
 * the fix. */
static sbx_status ssl_fail(sbx_error *err, const char *what, const char *file, const char *setting,
                           const char *fix)
{
    char buf[256];
    unsigned long e = ERR_get_error();
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return sbx_error_set(err, SBX_E_CONFIG, "worker TLS: %s '%s' (sandbox.worker.tls.%s): %s; %s",
                         what, file, setting, buf, fix);
}

SSL_CTX *worker_tls_ctx_new(const sbx_worker_config *cfg, const worker_auth *auth, sbx_error *err)
{
    if (!cfg->tls_cert_file || !cfg->tls_key_file) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "worker TLS needs both tls.cert_file and tls.key_file (server certificate "
                      "and its key)");
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ERR_clear_error();
        sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                      "worker TLS: cannot create a context (out of memory)");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* RFC 7540 §9.2: no renegotiation and no compression under HTTP/2. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) != 1) {
        ssl_fail(err, "cannot load the server certificate chain", cfg->tls_cert_file, "cert_file",
                 "give a readable PEM file: the server's certificate first, then its CA chain");
        goto fail;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key_file, SSL_FILETYPE_PEM) != 1) {
        /* The key is checked against the certificate as it loads. */
        unsigned long e = ERR_peek_error();
        bool mismatch =
            ERR_GET_LIB(e) == ERR_LIB_X509 && (ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH ||
                                               ERR_GET_REASON(e) == X509_R_KEY_TYPE_MISMATCH);
        if (mismatch)
            ssl_fail(err, "the key does not match the certificate of cert_file", cfg->tls_key_file,
                     "key_file", "give the key the server certificate was issued for");
        else
            ssl_fail(err, "cannot load the server key", cfg->tls_key_file, "key_file",
                     "give a readable, unencrypted PEM private key");
        goto fail;
    }
    if (cfg->tls_client_ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, cfg->tls_client_ca_file, NULL) != 1) {
            ssl_fail(err, "cannot load the client CA", cfg->tls_client_ca_file, "client_ca_file",
                     "give a readable PEM file of the CA certificates that sign the callers' "
                     "client certificates");
            goto fail;
        }
        bool any_token = false;
        for (size_t i = 0; i < auth->n_callers; i++)
            any_token |= auth->callers[i].has_token;
        /* A presented certificate is always verified; it is mandatory unless a caller can
         * authenticate with a token instead. */
        int mode = SSL_VERIFY_PEER | (any_token ? 0 : SSL_VERIFY_FAIL_IF_NO_PEER_CERT);
        SSL_CTX_set_verify(ctx, mode, NULL);
        SSL_CTX_set_verify_depth(ctx, 8);
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cfg->tls_client_ca_file);
        if (names)
            SSL_CTX_set_client_CA_list(ctx, names);
    }
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    return NULL;
}

bool worker_tls_peer_cn(SSL *ssl, char *out, size_t cap)
{
    out[0] = '\0';
    if (SSL_get_verify_result(ssl) != X509_V_OK)
        return false;
    X509 *cert = SSL_get1_peer_certificate(ssl);
    if (!cert)
        return false;
    int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, out, (int)cap);
    X509_free(cert);
    if (n <= 0 || (size_t)n >= cap || strlen(out) != (size_t)n) { /* embedded NUL: refuse */
        out[0] = '\0';
        return false;
    }
    return true;
}
