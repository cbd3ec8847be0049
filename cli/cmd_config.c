/* cmd_config.c - `sbx config check [FILE]`: loads and validates a config file (or the built-in
 * default) and prints what it resolves to: every profile with its provider, scope, environment,
 * identity, policy and provider options, plus the broker and worker settings.
 * Errors print with file:line:column and exit 3. This command never opens a provider.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "sbx/provider.h"

const char cmd_config_help[] =
    "Usage: sbx config check [FILE] [--json]\n\n"
    "Loads the configuration and prints what it resolves to: the default profile, every\n"
    "profile's provider, scope, environment, identity, policy and provider options, and the\n"
    "broker and worker settings. Nothing is started or created.\n\n"
    "FILE defaults to --config, then $SBX_CONFIG, then the built-in default (one `local`\n"
    "profile named `default`, network denied). A FILE that does not exist is an error.\n\n"
    "Exit status: 0 the configuration is valid; 3 it is not (the message names\n"
    "file:line:column, the key and what is accepted); 2 usage error.\n";

static const char *egress_name(Sbx__V1__NetworkEgress e)
{
    switch (e) {
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY: return "deny";
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW: return "allow";
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST: return "allowlist";
    default: return "default";
    }
}

static const char *identity_name(Sbx__V1__PrincipalMode m)
{
    return m == SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER ? "user" : "agent";
}

static json_t *string_array(char **items, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(items[i]));
    return a;
}

static json_t *policy_json(const sbx_policy *p)
{
    return json_pack("{s:s,s:o,s:o,s:o,s:f,s:I,s:I,s:I,s:I,s:I,s:b}", "network_egress",
                     egress_name(p->network_egress), "network_allow",
                     string_array(p->network_allow, p->n_network_allow), "fs_read",
                     string_array(p->fs_read, p->n_fs_read), "fs_write",
                     string_array(p->fs_write, p->n_fs_write), "cpu", p->cpu, "memory_mb",
                     (json_int_t)p->memory_mb, "pids", (json_int_t)p->pids, "disk_mb",
                     (json_int_t)p->disk_mb, "timeout_ms", (json_int_t)p->timeout_ms,
                     "output_limit_bytes", (json_int_t)p->output_limit_bytes, "lenient",
                     (int)p->lenient);
}

static json_t *options_json(const sbx_options *o)
{
    json_t *obj = json_object();
    const sbx_option_spec *schema = sbx_options_schema(o);
    for (size_t i = 0; schema != NULL && schema[i].key != NULL; i++) {
        const sbx_option_spec *s = &schema[i];
        json_t *v = NULL;
        if (s->type == SBX_OPT_LIST) {
            const char *const *items;
            size_t n = sbx_options_get_list(o, s->key, &items);
            v = json_array();
            for (size_t j = 0; j < n; j++)
                json_array_append_new(v, json_string(items[j]));
        } else if (sbx_options_get(o, s->key) == NULL) {
            v = json_null();
        } else if (s->type == SBX_OPT_INT) {
            v = json_integer((json_int_t)sbx_options_get_int(o, s->key));
        } else if (s->type == SBX_OPT_BOOL) {
            v = json_boolean(sbx_options_get_bool(o, s->key));
        } else {
            v = json_string(sbx_options_get(o, s->key));
        }
        json_object_set_new(obj, s->key, v);
    }
    return obj;
}

static json_t *nullable(const char *s)
{
    return s ? json_string(s) : json_null();
}

static int print_json(const sbx_config *cfg)
{
    json_t *profiles = json_array();
    for (size_t i = 0; i < cfg->n_profiles; i++) {
        const sbx_profile_config *p = &cfg->profiles[i];
        json_t *jp = json_pack(
            "{s:s,s:s,s:s,s:s,s:o,s:I,s:s,s:o,s:o,s:b}", "name", p->name, "provider", p->type,
            "scope", sbx_scope_name(p->scope), "environment", sbx_environment_name(p->environment),
            "attach_to", nullable(p->attach_to), "idle_timeout_s", (json_int_t)p->idle_timeout_s,
            "identity", identity_name(p->identity_mode), "policy", policy_json(p->policy),
            "options", options_json(p->options), "built_in_provider",
            sbx_provider_lookup(p->type) != NULL);
        json_t *fb = json_array();
        for (size_t f = 0; f < p->n_fallback; f++)
            json_array_append_new(fb, json_string(p->fallback[f]));
        json_object_set_new(jp, "fallback", fb);
        json_object_set_new(jp, "idle_action", json_string(p->idle_pause ? "pause" : "reset"));
        json_array_append_new(profiles, jp);
    }
    json_t *callers = json_array();
    for (size_t i = 0; i < cfg->worker.n_callers; i++) {
        const sbx_worker_caller *c = &cfg->worker.callers[i];
        json_array_append_new(callers, json_pack("{s:s,s:o,s:o,s:o}", "name", c->name, "token_env",
                                                 nullable(c->token_env), "cert_subject",
                                                 nullable(c->cert_subject), "subjects",
                                                 string_array(c->subjects, c->n_subjects)));
    }
    const sbx_remote_config *r = &cfg->broker.remote;
    json_t *j = json_pack(
        "{s:o,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:{s:s,s:I,s:I,s:I,s:I,s:I,s:{s:o,s:o,s:o,s:o,s:o,s:I}},"
        "s:{s:s,s:o,s:o,s:o,s:o,s:I,s:I,s:o},s:o}",
        "path", nullable(cfg->path), "default_profile", cfg->default_profile, "node", cfg->node,
        "secret_file", cfg->secret_file, "runtime_dir", cfg->runtime_dir, "snapshot_dir",
        cfg->snapshot_dir, "snapshot_max_mb", (json_int_t)cfg->snapshot_max_mb,
        "principal_sandboxes", (json_int_t)cfg->principal_sandboxes, "broker", "flavor",
        cfg->broker.flavor, "threads", (json_int_t)cfg->broker.threads, "queue_depth",
        (json_int_t)cfg->broker.queue_depth, "wait_timeout_ms",
        (json_int_t)cfg->broker.wait_timeout_ms, "lru_size", (json_int_t)cfg->broker.lru_size,
        "principal_threads", (json_int_t)cfg->broker.principal_threads, "remote", "endpoint",
        nullable(r->endpoint), "ca_file", nullable(r->ca_file), "cert_file", nullable(r->cert_file),
        "key_file", nullable(r->key_file), "token_env", nullable(r->token_env),
        "connect_timeout_ms", (json_int_t)r->connect_timeout_ms, "worker", "listen",
        cfg->worker.listen, "tls_cert_file", nullable(cfg->worker.tls_cert_file), "tls_key_file",
        nullable(cfg->worker.tls_key_file), "tls_client_ca_file",
        nullable(cfg->worker.tls_client_ca_file), "callers", callers, "max_message_bytes",
        (json_int_t)cfg->worker.max_message_bytes, "drain_timeout_ms",
        (json_int_t)cfg->worker.drain_timeout_ms, "record", nullable(cfg->worker.record),
        "profiles", profiles);
    if (j == NULL) {
        fprintf(stderr, "sbx config check: could not build the JSON output\n");
        return CLI_EXIT_FAILED;
    }
    json_dumpf(j, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    json_decref(j);
    return CLI_EXIT_OK;
}

static void print_list(const char *label, char **items, size_t n)
{
    if (n == 0)
        return;
    printf("; %s [", label);
    for (size_t i = 0; i < n; i++)
        printf("%s%s", i ? ", " : "", items[i]);
    printf("]");
}

static void print_limit(const char *label, uint64_t v)
{
    if (v == 0)
        printf("; %s unlimited", label);
    else
        printf("; %s %" PRIu64, label, v);
}

static void print_options(const sbx_profile_config *p)
{
    const sbx_option_spec *schema = sbx_options_schema(p->options);
    if (schema == NULL || schema[0].key == NULL)
        return;
    printf("    %s:", p->type);
    for (size_t i = 0; schema[i].key != NULL; i++) {
        const char *key = schema[i].key;
        if (schema[i].type == SBX_OPT_LIST) {
            const char *const *items;
            size_t n = sbx_options_get_list(p->options, key, &items);
            printf(" %s=[", key);
            for (size_t j = 0; j < n; j++)
                printf("%s%s", j ? "," : "", items[j]);
            printf("]");
        } else {
            const char *v = sbx_options_get(p->options, key);
            printf(" %s=%s", key, v ? v : "-");
        }
    }
    printf("\n");
}

/* Whether the worker's callers act for more than one principal (tenants that share it). */
static bool shared_by_principals(const sbx_config *cfg)
{
    if (cfg->worker.n_callers > 1)
        return true;
    for (size_t i = 0; i < cfg->worker.n_callers; i++)
        for (size_t j = 0; j < cfg->worker.callers[i].n_subjects; j++)
            if (strcmp(cfg->worker.callers[i].subjects[j], "*") == 0)
                return true;
    return false;
}

static int print_human(const sbx_config *cfg)
{
    if (cfg->path != NULL)
        printf("config: %s (valid)\n", cfg->path);
    else
        printf("config: built-in default (no file; use --config FILE or $SBX_CONFIG)\n");
    printf("node: %s\nsecret_file: %s\nruntime_dir: %s\n", cfg->node, cfg->secret_file,
           cfg->runtime_dir);
    printf("snapshots: %s, at most %" PRId64 " MiB each\n", cfg->snapshot_dir,
           cfg->snapshot_max_mb);
    if (cfg->principal_sandboxes > 0)
        printf("sandboxes: at most %" PRId64 " of per_session profiles per principal, counted "
               "by each engine (a worker's for its life)\n",
               cfg->principal_sandboxes);
    else
        printf("sandboxes: no limit per principal (principal_sandboxes: 0)\n");
    if (cfg->principal_sandboxes == 0 && shared_by_principals(cfg))
        printf("  note: the worker's callers act for several principals, and one of them may "
               "hold every sandbox the host can make; set principal_sandboxes\n");
    char share[64] = "all but a quarter";
    if (cfg->broker.principal_threads > 0)
        snprintf(share, sizeof share, "at most %" PRId64, cfg->broker.principal_threads);
    printf("broker: %s, %" PRId64 " threads (%s for one principal), queue %" PRId64
           ", wait %" PRId64 " ms\n",
           cfg->broker.flavor, cfg->broker.threads, share, cfg->broker.queue_depth,
           cfg->broker.wait_timeout_ms);
    if (cfg->broker.remote.endpoint != NULL)
        printf("  remote: %s%s%s\n", cfg->broker.remote.endpoint,
               cfg->broker.remote.token_env ? ", token from $" : "",
               cfg->broker.remote.token_env ? cfg->broker.remote.token_env : "");
    printf("worker: listen %s, TLS %s, %zu caller(s)\n", cfg->worker.listen,
           cfg->worker.tls_cert_file == NULL        ? "off"
           : cfg->worker.tls_client_ca_file != NULL ? "on (mTLS)"
                                                    : "on",
           cfg->worker.n_callers);
    printf("profiles (default: %s):\n", cfg->default_profile);
    for (size_t i = 0; i < cfg->n_profiles; i++) {
        const sbx_profile_config *p = &cfg->profiles[i];
        const sbx_policy *pol = p->policy;
        printf("  %s\n    provider %s%s, scope %s, environment %s", p->name, p->type,
               sbx_provider_lookup(p->type) ? "" : " (not built into this binary)",
               sbx_scope_name(p->scope), sbx_environment_name(p->environment));
        if (p->attach_to != NULL)
            printf(" (attach_to %s)", p->attach_to);
        printf(", identity %s, idle timeout %" PRId64 " s%s\n", identity_name(p->identity_mode),
               p->idle_timeout_s, p->idle_pause ? " (then paused)" : "");
        if (p->n_fallback > 0) {
            printf("    fallback:");
            for (size_t f = 0; f < p->n_fallback; f++)
                printf("%s %s", f ? "," : "", p->fallback[f]);
            printf("\n");
        }
        printf("    policy: network %s", egress_name(pol->network_egress));
        print_list("network_allow", pol->network_allow, pol->n_network_allow);
        print_list("fs_read", pol->fs_read, pol->n_fs_read);
        print_list("fs_write", pol->fs_write, pol->n_fs_write);
        if (pol->cpu == 0)
            printf("; cpu unlimited");
        else
            printf("; cpu %g", pol->cpu);
        print_limit("memory_mb", pol->memory_mb);
        print_limit("pids", pol->pids);
        print_limit("disk_mb", pol->disk_mb);
        print_limit("timeout_ms", pol->timeout_ms);
        if (pol->output_limit_bytes == 0)
            printf("; output_limit_bytes provider maximum");
        else
            printf("; output_limit_bytes %" PRIu64, pol->output_limit_bytes);
        printf("; %s\n", pol->lenient ? "lenient" : "strict");
        print_options(p);
    }
    return CLI_EXIT_OK;
}

static int config_check(int argc, char **argv)
{
    const char *file = NULL;
    if (argc > 3)
        return cli_usage_error("config", "check takes one FILE, got '%s' and '%s'", argv[2],
                               argv[3]);
    if (argc == 3)
        file = argv[2];
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    sbx_status st = cli_load_config(file, &cfg, &err);
    if (st != SBX_OK)
        return cli_report_error(st == SBX_E_CONFIG ? "config error" : "config", &err);
    int rc = cli_global.json ? print_json(cfg) : print_human(cfg);
    sbx_config_free(cfg);
    return rc;
}

int cmd_config(int argc, char **argv)
{
    cli_parser a = {.cmd = "config", .help = cmd_config_help};
    cli_opt_init(&a, argc, argv);
    if (cli_opt_next(&a) == CLI_OPT_EXIT)
        return a.exit_code;
    argc = a.n_operands + 1;
    argv = a.operands - 1;
    if (argc < 2)
        return cli_usage_error("config", "missing subcommand; accepted: check");
    if (strcmp(argv[1], "check") == 0)
        return config_check(argc, argv);
    return cli_usage_error("config", "unknown subcommand '%s'; accepted: check", argv[1]);
}
