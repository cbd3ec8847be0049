/* creds.c - AWS credentials from the environment or the shared credentials file (see creds.h).
 * The file format is the AWS CLI's INI dialect: "[profile]" section headers, "key = value"
 * lines, '#' and ';' comment lines (AWS CLI "Configuration and credential file settings").
 */
#include "providers/ec2_ssm/creds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

static void wipe_free(char *s)
{
    if (s != NULL) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

void aws_creds_clear(aws_creds *c)
{
    if (c == NULL)
        return;
    wipe_free(c->access_key_id);
    wipe_free(c->secret_access_key);
    wipe_free(c->session_token);
    c->access_key_id = c->secret_access_key = c->session_token = NULL;
    c->expires_unix_s = 0;
}

static char *dup_or_null(const char *s, bool *oom)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *oom = true;
    return d;
}

sbx_status aws_creds_copy(const aws_creds *in, aws_creds *out, sbx_error *err)
{
    aws_creds_clear(out);
    bool oom = false;
    out->access_key_id = dup_or_null(in->access_key_id, &oom);
    out->secret_access_key = dup_or_null(in->secret_access_key, &oom);
    out->session_token = dup_or_null(in->session_token, &oom);
    out->expires_unix_s = in->expires_unix_s;
    if (oom) {
        aws_creds_clear(out);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    return SBX_OK;
}

static const char *nonempty_env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && ((*s)[0] == ' ' || (*s)[0] == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r'))
        (*n)--;
}

static bool key_is(const char *k, size_t kn, const char *want)
{
    return kn == strlen(want) && strncasecmp(k, want, kn) == 0;
}

sbx_status aws_creds_parse_file(const char *text, size_t len, const char *profile,
                                const char *filename, aws_creds *out, sbx_error *err)
{
    aws_creds_clear(out);
    if (len > AWS_CREDS_MAX_FILE)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: credentials file %s is larger than %u bytes; it is not a "
                             "shared credentials file",
                             filename, AWS_CREDS_MAX_FILE);
    bool in_profile = false, found = false, oom = false;
    size_t lineno = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
        const char *line = p;
        p = nl != NULL ? nl + 1 : end;
        lineno++;
        if (n > AWS_CREDS_MAX_LINE) {
            aws_creds_clear(out);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "ec2_ssm: credentials file %s line %zu is longer than %d bytes",
                                 filename, lineno, AWS_CREDS_MAX_LINE);
        }
        if (memchr(line, '\0', n) != NULL) {
            aws_creds_clear(out);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "ec2_ssm: credentials file %s line %zu holds a NUL byte", filename,
                                 lineno);
        }
        trim(&line, &n);
        if (n == 0 || line[0] == '#' || line[0] == ';')
            continue;
        if (line[0] == '[') {
            if (line[n - 1] != ']') {
                aws_creds_clear(out);
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "ec2_ssm: credentials file %s line %zu: a section header "
                                     "must look like [profile-name]",
                                     filename, lineno);
            }
            const char *name = line + 1;
            size_t nn = n - 2;
            trim(&name, &nn);
            in_profile = nn == strlen(profile) && strncmp(name, profile, nn) == 0;
            if (in_profile)
                found = true;
            continue;
        }
        const char *eq = memchr(line, '=', n);
        if (eq == NULL) {
            aws_creds_clear(out);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "ec2_ssm: credentials file %s line %zu is neither [profile] nor "
                                 "key = value",
                                 filename, lineno);
        }
        if (!in_profile)
            continue;
        const char *k = line;
        size_t kn = (size_t)(eq - line);
        const char *v = eq + 1;
        size_t vn = n - kn - 1;
        trim(&k, &kn);
        trim(&v, &vn);
        char **slot = NULL;
        if (key_is(k, kn, "aws_access_key_id"))
            slot = &out->access_key_id;
        else if (key_is(k, kn, "aws_secret_access_key"))
            slot = &out->secret_access_key;
        else if (key_is(k, kn, "aws_session_token") || key_is(k, kn, "aws_security_token"))
            slot = &out->session_token;
        if (slot == NULL)
            continue; /* region, output, role_arn...: not ours here */
        wipe_free(*slot);
        *slot = strndup(v, vn);
        if (*slot == NULL)
            oom = true;
    }
    if (oom) {
        aws_creds_clear(out);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    if (!found) {
        aws_creds_clear(out);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: profile [%.128s] is not in credentials file %s; add it or "
                             "set AWS_PROFILE to an existing profile",
                             profile, filename);
    }
    if (out->access_key_id == NULL || out->access_key_id[0] == '\0' ||
        out->secret_access_key == NULL || out->secret_access_key[0] == '\0') {
        aws_creds_clear(out);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: profile [%.128s] in %s lacks aws_access_key_id or "
                             "aws_secret_access_key",
                             profile, filename);
    }
    if (out->session_token != NULL && out->session_token[0] == '\0') {
        free(out->session_token);
        out->session_token = NULL;
    }
    return SBX_OK;
}

/* Reads at most AWS_CREDS_MAX_FILE + 1 bytes of a regular file. ENOENT -> *missing. */
static sbx_status read_file_bounded(const char *path, char **text, size_t *len, bool *missing,
                                    sbx_error *err)
{
    *text = NULL;
    *len = 0;
    *missing = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT) {
            *missing = true;
            return SBX_OK;
        }
        return sbx_error_set(err, SBX_E_CONFIG, "ec2_ssm: cannot open credentials file %s: %s",
                             path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: credentials file %s is not a regular file", path);
    }
    char *buf = malloc(AWS_CREDS_MAX_FILE + 2);
    if (buf == NULL) {
        close(fd);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    size_t n = 0;
    while (n <= AWS_CREDS_MAX_FILE) {
        ssize_t r = read(fd, buf + n, AWS_CREDS_MAX_FILE + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return SBX_OK;
}

sbx_status aws_creds_load(const aws_creds_source *src, aws_creds *out, char *origin,
                          size_t origin_size, sbx_error *err)
{
    aws_creds_clear(out);
    const char *akid_env = src->access_key_id_env ? src->access_key_id_env : "AWS_ACCESS_KEY_ID";
    const char *secret_env =
        src->secret_access_key_env ? src->secret_access_key_env : "AWS_SECRET_ACCESS_KEY";
    const char *token_env = src->session_token_env ? src->session_token_env : "AWS_SESSION_TOKEN";

    const char *akid = nonempty_env(akid_env);
    if (akid != NULL) {
        const char *secret = nonempty_env(secret_env);
        if (secret == NULL)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "ec2_ssm: %s is set but %s is not; set both (or neither, to "
                                 "use the shared credentials file)",
                                 akid_env, secret_env);
        aws_creds in = {(char *)akid, (char *)secret, (char *)nonempty_env(token_env), 0};
        if (origin != NULL)
            snprintf(origin, origin_size, "environment %s", akid_env);
        return aws_creds_copy(&in, out, err);
    }

    char path[4096];
    const char *file = src->credentials_file;
    if (file == NULL)
        file = nonempty_env("AWS_SHARED_CREDENTIALS_FILE");
    if (file == NULL) {
        const char *home = nonempty_env("HOME");
        if (home == NULL)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "ec2_ssm: no AWS credentials: %s is not set and HOME is unset, "
                                 "so there is no ~/.aws/credentials; set %s and %s",
                                 akid_env, akid_env, secret_env);
        snprintf(path, sizeof(path), "%s/.aws/credentials", home);
        file = path;
    }
    const char *profile = src->profile;
    if (profile == NULL)
        profile = nonempty_env("AWS_PROFILE");
    if (profile == NULL)
        profile = "default";

    char *text = NULL;
    size_t len = 0;
    bool missing = false;
    sbx_status st = read_file_bounded(file, &text, &len, &missing, err);
    if (st != SBX_OK)
        return st;
    if (missing)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: no AWS credentials: %s is not set and %s does not exist; "
                             "set %s and %s, or write profile [%s] to that file",
                             akid_env, file, akid_env, secret_env, profile);
    st = aws_creds_parse_file(text, len, profile, file, out, err);
    OPENSSL_cleanse(text, len);
    free(text);
    if (st == SBX_OK && origin != NULL)
        snprintf(origin, origin_size, "%s [%s]", file, profile);
    return st;
}
