/* creds.h - AWS credentials for the ec2_ssm provider: the standard environment variables
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; the names are configurable) or a
 * profile of the shared credentials file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials,
 * profile from AWS_PROFILE or "default"), read with a bounded INI parser.
 *
 * This file must never put a secret in an error message: errors name the variable, the file,
 * the line and the key, never a value. Secrets are wiped (OPENSSL_cleanse) when released.
 * Private to providers/ec2_ssm and its tests.
 */
#ifndef SBX_EC2_SSM_CREDS_H
#define SBX_EC2_SSM_CREDS_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The shared credentials file is a few lines per profile; 1 MiB is far beyond any real one and
 * bounds what a corrupted or hostile file can make us read. */
#define AWS_CREDS_MAX_FILE (1u << 20)
/* Longest line considered; longer lines are refused (a session token is ~1 KB). */
#define AWS_CREDS_MAX_LINE 8192

typedef struct aws_creds {
    char *access_key_id;
    char *secret_access_key;
    char *session_token;    /* NULL for long-term keys */
    int64_t expires_unix_s; /* 0 = does not expire (long-term or unknown) */
} aws_creds;

/* Wipes and frees the fields; c may be NULL. */
void aws_creds_clear(aws_creds *c);
/* Deep copy into *out (cleared first). SBX_E_RESOURCE_EXHAUSTED on ENOMEM. */
sbx_status aws_creds_copy(const aws_creds *in, aws_creds *out, sbx_error *err);

typedef struct aws_creds_source {
    const char *access_key_id_env;     /* NULL = "AWS_ACCESS_KEY_ID" */
    const char *secret_access_key_env; /* NULL = "AWS_SECRET_ACCESS_KEY" */
    const char *session_token_env;     /* NULL = "AWS_SESSION_TOKEN" */
    const char *credentials_file;      /* NULL = $AWS_SHARED_CREDENTIALS_FILE or
                                          $HOME/.aws/credentials */
    const char *profile;               /* NULL = $AWS_PROFILE or "default" */
} aws_creds_source;

/* Loads credentials: the environment variables when the access key variable is set, else the
 * shared credentials file's profile. origin (may be NULL) receives where they came from
 * ("environment AWS_ACCESS_KEY_ID", "/root/.aws/credentials [default]") for messages.
 * SBX_E_CONFIG when none are found or they are incomplete, naming what to set. */
sbx_status aws_creds_load(const aws_creds_source *src, aws_creds *out, char *origin,
                          size_t origin_size, sbx_error *err);

/* Parses the text of a shared credentials file (exposed for tests). filename is for messages. */
sbx_status aws_creds_parse_file(const char *text, size_t len, const char *profile,
                                const char *filename, aws_creds *out, sbx_error *err);

#ifdef __cplusplus
}
#endif
#endif
