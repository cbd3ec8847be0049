/* cmd_expose.c - `sbx expose SESSION PORT`: makes a TCP port of a session's sandbox reachable
 * from outside it and prints where (the URL, then the access token when the listener needs one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

const char cmd_expose_help[] =
    "Usage: sbx expose SESSION PORT\n\n"
    "Makes TCP port PORT (1-65535) of session SESSION's sandbox (an id or a name from `sbx\n"
    "session ls`) reachable from outside it, and prints the URL on the first line of stdout;\n"
    "when the listener is not on a loopback address an access token is needed, printed on the\n"
    "second line: send it as header `X-Sbx-Expose-Token: TOKEN` or cookie\n"
    "`sbx_expose_token=TOKEN`. A program in the sandbox must listen on PORT (any address, or\n"
    "127.0.0.1). local and docker relay each connection into the sandbox's own network\n"
    "namespace (so it works with network deny too) from a listener on this host, or on the\n"
    "worker's host with SBX_BROKER=remote: provider options expose_address (default\n"
    "127.0.0.1) and expose_host (the host name put in the URL) decide where; e2b and daytona\n"
    "print their own preview URL. Exposing an exposed port prints the same URL; at most 16\n"
    "ports per sandbox; the port closes when the session's sandbox is destroyed. Providers\n"
    "whose `sbx providers` row shows EXPOSE offer it.\n\n"
    "Options:\n"
    "  --json      print the completion as JSON\n\n" CLI_EXIT_CODES_HELP;

int cmd_expose(int argc, char **argv)
{
    static const cli_option options[] = {{NULL, 0, 0}};
    cli_parser a = {.cmd = "expose", .help = cmd_expose_help, .options = options};
    int opt;
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
    }
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands != 2)
        return cli_usage_error("expose", "expected SESSION PORT, got %d operands", a.n_operands);
    const char *ps = a.operands[1];
    char *end = NULL;
    unsigned long port = strtoul(ps, &end, 10);
    if (ps[0] < '0' || ps[0] > '9' || end == ps || *end != '\0' || port < 1 || port > 65535)
        return cli_usage_error("expose", "PORT '%s' is not a TCP port (1-65535)", ps);
    cli_plane p;
    int rc = cli_plane_open(&p, true);
    if (rc != 0)
        return rc;
    sbx_request *r = cli_plane_own(&p, sbx_request_expose(NULL, (uint32_t)port));
    sbx_completion *c = NULL;
    if (r == NULL)
        c = sbx_completion_fail("", SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    else
        sbx_sessions_execute_hooks(p.sessions, r, a.operands[0], SBX_WAIT_FOREVER, NULL, &c, NULL);
    rc = cli_print_completion(c, false, NULL);
    if (rc == CLI_EXIT_OK && !cli_global.json && c->result != NULL) {
        printf("%s\n", c->result->expose_url);
        if (c->result->expose_token != NULL && c->result->expose_token[0])
            printf("%s\n", c->result->expose_token);
    }
    sbx_completion_free(c);
    sbx_request_free(r);
    cli_plane_close(&p);
    return rc;
}
