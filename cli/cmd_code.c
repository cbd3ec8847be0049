/* cmd_code.c - `sbx code -l LANG CODE`: source code in a fresh sandbox, or in a session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"
#include "cli/policy_opts.h"

/* Largest program read from stdin ("-"): the contract bounds RunCode.code at 16 KiB for
 * nanopb; providers take more, 1 MiB is far beyond a hand-written snippet. */
#define CODE_STDIN_MAX (1u << 20)

const char cmd_code_help[] =
    "Usage: sbx code -l LANG [--profile P | --session S] [--timeout D] [-i] [POLICY] CODE\n\n"
    "Runs CODE (or, for '-', the program read from stdin) with the LANG interpreter. Without\n"
    "--session it runs in a fresh sandbox that is destroyed afterwards; with --session the\n"
    "session's interpreter state is kept between calls where the provider is stateful. The\n"
    "value of a last bare expression is printed after the output.\n\n"
    "Options:\n"
    "  -l, --language LANG  python, bash, ... (`sbx providers` lists them per profile)\n"
    "  --profile P          the profile to use (fresh sandbox)\n"
    "  -s, --session S      run in this session (id or name)\n"
    "  -i, --stdin          forward stdin even when it is a terminal (it is forwarded\n"
    "                       whenever it is not one, up to 8 MiB, unless CODE is '-')\n"
    "  --json               print the whole completion as JSON instead\n\n" CLI_POLICY_HELP
        CLI_PROGRAM_EXIT_HELP;

static char *read_stdin(void)
{
    char *buf = malloc(CODE_STDIN_MAX + 1);
    if (buf == NULL)
        return NULL;
    size_t n = fread(buf, 1, CODE_STDIN_MAX + 1, stdin);
    if (n > CODE_STDIN_MAX) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* The checks of the operands and options together: 0, or the usage error's exit code. */
static int code_args(const cli_parser *a, const char *lang, const char *profile,
                     const char *session)
{
    /* `sbx code python 'print(1)'`: the language written as an operand, as other tools take
     * it, is the likely mistake; say how to write it rather than only that it is wrong */
    if (a->n_operands == 2 && lang == NULL)
        return cli_usage_error("code", "the language goes with -l: sbx code -l %s CODE",
                               a->operands[0]);
    if (a->n_operands > 1)
        return cli_usage_error("code", "one CODE argument only (quote it)");
    if (lang == NULL)
        return cli_usage_error("code", "-l LANG is required");
    if (a->n_operands == 0)
        return cli_usage_error("code", "no CODE given ('-' reads it from stdin)");
    if (profile != NULL && session != NULL)
        return cli_usage_error("code", "--profile and --session exclude each other");
    return 0;
}

int cmd_code(int argc, char **argv)
{
    enum { OPT_LANGUAGE, OPT_PROFILE, OPT_SESSION, OPT_STDIN };
    static const cli_option options[] = {[OPT_LANGUAGE] = {"language", 'l', true},
                                         [OPT_PROFILE] = {"profile", 0, true},
                                         [OPT_SESSION] = {"session", 's', true},
                                         [OPT_STDIN] = {"stdin", 'i', false},
                                         CLI_POLICY_OPTIONS,
                                         {NULL, 0, 0}};
    cli_parser a = {.cmd = "code", .help = cmd_code_help, .options = options};
    const char *lang = NULL, *profile = NULL, *session = NULL, *code = NULL;
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
        if (opt == OPT_LANGUAGE)
            lang = a.value;
        else if (opt == OPT_PROFILE)
            profile = a.value;
        else if (opt == OPT_STDIN)
            force_stdin = true;
        else
            session = a.value;
    }
    int rc = opt >= 0 || opt == CLI_OPT_EXIT ? a.exit_code : code_args(&a, lang, profile, session);
    if (rc != 0 || opt == CLI_OPT_EXIT) {
        sbx_message_free((ProtobufCMessage *)policy);
        return rc;
    }
    code = a.operands[0];
    char *from_stdin = NULL;
    ProtobufCBinaryData in = {0, NULL};
    if (strcmp(code, "-") == 0) {
        from_stdin = read_stdin();
        if (from_stdin == NULL) {
            fprintf(stderr, "sbx code: stdin is larger than %u bytes\n", CODE_STDIN_MAX);
            rc = CLI_EXIT_USAGE;
        }
        code = from_stdin;
    } else {
        rc = cli_read_stdin("code", force_stdin, &in);
    }
    cli_plane p;
    if (rc == 0 &&
        (rc = session != NULL ? cli_plane_open(&p, true) : cli_plane_open_one_shot(&p)) != 0)
        rc = cli_program_exit_code(rc);
    if (rc != 0) {
        free(in.data); /* NULL unless stdin was read */
        free(from_stdin);
        sbx_message_free((ProtobufCMessage *)policy);
        return rc;
    }
    sbx_request *r = cli_plane_own(&p, sbx_request_code(profile, lang, code));
    if (r == NULL) {
        free(from_stdin);
        free(in.data);
        sbx_message_free((ProtobufCMessage *)policy);
        cli_plane_close(&p);
        fprintf(stderr, "sbx: out of memory building the request\n");
        return CLI_EXIT_NOT_RUN;
    }
    r->run_code->stdin = in; /* freed with the request */
    r->policy = policy;
    rc = cli_plane_run_program(&p, r, session);
    sbx_request_free(r);
    cli_plane_close(&p);
    free(from_stdin);
    return rc;
}
