/* fake_interp.c - the fake provider's tiny deterministic interpreter, so engine, broker and
 * replay tests see real-looking, reproducible program behaviour without running anything.
 *
 * Commands (argv, or a shell line split on ';', newlines and '&&'):
 *   echo ARGS...     stdout: ARGS joined by spaces, then "\n"
 *   warn ARGS...     the same on stderr
 *   exit N           stop with exit code N          true / false   exit 0 / 1
 *   sleep MS         sleep MS milliseconds (deadline-aware: TIMED_OUT at the deadline)
 *   cat PATH         a file written earlier         yes N          N lines "y"
 *   kill SIG         end as killed by signal SIG    pwd            "/workspace"
 *   printenv NAME    the value of NAME from the request's env
 *   anything else    stderr "fake: NAME: command not found", exit 127
 * Code (python and any other declared language but bash, which runs as commands): one
 * statement per line -- print(e, ...), NAME = e, exit(n), sleep(ms), raise Name("msg"),
 * import (ignored) or a bare expression, whose repr becomes result.value when it is the last
 * line. Expressions: integers, 'strings', variables (kept between calls: the fake is
 * stateful), + - * / // % (integer), parentheses, len(), str(), int(). Errors end the program
 * with a Python-style traceback on stderr and exit code 1.
 * This file must not touch the provider's bookkeeping (fake.c) or anything outside the box.
 */
#include "providers/fake/fake_internal.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Longest shell line or code text interpreted: the contract's own bounds are 8-16 KiB; 64 KiB
 * leaves room for generated test programs. */
#define FAKE_PROGRAM_MAX (64u * 1024u)

/* Most words in one command: far beyond any test, bounds the token array. */
#define FAKE_ARGS_MAX 256

/* Most lines printed by `yes N`: enough to overflow any output limit a test sets. */
#define FAKE_YES_MAX 1000000

/* ---- output ------------------------------------------------------------------------------- */

typedef struct fake_out {
    sbx_result *res;
    const sbx_exec_opts *o;
} fake_out;

static void emit(fake_out *w, Sbx__V1__Stream stream, const char *data, size_t len)
{
    bool is_out = stream == SBX__V1__STREAM__STREAM_STDOUT;
    ProtobufCBinaryData *buf = is_out ? &w->res->stdout : &w->res->stderr;
    protobuf_c_boolean *trunc = is_out ? &w->res->stdout_truncated : &w->res->stderr_truncated;
    uint64_t limit = w->o->output_limit_bytes;
    uint64_t offset = buf->len;
    if (limit > 0 && buf->len + len > limit) {
        *trunc = 1;
        len = buf->len >= limit ? 0 : (size_t)(limit - buf->len);
    }
    if (len == 0)
        return;
    sbx_append_bytes(buf, data, len);
    if (w->o->on_output != NULL)
        w->o->on_output(w->o->on_output_arg, stream, (const uint8_t *)data, len, offset);
}

static void emitf(fake_out *w, Sbx__V1__Stream stream, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void emitf(fake_out *w, Sbx__V1__Stream stream, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n > 0)
        emit(w, stream, text, (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1);
}

static void set_exit(sbx_result *r, int code)
{
    r->exit_code = code;
    r->outcome = code == 0 ? SBX__V1__OUTCOME__OUTCOME_OK : SBX__V1__OUTCOME__OUTCOME_NONZERO;
}

bool fake_sleep_ms(int64_t ms, const sbx_exec_opts *o)
{
    int64_t end = sbx_monotonic_ms() + ms;
    for (;;) {
        int64_t now = sbx_monotonic_ms();
        if (o->cancel != NULL && *o->cancel)
            return false;
        if (o->deadline_mono_ms > 0 && now >= o->deadline_mono_ms)
            return false;
        if (now >= end)
            return true;
        int64_t step = end - now;
        if (o->deadline_mono_ms > 0 && o->deadline_mono_ms - now < step)
            step = o->deadline_mono_ms - now;
        if (step > 10) /* wake up to notice cancellation */
            step = 10;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)step * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static bool parse_i64(const char *s, int64_t *v)
{
    if (s == NULL || *s == '\0')
        return false;
    errno = 0;
    char *end = NULL;
    long long x = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *v = x;
    return true;
}

/* ---- commands ----------------------------------------------------------------------------- */

typedef enum { CMD_NEXT, CMD_STOP, CMD_TIMEOUT } cmd_flow;

static const char *env_get(const Sbx__V1__RunCommand *op, const char *name)
{
    for (size_t i = 0; op != NULL && i < op->n_env; i++)
        if (strcmp(op->env[i]->key, name) == 0)
            return op->env[i]->value;
    return NULL;
}

static cmd_flow run_argv(fake_box *b, int argc, char **argv, const Sbx__V1__RunCommand *op,
                         fake_out *w)
{
    sbx_result *r = w->res;
    const char *cmd = argv[0];
    if (strcmp(cmd, "echo") == 0 || strcmp(cmd, "warn") == 0) {
        Sbx__V1__Stream s =
            cmd[0] == 'e' ? SBX__V1__STREAM__STREAM_STDOUT : SBX__V1__STREAM__STREAM_STDERR;
        for (int i = 1; i < argc; i++) {
            if (i > 1)
                emit(w, s, " ", 1);
            emit(w, s, argv[i], strlen(argv[i]));
        }
        emit(w, s, "\n", 1);
        set_exit(r, 0);
        return CMD_NEXT;
    }
    if (strcmp(cmd, "true") == 0 || strcmp(cmd, "false") == 0) {
        set_exit(r, cmd[0] == 'f');
        return CMD_NEXT;
    }
    if (strcmp(cmd, "exit") == 0) {
        int64_t code = 0;
        if (argc > 1 && !parse_i64(argv[1], &code))
            code = 2;
        set_exit(r, (int)(code & 0xff));
        return CMD_STOP;
    }
    if (strcmp(cmd, "sleep") == 0) {
        int64_t ms = 0;
        if (argc < 2 || !parse_i64(argv[1], &ms) || ms < 0) {
            emitf(w, SBX__V1__STREAM__STREAM_STDERR, "sleep: invalid time interval\n");
            set_exit(r, 1);
            return CMD_NEXT;
        }
        if (!fake_sleep_ms(ms, w->o))
            return CMD_TIMEOUT;
        set_exit(r, 0);
        return CMD_NEXT;
    }
    if (strcmp(cmd, "cat") == 0) {
        int code = 0;
        for (int i = 1; i < argc; i++) {
            fake_file *f = fake_file_find(b, argv[i]);
            if (f == NULL) {
                emitf(w, SBX__V1__STREAM__STREAM_STDERR, "cat: %s: No such file or directory\n",
                      argv[i]);
                code = 1;
            } else {
                emit(w, SBX__V1__STREAM__STREAM_STDOUT, (const char *)f->data, f->len);
            }
        }
        set_exit(r, code);
        return CMD_NEXT;
    }
    if (strcmp(cmd, "yes") == 0) {
        int64_t n = 0;
        if (argc < 2 || !parse_i64(argv[1], &n) || n < 0 || n > FAKE_YES_MAX)
            n = 0;
        for (int64_t i = 0; i < n && !r->stdout_truncated; i++)
            emit(w, SBX__V1__STREAM__STREAM_STDOUT, "y\n", 2);
        set_exit(r, 0);
        return CMD_NEXT;
    }
    if (strcmp(cmd, "kill") == 0) {
        int64_t sig = 9;
        if (argc > 1 && (!parse_i64(argv[1], &sig) || sig < 1 || sig > 64))
            sig = 9;
        r->exit_code = 0;
        r->signal = (int32_t)sig;
        r->outcome = SBX__V1__OUTCOME__OUTCOME_SIGNALED;
        return CMD_STOP;
    }
    if (strcmp(cmd, "pwd") == 0) {
        emitf(w, SBX__V1__STREAM__STREAM_STDOUT, "/workspace\n");
        set_exit(r, 0);
        return CMD_NEXT;
    }
    if (strcmp(cmd, "printenv") == 0) {
        const char *v = argc > 1 ? env_get(op, argv[1]) : NULL;
        if (v != NULL)
            emitf(w, SBX__V1__STREAM__STREAM_STDOUT, "%s\n", v);
        set_exit(r, v != NULL ? 0 : 1);
        return CMD_NEXT;
    }
    emitf(w, SBX__V1__STREAM__STREAM_STDERR, "fake: %s: command not found\n", cmd);
    set_exit(r, 127);
    return CMD_NEXT;
}

/* Splits one command's words (whitespace; '...' and "..." quote) in place. */
static int split_words(char *s, char **argv, int max)
{
    int argc = 0;
    char *p = s;
    while (*p != '\0' && argc < max) {
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0')
            break;
        char *dst = p;
        argv[argc++] = dst;
        while (*p != '\0' && !isspace((unsigned char)*p)) {
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                while (*p != '\0' && *p != q)
                    *dst++ = *p++;
                if (*p == q)
                    p++;
            } else {
                *dst++ = *p++;
            }
        }
        if (*p != '\0')
            p++;
        *dst = '\0';
    }
    return argc;
}

static sbx_status finish_timeout(fake_out *w, sbx_error *err)
{
    w->res->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
    w->res->exit_code = 0;
    w->res->signal = 9;
    if (w->o->cancel != NULL && *w->o->cancel)
        return sbx_error_set(err, SBX_E_TIMEOUT, "fake: execution cancelled");
    return sbx_error_set(err, SBX_E_TIMEOUT,
                         "fake: execution exceeded its deadline and was killed");
}

static sbx_status run_shell(fake_box *b, const char *line, const Sbx__V1__RunCommand *op,
                            fake_out *w, sbx_error *err)
{
    size_t len = strlen(line);
    if (len > FAKE_PROGRAM_MAX) {
        emitf(w, SBX__V1__STREAM__STREAM_STDERR, "fake: program longer than %u bytes\n",
              FAKE_PROGRAM_MAX);
        set_exit(w->res, 2);
        return SBX_OK;
    }
    char *copy = strdup(line);
    if (copy == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "fake: out of memory");
    set_exit(w->res, 0);
    char *p = copy;
    bool only_if_ok = false;
    while (p != NULL && *p != '\0') {
        /* Cut the next command at ';', newline or '&&'. */
        char *end = p;
        bool next_and = false;
        while (*end != '\0' && *end != ';' && *end != '\n' && !(end[0] == '&' && end[1] == '&'))
            end++;
        char *next = NULL;
        if (*end != '\0') {
            next_and = end[0] == '&';
            next = end + (next_and ? 2 : 1);
            *end = '\0';
        }
        char *argv[FAKE_ARGS_MAX];
        int argc = split_words(p, argv, FAKE_ARGS_MAX);
        if (argc > 0 && !(only_if_ok && w->res->exit_code != 0)) {
            cmd_flow f = run_argv(b, argc, argv, op, w);
            if (f == CMD_TIMEOUT) {
                free(copy);
                return finish_timeout(w, err);
            }
            if (f == CMD_STOP)
                break;
        }
        only_if_ok = next_and;
        p = next;
    }
    free(copy);
    return SBX_OK;
}

sbx_status fake_run_command(fake_box *b, const Sbx__V1__RunCommand *op, const sbx_exec_opts *o,
                            sbx_result *res, sbx_error *err)
{
    fake_out w = {res, o};
    if (op->n_argv > 0) {
        char *argv[FAKE_ARGS_MAX];
        int argc = 0;
        for (size_t i = 0; i < op->n_argv && argc < FAKE_ARGS_MAX; i++)
            argv[argc++] = op->argv[i];
        /* `sh -c LINE` runs LINE as a shell line, like a real box would. */
        if (argc == 3 &&
            (strcmp(argv[0], "sh") == 0 || strcmp(argv[0], "bash") == 0 ||
             strcmp(argv[0], "/bin/sh") == 0) &&
            strcmp(argv[1], "-c") == 0)
            return run_shell(b, argv[2], op, &w, err);
        set_exit(res, 0);
        cmd_flow f = run_argv(b, argc, argv, op, &w);
        return f == CMD_TIMEOUT ? finish_timeout(&w, err) : SBX_OK;
    }
    return run_shell(b, op->shell, op, &w, err);
}

/* ---- the python-ish interpreter ----------------------------------------------------------- */

void fake_value_free(fake_value *v)
{
    if (v->is_str)
        free(v->str);
    v->str = NULL;
    v->is_str = false;
}

typedef struct py {
    fake_box *b;
    const char *p;
    bool failed;
    char exc[64];
    char msg[256];
} py;

static void py_raise(py *x, const char *exc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void py_raise(py *x, const char *exc, const char *fmt, ...)
{
    if (x->failed)
        return;
    x->failed = true;
    snprintf(x->exc, sizeof(x->exc), "%s", exc);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
    va_end(ap);
}

static void skip_ws(py *x)
{
    while (*x->p == ' ' || *x->p == '\t')
        x->p++;
}

static bool accept(py *x, const char *tok)
{
    skip_ws(x);
    size_t n = strlen(tok);
    if (strncmp(x->p, tok, n) != 0)
        return false;
    x->p += n;
    return true;
}

static size_t ident_len(const char *p)
{
    size_t n = 0;
    if (!(isalpha((unsigned char)p[0]) || p[0] == '_'))
        return 0;
    while (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '.')
        n++;
    return n;
}

static fake_var *var_find(fake_box *b, const char *name, size_t len)
{
    for (size_t i = 0; i < b->n_vars; i++)
        if (strlen(b->vars[i].name) == len && strncmp(b->vars[i].name, name, len) == 0)
            return &b->vars[i];
    return NULL;
}

static bool value_dup(const fake_value *src, fake_value *dst)
{
    *dst = *src;
    if (src->is_str) {
        dst->str = strdup(src->str);
        return dst->str != NULL;
    }
    return true;
}

static char *value_str(const fake_value *v)
{
    if (v->is_str)
        return strdup(v->str);
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v->num);
    return strdup(buf);
}

static char *value_repr(const fake_value *v)
{
    if (!v->is_str)
        return value_str(v);
    size_t n = strlen(v->str);
    char *s = malloc(n + 3);
    if (s != NULL)
        snprintf(s, n + 3, "'%s'", v->str);
    return s;
}

static bool parse_expr(py *x, fake_value *out);

static bool parse_call_arg(py *x, fake_value *v)
{
    if (!parse_expr(x, v))
        return false;
    if (!accept(x, ")")) {
        fake_value_free(v);
        py_raise(x, "SyntaxError", "expected ')'");
        return false;
    }
    return true;
}

static bool parse_primary(py *x, fake_value *out)
{
    skip_ws(x);
    out->is_str = false;
    out->num = 0;
    out->str = NULL;
    const char *p = x->p;
    if (isdigit((unsigned char)*p)) {
        errno = 0;
        char *end = NULL;
        long long n = strtoll(p, &end, 10);
        if (errno != 0) {
            py_raise(x, "OverflowError", "integer too large");
            return false;
        }
        out->num = n;
        x->p = end;
        return true;
    }
    if (*p == '\'' || *p == '"') {
        char q = *p++;
        const char *start = p;
        while (*p != '\0' && *p != q)
            p++;
        if (*p != q) {
            py_raise(x, "SyntaxError", "unterminated string literal");
            return false;
        }
        out->is_str = true;
        out->str = strndup(start, (size_t)(p - start));
        x->p = p + 1;
        return out->str != NULL;
    }
    if (*p == '(') {
        x->p++;
        return parse_call_arg(x, out);
    }
    size_t n = ident_len(p);
    if (n == 0) {
        py_raise(x, "SyntaxError", "invalid syntax");
        return false;
    }
    x->p = p + n;
    skip_ws(x);
    if (*x->p == '(') {
        x->p++;
        fake_value arg;
        if (!parse_call_arg(x, &arg))
            return false;
        bool ok = true;
        if (n == 3 && strncmp(p, "len", 3) == 0) {
            if (!arg.is_str) {
                py_raise(x, "TypeError", "object of type 'int' has no len()");
                ok = false;
            } else {
                out->num = (int64_t)strlen(arg.str);
            }
        } else if (n == 3 && strncmp(p, "str", 3) == 0) {
            out->is_str = true;
            out->str = value_str(&arg);
            ok = out->str != NULL;
        } else if (n == 3 && strncmp(p, "int", 3) == 0) {
            if (arg.is_str && !parse_i64(arg.str, &out->num)) {
                py_raise(x, "ValueError", "invalid literal for int() with base 10: '%.64s'",
                         arg.str);
                ok = false;
            } else if (!arg.is_str) {
                out->num = arg.num;
            }
        } else {
            py_raise(x, "NameError", "name '%.*s' is not defined", (int)n, p);
            ok = false;
        }
        fake_value_free(&arg);
        return ok;
    }
    fake_var *v = var_find(x->b, p, n);
    if (v == NULL) {
        py_raise(x, "NameError", "name '%.*s' is not defined", (int)n, p);
        return false;
    }
    return value_dup(&v->v, out);
}

static bool parse_unary(py *x, fake_value *out)
{
    if (accept(x, "-")) {
        if (!parse_unary(x, out))
            return false;
        if (out->is_str) {
            fake_value_free(out);
            py_raise(x, "TypeError", "bad operand type for unary -: 'str'");
            return false;
        }
        if (out->num == INT64_MIN) {
            py_raise(x, "OverflowError", "integer overflow");
            return false;
        }
        out->num = -out->num;
        return true;
    }
    return parse_primary(x, out);
}

static bool arith(py *x, char op, fake_value *a, fake_value *b)
{
    if (op == '+' && a->is_str && b->is_str) {
        size_t la = strlen(a->str), lb = strlen(b->str);
        if (la + lb > FAKE_STRING_MAX) {
            py_raise(x, "MemoryError", "string longer than %u bytes", FAKE_STRING_MAX);
            return false;
        }
        char *s = realloc(a->str, la + lb + 1);
        if (s == NULL)
            return false;
        memcpy(s + la, b->str, lb + 1);
        a->str = s;
        return true;
    }
    if (op == '*' && (a->is_str != b->is_str)) {
        fake_value *s = a->is_str ? a : b, *n = a->is_str ? b : a;
        size_t ls = strlen(s->str);
        int64_t times = n->num < 0 ? 0 : n->num;
        if (ls > 0 && (uint64_t)times > FAKE_STRING_MAX / ls) {
            py_raise(x, "MemoryError", "string longer than %u bytes", FAKE_STRING_MAX);
            return false;
        }
        char *r = malloc(ls * (size_t)times + 1);
        if (r == NULL)
            return false;
        for (int64_t i = 0; i < times; i++)
            memcpy(r + ls * (size_t)i, s->str, ls);
        r[ls * (size_t)times] = '\0';
        fake_value_free(a);
        a->is_str = true;
        a->str = r;
        return true;
    }
    if (a->is_str || b->is_str) {
        py_raise(x, "TypeError", "unsupported operand type(s) for %c: '%s' and '%s'", op,
                 a->is_str ? "str" : "int", b->is_str ? "str" : "int");
        return false;
    }
    int64_t r = 0;
    bool overflow = false;
    switch (op) {
    case '+': overflow = __builtin_add_overflow(a->num, b->num, &r); break;
    case '-': overflow = __builtin_sub_overflow(a->num, b->num, &r); break;
    case '*': overflow = __builtin_mul_overflow(a->num, b->num, &r); break;
    default:
        if (b->num == 0) {
            py_raise(x, "ZeroDivisionError",
                     op == '%' ? "integer modulo by zero" : "division by zero");
            return false;
        }
        if (a->num == INT64_MIN && b->num == -1) {
            overflow = true;
            break;
        }
        if (op == '%') {
            r = a->num % b->num;
            if (r != 0 && ((r < 0) != (b->num < 0)))
                r += b->num; /* Python's modulo takes the divisor's sign */
        } else {
            r = a->num / b->num;
            if ((a->num % b->num != 0) && ((a->num < 0) != (b->num < 0)))
                r--; /* floor division */
        }
    }
    if (overflow) {
        py_raise(x, "OverflowError", "integer overflow");
        return false;
    }
    a->num = r;
    return true;
}

static bool parse_term(py *x, fake_value *out)
{
    if (!parse_unary(x, out))
        return false;
    for (;;) {
        char op;
        if (accept(x, "//") || accept(x, "/"))
            op = '/';
        else if (accept(x, "*"))
            op = '*';
        else if (accept(x, "%"))
            op = '%';
        else
            return true;
        fake_value rhs;
        if (!parse_unary(x, &rhs) || !arith(x, op, out, &rhs)) {
            fake_value_free(out);
            if (!x->failed)
                fake_value_free(&rhs);
            else
                fake_value_free(&rhs);
            return false;
        }
        fake_value_free(&rhs);
    }
}

static bool parse_expr(py *x, fake_value *out)
{
    if (!parse_term(x, out))
        return false;
    for (;;) {
        char op;
        if (accept(x, "+"))
            op = '+';
        else if (accept(x, "-"))
            op = '-';
        else
            return true;
        fake_value rhs = {0};
        if (!parse_term(x, &rhs) || !arith(x, op, out, &rhs)) {
            fake_value_free(out);
            fake_value_free(&rhs);
            return false;
        }
        fake_value_free(&rhs);
    }
}

static bool at_end(py *x)
{
    skip_ws(x);
    return *x->p == '\0' || *x->p == '#';
}

static bool var_set(py *x, const char *name, size_t len, fake_value *v)
{
    fake_var *var = var_find(x->b, name, len);
    if (var != NULL) {
        fake_value_free(&var->v);
        var->v = *v;
        return true;
    }
    if (x->b->n_vars >= FAKE_VARS_MAX) {
        py_raise(x, "MemoryError", "more than %d variables", FAKE_VARS_MAX);
        fake_value_free(v);
        return false;
    }
    fake_var *grown = realloc(x->b->vars, (x->b->n_vars + 1) * sizeof(*grown));
    char *copy = strndup(name, len);
    if (grown == NULL || copy == NULL) {
        if (grown != NULL)
            x->b->vars = grown;
        free(copy);
        fake_value_free(v);
        return false;
    }
    x->b->vars = grown;
    grown[x->b->n_vars].name = copy;
    grown[x->b->n_vars].v = *v;
    x->b->n_vars++;
    return true;
}

typedef enum { ST_OK, ST_EXIT, ST_ERROR, ST_TIMEOUT } stmt_flow;

/* Runs one statement line. *value (when not NULL) gets the repr of a bare expression. */
/* Long because it is the fake interpreter's statement dispatch, one branch per statement form it
 * understands. */
static stmt_flow run_stmt(py *x, fake_out *w, char **value, int *exit_code)
{
    skip_ws(x);
    if (at_end(x))
        return ST_OK;
    if (strncmp(x->p, "import ", 7) == 0 || strncmp(x->p, "from ", 5) == 0)
        return ST_OK;
    if (accept(x, "print(")) {
        bool first = true;
        skip_ws(x);
        if (!accept(x, ")")) {
            for (;;) {
                fake_value v;
                if (!parse_expr(x, &v))
                    return ST_ERROR;
                char *s = value_str(&v);
                fake_value_free(&v);
                if (!first)
                    emit(w, SBX__V1__STREAM__STREAM_STDOUT, " ", 1);
                if (s != NULL)
                    emit(w, SBX__V1__STREAM__STREAM_STDOUT, s, strlen(s));
                free(s);
                first = false;
                if (accept(x, ")"))
                    break;
                if (!accept(x, ",")) {
                    py_raise(x, "SyntaxError", "expected ',' or ')' in print()");
                    return ST_ERROR;
                }
            }
        }
        emit(w, SBX__V1__STREAM__STREAM_STDOUT, "\n", 1);
    } else if (accept(x, "exit(") || accept(x, "sys.exit(")) {
        fake_value v = {0};
        if (!accept(x, ")") && !parse_call_arg(x, &v))
            return ST_ERROR;
        *exit_code = v.is_str ? 1 : (int)(v.num & 0xff);
        if (v.is_str)
            emitf(w, SBX__V1__STREAM__STREAM_STDERR, "%s\n", v.str);
        fake_value_free(&v);
        return ST_EXIT;
    } else if (accept(x, "sleep(") || accept(x, "time.sleep(")) {
        fake_value v;
        if (!parse_call_arg(x, &v))
            return ST_ERROR;
        int64_t ms = v.is_str ? 0 : v.num;
        fake_value_free(&v);
        if (ms > 0 && !fake_sleep_ms(ms, w->o))
            return ST_TIMEOUT;
    } else if (accept(x, "raise ")) {
        skip_ws(x);
        size_t n = ident_len(x->p);
        if (n == 0 || n >= sizeof(x->exc)) {
            py_raise(x, "SyntaxError", "invalid syntax");
            return ST_ERROR;
        }
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)n, x->p);
        x->p += n;
        char msg[256] = "";
        if (accept(x, "(")) {
            fake_value v = {0};
            if (!accept(x, ")")) {
                if (!parse_call_arg(x, &v))
                    return ST_ERROR;
                char *s = value_str(&v);
                snprintf(msg, sizeof(msg), "%s", s != NULL ? s : "");
                free(s);
                fake_value_free(&v);
            }
        }
        py_raise(x, name, "%s", msg);
        return ST_ERROR;
    } else {
        /* NAME = expr, or a bare expression. */
        size_t n = ident_len(x->p);
        const char *name = x->p;
        const char *after = x->p + n;
        while (*after == ' ' || *after == '\t')
            after++;
        if (n > 0 && after[0] == '=' && after[1] != '=') {
            x->p = after + 1;
            fake_value v;
            if (!parse_expr(x, &v))
                return ST_ERROR;
            if (!at_end(x)) {
                fake_value_free(&v);
                py_raise(x, "SyntaxError", "invalid syntax");
                return ST_ERROR;
            }
            return var_set(x, name, n, &v) ? ST_OK : ST_ERROR;
        }
        fake_value v;
        if (!parse_expr(x, &v))
            return ST_ERROR;
        if (value != NULL) {
            free(*value);
            *value = value_repr(&v);
        }
        fake_value_free(&v);
    }
    if (!at_end(x)) {
        py_raise(x, "SyntaxError", "invalid syntax");
        return ST_ERROR;
    }
    return ST_OK;
}

sbx_status fake_run_code(fake_box *b, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                         sbx_result *res, sbx_error *err)
{
    if (strcmp(op->language, "bash") == 0 || strcmp(op->language, "sh") == 0) {
        Sbx__V1__RunCommand cmd = SBX__V1__RUN_COMMAND__INIT;
        cmd.shell = op->code;
        fake_out w = {res, o};
        return run_shell(b, op->code, &cmd, &w, err);
    }
    fake_out w = {res, o};
    size_t len = strlen(op->code);
    if (len > FAKE_PROGRAM_MAX) {
        emitf(&w, SBX__V1__STREAM__STREAM_STDERR, "SyntaxError: program longer than %u bytes\n",
              FAKE_PROGRAM_MAX);
        set_exit(res, 1);
        return SBX_OK;
    }
    char *code = strdup(op->code);
    if (code == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "fake: out of memory");
    /* Index of the last non-empty, non-comment line: its bare expression becomes the value. */
    int lines = 0, last = -1;
    for (char *p = code;; lines++) {
        char *nl = strchr(p, '\n');
        const char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '\0' && *q != '\n' && *q != '#')
            last = lines;
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    set_exit(res, 0);
    char *value = NULL;
    int exit_code = 0;
    stmt_flow flow = ST_OK;
    py x = {.b = b};
    char *p = code;
    int line = 0;
    for (; p != NULL && flow == ST_OK; line++) {
        char *nl = strchr(p, '\n');
        if (nl != NULL)
            *nl = '\0';
        x.p = p;
        flow = run_stmt(&x, &w, line == last ? &value : NULL, &exit_code);
        p = nl != NULL ? nl + 1 : NULL;
    }
    free(code);
    sbx_status st = SBX_OK;
    switch (flow) {
    case ST_OK:
        if (value != NULL)
            sbx_set_string(&res->value, value);
        break;
    case ST_EXIT: set_exit(res, exit_code); break;
    case ST_ERROR:
        emitf(&w, SBX__V1__STREAM__STREAM_STDERR,
              "Traceback (most recent call last):\n  File \"<stdin>\", line %d, in "
              "<module>\n%s%s%s\n",
              line, x.exc[0] ? x.exc : "RuntimeError", x.msg[0] ? ": " : "", x.msg);
        set_exit(res, 1);
        break;
    case ST_TIMEOUT: st = finish_timeout(&w, err); break;
    }
    free(value);
    return st;
}
