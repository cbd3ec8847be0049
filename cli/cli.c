/* cli.c - helpers every `sbx` subcommand shares: global option parsing, exit codes, config
 * loading and error reporting (see cli.h). Adding a global option: one row in
 * global_options[] and a field in cli_globals.
 */
#include "cli/cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/pbjson.h"
#include "sbx/contract.h"

cli_globals cli_global;

typedef struct global_option {
    const char *name; /* "config" for --config */
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
static void set_subject(const char *value)
{
    cli_global.subject = value;
}
static void set_principal_mode(const char *value)
{
    cli_global.principal_mode = value;
}

static const global_option global_options[] = {
    {"config", true, set_config},     {"json", false, set_json},
    {"broker", true, set_broker},     {"endpoint", true, set_endpoint},
    {"ca-file", true, set_ca_file},   {"cert-file", true, set_cert_file},
    {"key-file", true, set_key_file}, {"token-env", true, set_token_env},
    {"subject", true, set_subject},   {"principal-mode", true, set_principal_mode},
};

#define N_GLOBAL_OPTIONS (sizeof(global_options) / sizeof(global_options[0]))

void cli_opt_init(cli_parser *p, int argc, char **argv)
{
    p->argc = argc;
    p->argv = argv;
    p->i = 1;
    p->out = 1;
    p->shorts = NULL;
    p->value = NULL;
    p->operands = argv + 1;
    p->n_operands = 0;
    p->exit_code = CLI_EXIT_OK;
}

__attribute__((format(printf, 2, 3))) static int opt_usage(cli_parser *p, const char *fmt, ...)
{
    if (p->cmd[0] != '\0')
        fprintf(stderr, "sbx %s: ", p->cmd);
    else
        fprintf(stderr, "sbx: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see `sbx%s%s --help`)\n", p->cmd[0] ? " " : "", p->cmd);
    p->exit_code = CLI_EXIT_USAGE;
    return CLI_OPT_EXIT;
}

/* Everything from argv[from] on is an operand: compacts them after those already seen. */
static int opt_end(cli_parser *p, int from)
{
    for (int j = from; j < p->argc; j++)
        p->argv[p->out++] = p->argv[j];
    p->operands = p->argv + 1;
    p->n_operands = p->out - 1;
    if (p->out < p->argc)
        p->argv[p->out] = NULL;
    p->i = p->argc;
    return CLI_OPT_END;
}

/* Takes an option's value: inline (after '=' or in "-lVALUE"), else the next word. */
static int opt_value(cli_parser *p, const char *inline_value, const char *shown, int result)
{
    if (inline_value != NULL) {
        p->value = inline_value;
        return result;
    }
    if (p->i >= p->argc)
        return opt_usage(p, "option %s needs a value", shown);
    p->value = p->argv[p->i++];
    return result;
}

void cli_print_version(void)
{
    if (cli_global.json)
        printf("{\"version\": \"%s\"}\n", SBX_VERSION);
    else
        printf("sbx %s\n", SBX_VERSION);
}

/* Edits (insert, delete, replace a letter) between a[0..la) and b, up to 3 (more counts as 3). */
static size_t opt_distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > 63 || lb > 63 || (la > lb ? la - lb : lb - la) > 2)
        return 3;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] < 3 ? row[lb] : 3;
}

/* How near a typed --name (len letters) is to an option's: 0 when one starts with the other
 * (--timeout for --timeout-ms), else 1 + its edits when at most two and the name has four
 * letters or more (--profle), else 9 (not near). */
static size_t opt_nearness(const char *name, size_t len, const char *option)
{
    size_t ol = strlen(option);
    if (len >= 3 && strncmp(option, name, len < ol ? len : ol) == 0)
        return 0;
    size_t d = len >= 4 ? opt_distance(name, len, option) : 3;
    return d < 3 ? 1 + d : 9;
}

/* The option (the command's own or a global one) a mistyped --name most likely meant, or NULL
 * when none is near or two are equally near. */
static const char *opt_suggest(const cli_parser *p, const char *name, size_t len)
{
    const char *best = NULL;
    size_t best_n = 9;
    bool tie = false;
    size_t n_own = 0;
    while (p->options != NULL && p->options[n_own].name != NULL)
        n_own++;
    for (size_t k = 0; k < n_own + N_GLOBAL_OPTIONS + 2; k++) {
        const char *o = k < n_own                       ? p->options[k].name
                        : k < n_own + N_GLOBAL_OPTIONS  ? global_options[k - n_own].name
                        : k == n_own + N_GLOBAL_OPTIONS ? "help"
                                                        : "version";
        size_t n = opt_nearness(name, len, o);
        if (n < best_n) {
            best = o;
            best_n = n;
            tie = false;
        } else if (n == best_n && n < 9 && strcmp(o, best) != 0) {
            tie = true;
        }
    }
    return tie ? NULL : best;
}

static int opt_long(cli_parser *p, const char *word)
{
    const char *name = word + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    const char *inline_value = eq != NULL ? eq + 1 : NULL;
    for (int k = 0; p->options != NULL && p->options[k].name != NULL; k++) {
        const cli_option *o = &p->options[k];
        if (strlen(o->name) != len || strncmp(o->name, name, len) != 0)
            continue;
        if (!o->has_value) {
            if (inline_value != NULL)
                return opt_usage(p, "option --%s takes no value", o->name);
            p->value = NULL;
            return k;
        }
        return opt_value(p, inline_value, word, k);
    }
    for (size_t g = 0; g < N_GLOBAL_OPTIONS; g++) {
        const global_option *o = &global_options[g];
        if (strlen(o->name) != len || strncmp(o->name, name, len) != 0)
            continue;
        if (!o->takes_value) {
            if (inline_value != NULL)
                return opt_usage(p, "option --%s takes no value", o->name);
            o->apply(NULL);
            return cli_opt_next(p);
        }
        int r = opt_value(p, inline_value, word, 0);
        if (r == CLI_OPT_EXIT)
            return r;
        o->apply(p->value);
        return cli_opt_next(p);
    }
    if (len == 4 && strncmp(name, "help", 4) == 0) {
        fputs(p->help, stdout);
        return CLI_OPT_EXIT;
    }
    if (len == 7 && strncmp(name, "version", 7) == 0) {
        cli_print_version();
        return CLI_OPT_EXIT;
    }
    char shown[128];
    snprintf(shown, sizeof(shown), "--%.*s", (int)(len < 100 ? len : 100), name);
    const char *near = opt_suggest(p, name, len);
    if (near != NULL)
        return opt_usage(p, "unknown option '%s'; did you mean --%s?", shown, near);
    return opt_usage(p, "unknown option '%s'", shown);
}

/* The next letter of a "-abc" word. */
static int opt_short(cli_parser *p)
{
    char c = *p->shorts++;
    const char *rest = *p->shorts != '\0' ? p->shorts : NULL;
    if (rest == NULL)
        p->shorts = NULL;
    for (int k = 0; p->options != NULL && p->options[k].name != NULL; k++) {
        const cli_option *o = &p->options[k];
        if (o->short_name != c)
            continue;
        if (!o->has_value) {
            p->value = NULL;
            return k;
        }
        p->shorts = NULL;
        char shown[3] = {'-', c, '\0'};
        return opt_value(p, rest, shown, k);
    }
    if (c == 'h') {
        fputs(p->help, stdout);
        return CLI_OPT_EXIT;
    }
    char shown[3] = {'-', c, '\0'};
    return opt_usage(p, "unknown option '%s'", shown);
}

int cli_opt_next(cli_parser *p)
{
    if (p->shorts != NULL)
        return opt_short(p);
    while (p->i < p->argc) {
        char *word = p->argv[p->i];
        if (strcmp(word, "--") == 0)
            return opt_end(p, p->i + 1);
        if (word[0] != '-' || word[1] == '\0') { /* an operand ("-" is stdin) */
            if (p->stop_at_operand)
                return opt_end(p, p->i);
            p->argv[p->out++] = word;
            p->i++;
            continue;
        }
        p->i++;
        if (word[1] == '-')
            return opt_long(p, word);
        p->shorts = word + 1;
        return opt_short(p);
    }
    return opt_end(p, p->argc);
}

bool cli_opt_positive(cli_parser *p, const char *name, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p->value, &end, 10);
    if (end == p->value || *end != '\0' || v <= 0 || errno != 0) {
        fprintf(stderr, "sbx %s: --%s needs a positive number, not '%s' (see `sbx %s --help`)\n",
                p->cmd, name, p->value, p->cmd);
        p->exit_code = CLI_EXIT_USAGE;
        return false;
    }
    *out = v;
    return true;
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
    case SBX_E_WRONG_NODE: return CLI_EXIT_WRONG_NODE;
    default: return CLI_EXIT_FAILED;
    }
}

int cli_program_exit_code(int table_code)
{
    return table_code == CLI_EXIT_FAILED ? CLI_EXIT_NOT_RUN : table_code;
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

/* The option's value, else the environment variable's (when set and not empty). */
static const char *option_or_env(const char *option, const char *var)
{
    if (option != NULL)
        return option;
    const char *v = getenv(var);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

/* --broker and the remote options (or SBX_BROKER, SBX_ENDPOINT, SBX_TOKEN) over the file's
 * broker block. */
static sbx_status apply_broker_options(sbx_config *cfg, sbx_error *err)
{
    const char *b = option_or_env(cli_global.broker, "SBX_BROKER");
    if (b != NULL && strcmp(b, "embedded") != 0 && strcmp(b, "thread") != 0 &&
        strcmp(b, "remote") != 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "%s '%s': expected embedded, thread or remote",
                             cli_global.broker != NULL ? "--broker" : "SBX_BROKER", b);
    sbx_remote_config *r = &cfg->broker.remote;
    const char *token_env = cli_global.token_env;
    if (token_env == NULL && r->token_env == NULL && option_or_env(NULL, "SBX_TOKEN") != NULL)
        token_env = "SBX_TOKEN";
    if (!override_string(&cfg->broker.flavor, b) ||
        !override_string(&r->endpoint, option_or_env(cli_global.endpoint, "SBX_ENDPOINT")) ||
        !override_string(&r->ca_file, cli_global.ca_file) ||
        !override_string(&r->cert_file, cli_global.cert_file) ||
        !override_string(&r->key_file, cli_global.key_file) ||
        !override_string(&r->token_env, token_env))
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory applying --broker options");
    if (cfg->broker.flavor != NULL && strcmp(cfg->broker.flavor, "remote") == 0 &&
        (r->endpoint == NULL || r->endpoint[0] == '\0'))
        return sbx_error_set(err, SBX_E_CONFIG,
                             "the remote broker needs an endpoint: pass --endpoint URL, set "
                             "SBX_ENDPOINT or broker.remote.endpoint");
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

static bool errors_as_completions;

void cli_errors_as_completions(void)
{
    errors_as_completions = true;
}

void cli_print_json(json_t *j)
{
    if (j == NULL) {
        fprintf(stderr, "sbx: out of memory printing JSON\n");
        return;
    }
    json_dumpf(j, stdout, JSON_INDENT(2));
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(j);
}

int cli_report_error(const char *what, const sbx_error *err)
{
    fprintf(stderr, "sbx: %s: %s\n", what, err->message);
    if (cli_global.json && errors_as_completions) {
        sbx_completion *c = sbx_completion_fail("", err->code, "%s", err->message);
        if (c != NULL)
            cli_print_json(cli_pb_to_json(&c->base));
        sbx_completion_free(c);
    } else if (cli_global.json) {
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

const char *cli_action(const char *word, const char *const *names)
{
    static const char *const synonyms[][4] = {
        {"new", "create", NULL}, {"ls", "list", NULL}, {"rm", "remove", "delete", NULL}};
    for (; *names != NULL; names++) {
        if (strcmp(word, *names) == 0)
            return *names;
        for (size_t g = 0; g < sizeof synonyms / sizeof synonyms[0]; g++) {
            bool has_name = false, has_word = false;
            for (size_t i = 0; synonyms[g][i] != NULL; i++) {
                has_name = has_name || strcmp(synonyms[g][i], *names) == 0;
                has_word = has_word || strcmp(synonyms[g][i], word) == 0;
            }
            if (has_name && has_word)
                return *names;
        }
    }
    return NULL;
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
