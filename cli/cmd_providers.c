/* cmd_providers.c - `sbx providers`: every configured profile and what its provider offers
 * and enforces (the engine's Describe). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"
#include "sbx/provider.h"

const char cmd_providers_help[] =
    "Usage: sbx providers [--json]\n\n"
    "Lists every configured profile with its provider and capabilities: isolation, languages,\n"
    "and which operations (shell, files, packages, attach, user identity) and policy dimensions\n"
    "(network, domain allowlists, filesystem, resources) it offers and enforces. A profile whose\n"
    "provider cannot open here (no daemon, no API key) is shown as unavailable.\n";

static const char *isolation_name(Sbx__V1__Isolation i)
{
    switch (i) {
    case SBX__V1__ISOLATION__ISOLATION_OS_POLICY: return "os_policy";
    case SBX__V1__ISOLATION__ISOLATION_CONTAINER: return "container";
    case SBX__V1__ISOLATION__ISOLATION_SYSCALL_FILTER: return "syscall_filter";
    case SBX__V1__ISOLATION__ISOLATION_MICRO_VM: return "micro_vm";
    default: return "none";
    }
}

static const char *yn(protobuf_c_boolean b)
{
    return b ? "yes" : "-";
}

int cmd_providers(int argc, char **argv)
{
    cli_parser a = {.cmd = "providers", .help = cmd_providers_help};
    cli_opt_init(&a, argc, argv);
    if (cli_opt_next(&a) == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands > 0)
        return cli_usage_error("providers", "unexpected argument '%s'", a.operands[0]);
    cli_plane p;
    int rc = cli_plane_open(&p, false);
    if (rc != 0)
        return rc;
    Sbx__V1__DescribeResponse *d = NULL;
    sbx_error err;
    if (sbx_broker_describe(p.broker, &d, &err) != SBX_OK) {
        rc = cli_report_error("providers", &err);
        cli_plane_close(&p);
        return rc;
    }
    if (cli_global.json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < d->n_profiles; i++) {
            const Sbx__V1__ProfileDescription *pd = d->profiles[i];
            json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:b}", "profile", pd->name, "provider",
                                  pd->provider, "scope", pd->scope, "environment", pd->environment,
                                  "available", pd->capabilities != NULL);
            const sbx_capabilities *c = pd->capabilities;
            if (c != NULL) {
                json_t *langs = json_array();
                for (size_t j = 0; j < c->n_languages; j++)
                    json_array_append_new(langs, json_string(c->languages[j]));
                json_object_set_new(
                    o, "capabilities",
                    json_pack("{s:s,s:o,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b}",
                              "isolation", isolation_name(c->isolation), "languages", langs,
                              "shell", c->shell, "files", c->files, "package_install",
                              c->package_install, "stateful", c->stateful, "attach", c->attach,
                              "provisions", c->provisions, "attaches_external",
                              c->attaches_external, "principal_user", c->principal_user,
                              "policy_network", c->policy_network, "policy_network_domains",
                              c->policy_network_domains, "policy_filesystem", c->policy_filesystem,
                              "policy_resources", c->policy_resources, "streaming", c->streaming));
                json_object_set_new(json_object_get(o, "capabilities"), "detach",
                                    json_boolean(c->detach));
                json_object_set_new(json_object_get(o, "capabilities"), "pause",
                                    json_boolean(c->pause));
                json_object_set_new(json_object_get(o, "capabilities"), "snapshot",
                                    json_boolean(c->snapshot));
                json_object_set_new(json_object_get(o, "capabilities"), "expose",
                                    json_boolean(c->expose));
            }
            json_array_append_new(arr, o);
        }
        json_dumpf(arr, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(arr);
    } else {
        printf("broker: %s\n", sbx_broker_flavor(p.broker));
        printf(
            "%-12s %-8s %-14s %-11s %-18s %-5s %-5s %-4s %-6s %-6s %-5s %-4s %-6s %-4s %-3s %-6s "
            "%-3s %s\n",
            "PROFILE", "PROVIDER", "ISOLATION", "SCOPE", "LANGUAGES", "SHELL", "FILES", "PKGS",
            "ATTACH", "DETACH", "PAUSE", "SNAP", "EXPOSE", "USER", "NET", "DOMAIN", "FS",
            "RESOURCES");
        for (size_t i = 0; i < d->n_profiles; i++) {
            const Sbx__V1__ProfileDescription *pd = d->profiles[i];
            const sbx_capabilities *c = pd->capabilities;
            if (c == NULL) {
                printf("%-12s %-8s (unavailable here: the provider did not open)\n", pd->name,
                       pd->provider);
                continue;
            }
            char langs[256] = "";
            size_t off = 0;
            for (size_t j = 0; j < c->n_languages && off < sizeof(langs); j++)
                off += (size_t)snprintf(langs + off, sizeof(langs) - off, "%s%s", j ? "," : "",
                                        c->languages[j]);
            printf("%-12s %-8s %-14s %-11s %-18s %-5s %-5s %-4s %-6s %-6s %-5s %-4s %-6s %-4s %-3s "
                   "%-6s %-3s %s\n",
                   pd->name, pd->provider, isolation_name(c->isolation), pd->scope,
                   langs[0] ? langs : "-", yn(c->shell), yn(c->files), yn(c->package_install),
                   yn(c->attach), yn(c->detach), yn(c->pause), yn(c->snapshot), yn(c->expose),
                   yn(c->principal_user), yn(c->policy_network), yn(c->policy_network_domains),
                   yn(c->policy_filesystem), yn(c->policy_resources));
        }
    }
    sbx_message_free(&d->base);
    cli_plane_close(&p);
    return CLI_EXIT_OK;
}
