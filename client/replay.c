/* replay.c - replay (include/sbx/replay.h): re-runs a recording's requests through any broker
 * and compares each completion with the recorded one, volatile fields normalised. It sits above
 * the brokers (it submits through one) and reads files with the format of core/recorder.c.
 * This file must not print; differences go into the report text.
 */
#include "sbx/replay.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pbfield.h"
#include "core/strbuf.h"

/* ---- replay ------------------------------------------------------------------------------- */

/* Most records replayed from one file: a replay corpus is a test artefact, not a log archive. */
#define REPLAY_MAX_RECORDS 100000
/* Longest value shown in a difference line; the comparison itself uses the whole value. */
#define REPLAY_SHOW_MAX 160
/* Most ids renamed per stream (sessions and sandboxes of one recording). */
#define REPLAY_IDS_MAX 4096

/* Appends data C-escaped ("x\n", "\x01"). */
static void sb_escaped(sbx_strbuf *b, const uint8_t *data, size_t len)
{
    sbx_strbuf_printf(b, "\"");
    for (size_t i = 0; i < len; i++) {
        uint8_t c = data[i];
        if (c == '\n')
            sbx_strbuf_printf(b, "\\n");
        else if (c == '\t')
            sbx_strbuf_printf(b, "\\t");
        else if (c == '"' || c == '\\')
            sbx_strbuf_printf(b, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            sbx_strbuf_printf(b, "\\x%02x", c);
        else
            sbx_strbuf_printf(b, "%c", c);
    }
    sbx_strbuf_printf(b, "\"");
}

/* One rendered field: "result.stdout" -> "\"x\\n\"". */
typedef struct field_line {
    char *key;
    char *value;
} field_line;

typedef struct field_lines {
    field_line *items;
    size_t n;
} field_lines;

static void lines_add(field_lines *l, const char *key, sbx_strbuf *value)
{
    field_line *grown = realloc(l->items, (l->n + 1) * sizeof(*grown));
    if (grown == NULL) {
        sbx_strbuf_free(value);
        return;
    }
    l->items = grown;
    l->items[l->n].key = strdup(key);
    l->items[l->n].value = sbx_strbuf_take(value);
    if (l->items[l->n].value == NULL) /* out of memory: shown as empty, never as equal */
        l->items[l->n].value = strdup("");
    l->n++;
}

static void lines_free(field_lines *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].key);
        free(l->items[i].value);
    }
    free(l->items);
}

static void render_message(const ProtobufCMessage *m, const char *prefix, field_lines *out);

/* Renders one (possibly repeated element) value at p. */
static void render_value(const ProtobufCFieldDescriptor *f, const void *p, const char *key,
                         field_lines *out)
{
    sbx_strbuf v = {0};
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: sbx_strbuf_printf(&v, "%d", *(const int32_t *)p); break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
        if (ev != NULL)
            sbx_strbuf_printf(&v, "%s", ev->name);
        else
            sbx_strbuf_printf(&v, "%d", *(const int *)p);
        break;
    }
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: sbx_strbuf_printf(&v, "%u", *(const uint32_t *)p); break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: sbx_strbuf_printf(&v, "%" PRId64, *(const int64_t *)p); break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: sbx_strbuf_printf(&v, "%" PRIu64, *(const uint64_t *)p); break;
    case PROTOBUF_C_TYPE_FLOAT: sbx_strbuf_printf(&v, "%g", (double)*(const float *)p); break;
    case PROTOBUF_C_TYPE_DOUBLE: sbx_strbuf_printf(&v, "%g", *(const double *)p); break;
    case PROTOBUF_C_TYPE_BOOL:
        sbx_strbuf_printf(&v, "%s", *(const protobuf_c_boolean *)p ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        sb_escaped(&v, (const uint8_t *)(s != NULL ? s : ""), s != NULL ? strlen(s) : 0);
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *d = p;
        sb_escaped(&v, d->data, d->len);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        if (sub != NULL)
            render_message(sub, key, out);
        return;
    }
    }
    lines_add(out, key, &v);
}

/* Every non-default field of m as "prefix.field[i].sub = value" lines (reflection, so new
 * contract fields are compared without touching this file). */
static void render_message(const ProtobufCMessage *m, const char *prefix, field_lines *out)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        char key[512];
        snprintf(key, sizeof(key), "%s%s%s", prefix, prefix[0] ? "." : "", f->name);
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which = *(const uint32_t *)(base + f->quantifier_offset);
            if (which != f->id)
                continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            const char *arr = *(char *const *)(base + f->offset);
            for (size_t j = 0; j < n; j++) {
                char ikey[600];
                snprintf(ikey, sizeof(ikey), "%s[%zu]", key, j);
                render_value(f, arr + j * sbx_pb_value_size(f), ikey, out);
            }
            continue;
        }
        const void *p = base + f->offset;
        if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && sbx_pb_is_default(f, p))
            continue;
        render_value(f, p, key, out);
    }
}

/* Consistent renaming of volatile ids: the n-th distinct session id becomes "<session-n>". */
typedef struct id_map {
    char *raw[REPLAY_IDS_MAX];
    char *alias[REPLAY_IDS_MAX];
    size_t n;
} id_map;

static const char *id_alias(id_map *m, const char *raw, const char *kind)
{
    if (raw == NULL || raw[0] == '\0')
        return raw;
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->raw[i], raw) == 0)
            return m->alias[i];
    if (m->n >= REPLAY_IDS_MAX)
        return raw;
    char alias[64];
    snprintf(alias, sizeof(alias), "<%s-%zu>", kind, m->n + 1);
    m->raw[m->n] = strdup(raw);
    m->alias[m->n] = strdup(alias);
    return m->alias[m->n++];
}

static void id_map_clear(id_map *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->raw[i]);
        free(m->alias[i]);
    }
    m->n = 0;
}

/* Replaces every occurrence of each mapped raw id in *text by its alias. */
static void alias_text(char **text, const id_map *m)
{
    if (*text == NULL || (*text)[0] == '\0')
        return;
    /* Longest ids first, so "fk-1" never rewrites part of "fk-12". */
    bool done[REPLAY_IDS_MAX] = {false};
    for (size_t round = 0; round < m->n; round++) {
        size_t i = m->n, best = 0;
        for (size_t j = 0; j < m->n; j++)
            if (!done[j] && (i == m->n || strlen(m->raw[j]) > best)) {
                i = j;
                best = strlen(m->raw[j]);
            }
        done[i] = true;
        const char *raw = m->raw[i];
        size_t rl = strlen(raw);
        char *hit;
        sbx_strbuf out = {0};
        const char *p = *text;
        bool changed = false;
        while ((hit = strstr(p, raw)) != NULL) {
            sbx_strbuf_printf(&out, "%.*s%s", (int)(hit - p), p, m->alias[i]);
            p = hit + rl;
            changed = true;
        }
        if (!changed) {
            sbx_strbuf_free(&out);
            continue;
        }
        sbx_strbuf_puts(&out, p);
        char *aliased = sbx_strbuf_take(&out);
        if (aliased != NULL) /* out of memory: the text keeps its raw id */
            sbx_set_string(text, aliased);
        free(aliased);
    }
}

/* Normalises a completion copy in place: volatile fields zeroed, ids aliased. */
static void normalise(sbx_completion *c, id_map *ids)
{
    sbx_set_string(&c->task_id, NULL);
    sbx_session_handle *h = c->session;
    if (h != NULL) {
        id_alias(ids, h->session_id, "session");
        id_alias(ids, h->sandbox_id, "sandbox");
        sbx_set_bytes(&h->binding, NULL, 0);
        h->created_at_ms = 0;
        h->last_used_at_ms = 0;
        sbx_set_string(&h->node, NULL);
    }
    sbx_result *r = c->result;
    if (r != NULL) {
        r->wall_us = r->cpu_us = r->max_rss_kb = 0;
        for (size_t i = 0; i < r->n_files; i++)
            r->files[i]->mtime_ms = 0;
    }
    if (h != NULL) {
        sbx_set_string(&h->session_id, id_alias(ids, h->session_id, "session"));
        sbx_set_string(&h->sandbox_id, id_alias(ids, h->sandbox_id, "sandbox"));
    }
    alias_text(&c->error, ids);
    alias_text(&c->notice, ids);
}

/* A recording made before handles carried their sandbox's policy has none: the replayed
 * handle's is not compared then (a newer recording's is, like any other field). */
static void unrecorded_policy(const sbx_completion *want, sbx_completion *got)
{
    if (want->session != NULL && want->session->policy == NULL && got->session != NULL &&
        got->session->policy != NULL) {
        sbx_message_free(&got->session->policy->base);
        got->session->policy = NULL;
    }
}

static const char *find_value(const field_lines *l, const char *key)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].key, key) == 0)
            return l->items[i].value;
    return NULL;
}

static void show(sbx_strbuf *b, const char *v)
{
    if (v == NULL)
        sbx_strbuf_printf(b, "(unset)");
    else if (strlen(v) > REPLAY_SHOW_MAX)
        sbx_strbuf_printf(b, "%.*s... (%zu bytes)", REPLAY_SHOW_MAX, v, strlen(v));
    else
        sbx_strbuf_printf(b, "%s", v);
}

/* Appends the differing fields to report; returns how many differ. */
static size_t diff_completions(const sbx_completion *rec, const sbx_completion *got,
                               sbx_strbuf *report)
{
    field_lines a = {0}, b = {0};
    render_message(&rec->base, "", &a);
    render_message(&got->base, "", &b);
    size_t n = 0;
    for (size_t i = 0; i < a.n + b.n; i++) {
        const field_line *l = i < a.n ? &a.items[i] : &b.items[i - a.n];
        if (i >= a.n && find_value(&a, l->key) != NULL)
            continue; /* already compared from the recorded side */
        const char *va = find_value(&a, l->key), *vb = find_value(&b, l->key);
        if (va != NULL && vb != NULL && strcmp(va, vb) == 0)
            continue;
        sbx_strbuf_printf(report, "  %s: recorded ", l->key);
        show(report, va);
        sbx_strbuf_printf(report, ", replayed ");
        show(report, vb);
        sbx_strbuf_printf(report, "\n");
        n++;
    }
    lines_free(&a);
    lines_free(&b);
    return n;
}

void sbx_replay_report_clear(sbx_replay_report *r)
{
    if (r == NULL)
        return;
    free(r->text);
    memset(r, 0, sizeof(*r));
}

/* Sessions created during the recording, followed into the replay: recorded session_id ->
 * the replayed handle that answers for it now. */
typedef struct follow {
    char **recorded;
    sbx_session_handle **live;
    size_t n;
} follow;

static void follow_set(follow *f, const char *recorded_id, const sbx_session_handle *live)
{
    if (recorded_id == NULL || recorded_id[0] == '\0' || live == NULL)
        return;
    sbx_session_handle *copy = (sbx_session_handle *)sbx_message_copy(&live->base);
    if (copy == NULL)
        return;
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->recorded[i], recorded_id) == 0) {
            sbx_message_free(&f->live[i]->base);
            f->live[i] = copy;
            return;
        }
    char **r = realloc(f->recorded, (f->n + 1) * sizeof(*r));
    if (r != NULL)
        f->recorded = r;
    sbx_session_handle **l = realloc(f->live, (f->n + 1) * sizeof(*l));
    if (l != NULL)
        f->live = l;
    if (r == NULL || l == NULL) {
        sbx_message_free(&copy->base);
        return;
    }
    f->recorded[f->n] = strdup(recorded_id);
    f->live[f->n++] = copy;
}

static const sbx_session_handle *follow_get(const follow *f, const char *recorded_id)
{
    for (size_t i = 0; recorded_id != NULL && i < f->n; i++)
        if (strcmp(f->recorded[i], recorded_id) == 0)
            return f->live[i];
    return NULL;
}

static void follow_clear(follow *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->recorded[i]);
        sbx_message_free(&f->live[i]->base);
    }
    free(f->recorded);
    free(f->live);
}

sbx_status sbx_replay_file(const char *path, sbx_broker *b, sbx_replay_report *report,
                           sbx_error *err)
{
    memset(report, 0, sizeof(*report));
    sbx_recording **recs = NULL;
    size_t n = 0;
    sbx_status st = sbx_recordings_load(path, REPLAY_MAX_RECORDS, &recs, &n, err);
    if (st != SBX_OK)
        return st;
    id_map *ids_rec = calloc(1, sizeof(*ids_rec)), *ids_got = calloc(1, sizeof(*ids_got));
    if (ids_rec == NULL || ids_got == NULL) {
        free(ids_rec);
        free(ids_got);
        sbx_recordings_free(recs, n);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory replaying");
    }
    follow fol = {0};
    sbx_strbuf text = {0};
    sbx_strbuf_printf(&text, "%s", "");
    for (size_t i = 0; i < n; i++) {
        const sbx_recording *rec = recs[i];
        if (rec->request == NULL || rec->completion == NULL) {
            sbx_strbuf_printf(&text, "record %zu: no request or no completion; skipped\n", i + 1);
            report->differing++;
            continue;
        }
        sbx_request *req = sbx_request_copy(rec->request);
        if (req == NULL) {
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory replaying");
            break;
        }
        /* A fresh task id: a worker that saw the recorded one would answer from its dedup
         * store instead of running the request again. */
        char task_id[SBX_UUID_LEN];
        sbx_uuid_v4(task_id);
        sbx_set_string(&req->task_id, task_id);
        if (req->deadline_ms > 0) {
            int64_t budget = req->deadline_ms - rec->started_at_ms;
            req->deadline_ms = sbx_now_ms() + (budget > 0 ? budget : 0);
        }
        if (req->session != NULL) {
            const sbx_session_handle *live = follow_get(&fol, req->session->session_id);
            if (live != NULL) {
                sbx_message_free(&req->session->base);
                req->session = (sbx_session_handle *)sbx_message_copy(&live->base);
            }
        }
        sbx_completion *got = NULL;
        sbx_broker_submit(b, req, SBX_WAIT_FOREVER, NULL, &got);
        sbx_request_free(req);
        if (got == NULL)
            got = sbx_completion_fail(task_id, SBX_E_BROKER, "no completion from the broker");
        if (rec->completion->session != NULL && got->session != NULL)
            follow_set(&fol, rec->completion->session->session_id, got->session);
        sbx_completion *want = sbx_completion_copy(rec->completion);
        if (want == NULL || got == NULL) {
            sbx_completion_free(want);
            sbx_completion_free(got);
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory replaying");
            break;
        }
        normalise(want, ids_rec);
        normalise(got, ids_got);
        unrecorded_policy(want, got);
        sbx_strbuf diff = {0};
        size_t nd = diff_completions(want, got, &diff);
        report->total++;
        if (nd > 0) {
            report->differing++;
            sbx_strbuf_printf(&text, "record %zu (%s, task %s): %zu field%s differ%s\n%s", i + 1,
                              sbx_request_op_name(rec->request), rec->request->task_id, nd,
                              nd == 1 ? "" : "s", nd == 1 ? "s" : "", diff.p != NULL ? diff.p : "");
        }
        sbx_strbuf_free(&diff);
        sbx_completion_free(want);
        sbx_completion_free(got);
    }
    follow_clear(&fol);
    id_map_clear(ids_rec);
    id_map_clear(ids_got);
    free(ids_rec);
    free(ids_got);
    sbx_recordings_free(recs, n);
    report->text = sbx_strbuf_take(&text);
    if (report->text == NULL && st == SBX_OK)
        st =
            sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory writing the replay report");
    return st;
}
