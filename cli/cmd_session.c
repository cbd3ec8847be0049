/* cmd_session.c - `sbx session new|ls|rm`: the sessions this user keeps between invocations
 * ($XDG_STATE_HOME/sbx/sessions). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

const char cmd_session_help[] =
    "Usage: sbx session new [--profile P] [-n|--name N] [--from-snapshot NAME]\n"
    "       sbx session ls\n"
    "       sbx session rm [--forget] SESSION...\n\n"
    "new  mints a session of a per_session profile and prints its id; its sandbox is created\n"
    "     on first use (`sbx exec --session ID -- ...`). With --from-snapshot NAME the\n"
    "     sandbox is created now, its workspace filled from snapshot NAME (`sbx snapshot`).\n"
    "ls   lists the sessions kept in $XDG_STATE_HOME/sbx/sessions (files 0600).\n"
    "rm   destroys each session's sandbox and forgets the session (unknown ids are fine).\n"
    "     A session whose sandbox cannot be destroyed is kept; --forget forgets it without\n"
    "     destroying its sandbox (one whose profile was removed, or now uses another\n"
    "     provider, can never be reached again; the notice names the sandbox left).\n\n"
    "SESSION is an id or a name. --json prints JSON. create, list, remove and delete are\n"
    "accepted for new, ls and rm.\n";

static void print_time(int64_t ms)
{
    if (ms <= 0) {
        printf("%-20s", "-");
        return;
    }
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char buf[32];
    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("%-20s", buf);
}

/* --from-snapshot: the sandbox is created now, filled from the snapshot (a listing of its
 * working directory is the operation that creates it). A failure forgets the session. */
static int session_fill(cli_plane *p, const sbx_session_handle *h, const char *snapshot)
{
    sbx_request *r = sbx_request_list_files(h->profile, ".");
    sbx_request_set_principal(r, p->principal->mode, p->principal->subject);
    sbx_set_string(&r->from_snapshot, snapshot);
    sbx_completion *c = NULL;
    sbx_sessions_execute_hooks(p->sessions, r, h->session_id, SBX_WAIT_FOREVER, NULL, &c, NULL);
    int rc = CLI_EXIT_OK;
    if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED) {
        bool json = cli_global.json;
        cli_global.json =
            false; /* the error on stderr; --json prints the session only on success */
        rc = cli_print_completion(c, false, NULL);
        cli_global.json = json;
        sbx_error ignore;
        sbx_sessions_destroy(p->sessions, h->session_id, p->principal, &ignore);
    }
    sbx_completion_free(c);
    sbx_request_free(r);
    return rc;
}

static int session_new(cli_plane *p, const char *profile, const char *name, const char *snapshot)
{
    sbx_session_handle *h = NULL;
    sbx_error err;
    if (sbx_sessions_create(p->sessions, profile, name, &h, &err) != SBX_OK)
        return cli_report_error("session new", &err);
    if (snapshot != NULL) {
        int rc = session_fill(p, h, snapshot);
        if (rc != CLI_EXIT_OK) {
            sbx_message_free(&h->base);
            return rc;
        }
    }
    if (cli_global.json)
        cli_print_json(json_pack("{s:s,s:s,s:s}", "session_id", h->session_id, "profile",
                                 h->profile, "name", h->name));
    else
        printf("%s\n", h->session_id);
    sbx_message_free(&h->base);
    return CLI_EXIT_OK;
}

static int session_ls(cli_plane *p)
{
    sbx_session_handle **list = NULL;
    size_t n = sbx_sessions_list(p->sessions, &list);
    if (cli_global.json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(
                arr, json_pack("{s:s,s:s,s:s,s:s,s:s,s:I,s:I}", "session_id", list[i]->session_id,
                               "name", list[i]->name, "profile", list[i]->profile, "provider",
                               list[i]->provider, "sandbox_id", list[i]->sandbox_id,
                               "created_at_ms", (json_int_t)list[i]->created_at_ms,
                               "last_used_at_ms", (json_int_t)list[i]->last_used_at_ms));
        json_dumpf(arr, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(arr);
    } else {
        printf("%-38s %-16s %-12s %-20s %s\n", "SESSION", "NAME", "PROFILE", "LAST USED",
               "SANDBOX");
        for (size_t i = 0; i < n; i++) {
            printf("%-38s %-16s %-12s ", list[i]->session_id,
                   list[i]->name[0] ? list[i]->name : "-", list[i]->profile);
            print_time(list[i]->last_used_at_ms);
            printf(" %s\n", list[i]->sandbox_id[0] ? list[i]->sandbox_id : "(none yet)");
        }
    }
    sbx_sessions_list_free(list, n);
    return CLI_EXIT_OK;
}

static int session_rm(cli_plane *p, int argc, char **argv, bool forget)
{
    int rc = CLI_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        sbx_error err;
        sbx_session_handle *h = sbx_sessions_get(p->sessions, argv[i]);
        if (forget) {
            if (h != NULL && h->sandbox_id[0] != '\0')
                fprintf(stderr,
                        "sbx session: notice: %s forgotten; its sandbox %s (provider %s) was "
                        "not destroyed\n",
                        h->session_id, h->sandbox_id, h->provider);
            sbx_sessions_forget(p->sessions, argv[i]);
        } else if (sbx_sessions_destroy(p->sessions, argv[i], p->principal, &err) != SBX_OK) {
            rc = cli_report_error(argv[i], &err);
            if (h != NULL)
                fprintf(stderr,
                        "sbx session: the session is kept; if its sandbox cannot be reached any "
                        "more, `sbx session rm --forget %s` forgets it without destroying %s\n",
                        h->session_id, h->sandbox_id);
            sbx_message_free((ProtobufCMessage *)h);
            continue;
        }
        if (h != NULL)
            cli_forget_last_command(h->session_id);
        sbx_message_free((ProtobufCMessage *)h);
    }
    return rc;
}

int cmd_session(int argc, char **argv)
{
    enum { OPT_PROFILE, OPT_NAME, OPT_FROM_SNAPSHOT, OPT_FORGET };
    static const cli_option options[] = {[OPT_PROFILE] = {"profile", 0, true},
                                         [OPT_NAME] = {"name", 'n', true},
                                         [OPT_FROM_SNAPSHOT] = {"from-snapshot", 0, true},
                                         [OPT_FORGET] = {"forget", 0, false},
                                         {NULL, 0, 0}};
    cli_parser a = {.cmd = "session", .help = cmd_session_help, .options = options};
    const char *profile = NULL, *name = NULL, *snapshot = NULL;
    bool forget = false;
    int opt;
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
        if (opt == OPT_FORGET)
            forget = true;
        else if (opt == OPT_PROFILE)
            profile = a.value;
        else if (opt == OPT_FROM_SNAPSHOT)
            snapshot = a.value;
        else
            name = a.value;
    }
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands < 1)
        return cli_usage_error("session", "name an action: new, ls or rm");
    static const char *const actions[] = {"new", "ls", "rm", NULL};
    const char *action = cli_action(a.operands[0], actions);
    if (action == NULL)
        return cli_usage_error("session", "unknown action '%s' (new, ls, rm)", a.operands[0]);
    if (strcmp(action, "new") != 0 && (profile != NULL || name != NULL || snapshot != NULL))
        return cli_usage_error("session",
                               "--profile, --name and --from-snapshot belong to `session new`");
    if (strcmp(action, "rm") != 0 && forget)
        return cli_usage_error("session", "--forget belongs to `session rm`");
    if (strcmp(action, "ls") == 0 && a.n_operands > 1)
        return cli_usage_error("session", "ls takes no arguments");
    if (strcmp(action, "new") == 0 && a.n_operands > 1)
        return cli_usage_error("session", "unexpected argument '%s'", a.operands[1]);
    if (strcmp(action, "rm") == 0 && a.n_operands < 2)
        return cli_usage_error("session", "rm needs at least one SESSION");
    cli_plane p;
    int rc = cli_plane_open(&p, true);
    if (rc != 0)
        return rc;
    if (strcmp(action, "new") == 0)
        rc = session_new(&p, profile, name, snapshot);
    else if (strcmp(action, "ls") == 0)
        rc = session_ls(&p);
    else
        rc = session_rm(&p, a.n_operands, a.operands, forget);
    cli_plane_close(&p);
    return rc;
}
