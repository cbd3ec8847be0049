/* cmd_pause.c - `sbx pause SESSION` and `sbx resume SESSION`: freeze every process of a
 * session's sandbox (its memory, files and running programs kept, no CPU used) and thaw it. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

const char cmd_pause_help[] =
    "Usage: sbx pause SESSION\n\n"
    "Freezes every process of session SESSION's sandbox (an id or a name from `sbx session\n"
    "ls`): programs, background processes and stateful kernels stop where they are and use no\n"
    "CPU; memory and files are kept. `sbx resume SESSION` thaws it; so does any other command\n"
    "on the session (exec, cp, attach, ...), which then notes that it resumed it. Pausing a\n"
    "paused session changes nothing. Providers whose `sbx providers` row shows PAUSE offer it\n"
    "(local as root: the cgroup freezer; managed docker: the daemon's pause).\n\n"
    "Options:\n"
    "  --json      print the completion as JSON\n\n" CLI_EXIT_CODES_HELP;

const char cmd_resume_help[] =
    "Usage: sbx resume SESSION\n\n"
    "Thaws session SESSION's sandbox paused by `sbx pause`: every process goes on where it\n"
    "stopped. Resuming a running session changes nothing.\n\n"
    "Options:\n"
    "  --json      print the completion as JSON\n\n" CLI_EXIT_CODES_HELP;

/* Both commands: one operand, one request. */
static int pause_or_resume(int argc, char **argv, const char *cmd, const char *help, bool pause)
{
    static const cli_option options[] = {{NULL, 0, 0}};
    cli_parser a = {.cmd = cmd, .help = help, .options = options};
    int opt;
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
    }
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands != 1)
        return cli_usage_error(cmd, "expected SESSION, got %d operands", a.n_operands);
    cli_plane p;
    int rc = cli_plane_open(&p, true);
    if (rc != 0)
        return rc;
    sbx_request *r = cli_plane_own(&p, pause ? sbx_request_pause(NULL) : sbx_request_resume(NULL));
    sbx_completion *c = NULL;
    if (r == NULL)
        c = sbx_completion_fail("", SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    else
        sbx_sessions_execute_hooks(p.sessions, r, a.operands[0], SBX_WAIT_FOREVER, NULL, &c, NULL);
    rc = cli_print_completion(c, false, NULL);
    sbx_completion_free(c);
    sbx_request_free(r);
    cli_plane_close(&p);
    return rc;
}

int cmd_pause(int argc, char **argv)
{
    return pause_or_resume(argc, argv, "pause", cmd_pause_help, true);
}

int cmd_resume(int argc, char **argv)
{
    return pause_or_resume(argc, argv, "resume", cmd_resume_help, false);
}
