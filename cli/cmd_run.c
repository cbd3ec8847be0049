/* cmd_run.c - `sbx run`: one command in a fresh sandbox, destroyed afterwards; exits with the
 * program's status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

const char cmd_run_help[] =
    "Usage: sbx run [--profile P] [--timeout-ms N] -- COMMAND [ARGS...]\n\n"
    "Runs COMMAND in a fresh sandbox of profile P (default: the default profile) and destroys\n"
    "the sandbox afterwards, whatever happened. Program output goes to stdout/stderr.\n\n"
    "Options:\n"
    "  --profile P      the profile to use\n"
    "  --timeout-ms N   wall-clock limit (may only narrow the profile's timeout_ms)\n"
    "  --json           print the whole completion as JSON instead\n\n"
    "Exit status: the program's own (128+N when killed by signal N); 125 when sbx could not\n"
    "run it (the reason is on stderr).\n";

int cmd_run(int argc, char **argv)
{
    const char *profile = NULL;
    long long timeout_ms = 0;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--profile") == 0 && i + 1 < argc) {
            profile = argv[++i];
        } else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
            char *end = NULL;
            timeout_ms = strtoll(argv[++i], &end, 10);
            if (*end != '\0' || timeout_ms <= 0)
                return cli_usage_error("run", "--timeout-ms needs a positive number, not '%s'",
                                       argv[i]);
        } else if (argv[i][0] == '-') {
            return cli_usage_error("run", "unknown option '%s'", argv[i]);
        } else {
            break;
        }
    }
    if (i >= argc)
        return cli_usage_error("run", "no command given (sbx run -- COMMAND ...)");
    cli_plane p;
    int rc = cli_plane_open(&p, false);
    if (rc != 0)
        return CLI_EXIT_NOT_RUN;
    sbx_request *r = cli_plane_request(&p, profile);
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
    sbx_broker_submit(p.broker, r, SBX_WAIT_FOREVER, NULL, &c);
    rc = cli_print_completion(c, true);
    if (c != NULL)
        cli_plane_destroy_handle(&p, c->session);
    sbx_completion_free(c);
    sbx_request_free(r);
    cli_plane_close(&p);
    return rc;
}
