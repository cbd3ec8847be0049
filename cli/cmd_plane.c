/* cmd_plane.c - shared plumbing of the executing commands (see cmd_plane.h). */
#include "cli/cmd_plane.h"

#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_plane_open(cli_plane *p, bool with_sessions)
{
    memset(p, 0, sizeof(*p));
    sbx_error err;
    sbx_status st = cli_load_config(NULL, &p->cfg, &err);
    if (st != SBX_OK)
        return cli_report_error("config", &err);
    const char *flavor = p->cfg->broker.flavor != NULL ? p->cfg->broker.flavor : "embedded";
    if (strcmp(flavor, "remote") == 0) {
        st = sbx_broker_open_remote(&p->cfg->broker.remote, &p->broker, &err);
    } else {
        st = sbx_engine_new(p->cfg, &p->engine, &err);
        if (st == SBX_OK)
            st = sbx_broker_open_embedded(p->engine, &p->broker, &err);
    }
    if (st == SBX_OK && with_sessions) {
        char dir[4096];
        st = sbx_sessions_default_dir(dir, sizeof(dir))
                 ? sbx_sessions_open(p->cfg, p->broker, dir, &p->sessions, &err)
                 : sbx_error_set(&err, SBX_E_CONFIG,
                                 "no place to keep sessions: set XDG_STATE_HOME or HOME");
    }
    if (st != SBX_OK) {
        int code = cli_report_error("open", &err);
        cli_plane_close(p);
        return code;
    }
    p->principal = sbx_principal_new();
    struct passwd *pw = getpwuid(geteuid());
    char subject[300];
    snprintf(subject, sizeof(subject), "user:%s", pw != NULL ? pw->pw_name : "unknown");
    sbx_set_string(&p->principal->subject, subject);
    return 0;
}

void cli_plane_close(cli_plane *p)
{
    sbx_sessions_free(p->sessions);
    sbx_broker_free(p->broker);
    sbx_engine_free(p->engine);
    sbx_config_free(p->cfg);
    sbx_message_free((ProtobufCMessage *)p->principal);
    memset(p, 0, sizeof(*p));
}

sbx_request *cli_plane_request(cli_plane *p, const char *profile)
{
    sbx_request *r = sbx_request_new();
    if (r == NULL)
        return NULL;
    sbx_set_string(&r->profile, profile);
    r->principal = (sbx_principal *)sbx_message_copy(&p->principal->base);
    sbx_set_string(&r->agent, "sbx-cli");
    return r;
}

void cli_plane_destroy_handle(cli_plane *p, const sbx_session_handle *h)
{
    if (h == NULL || h->sandbox_id[0] == '\0')
        return;
    sbx_request *r = cli_plane_request(p, h->profile);
    r->destroy = malloc(sizeof(*r->destroy));
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    r->session = (sbx_session_handle *)sbx_message_copy(&h->base);
    sbx_completion *c = NULL;
    sbx_broker_submit(p->broker, r, SBX_WAIT_FOREVER, NULL, &c);
    if (c != NULL && c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fprintf(stderr, "sbx: notice: sandbox %s could not be destroyed: %s\n", h->sandbox_id,
                c->error);
    sbx_completion_free(c);
    sbx_request_free(r);
}

static json_t *bytes_json(const ProtobufCBinaryData *d)
{
    return json_stringn_nocheck((const char *)d->data, d->len);
}

static const char *enum_name(const ProtobufCEnumDescriptor *d, int v)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, v);
    return ev != NULL ? ev->name : "UNKNOWN";
}

static json_t *handle_json(const sbx_session_handle *h)
{
    if (h == NULL)
        return json_null();
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:s}", "session_id", h->session_id, "name",
                     h->name, "profile", h->profile, "provider", h->provider, "sandbox_id",
                     h->sandbox_id, "node", h->node, "created_at_ms", (json_int_t)h->created_at_ms,
                     "last_used_at_ms", (json_int_t)h->last_used_at_ms, "status",
                     enum_name(&sbx__v1__session_status__descriptor, h->status));
}

static json_t *completion_json(const sbx_completion *c)
{
    json_t *j =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:o}", "task_id", c->task_id, "status",
                  enum_name(&sbx__v1__completion_status__descriptor, c->status), "error_code",
                  enum_name(&sbx__v1__error_code__descriptor, c->error_code), "error", c->error,
                  "notice", c->notice, "session", handle_json(c->session));
    const sbx_result *r = c->result;
    if (r != NULL) {
        json_t *files = json_array();
        for (size_t i = 0; i < r->n_files; i++)
            json_array_append_new(files, json_pack("{s:s,s:I,s:i,s:o}", "path", r->files[i]->path,
                                                   "size", (json_int_t)r->files[i]->size, "mode",
                                                   (int)r->files[i]->mode, "content",
                                                   bytes_json(&r->files[i]->content)));
        json_object_set_new(
            j, "result",
            json_pack("{s:i,s:i,s:s,s:o,s:o,s:b,s:b,s:s,s:I,s:o}", "exit_code", r->exit_code,
                      "signal", r->signal, "outcome",
                      enum_name(&sbx__v1__outcome__descriptor, r->outcome), "stdout",
                      bytes_json(&r->stdout), "stderr", bytes_json(&r->stderr), "stdout_truncated",
                      r->stdout_truncated, "stderr_truncated", r->stderr_truncated, "value",
                      r->value, "wall_us", (json_int_t)r->wall_us, "files", files));
    }
    return j;
}

int cli_print_completion(const sbx_completion *c, bool program)
{
    if (c == NULL) {
        fprintf(stderr, "sbx: no completion (out of memory)\n");
        return program ? CLI_EXIT_NOT_RUN : CLI_EXIT_FAILED;
    }
    bool ran = c->result != NULL &&
               (c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED ||
                c->result->outcome == SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    if (cli_global.json) {
        json_t *j = completion_json(c);
        json_dumpf(j, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(j);
    } else {
        if (c->result != NULL) {
            if (c->result->stdout.len > 0)
                fwrite(c->result->stdout.data, 1, c->result->stdout.len, stdout);
            if (c->result->stderr.len > 0)
                fwrite(c->result->stderr.data, 1, c->result->stderr.len, stderr);
            if (c->result->value[0] != '\0')
                printf("%s\n", c->result->value);
        }
        fflush(stdout);
        if (c->notice[0] != '\0')
            fprintf(stderr, "sbx: notice: %s\n", c->notice);
        if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
            fprintf(stderr, "sbx: %s: %s\n", sbx_status_name((sbx_status)c->error_code), c->error);
    }
    bool timed_out =
        c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT ||
        (c->result != NULL && c->result->outcome == SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    if (program && timed_out)
        return CLI_EXIT_TIMEOUT; /* not 128+SIGKILL: scripts tell a deadline from a kill */
    if (program && ran) {
        if (c->result->signal != 0)
            return 128 + c->result->signal;
        return c->result->exit_code;
    }
    if (c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        return CLI_EXIT_OK;
    int code = cli_exit_code((sbx_status)c->error_code);
    return program ? cli_program_exit_code(code) : code;
}
