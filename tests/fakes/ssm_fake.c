/* ssm_fake.c - fake AWS SSM (JSON 1.1) + STS (query/XML) endpoints that verify SigV4 and run
 * commands through a tiny deterministic interpreter (see ssm_fake.h). It never executes a
 * program on the host: every "command" is interpreted here, word by word.
 *
 * Behaviour follows cloud-apis.md §3.1/§3.3 (from botocore's ssm/sts models and AWS's API
 * references). Where AWS documents nothing precise (ResponseCode of a cancelled or timed-out
 * command), the fake answers -1, the documented "not finished / no exit code" value.
 */
#include "fakes/ssm_fake.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "providers/ec2_ssm/sigv4.h"
#include "sbx/contract.h"

/* SSM's documented output limits (GetCommandInvocation). */
#define FAKE_SSM_STDOUT_CHARS 24000
#define FAKE_SSM_STDERR_CHARS 8000
/* AWS refuses a signature whose X-Amz-Date is more than 5 minutes off the server clock. */
#define FAKE_SSM_MAX_SKEW_S 300
/* Bounds of the fake's own state: commands and instances a test creates, issued keys. */
#define FAKE_SSM_MAX_COMMANDS 512
#define FAKE_SSM_MAX_INSTANCES 32
#define FAKE_SSM_MAX_ISSUED 256
#define FAKE_SSM_MAX_DENIED 16
/* Interpreter bounds: nesting of sh -c / sudo, variables, output, words per statement. */
#define INTERP_MAX_DEPTH 6
#define INTERP_MAX_ENV 64
#define INTERP_MAX_OUTPUT (8u << 20)
#define INTERP_MAX_WORDS 256

/* ---- a tiny string buffer ----------------------------------------------------------------- */

typedef struct tbuf {
    char *p;
    size_t len, cap;
} tbuf;

static void tb_put(tbuf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            abort(); /* test code: out of memory is fatal */
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
static void tb_puts(tbuf *b, const char *s)
{
    tb_put(b, s, strlen(s));
}
static char *tb_take(tbuf *b)
{
    char *p = b->p != NULL ? b->p : strdup("");
    memset(b, 0, sizeof(*b));
    return p;
}

/* ---- the interpreter ---------------------------------------------------------------------- */

typedef struct out_chunk {
    double at;  /* seconds since the command started */
    int stream; /* 1 stdout, 2 stderr */
    char *text;
    size_t len;
} out_chunk;

typedef struct interp_out {
    out_chunk *chunks;
    size_t n, cap;
    size_t total;
    double clock; /* the command's own clock, advanced by sleep */
} interp_out;

/* The instance's file system, in memory: absolute normalised path -> node. "/" always exists. */
typedef struct fnode {
    char *path;
    bool dir;
    unsigned mode;
    uint8_t *data;
    size_t len;
} fnode;

typedef struct fake_fs {
    fnode *nodes;
    size_t n, cap;
} fake_fs;

typedef struct interp {
    interp_out *out;
    tbuf *capture; /* non-NULL: stdout goes here (pipe stage or redirection) */
    char user[64];
    char *env_k[INTERP_MAX_ENV], *env_v[INTERP_MAX_ENV];
    size_t n_env;
    char cwd[1024];
    const char *stdin_data; /* bytes on standard input (may hold NULs) */
    size_t stdin_len;
    fake_fs *fs;
    bool errexit; /* set -e */
    int depth;
    bool exited;
    int status;
} interp;

/* ---- the in-memory file system -------------------------------------------------------------- */

static void fs_free(fake_fs *fs)
{
    for (size_t i = 0; i < fs->n; i++) {
        free(fs->nodes[i].path);
        free(fs->nodes[i].data);
    }
    free(fs->nodes);
    memset(fs, 0, sizeof(*fs));
}

/* Absolute, normalised ("." and ".." and "//" removed) path of p seen from cwd; malloc'd. */
static char *fs_resolve(const char *cwd, const char *p)
{
    tbuf in = {0};
    if (p[0] != '/') {
        tb_puts(&in, cwd);
        tb_puts(&in, "/");
    }
    tb_puts(&in, p);
    char *segs[512];
    size_t n = 0;
    char *save = NULL;
    for (char *t = strtok_r(in.p, "/", &save); t != NULL; t = strtok_r(NULL, "/", &save)) {
        if (strcmp(t, ".") == 0)
            continue;
        if (strcmp(t, "..") == 0) {
            if (n > 0)
                n--;
            continue;
        }
        if (n < 512)
            segs[n++] = t;
    }
    tbuf out = {0};
    for (size_t i = 0; i < n; i++) {
        tb_puts(&out, "/");
        tb_puts(&out, segs[i]);
    }
    if (n == 0)
        tb_puts(&out, "/");
    free(in.p);
    return tb_take(&out);
}

static fnode *fs_get(fake_fs *fs, const char *abs)
{
    static fnode root = {.path = "/", .dir = true, .mode = 0755};
    if (strcmp(abs, "/") == 0)
        return &root;
    for (size_t i = 0; i < fs->n; i++)
        if (strcmp(fs->nodes[i].path, abs) == 0)
            return &fs->nodes[i];
    return NULL;
}

static char *fs_parent(const char *abs)
{
    const char *slash = strrchr(abs, '/');
    if (slash == NULL || slash == abs)
        return strdup("/");
    return strndup(abs, (size_t)(slash - abs));
}

static fnode *fs_add(fake_fs *fs, const char *abs, bool dir, unsigned mode)
{
    if (fs->n == fs->cap) {
        fs->cap = fs->cap ? fs->cap * 2 : 16;
        fs->nodes = realloc(fs->nodes, fs->cap * sizeof(fnode));
        if (fs->nodes == NULL)
            abort();
    }
    fnode *nd = &fs->nodes[fs->n++];
    memset(nd, 0, sizeof(*nd));
    nd->path = strdup(abs);
    nd->dir = dir;
    nd->mode = mode;
    return nd;
}

static void fs_remove(fake_fs *fs, const char *abs)
{
    for (size_t i = 0; i < fs->n; i++)
        if (strcmp(fs->nodes[i].path, abs) == 0) {
            free(fs->nodes[i].path);
            free(fs->nodes[i].data);
            fs->nodes[i] = fs->nodes[--fs->n];
            return;
        }
}

static bool parent_is_dir(fake_fs *fs, const char *abs)
{
    char *parent = fs_parent(abs);
    fnode *p = fs_get(fs, parent);
    free(parent);
    return p != NULL && p->dir;
}

static void errf(interp *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes a file (creating it 0644 like a umask-022 shell); false with a message on failure. */
static bool fs_write(interp *in, const char *name, const char *data, size_t len, bool append)
{
    char *abs = fs_resolve(in->cwd, name);
    fnode *nd = fs_get(in->fs, abs);
    bool ok = true;
    if (nd != NULL && nd->dir) {
        errf(in, "sh: 1: cannot create %s: Is a directory\n", name);
        ok = false;
    } else if (nd == NULL && !parent_is_dir(in->fs, abs)) {
        errf(in, "sh: 1: cannot create %s: Directory nonexistent\n", name);
        ok = false;
    } else {
        if (nd == NULL)
            nd = fs_add(in->fs, abs, false, 0644);
        size_t base = append ? nd->len : 0;
        uint8_t *d = realloc(nd->data, base + len + 1);
        if (d == NULL)
            abort();
        if (len > 0)
            memcpy(d + base, data, len);
        nd->data = d;
        nd->len = base + len;
    }
    free(abs);
    return ok;
}

static void emit(interp *in, int stream, const char *s, size_t n)
{
    if (n == 0)
        return;
    if (stream == 1 && in->capture != NULL) {
        tb_put(in->capture, s, n);
        return;
    }
    interp_out *o = in->out;
    if (o->total + n > INTERP_MAX_OUTPUT)
        return;
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 16;
        o->chunks = realloc(o->chunks, o->cap * sizeof(out_chunk));
        if (o->chunks == NULL)
            abort();
    }
    out_chunk *c = &o->chunks[o->n++];
    c->at = o->clock;
    c->stream = stream;
    c->text = malloc(n + 1);
    if (c->text == NULL)
        abort();
    memcpy(c->text, s, n);
    c->text[n] = '\0';
    c->len = n;
    o->total += n;
}

static void emits(interp *in, int stream, const char *s)
{
    emit(in, stream, s, strlen(s));
}

static void errf(interp *in, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    emits(in, 2, buf);
}

static void interp_out_free(interp_out *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->chunks[i].text);
    free(o->chunks);
    memset(o, 0, sizeof(*o));
}

static const char *env_get(interp *in, const char *k)
{
    for (size_t i = 0; i < in->n_env; i++)
        if (strcmp(in->env_k[i], k) == 0)
            return in->env_v[i];
    return NULL;
}

static void env_set(interp *in, const char *k, size_t kn, const char *v)
{
    for (size_t i = 0; i < in->n_env; i++)
        if (strlen(in->env_k[i]) == kn && strncmp(in->env_k[i], k, kn) == 0) {
            free(in->env_v[i]);
            in->env_v[i] = strdup(v);
            return;
        }
    if (in->n_env >= INTERP_MAX_ENV)
        return;
    in->env_k[in->n_env] = strndup(k, kn);
    in->env_v[in->n_env] = strdup(v);
    in->n_env++;
}

static void env_free(interp *in)
{
    for (size_t i = 0; i < in->n_env; i++) {
        free(in->env_k[i]);
        free(in->env_v[i]);
    }
    in->n_env = 0;
}

typedef struct word {
    char *text;
    bool quoted; /* any part was quoted: never an operator */
} word;

/* One statement: words, split at '|' into pipeline stages. */
#define INTERP_MAX_STAGES 8
typedef struct stmt {
    word w[INTERP_MAX_WORDS];
    size_t n;
    size_t stage_at[INTERP_MAX_STAGES]; /* index of the first word of stages 1.. */
    size_t n_pipes;
} stmt;

static void stmt_free(stmt *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->w[i].text);
    s->n = 0;
    s->n_pipes = 0;
}

static int run_words(interp *in, word *w, size_t n);
static int run_script_text(interp *parent, const char *script, const char *user, bool reset_env);

static int run_stmt(interp *in, stmt *s)
{
    if (s->n == 0)
        return in->status;
    if (s->n_pipes == 0)
        return run_words(in, s->w, s->n);
    /* Each stage's stdout is the next stage's stdin; the last writes where the statement
     * writes. An `exit` inside a stage only ends that stage (it runs in a subshell). */
    const char *saved_data = in->stdin_data;
    size_t saved_len = in->stdin_len;
    tbuf *saved_capture = in->capture;
    char *feed = NULL;
    size_t feed_len = 0;
    int st = 0;
    for (size_t k = 0; k <= s->n_pipes; k++) {
        size_t from = k == 0 ? 0 : s->stage_at[k - 1];
        size_t to = k == s->n_pipes ? s->n : s->stage_at[k];
        tbuf piped = {0};
        bool last = k == s->n_pipes;
        in->capture = last ? saved_capture : &piped;
        if (k > 0) {
            in->stdin_data = feed != NULL ? feed : "";
            in->stdin_len = feed_len;
        }
        st = run_words(in, s->w + from, to - from);
        in->exited = false;
        free(feed);
        feed_len = piped.len;
        feed = piped.p;
    }
    free(feed);
    in->capture = saved_capture;
    in->stdin_data = saved_data;
    in->stdin_len = saved_len;
    return st;
}

/* Parses and runs script text statement by statement. Returns the last status. */
static int interpret(interp *in, const char *script)
{
    stmt *s = calloc(1, sizeof(stmt));
    if (s == NULL)
        abort();
    tbuf cur = {0};
    bool in_word = false, quoted = false;
    const char *p = script;
    for (;;) {
        char c = *p;
        bool end_stmt = c == '\0' || c == '\n' || c == ';';
        bool is_pipe = c == '|';
        if (c == ' ' || c == '\t' || end_stmt || is_pipe) {
            if (in_word && s->n < INTERP_MAX_WORDS) {
                s->w[s->n].text = tb_take(&cur);
                s->w[s->n].quoted = quoted;
                s->n++;
            }
            free(cur.p);
            memset(&cur, 0, sizeof(cur));
            in_word = quoted = false;
            if (is_pipe && s->n_pipes < INTERP_MAX_STAGES)
                s->stage_at[s->n_pipes++] = s->n;
            if (end_stmt) {
                in->status = run_stmt(in, s);
                if (in->errexit && in->status != 0)
                    in->exited = true;
                stmt_free(s);
                if (in->exited || c == '\0')
                    break;
            }
            p++;
            continue;
        }
        if (c == '#' && !in_word) {
            while (*p != '\0' && *p != '\n')
                p++;
            continue;
        }
        in_word = true;
        if (c == '\'') {
            const char *e = strchr(p + 1, '\'');
            if (e == NULL) {
                emits(in, 2, "sh: 1: Syntax error: Unterminated quoted string\n");
                in->status = 2;
                in->exited = true;
                break;
            }
            tb_put(&cur, p + 1, (size_t)(e - p - 1));
            if (cur.p == NULL)
                tb_put(&cur, "", 0);
            quoted = true;
            p = e + 1;
            continue;
        }
        if (c == '"') {
            p++;
            while (*p != '\0' && *p != '"') {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\' || p[1] == '$'))
                    p++;
                tb_put(&cur, p, 1);
                p++;
            }
            if (*p != '"') {
                emits(in, 2, "sh: 1: Syntax error: Unterminated quoted string\n");
                in->status = 2;
                in->exited = true;
                break;
            }
            if (cur.p == NULL)
                tb_put(&cur, "", 0);
            quoted = true;
            p++;
            continue;
        }
        if (c == '\\' && p[1] != '\0') {
            tb_put(&cur, p + 1, 1);
            quoted = true;
            p += 2;
            continue;
        }
        tb_put(&cur, p, 1);
        p++;
    }
    free(cur.p);
    stmt_free(s);
    free(s);
    return in->status;
}

static bool valid_user(const char *u)
{
    if (u[0] == '\0' || u[0] == '-')
        return false;
    for (const char *p = u; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-')
            return false;
    return strlen(u) < 33;
}

/* printf FORMAT ARGS: %s and %% conversions, \n and \\ escapes. */
static void do_printf(interp *in, word *w, size_t n)
{
    if (n < 2)
        return;
    const char *f = w[1].text;
    size_t ai = 2;
    tbuf b = {0};
    for (const char *p = f; *p; p++) {
        if (*p == '%' && p[1] == 's') {
            if (ai < n)
                tb_puts(&b, w[ai++].text);
            p++;
        } else if (*p == '%' && p[1] == '%') {
            tb_put(&b, "%", 1);
            p++;
        } else if (*p == '\\' && p[1] == 'n') {
            tb_put(&b, "\n", 1);
            p++;
        } else if (*p == '\\' && p[1] == '\\') {
            tb_put(&b, "\\", 1);
            p++;
        } else {
            tb_put(&b, p, 1);
        }
    }
    if (b.p != NULL)
        emit(in, 1, b.p, b.len);
    free(b.p);
}

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* GNU coreutils base64: -d decodes (whitespace ignored), otherwise encodes, wrapping at 76
 * columns unless -w 0. */
static int do_base64(interp *in, word *w, size_t n)
{
    bool decode = false;
    long wrap = 76;
    for (size_t i = 1; i < n; i++) {
        if (strcmp(w[i].text, "-d") == 0)
            decode = true;
        else if (strcmp(w[i].text, "-w") == 0 && i + 1 < n)
            wrap = strtol(w[++i].text, NULL, 10);
    }
    const uint8_t *d = (const uint8_t *)in->stdin_data;
    size_t len = in->stdin_len;
    tbuf out = {0};
    if (decode) {
        uint32_t acc = 0;
        int bits = 0;
        bool pad = false;
        for (size_t i = 0; i < len; i++) {
            int c = d[i];
            if (c == '\n' || c == ' ' || c == '\r' || c == '\t')
                continue;
            if (c == '=') {
                pad = true;
                continue;
            }
            int v = b64val(c);
            if (v < 0 || pad) {
                free(out.p);
                emits(in, 2, "base64: invalid input\n");
                return 1;
            }
            acc = (acc << 6) | (uint32_t)v;
            bits += 6;
            if (bits >= 8) {
                bits -= 8;
                char ch = (char)((acc >> bits) & 0xff);
                tb_put(&out, &ch, 1);
            }
        }
    } else {
        static const char tbl[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        long col = 0;
        for (size_t i = 0; i < len; i += 3) {
            uint32_t v = (uint32_t)d[i] << 16;
            if (i + 1 < len)
                v |= (uint32_t)d[i + 1] << 8;
            if (i + 2 < len)
                v |= d[i + 2];
            char q[4] = {tbl[(v >> 18) & 63], tbl[(v >> 12) & 63],
                         i + 1 < len ? tbl[(v >> 6) & 63] : '=', i + 2 < len ? tbl[v & 63] : '='};
            for (int k = 0; k < 4; k++) {
                if (wrap > 0 && col == wrap) {
                    tb_put(&out, "\n", 1);
                    col = 0;
                }
                tb_put(&out, &q[k], 1);
                col++;
            }
        }
        if (wrap > 0 && len > 0)
            tb_put(&out, "\n", 1);
    }
    emit(in, 1, out.p != NULL ? out.p : "", out.len);
    free(out.p);
    return 0;
}

/* Skips leading option words in `opts` (and a "--"); returns the index of the first operand. */
static size_t operands(word *w, size_t n, const char *opts)
{
    size_t i = 1;
    while (i < n && w[i].text[0] == '-' && w[i].text[1] != '\0') {
        if (strcmp(w[i].text, "--") == 0)
            return i + 1;
        if (strchr(opts, w[i].text[1]) == NULL)
            break;
        i++;
    }
    return i;
}

static int do_find(interp *in, word *w, size_t n)
{
    /* find DIR -mindepth 1 -maxdepth 1 -printf FMT: %y %m %s %f, \0 and \n escapes. */
    if (n < 2)
        return 1;
    const char *fmt = NULL;
    for (size_t i = 2; i + 1 < n; i++)
        if (strcmp(w[i].text, "-printf") == 0)
            fmt = w[i + 1].text;
    char *dir = fs_resolve(in->cwd, w[1].text);
    fnode *d = fs_get(in->fs, dir);
    if (d == NULL || !d->dir || fmt == NULL) {
        errf(in, "find: '%s': No such file or directory\n", w[1].text);
        free(dir);
        return 1;
    }
    size_t dl = strlen(dir);
    for (size_t i = 0; i < in->fs->n; i++) {
        fnode *e = &in->fs->nodes[i];
        const char *name = NULL;
        if (strcmp(dir, "/") == 0)
            name = e->path + 1;
        else if (strncmp(e->path, dir, dl) == 0 && e->path[dl] == '/')
            name = e->path + dl + 1;
        if (name == NULL || strchr(name, '/') != NULL)
            continue;
        tbuf line = {0};
        for (const char *p = fmt; *p; p++) {
            char tmp[32];
            if (*p == '%' && p[1] == 'y') {
                tb_put(&line, e->dir ? "d" : "f", 1);
                p++;
            } else if (*p == '%' && p[1] == 'm') {
                snprintf(tmp, sizeof(tmp), "%o", e->mode & 07777);
                tb_puts(&line, tmp);
                p++;
            } else if (*p == '%' && p[1] == 's') {
                snprintf(tmp, sizeof(tmp), "%zu", e->dir ? (size_t)4096 : e->len);
                tb_puts(&line, tmp);
                p++;
            } else if (*p == '%' && p[1] == 'f') {
                tb_puts(&line, name);
                p++;
            } else if (*p == '\\' && p[1] == '0') {
                tb_put(&line, "", 1);
                p++;
            } else if (*p == '\\' && p[1] == 'n') {
                tb_put(&line, "\n", 1);
                p++;
            } else {
                tb_put(&line, p, 1);
            }
        }
        emit(in, 1, line.p != NULL ? line.p : "", line.len);
        free(line.p);
    }
    free(dir);
    return 0;
}

/* File and text utilities over the in-memory file system (GNU coreutils behaviour). */
static int run_fs_command(interp *in, word *w, size_t n, bool *handled)
{
    const char *cmd = w[0].text;
    *handled = true;
    if (strcmp(cmd, "set") == 0) {
        for (size_t i = 1; i < n; i++)
            if (strcmp(w[i].text, "-e") == 0)
                in->errexit = true;
        return 0;
    }
    if (strcmp(cmd, ":") == 0 || strcmp(cmd, "umask") == 0)
        return 0; /* umask: the fake's files have no owner to protect */
    if (strcmp(cmd, "base64") == 0)
        return do_base64(in, w, n);
    if (strcmp(cmd, "find") == 0)
        return do_find(in, w, n);
    if (strcmp(cmd, "wc") == 0) {
        char b[32];
        snprintf(b, sizeof(b), "%zu\n", in->stdin_len);
        emits(in, 1, b);
        return 0;
    }
    if (strcmp(cmd, "head") == 0 && n >= 3 && strcmp(w[1].text, "-c") == 0) {
        size_t want = (size_t)strtoull(w[2].text, NULL, 10);
        emit(in, 1, in->stdin_data != NULL ? in->stdin_data : "",
             want < in->stdin_len ? want : in->stdin_len);
        return 0;
    }
    if (strcmp(cmd, "tail") == 0 && n >= 4 && strcmp(w[1].text, "-c") == 0 && w[2].text[0] == '+') {
        size_t from = (size_t)strtoull(w[2].text + 1, NULL, 10);
        size_t i = n - 1; /* tail -c +N [--] FILE: the file is the last word */
        char *abs = fs_resolve(in->cwd, w[i].text);
        fnode *nd = fs_get(in->fs, abs);
        free(abs);
        if (nd == NULL) {
            errf(in, "tail: cannot open '%s' for reading: No such file or directory\n", w[i].text);
            return 1;
        }
        if (nd->dir) {
            errf(in, "tail: error reading '%s': Is a directory\n", w[i].text);
            return 1;
        }
        size_t start = from > 0 ? from - 1 : 0;
        if (start < nd->len)
            emit(in, 1, (const char *)nd->data + start, nd->len - start);
        return 0;
    }
    if (strcmp(cmd, "mkdir") == 0) {
        bool parents = false;
        for (size_t i = 1; i < n; i++)
            if (strcmp(w[i].text, "-p") == 0)
                parents = true;
        int st = 0;
        for (size_t i = operands(w, n, "pm"); i < n; i++) {
            char *abs = fs_resolve(in->cwd, w[i].text);
            fnode *nd = fs_get(in->fs, abs);
            if (nd != NULL && (!nd->dir || !parents)) {
                errf(in, "mkdir: cannot create directory '%s': File exists\n", w[i].text);
                st = 1;
            } else if (nd == NULL) {
                /* create each missing ancestor (with -p) from the top down */
                for (char *p = abs + 1;; p++) {
                    bool end = *p == '\0';
                    if (*p == '/' || end) {
                        char c = *p;
                        *p = '\0';
                        fnode *x = fs_get(in->fs, abs);
                        if (x == NULL) {
                            if (!parents && !end) {
                                errf(in,
                                     "mkdir: cannot create directory '%s': No such file or "
                                     "directory\n",
                                     w[i].text);
                                st = 1;
                                *p = c;
                                break;
                            }
                            fs_add(in->fs, abs, true, 0755);
                        } else if (!x->dir) {
                            errf(in, "mkdir: cannot create directory '%s': Not a directory\n",
                                 w[i].text);
                            st = 1;
                            *p = c;
                            break;
                        }
                        *p = c;
                    }
                    if (end)
                        break;
                }
            }
            free(abs);
        }
        return st;
    }
    if (strcmp(cmd, "chmod") == 0) {
        size_t i = operands(w, n, "R");
        if (i < n && strcmp(w[i].text, "--") == 0)
            i++;
        size_t j = i + 1; /* GNU getopt also accepts "--" between the mode and the file */
        if (j < n && strcmp(w[j].text, "--") == 0)
            j++;
        if (j >= n)
            return 1;
        unsigned mode = (unsigned)strtoul(w[i].text, NULL, 8);
        char *abs = fs_resolve(in->cwd, w[j].text);
        fnode *nd = fs_get(in->fs, abs);
        free(abs);
        if (nd == NULL) {
            errf(in, "chmod: cannot access '%s': No such file or directory\n", w[j].text);
            return 1;
        }
        nd->mode = mode & 07777;
        return 0;
    }
    if (strcmp(cmd, "rm") == 0) {
        bool force = false;
        for (size_t i = 1; i < n; i++)
            if (strcmp(w[i].text, "-f") == 0)
                force = true;
        int st = 0;
        for (size_t i = operands(w, n, "f"); i < n; i++) {
            char *abs = fs_resolve(in->cwd, w[i].text);
            fnode *nd = fs_get(in->fs, abs);
            if (nd == NULL && !force) {
                errf(in, "rm: cannot remove '%s': No such file or directory\n", w[i].text);
                st = 1;
            } else if (nd != NULL && nd->dir) {
                errf(in, "rm: cannot remove '%s': Is a directory\n", w[i].text);
                st = 1;
            } else if (nd != NULL) {
                fs_remove(in->fs, abs);
            }
            free(abs);
        }
        return st;
    }
    if (strcmp(cmd, "mv") == 0) {
        size_t i = operands(w, n, "f");
        if (i + 1 >= n)
            return 1;
        char *src = fs_resolve(in->cwd, w[i].text), *dst = fs_resolve(in->cwd, w[i + 1].text);
        fnode *s = fs_get(in->fs, src), *d = fs_get(in->fs, dst);
        int st = 0;
        if (s == NULL || s->dir) {
            errf(in, "mv: cannot stat '%s': No such file or directory\n", w[i].text);
            st = 1;
        } else if ((d != NULL && d->dir) || !parent_is_dir(in->fs, dst)) {
            errf(in, "mv: cannot move '%s' to '%s'\n", w[i].text, w[i + 1].text);
            st = 1;
        } else {
            if (d != NULL)
                fs_remove(in->fs, dst);
            s = fs_get(in->fs, src);
            free(s->path);
            s->path = strdup(dst);
        }
        free(src);
        free(dst);
        return st;
    }
    if (strcmp(cmd, "cd") == 0) {
        size_t i = operands(w, n, "LP");
        char *abs = fs_resolve(in->cwd, i < n ? w[i].text : "/");
        fnode *nd = fs_get(in->fs, abs);
        int st = 0;
        if (nd == NULL || !nd->dir) {
            errf(in, "sh: 1: cd: can't cd to %s\n", i < n ? w[i].text : "/");
            st = 2;
        } else {
            snprintf(in->cwd, sizeof(in->cwd), "%s", abs);
        }
        free(abs);
        return st;
    }
    *handled = false;
    return 0;
}

static int run_command(interp *in, word *w, size_t n);

/* Applies "> FILE", ">> FILE" and "< FILE" (unquoted operator words) around one command. */
static int run_words(interp *in, word *w, size_t n)
{
    const char *out_file = NULL, *in_file = NULL;
    bool append = false;
    word kept[INTERP_MAX_WORDS];
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) {
        if (!w[i].quoted && i + 1 < n &&
            (strcmp(w[i].text, ">") == 0 || strcmp(w[i].text, ">>") == 0)) {
            append = w[i].text[1] == '>';
            out_file = w[++i].text;
            continue;
        }
        if (!w[i].quoted && i + 1 < n && strcmp(w[i].text, "<") == 0) {
            in_file = w[++i].text;
            continue;
        }
        kept[nk++] = w[i];
    }
    if (out_file == NULL && in_file == NULL)
        return run_command(in, w, n);
    const char *saved_data = in->stdin_data;
    size_t saved_len = in->stdin_len;
    tbuf *saved_capture = in->capture;
    if (in_file != NULL) {
        char *abs = fs_resolve(in->cwd, in_file);
        fnode *nd = fs_get(in->fs, abs);
        free(abs);
        if (nd == NULL) {
            errf(in, "sh: 1: cannot open %s: No such file\n", in_file);
            return 2;
        }
        if (nd->dir) {
            errf(in, "sh: 1: %s: Is a directory\n", in_file);
            return 1;
        }
        in->stdin_data = nd->data != NULL ? (const char *)nd->data : "";
        in->stdin_len = nd->len;
    }
    tbuf captured = {0};
    if (out_file != NULL) {
        /* The target is created (or truncated) before the command runs, as a shell does. */
        if (!fs_write(in, out_file, "", 0, append)) {
            in->stdin_data = saved_data;
            in->stdin_len = saved_len;
            return 2;
        }
        in->capture = &captured;
    }
    int st = run_command(in, kept, nk);
    in->capture = saved_capture;
    in->stdin_data = saved_data;
    in->stdin_len = saved_len;
    if (out_file != NULL) {
        fs_write(in, out_file, captured.p != NULL ? captured.p : "", captured.len, true);
        free(captured.p);
    }
    return st;
}

static int run_command(interp *in, word *w, size_t n)
{
    if (n == 0)
        return 0;
    bool handled = false;
    int fst = run_fs_command(in, w, n, &handled);
    if (handled)
        return fst;
    const char *cmd = w[0].text;
    if (strcmp(cmd, "echo") == 0) {
        int stream = 1;
        bool newline = true;
        tbuf b = {0};
        size_t first = 1;
        if (n > 1 && strcmp(w[1].text, "-n") == 0 && !w[1].quoted) {
            newline = false;
            first = 2;
        }
        bool any = false;
        for (size_t i = first; i < n; i++) {
            if (!w[i].quoted && strcmp(w[i].text, ">&2") == 0) {
                stream = 2;
                continue;
            }
            if (any)
                tb_put(&b, " ", 1);
            tb_puts(&b, w[i].text);
            any = true;
        }
        if (newline)
            tb_put(&b, "\n", 1);
        emit(in, stream, b.p, b.len);
        free(b.p);
        return 0;
    }
    if (strcmp(cmd, "printf") == 0) {
        do_printf(in, w, n);
        return 0;
    }
    if (strcmp(cmd, "cat") == 0) {
        emit(in, 1, in->stdin_data != NULL ? in->stdin_data : "", in->stdin_len);
        return 0;
    }
    if (strcmp(cmd, "exit") == 0) {
        in->exited = true;
        return n > 1 ? (int)(strtol(w[1].text, NULL, 10) & 255) : in->status;
    }
    if (strcmp(cmd, "sleep") == 0) {
        double s = n > 1 ? strtod(w[1].text, NULL) : 0;
        if (s > 0)
            in->out->clock += s;
        return 0;
    }
    if (strcmp(cmd, "true") == 0)
        return 0;
    if (strcmp(cmd, "false") == 0)
        return 1;
    if (strcmp(cmd, "pwd") == 0) {
        emits(in, 1, in->cwd);
        emits(in, 1, "\n");
        return 0;
    }
    if (strcmp(cmd, "whoami") == 0) {
        emits(in, 1, in->user);
        emits(in, 1, "\n");
        return 0;
    }
    if (strcmp(cmd, "printenv") == 0) {
        const char *v = n > 1 ? env_get(in, w[1].text) : NULL;
        if (v == NULL)
            return 1;
        emits(in, 1, v);
        emits(in, 1, "\n");
        return 0;
    }
    if (strcmp(cmd, "export") == 0) {
        for (size_t i = 1; i < n; i++) {
            const char *eq = strchr(w[i].text, '=');
            if (eq != NULL)
                env_set(in, w[i].text, (size_t)(eq - w[i].text), eq + 1);
        }
        return 0;
    }
    if (strcmp(cmd, "repeat") == 0 &&
        (n == 3 || (n == 4 && !w[3].quoted && strcmp(w[3].text, ">&2") == 0))) {
        long count = strtol(w[1].text, NULL, 10);
        size_t tl = strlen(w[2].text);
        if (count < 0 || tl == 0 || (size_t)count * tl > INTERP_MAX_OUTPUT)
            return 2;
        char *b = malloc((size_t)count * tl + 1);
        if (b == NULL)
            abort();
        for (long i = 0; i < count; i++)
            memcpy(b + (size_t)i * tl, w[2].text, tl);
        emit(in, n == 4 ? 2 : 1, b, (size_t)count * tl);
        free(b);
        return 0;
    }
    if ((strcmp(cmd, "sh") == 0 || strcmp(cmd, "bash") == 0) && n >= 3 &&
        strcmp(w[1].text, "-c") == 0)
        return run_script_text(in, w[2].text, NULL, false);
    if (strcmp(cmd, "sudo") == 0) {
        /* Only the form the provider sends: sudo -n -u USER -- CMD ARGS... */
        bool nflag = false;
        const char *user = NULL;
        size_t i = 1;
        for (; i < n; i++) {
            if (strcmp(w[i].text, "-n") == 0)
                nflag = true;
            else if (strcmp(w[i].text, "-u") == 0 && i + 1 < n)
                user = w[++i].text;
            else if (strcmp(w[i].text, "--") == 0) {
                i++;
                break;
            } else
                break;
        }
        if (!nflag) {
            emits(in, 2, "sudo: a terminal is required to read the password\n");
            return 1;
        }
        if (user == NULL || !valid_user(user)) {
            emits(in, 2, "sudo: unknown user\n");
            return 1;
        }
        if (i >= n)
            return 1;
        if ((strcmp(w[i].text, "sh") == 0 || strcmp(w[i].text, "bash") == 0) && i + 2 < n &&
            strcmp(w[i + 1].text, "-c") == 0)
            return run_script_text(in, w[i + 2].text, user, true);
        interp child = *in;
        snprintf(child.user, sizeof(child.user), "%s", user);
        child.n_env = 0; /* sudo's env_reset */
        child.depth = in->depth + 1;
        int st = run_words(&child, w + i, n - i);
        env_free(&child);
        return st;
    }
    emits(in, 2, "sh: 1: ");
    emits(in, 2, cmd);
    emits(in, 2, ": not found\n");
    return 127;
}

static int run_script_text(interp *parent, const char *script, const char *user, bool reset_env)
{
    if (parent->depth >= INTERP_MAX_DEPTH) {
        emits(parent, 2, "sh: nesting too deep\n");
        return 2;
    }
    interp child;
    memset(&child, 0, sizeof(child));
    child.out = parent->out;
    child.capture = parent->capture;
    snprintf(child.user, sizeof(child.user), "%s", user != NULL ? user : parent->user);
    snprintf(child.cwd, sizeof(child.cwd), "%s", parent->cwd);
    child.stdin_data = parent->stdin_data;
    child.stdin_len = parent->stdin_len;
    child.fs = parent->fs;
    child.depth = parent->depth + 1;
    if (!reset_env)
        for (size_t i = 0; i < parent->n_env; i++)
            env_set(&child, parent->env_k[i], strlen(parent->env_k[i]), parent->env_v[i]);
    int st = interpret(&child, script);
    env_free(&child);
    return st;
}

static int interpret_top(const char *script, const char *cwd, fake_fs *fs, interp_out *out)
{
    interp in;
    memset(&in, 0, sizeof(in));
    in.out = out;
    in.fs = fs;
    snprintf(in.cwd, sizeof(in.cwd), "%s", cwd != NULL && cwd[0] == '/' ? cwd : "/");
    snprintf(in.user, sizeof(in.user), "root"); /* the SSM agent runs scripts as root */
    int st = interpret(&in, script);
    env_free(&in);
    return st;
}

/* Output of one stream up to time t (seconds), at most max_chars UTF-8 characters. */
static char *collect(const interp_out *o, int stream, double t, size_t max_chars, bool *cut)
{
    tbuf b = {0};
    size_t chars = 0;
    *cut = false;
    for (size_t i = 0; i < o->n && !*cut; i++) {
        const out_chunk *c = &o->chunks[i];
        if (c->stream != stream || c->at > t)
            continue;
        for (size_t k = 0; k < c->len; k++) {
            unsigned char ch = (unsigned char)c->text[k];
            if ((ch & 0xC0) != 0x80) {
                if (chars == max_chars) {
                    *cut = true;
                    break;
                }
                chars++;
            }
            tb_put(&b, &c->text[k], 1);
        }
    }
    return tb_take(&b);
}

int ssm_fake_interpret(const char *script, char **out, char **err)
{
    interp_out o = {0};
    fake_fs fs = {0};
    int st = interpret_top(script, NULL, &fs, &o);
    bool cut;
    *out = collect(&o, 1, 1e18, (size_t)-1, &cut);
    *err = collect(&o, 2, 1e18, (size_t)-1, &cut);
    interp_out_free(&o);
    fs_free(&fs);
    return st;
}

/* ---- the fake's state --------------------------------------------------------------------- */

typedef struct fake_cmd {
    char id[40];
    char instance[40];
    int64_t created_ms;
    int invisible_left;
    bool pending_shown;
    interp_out out;
    int exit_code;
    double exec_timeout_s;
    bool cancelled;
    double cancelled_at_s;
} fake_cmd;

typedef struct fake_instance {
    char id[40];
    char ping[32];
    char platform[32];
} fake_instance;

typedef struct issued_key {
    char akid[32];
    char secret[64];
    char token[128];
} issued_key;

typedef struct op_stat {
    char name[48];
    int calls;
    int throttle_left;
    char last_akid[32];
} op_stat;

struct ssm_fake {
    fake_http *ssm, *sts;
    char ssm_url[80], sts_url[80];
    pthread_mutex_t lock; /* guards everything below */
    fake_cmd *cmds[FAKE_SSM_MAX_COMMANDS];
    size_t n_cmds;
    uint32_t next_cmd;
    fake_instance inst[FAKE_SSM_MAX_INSTANCES];
    size_t n_inst;
    issued_key issued[FAKE_SSM_MAX_ISSUED];
    size_t n_issued;
    char denied[FAKE_SSM_MAX_DENIED][256];
    size_t n_denied;
    op_stat ops[32];
    size_t n_ops;
    int invisible_polls;
    int64_t credential_lifetime_s;
    int signature_failures;
    bool echo_token; /* hostile-server mode: error messages quote the session token */
    fake_fs fs;      /* the instances' file system (one, shared: tests use one instance) */
    char *last_script, *last_cwd, *last_session_name;
    int64_t last_exec_timeout;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static op_stat *op_locked(ssm_fake *f, const char *name)
{
    for (size_t i = 0; i < f->n_ops; i++)
        if (strcmp(f->ops[i].name, name) == 0)
            return &f->ops[i];
    if (f->n_ops == sizeof(f->ops) / sizeof(f->ops[0]))
        return &f->ops[0];
    op_stat *o = &f->ops[f->n_ops++];
    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "%s", name);
    return o;
}

/* ---- SigV4 verification ------------------------------------------------------------------- */

/* Verifies r's Authorization for service. On failure fills code/why and returns false. */
static bool verify_sigv4(ssm_fake *f, const fake_request *r, const char *service, char *akid_out,
                         char *code, size_t code_size, char *why, size_t why_size)
{
    const char *authz = fake_request_header(r, "Authorization");
    const char *date = fake_request_header(r, "X-Amz-Date");
    const char *token = fake_request_header(r, "X-Amz-Security-Token");
    snprintf(code, code_size, "%s",
             strcmp(service, "sts") == 0 ? "SignatureDoesNotMatch" : "InvalidSignatureException");
    if (authz == NULL || date == NULL) {
        snprintf(code, code_size, "%s",
                 strcmp(service, "sts") == 0 ? "MissingAuthenticationToken"
                                             : "MissingAuthenticationTokenException");
        snprintf(why, why_size, "Missing Authentication Token");
        return false;
    }
    char akid[64], scope_date[16], region[32], svc[32], signed_names[512], sig[80];
    if (sscanf(authz,
               "AWS4-HMAC-SHA256 Credential=%63[^/]/%15[^/]/%31[^/]/%31[^/]/aws4_request, "
               "SignedHeaders=%511[^,], Signature=%79s",
               akid, scope_date, region, svc, signed_names, sig) != 6) {
        snprintf(code, code_size, "IncompleteSignature");
        snprintf(why, why_size,
                 "Authorization header requires Credential, SignedHeaders and "
                 "Signature");
        return false;
    }
    snprintf(akid_out, 32, "%.31s", akid);
    const char *secret = NULL, *want_token = NULL;
    pthread_mutex_lock(&f->lock);
    if (strcmp(akid, SSM_FAKE_ACCESS_KEY_ID) == 0)
        secret = SSM_FAKE_SECRET_KEY;
    for (size_t i = 0; i < f->n_issued && secret == NULL; i++)
        if (strcmp(f->issued[i].akid, akid) == 0) {
            secret = f->issued[i].secret;
            want_token = f->issued[i].token;
        }
    pthread_mutex_unlock(&f->lock);
    if (secret == NULL) {
        snprintf(code, code_size, "%s",
                 strcmp(service, "sts") == 0 ? "InvalidClientTokenId"
                                             : "UnrecognizedClientException");
        snprintf(why, why_size, "The security token included in the request is invalid.");
        return false;
    }
    if (want_token != NULL && (token == NULL || strcmp(token, want_token) != 0)) {
        snprintf(code, code_size, "%s",
                 strcmp(service, "sts") == 0 ? "InvalidClientTokenId"
                                             : "UnrecognizedClientException");
        snprintf(why, why_size, "The security token included in the request is invalid.");
        return false;
    }
    int64_t t = 0;
    if (!sigv4_parse_amz_date(date, &t)) {
        snprintf(why, why_size, "X-Amz-Date is not YYYYMMDDTHHMMSSZ");
        return false;
    }
    int64_t now = (int64_t)time(NULL);
    if (t > now + FAKE_SSM_MAX_SKEW_S || t < now - FAKE_SSM_MAX_SKEW_S) {
        snprintf(why, why_size,
                 "Signature expired: %s is now earlier or later than the "
                 "server time by more than 5 minutes",
                 date);
        return false;
    }
    if (strncmp(scope_date, date, 8) != 0 || strcmp(region, SSM_FAKE_REGION) != 0 ||
        strcmp(svc, service) != 0) {
        snprintf(why, why_size, "Credential should be scoped to a valid region/service ('%s/%s')",
                 SSM_FAKE_REGION, service);
        return false;
    }
    /* Rebuild the request from the headers the client says it signed. */
    sigv4_header h[SIGV4_MAX_HEADERS];
    size_t nh = 0;
    bool has_host = false, has_date = false, token_signed = false;
    char names_copy[512];
    snprintf(names_copy, sizeof(names_copy), "%s", signed_names);
    char *save = NULL;
    for (char *name = strtok_r(names_copy, ";", &save); name != NULL;
         name = strtok_r(NULL, ";", &save)) {
        if (strcmp(name, "host") == 0)
            has_host = true;
        if (strcmp(name, "x-amz-date") == 0) {
            has_date = true;
            continue; /* the signer adds it from the time */
        }
        if (strcmp(name, "x-amz-security-token") == 0) {
            token_signed = true;
            continue; /* the signer adds it from the credentials */
        }
        const char *v = fake_request_header(r, name);
        if (v == NULL || nh == SIGV4_MAX_HEADERS) {
            snprintf(why, why_size, "signed header '%s' is not in the request", name);
            return false;
        }
        h[nh++] = (sigv4_header){name, v};
    }
    if (!has_host || !has_date || (token != NULL && !token_signed)) {
        snprintf(why, why_size,
                 "SignedHeaders must include host, x-amz-date and (with a session token) "
                 "x-amz-security-token");
        return false;
    }
    sigv4_request req = {.method = r->method,
                         .path = r->path,
                         .headers = h,
                         .n_headers = nh,
                         .body = r->body,
                         .body_len = r->body_len};
    sigv4_credentials cr = {akid, secret, token_signed ? token : NULL};
    sigv4_params p = {
        .region = SSM_FAKE_REGION, .service = service, .time_s = t, .normalize_path = true};
    sigv4_signed s;
    if (sigv4_sign_headers(&req, &cr, &p, &s, NULL) != SBX_OK) {
        snprintf(why, why_size, "request cannot be signed");
        return false;
    }
    const char *want = NULL;
    for (size_t i = 0; i < s.n_added; i++)
        if (strcmp(s.added[i].name, "Authorization") == 0)
            want = s.added[i].value;
    bool ok = want != NULL && sigv4_equal_ct(want, authz);
    sigv4_signed_clear(&s);
    if (!ok)
        snprintf(why, why_size,
                 "The request signature we calculated does not match the signature you "
                 "provided. Check your AWS Secret Access Key and signing method.");
    return ok;
}

/* ---- SSM ---------------------------------------------------------------------------------- */

static void ssm_error(fake_response *resp, int status, const char *code, const char *msg)
{
    json_t *j = json_pack("{s:s,s:s}", "__type", code, "message", msg);
    char *s = json_dumps(j, JSON_COMPACT);
    fake_response_status(resp, status);
    fake_response_header(resp, "Content-Type", "application/x-amz-json-1.1");
    fake_response_header(resp, "x-amzn-ErrorType", code);
    fake_response_body(resp, s, strlen(s));
    free(s);
    json_decref(j);
}

static void ssm_ok(fake_response *resp, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    fake_response_status(resp, 200);
    fake_response_header(resp, "Content-Type", "application/x-amz-json-1.1");
    fake_response_body(resp, s, strlen(s));
    free(s);
    json_decref(j);
}

static fake_instance *instance_locked(ssm_fake *f, const char *id)
{
    for (size_t i = 0; i < f->n_inst; i++)
        if (strcmp(f->inst[i].id, id) == 0)
            return &f->inst[i];
    return NULL;
}

static fake_cmd *cmd_locked(ssm_fake *f, const char *id)
{
    for (size_t i = 0; i < f->n_cmds; i++)
        if (strcmp(f->cmds[i]->id, id) == 0)
            return f->cmds[i];
    return NULL;
}

static void op_send_command(ssm_fake *f, json_t *in, fake_response *resp)
{
    const char *doc = json_string_value(json_object_get(in, "DocumentName"));
    json_t *ids = json_object_get(in, "InstanceIds");
    json_t *params = json_object_get(in, "Parameters");
    json_t *commands = json_object_get(params, "commands");
    if (doc == NULL || strcmp(doc, "AWS-RunShellScript") != 0) {
        ssm_error(resp, 400, "InvalidDocument", "Document with that name does not exist.");
        return;
    }
    if (!json_is_array(ids) || json_array_size(ids) != 1 ||
        !json_is_string(json_array_get(ids, 0))) {
        ssm_error(resp, 400, "InvalidInstanceId", "Instances not in a valid state for account");
        return;
    }
    if (!json_is_array(commands) || json_array_size(commands) == 0) {
        ssm_error(resp, 400, "InvalidParameters", "Parameters are invalid: commands is required.");
        return;
    }
    json_t *to = json_object_get(in, "TimeoutSeconds");
    if (to != NULL &&
        (!json_is_integer(to) || json_integer_value(to) < 30 || json_integer_value(to) > 2592000)) {
        ssm_error(resp, 400, "ValidationException",
                  "1 validation error detected: Value at 'timeoutSeconds' failed to satisfy "
                  "constraint: Member must have value between 30 and 2592000");
        return;
    }
    tbuf script = {0};
    size_t i;
    json_t *v;
    json_array_foreach(commands, i, v)
    {
        if (!json_is_string(v)) {
            ssm_error(resp, 400, "InvalidParameters", "commands must be strings");
            free(script.p);
            return;
        }
        if (i > 0)
            tb_puts(&script, "\n");
        tb_put(&script, json_string_value(v), json_string_length(v));
    }
    double exec_timeout = 3600;
    json_t *et = json_array_get(json_object_get(params, "executionTimeout"), 0);
    if (et != NULL) {
        const char *ets = json_string_value(et);
        char *end = NULL;
        long n = ets != NULL ? strtol(ets, &end, 10) : 0;
        if (ets == NULL || *end != '\0' || n < 1 || n > 172800) {
            ssm_error(resp, 400, "InvalidParameters",
                      "Parameter executionTimeout does not match the allowed pattern");
            free(script.p);
            return;
        }
        exec_timeout = (double)n;
    }
    const char *cwd =
        json_string_value(json_array_get(json_object_get(params, "workingDirectory"), 0));
    const char *iid = json_string_value(json_array_get(ids, 0));

    pthread_mutex_lock(&f->lock);
    fake_instance *inst = instance_locked(f, iid);
    if (inst == NULL || strcmp(inst->ping, "Online") != 0 || f->n_cmds == FAKE_SSM_MAX_COMMANDS) {
        pthread_mutex_unlock(&f->lock);
        free(script.p);
        ssm_error(resp, 400, "InvalidInstanceId", "Instances not in a valid state for account");
        return;
    }
    fake_cmd *c = calloc(1, sizeof(*c));
    if (c == NULL)
        abort();
    uint32_t k = ++f->next_cmd;
    snprintf(c->id, sizeof(c->id), "%08x-%04x-4%03x-8%03x-%012x", 0x5b5u + k, k & 0xffff, k & 0xfff,
             (k * 7u) & 0xfff, k);
    snprintf(c->instance, sizeof(c->instance), "%s", iid);
    c->created_ms = mono_ms();
    c->invisible_left = f->invisible_polls;
    c->exec_timeout_s = exec_timeout;
    c->exit_code = interpret_top(script.p != NULL ? script.p : "", cwd, &f->fs, &c->out);
    f->cmds[f->n_cmds++] = c;
    free(f->last_script);
    f->last_script = tb_take(&script);
    free(f->last_cwd);
    f->last_cwd = cwd != NULL ? strdup(cwd) : NULL;
    f->last_exec_timeout = (int64_t)exec_timeout;
    char id[40];
    snprintf(id, sizeof(id), "%s", c->id);
    pthread_mutex_unlock(&f->lock);
    ssm_ok(resp, json_pack("{s:{s:s,s:s,s:s,s:[s]}}", "Command", "CommandId", id, "DocumentName",
                           "AWS-RunShellScript", "Status", "Pending", "InstanceIds", iid));
}

static void op_get_invocation(ssm_fake *f, json_t *in, fake_response *resp)
{
    const char *cid = json_string_value(json_object_get(in, "CommandId"));
    const char *iid = json_string_value(json_object_get(in, "InstanceId"));
    if (cid == NULL || iid == NULL || strlen(cid) != 36) {
        ssm_error(resp, 400, "InvalidCommandId", "Command ID is not valid.");
        return;
    }
    pthread_mutex_lock(&f->lock);
    fake_cmd *c = cmd_locked(f, cid);
    if (c == NULL || strcmp(c->instance, iid) != 0) {
        pthread_mutex_unlock(&f->lock);
        ssm_error(resp, 400, "InvocationDoesNotExist",
                  "An error occurred (InvocationDoesNotExist)");
        return;
    }
    if (c->invisible_left > 0) {
        c->invisible_left--;
        pthread_mutex_unlock(&f->lock);
        ssm_error(resp, 400, "InvocationDoesNotExist",
                  "An error occurred (InvocationDoesNotExist)");
        return;
    }
    double elapsed = (double)(mono_ms() - c->created_ms) / 1000.0;
    const char *status, *details;
    int code = -1;
    double upto = elapsed;
    if (c->cancelled) {
        status = details = "Cancelled";
        upto = c->cancelled_at_s;
    } else if (c->out.clock > c->exec_timeout_s && elapsed >= c->exec_timeout_s) {
        status = "TimedOut";
        details = "ExecutionTimedOut";
        upto = c->exec_timeout_s;
    } else if (!c->pending_shown) {
        c->pending_shown = true;
        status = details = "Pending";
        upto = -1;
    } else if (elapsed < c->out.clock) {
        status = details = "InProgress";
    } else {
        code = c->exit_code;
        status = details = code == 0 ? "Success" : "Failed";
        upto = 1e18;
    }
    bool cut_o, cut_e;
    char *o = collect(&c->out, 1, upto, FAKE_SSM_STDOUT_CHARS, &cut_o);
    char *e = collect(&c->out, 2, upto, FAKE_SSM_STDERR_CHARS, &cut_e);
    json_t *j =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:s,s:s}", "CommandId", c->id, "InstanceId",
                  c->instance, "DocumentName", "AWS-RunShellScript", "PluginName",
                  "aws:runShellScript", "Status", status, "StatusDetails", details, "ResponseCode",
                  (json_int_t)code, "StandardOutputContent", o, "StandardErrorContent", e);
    pthread_mutex_unlock(&f->lock);
    free(o);
    free(e);
    ssm_ok(resp, j);
}

static void op_cancel(ssm_fake *f, json_t *in, fake_response *resp)
{
    const char *cid = json_string_value(json_object_get(in, "CommandId"));
    pthread_mutex_lock(&f->lock);
    fake_cmd *c = cid != NULL ? cmd_locked(f, cid) : NULL;
    if (c == NULL) {
        pthread_mutex_unlock(&f->lock);
        ssm_error(resp, 400, "InvalidCommandId", "Command ID is not valid.");
        return;
    }
    double elapsed = (double)(mono_ms() - c->created_ms) / 1000.0;
    if (!c->cancelled && elapsed < c->out.clock) {
        c->cancelled = true;
        c->cancelled_at_s = elapsed;
    }
    pthread_mutex_unlock(&f->lock);
    ssm_ok(resp, json_object());
}

static void op_describe(ssm_fake *f, json_t *in, fake_response *resp)
{
    json_t *want = NULL;
    size_t i;
    json_t *flt;
    json_array_foreach(json_object_get(in, "Filters"), i, flt)
    {
        const char *key = json_string_value(json_object_get(flt, "Key"));
        if (key != NULL && strcmp(key, "InstanceIds") == 0)
            want = json_object_get(flt, "Values");
    }
    json_t *list = json_array();
    pthread_mutex_lock(&f->lock);
    for (size_t k = 0; k < f->n_inst; k++) {
        bool match = want == NULL;
        size_t w;
        json_t *wv;
        json_array_foreach(want, w, wv)
        {
            if (json_is_string(wv) && strcmp(json_string_value(wv), f->inst[k].id) == 0)
                match = true;
        }
        if (match)
            json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "InstanceId",
                                                  f->inst[k].id, "PingStatus", f->inst[k].ping,
                                                  "PlatformType", f->inst[k].platform,
                                                  "PlatformName", "Amazon Linux", "AgentVersion",
                                                  "3.3.0.0", "ResourceType", "EC2Instance"));
    }
    pthread_mutex_unlock(&f->lock);
    ssm_ok(resp, json_pack("{s:o}", "InstanceInformationList", list));
}

static void ssm_handler(void *arg, const fake_request *r, fake_response *resp)
{
    ssm_fake *f = arg;
    const char *target = fake_request_header(r, "X-Amz-Target");
    const char *ctype = fake_request_header(r, "Content-Type");
    char akid[32] = "", code[64], why[256];
    if (!verify_sigv4(f, r, "ssm", akid, code, sizeof(code), why, sizeof(why))) {
        pthread_mutex_lock(&f->lock);
        f->signature_failures++;
        bool echo = f->echo_token;
        pthread_mutex_unlock(&f->lock);
        const char *tok = fake_request_header(r, "X-Amz-Security-Token");
        if (echo && tok != NULL) {
            size_t l = strlen(why);
            snprintf(why + l, sizeof(why) - l, " (token %.150s)", tok);
        }
        ssm_error(resp, strcmp(code, "UnrecognizedClientException") == 0 ? 400 : 403, code, why);
        return;
    }
    if (target == NULL || strncmp(target, "AmazonSSM.", 10) != 0) {
        ssm_error(resp, 400, "UnknownOperationException", "Unknown operation");
        return;
    }
    const char *op = target + 10;
    if (ctype == NULL || strcmp(ctype, "application/x-amz-json-1.1") != 0) {
        ssm_error(resp, 400, "SerializationException",
                  "Content-Type must be "
                  "application/x-amz-json-1.1");
        return;
    }
    pthread_mutex_lock(&f->lock);
    op_stat *s = op_locked(f, op);
    s->calls++;
    bool throttle = s->throttle_left > 0;
    if (throttle)
        s->throttle_left--;
    else
        snprintf(s->last_akid, sizeof(s->last_akid), "%s", akid);
    pthread_mutex_unlock(&f->lock);
    if (throttle) {
        ssm_error(resp, 400, "ThrottlingException", "Rate exceeded");
        return;
    }
    json_error_t jerr;
    json_t *in = json_loadb((const char *)r->body, r->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(in)) {
        json_decref(in);
        ssm_error(resp, 400, "SerializationException",
                  "Start of structure or map found where "
                  "not expected.");
        return;
    }
    if (strcmp(op, "SendCommand") == 0)
        op_send_command(f, in, resp);
    else if (strcmp(op, "GetCommandInvocation") == 0)
        op_get_invocation(f, in, resp);
    else if (strcmp(op, "CancelCommand") == 0)
        op_cancel(f, in, resp);
    else if (strcmp(op, "DescribeInstanceInformation") == 0)
        op_describe(f, in, resp);
    else
        ssm_error(resp, 400, "UnknownOperationException", "Unknown operation");
    json_decref(in);
}

/* ---- STS ---------------------------------------------------------------------------------- */

static void sts_error(fake_response *resp, int status, const char *code, const char *msg)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
             "  <Error>\n    <Type>Sender</Type>\n    <Code>%s</Code>\n    <Message>%s</Message>\n"
             "  </Error>\n  <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>\n"
             "</ErrorResponse>\n",
             code, msg);
    fake_response_status(resp, status);
    fake_response_header(resp, "Content-Type", "text/xml");
    fake_response_body(resp, body, strlen(body));
}

static int hexv(char c)
{
    return isdigit((unsigned char)c) ? c - '0' : (tolower((unsigned char)c) - 'a' + 10);
}

/* The decoded value of key in an x-www-form-urlencoded body (malloc'd) or NULL. */
static char *form_get(const char *body, size_t len, const char *key)
{
    size_t kl = strlen(key);
    const char *p = body, *end = body + len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        size_t n = amp != NULL ? (size_t)(amp - p) : (size_t)(end - p);
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            tbuf b = {0};
            for (size_t i = kl + 1; i < n; i++) {
                if (p[i] == '+')
                    tb_put(&b, " ", 1);
                else if (p[i] == '%' && i + 2 < n && isxdigit((unsigned char)p[i + 1]) &&
                         isxdigit((unsigned char)p[i + 2])) {
                    char ch = (char)(hexv(p[i + 1]) * 16 + hexv(p[i + 2]));
                    tb_put(&b, &ch, 1);
                    i += 2;
                } else
                    tb_put(&b, &p[i], 1);
            }
            return tb_take(&b);
        }
        p += n + (amp != NULL ? 1 : 0);
    }
    return NULL;
}

static void sts_handler(void *arg, const fake_request *r, fake_response *resp)
{
    ssm_fake *f = arg;
    char akid[32] = "", code[64], why[256];
    if (!verify_sigv4(f, r, "sts", akid, code, sizeof(code), why, sizeof(why))) {
        pthread_mutex_lock(&f->lock);
        f->signature_failures++;
        pthread_mutex_unlock(&f->lock);
        sts_error(resp, 403, code, why);
        return;
    }
    const char *body = (const char *)r->body;
    char *action = form_get(body, r->body_len, "Action");
    char *version = form_get(body, r->body_len, "Version");
    char *role = form_get(body, r->body_len, "RoleArn");
    char *session = form_get(body, r->body_len, "RoleSessionName");
    char *dur = form_get(body, r->body_len, "DurationSeconds");
    long duration = dur != NULL ? strtol(dur, NULL, 10) : 3600;
    bool session_ok = session != NULL && strlen(session) >= 2 && strlen(session) <= 64;
    for (const char *p = session; session_ok && *p; p++)
        if (!isalnum((unsigned char)*p) && strchr("_+=,.@-", *p) == NULL)
            session_ok = false;
    if (action == NULL || strcmp(action, "AssumeRole") != 0 || version == NULL ||
        strcmp(version, "2011-06-15") != 0) {
        sts_error(resp, 400, "InvalidAction", "Could not find operation for this version");
    } else if (role == NULL || strlen(role) < 20 || strlen(role) > 2048 || !session_ok ||
               duration < 900 || duration > 43200) {
        sts_error(resp, 400, "ValidationError",
                  "1 validation error detected: RoleArn, RoleSessionName or DurationSeconds "
                  "failed to satisfy constraint");
    } else {
        pthread_mutex_lock(&f->lock);
        op_stat *s = op_locked(f, "AssumeRole");
        s->calls++;
        snprintf(s->last_akid, sizeof(s->last_akid), "%s", akid);
        free(f->last_session_name);
        f->last_session_name = strdup(session);
        bool denied = false;
        for (size_t i = 0; i < f->n_denied; i++)
            if (strcmp(f->denied[i], role) == 0)
                denied = true;
        if (denied || f->n_issued == FAKE_SSM_MAX_ISSUED) {
            pthread_mutex_unlock(&f->lock);
            char msg[600];
            snprintf(msg, sizeof(msg),
                     "User: arn:aws:iam::123456789012:user/sbx-test is not authorized to perform: "
                     "sts:AssumeRole on resource: %.400s",
                     role);
            sts_error(resp, 403, "AccessDenied", msg);
        } else {
            issued_key *k = &f->issued[f->n_issued];
            size_t n = ++f->n_issued;
            snprintf(k->akid, sizeof(k->akid), "ASIAFAKE%08zu", n);
            snprintf(k->secret, sizeof(k->secret), "fakeSecret/%zu/%08lx+EXAMPLEKEY", n,
                     (unsigned long)(mono_ms() & 0xffffffff));
            snprintf(k->token, sizeof(k->token), "FQoGZXIvYXdzEFAKESESSIONTOKEN%zuAQoDYXdz/&<>", n);
            int64_t life = f->credential_lifetime_s > 0 ? f->credential_lifetime_s : duration;
            time_t exp = time(NULL) + (time_t)life;
            struct tm tm;
            gmtime_r(&exp, &tm);
            char exps[32];
            strftime(exps, sizeof(exps), "%Y-%m-%dT%H:%M:%SZ", &tm);
            /* The token holds XML specials on purpose: a client must unescape &amp; &lt; &gt;. */
            char token_xml[256];
            tbuf tx = {0};
            for (const char *p = k->token; *p; p++) {
                if (*p == '&')
                    tb_puts(&tx, "&amp;");
                else if (*p == '<')
                    tb_puts(&tx, "&lt;");
                else if (*p == '>')
                    tb_puts(&tx, "&gt;");
                else
                    tb_put(&tx, p, 1);
            }
            snprintf(token_xml, sizeof(token_xml), "%s", tx.p);
            free(tx.p);
            char xml[2048];
            snprintf(xml, sizeof(xml),
                     "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
                     "  <AssumeRoleResult>\n    <SourceIdentity>sbx</SourceIdentity>\n"
                     "    <AssumedRoleUser>\n      <Arn>%s/%s</Arn>\n"
                     "      <AssumedRoleId>AROA3XFRBF535PLBIFPI4:%s</AssumedRoleId>\n"
                     "    </AssumedRoleUser>\n    <Credentials>\n"
                     "      <AccessKeyId>%s</AccessKeyId>\n"
                     "      <SecretAccessKey>%s</SecretAccessKey>\n"
                     "      <SessionToken>%s</SessionToken>\n"
                     "      <Expiration>%s</Expiration>\n    </Credentials>\n"
                     "    <PackedPolicySize>6</PackedPolicySize>\n  </AssumeRoleResult>\n"
                     "  <ResponseMetadata>\n"
                     "    <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>\n"
                     "  </ResponseMetadata>\n</AssumeRoleResponse>\n",
                     role, session, session, k->akid, k->secret, token_xml, exps);
            pthread_mutex_unlock(&f->lock);
            fake_response_status(resp, 200);
            fake_response_header(resp, "Content-Type", "text/xml");
            fake_response_body(resp, xml, strlen(xml));
        }
    }
    free(action);
    free(version);
    free(role);
    free(session);
    free(dur);
}

/* ---- lifecycle and test hooks ------------------------------------------------------------- */

ssm_fake *ssm_fake_start(void)
{
    ssm_fake *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    pthread_mutex_init(&f->lock, NULL);
    f->invisible_polls = 1;
    f->ssm = fake_http_start();
    f->sts = fake_http_start();
    if (f->ssm == NULL || f->sts == NULL) {
        ssm_fake_stop(f);
        return NULL;
    }
    snprintf(f->ssm_url, sizeof(f->ssm_url), "%s/", fake_http_url(f->ssm));
    snprintf(f->sts_url, sizeof(f->sts_url), "%s/", fake_http_url(f->sts));
    /* A minimal Linux tree on the instance. */
    static const struct {
        const char *path;
        unsigned mode;
    } dirs[] = {{"/tmp", 01777}, {"/home", 0755}, {"/root", 0700}, {"/srv", 0755}, {"/var", 0755}};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        fs_add(&f->fs, dirs[i].path, true, dirs[i].mode);
    fake_http_route(f->ssm, "POST", "/", ssm_handler, f);
    fake_http_route(f->sts, "POST", "/", sts_handler, f);
    return f;
}

void ssm_fake_stop(ssm_fake *f)
{
    if (f == NULL)
        return;
    fake_http_stop(f->ssm);
    fake_http_stop(f->sts);
    for (size_t i = 0; i < f->n_cmds; i++) {
        interp_out_free(&f->cmds[i]->out);
        free(f->cmds[i]);
    }
    free(f->last_script);
    free(f->last_cwd);
    free(f->last_session_name);
    fs_free(&f->fs);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

const char *ssm_fake_ssm_url(const ssm_fake *f)
{
    return f->ssm_url;
}
const char *ssm_fake_sts_url(const ssm_fake *f)
{
    return f->sts_url;
}
fake_http *ssm_fake_ssm_http(ssm_fake *f)
{
    return f->ssm;
}
fake_http *ssm_fake_sts_http(ssm_fake *f)
{
    return f->sts;
}

void ssm_fake_add_instance(ssm_fake *f, const char *id, const char *ping, const char *platform)
{
    pthread_mutex_lock(&f->lock);
    fake_instance *in = instance_locked(f, id);
    if (in == NULL && f->n_inst < FAKE_SSM_MAX_INSTANCES)
        in = &f->inst[f->n_inst++];
    if (in != NULL) {
        snprintf(in->id, sizeof(in->id), "%s", id);
        snprintf(in->ping, sizeof(in->ping), "%s", ping != NULL ? ping : "Online");
        snprintf(in->platform, sizeof(in->platform), "%s", platform != NULL ? platform : "Linux");
    }
    pthread_mutex_unlock(&f->lock);
}

void ssm_fake_set_invisible_polls(ssm_fake *f, int polls)
{
    pthread_mutex_lock(&f->lock);
    f->invisible_polls = polls;
    pthread_mutex_unlock(&f->lock);
}

void ssm_fake_throttle(ssm_fake *f, const char *operation, int n)
{
    pthread_mutex_lock(&f->lock);
    op_locked(f, operation)->throttle_left = n;
    pthread_mutex_unlock(&f->lock);
}

void ssm_fake_deny_role(ssm_fake *f, const char *role_arn)
{
    pthread_mutex_lock(&f->lock);
    if (f->n_denied < FAKE_SSM_MAX_DENIED)
        snprintf(f->denied[f->n_denied++], 256, "%s", role_arn);
    pthread_mutex_unlock(&f->lock);
}

void ssm_fake_echo_token_in_errors(ssm_fake *f, bool on)
{
    pthread_mutex_lock(&f->lock);
    f->echo_token = on;
    pthread_mutex_unlock(&f->lock);
}

void ssm_fake_set_credential_lifetime(ssm_fake *f, int64_t seconds)
{
    pthread_mutex_lock(&f->lock);
    f->credential_lifetime_s = seconds;
    pthread_mutex_unlock(&f->lock);
}

int ssm_fake_calls(ssm_fake *f, const char *operation)
{
    pthread_mutex_lock(&f->lock);
    int n = 0;
    for (size_t i = 0; i < f->n_ops; i++)
        if (strcmp(f->ops[i].name, operation) == 0)
            n = f->ops[i].calls;
    pthread_mutex_unlock(&f->lock);
    return n;
}

int ssm_fake_signature_failures(ssm_fake *f)
{
    pthread_mutex_lock(&f->lock);
    int n = f->signature_failures;
    pthread_mutex_unlock(&f->lock);
    return n;
}

static bool copy_out(ssm_fake *f, const char *src, char *out, size_t n)
{
    bool ok = src != NULL;
    snprintf(out, n, "%s", ok ? src : "");
    pthread_mutex_unlock(&f->lock);
    return ok;
}

bool ssm_fake_last_access_key(ssm_fake *f, const char *operation, char *out, size_t n)
{
    pthread_mutex_lock(&f->lock);
    const char *v = NULL;
    for (size_t i = 0; i < f->n_ops; i++)
        if (strcmp(f->ops[i].name, operation) == 0 && f->ops[i].last_akid[0])
            v = f->ops[i].last_akid;
    return copy_out(f, v, out, n);
}

bool ssm_fake_last_script(ssm_fake *f, char *out, size_t n)
{
    pthread_mutex_lock(&f->lock);
    return copy_out(f, f->last_script, out, n);
}

bool ssm_fake_last_working_directory(ssm_fake *f, char *out, size_t n)
{
    pthread_mutex_lock(&f->lock);
    return copy_out(f, f->last_cwd, out, n);
}

int64_t ssm_fake_last_execution_timeout(ssm_fake *f)
{
    pthread_mutex_lock(&f->lock);
    int64_t v = f->last_exec_timeout;
    pthread_mutex_unlock(&f->lock);
    return v;
}

bool ssm_fake_last_role_session_name(ssm_fake *f, char *out, size_t n)
{
    pthread_mutex_lock(&f->lock);
    return copy_out(f, f->last_session_name, out, n);
}

bool ssm_fake_last_status(ssm_fake *f, char *out, size_t n)
{
    pthread_mutex_lock(&f->lock);
    const char *v = NULL;
    if (f->n_cmds > 0) {
        fake_cmd *c = f->cmds[f->n_cmds - 1];
        double elapsed = (double)(mono_ms() - c->created_ms) / 1000.0;
        v = c->cancelled             ? "Cancelled"
            : elapsed < c->out.clock ? "InProgress"
            : c->exit_code == 0      ? "Success"
                                     : "Failed";
    }
    return copy_out(f, v, out, n);
}
