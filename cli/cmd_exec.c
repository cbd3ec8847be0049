/* cmd_exec.c - `sbx exec --session S -- CMD`: a command in an existing session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"
#include "cli/policy_opts.h"

const char cmd_exec_help[] =
    "Usage: sbx exec --session S [--timeout D] [-i] [-d] [--recreate-elsewhere] [POLICY] [--]\n"
    "                COMMAND [ARGS...]\n\n"
    "Runs COMMAND in session S (an id or a name from `sbx session ls`). The session keeps its\n"
    "sandbox between commands; an unknown session is an error, never a fresh sandbox.\n"
    "Options end at the first word of COMMAND. Output is printed as it is produced; stdin is\n"
    "forwarded when it is not a terminal (or with -i), up to 8 MiB. SIGINT, SIGTERM or SIGHUP\n"
    "stop the program. Where the provider can (DETACH in `sbx providers`), the command runs\n"
    "detached and exec follows it: should exec itself be killed, `sbx attach S` prints the\n"
    "whole output and waits for the end.\n\n"
    "With --detach the command is started and runs on in the sandbox; sbx prints its command id\n"
    "and exits 0. `sbx attach S ID` prints its output (kept in a journal of the last 256 KiB of\n"
    "each stream) and waits for its end; `sbx kill S ID` stops it.\n\n"
    "Options:\n"
    "  -s, --session S  the session (required)\n"
    "  -d, --detach     start the command, print its id and exit (stdin is sent first)\n"
    "  -i, --stdin      forward stdin even when it is a terminal (until end of file)\n"
    "  --recreate-elsewhere\n"
    "                   when the session's sandbox lives on another node (host-local providers:\n"
    "                   local, docker), start it over on the node that takes the request, with\n"
    "                   an empty sandbox; without it such a request fails naming the node\n"
    "  --json           print the whole completion as JSON instead\n\n" CLI_POLICY_HELP
    "In a session they take effect when its sandbox is made (by its first command, or the\n"
    "first after it was lost); a later command may repeat them or ask for more, and runs\n"
    "under the sandbox's limits, but one that asks for less is refused (exit "
    "4).\n\n" CLI_PROGRAM_EXIT_HELP;

/* What the parse left to check: 0, or the exit code of --help or of a usage error. */
static int exec_args(const cli_parser *a, int opt, const char *session)
{
    if (opt >= 0 || opt == CLI_OPT_EXIT)
        return a->exit_code;
    if (session == NULL)
        return cli_usage_error("exec", "--session is required");
    if (a->n_operands == 0)
        return cli_usage_error("exec", "no command given (sbx exec --session S [--] COMMAND ...)");
    return 0;
}

int cmd_exec(int argc, char **argv)
{
    enum { OPT_SESSION, OPT_STDIN, OPT_RECREATE, OPT_DETACH };
    static const cli_option options[] = {[OPT_SESSION] = {"session", 's', true},
                                         [OPT_STDIN] = {"stdin", 'i', false},
                                         [OPT_RECREATE] = {"recreate-elsewhere", 0, false},
                                         [OPT_DETACH] = {"detach", 'd', false},
                                         CLI_POLICY_OPTIONS,
                                         {NULL, 0, 0}};
    cli_parser a = {
        .cmd = "exec", .help = cmd_exec_help, .options = options, .stop_at_operand = true};
    const char *session = NULL;
    bool force_stdin = false, recreate_elsewhere = false, detach = false;
    sbx_policy *policy = NULL; /* the policy options' (owned by the request once built) */
    int opt, pol = 0;
    cli_errors_as_completions();
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
        pol = cli_policy_opt(&a, opt, &policy);
        if (pol < 0)
            break;
        if (pol > 0)
            continue;
        if (opt == OPT_SESSION)
            session = a.value;
        else if (opt == OPT_STDIN)
            force_stdin = true;
        else if (opt == OPT_RECREATE)
            recreate_elsewhere = true;
        else if (opt == OPT_DETACH)
            detach = true;
    }
    int rc = exec_args(&a, opt, session);
    ProtobufCBinaryData in = {0, NULL};
    if (rc == 0 && opt != CLI_OPT_EXIT)
        rc = cli_read_stdin("exec", force_stdin, &in);
    cli_plane p;
    if (rc == 0 && opt != CLI_OPT_EXIT && (rc = cli_plane_open(&p, true)) != 0)
        rc = cli_program_exit_code(rc);
    if (rc != 0 || opt == CLI_OPT_EXIT) {
        free(in.data); /* NULL unless stdin was read */
        sbx_message_free((ProtobufCMessage *)policy);
        return rc;
    }
    sbx_request *r = cli_plane_own(
        &p, sbx_request_argv(NULL, (const char *const *)a.operands, (size_t)a.n_operands));
    if (r == NULL) {
        free(in.data);
        sbx_message_free((ProtobufCMessage *)policy);
        cli_plane_close(&p);
        fprintf(stderr, "sbx: out of memory building the request\n");
        return CLI_EXIT_NOT_RUN;
    }
    r->run_command->stdin = in; /* freed with the request */
    r->run_command->detach = detach;
    r->recreate_elsewhere = recreate_elsewhere;
    r->policy = policy; /* freed with the request */
    rc =
        detach ? cli_plane_start_detached(&p, r, session) : cli_plane_exec_followed(&p, r, session);
    sbx_request_free(r);
    cli_plane_close(&p);
    return rc;
}
