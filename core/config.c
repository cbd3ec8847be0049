/* config.c - the sbx configuration (include/sbx/config.h, DESIGN §10): loads a file or a string
 * (bounded read, config_yaml.c's tree), interprets it by the key tables (config_schema.c,
 * config_profile.c, read by config_read.c's loop) over the host's defaults, applies the
 * command-line overrides, and frees it. The files of the layer share core/config_impl.h.
 *
 * Every error names file:line:column, the dotted key path, what was wrong and what is accepted;
 * on error nothing is returned (no half-loaded config). Secrets only ever appear as the NAME of
 * an environment variable (`*_env` keys); a key that looks like an inline secret is refused.
 * This file must not open sandboxes, sockets or the secret file, nor create files or
 * directories: it only reads the config file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config_impl.h"

/* ---- defaults that depend on the host ------------------------------------------------ */

static char *path_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

/* The defaults that depend on the host (who runs sbx, its XDG directories, its name), then
 * every table's default (config_sandbox_fields and its nested sections). */
static bool host_defaults(sbx_config *cfg)
{
    if (geteuid() == 0) {
        cfg->secret_file = strdup("/etc/sbx/secret");
        cfg->runtime_dir = strdup("/run/sbx");
        cfg->snapshot_dir = strdup("/var/lib/sbx/snapshots");
    } else {
        const char *xdg = getenv("XDG_CONFIG_HOME");
        const char *home = getenv("HOME");
        if (xdg != NULL && xdg[0] == '/')
            cfg->secret_file = path_join(xdg, "sbx/secret");
        else if (home != NULL && home[0] == '/')
            cfg->secret_file = path_join(home, ".config/sbx/secret");
        else {
            char buf[64];
            snprintf(buf, sizeof(buf), "/tmp/sbx-%u/secret", (unsigned)geteuid());
            cfg->secret_file = strdup(buf);
        }
        const char *run = getenv("XDG_RUNTIME_DIR");
        if (run != NULL && run[0] == '/')
            cfg->runtime_dir = path_join(run, "sbx");
        else {
            char buf[64];
            snprintf(buf, sizeof(buf), "/tmp/sbx-%u", (unsigned)geteuid());
            cfg->runtime_dir = strdup(buf);
        }
        const char *state = getenv("XDG_STATE_HOME");
        if (state != NULL && state[0] == '/')
            cfg->snapshot_dir = path_join(state, "sbx/snapshots");
        else if (home != NULL && home[0] == '/')
            cfg->snapshot_dir = path_join(home, ".local/state/sbx/snapshots");
        else
            cfg->snapshot_dir = path_join(cfg->runtime_dir, "snapshots");
    }
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    cfg->node = strdup(host);
    return cfg->secret_file && cfg->runtime_dir && cfg->snapshot_dir && cfg->node &&
           config_apply_defaults(config_sandbox_fields, cfg);
}

/* ---- public API ----------------------------------------------------------------------- */

void sbx_config_free(sbx_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->path);
    free(cfg->default_profile);
    free(cfg->secret_file);
    free(cfg->node);
    free(cfg->runtime_dir);
    free(cfg->snapshot_dir);
    free(cfg->broker.flavor);
    free(cfg->broker.remote.endpoint);
    free(cfg->broker.remote.ca_file);
    free(cfg->broker.remote.cert_file);
    free(cfg->broker.remote.key_file);
    free(cfg->broker.remote.token_env);
    sbx_queue_config *q = &cfg->broker.queue;
    free(q->url);
    free(q->ca_file);
    free(q->cert_file);
    free(q->key_file);
    free(q->user);
    free(q->password_env);
    free(q->nkey);
    free(q->nkey_seed_env);
    free(q->token_env);
    free(q->name);
    free(q->inbox_prefix);
    free(cfg->worker.serve);
    free(cfg->worker.listen);
    free(cfg->worker.tls_cert_file);
    free(cfg->worker.tls_key_file);
    free(cfg->worker.tls_client_ca_file);
    for (size_t i = 0; i < cfg->worker.n_callers; i++) {
        sbx_worker_caller *c = &cfg->worker.callers[i];
        free(c->name);
        free(c->token_env);
        free(c->cert_subject);
        for (size_t j = 0; j < c->n_subjects; j++)
            free(c->subjects[j]);
        free(c->subjects);
    }
    free(cfg->worker.callers);
    free(cfg->worker.record);
    free(cfg->worker.log_level);
    free(cfg->worker.log_file);
    free(cfg->worker.metrics_listen);
    for (size_t i = 0; i < cfg->n_profiles; i++)
        config_profile_free(&cfg->profiles[i]);
    free(cfg->profiles);
    free(cfg);
}

const sbx_profile_config *sbx_config_profile(const sbx_config *cfg, const char *name)
{
    if (cfg == NULL)
        return NULL;
    if (name == NULL || name[0] == '\0')
        name = cfg->default_profile;
    for (size_t i = 0; name != NULL && i < cfg->n_profiles; i++)
        if (strcmp(cfg->profiles[i].name, name) == 0)
            return &cfg->profiles[i];
    return NULL;
}

sbx_status sbx_config_default(sbx_config **out, sbx_error *err)
{
    if (out == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_config_default: out is NULL");
    *out = NULL;
    sbx_config *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL || !host_defaults(cfg) || !config_add_builtin_profile(cfg, NULL)) {
        sbx_config_free(cfg);
        /* The code itself, not sbx_error_set's (equal) result: this file then shows that *out
         * is set exactly when SBX_OK is returned, which sbx_config_load_with relies on. */
        sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "built-in config: out of memory");
        return SBX_E_RESOURCE_EXHAUSTED;
    }
    *out = cfg;
    return SBX_OK;
}

/* Command-line values replace the file's before anything is checked against them, and are
 * then checked as the file's would be, with errors naming the flag. */
static sbx_status apply_overrides(loader *L)
{
    const sbx_config_overrides *ov = L->ov;
    sbx_worker_config *w = &L->cfg->worker;
    if (ov == NULL)
        return SBX_OK;
    struct {
        const char *value;
        char **field;
    } strings[] = {{ov->worker_listen, &w->listen},
                   {ov->worker_log_level, &w->log_level},
                   {ov->worker_metrics_listen, &w->metrics_listen}};
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        if (strings[i].value == NULL)
            continue;
        char *copy = strdup(strings[i].value);
        if (copy == NULL)
            return config_oom(L);
        free(*strings[i].field);
        *strings[i].field = copy;
    }
    size_t host_len = 0;
    int64_t port = 0;
    if (ov->worker_listen != NULL) {
        if (!config_split_host_port(w->listen, &host_len, &port))
            return sbx_error_set(L->err, SBX_E_CONFIG,
                                 "--listen '%s' is not HOST:PORT; accepted e.g. 127.0.0.1:7443, "
                                 "0.0.0.0:7443, [::]:7443 (port 0 = any free port)",
                                 w->listen);
        if (!config_listen_is_loopback(w->listen) && w->tls_cert_file == NULL)
            return sbx_error_set(L->err, SBX_E_CONFIG,
                                 "--listen '%s' is not loopback, so it requires TLS: set "
                                 "sandbox.worker.tls.cert_file and key_file in %s",
                                 w->listen, L->name);
        if (!config_listen_is_loopback(w->listen) && w->n_callers == 0)
            return sbx_error_set(L->err, SBX_E_CONFIG,
                                 "--listen '%s' is not loopback, so it requires authenticated "
                                 "callers: set sandbox.worker.auth.callers in %s",
                                 w->listen, L->name);
    }
    if (ov->worker_log_level != NULL) {
        bool known = false;
        for (size_t i = 0; config_log_level_choices[i] != NULL; i++)
            known = known || strcmp(config_log_level_choices[i], w->log_level) == 0;
        if (!known)
            return sbx_error_set(L->err, SBX_E_CONFIG,
                                 "--log-level '%s' is not accepted; accepted: error, warn, info, "
                                 "debug",
                                 w->log_level);
    }
    if (ov->worker_metrics_listen != NULL &&
        !config_split_host_port(w->metrics_listen, &host_len, &port))
        return sbx_error_set(L->err, SBX_E_CONFIG,
                             "--metrics-listen '%s' is not HOST:PORT; accepted e.g. "
                             "127.0.0.1:9464 (port 0 = any free port)",
                             w->metrics_listen);
    return SBX_OK;
}

static sbx_status load_buffer(const char *yaml, size_t len, const char *name, const char *dir,
                              const sbx_config_overrides *ov, sbx_config **out, sbx_error *err)
{
    config_node *root = NULL;
    sbx_status st = config_yaml_parse(yaml, len, name, &root, err);
    if (st != SBX_OK)
        return st;
    sbx_config *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL || !host_defaults(cfg)) {
        sbx_config_free(cfg);
        config_node_free(root);
        sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", name);
        return SBX_E_RESOURCE_EXHAUSTED; /* as in sbx_config_default: *out set exactly on SBX_OK */
    }
    loader L = {.name = name, .dir = dir, .err = err, .cfg = cfg, .ov = ov};
    /* Parse "null" sandbox (an empty document) through the same path as a real one. */
    st = config_load_tree(&L, root);
    config_node_free(root);
    if (st == SBX_OK)
        st = apply_overrides(&L);
    if (st != SBX_OK) {
        sbx_config_free(cfg);
        return st;
    }
    *out = cfg;
    return SBX_OK;
}

sbx_status sbx_config_load_string(const char *yaml, size_t len, const char *name, sbx_config **out,
                                  sbx_error *err)
{
    if (out == NULL || (yaml == NULL && len > 0))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_config_load_string: NULL argument");
    *out = NULL;
    return load_buffer(yaml ? yaml : "", len, name ? name : "(string)", NULL, NULL, out, err);
}

/* Reads at most CONFIG_MAX_BYTES + 1 bytes, so an endless or huge file is refused, not read. */
static sbx_status read_bounded(const char *path, const char *source, char **buf, size_t *len,
                               sbx_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: the config file does not exist (named by %s); create it "
                                 "(see examples/) or name an existing file",
                                 path, source);
        return sbx_error_set(err, SBX_E_CONFIG, "%s: cannot open the config file (named by %s): %s",
                             path, source, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: is a directory, not a config file (named by %s)", path, source);
    }
    char *data = malloc(CONFIG_MAX_BYTES + 1);
    if (data == NULL) {
        close(fd);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < CONFIG_MAX_BYTES + 1) {
        ssize_t n = read(fd, data + got, CONFIG_MAX_BYTES + 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            free(data);
            return sbx_error_set(err, SBX_E_CONFIG, "%s: cannot read the config file: %s", path,
                                 strerror(e));
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (got > CONFIG_MAX_BYTES) {
        free(data);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:1:1: the file is larger than %d bytes; config files are "
                             "limited to that",
                             path, CONFIG_MAX_BYTES);
    }
    *buf = data;
    *len = got;
    return SBX_OK;
}

sbx_status sbx_config_load(const char *path, sbx_config **out, sbx_error *err)
{
    return sbx_config_load_with(path, NULL, out, err);
}

sbx_status sbx_config_load_with(const char *path, const sbx_config_overrides *ov, sbx_config **out,
                                sbx_error *err)
{
    if (out == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_config_load: out is NULL");
    *out = NULL;
    const char *source = "the caller";
    if (path == NULL) {
        const char *env = getenv("SBX_CONFIG");
        if (env == NULL || env[0] == '\0') {
            /* No file: the built-in default, with the local provider's option defaults when
             * that provider is built in. */
            sbx_status st = sbx_config_default(out, err);
            if (st != SBX_OK)
                return st;
            const sbx_provider_ops *local = sbx_provider_lookup(DEFAULT_PROVIDER);
            if (local != NULL && local->options != NULL) {
                sbx_options *o = sbx_options_new(local->options);
                if (o == NULL) {
                    sbx_config_free(*out);
                    *out = NULL;
                    return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
                }
                sbx_options_free((*out)->profiles[0].options);
                (*out)->profiles[0].options = o;
            }
            loader L = {.name = "the built-in default", .err = err, .cfg = *out, .ov = ov};
            st = apply_overrides(&L);
            if (st != SBX_OK) {
                sbx_config_free(*out);
                *out = NULL;
            }
            return st;
        }
        path = env;
        source = "$SBX_CONFIG";
    }
    if (path[0] == '\0')
        return sbx_error_set(err, SBX_E_CONFIG, "an empty config file name (from %s)", source);
    char *buf = NULL;
    size_t len = 0;
    sbx_status st = read_bounded(path, source, &buf, &len, err);
    if (st != SBX_OK)
        return st;
    char *dir = strdup(path);
    char *path_copy = strdup(path);
    if (dir == NULL || path_copy == NULL) {
        free(buf);
        free(dir);
        free(path_copy);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", path);
    }
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, strlen(dir) + 1, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    st = load_buffer(buf, len, path, dir, ov, out, err);
    free(buf);
    free(dir);
    if (st != SBX_OK) {
        free(path_copy);
        return st;
    }
    (*out)->path = path_copy;
    return SBX_OK;
}
