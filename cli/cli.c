/* cli.c - helpers every `sbx` subcommand shares: global option parsing, exit codes, config
 * loading and error reporting (see cli.h). Adding a global option: one row in
 * global_options[] and a field in cli_globals.
 */
#include "cli/cli.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cli_globals cli_global;

typedef struct global_option {
    const char *name; /* "--config" */
    bool takes_value; /* --name VALUE or --name=VALUE */
    void (*apply)(const char *value);
} global_option;

static void set_config(const char *value)
{
    cli_global.config_path = value;
}
static void set_json(const char *value)
{
    (void)value;
    cli_global.json = true;
}

static void set_broker(const char *value)
{
    cli_global.broker = value;
}
static void set_endpoint(const char *value)
{
    cli_global.endpoint = value;
}
static void set_ca_file(const char *value)
{
    cli_global.ca_file = value;
}
static void set_cert_file(const char *value)
{
    cli_global.cert_file = value;
}
static void set_key_file(const char *value)
{
    cli_global.key_file = value;
}
static void set_token_env(const char *value)
{
    cli_global.token_env = value;
}

static const global_option global_options[] = {
    {"--config", true, set_config},     {"--json", false, set_json},
    {"--broker", true, set_broker},     {"--endpoint", true, set_endpoint},
    {"--ca-file", true, set_ca_file},   {"--cert-file", true, set_cert_file},
    {"--key-file", true, set_key_file}, {"--token-env", true, set_token_env},
};

int cli_parse_globals(int argc, char **argv)
{
    int out = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) { /* everything after belongs to the program */
            while (i < argc)
                argv[out++] = argv[i++];
            break;
        }
        const global_option *match = NULL;
        const char *value = NULL;
        for (size_t g = 0; g < sizeof(global_options) / sizeof(global_options[0]); g++) {
            size_t n = strlen(global_options[g].name);
            if (strcmp(argv[i], global_options[g].name) == 0) {
                match = &global_options[g];
                break;
            }
            if (global_options[g].takes_value && strncmp(argv[i], global_options[g].name, n) == 0 &&
                argv[i][n] == '=') {
                match = &global_options[g];
                value = argv[i] + n + 1;
                break;
            }
        }
        if (match == NULL) {
            argv[out++] = argv[i];
            continue;
        }
        if (match->takes_value && value == NULL) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sbx: %s needs a value (see sbx --help)\n", match->name);
                return -1;
            }
            value = argv[++i];
        }
        match->apply(value);
    }
    argv[out] = NULL;
    return out;
}

int cli_exit_code(sbx_status st)
{
    switch (st) {
    case SBX_OK: return CLI_EXIT_OK;
    case SBX_E_CONFIG: return CLI_EXIT_CONFIG;
    case SBX_E_INVALID_ARGUMENT: return CLI_EXIT_USAGE;
    case SBX_E_CAPABILITY:
    case SBX_E_POLICY:
    case SBX_E_PERMISSION_DENIED:
    case SBX_E_UNAUTHENTICATED: return CLI_EXIT_REFUSED;
    case SBX_E_TIMEOUT: return CLI_EXIT_TIMEOUT;
    case SBX_E_SESSION_NOT_FOUND:
    case SBX_E_GONE: return CLI_EXIT_NOT_FOUND;
    default: return CLI_EXIT_FAILED;
    }
}

/* Replaces *field with a copy of value when value is set; false on allocation failure. */
static bool override_string(char **field, const char *value)
{
    if (value == NULL)
        return true;
    char *copy = strdup(value);
    if (copy == NULL)
        return false;
    free(*field);
    *field = copy;
    return true;
}

/* --broker and the remote options over the file's broker block. */
static sbx_status apply_broker_options(sbx_config *cfg, sbx_error *err)
{
    const char *b = cli_global.broker;
    if (b != NULL && strcmp(b, "embedded") != 0 && strcmp(b, "thread") != 0 &&
        strcmp(b, "remote") != 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "--broker '%s': expected embedded, thread or remote", b);
    sbx_remote_config *r = &cfg->broker.remote;
    if (!override_string(&cfg->broker.flavor, b) ||
        !override_string(&r->endpoint, cli_global.endpoint) ||
        !override_string(&r->ca_file, cli_global.ca_file) ||
        !override_string(&r->cert_file, cli_global.cert_file) ||
        !override_string(&r->key_file, cli_global.key_file) ||
        !override_string(&r->token_env, cli_global.token_env))
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory applying --broker options");
    if (cfg->broker.flavor != NULL && strcmp(cfg->broker.flavor, "remote") == 0 &&
        (r->endpoint == NULL || r->endpoint[0] == '\0'))
        return sbx_error_set(err, SBX_E_CONFIG,
                             "the remote broker needs an endpoint: pass --endpoint URL or set "
                             "broker.remote.endpoint");
    return SBX_OK;
}

sbx_status cli_load_config(const char *file, sbx_config **out, sbx_error *err)
{
    if (file == NULL)
        file = cli_global.config_path;
    sbx_status st = sbx_config_load(file, out, err);
    if (st == SBX_OK && (st = apply_broker_options(*out, err)) != SBX_OK) {
        sbx_config_free(*out);
        *out = NULL;
    }
    return st;
}

int cli_report_error(const char *what, const sbx_error *err)
{
    fprintf(stderr, "sbx: %s: %s\n", what, err->message);
    if (cli_global.json) {
        json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", sbx_status_name(err->code),
                              "message", err->message);
        if (j != NULL) {
            json_dumpf(j, stdout, JSON_INDENT(2));
            fputc('\n', stdout);
            json_decref(j);
        }
    }
    return cli_exit_code(err->code);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "sbx %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `sbx %s --help`)\n", cmd);
    return CLI_EXIT_USAGE;
}

bool cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}
