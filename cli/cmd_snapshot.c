/* cmd_snapshot.c - `sbx snapshot create|ls|rm`: named snapshots of a session's workspace, kept by
 * the engine (this host's, or the worker's with the remote broker) for the calling principal. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

const char cmd_snapshot_help[] =
    "Usage: sbx snapshot create SESSION NAME\n"
    "       sbx snapshot ls\n"
    "       sbx snapshot rm NAME...\n\n"
    "create  packs session SESSION's workspace (the sandbox's working directory, /workspace\n"
    "        for local and docker; running programs and files elsewhere are not included)\n"
    "        and keeps it as snapshot NAME. NAME is 1-64 of A-Z a-z 0-9 . _ - and must not\n"
    "        exist yet. A snapshot larger than snapshot_max_mb (config, default 1024) is\n"
    "        refused and nothing is kept.\n"
    "ls      lists your snapshots: name, size, when taken.\n"
    "rm      deletes snapshots (an unknown name is an error, exit 6).\n"
    "new, list, remove and delete are accepted for create, ls and rm.\n\n"
    "Start from one with `sbx session new --from-snapshot NAME` (a fork: the new session's\n"
    "workspace is the snapshot's) or `sbx run --from-snapshot NAME -- COMMAND`.\n"
    "Snapshots belong to the principal that took them (--subject): nobody else can list, use\n"
    "or delete them. They are kept in snapshot_dir on the host that runs the engine (with\n"
    "SBX_BROKER=remote, the worker's host). Providers whose `sbx providers` row shows SNAP\n"
    "offer them.\n\n"
    "Options:\n"
    "  --json      print the completion as JSON\n\n" CLI_EXIT_CODES_HELP;

static void print_snapshots(const sbx_result *res)
{
    printf("%-32s %12s  %s\n", "NAME", "BYTES", "TAKEN");
    for (size_t i = 0; i < res->n_snapshots; i++) {
        const Sbx__V1__Snapshot *s = res->snapshots[i];
        char when[32] = "-";
        time_t t = (time_t)(s->created_at_ms / 1000);
        struct tm tm;
        if (s->created_at_ms > 0 && gmtime_r(&t, &tm) != NULL)
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        printf("%-32s %12" PRIu64 "  %s\n", s->name, s->size, when);
    }
}

/* Sends r (no session) straight to the broker: the store needs no sandbox. */
static sbx_completion *submit(cli_plane *p, sbx_request *r)
{
    sbx_completion *c = NULL;
    sbx_broker_submit(p->broker, r, SBX_WAIT_FOREVER, NULL, &c);
    return c;
}

static int snapshot_create(cli_plane *p, const char *session, const char *name)
{
    sbx_request *r = cli_plane_request(p, NULL);
    r->snapshot = malloc(sizeof *r->snapshot);
    if (r->snapshot == NULL) {
        sbx_request_free(r);
        return cli_usage_error("snapshot", "out of memory");
    }
    sbx__v1__snapshot_workspace__init(r->snapshot);
    sbx_set_string(&r->snapshot->name, name);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT;
    sbx_completion *c = NULL;
    sbx_sessions_execute_hooks(p->sessions, r, session, SBX_WAIT_FOREVER, NULL, &c, NULL);
    int rc = cli_print_completion(c, false, NULL);
    if (rc == CLI_EXIT_OK && !cli_global.json && c->result != NULL && c->result->n_snapshots == 1)
        printf("snapshot %s: %" PRIu64 " bytes\n", c->result->snapshots[0]->name,
               c->result->snapshots[0]->size);
    sbx_completion_free(c);
    sbx_request_free(r);
    return rc;
}

static int snapshot_ls(cli_plane *p)
{
    sbx_request *r = cli_plane_request(p, NULL);
    r->list_snapshots = malloc(sizeof *r->list_snapshots);
    if (r->list_snapshots == NULL) {
        sbx_request_free(r);
        return cli_usage_error("snapshot", "out of memory");
    }
    sbx__v1__list_snapshots__init(r->list_snapshots);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_LIST_SNAPSHOTS;
    sbx_completion *c = submit(p, r);
    int rc = cli_print_completion(c, false, NULL);
    if (rc == CLI_EXIT_OK && !cli_global.json && c->result != NULL)
        print_snapshots(c->result);
    sbx_completion_free(c);
    sbx_request_free(r);
    return rc;
}

static int snapshot_rm(cli_plane *p, int n, char **names)
{
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < n; i++) {
        sbx_request *r = cli_plane_request(p, NULL);
        r->delete_snapshot = malloc(sizeof *r->delete_snapshot);
        if (r->delete_snapshot == NULL) {
            sbx_request_free(r);
            return cli_usage_error("snapshot", "out of memory");
        }
        sbx__v1__delete_snapshot__init(r->delete_snapshot);
        sbx_set_string(&r->delete_snapshot->name, names[i]);
        r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DELETE_SNAPSHOT;
        sbx_completion *c = submit(p, r);
        int one = cli_print_completion(c, false, NULL);
        if (one != CLI_EXIT_OK)
            rc = one;
        sbx_completion_free(c);
        sbx_request_free(r);
    }
    return rc;
}

int cmd_snapshot(int argc, char **argv)
{
    static const cli_option options[] = {{NULL, 0, 0}};
    cli_parser a = {.cmd = "snapshot", .help = cmd_snapshot_help, .options = options};
    int opt;
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
    }
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands < 1)
        return cli_usage_error("snapshot", "name an action: create, ls or rm");
    static const char *const actions[] = {"create", "ls", "rm", NULL};
    const char *action = cli_action(a.operands[0], actions);
    if (action == NULL)
        return cli_usage_error("snapshot", "unknown action '%s' (create, ls, rm)", a.operands[0]);
    bool create = strcmp(action, "create") == 0, ls = strcmp(action, "ls") == 0,
         rm = strcmp(action, "rm") == 0;
    if (create && a.n_operands != 3)
        return cli_usage_error("snapshot", "create needs SESSION and NAME");
    if (ls && a.n_operands != 1)
        return cli_usage_error("snapshot", "ls takes no arguments");
    if (rm && a.n_operands < 2)
        return cli_usage_error("snapshot", "rm needs at least one NAME");
    cli_plane p;
    int rc = cli_plane_open(&p, create);
    if (rc != 0)
        return rc;
    if (create)
        rc = snapshot_create(&p, a.operands[1], a.operands[2]);
    else if (ls)
        rc = snapshot_ls(&p);
    else
        rc = snapshot_rm(&p, a.n_operands - 1, a.operands + 1);
    cli_plane_close(&p);
    return rc;
}
