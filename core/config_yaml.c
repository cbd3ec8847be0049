/* config_yaml.c - the one bounded decoder for config files: libyaml events -> a small tree of
 * maps, lists and scalars, each with its line and column.
 *
 * Config files may come from anywhere, so this refuses what makes YAML dangerous or ambiguous
 * before any value is interpreted: anchors and aliases (a few lines of `&a [*b, *b, ...]` expand
 * exponentially: "billion laughs"), explicit tags (`!!python/object`), several documents in one
 * file, duplicate keys (YAML says they are an error; many parsers silently keep the last), and
 * files, depths or node counts beyond the CONFIG_MAX_* limits.
 * This file must not know what any key means: the loader (config.c, by the key tables of
 * config_schema.c and config_profile.c) interprets the tree.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/config_internal.h"

typedef struct tree_builder {
    const char *name;
    const char *buf;
    size_t len;
    sbx_error *err;
    config_node *root;
    config_node *stack[CONFIG_MAX_DEPTH];
    size_t depth;
    size_t n_nodes;
} tree_builder;

void config_node_free(config_node *n)
{
    if (n == NULL)
        return;
    for (size_t i = 0; i < n->n_kids; i++)
        config_node_free(n->kids[i]);
    free(n->kids);
    free(n->text);
    free(n);
}

bool config_node_is_null(const config_node *n)
{
    if (n == NULL)
        return true;
    if (n->kind != CONFIG_SCALAR || !n->plain)
        return false;
    return n->len == 0 || strcmp(n->text, "~") == 0 || strcmp(n->text, "null") == 0 ||
           strcmp(n->text, "Null") == 0 || strcmp(n->text, "NULL") == 0;
}

static sbx_status fail_at(tree_builder *b, int line, int column, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static sbx_status fail_at(tree_builder *b, int line, int column, const char *fmt, ...)
{
    char what[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return sbx_error_set(b->err, SBX_E_CONFIG, "%s:%d:%d: %s", b->name, line, column, what);
}

static int mark_line(yaml_mark_t m)
{
    return (int)m.line + 1;
}
static int mark_column(yaml_mark_t m)
{
    return (int)m.column + 1;
}

/* Line and column of a byte offset (libyaml's reader errors carry only an offset). */
static void offset_position(const tree_builder *b, size_t offset, int *line, int *column)
{
    *line = 1;
    *column = 1;
    for (size_t i = 0; i < offset && i < b->len; i++) {
        if (b->buf[i] == '\n') {
            (*line)++;
            *column = 1;
        } else if (((unsigned char)b->buf[i] & 0xC0) != 0x80) {
            (*column)++;
        }
    }
}

static sbx_status parser_error(tree_builder *b, const yaml_parser_t *p)
{
    int line, column;
    if (p->error == YAML_READER_ERROR) {
        offset_position(b, p->problem_offset, &line, &column);
        return fail_at(b, line, column, "invalid YAML: %s (the file must be UTF-8 text)",
                       p->problem ? p->problem : "unreadable input");
    }
    line = mark_line(p->problem_mark);
    column = mark_column(p->problem_mark);
    size_t at = p->problem_mark.index;
    /* The most common mistake by far: a tab used for indentation. */
    if (at < b->len && b->buf[at] == '\t')
        return fail_at(b, line, column,
                       "invalid YAML: a tab character; YAML indentation must use spaces");
    if (p->context != NULL)
        return fail_at(b, line, column, "invalid YAML: %s %s (line %d)",
                       p->problem ? p->problem : "syntax error", p->context,
                       mark_line(p->context_mark));
    return fail_at(b, line, column, "invalid YAML: %s", p->problem ? p->problem : "syntax error");
}

/* *out is set exactly when this returns SBX_OK. Each failure returns its own code, not the
 * (equal) result of fail_at or sbx_error_set, so that this file shows it: a caller uses *out
 * after checking the status only. */
static sbx_status new_node(tree_builder *b, config_node_kind kind, yaml_mark_t mark,
                           config_node **out)
{
    if (b->n_nodes >= CONFIG_MAX_NODES) {
        fail_at(b, mark_line(mark), mark_column(mark),
                "the document has more than %d nodes; a config file is never that big",
                CONFIG_MAX_NODES);
        return SBX_E_CONFIG;
    }
    config_node *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        sbx_error_set(b->err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", b->name);
        return SBX_E_RESOURCE_EXHAUSTED;
    }
    n->kind = kind;
    n->line = mark_line(mark);
    n->column = mark_column(mark);
    b->n_nodes++;
    *out = n;
    return SBX_OK;
}

/* Hangs n under the node on top of the stack (or makes it the root); takes ownership. */
static sbx_status attach(tree_builder *b, config_node *n)
{
    if (b->depth == 0) {
        b->root = n;
        return SBX_OK;
    }
    config_node *parent = b->stack[b->depth - 1];
    if (parent->kind == CONFIG_MAP && parent->n_kids % 2 == 0) {
        /* n is a key */
        if (n->kind != CONFIG_SCALAR) {
            sbx_status st =
                fail_at(b, n->line, n->column, "a mapping key must be plain text, not a %s",
                        n->kind == CONFIG_MAP ? "mapping" : "list");
            config_node_free(n);
            return st;
        }
        if (n->len == 0) {
            sbx_status st = fail_at(b, n->line, n->column, "empty mapping key");
            config_node_free(n);
            return st;
        }
        for (size_t i = 0; i < parent->n_kids; i += 2)
            if (strcmp(parent->kids[i]->text, n->text) == 0) {
                sbx_status st = fail_at(b, n->line, n->column,
                                        "duplicate key '%s' (first at line %d, column %d); "
                                        "each key may appear once",
                                        n->text, parent->kids[i]->line, parent->kids[i]->column);
                config_node_free(n);
                return st;
            }
    }
    config_node **grown = realloc(parent->kids, (parent->n_kids + 1) * sizeof(*grown));
    if (grown == NULL) {
        config_node_free(n);
        return sbx_error_set(b->err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", b->name);
    }
    grown[parent->n_kids++] = n;
    parent->kids = grown;
    return SBX_OK;
}

static sbx_status refuse_anchor_tag(tree_builder *b, yaml_mark_t mark, const yaml_char_t *anchor,
                                    const yaml_char_t *tag)
{
    if (anchor != NULL)
        return fail_at(b, mark_line(mark), mark_column(mark),
                       "anchors (&%s) and aliases are refused in sbx config files (they can "
                       "expand without bound); write the value out",
                       (const char *)anchor);
    if (tag != NULL)
        return fail_at(b, mark_line(mark), mark_column(mark),
                       "explicit tags (%s) are refused in sbx config files; write a plain value",
                       (const char *)tag);
    return SBX_OK;
}

static sbx_status on_event(tree_builder *b, const yaml_event_t *ev, int *documents, bool *done)
{
    config_node *n = NULL;
    sbx_status st;
    switch (ev->type) {
    case YAML_STREAM_START_EVENT:
    case YAML_NO_EVENT: return SBX_OK;
    case YAML_STREAM_END_EVENT: *done = true; return SBX_OK;
    case YAML_DOCUMENT_START_EVENT:
        if (++*documents > 1)
            return fail_at(b, mark_line(ev->start_mark), mark_column(ev->start_mark),
                           "a second YAML document ('---'); an sbx config file holds one");
        if (ev->data.document_start.tag_directives.start !=
            ev->data.document_start.tag_directives.end)
            return fail_at(b, mark_line(ev->start_mark), mark_column(ev->start_mark),
                           "%%TAG directives are refused in sbx config files");
        return SBX_OK;
    case YAML_DOCUMENT_END_EVENT: return SBX_OK;
    case YAML_ALIAS_EVENT:
        return fail_at(b, mark_line(ev->start_mark), mark_column(ev->start_mark),
                       "aliases (*%s) are refused in sbx config files (they can expand without "
                       "bound); write the value out",
                       (const char *)ev->data.alias.anchor);
    case YAML_SCALAR_EVENT: {
        st = refuse_anchor_tag(b, ev->start_mark, ev->data.scalar.anchor, ev->data.scalar.tag);
        if (st != SBX_OK)
            return st;
        size_t len = ev->data.scalar.length;
        if (len > CONFIG_VALUE_MAX)
            return fail_at(b, mark_line(ev->start_mark), mark_column(ev->start_mark),
                           "a value of %zu bytes; the limit is %d", len, CONFIG_VALUE_MAX);
        if (memchr(ev->data.scalar.value, '\0', len) != NULL)
            return fail_at(b, mark_line(ev->start_mark), mark_column(ev->start_mark),
                           "a value containing a NUL character");
        st = new_node(b, CONFIG_SCALAR, ev->start_mark, &n);
        if (st != SBX_OK)
            return st;
        n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        n->text = strndup((const char *)ev->data.scalar.value, len);
        if (n->text == NULL) {
            config_node_free(n);
            return sbx_error_set(b->err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", b->name);
        }
        n->len = len;
        return attach(b, n);
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool map = ev->type == YAML_MAPPING_START_EVENT;
        st = refuse_anchor_tag(b, ev->start_mark,
                               map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor,
                               map ? ev->data.mapping_start.tag : ev->data.sequence_start.tag);
        if (st != SBX_OK)
            return st;
        if (b->depth >= CONFIG_MAX_DEPTH)
            return fail_at(b, mark_line(ev->start_mark), mark_column(ev->start_mark),
                           "nesting deeper than %d levels", CONFIG_MAX_DEPTH);
        st = new_node(b, map ? CONFIG_MAP : CONFIG_SEQ, ev->start_mark, &n);
        if (st != SBX_OK)
            return st;
        st = attach(b, n);
        if (st != SBX_OK)
            return st;
        b->stack[b->depth++] = n;
        return SBX_OK;
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        if (b->depth > 0)
            b->depth--;
        return SBX_OK;
    }
    return SBX_OK;
}

sbx_status config_yaml_parse(const char *buf, size_t len, const char *name, config_node **root,
                             sbx_error *err)
{
    *root = NULL;
    tree_builder b = {.name = name, .buf = buf, .len = len, .err = err};
    if (len > CONFIG_MAX_BYTES)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:1:1: the file is %zu bytes; config files are limited to %d", name,
                             len, CONFIG_MAX_BYTES);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
    int documents = 0;
    bool done = false;
    sbx_status st = SBX_OK;
    while (!done && st == SBX_OK) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            st = parser_error(&b, &parser);
            break;
        }
        st = on_event(&b, &ev, &documents, &done);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    if (st != SBX_OK) {
        config_node_free(b.root);
        return st;
    }
    *root = b.root;
    return SBX_OK;
}
