/* sigv4.h - AWS Signature Version 4 (HMAC-SHA256) for the ec2_ssm provider's SSM and STS calls,
 * and for the test fake that verifies them: canonical request, string to sign, signing key,
 * header signing (Authorization) and presigned query signing (X-Amz-Signature).
 *
 * The algorithm follows AWS's "Create a signed AWS API request" (IAM user guide, Signature
 * Version 4) and is checked step by step against AWS's public signing test suite
 * (tests/ssm/data/aws-sigv4, from awslabs/aws-c-auth). Every intermediate string is returned so
 * a test can compare it with the suite's expected artifact.
 *
 * Private to providers/ec2_ssm and the test tree. This file must not do I/O, must not know SSM
 * or STS, and must never put a secret access key in an error message (only the access key id,
 * which AWS itself treats as non-secret, appears in the Credential scope).
 */
#ifndef SBX_EC2_SSM_SIGV4_H
#define SBX_EC2_SSM_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hex SHA-256 / HMAC-SHA256 digests: 32 bytes as 64 lowercase hex characters. */
#define SIGV4_HEX_LEN 64
/* X-Amz-Date "YYYYMMDDTHHMMSSZ" plus NUL. */
#define SIGV4_AMZ_DATE_LEN 17
/* Headers signed per request. The SSM/STS client signs 5; the test suite's largest case 6. 64
 * leaves room for any caller while keeping the sort and merge trivially bounded. */
#define SIGV4_MAX_HEADERS 64
/* Query parameters per request (presigning adds 6). AWS query APIs we speak send < 20. */
#define SIGV4_MAX_QUERY_PARAMS 128
/* Longest path, query or header value the signer accepts. SSM/STS requests are "POST /" with
 * short headers; 64 KiB bounds the work done on a hostile request in the verifying fake. */
#define SIGV4_MAX_FIELD 65536
/* Presigned URLs may be valid for at most 7 days (AWS's documented maximum for X-Amz-Expires). */
#define SIGV4_MAX_EXPIRES_S 604800

typedef struct sigv4_header {
    const char *name;  /* any case; signed lowercased */
    const char *value; /* raw value; leading/trailing whitespace trimmed, inner runs folded */
} sigv4_header;

typedef struct sigv4_credentials {
    const char *access_key_id;
    const char *secret_access_key;
    const char *session_token; /* temporary credentials (STS); NULL or "" = none */
} sigv4_credentials;

typedef struct sigv4_request {
    const char *method; /* "GET", "POST" */
    const char *path;   /* the path as sent, without the query; NULL or "" = "/" */
    const char *query;  /* the query without '?'; NULL or "" = none. Percent-escapes are decoded
                           and every key and value re-encoded, so raw and encoded forms agree */
    const sigv4_header *headers; /* must include Host; must not include X-Amz-Date, Authorization */
    size_t n_headers;
    const void *body; /* hashed into the payload hash; NULL = empty */
    size_t body_len;
} sigv4_request;

typedef struct sigv4_params {
    const char *region;      /* "us-east-1" */
    const char *service;     /* "ssm", "sts", "ec2" */
    int64_t time_s;          /* signing time, unix seconds (UTC) */
    bool normalize_path;     /* remove "." / ".." / empty segments: every service but S3 */
    bool sign_body;          /* add a signed x-amz-content-sha256 header (S3 style) */
    bool omit_session_token; /* sign without the token, add it afterwards (IoT style) */
    int64_t expires_s;       /* presigned query only: X-Amz-Expires, 1..SIGV4_MAX_EXPIRES_S */
} sigv4_params;

/* One header the signer adds to the request (value malloc'd, name static). */
typedef struct sigv4_added_header {
    const char *name;
    char *value;
} sigv4_added_header;

/* Everything signing produced. Release with sigv4_signed_clear. */
typedef struct sigv4_signed {
    char *canonical_request;
    char *string_to_sign;
    char signature[SIGV4_HEX_LEN + 1];
    /* Header signing: the headers to add, in this order: X-Amz-Security-Token (when a token is
     * set), X-Amz-Date, x-amz-content-sha256 (sign_body), Authorization. */
    sigv4_added_header added[4];
    size_t n_added;
    /* Query signing: the parameters to append to the request's query (after '&', or after '?'
     * when it had none), already encoded: X-Amz-Algorithm, -Credential, -Date, -SignedHeaders,
     * -Expires, -Security-Token, -Signature. NULL after header signing. */
    char *query_suffix;
} sigv4_signed;

/* Signs req for the Authorization header. On error out is cleared and err says which input was
 * wrong (SBX_E_INVALID_ARGUMENT) or that memory ran out (SBX_E_RESOURCE_EXHAUSTED). */
sbx_status sigv4_sign_headers(const sigv4_request *req, const sigv4_credentials *creds,
                              const sigv4_params *params, sigv4_signed *out, sbx_error *err);
/* Signs req as a presigned URL (query signing). Same errors. */
sbx_status sigv4_sign_query(const sigv4_request *req, const sigv4_credentials *creds,
                            const sigv4_params *params, sigv4_signed *out, sbx_error *err);
/* Frees what signing allocated; out may be zeroed or NULL. */
void sigv4_signed_clear(sigv4_signed *out);

/* "YYYYMMDDTHHMMSSZ" for unix seconds. */
void sigv4_amz_date(int64_t time_s, char out[SIGV4_AMZ_DATE_LEN]);
/* Parses an X-Amz-Date back to unix seconds; false when malformed. */
bool sigv4_parse_amz_date(const char *s, int64_t *time_s);
/* Lowercase hex SHA-256 of data. */
void sigv4_sha256_hex(const void *data, size_t len, char out[SIGV4_HEX_LEN + 1]);
/* Constant-time comparison of two NUL-terminated strings of the same expected length (a
 * signature check must not leak how many leading characters matched). */
bool sigv4_equal_ct(const char *a, const char *b);

#ifdef __cplusplus
}
#endif
#endif
