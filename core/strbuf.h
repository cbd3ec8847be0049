/* strbuf.h - the one growable string of libsbx: request signing (ec2_ssm's SigV4), shell
 * scripts sent to a sandbox (ec2_ssm, daytona, the agent client's stdin wrapper), the replay
 * report and the worker's /metrics text. Internal to libsbx (not installed).
 *
 * Appending never fails loudly: an allocation failure sets oom and later appends do nothing,
 * so a builder appends freely and checks once at the end (sbx_strbuf_take returns NULL). The
 * text is always NUL-terminated once anything was appended. A zeroed sbx_strbuf is empty.
 */
#ifndef SBX_CORE_STRBUF_H
#define SBX_CORE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sbx_strbuf {
    char *p; /* NULL until the first append */
    size_t len, cap;
    bool oom; /* an allocation failed: the text is incomplete */
} sbx_strbuf;

/* Room for n more bytes (and the NUL) without another allocation; false (and oom) when it
 * cannot be had. */
bool sbx_strbuf_reserve(sbx_strbuf *b, size_t n);
/* Appends n bytes of s. */
void sbx_strbuf_put(sbx_strbuf *b, const void *s, size_t n);
/* Appends the string s. */
void sbx_strbuf_puts(sbx_strbuf *b, const char *s);
/* Appends one byte. */
void sbx_strbuf_putc(sbx_strbuf *b, char c);
/* Appends printf-formatted text (a format error counts as oom: the text would be incomplete). */
void sbx_strbuf_printf(sbx_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s[0..n) as one single-quoted POSIX shell word: inside '...' a shell interprets
 * nothing, so each ' becomes '\'' (close, escaped quote, reopen). Safe for any byte but NUL. */
void sbx_strbuf_shell_quote(sbx_strbuf *b, const char *s, size_t n);
/* A name a POSIX shell can `export`: [A-Za-z_][A-Za-z0-9_]*, not empty. Script builders refuse
 * any other environment name (it cannot be quoted: it stands left of '='). */
bool sbx_shell_name_ok(const char *name);
/* The text, handed to the caller ("" when nothing was appended); NULL after an allocation
 * failure. b is empty afterwards either way. */
char *sbx_strbuf_take(sbx_strbuf *b);
/* Frees the text; b is empty afterwards. */
void sbx_strbuf_free(sbx_strbuf *b);

/* Appends item to the ", "-separated list in buf (cap bytes, NUL-terminated, "" to start),
 * cut short when it fills: the lists of accepted names in error messages. */
void sbx_list_add(char *buf, size_t cap, const char *item);

#endif
