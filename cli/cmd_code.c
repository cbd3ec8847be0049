/* cmd_code.c - `sbx code -l LANG CODE`: source code in a fresh sandbox, or in a session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

/* Largest program read from stdin ("-"): the contract bounds RunCode.code at 16 KiB for
 * nanopb; providers take more, 1 MiB is far beyond a hand-written snippet. */
#define CODE_STDIN_MAX (1u << 20)

const char cmd_code_help[] =
    "Usage: sbx code -l LANG [--profile P | --session S] [-i] CODE\n\n"
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
    "  --json               print the whole completion as JSON instead\n\n" CLI_PROGRAM_EXIT_HELP;

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

int cmd_code(int argc, char **argv)
{
    enum { OPT_LANGUAGE, OPT_PROFILE, OPT_SESSION, OPT_STDIN };
    static const cli_option options[] = {[OPT_LANGUAGE] = {"language", 'l', true},
                                         [OPT_PROFILE] = {"profile", 0, true},
                                         [OPT_SESSION] = {"session", 's', true},
                                         [OPT_STDIN] = {"stdin", 'i', false},
                                         {NULL, 0, 0}};
    cli_parser a = {.cmd = "code", .help = cmd_code_help, .options = options};
    const char *lang = NULL, *profile = NULL, *session = NULL, *code = NULL;
    bool force_stdin = false;
    int opt;
    cli_errors_as_completions();
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
        if (opt == OPT_LANGUAGE)
            lang = a.value;
        else if (opt == OPT_PROFILE)
            profile = a.value;
        else if (opt == OPT_STDIN)
            force_stdin = true;
        else
            session = a.value;
    }
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands > 1)
        return cli_usage_error("code", "one CODE argument only (quote it)");
    if (a.n_operands == 1)
        code = a.operands[0];
    if (lang == NULL)
        return cli_usage_error("code", "-l LANG is required");
    if (code == NULL)
        return cli_usage_error("code", "no CODE given ('-' reads it from stdin)");
    if (profile != NULL && session != NULL)
        return cli_usage_error("code", "--profile and --session exclude each other");
    char *from_stdin = NULL;
    if (strcmp(code, "-") == 0) {
        from_stdin = read_stdin();
        if (from_stdin == NULL) {
            fprintf(stderr, "sbx code: stdin is larger than %u bytes\n", CODE_STDIN_MAX);
            return CLI_EXIT_USAGE;
        }
        code = from_stdin;
    }
    ProtobufCBinaryData in = {0, NULL};
    int rc = from_stdin == NULL ? cli_read_stdin("code", force_stdin, &in) : 0;
    if (rc != 0) {
        free(from_stdin);
        return rc;
    }
    cli_plane p;
    if ((rc = session != NULL ? cli_plane_open(&p, true) : cli_plane_open_one_shot(&p)) != 0) {
        free(from_stdin);
        free(in.data);
        return cli_program_exit_code(rc);
    }
    sbx_request *r = cli_plane_own(&p, sbx_request_code(profile, lang, code));
    if (r == NULL) {
        free(from_stdin);
        free(in.data);
        cli_plane_close(&p);
        fprintf(stderr, "sbx: out of memory building the request\n");
        return CLI_EXIT_NOT_RUN;
    }
    r->run_code->stdin = in; /* freed with the request */
    rc = cli_plane_run_program(&p, r, session);
    sbx_request_free(r);
    cli_plane_close(&p);
    free(from_stdin);
    return rc;
}
