/* cmd_attach.c - `sbx attach SESSION [COMMAND_ID] [--offset N]`: follows a command started with
 * `sbx exec --detach` (or by an exec that went away): prints what it printed from the offsets
 * on, then its live output, and exits with its status. Stopping sbx stops following only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

const char cmd_attach_help[] =
    "Usage: sbx attach [--offset N] [--stderr-offset N] SESSION [COMMAND_ID]\n\n"
    "Follows command COMMAND_ID of session SESSION (the id `sbx exec --detach` printed; without\n"
    "it, the command `sbx exec` or `sbx exec --detach` started last in SESSION): prints\n"
    "what it wrote to stdout and stderr from the offsets on (default: from the start), then its\n"
    "output as it is produced, and exits with its status once it ends (at once when it ended\n"
    "already). The sandbox keeps the last 256 KiB of each stream; an offset older than that is\n"
    "refused with the range still kept. SIGINT, SIGTERM or SIGHUP stop following; the command\n"
    "runs on (attach again, or `sbx kill`). Several clients may follow one command.\n\n"
    "Options:\n"
    "  --offset N         first stdout byte to print (a byte count already seen)\n"
    "  --stderr-offset N  first stderr byte to print (default: the --offset value)\n"
    "  --json             print the whole completion as JSON instead\n\n" CLI_PROGRAM_EXIT_HELP;

static bool parse_offset(const char *name, const char *text, uint64_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || text[0] == '-') {
        cli_usage_error("attach", "--%s needs a byte offset (0 or more), not '%s'", name, text);
        return false;
    }
    *out = v;
    return true;
}

int cmd_attach(int argc, char **argv)
{
    enum { OPT_OFFSET, OPT_STDERR_OFFSET };
    static const cli_option options[] = {[OPT_OFFSET] = {"offset", 0, true},
                                         [OPT_STDERR_OFFSET] = {"stderr-offset", 0, true},
                                         {NULL, 0, 0}};
    cli_parser a = {.cmd = "attach", .help = cmd_attach_help, .options = options};
    uint64_t out_off = 0, err_off = 0;
    bool err_set = false;
    int opt;
    cli_errors_as_completions();
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
        if (opt == OPT_OFFSET && !parse_offset("offset", a.value, &out_off))
            return CLI_EXIT_USAGE;
        if (opt == OPT_STDERR_OFFSET) {
            if (!parse_offset("stderr-offset", a.value, &err_off))
                return CLI_EXIT_USAGE;
            err_set = true;
        }
    }
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands != 1 && a.n_operands != 2)
        return cli_usage_error("attach", "expected SESSION [COMMAND_ID], got %d operands",
                               a.n_operands);
    uint64_t id = 0;
    if (a.n_operands == 2 && !cli_parse_command_id("attach", a.operands[1], &id))
        return CLI_EXIT_USAGE;
    if (!err_set)
        err_off = out_off;
    cli_plane p;
    int rc = cli_plane_open(&p, true);
    if (rc != 0)
        return cli_program_exit_code(rc);
    if (id == 0 && !cli_last_command(&p, a.operands[0], &id)) {
        cli_plane_close(&p);
        return cli_usage_error("attach",
                               "no command of session '%s' is noted here (none was started by "
                               "`sbx exec` on this host); pass its COMMAND_ID",
                               a.operands[0]);
    }
    rc = cli_plane_follow(&p, a.operands[0], id, out_off, err_off, false);
    cli_plane_close(&p);
    return rc;
}
