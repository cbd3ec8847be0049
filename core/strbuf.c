/* strbuf.c - the growable string (strbuf.h). */
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sbx_strbuf_reserve(sbx_strbuf *b, size_t n)
{
    if (b->oom)
        return false;
    if (n > SIZE_MAX / 2 - b->len) {
        b->oom = true;
        return false;
    }
    if (b->len + n + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void sbx_strbuf_put(sbx_strbuf *b, const void *s, size_t n)
{
    if (!sbx_strbuf_reserve(b, n))
        return;
    if (n > 0)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sbx_strbuf_puts(sbx_strbuf *b, const char *s)
{
    sbx_strbuf_put(b, s, strlen(s));
}

void sbx_strbuf_putc(sbx_strbuf *b, char c)
{
    sbx_strbuf_put(b, &c, 1);
}

void sbx_strbuf_printf(sbx_strbuf *b, const char *fmt, ...)
{
    /* Formatted in place when it fits (one vsnprintf, the usual case), else again after
     * growing to the size the first pass reported. */
    for (int pass = 0; pass < 2 && !b->oom; pass++) {
        size_t room = b->p != NULL ? b->cap - b->len : 0;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(room > 0 ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
        } else if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        } else if (!sbx_strbuf_reserve(b, (size_t)n)) {
            break;
        }
    }
    if (b->p != NULL)
        b->p[b->len] = '\0'; /* a cut first pass is not part of the text */
}

void sbx_strbuf_shell_quote(sbx_strbuf *b, const char *s, size_t n)
{
    sbx_strbuf_putc(b, '\'');
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\'') {
            sbx_strbuf_put(b, s + start, i - start);
            sbx_strbuf_put(b, "'\\''", 4);
            start = i + 1;
        }
    }
    sbx_strbuf_put(b, s + start, n - start);
    sbx_strbuf_putc(b, '\'');
}

bool sbx_shell_name_ok(const char *name)
{
    if (name == NULL || name[0] == '\0' || (name[0] >= '0' && name[0] <= '9'))
        return false;
    for (const char *p = name; *p != '\0'; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

char *sbx_strbuf_take(sbx_strbuf *b)
{
    char *p = b->oom ? NULL : b->p != NULL ? b->p : strdup("");
    if (b->oom)
        free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = false;
    return p;
}

void sbx_strbuf_free(sbx_strbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}

void sbx_list_add(char *buf, size_t cap, const char *item)
{
    size_t off = strnlen(buf, cap);
    if (off + 1 >= cap)
        return;
    snprintf(buf + off, cap - off, "%s%s", off ? ", " : "", item);
}
