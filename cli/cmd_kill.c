/* cmd_kill.c - `sbx kill SESSION COMMAND_ID [--signal N]`: stops a command started with
 * `sbx exec --detach` (SIGKILL to its whole process tree by default) and reports how it ended. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

const char cmd_kill_help[] =
    "Usage: sbx kill [--signal N] SESSION COMMAND_ID\n\n"
    "Stops command COMMAND_ID of session SESSION (the id `sbx exec --detach` printed): SIGKILL\n"
    "to its whole process tree, or signal N to its process group, then waits for its end\n"
    "(a command that ended already is left as it is). Followers (`sbx attach`) see it end.\n\n"
    "Options:\n"
    "  --signal N  send signal number N instead (15 = SIGTERM, 2 = SIGINT); a program that\n"
    "              handles it may run on (a notice says so)\n"
    "  --json      print the completion (how the command ended) as JSON\n\n" CLI_EXIT_CODES_HELP;

int cmd_kill(int argc, char **argv)
{
    enum { OPT_SIGNAL };
    static const cli_option options[] = {[OPT_SIGNAL] = {"signal", 0, true}, {NULL, 0, 0}};
    cli_parser a = {.cmd = "kill", .help = cmd_kill_help, .options = options};
    long long signo = 0;
    int opt;
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
        if (opt == OPT_SIGNAL && !cli_opt_positive(&a, "signal", &signo))
            return a.exit_code;
    }
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (signo > 64)
        return cli_usage_error("kill", "--signal %lld is not a signal number (1-64)", signo);
    if (a.n_operands != 2)
        return cli_usage_error("kill", "expected SESSION COMMAND_ID, got %d operand%s",
                               a.n_operands, a.n_operands == 1 ? "" : "s");
    uint64_t id;
    if (!cli_parse_command_id("kill", a.operands[1], &id))
        return CLI_EXIT_USAGE;
    cli_plane p;
    int rc = cli_plane_open(&p, true);
    if (rc != 0)
        return rc;
    sbx_request *r = cli_plane_own(&p, sbx_request_cancel_command(NULL, id, (int32_t)signo));
    sbx_completion *c = NULL;
    if (r != NULL)
        sbx_sessions_execute_hooks(p.sessions, r, a.operands[0], SBX_WAIT_FOREVER, NULL, &c, NULL);
    rc = cli_print_completion(c, false, NULL);
    sbx_completion_free(c);
    sbx_request_free(r);
    cli_plane_close(&p);
    return rc;
}
