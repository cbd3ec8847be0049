/* cmd_version.c - `sbx version`: the sbx version and the providers built into this binary. */
#include <jansson.h>
#include <stdio.h>

#include "cli/cli.h"
#include "sbx/provider.h"

const char cmd_version_help[] =
    "Usage: sbx version [--json]\n\n"
    "Prints the sbx version and the providers built into this binary.\n";

int cmd_version(int argc, char **argv)
{
    cli_parser a = {.cmd = "version", .help = cmd_version_help};
    cli_opt_init(&a, argc, argv);
    if (cli_opt_next(&a) == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands > 0)
        return cli_usage_error("version", "unexpected argument '%s'", a.operands[0]);
    const sbx_provider_ops *const *list;
    size_t n = sbx_provider_builtins(&list);
    if (cli_global.json) {
        json_t *providers = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(providers, json_string(list[i]->name));
        json_t *j = json_pack("{s:s,s:o}", "version", SBX_VERSION, "providers", providers);
        json_dumpf(j, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(j);
        return CLI_EXIT_OK;
    }
    printf("sbx %s\nproviders: %s\n", SBX_VERSION, sbx_provider_names());
    return CLI_EXIT_OK;
}
