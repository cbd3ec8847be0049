/* fake_interp.c - the fake sandboxes' deterministic shell and python subsets (fake_interp.h).
 * Interprets text only: it must never exec, fork or touch the host's files.
 */
#include "fakes/fake_interp.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

/* Bounds that keep a hostile or buggy test input from exhausting memory. */
#define FI_MAX_OUTPUT (64u * 1024u * 1024u) /* per program */
#define FI_MAX_WORDS 256
#define FI_MAX_DEPTH 16 /* nested sh -c / parentheses */
#define FI_MAX_SEQ 1000000
#define FI_MAX_VARS 256
#define FI_MAX_FILES 1024

static void *fi_alloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        abort();
    return p;
}
static char *fi_strndup(const char *s, size_t n)
{
    char *p = fi_alloc(n + 1);
    memcpy(p, s, n);
    return p;
}
static char *fi_strdup(const char *s)
{
    return fi_strndup(s, strlen(s));
}

/* ---- file system --------------------------------------------------------------------------- */

typedef struct fi_file {
    char *path;
    uint8_t *data;
    size_t len;
} fi_file;

struct fake_fs {
    fi_file files[FI_MAX_FILES];
    size_t n;
    char home[256]; /* relative paths resolve here, like a process's cwd */
};

fake_fs *fake_fs_new(void)
{
    fake_fs *fs = fi_alloc(sizeof(fake_fs));
    snprintf(fs->home, sizeof fs->home, "/home/user");
    return fs;
}

void fake_fs_set_home(fake_fs *fs, const char *home)
{
    snprintf(fs->home, sizeof fs->home, "%s", home);
}

/* Absolute form of path (relative to home; "." is home; trailing '/' dropped). */
static const char *fi_resolve(const fake_fs *fs, const char *path, char *buf, size_t cap)
{
    if (!fs || path[0] == '/') {
        snprintf(buf, cap, "%s", path);
    } else if (path[0] == 0 || strcmp(path, ".") == 0) {
        snprintf(buf, cap, "%s", fs->home);
    } else {
        snprintf(buf, cap, "%s/%s", fs->home, strncmp(path, "./", 2) == 0 ? path + 2 : path);
    }
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/')
        buf[--n] = 0;
    return buf;
}

void fake_fs_free(fake_fs *fs)
{
    if (!fs)
        return;
    for (size_t i = 0; i < fs->n; i++)
        free(fs->files[i].path), free(fs->files[i].data);
    free(fs);
}

static fi_file *fi_find(fake_fs *fs, const char *rel)
{
    char path[1024];
    if (fs)
        rel = fi_resolve(fs, rel, path, sizeof path);
    for (size_t i = 0; fs && i < fs->n; i++)
        if (strcmp(fs->files[i].path, rel) == 0)
            return &fs->files[i];
    return NULL;
}

void fake_fs_write(fake_fs *fs, const char *path, const void *data, size_t len, bool append)
{
    if (!fs)
        return;
    fi_file *f = fi_find(fs, path);
    if (!f) {
        if (fs->n >= FI_MAX_FILES)
            return;
        f = &fs->files[fs->n++];
        char abs[1024];
        f->path = fi_strdup(fi_resolve(fs, path, abs, sizeof abs));
        f->data = fi_alloc(1);
        f->len = 0;
    }
    if (!append)
        f->len = 0;
    uint8_t *nd = realloc(f->data, f->len + len + 1);
    if (!nd)
        abort();
    f->data = nd;
    if (len)
        memcpy(f->data + f->len, data, len);
    f->len += len;
    f->data[f->len] = 0;
}

const uint8_t *fake_fs_read(fake_fs *fs, const char *path, size_t *len)
{
    fi_file *f = fi_find(fs, path);
    if (!f)
        return NULL;
    *len = f->len;
    return f->data;
}

bool fake_fs_is_dir(fake_fs *fs, const char *rel)
{
    char abs[1024];
    const char *path = fi_resolve(fs, rel, abs, sizeof abs);
    if (fs && strcmp(path, fs->home) == 0)
        return true;
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    for (size_t i = 0; fs && i < fs->n; i++)
        if (strncmp(fs->files[i].path, path, n) == 0 &&
            (fs->files[i].path[n] == '/' || (n == 1 && path[0] == '/')))
            return true;
    return strcmp(path, "/") == 0 || strcmp(path, "/home/user") == 0 || strcmp(path, "/tmp") == 0;
}

void fake_fs_list(fake_fs *fs, const char *rel,
                  void (*fn)(void *arg, const char *name, bool is_dir, size_t size), void *arg)
{
    char abs[1024];
    const char *dir = fi_resolve(fs, rel, abs, sizeof abs);
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    char seen[FI_MAX_FILES][256];
    size_t n_seen = 0;
    for (size_t i = 0; fs && i < fs->n; i++) {
        const char *p = fs->files[i].path;
        if (strncmp(p, dir, n) != 0 || p[n] != '/')
            continue;
        const char *rest = p + n + 1;
        const char *slash = strchr(rest, '/');
        size_t len = slash ? (size_t)(slash - rest) : strlen(rest);
        if (len == 0 || len >= 256)
            continue;
        bool dup = false;
        for (size_t k = 0; k < n_seen && !dup; k++)
            dup = strlen(seen[k]) == len && strncmp(seen[k], rest, len) == 0;
        if (dup)
            continue;
        memcpy(seen[n_seen], rest, len);
        seen[n_seen][len] = 0;
        n_seen++;
        fn(arg, seen[n_seen - 1], slash != NULL, slash ? 0 : fs->files[i].len);
    }
}

/* ---- events -------------------------------------------------------------------------------- */

static size_t fi_output_total(const fake_exec *x)
{
    size_t t = 0;
    for (size_t i = 0; i < x->n_events; i++)
        t += x->events[i].len;
    return t;
}

static void fi_event(fake_exec *x, fake_event_kind kind, const char *data, size_t len, int ms)
{
    if (kind != FAKE_SLEEP && (len == 0 || fi_output_total(x) + len > FI_MAX_OUTPUT))
        return;
    /* Merge adjacent writes to one stream so streams stay compact. */
    if (kind != FAKE_SLEEP && x->n_events > 0 && x->events[x->n_events - 1].kind == kind) {
        fake_event *e = &x->events[x->n_events - 1];
        char *nd = realloc(e->data, e->len + len + 1);
        if (!nd)
            abort();
        memcpy(nd + e->len, data, len);
        e->data = nd;
        e->len += len;
        e->data[e->len] = 0;
        return;
    }
    fake_event *ne = realloc(x->events, (x->n_events + 1) * sizeof *ne);
    if (!ne)
        abort();
    x->events = ne;
    fake_event *e = &x->events[x->n_events++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->ms = ms;
    if (kind != FAKE_SLEEP) {
        e->data = fi_strndup(data, len);
        e->len = len;
    }
}

static void fi_printf(fake_exec *x, fake_event_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fi_printf(fake_exec *x, fake_event_kind k, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    fi_event(x, k, s, (size_t)n, 0);
    free(s);
}

void fake_exec_free(fake_exec *x)
{
    if (!x)
        return;
    for (size_t i = 0; i < x->n_events; i++)
        free(x->events[i].data);
    free(x->events);
    free(x->value);
    free(x->error_name);
    free(x->error_value);
    free(x->traceback);
    memset(x, 0, sizeof *x);
}

int fake_exec_sleep_ms(const fake_exec *x)
{
    int t = 0;
    for (size_t i = 0; i < x->n_events; i++)
        if (x->events[i].kind == FAKE_SLEEP)
            t += x->events[i].ms;
    return t;
}

/* ---- shell --------------------------------------------------------------------------------- */

typedef struct fi_ctx {
    fake_fs *fs;
    fake_exec *out;
    bool exited; /* `exit` ran: stop everything */
    int depth;
} fi_ctx;

static void fi_shell(fi_ctx *c, const char *line, const uint8_t *in, size_t in_len);

static int fi_parse_ms(const char *s)
{
    char *end = NULL;
    double d = strtod(s, &end);
    if (!end || end == s || d < 0 || d > 3600)
        return -1;
    return (int)(d * 1000.0 + 0.5);
}

static long fi_parse_int(const char *s, bool *ok)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    *ok = end && end != s && *end == 0;
    return v;
}

static char *fi_unescape_printf(const char *s, size_t *len)
{
    size_t n = strlen(s);
    char *o = fi_alloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            char e = s[++i];
            o[k++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == '\\' ? '\\' : e;
        } else {
            o[k++] = s[i];
        }
    }
    *len = k;
    return o;
}

static uint8_t *fi_b64_decode(const char *text, size_t n, size_t *out_len)
{
    if (n % 4 != 0)
        return NULL;
    uint8_t *out = fi_alloc(n / 4 * 3 + 1);
    int got = EVP_DecodeBlock(out, (const unsigned char *)text, (int)n);
    if (got < 0) {
        free(out);
        return NULL;
    }
    size_t len = (size_t)got;
    if (n >= 1 && text[n - 1] == '=')
        len--;
    if (n >= 2 && text[n - 2] == '=')
        len--;
    *out_len = len;
    return out;
}

static const char *fi_base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* The wrappers providers use to feed stdin (e2b): run the rest with the decoded bytes. */
static const char *fi_stdin_wrap_argv = "d=$1; shift; printf %s \"$d\" | base64 -d | \"$@\"";
static const char *fi_stdin_wrap_shell =
    "d=$1; shift; printf %s \"$d\" | base64 -d | /bin/sh -c \"$1\"";

/* Runs one simple command; returns its exit status. */
static int fi_command(fi_ctx *c, char **w, size_t n, const uint8_t *in, size_t in_len)
{
    fake_exec *x = c->out;
    if (n == 0)
        return 0;
    const char *cmd = fi_base(w[0]);
    if (strcmp(cmd, "echo") == 0) {
        size_t i = 1;
        bool nl = true;
        if (n > 1 && strcmp(w[1], "-n") == 0)
            nl = false, i = 2;
        for (; i < n; i++) {
            fi_event(x, FAKE_OUT, w[i], strlen(w[i]), 0);
            if (i + 1 < n)
                fi_event(x, FAKE_OUT, " ", 1, 0);
        }
        if (nl)
            fi_event(x, FAKE_OUT, "\n", 1, 0);
        return 0;
    }
    if (strcmp(cmd, "printf") == 0) {
        if (n < 2)
            return 1;
        size_t len;
        char *f = fi_unescape_printf(w[1], &len);
        if (strcmp(f, "%s") == 0) {
            for (size_t i = 2; i < n; i++)
                fi_event(x, FAKE_OUT, w[i], strlen(w[i]), 0);
        } else {
            fi_event(x, FAKE_OUT, f, len, 0);
        }
        free(f);
        return 0;
    }
    if (strcmp(cmd, "exit") == 0) {
        bool ok = true;
        long v = n > 1 ? fi_parse_int(w[1], &ok) : 0;
        c->exited = true;
        return ok ? (int)(v & 255) : 2;
    }
    if (strcmp(cmd, "sleep") == 0) {
        int ms = n > 1 ? fi_parse_ms(w[1]) : -1;
        if (ms < 0) {
            fi_printf(x, FAKE_ERR, "sleep: invalid time interval\n");
            return 1;
        }
        fi_event(x, FAKE_SLEEP, NULL, 0, ms);
        return 0;
    }
    if (strcmp(cmd, "true") == 0 || strcmp(cmd, ":") == 0)
        return 0;
    if (strcmp(cmd, "pkill") == 0)
        return 0; /* nothing runs in the background of a fake */
    if (strcmp(cmd, "false") == 0)
        return 1;
    if (strcmp(cmd, "pwd") == 0) {
        fi_printf(x, FAKE_OUT, "/home/user\n");
        return 0;
    }
    if (strcmp(cmd, "seq") == 0) {
        bool ok = true;
        long v = n > 1 ? fi_parse_int(w[1], &ok) : 0;
        if (!ok || v < 0 || v > FI_MAX_SEQ)
            return 1;
        for (long i = 1; i <= v; i++)
            fi_printf(x, FAKE_OUT, "%ld\n", i);
        return 0;
    }
    if (strcmp(cmd, "cat") == 0) {
        if (n == 1) {
            fi_event(x, FAKE_OUT, (const char *)in, in_len, 0);
            return 0;
        }
        int rc = 0;
        for (size_t i = 1; i < n; i++) {
            size_t len = 0;
            const uint8_t *d = fake_fs_read(c->fs, w[i], &len);
            if (!d) {
                fi_printf(x, FAKE_ERR, "cat: %s: No such file or directory\n", w[i]);
                rc = 1;
            } else {
                fi_event(x, FAKE_OUT, (const char *)d, len, 0);
            }
        }
        return rc;
    }
    if (strcmp(cmd, "base64") == 0 && n == 2 && strcmp(w[1], "-d") == 0) {
        size_t len = 0;
        char *t = fi_strndup((const char *)in, in_len);
        uint8_t *d = fi_b64_decode(t, strlen(t), &len);
        free(t);
        if (!d)
            return 1;
        fi_event(x, FAKE_OUT, (const char *)d, len, 0);
        free(d);
        return 0;
    }
    if (strcmp(cmd, "chmod") == 0) {
        if (n < 3)
            return 1;
        size_t len;
        if (!fake_fs_read(c->fs, w[2], &len)) {
            fi_printf(x, FAKE_ERR, "chmod: cannot access '%s': No such file or directory\n", w[2]);
            return 1;
        }
        return 0;
    }
    if ((strcmp(cmd, "sh") == 0 || strcmp(cmd, "bash") == 0)) {
        size_t i = 1;
        while (i < n && strcmp(w[i], "-l") == 0)
            i++;
        if (i + 1 < n && strcmp(w[i], "-c") == 0) {
            const char *script = w[i + 1];
            if ((strcmp(script, fi_stdin_wrap_argv) == 0 ||
                 strcmp(script, fi_stdin_wrap_shell) == 0) &&
                i + 3 < n) {
                size_t len = 0;
                uint8_t *d = fi_b64_decode(w[i + 3], strlen(w[i + 3]), &len);
                if (!d)
                    return 1;
                int rc;
                if (strcmp(script, fi_stdin_wrap_shell) == 0) {
                    fi_shell(c, w[i + 4 < n ? i + 4 : n - 1], d, len);
                    rc = c->out->exit_code;
                } else {
                    rc = fi_command(c, w + i + 4, n - i - 4, d, len);
                }
                free(d);
                return rc;
            }
            if (c->depth >= FI_MAX_DEPTH)
                return 2;
            c->depth++;
            fi_shell(c, script, in, in_len);
            c->depth--;
            c->exited = false; /* exit ends the inner shell only */
            return c->out->exit_code;
        }
        if (i < n) {
            fi_printf(x, FAKE_ERR, "%s: %s: No such file or directory\n", cmd, w[i]);
            return 127;
        }
        char *script = fi_strndup((const char *)(in ? in : (const uint8_t *)""), in_len);
        fi_shell(c, script, NULL, 0);
        free(script);
        return c->out->exit_code;
    }
    if (strncmp(cmd, "python", 6) == 0) {
        if (n >= 3 && strcmp(w[1], "-c") == 0) {
            fake_exec px = {0};
            fake_run_python(w[2], NULL, c->fs, &px);
            for (size_t i = 0; i < px.n_events; i++)
                fi_event(x, px.events[i].kind, px.events[i].data, px.events[i].len,
                         px.events[i].ms);
            int rc = px.exit_code;
            fake_exec_free(&px);
            return rc;
        }
        if (n >= 4 && strcmp(w[1], "-m") == 0 && strcmp(w[2], "pip") == 0) {
            fi_printf(x, FAKE_OUT, "Successfully installed");
            for (size_t i = 3; i < n; i++)
                if (w[i][0] != '-' && strcmp(w[i], "install") != 0)
                    fi_printf(x, FAKE_OUT, " %s", w[i]);
            fi_printf(x, FAKE_OUT, "\n");
            return 0;
        }
        fi_printf(x, FAKE_ERR, "python: the fake only supports -c CODE and -m pip\n");
        return 2;
    }
    fi_printf(x, FAKE_ERR, "sh: 1: %s: not found\n", w[0]);
    return 127;
}

typedef struct fi_words {
    char *w[FI_MAX_WORDS];
    size_t n;
} fi_words;

static void fi_words_clear(fi_words *ws)
{
    for (size_t i = 0; i < ws->n; i++)
        free(ws->w[i]);
    ws->n = 0;
}

/* Runs a pipeline-free command with its redirections. */
static int fi_simple(fi_ctx *c, fi_words *ws, const uint8_t *in, size_t in_len)
{
    char *argv[FI_MAX_WORDS];
    size_t argc = 0;
    const char *out_file = NULL;
    bool append = false, out_to_err = false, err_to_out = false, err_null = false;
    for (size_t i = 0; i < ws->n; i++) {
        const char *t = ws->w[i];
        if ((strcmp(t, ">") == 0 || strcmp(t, ">>") == 0 || strcmp(t, "1>") == 0) &&
            i + 1 < ws->n) {
            append = t[1] == '>';
            out_file = ws->w[++i];
        } else if (strcmp(t, ">&2") == 0 || strcmp(t, "1>&2") == 0) {
            out_to_err = true;
        } else if (strcmp(t, "2>&1") == 0) {
            err_to_out = true;
        } else if (strcmp(t, "2>/dev/null") == 0) {
            err_null = true;
        } else {
            argv[argc++] = ws->w[i];
        }
    }
    fake_exec sub = {0};
    fake_exec *saved = c->out;
    c->out = &sub;
    int rc = fi_command(c, argv, argc, in, in_len);
    c->out = saved;
    for (size_t i = 0; i < sub.n_events; i++) {
        fake_event *e = &sub.events[i];
        fake_event_kind k = e->kind;
        if (k == FAKE_OUT && out_to_err)
            k = FAKE_ERR;
        else if (k == FAKE_ERR && err_to_out)
            k = FAKE_OUT;
        if (k == FAKE_ERR && err_null)
            continue;
        if (k == FAKE_OUT && out_file) {
            if (strcmp(out_file, "/dev/null") != 0)
                fake_fs_write(c->fs, out_file, e->data, e->len, append);
            append = true;
            continue;
        }
        fi_event(c->out, k, e->data, e->len, e->ms);
    }
    if (out_file && strcmp(out_file, "/dev/null") != 0) {
        size_t len;
        if (!fake_fs_read(c->fs, out_file, &len))
            fake_fs_write(c->fs, out_file, "", 0, append);
    }
    fake_exec_free(&sub);
    return rc;
}

/* Tokenises and runs a shell line: words, quotes, ; && || | and newlines. */
static void fi_shell(fi_ctx *c, const char *line, const uint8_t *in, size_t in_len)
{
    fi_words ws = {0};
    int status = 0;
    char pending = ';'; /* operator before the current command: ';', '&', '|' (||) */
    uint8_t *pipe_in = NULL;
    size_t pipe_len = 0;
    bool piping = false;
    const char *p = line ? line : "";
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        bool end = *p == 0;
        bool op = end || *p == ';' || *p == '\n' || *p == '&' || *p == '|';
        if (op) {
            char next = ';';
            bool pipe = false;
            if (!end) {
                if (p[0] == '&' && p[1] == '&')
                    next = '&', p += 2;
                else if (p[0] == '|' && p[1] == '|')
                    next = '|', p += 2;
                else if (p[0] == '|')
                    pipe = true, p += 1;
                else
                    p += 1;
            }
            if (ws.n > 0) {
                bool run = pending == ';' || (pending == '&' && status == 0) ||
                           (pending == '|' && status != 0);
                if (run) {
                    if (pipe) {
                        fake_exec sub = {0};
                        fake_exec *saved = c->out;
                        c->out = &sub;
                        status =
                            fi_simple(c, &ws, piping ? pipe_in : in, piping ? pipe_len : in_len);
                        c->out = saved;
                        free(pipe_in);
                        pipe_in = NULL;
                        pipe_len = 0;
                        for (size_t i = 0; i < sub.n_events; i++) {
                            fake_event *e = &sub.events[i];
                            if (e->kind == FAKE_OUT) {
                                uint8_t *np = realloc(pipe_in, pipe_len + e->len + 1);
                                if (!np)
                                    abort();
                                pipe_in = np;
                                memcpy(pipe_in + pipe_len, e->data, e->len);
                                pipe_len += e->len;
                            } else {
                                fi_event(c->out, e->kind, e->data, e->len, e->ms);
                            }
                        }
                        fake_exec_free(&sub);
                        piping = true;
                    } else {
                        status =
                            fi_simple(c, &ws, piping ? pipe_in : in, piping ? pipe_len : in_len);
                        free(pipe_in);
                        pipe_in = NULL;
                        pipe_len = 0;
                        piping = false;
                    }
                }
                fi_words_clear(&ws);
                if (c->exited)
                    break;
            }
            if (!pipe)
                pending = next;
            if (end)
                break;
            continue;
        }
        /* A word, or a redirection token. */
        char buf[65536];
        size_t k = 0;
        if (*p == '>' || (p[0] >= '1' && p[0] <= '2' && p[1] == '>')) {
            const char *s = p;
            while (*p && *p != ' ' && *p != '\t' && *p != ';' && *p != '\n')
                p++;
            /* "2>&1", ">&2", ">", ">>", "2>/dev/null" are single tokens; "> f" two. */
            if (ws.n < FI_MAX_WORDS)
                ws.w[ws.n++] = fi_strndup(s, (size_t)(p - s));
            continue;
        }
        while (*p && *p != ' ' && *p != '\t' && *p != ';' && *p != '\n' && *p != '&' && *p != '|' &&
               k + 1 < sizeof buf) {
            if (*p == '\'') {
                p++;
                while (*p && *p != '\'' && k + 1 < sizeof buf)
                    buf[k++] = *p++;
                if (*p)
                    p++;
            } else if (*p == '"') {
                p++;
                while (*p && *p != '"' && k + 1 < sizeof buf) {
                    if (*p == '\\' && (p[1] == '"' || p[1] == '\\' || p[1] == '$'))
                        p++;
                    buf[k++] = *p++;
                }
                if (*p)
                    p++;
            } else if (*p == '\\' && p[1]) {
                p++;
                buf[k++] = *p++;
            } else {
                buf[k++] = *p++;
            }
        }
        if (ws.n < FI_MAX_WORDS)
            ws.w[ws.n++] = fi_strndup(buf, k);
    }
    fi_words_clear(&ws);
    free(pipe_in);
    c->out->exit_code = status;
}

void fake_run_shell(const char *line, const uint8_t *stdin_data, size_t stdin_len, fake_fs *fs,
                    fake_exec *out)
{
    memset(out, 0, sizeof *out);
    fi_ctx c = {.fs = fs, .out = out};
    fi_shell(&c, line, stdin_data, stdin_len);
}

void fake_run_argv(const char *const *argv, size_t argc, const uint8_t *stdin_data,
                   size_t stdin_len, fake_fs *fs, fake_exec *out)
{
    memset(out, 0, sizeof *out);
    fi_ctx c = {.fs = fs, .out = out};
    char **w = fi_alloc((argc + 1) * sizeof *w);
    for (size_t i = 0; i < argc; i++)
        w[i] = (char *)argv[i];
    out->exit_code = fi_command(&c, w, argc, stdin_data, stdin_len);
    free(w);
}

/* ---- python -------------------------------------------------------------------------------- */

typedef enum { PY_NONE, PY_INT, PY_FLOAT, PY_STR, PY_FUNC } py_type;

typedef struct py_val {
    py_type t;
    long long i;
    double f;
    char *s; /* PY_STR: the string; PY_FUNC: the qualified name ("print", "sys.exit") */
} py_val;

typedef struct py_var {
    char *name;
    py_val v;
} py_var;

struct fake_pyvars {
    py_var vars[FI_MAX_VARS];
    size_t n;
};

fake_pyvars *fake_pyvars_new(void)
{
    return fi_alloc(sizeof(fake_pyvars));
}

static void py_free(py_val *v)
{
    free(v->s);
    memset(v, 0, sizeof *v);
}

void fake_pyvars_free(fake_pyvars *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++)
        free(v->vars[i].name), py_free(&v->vars[i].v);
    free(v);
}

static py_val py_copy(const py_val *v)
{
    py_val c = *v;
    if (v->s)
        c.s = fi_strdup(v->s);
    return c;
}

typedef struct py {
    const char *p;
    fake_pyvars *vars;
    fake_fs *fs;
    fake_exec *out;
    bool raised; /* an exception (or SystemExit) is propagating */
    bool exited;
    int exit_code;
    char *exc_name, *exc_value;
    int depth;
} py;

static void py_raise(py *s, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void py_raise(py *s, const char *name, const char *fmt, ...)
{
    if (s->raised)
        return;
    s->raised = true;
    s->exc_name = fi_strdup(name);
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s->exc_value, fmt, ap) < 0)
        abort();
    va_end(ap);
}

static void py_ws(py *s)
{
    while (*s->p == ' ' || *s->p == '\t')
        s->p++;
}

static bool py_eat(py *s, const char *tok)
{
    py_ws(s);
    size_t n = strlen(tok);
    if (strncmp(s->p, tok, n) == 0) {
        s->p += n;
        return true;
    }
    return false;
}

static char *py_str(const py_val *v)
{
    char buf[64];
    switch (v->t) {
    case PY_NONE: return fi_strdup("None");
    case PY_INT: snprintf(buf, sizeof buf, "%lld", v->i); return fi_strdup(buf);
    case PY_FLOAT:
        snprintf(buf, sizeof buf, "%.15g", v->f);
        if (!strpbrk(buf, ".en"))
            strcat(buf, ".0");
        return fi_strdup(buf);
    case PY_STR: return fi_strdup(v->s);
    case PY_FUNC:
        snprintf(buf, sizeof buf, "<built-in function %.32s>", v->s);
        return fi_strdup(buf);
    }
    return fi_strdup("?");
}

static char *py_repr(const py_val *v)
{
    if (v->t != PY_STR)
        return py_str(v);
    size_t n = strlen(v->s);
    char *o = fi_alloc(n * 2 + 3);
    size_t k = 0;
    o[k++] = '\'';
    for (size_t i = 0; i < n; i++) {
        char ch = v->s[i];
        if (ch == '\'' || ch == '\\')
            o[k++] = '\\', o[k++] = ch;
        else if (ch == '\n')
            o[k++] = '\\', o[k++] = 'n';
        else
            o[k++] = ch;
    }
    o[k++] = '\'';
    return o;
}

static py_val py_expr(py *s);

static py_val py_call(py *s, const char *fn)
{
    py_val args[16];
    size_t n = 0;
    char *kw_file = NULL;
    char *kw_end = NULL;
    py_ws(s);
    while (!s->raised && *s->p && *s->p != ')') {
        py_ws(s);
        const char *save = s->p;
        if ((strncmp(s->p, "file", 4) == 0 || strncmp(s->p, "end", 3) == 0)) {
            bool file = s->p[0] == 'f';
            s->p += file ? 4 : 3;
            if (py_eat(s, "=") && *s->p != '=') {
                if (file) {
                    py_ws(s);
                    const char *b = s->p;
                    while (isalnum((unsigned char)*s->p) || *s->p == '.' || *s->p == '_')
                        s->p++;
                    kw_file = fi_strndup(b, (size_t)(s->p - b));
                } else {
                    py_val e = py_expr(s);
                    free(kw_end);
                    kw_end = py_str(&e);
                    py_free(&e);
                }
                py_eat(s, ",");
                continue;
            }
            s->p = save;
        }
        if (n < 16)
            args[n++] = py_expr(s);
        if (!py_eat(s, ","))
            break;
    }
    if (!py_eat(s, ")") && !s->raised)
        py_raise(s, "SyntaxError", "expected ')'");
    py_val r = {.t = PY_NONE};
    if (s->raised)
        goto out;
    if (strcmp(fn, "print") == 0) {
        fake_event_kind k = kw_file && strcmp(kw_file, "sys.stderr") == 0 ? FAKE_ERR : FAKE_OUT;
        for (size_t i = 0; i < n; i++) {
            char *t = py_str(&args[i]);
            fi_event(s->out, k, t, strlen(t), 0);
            free(t);
            if (i + 1 < n)
                fi_event(s->out, k, " ", 1, 0);
        }
        const char *end = kw_end ? kw_end : "\n";
        fi_event(s->out, k, end, strlen(end), 0);
    } else if (strcmp(fn, "sys.exit") == 0 || strcmp(fn, "exit") == 0 || strcmp(fn, "quit") == 0) {
        s->exited = true;
        s->raised = true;
        if (n == 0 || args[0].t == PY_NONE) {
            s->exit_code = 0;
        } else if (args[0].t == PY_INT) {
            s->exit_code = (int)(args[0].i & 255);
        } else {
            char *t = py_str(&args[0]);
            fi_event(s->out, FAKE_ERR, t, strlen(t), 0);
            fi_event(s->out, FAKE_ERR, "\n", 1, 0);
            free(t);
            s->exit_code = 1;
        }
    } else if (strcmp(fn, "time.sleep") == 0) {
        double sec = n > 0 ? (args[0].t == PY_INT ? (double)args[0].i : args[0].f) : 0;
        if (sec < 0 || sec > 3600)
            py_raise(s, "ValueError", "sleep length must be sane");
        else
            fi_event(s->out, FAKE_SLEEP, NULL, 0, (int)(sec * 1000 + 0.5));
    } else if (strcmp(fn, "sys.stdout.write") == 0 || strcmp(fn, "sys.stderr.write") == 0) {
        char *t = n > 0 ? py_str(&args[0]) : fi_strdup("");
        fi_event(s->out, fn[4] == 'o' ? FAKE_OUT : FAKE_ERR, t, strlen(t), 0);
        r = (py_val){.t = PY_INT, .i = (long long)strlen(t)};
        free(t);
    } else if (strcmp(fn, "len") == 0 && n == 1 && args[0].t == PY_STR) {
        r = (py_val){.t = PY_INT, .i = (long long)strlen(args[0].s)};
    } else if (strcmp(fn, "str") == 0 && n == 1) {
        r = (py_val){.t = PY_STR, .s = py_str(&args[0])};
    } else if (strcmp(fn, "int") == 0 && n == 1) {
        if (args[0].t == PY_INT)
            r = args[0], args[0].s = NULL;
        else if (args[0].t == PY_FLOAT)
            r = (py_val){.t = PY_INT, .i = (long long)args[0].f};
        else if (args[0].t == PY_STR)
            r = (py_val){.t = PY_INT, .i = atoll(args[0].s)};
    } else if (strcmp(fn, "open") == 0 && n >= 1 && args[0].t == PY_STR) {
        size_t len;
        const uint8_t *d = fake_fs_read(s->fs, args[0].s, &len);
        if (!d)
            py_raise(s, "FileNotFoundError", "[Errno 2] No such file or directory: '%s'",
                     args[0].s);
        else
            r = (py_val){.t = PY_FUNC, .s = fi_strdup(args[0].s)}; /* a "file" */
    } else if (strcmp(fn, "__import__") == 0 || strcmp(fn, "os.chdir") == 0) {
        r = (py_val){.t = PY_FUNC, .s = fi_strdup(n > 0 && args[0].t == PY_STR ? args[0].s : "")};
    } else if (strlen(fn) > 5 && strcmp(fn + strlen(fn) - 5, ".read") == 0) {
        char *path = fi_strndup(fn, strlen(fn) - 5);
        size_t len;
        const uint8_t *d = fake_fs_read(s->fs, path, &len);
        r = (py_val){.t = PY_STR, .s = fi_strndup(d ? (const char *)d : "", d ? len : 0)};
        free(path);
    } else if (strlen(fn) > 6 && strcmp(fn + strlen(fn) - 6, ".chdir") == 0) {
        /* os.chdir through __import__('os'): the fake has no cwd */
    } else {
        py_raise(s, "NameError", "name '%s' is not defined", fn);
    }
out:
    for (size_t i = 0; i < n; i++)
        py_free(&args[i]);
    free(kw_file);
    free(kw_end);
    return r;
}

static py_val py_atom(py *s)
{
    py_ws(s);
    py_val v = {.t = PY_NONE};
    if (s->depth > FI_MAX_DEPTH) {
        py_raise(s, "RecursionError", "expression too deep for the fake");
        return v;
    }
    char q = *s->p;
    if (q == '\'' || q == '"') {
        s->p++;
        char buf[65536];
        size_t k = 0;
        while (*s->p && *s->p != q && k + 1 < sizeof buf) {
            if (*s->p == '\\' && s->p[1]) {
                s->p++;
                char e = *s->p++;
                buf[k++] = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            } else {
                buf[k++] = *s->p++;
            }
        }
        if (*s->p != q) {
            py_raise(s, "SyntaxError", "unterminated string literal");
            return v;
        }
        s->p++;
        v.t = PY_STR;
        v.s = fi_strndup(buf, k);
    } else if (isdigit((unsigned char)q)) {
        char *end = NULL;
        double d = strtod(s->p, &end);
        bool is_float = false;
        for (const char *c = s->p; c < end; c++)
            is_float |= *c == '.' || *c == 'e';
        if (is_float)
            v = (py_val){.t = PY_FLOAT, .f = d};
        else
            v = (py_val){.t = PY_INT, .i = strtoll(s->p, NULL, 10)};
        s->p = end;
    } else if (q == '(') {
        s->p++;
        s->depth++;
        v = py_expr(s);
        s->depth--;
        if (!py_eat(s, ")"))
            py_raise(s, "SyntaxError", "expected ')'");
    } else if (isalpha((unsigned char)q) || q == '_') {
        const char *b = s->p;
        while (isalnum((unsigned char)*s->p) || *s->p == '_' || *s->p == '.')
            s->p++;
        char *name = fi_strndup(b, (size_t)(s->p - b));
        if (py_eat(s, "(")) {
            s->depth++;
            v = py_call(s, name);
            s->depth--;
            /* method on a call result: __import__('os').chdir(...), open(p).read() */
            if (*s->p == '.' && v.t == PY_FUNC) {
                s->p++;
                const char *mb = s->p;
                while (isalnum((unsigned char)*s->p) || *s->p == '_')
                    s->p++;
                char *qn = NULL;
                if (asprintf(&qn, "%s.%.*s", v.s, (int)(s->p - mb), mb) < 0)
                    abort();
                py_free(&v);
                if (py_eat(s, "("))
                    v = py_call(s, qn);
                free(qn);
            }
        } else if (strcmp(name, "None") == 0) {
            v.t = PY_NONE;
        } else if (strcmp(name, "True") == 0 || strcmp(name, "False") == 0) {
            v = (py_val){.t = PY_INT, .i = name[0] == 'T'};
        } else {
            bool found = false;
            for (size_t i = 0; s->vars && i < s->vars->n; i++)
                if (strcmp(s->vars->vars[i].name, name) == 0) {
                    v = py_copy(&s->vars->vars[i].v);
                    found = true;
                }
            if (!found)
                py_raise(s, "NameError", "name '%s' is not defined", name);
        }
        free(name);
    } else {
        py_raise(s, "SyntaxError", "invalid syntax");
    }
    return v;
}

static py_val py_unary(py *s)
{
    if (py_eat(s, "-")) {
        py_val v = py_unary(s);
        if (v.t == PY_INT)
            v.i = -v.i;
        else if (v.t == PY_FLOAT)
            v.f = -v.f;
        else
            py_raise(s, "TypeError", "bad operand type for unary -");
        return v;
    }
    return py_atom(s);
}

static double py_num(const py_val *v)
{
    return v->t == PY_FLOAT ? v->f : (double)v->i;
}

static py_val py_binop(py *s, char op, py_val a, py_val b)
{
    py_val r = {.t = PY_NONE};
    if (s->raised)
        goto out;
    bool num = (a.t == PY_INT || a.t == PY_FLOAT) && (b.t == PY_INT || b.t == PY_FLOAT);
    if (op == '+' && a.t == PY_STR && b.t == PY_STR) {
        size_t la = strlen(a.s), lb = strlen(b.s);
        if (la + lb > FI_MAX_OUTPUT) {
            py_raise(s, "MemoryError", "string too large for the fake");
            goto out;
        }
        r.t = PY_STR;
        r.s = fi_alloc(la + lb + 1);
        memcpy(r.s, a.s, la);
        memcpy(r.s + la, b.s, lb);
    } else if (op == '*' &&
               ((a.t == PY_STR && b.t == PY_INT) || (a.t == PY_INT && b.t == PY_STR))) {
        const char *str = a.t == PY_STR ? a.s : b.s;
        long long times = a.t == PY_INT ? a.i : b.i;
        size_t l = strlen(str);
        if (times < 0)
            times = 0;
        if ((unsigned long long)times * l > FI_MAX_OUTPUT) {
            py_raise(s, "MemoryError", "string too large for the fake");
            goto out;
        }
        r.t = PY_STR;
        r.s = fi_alloc((size_t)times * l + 1);
        for (long long i = 0; i < times; i++)
            memcpy(r.s + (size_t)i * l, str, l);
    } else if (num) {
        bool f = a.t == PY_FLOAT || b.t == PY_FLOAT || op == '/';
        if ((op == '/' || op == '%' || op == 'd') && py_num(&b) == 0) {
            py_raise(s, "ZeroDivisionError", "division by zero");
            goto out;
        }
        if (f && op != 'd' && op != '%') {
            double x = py_num(&a), y = py_num(&b);
            r.t = PY_FLOAT;
            r.f = op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : x / y;
        } else if (op == 'd' || op == '%') {
            long long x = (long long)py_num(&a), y = (long long)py_num(&b);
            r.t = PY_INT;
            r.i = op == 'd' ? x / y : x % y;
        } else {
            r.t = PY_INT;
            r.i = op == '+' ? a.i + b.i : op == '-' ? a.i - b.i : a.i * b.i;
        }
    } else {
        py_raise(s, "TypeError", "unsupported operand type(s) for %c", op == 'd' ? '/' : op);
    }
out:
    py_free(&a);
    py_free(&b);
    return r;
}

static py_val py_term(py *s)
{
    py_val v = py_unary(s);
    for (;;) {
        if (s->raised)
            return v;
        char op;
        if (py_eat(s, "**")) {
            py_raise(s, "SyntaxError", "** is not supported by the fake");
            return v;
        }
        if (py_eat(s, "//"))
            op = 'd';
        else if (py_eat(s, "*"))
            op = '*';
        else if (py_eat(s, "/"))
            op = '/';
        else if (py_eat(s, "%"))
            op = '%';
        else
            return v;
        v = py_binop(s, op, v, py_unary(s));
    }
}

static py_val py_expr(py *s)
{
    py_val v = py_term(s);
    for (;;) {
        if (s->raised)
            return v;
        char op;
        if (py_eat(s, "+"))
            op = '+';
        else if (py_eat(s, "-"))
            op = '-';
        else
            return v;
        v = py_binop(s, op, v, py_term(s));
    }
}

static void py_assign(py *s, const char *name, py_val v)
{
    fake_pyvars *vars = s->vars;
    for (size_t i = 0; i < vars->n; i++)
        if (strcmp(vars->vars[i].name, name) == 0) {
            py_free(&vars->vars[i].v);
            vars->vars[i].v = v;
            return;
        }
    if (vars->n >= FI_MAX_VARS) {
        py_raise(s, "MemoryError", "too many variables for the fake");
        py_free(&v);
        return;
    }
    vars->vars[vars->n].name = fi_strdup(name);
    vars->vars[vars->n].v = v;
    vars->n++;
}

/* Splits source into statements at newlines and ';' outside strings and parentheses. */
static size_t py_split(const char *code, char ***out)
{
    size_t cap = 16, n = 0;
    char **v = fi_alloc(cap * sizeof *v);
    const char *b = code;
    int paren = 0;
    char q = 0;
    for (const char *p = code;; p++) {
        if (q) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == q)
                q = 0;
            else if (!*p)
                q = 0;
        } else if (*p == '\'' || *p == '"') {
            q = *p;
        } else if (*p == '(') {
            paren++;
        } else if (*p == ')') {
            paren--;
        } else if (*p == '#') {
            /* comment to end of line */
            const char *e = strchr(p, '\n');
            if (n == cap) {
                char **nv = realloc(v, (cap *= 2) * sizeof *v);
                if (!nv)
                    abort();
                v = nv;
            }
            v[n++] = fi_strndup(b, (size_t)(p - b));
            if (!e)
                break;
            p = e;
            b = e + 1;
            continue;
        }
        if (!*p || (!q && paren <= 0 && (*p == '\n' || *p == ';'))) {
            if (n == cap) {
                char **nv = realloc(v, (cap *= 2) * sizeof *v);
                if (!nv)
                    abort();
                v = nv;
            }
            v[n++] = fi_strndup(b, (size_t)(p - b));
            if (!*p)
                break;
            b = p + 1;
        }
    }
    *out = v;
    return n;
}

void fake_run_python(const char *code, fake_pyvars *vars, fake_fs *fs, fake_exec *out)
{
    memset(out, 0, sizeof *out);
    fake_pyvars *own = vars ? NULL : fake_pyvars_new();
    py s = {.vars = vars ? vars : own, .fs = fs, .out = out};
    char **stmts = NULL;
    size_t n = py_split(code ? code : "", &stmts);
    size_t last = n;
    for (size_t i = n; i-- > 0;) {
        const char *t = stmts[i];
        while (*t == ' ' || *t == '\t' || *t == '\r')
            t++;
        if (*t) {
            last = i;
            break;
        }
    }
    size_t lineno = 0;
    for (size_t i = 0; i < n && !s.raised; i++) {
        lineno = i + 1;
        s.p = stmts[i];
        if (*s.p == ' ' || *s.p == '\t') {
            py_ws(&s);
            if (*s.p && *s.p != '\r') {
                py_raise(&s, "IndentationError", "unexpected indent");
                break;
            }
        }
        py_ws(&s);
        if (!*s.p || *s.p == '\r')
            continue;
        if (strncmp(s.p, "import ", 7) == 0 || strncmp(s.p, "from ", 5) == 0 ||
            strcmp(s.p, "pass") == 0)
            continue;
        if (strncmp(s.p, "raise", 5) == 0 && (s.p[5] == ' ' || s.p[5] == 0)) {
            s.p += 5;
            py_ws(&s);
            const char *b = s.p;
            while (isalnum((unsigned char)*s.p) || *s.p == '_')
                s.p++;
            char *name = fi_strndup(b, (size_t)(s.p - b));
            char *msg = fi_strdup("");
            long long code_v = 1;
            bool has_code = false;
            if (py_eat(&s, "(")) {
                py_ws(&s);
                if (*s.p != ')') {
                    py_val a = py_expr(&s);
                    if (a.t == PY_INT)
                        code_v = a.i, has_code = true;
                    free(msg);
                    msg = py_str(&a);
                    py_free(&a);
                }
                py_eat(&s, ")");
            }
            if (!s.raised) {
                if (strcmp(name, "SystemExit") == 0) {
                    s.raised = s.exited = true;
                    s.exit_code = has_code ? (int)(code_v & 255) : (msg[0] ? 1 : 0);
                } else {
                    py_raise(&s, name[0] ? name : "RuntimeError", "%s", msg);
                }
            }
            free(name);
            free(msg);
            continue;
        }
        /* assignment: NAME = expr / NAME += expr */
        const char *b = s.p;
        while (isalnum((unsigned char)*s.p) || *s.p == '_')
            s.p++;
        size_t nl = (size_t)(s.p - b);
        const char *after = s.p;
        py_ws(&s);
        bool plus = strncmp(s.p, "+=", 2) == 0;
        if (nl > 0 && !isdigit((unsigned char)*b) && ((s.p[0] == '=' && s.p[1] != '=') || plus)) {
            s.p += plus ? 2 : 1;
            char *name = fi_strndup(b, nl);
            py_val v = py_expr(&s);
            if (plus && !s.raised) {
                py_val cur = {.t = PY_NONE};
                bool found = false;
                for (size_t k = 0; k < s.vars->n; k++)
                    if (strcmp(s.vars->vars[k].name, name) == 0)
                        cur = py_copy(&s.vars->vars[k].v), found = true;
                if (!found)
                    py_raise(&s, "NameError", "name '%s' is not defined", name);
                v = py_binop(&s, '+', cur, v);
            }
            py_ws(&s);
            if (!s.raised && *s.p && *s.p != '\r')
                py_raise(&s, "SyntaxError", "invalid syntax");
            if (!s.raised)
                py_assign(&s, name, v);
            else
                py_free(&v);
            free(name);
            continue;
        }
        s.p = b;
        (void)after;
        if (strncmp(s.p, "if ", 3) == 0 || strncmp(s.p, "for ", 4) == 0 ||
            strncmp(s.p, "while ", 6) == 0 || strncmp(s.p, "def ", 4) == 0 ||
            strncmp(s.p, "class ", 6) == 0 || strncmp(s.p, "try", 3) == 0) {
            py_raise(&s, "SyntaxError", "compound statements are not supported by the fake");
            break;
        }
        py_val v = py_expr(&s);
        py_ws(&s);
        if (!s.raised && *s.p && *s.p != '\r')
            py_raise(&s, "SyntaxError", "invalid syntax");
        if (!s.raised && i == last && v.t != PY_NONE) {
            free(out->value);
            out->value = py_repr(&v);
        }
        py_free(&v);
    }
    if (s.raised && !s.exited) {
        if (asprintf(&out->traceback,
                     "Traceback (most recent call last):\n  File \"<string>\", line %zu, in "
                     "<module>\n%s: %s\n",
                     lineno, s.exc_name, s.exc_value) < 0)
            abort();
        /* A script prints its traceback; a kernel (vars given) reports it as an error. */
        if (!vars)
            fi_event(out, FAKE_ERR, out->traceback, strlen(out->traceback), 0);
        out->error_name = s.exc_name;
        out->error_value = s.exc_value;
        s.exc_name = s.exc_value = NULL;
        out->exit_code = 1;
    } else if (s.exited) {
        out->exit_code = s.exit_code;
        if (vars) {
            /* A kernel does not exit: IPython reports SystemExit as an error. */
            out->error_name = fi_strdup("SystemExit");
            if (asprintf(&out->error_value, "%d", s.exit_code) < 0)
                abort();
            out->traceback =
                fi_strdup("An exception has occurred, use %tb to see the full traceback.\n");
        }
    }
    free(s.exc_name);
    free(s.exc_value);
    for (size_t i = 0; i < n; i++)
        free(stmts[i]);
    free(stmts);
    fake_pyvars_free(own);
}
