/* cmd_run.c - `sbx run`: one command in a fresh sandbox, destroyed afterwards; exits with the
 * program's status. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"
#include "cli/policy_opts.h"

const char cmd_run_help[] =
    "Usage: sbx run [--profile P] [--timeout D] [--from-snapshot NAME] [-i] [POLICY] [--]\n"
    "               COMMAND [ARGS...]\n\n"
    "Runs COMMAND in a fresh sandbox of profile P (default: the default profile) and destroys\n"
    "the sandbox afterwards, whatever happened (also on SIGINT, SIGTERM or SIGHUP, which stop\n"
    "the program). Its output is printed as it is produced, stdout to stdout and stderr to\n"
    "stderr. stdin is forwarded when it is not a terminal (or with -i), up to 8 MiB.\n"
    "Options end at the first word of COMMAND: `sbx run echo --json` runs `echo --json`.\n\n"
    "Options:\n"
    "  --profile P      the profile to use\n"
    "  --from-snapshot NAME\n"
    "                   start with snapshot NAME's workspace (sbx snapshot ls)\n"
    "  -i, --stdin      forward stdin even when it is a terminal (until end of file)\n"
    "  --json           print the whole completion as JSON instead\n\n" CLI_POLICY_HELP
        CLI_PROGRAM_EXIT_HELP;

int cmd_run(int argc, char **argv)
{
    enum { OPT_PROFILE, OPT_STDIN, OPT_FROM_SNAPSHOT };
    static const cli_option options[] = {[OPT_PROFILE] = {"profile", 0, true},
                                         [OPT_STDIN] = {"stdin", 'i', false},
                                         [OPT_FROM_SNAPSHOT] = {"from-snapshot", 0, true},
                                         CLI_POLICY_OPTIONS,
                                         {NULL, 0, 0}};
    cli_parser a = {
        .cmd = "run", .help = cmd_run_help, .options = options, .stop_at_operand = true};
    const char *profile = NULL, *from_snapshot = NULL;
    bool force_stdin = false;
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
        if (opt == OPT_PROFILE)
            profile = a.value;
        else if (opt == OPT_STDIN)
            force_stdin = true;
        else if (opt == OPT_FROM_SNAPSHOT)
            from_snapshot = a.value;
    }
    if (opt >= 0 || opt == CLI_OPT_EXIT) {
        sbx_message_free((ProtobufCMessage *)policy);
        return a.exit_code;
    }
    if (a.n_operands == 0) {
        sbx_message_free((ProtobufCMessage *)policy);
        return cli_usage_error("run", "no command given (sbx run [OPTIONS] [--] COMMAND ...)");
    }
    ProtobufCBinaryData in = {0, NULL};
    int rc = cli_read_stdin("run", force_stdin, &in);
    cli_plane p;
    if (rc == 0 && (rc = cli_plane_open_one_shot(&p)) != 0)
        rc = cli_program_exit_code(rc);
    if (rc != 0) {
        free(in.data); /* NULL when reading stdin failed */
        sbx_message_free((ProtobufCMessage *)policy);
        return rc;
    }
    sbx_request *r = cli_plane_own(
        &p, sbx_request_argv(profile, (const char *const *)a.operands, (size_t)a.n_operands));
    if (r == NULL) {
        free(in.data);
        sbx_message_free((ProtobufCMessage *)policy);
        cli_plane_close(&p);
        fprintf(stderr, "sbx: out of memory building the request\n");
        return CLI_EXIT_NOT_RUN;
    }
    r->run_command->stdin = in; /* freed with the request */
    if (from_snapshot != NULL)
        sbx_set_string(&r->from_snapshot, from_snapshot);
    r->policy = policy; /* freed with the request */
    rc = cli_plane_run_program(&p, r, NULL);
    sbx_request_free(r);
    cli_plane_close(&p);
    return rc;
}
