/* cmd_exec.c - `sbx exec --session S -- CMD`: a command in an existing session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

const char cmd_exec_help[] =
    "Usage: sbx exec --session S [--timeout-ms N] -- COMMAND [ARGS...]\n\n"
    "Runs COMMAND in session S (an id or a name from `sbx session ls`). The session keeps its\n"
    "sandbox between commands; an unknown session is an error, never a fresh sandbox.\n\n"
    "Options:\n"
    "  --session S      the session (required)\n"
    "  --timeout-ms N   wall-clock limit (may only narrow the profile's timeout_ms)\n"
    "  --json           print the whole completion as JSON instead\n\n"
    "Exit status: the program's own (128+N when killed by signal N); 125 when sbx could not\n"
    "run it (the reason is on stderr).\n";

int cmd_exec(int argc, char **argv)
{
    const char *session = NULL;
    long long timeout_ms = 0;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--session") == 0 && i + 1 < argc) {
            session = argv[++i];
        } else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
            char *end = NULL;
            timeout_ms = strtoll(argv[++i], &end, 10);
            if (*end != '\0' || timeout_ms <= 0)
                return cli_usage_error("exec", "--timeout-ms needs a positive number, not '%s'",
                                       argv[i]);
        } else if (argv[i][0] == '-') {
            return cli_usage_error("exec", "unknown option '%s'", argv[i]);
        } else {
            break;
        }
    }
    if (session == NULL)
        return cli_usage_error("exec", "--session is required");
    if (i >= argc)
        return cli_usage_error("exec", "no command given (sbx exec --session S -- COMMAND ...)");
    cli_plane p;
    int rc = cli_plane_open(&p, true);
    if (rc != 0)
        return CLI_EXIT_NOT_RUN;
    sbx_request *r = cli_plane_request(&p, NULL);
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    for (int j = i; j < argc; j++)
        sbx_add_string(&r->run_command->n_argv, &r->run_command->argv, argv[j]);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    if (timeout_ms > 0) {
        r->policy = sbx_policy_new();
        r->policy->timeout_ms = (uint64_t)timeout_ms;
    }
    sbx_completion *c = NULL;
    sbx_sessions_execute(p.sessions, r, session, SBX_WAIT_FOREVER, &c, NULL);
    rc = cli_print_completion(c, true);
    sbx_completion_free(c);
    sbx_request_free(r);
    cli_plane_close(&p);
    return rc;
}
