/* daytona_toolbox.c - the daytona provider's data plane: each sandbox's toolbox API at
 * {toolboxProxyUrl}/{id} (reference/cloud-apis.md §2.2): commands and code through
 * POST /process/execute (stdout and stderr merged, the daemon's 408 is TIMED_OUT), package
 * installs, and files through /files. The control plane (create, attach, destroy, policy) is
 * daytona.c. This file must not read the config file or print; the API key never reaches a
 * message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/strbuf.h"
#include "providers/common/packages.h"
#include "providers/daytona/daytona_internal.h"

/* ---- toolbox: exec ------------------------------------------------------------------------- */

/* The shell line for argv or shell, with stdin piped in through base64 when given. */
static sbx_status dt_command_line(const char *const *argv, size_t argc, const char *shell,
                                  const ProtobufCBinaryData *in, char **out, sbx_error *err)
{
    if (in && in->len > DAYTONA_MAX_STDIN_BYTES)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "daytona: stdin of %zu bytes is larger than the %u bytes this "
                             "provider passes; write the data to a file with write_file",
                             in->len, (unsigned)DAYTONA_MAX_STDIN_BYTES);
    sbx_strbuf b = {0};
    if (in && in->len > 0) {
        char *b64 = sbx_http_base64_encode(in->data, in->len);
        if (b64 == NULL) {
            b.oom = true;
        } else {
            sbx_strbuf_puts(&b, "printf %s ");
            sbx_strbuf_shell_quote(&b, b64, strlen(b64));
            sbx_strbuf_puts(&b, " | base64 -d | ");
        }
        free(b64);
    }
    if (shell) {
        sbx_strbuf_puts(&b, "/bin/sh -c ");
        sbx_strbuf_shell_quote(&b, shell, strlen(shell));
    } else {
        for (size_t i = 0; i < argc; i++) {
            if (i > 0)
                sbx_strbuf_putc(&b, ' ');
            sbx_strbuf_shell_quote(&b, argv[i], strlen(argv[i]));
        }
    }
    *out = sbx_strbuf_take(&b);
    if (*out == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    return SBX_OK;
}

typedef struct dt_kv {
    const char *key, *value;
} dt_kv;

static sbx_status dt_exec(daytona_sandbox *d, const char *command, const dt_kv *env, size_t n_env,
                          const char *cwd, const sbx_exec_opts *o, sbx_result *result,
                          sbx_error *err)
{
    daytona_provider *p = d->p;
    int64_t deadline = o ? o->deadline_mono_ms : 0;
    int64_t timeout_s = DAYTONA_EXEC_MAX_S;
    if (deadline > 0) {
        int64_t left = deadline - sbx_monotonic_ms();
        if (left <= 0) {
            result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "daytona: the deadline passed before the command started");
        }
        timeout_s = (left + 999) / 1000;
    }
    json_t *b = json_object();
    json_object_set_new(b, "command", json_string(command));
    if (cwd && *cwd)
        json_object_set_new(b, "cwd", json_string(cwd));
    if (n_env > 0) {
        json_t *e = json_object();
        for (size_t i = 0; i < n_env; i++)
            json_object_set_new(e, env[i].key, json_string(env[i].value));
        json_object_set_new(b, "envs", e);
    }
    json_object_set_new(b, "timeout", json_integer(timeout_s));
    dt_call c = {0};
    snprintf(c.url, sizeof c.url, "%s/process/execute", d->toolbox);
    int64_t t0 = sbx_monotonic_us();
    sbx_status s = dt_do(p, &c, "POST", b, NULL, 0, NULL, false,
                         deadline > 0 ? deadline + DAYTONA_EXEC_GRACE_MS : 0,
                         deadline > 0 ? 0 : (DAYTONA_EXEC_MAX_S * 1000 + DAYTONA_EXEC_GRACE_MS),
                         o ? o->cancel : NULL, err);
    json_decref(b);
    result->wall_us = (uint64_t)(sbx_monotonic_us() - t0);
    json_t *j = NULL;
    if (s == SBX_OK && c.resp.status == 408) {
        /* The daemon killed the command at `timeout` (its process group). */
        result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
        s = sbx_error_set(err, SBX_E_TIMEOUT,
                          "daytona: the command in sandbox %s passed its %lld s deadline and was "
                          "killed (the toolbox returns no partial output)",
                          d->base.id, (long long)timeout_s);
    } else if (s == SBX_E_TIMEOUT) {
        result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
    } else if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300)) {
        s = sbx_http_check(p->http, &c.req, &c.resp, err);
        if (c.resp.status == 404 || c.resp.status >= 500)
            s = dt_maybe_gone(d, s, err);
    } else if (s == SBX_E_PROVISION) {
        s = dt_maybe_gone(d, s, err);
    } else if (s == SBX_OK) {
        s = sbx_http_response_json(p->http, &c.req, &c.resp, &j, err);
    }
    if (s == SBX_OK) {
        json_t *code = json_object_get(j, "exitCode");
        const char *out = json_string_value(json_object_get(j, "result"));
        if (!json_is_integer(code)) {
            s = sbx_error_set(err, SBX_E_PROVISION, "daytona: POST %s answered without an exitCode",
                              c.url);
        } else {
            int ec = (int)json_integer_value(code);
            size_t n = out ? strlen(out) : 0;
            uint64_t limit = o && o->output_limit_bytes ? o->output_limit_bytes : n;
            if (n > limit) {
                n = (size_t)limit;
                result->stdout_truncated = true;
            }
            if (n > 0) {
                sbx_append_bytes(&result->stdout, out, n);
                if (o && o->on_output)
                    o->on_output(o->on_output_arg, SBX__V1__STREAM__STREAM_STDOUT,
                                 (const uint8_t *)out, n, 0);
            }
            if (ec == -1) {
                /* The daemon could not spawn the shell. */
                static const char msg[] = "daytona: the command could not be started\n";
                sbx_append_bytes(&result->stderr, msg, sizeof msg - 1);
                ec = 127;
            }
            result->exit_code = ec;
            result->outcome =
                ec == 0 ? SBX__V1__OUTCOME__OUTCOME_OK : SBX__V1__OUTCOME__OUTCOME_NONZERO;
            sbx_result_set_data(result, "daytona.output", "merged");
        }
    }
    json_decref(j);
    dt_call_clear(&c);
    return s;
}

sbx_status dt_run_command(sbx_sandbox *sb, const Sbx__V1__RunCommand *op, const sbx_exec_opts *o,
                          sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    bool has_shell = op->shell && op->shell[0];
    if (has_shell == (op->n_argv > 0))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "daytona: run_command needs exactly one of argv or shell");
    char *line = NULL;
    sbx_status s = dt_command_line((const char *const *)op->argv, op->n_argv,
                                   has_shell ? op->shell : NULL, &op->stdin, &line, err);
    if (s != SBX_OK)
        return s;
    dt_kv *env = calloc(op->n_env ? op->n_env : 1, sizeof *env);
    if (!env) {
        free(line);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    for (size_t i = 0; i < op->n_env; i++)
        env[i] = (dt_kv){op->env[i]->key, op->env[i]->value};
    s = dt_exec(d, line, env, op->n_env, op->cwd, o, result, err);
    free(env);
    free(line);
    return s;
}

sbx_status dt_run_code(sbx_sandbox *sb, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                       sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    const char *lang = op->language && *op->language ? op->language : "python";
    const char *argv[3] = {NULL, "-c", op->code};
    if (strcmp(lang, "python") == 0 || strcmp(lang, "python3") == 0)
        argv[0] = "python3";
    else if (strcmp(lang, "bash") == 0)
        argv[0] = "bash";
    else
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "daytona: language '%s' is not offered; use python or bash", lang);
    char *line = NULL;
    sbx_status s = dt_command_line(argv, 3, NULL, &op->stdin, &line, err);
    if (s != SBX_OK)
        return s;
    dt_kv *env = calloc(op->n_env ? op->n_env : 1, sizeof *env);
    if (!env) {
        free(line);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    for (size_t i = 0; i < op->n_env; i++)
        env[i] = (dt_kv){op->env[i]->key, op->env[i]->value};
    s = dt_exec(d, line, env, op->n_env, op->cwd, o, result, err);
    free(env);
    free(line);
    return s;
}

sbx_status dt_install_packages(sbx_sandbox *sb, const Sbx__V1__InstallPackages *op,
                               const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    const char **argv = NULL;
    size_t argc = 0;
    sbx_status s = sbx_package_argv("daytona", op, &argv, &argc, err);
    if (s != SBX_OK)
        return s;
    char *line = NULL;
    s = dt_command_line(argv, argc, NULL, NULL, &line, err);
    free(argv);
    if (s == SBX_OK)
        s = dt_exec(d, line, NULL, 0, NULL, o, result, err);
    free(line);
    return s;
}

/* ---- toolbox: files ------------------------------------------------------------------------ */

static sbx_status dt_files_url(daytona_sandbox *d, dt_call *c, const char *op_path,
                               const char *path, sbx_error *err)
{
    if (!path || !*path)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "daytona: a file path is required");
    char *esc = sbx_http_url_escape(path);
    if (!esc)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    int n = snprintf(c->url, sizeof c->url, "%s%s?path=%s", d->toolbox, op_path, esc);
    free(esc);
    if (n < 0 || (size_t)n >= sizeof c->url)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "daytona: path too long: %.200s", path);
    return SBX_OK;
}

static sbx_status dt_toolbox_error(daytona_sandbox *d, dt_call *c, const char *path, sbx_error *err)
{
    long st = c->resp.status;
    sbx_status s;
    if (st == 404) {
        s = dt_maybe_gone(d, SBX_E_INVALID_ARGUMENT, err);
        if (s == SBX_E_INVALID_ARGUMENT)
            sbx_error_set(err, s, "daytona: %s: no such file or directory in sandbox %s", path,
                          d->base.id);
        return s;
    }
    if (st == 400 || st == 409)
        return sbx_http_status_error(d->p->http, &c->req, &c->resp, SBX_E_INVALID_ARGUMENT, err);
    s = sbx_http_check(d->p->http, &c->req, &c->resp, err);
    if (st >= 500)
        s = dt_maybe_gone(d, s, err);
    return s;
}

sbx_status dt_write_file(sbx_sandbox *sb, const Sbx__V1__WriteFile *op, const sbx_exec_opts *o,
                         sbx_result *result, sbx_error *err)
{
    (void)result;
    daytona_sandbox *d = (daytona_sandbox *)sb;
    if (op->content.len > SBX_HTTP_MAX_FILE_BYTES)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "daytona: %s: %zu bytes exceed the %u-byte file limit", op->path,
                             op->content.len, (unsigned)SBX_HTTP_MAX_FILE_BYTES);
    int64_t deadline = o ? o->deadline_mono_ms : 0;
    sbx_status s = SBX_OK;
    if (op->mkdirs) {
        /* POST /files/folder?path=<parent>&mode=755 creates the missing directories. */
        const char *slash = strrchr(op->path, '/');
        if (slash && slash != op->path) {
            char *parent = strndup(op->path, (size_t)(slash - op->path));
            dt_call c = {0};
            s = parent ? dt_files_url(d, &c, "/files/folder", parent, err)
                       : sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
            if (s == SBX_OK)
                strncat(c.url, "&mode=755", sizeof c.url - strlen(c.url) - 1);
            if (s == SBX_OK)
                s = dt_do(d->p, &c, "POST", NULL, NULL, 0, NULL, true, deadline, 0,
                          o ? o->cancel : NULL, err);
            if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300) &&
                c.resp.status != 409 /* exists */)
                s = dt_toolbox_error(d, &c, parent, err);
            dt_call_clear(&c);
            free(parent);
            if (s != SBX_OK)
                return s;
        }
    }
    /* multipart/form-data with one part named "file" (reference §2.2). */
    uint8_t rnd[12];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memset(rnd, 0x5a, sizeof rnd);
    char boundary[64];
    int bl = snprintf(boundary, sizeof boundary, "sbx-");
    for (size_t i = 0; i < sizeof rnd; i++)
        bl += snprintf(boundary + bl, sizeof boundary - (size_t)bl, "%02x", rnd[i]);
    const char *base = strrchr(op->path, '/');
    base = base ? base + 1 : op->path;
    char head[512];
    int hl = snprintf(head, sizeof head,
                      "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%.200s\""
                      "\r\nContent-Type: application/octet-stream\r\n\r\n",
                      boundary, strchr(base, '"') ? "file" : base);
    char tail[96];
    int tl = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
    size_t total = (size_t)hl + op->content.len + (size_t)tl;
    uint8_t *body = malloc(total);
    if (!body)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    memcpy(body, head, (size_t)hl);
    if (op->content.len)
        memcpy(body + hl, op->content.data, op->content.len);
    memcpy(body + (size_t)hl + op->content.len, tail, (size_t)tl);
    char ct[128];
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%s", boundary);
    dt_call c = {0};
    s = dt_files_url(d, &c, "/files/upload", op->path, err);
    if (s == SBX_OK)
        s = dt_do(d->p, &c, "POST", NULL, body, total, ct, true, deadline, 0, o ? o->cancel : NULL,
                  err);
    free(body);
    if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300))
        s = dt_toolbox_error(d, &c, op->path, err);
    else if (s == SBX_E_PROVISION)
        s = dt_maybe_gone(d, s, err);
    dt_call_clear(&c);
    if (s != SBX_OK)
        return s;
    uint32_t mode = op->mode ? op->mode : 0644;
    if (mode != 0644) {
        char octal[16];
        snprintf(octal, sizeof octal, "%o", (unsigned)(mode & 07777));
        const char *argv[] = {"chmod", octal, op->path};
        char *line = NULL;
        s = dt_command_line(argv, 3, NULL, NULL, &line, err);
        sbx_result *tmp = s == SBX_OK ? sbx_result_new() : NULL;
        if (s == SBX_OK && tmp)
            s = dt_exec(d, line, NULL, 0, NULL, o, tmp, err);
        if (s == SBX_OK && tmp && tmp->exit_code != 0)
            s = sbx_error_set(err, SBX_E_PROVISION, "daytona: chmod %s %s failed: %.*s", octal,
                              op->path, (int)(tmp->stdout.len > 300 ? 300 : tmp->stdout.len),
                              tmp->stdout.data ? (const char *)tmp->stdout.data : "");
        if (tmp)
            sbx_message_free(&tmp->base);
        free(line);
    }
    return s;
}

sbx_status dt_read_file(sbx_sandbox *sb, const Sbx__V1__ReadFile *op, const sbx_exec_opts *o,
                        sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    dt_call c = {0};
    sbx_status s = dt_files_url(d, &c, "/files/download", op->path, err);
    if (s == SBX_OK)
        s = dt_do(d->p, &c, "GET", NULL, NULL, 0, NULL, true, o ? o->deadline_mono_ms : 0, 0,
                  o ? o->cancel : NULL, err);
    if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300))
        s = dt_toolbox_error(d, &c, op->path, err);
    else if (s == SBX_E_PROVISION)
        s = dt_maybe_gone(d, s, err);
    if (s == SBX_OK) {
        size_t len = c.resp.body_len;
        size_t off = op->offset > len ? len : (size_t)op->offset;
        size_t n = len - off;
        if (op->max_bytes > 0 && op->max_bytes < n)
            n = (size_t)op->max_bytes;
        sbx_file *f = sbx_file_new();
        if (!f || !sbx_set_string(&f->path, op->path) ||
            !sbx_set_bytes(&f->content, c.resp.body ? c.resp.body + off : NULL, n)) {
            if (f)
                sbx_message_free(&f->base);
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
        } else {
            f->size = len;
            f->kind = SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
            sbx_result_add_file(result, f);
        }
    }
    dt_call_clear(&c);
    return s;
}

sbx_status dt_list_files(sbx_sandbox *sb, const Sbx__V1__ListFiles *op, const sbx_exec_opts *o,
                         sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    const char *dir = op->path && *op->path ? op->path : ".";
    dt_call c = {0};
    sbx_status s = dt_files_url(d, &c, "/files", dir, err);
    if (s == SBX_OK)
        s = dt_do(d->p, &c, "GET", NULL, NULL, 0, NULL, true, o ? o->deadline_mono_ms : 0, 0,
                  o ? o->cancel : NULL, err);
    json_t *j = NULL;
    if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300)) {
        s = dt_toolbox_error(d, &c, dir, err);
    } else if (s == SBX_E_PROVISION) {
        s = dt_maybe_gone(d, s, err);
    } else if (s == SBX_OK) {
        s = sbx_http_parse_json(d->p->http, c.url, c.resp.body, c.resp.body_len, &j, err);
        if (s == SBX_OK && !json_is_array(j))
            s = sbx_error_set(err, SBX_E_PROVISION,
                              "daytona: GET %s: expected a JSON array of files", c.url);
    }
    size_t i;
    json_t *e;
    json_array_foreach(s == SBX_OK ? j : NULL, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name || !*name || strchr(name, '/'))
            continue;
        char *full = NULL;
        if (asprintf(&full, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name) < 0)
            full = NULL;
        sbx_file *f = full ? sbx_file_new() : NULL;
        if (!f || !sbx_set_string(&f->path, full)) {
            free(full);
            if (f)
                sbx_message_free(&f->base);
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
            break;
        }
        free(full);
        f->kind = json_is_true(json_object_get(e, "isDir"))
                      ? SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY
                      : SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
        json_t *size = json_object_get(e, "size");
        if (json_is_integer(size) && json_integer_value(size) > 0)
            f->size = (uint64_t)json_integer_value(size);
        const char *perm = json_string_value(json_object_get(e, "permissions"));
        if (perm)
            f->mode = (uint32_t)strtoul(perm, NULL, 8) & 07777;
        sbx_result_add_file(result, f);
    }
    json_decref(j);
    dt_call_clear(&c);
    return s;
}
