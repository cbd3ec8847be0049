/* test_config_load.c - the config loader's good paths and file handling: the built-in default,
 * every key parsed into its field, defaults for omitted keys, SBX_CONFIG selection, missing or
 * oversized files, the node-count bound, relative paths, profile lookup. */
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "sbx/provider.h"
#include "tests/config/config_test_util.h"
#include "tests/config/test_providers.h"

static void test_config_default_is_one_local_profile_without_network(void **state)
{
    (void)state;
    sbx_config *cfg = NULL;
    assert_int_equal(sbx_config_default(&cfg, NULL), SBX_OK);
    assert_null(cfg->path);
    assert_int_equal(cfg->n_profiles, 1);
    const sbx_profile_config *p = sbx_config_profile(cfg, NULL);
    assert_non_null(p);
    assert_string_equal(p->name, "default");
    assert_string_equal(p->type, "local");
    assert_int_equal(p->scope, SBX_SCOPE_PER_SESSION);
    assert_int_equal(p->environment, SBX_ENV_MANAGED);
    assert_null(p->attach_to);
    assert_int_equal(p->idle_timeout_s, 1800);
    assert_int_equal(p->identity_mode, SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT);
    assert_int_equal(p->policy->network_egress, SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY);
    assert_true(p->policy->cpu == 1.0);
    assert_int_equal(p->policy->memory_mb, 512);
    assert_int_equal(p->policy->pids, 256);
    assert_int_equal(p->policy->timeout_ms, 120000);
    assert_false(p->policy->lenient);
    assert_non_null(p->options);
    sbx_config_free(cfg);
}

static void test_config_default_does_not_consult_the_registry(void **state)
{
    (void)state;
    /* A `local` provider is registered (stand-in or real), yet the default has no schema. */
    assert_non_null(sbx_provider_lookup("local"));
    sbx_config *cfg = NULL;
    assert_int_equal(sbx_config_default(&cfg, NULL), SBX_OK);
    assert_null(sbx_options_schema(cfg->profiles[0].options));
    sbx_config_free(cfg);
}

static void test_config_no_file_and_no_env_is_the_builtin_default(void **state)
{
    (void)state;
    unsetenv("SBX_CONFIG");
    sbx_config *cfg = NULL;
    assert_int_equal(sbx_config_load(NULL, &cfg, NULL), SBX_OK);
    assert_null(cfg->path);
    assert_string_equal(cfg->profiles[0].type, "local");
    /* load() (unlike default()) applies the local provider's option defaults when known */
    assert_ptr_equal(sbx_options_schema(cfg->profiles[0].options),
                     sbx_provider_lookup("local")->options);
    sbx_config_free(cfg);
}

static void set_or_unset(const char *name, const char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* The defaults of a user who is not root: the XDG directories, else HOME's, else
 * /tmp/sbx-UID; a relative value counts as unset. Returns how many paths differed (each
 * printed). */
static int unprivileged_defaults(void)
{
    char tmp[64], tmp_secret[80], tmp_snaps[80];
    snprintf(tmp, sizeof tmp, "/tmp/sbx-%u", (unsigned)geteuid());
    snprintf(tmp_secret, sizeof tmp_secret, "%s/secret", tmp);
    snprintf(tmp_snaps, sizeof tmp_snaps, "%s/snapshots", tmp);
    const struct {
        const char *config, *runtime, *state, *home, *secret_file, *runtime_dir, *snapshot_dir;
    } cases[] = {
        {"/xdg/cfg", "/xdg/run", "/xdg/state", "/home/u", "/xdg/cfg/sbx/secret", "/xdg/run/sbx",
         "/xdg/state/sbx/snapshots"},
        {NULL, NULL, NULL, "/home/u", "/home/u/.config/sbx/secret", tmp,
         "/home/u/.local/state/sbx/snapshots"},
        {"rel", "rel", "rel", "rel", tmp_secret, tmp, tmp_snaps},
        {NULL, NULL, NULL, NULL, tmp_secret, tmp, tmp_snaps},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_or_unset("XDG_CONFIG_HOME", cases[i].config);
        set_or_unset("XDG_RUNTIME_DIR", cases[i].runtime);
        set_or_unset("XDG_STATE_HOME", cases[i].state);
        set_or_unset("HOME", cases[i].home);
        sbx_config *cfg = NULL;
        if (sbx_config_default(&cfg, NULL) != SBX_OK) {
            fprintf(stderr, "case %zu: no default config\n", i);
            bad++;
            continue;
        }
        const char *got[] = {cfg->secret_file, cfg->runtime_dir, cfg->snapshot_dir};
        const char *want[] = {cases[i].secret_file, cases[i].runtime_dir, cases[i].snapshot_dir};
        for (int k = 0; k < 3; k++)
            if (strcmp(got[k], want[k]) != 0) {
                fprintf(stderr, "case %zu: '%s', not '%s'\n", i, got[k], want[k]);
                bad++;
            }
        sbx_config_free(cfg);
    }
    return bad;
}

/* Root's defaults are the system's directories; any other user's are its own (checked as uid
 * 65534 in a child when the test runs as root, as in CI, so both branches run everywhere). */
static void test_config_host_defaults_follow_root_or_xdg(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        assert_int_equal(unprivileged_defaults(), 0);
        return;
    }
    sbx_config *cfg = NULL;
    assert_int_equal(sbx_config_default(&cfg, NULL), SBX_OK);
    assert_string_equal(cfg->secret_file, "/etc/sbx/secret");
    assert_string_equal(cfg->runtime_dir, "/run/sbx");
    assert_string_equal(cfg->snapshot_dir, "/var/lib/sbx/snapshots");
    assert_int_equal(cfg->snapshot_max_mb, 1024);
    sbx_config_free(cfg);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
            setresuid(65534, 65534, 65534) != 0)
            _exit(100);
        _exit(unprivileged_defaults() == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_config_node_defaults_to_hostname(void **state)
{
    (void)state;
    char host[256] = "";
    assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
    sbx_config *cfg = load_ok("sandbox: {}\n");
    assert_string_equal(cfg->node, host);
    sbx_config_free(cfg);
}

static const char every_key[] =
    "sandbox:\n"
    "  default_profile: p2\n"
    "  secret_file: /srv/sbx/secret\n"
    "  node: node-7\n"
    "  runtime_dir: /srv/run\n"
    "  snapshot_dir: /srv/snapshots\n"
    "  snapshot_max_mb: 77\n"
    "  principal_sandboxes: 64\n"
    "  broker:\n"
    "    flavor: remote\n"
    "    threads: 3\n"
    "    queue_depth: 9\n"
    "    wait_timeout_ms: 1234\n"
    "    lru_size: 77\n"
    "    remote:\n"
    "      endpoint: https://w.example:7443\n"
    "      ca_file: /ca.pem\n"
    "      cert_file: /c.pem\n"
    "      key_file: /c.key\n"
    "      token_env: MY_TOKEN\n"
    "      connect_timeout_ms: 999\n"
    "  worker:\n"
    "    listen: 0.0.0.0:0\n"
    "    tls: {cert_file: /s.pem, key_file: /s.key, client_ca_file: /cca.pem}\n"
    "    auth:\n"
    "      callers:\n"
    "        - {name: a, token_env: A_TOKEN, subjects: ['*']}\n"
    "        - {name: b, cert_subject: b.example, subjects: [u1, u2]}\n"
    "    max_message_bytes: 4096\n"
    "    drain_timeout_ms: 5\n"
    "    record: /rec.bin\n"
    "  profiles:\n"
    "    p1:\n"
    "      type: test_both\n"
    "      scope: per_call\n"
    "      environment: attached\n"
    "      attach_to: box-9\n"
    "      idle_timeout_s: 0\n"
    "      identity: {mode: user}\n"
    "      policy:\n"
    "        network_egress: allowlist\n"
    "        network_allow: [pypi.org, '*.example.com', 10.0.0.0/8]\n"
    "        fs_read: [/data]\n"
    "        fs_write: [/out, /tmp/x]\n"
    "        cpu: 0.5\n"
    "        memory_mb: 64\n"
    "        pids: 10\n"
    "        disk_mb: 100\n"
    "        timeout_ms: 5000\n"
    "        output_limit_bytes: 65536\n"
    "        lenient: true\n"
    "      test_both: {image: alpine, count: 7, flag: true, mode: slow, tags: [x], key_env: K}\n"
    "    p2:\n"
    "      type: test_managed\n"
    "      scope: per_runtime\n";

static void test_config_every_key_is_parsed_into_its_field(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok(every_key);
    assert_string_equal(cfg->default_profile, "p2");
    assert_string_equal(cfg->secret_file, "/srv/sbx/secret");
    assert_string_equal(cfg->node, "node-7");
    assert_string_equal(cfg->runtime_dir, "/srv/run");
    assert_string_equal(cfg->snapshot_dir, "/srv/snapshots");
    assert_int_equal(cfg->snapshot_max_mb, 77);
    assert_int_equal(cfg->principal_sandboxes, 64);
    assert_string_equal(cfg->broker.flavor, "remote");
    assert_int_equal(cfg->broker.threads, 3);
    assert_int_equal(cfg->broker.queue_depth, 9);
    assert_int_equal(cfg->broker.wait_timeout_ms, 1234);
    assert_int_equal(cfg->broker.lru_size, 77);
    assert_string_equal(cfg->broker.remote.endpoint, "https://w.example:7443");
    assert_string_equal(cfg->broker.remote.ca_file, "/ca.pem");
    assert_string_equal(cfg->broker.remote.cert_file, "/c.pem");
    assert_string_equal(cfg->broker.remote.key_file, "/c.key");
    assert_string_equal(cfg->broker.remote.token_env, "MY_TOKEN");
    assert_int_equal(cfg->broker.remote.connect_timeout_ms, 999);
    assert_string_equal(cfg->worker.listen, "0.0.0.0:0");
    assert_string_equal(cfg->worker.tls_cert_file, "/s.pem");
    assert_string_equal(cfg->worker.tls_key_file, "/s.key");
    assert_string_equal(cfg->worker.tls_client_ca_file, "/cca.pem");
    assert_int_equal(cfg->worker.n_callers, 2);
    assert_string_equal(cfg->worker.callers[0].name, "a");
    assert_string_equal(cfg->worker.callers[0].token_env, "A_TOKEN");
    assert_null(cfg->worker.callers[0].cert_subject);
    assert_int_equal(cfg->worker.callers[0].n_subjects, 1);
    assert_string_equal(cfg->worker.callers[0].subjects[0], "*");
    assert_string_equal(cfg->worker.callers[1].cert_subject, "b.example");
    assert_int_equal(cfg->worker.callers[1].n_subjects, 2);
    assert_string_equal(cfg->worker.callers[1].subjects[1], "u2");
    assert_int_equal(cfg->worker.max_message_bytes, 4096);
    assert_int_equal(cfg->worker.drain_timeout_ms, 5);
    assert_string_equal(cfg->worker.record, "/rec.bin");

    assert_int_equal(cfg->n_profiles, 2);
    const sbx_profile_config *p = sbx_config_profile(cfg, "p1");
    assert_non_null(p);
    assert_string_equal(p->type, "test_both");
    assert_int_equal(p->scope, SBX_SCOPE_PER_CALL);
    assert_int_equal(p->environment, SBX_ENV_ATTACHED);
    assert_string_equal(p->attach_to, "box-9");
    assert_int_equal(p->idle_timeout_s, 0);
    assert_int_equal(p->identity_mode, SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER);
    const sbx_policy *pol = p->policy;
    assert_int_equal(pol->network_egress, SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST);
    assert_int_equal(pol->n_network_allow, 3);
    assert_string_equal(pol->network_allow[1], "*.example.com");
    assert_int_equal(pol->n_fs_read, 1);
    assert_string_equal(pol->fs_read[0], "/data");
    assert_int_equal(pol->n_fs_write, 2);
    assert_true(pol->cpu == 0.5);
    assert_int_equal(pol->memory_mb, 64);
    assert_int_equal(pol->pids, 10);
    assert_int_equal(pol->disk_mb, 100);
    assert_int_equal(pol->timeout_ms, 5000);
    assert_int_equal(pol->output_limit_bytes, 65536);
    assert_true(pol->lenient);
    assert_string_equal(sbx_options_get(p->options, "image"), "alpine");
    assert_int_equal(sbx_options_get_int(p->options, "count"), 7);
    assert_true(sbx_options_get_bool(p->options, "flag"));
    assert_string_equal(sbx_options_get(p->options, "mode"), "slow");
    assert_string_equal(sbx_options_get(p->options, "key_env"), "K");
    const char *const *tags;
    assert_int_equal(sbx_options_get_list(p->options, "tags", &tags), 1);
    assert_string_equal(tags[0], "x");
    assert_int_equal(p->line, 33);
    assert_int_equal(p->column, 5);

    const sbx_profile_config *d = sbx_config_profile(cfg, NULL);
    assert_non_null(d);
    assert_string_equal(d->name, "p2");
    assert_int_equal(d->scope, SBX_SCOPE_PER_RUNTIME);
    sbx_config_free(cfg);
}

static void test_config_omitted_keys_take_their_defaults(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok("sandbox:\n  profiles:\n    default: {type: test_managed}\n");
    assert_string_equal(cfg->default_profile, "default");
    assert_string_equal(cfg->broker.flavor, "thread");
    assert_int_equal(cfg->broker.threads, 16);
    assert_int_equal(cfg->broker.queue_depth, 1024);
    assert_int_equal(cfg->broker.wait_timeout_ms, 60000);
    assert_int_equal(cfg->broker.lru_size, 1024);
    assert_null(cfg->broker.remote.endpoint);
    assert_int_equal(cfg->broker.remote.connect_timeout_ms, 5000);
    assert_string_equal(cfg->worker.listen, "127.0.0.1:7443");
    assert_null(cfg->worker.tls_cert_file);
    assert_int_equal(cfg->worker.n_callers, 0);
    assert_int_equal(cfg->worker.max_message_bytes, 16 * 1024 * 1024);
    assert_int_equal(cfg->worker.drain_timeout_ms, 30000);
    assert_null(cfg->worker.record);
    const sbx_profile_config *p = sbx_config_profile(cfg, "default");
    assert_int_equal(p->scope, SBX_SCOPE_PER_SESSION);
    assert_int_equal(p->environment, SBX_ENV_MANAGED);
    assert_int_equal(p->idle_timeout_s, 1800);
    assert_int_equal(p->policy->network_egress, SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY);
    assert_int_equal(p->policy->timeout_ms, 120000);
    /* provider block absent: the schema's defaults */
    assert_string_equal(sbx_options_get(p->options, "image"), "busybox");
    assert_false(sbx_options_is_set(p->options, "image"));
    sbx_config_free(cfg);
}

static void test_config_empty_document_is_the_builtin_default(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok("# nothing but a comment\n");
    assert_int_equal(cfg->n_profiles, 1);
    assert_string_equal(cfg->profiles[0].name, "default");
    assert_string_equal(cfg->profiles[0].type, "local");
    sbx_config_free(cfg);
}

static void test_config_single_profile_is_the_default(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok("sandbox:\n  profiles:\n    only: {type: test_managed}\n");
    assert_string_equal(cfg->default_profile, "only");
    assert_string_equal(sbx_config_profile(cfg, "")->name, "only");
    assert_null(sbx_config_profile(cfg, "other"));
    sbx_config_free(cfg);
}

static void test_config_quoted_strings_and_numbers_as_strings(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok("sandbox:\n  node: \"1234\"\n");
    assert_string_equal(cfg->node, "1234");
    sbx_config_free(cfg);
}

static void test_config_missing_file_is_an_error(void **state)
{
    (void)state;
    sbx_config *cfg = (sbx_config *)0x1;
    sbx_error err = {0};
    assert_int_equal(sbx_config_load("/nonexistent/sbx.yaml", &cfg, &err), SBX_E_CONFIG);
    assert_null(cfg);
    assert_non_null(strstr(err.message, "/nonexistent/sbx.yaml"));
    assert_non_null(strstr(err.message, "does not exist"));
}

static void test_config_env_selects_the_file(void **state)
{
    (void)state;
    char dir[256], path[300];
    make_temp_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/c.yaml", dir);
    const char *text = "sandbox:\n  node: from-env\n";
    write_file(path, text, strlen(text));
    setenv("SBX_CONFIG", path, 1);
    sbx_config *cfg = NULL;
    assert_int_equal(sbx_config_load(NULL, &cfg, NULL), SBX_OK);
    assert_string_equal(cfg->node, "from-env");
    assert_string_equal(cfg->path, path);
    sbx_config_free(cfg);
    /* an explicit path wins over the environment */
    assert_int_equal(sbx_config_load("/nonexistent/x.yaml", &cfg, NULL), SBX_E_CONFIG);
    unsetenv("SBX_CONFIG");
    unlink(path);
    rmdir(dir);
}

static void test_config_env_naming_a_missing_file_is_an_error(void **state)
{
    (void)state;
    setenv("SBX_CONFIG", "/nonexistent/env.yaml", 1);
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_config_load(NULL, &cfg, &err), SBX_E_CONFIG);
    assert_null(cfg);
    assert_non_null(strstr(err.message, "$SBX_CONFIG"));
    unsetenv("SBX_CONFIG");
}

static void test_config_relative_paths_resolve_against_the_file(void **state)
{
    (void)state;
    char dir[256], path[300], want[400];
    make_temp_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/c.yaml", dir);
    const char *text = "sandbox:\n  secret_file: keys/secret\n  worker: {record: /abs/rec}\n";
    write_file(path, text, strlen(text));
    sbx_config *cfg = NULL;
    assert_int_equal(sbx_config_load(path, &cfg, NULL), SBX_OK);
    snprintf(want, sizeof(want), "%s/keys/secret", dir);
    assert_string_equal(cfg->secret_file, want);
    assert_string_equal(cfg->worker.record, "/abs/rec");
    sbx_config_free(cfg);
    unlink(path);
    rmdir(dir);
}

static void test_config_oversized_file_is_refused_unread(void **state)
{
    (void)state;
    char dir[256], path[300];
    make_temp_dir(dir, sizeof(dir));
    snprintf(path, sizeof(path), "%s/big.yaml", dir);
    size_t len = 1024 * 1024 + 16;
    char *text = malloc(len);
    assert_non_null(text);
    memset(text, '#', len);
    write_file(path, text, len);
    free(text);
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_config_load(path, &cfg, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "larger than"));
    unlink(path);
    rmdir(dir);
}

static void test_config_directory_is_refused(void **state)
{
    (void)state;
    char dir[256];
    make_temp_dir(dir, sizeof(dir));
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_config_load(dir, &cfg, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "directory"));
    rmdir(dir);
}

static void test_config_node_count_is_bounded(void **state)
{
    (void)state;
    /* 30000 one-character items: small (60 KB) but more nodes than any config needs */
    size_t items = 30000;
    char *text = malloc(items * 2 + 64);
    assert_non_null(text);
    size_t off = (size_t)sprintf(text, "sandbox:\n  node: [");
    for (size_t i = 0; i < items; i++) {
        text[off++] = 'x';
        text[off++] = ',';
    }
    text[off - 1] = ']';
    text[off++] = '\n';
    text[off] = '\0';
    load_fails(text, "test.yaml:2:", "more than 20000 nodes", NULL);
    free(text);
}

static void test_config_string_loader_rejects_null_out(void **state)
{
    (void)state;
    assert_int_equal(sbx_config_load_string("", 0, "x", NULL, NULL), SBX_E_INVALID_ARGUMENT);
    sbx_config_free(NULL);
    assert_null(sbx_config_profile(NULL, NULL));
}

static void test_config_scope_and_environment_names(void **state)
{
    (void)state;
    assert_string_equal(sbx_scope_name(SBX_SCOPE_PER_CALL), "per_call");
    assert_string_equal(sbx_scope_name(SBX_SCOPE_PER_SESSION), "per_session");
    assert_string_equal(sbx_scope_name(SBX_SCOPE_PER_RUNTIME), "per_runtime");
    assert_string_equal(sbx_environment_name(SBX_ENV_MANAGED), "managed");
    assert_string_equal(sbx_environment_name(SBX_ENV_ATTACHED), "attached");
}

/* A local profile of network allow runs programs in the host's network namespace, so the local
 * provider refuses every request of it without host_network: true. Refused at load, at its
 * policy, naming both fixes; loads with the option. */
static void test_config_local_allow_needs_host_network(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    net:\n      type: local\n"
               "      policy: {network_egress: allow}\n",
               "test.yaml:5:15:", "profile 'net'", "the host's network namespace",
               "host_network: true", "allowlist", NULL);
    sbx_config *cfg = load_ok("sandbox:\n  profiles:\n    net:\n      type: local\n"
                              "      policy: {network_egress: allow}\n"
                              "      local: {host_network: true}\n");
    sbx_config_free(cfg);
    cfg = load_ok("sandbox:\n  profiles:\n    net:\n      type: local\n"
                  "      policy: {network_egress: allowlist, network_allow: [pypi.org]}\n");
    sbx_config_free(cfg);
}

/* Docker's allow on network host is the host's network namespace too: refused at load unless
 * the profile accepts it (shared_network). A bridge's isolation only the daemon knows: it is
 * checked at each create (test_docker_managed). */
static void test_config_docker_allow_on_host_network_needs_shared_network(void **state)
{
    (void)state;
    if (sbx_provider_lookup("docker") == NULL)
        skip();
    load_fails("sandbox:\n  profiles:\n    d:\n      type: docker\n"
               "      policy: {network_egress: allow}\n"
               "      docker: {image: busybox, network: host}\n",
               "test.yaml:5:15:", "profile 'd'", "docker network 'host'",
               "the host's network namespace", "shared_network: true", "enable_icc=false", NULL);
    sbx_config *cfg =
        load_ok("sandbox:\n  profiles:\n    d:\n      type: docker\n"
                "      policy: {network_egress: allow}\n"
                "      docker: {image: busybox, network: host, shared_network: true}\n");
    sbx_config_free(cfg);
    cfg = load_ok("sandbox:\n  profiles:\n    d:\n      type: docker\n"
                  "      policy: {network_egress: deny}\n"
                  "      docker: {image: busybox, network: host}\n");
    sbx_config_free(cfg);
}

static void test_config_unknown_key_lists_the_accepted_keys(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    default:\n      type: test_managed\n      polcy: {}\n",
               "test.yaml:5:7:", "unknown key 'polcy'",
               "accepted keys here: type, scope, environment, attach_to, idle_timeout_s, "
               "idle_action, identity, policy, fallback, test_managed",
               NULL);
}

static void test_config_idle_action_pause_needs_a_provider_that_pauses(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok("sandbox:\n  profiles:\n    p:\n      type: local\n"
                              "      idle_timeout_s: 60\n      idle_action: pause\n");
    assert_true(cfg->profiles[0].idle_pause);
    sbx_config_free(cfg);
    cfg = load_ok("sandbox:\n  profiles:\n    p:\n      type: local\n");
    assert_false(cfg->profiles[0].idle_pause); /* reset is the default */
    sbx_config_free(cfg);
    load_fails("sandbox:\n  profiles:\n    p:\n      type: test_managed\n"
               "      idle_action: pause\n",
               "test.yaml:5:20:", "provider 'test_managed' cannot pause sandboxes",
               "use idle_action: reset", NULL);
    load_fails("sandbox:\n  profiles:\n    p:\n      type: local\n      idle_timeout_s: 0\n"
               "      idle_action: pause\n",
               "idle_action pause needs idle_timeout_s > 0", NULL);
    load_fails("sandbox:\n  profiles:\n    p:\n      type: local\n      idle_action: sleep\n",
               "idle_action", "reset, pause", NULL);
}

static void test_config_near_misses_get_a_suggestion(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    default: {type: test_managd}\n",
               "unknown provider type 'test_managd' (did you mean 'test_managed'?)", NULL);
    load_fails("sandbox:\n  profiles:\n    default: {type: test_managed, scoep: per_call}\n",
               "unknown key 'scoep' (did you mean 'scope'?)", NULL);
    load_fails("sandbox:\n  profiles:\n    default: {type: test_managed, scope: per_cal}\n",
               "'per_cal' is not accepted (did you mean 'per_call'?)", NULL);
    /* nothing close: no suggestion */
    load_fails("sandbox:\n  zzz: 1\n", "unknown key 'zzz'; accepted keys here", NULL);
}

/* Every table-driven section names its whole key table, in order, at the unknown key. */
static void test_config_each_section_lists_its_keys(void **state)
{
    (void)state;
    load_fails("sandbox:\n  zzz: 1\n", "test.yaml:2:3: sandbox: unknown key 'zzz'",
               "accepted keys here: default_profile, secret_file, node, runtime_dir, "
               "snapshot_dir, snapshot_max_mb, principal_sandboxes, broker, worker, profiles",
               NULL);
    load_fails("sandbox:\n  snapshot_max_mb: 0\n", "sandbox.snapshot_max_mb: 0 is out of range",
               "accepted: 1 to 1048576", NULL);
    load_fails("sandbox:\n  principal_sandboxes: -1\n",
               "sandbox.principal_sandboxes: -1 is out of range", "accepted: 0 to 1048576", NULL);
    load_fails("sandbox:\n  broker: {zzz: 1}\n", "sandbox.broker: unknown key 'zzz'",
               "accepted keys here: flavor, threads, queue_depth, wait_timeout_ms, lru_size, "
               "principal_threads, remote, queue",
               NULL);
    load_fails("sandbox:\n  broker: {threads: 4, principal_threads: 5}\n",
               "test.yaml:2:43: sandbox.broker.principal_threads: 5 is more than "
               "sandbox.broker.threads (4)",
               "lower it, or use 0 for all but a quarter of the threads", NULL);
    load_fails("sandbox:\n  broker: {remote: {zzz: 1}}\n",
               "sandbox.broker.remote: unknown key 'zzz'",
               "accepted keys here: endpoint, ca_file, cert_file, key_file, token_env, "
               "connect_timeout_ms",
               NULL);
    load_fails("sandbox:\n  broker: {queue: {zzz: 1}}\n", "sandbox.broker.queue: unknown key 'zzz'",
               "accepted keys here: url, ca_file, cert_file, key_file, user, password_env, nkey, "
               "nkey_seed_env, token_env, name, inbox_prefix, replicas, ack_wait_ms, node_wait_ms, "
               "completion_ttl_s, dedup_window_s, connect_timeout_ms",
               NULL);
    load_fails("sandbox:\n  worker: {zzz: 1}\n", "sandbox.worker: unknown key 'zzz'",
               "accepted keys here: listen, tls, auth, max_message_bytes, drain_timeout_ms, "
               "record, record_max_bytes, record_keep, log_level, log_file, metrics_listen, "
               "serve, drain_notice_ms",
               NULL);
    load_fails("sandbox:\n  worker: {tls: {zzz: 1}}\n", "sandbox.worker.tls: unknown key 'zzz'",
               "accepted keys here: cert_file, key_file, client_ca_file", NULL);
    load_fails("sandbox:\n  worker: {auth: {callers: [{zzz: 1}]}}\n",
               "sandbox.worker.auth.callers[0]: unknown key 'zzz'",
               "accepted keys here: name, token_env, cert_subject, subjects", NULL);
    /* A value read by a section's own rule still names its key. */
    load_fails("sandbox:\n  worker: {metrics_listen: nowhere}\n",
               "sandbox.worker.metrics_listen: 'nowhere' is not HOST:PORT", NULL);
    load_fails("sandbox:\n  broker: {threads: 0}\n", "sandbox.broker.threads: 0 is out of range",
               NULL);
}

static void test_config_fallback_names_other_managed_profiles(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    default: {type: test_managed, fallback: [nope]}\n",
               "sandbox.profiles.default.fallback: no profile named 'nope'", NULL);
    load_fails("sandbox:\n  profiles:\n    default: {type: test_managed, fallback: [default]}\n",
               "profile 'default' falls back to itself", NULL);
    load_fails("sandbox:\n  profiles:\n    default: {type: test_managed, fallback: [ext]}\n"
               "    ext: {type: test_attach, environment: attached, attach_to: x}\n",
               "fallback 'ext' is an attached profile", NULL);
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    const char *ok = "sandbox:\n  profiles:\n    default: {type: test_managed, fallback: [b, c]}\n"
                     "    b: {type: test_managed}\n    c: {type: test_managed}\n";
    assert_int_equal(sbx_config_load_string(ok, strlen(ok), "test.yaml", &cfg, &err), SBX_OK);
    const sbx_profile_config *p = sbx_config_profile(cfg, "default");
    assert_int_equal(p->n_fallback, 2);
    assert_string_equal(p->fallback[1], "c");
    sbx_config_free(cfg);
}

static void test_config_inline_secret_points_to_env_form(void **state)
{
    (void)state;
    load_fails("sandbox:\n  profiles:\n    default:\n      type: test_managed\n"
               "      test_managed: {github_token: ghp_x}\n",
               "test.yaml:5:22:", "inline secret", "github_token_env", NULL);
}

static void remote_endpoint_ok(const char *endpoint)
{
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "sandbox:\n  broker:\n    remote: {endpoint: '%s'}\n", endpoint);
    sbx_config *cfg = load_ok(yaml);
    assert_string_equal(cfg->broker.remote.endpoint, endpoint);
    sbx_config_free(cfg);
}

static void remote_endpoint_refused(const char *endpoint, const char *fragment)
{
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "sandbox:\n  broker:\n    remote: {endpoint: '%s'}\n", endpoint);
    load_fails(yaml, "test.yaml:3:24:", fragment, NULL);
}

static void test_config_remote_endpoint_needs_tls_off_loopback(void **state)
{
    (void)state;
    remote_endpoint_ok("https://workers.example:7443");
    remote_endpoint_ok("https://workers.example");
    remote_endpoint_ok("https://workers.example/prefix");
    remote_endpoint_ok("https://[2001:db8::1]:7443");
    remote_endpoint_ok("http://127.0.0.1:7443");
    remote_endpoint_ok("http://localhost");
    remote_endpoint_ok("http://[::1]:80");
    remote_endpoint_ok("http://127.3.4.5:7443");
    remote_endpoint_refused("http://workers.example:7443", "unencrypted");
    remote_endpoint_refused("http://127.evil.example:80", "unencrypted");
    remote_endpoint_refused("http://127.0.0.1.evil.example", "unencrypted");
    remote_endpoint_refused("http://localhost.evil.example", "unencrypted");
    remote_endpoint_refused("http://127.0.0.1@evil.example:80", "credentials");
    remote_endpoint_refused("https://user:pw@workers.example", "credentials");
    remote_endpoint_refused("http://[2001:db8::1]:80", "unencrypted");
    remote_endpoint_refused("ftp://workers.example", "is not an endpoint");
    remote_endpoint_refused("https://:7443", "is not an endpoint");
    remote_endpoint_refused("https://w:0", "is not an endpoint");
    remote_endpoint_refused("https://w:99999", "is not an endpoint");
    remote_endpoint_refused("workers.example:7443", "is not an endpoint");
}

/* An inbox prefix is NATS subject tokens: a wildcard or an empty token would take replies meant
 * for other connections, or none. */
static void test_config_queue_inbox_prefix_is_subject_tokens(void **state)
{
    (void)state;
    const char *bad[] = {"_INBOX.>", "a..b", ".a", "a.", "a b", "x*"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "sandbox:\n  broker:\n    queue: {inbox_prefix: '%s'}\n",
                 bad[i]);
        load_fails(yaml, "sandbox.broker.queue.inbox_prefix", "is not an inbox prefix",
                   "_INBOX_tenant-a", NULL);
    }
    sbx_config *cfg =
        load_ok("sandbox:\n  broker:\n    queue: {inbox_prefix: _INBOX_tenant-a.replies}\n");
    assert_string_equal(cfg->broker.queue.inbox_prefix, "_INBOX_tenant-a.replies");
    sbx_config_free(cfg);
}

static void test_config_worker_off_loopback_needs_tls_and_callers(void **state)
{
    (void)state;
    load_fails("sandbox:\n  worker:\n    listen: '[::]:7443'\n"
               "    tls: {cert_file: /c, key_file: /k}\n",
               "test.yaml:3:13:", "requires authenticated callers", NULL);
    load_fails("sandbox:\n  worker:\n    tls: {client_ca_file: /ca}\n",
               "test.yaml:3:27:", "need TLS", NULL);
    load_fails("sandbox:\n  worker:\n    tls: {cert_file: /c}\n",
               "test.yaml:3:10:", "cert_file and key_file go together", NULL);
    load_fails("sandbox:\n  worker:\n    auth: {callers: [{name: x, cert_subject: cn, "
               "subjects: [a]}]}\n",
               "test.yaml:3:22:", "needs sandbox.worker.tls.client_ca_file", NULL);
    load_fails("sandbox:\n  worker:\n    auth: {callers: [{name: x, token_env: T, "
               "cert_subject: cn, subjects: [a]}]}\n",
               "test.yaml:3:22:", "exactly one of token_env", NULL);
    load_fails("sandbox:\n  worker:\n    auth: {callers: [{name: x, token_env: T, subjects: [a]},"
               " {name: x, token_env: U, subjects: [b]}]}\n",
               "a second caller named 'x'", NULL);
    load_fails("sandbox:\n  worker:\n    listen: 127.evil.example:7443\n",
               "test.yaml:3:13:", "requires TLS", NULL);
    sbx_config *cfg = load_ok("sandbox:\n  worker:\n    listen: '[::1]:7443'\n");
    sbx_config_free(cfg);
    cfg = load_ok("sandbox:\n  worker:\n    listen: localhost:0\n");
    assert_string_equal(cfg->worker.listen, "localhost:0");
    sbx_config_free(cfg);
}

int main(void)
{
    config_test_register_providers();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_default_is_one_local_profile_without_network),
        cmocka_unit_test(test_config_default_does_not_consult_the_registry),
        cmocka_unit_test(test_config_no_file_and_no_env_is_the_builtin_default),
        cmocka_unit_test(test_config_host_defaults_follow_root_or_xdg),
        cmocka_unit_test(test_config_node_defaults_to_hostname),
        cmocka_unit_test(test_config_every_key_is_parsed_into_its_field),
        cmocka_unit_test(test_config_omitted_keys_take_their_defaults),
        cmocka_unit_test(test_config_empty_document_is_the_builtin_default),
        cmocka_unit_test(test_config_single_profile_is_the_default),
        cmocka_unit_test(test_config_quoted_strings_and_numbers_as_strings),
        cmocka_unit_test(test_config_missing_file_is_an_error),
        cmocka_unit_test(test_config_env_selects_the_file),
        cmocka_unit_test(test_config_env_naming_a_missing_file_is_an_error),
        cmocka_unit_test(test_config_relative_paths_resolve_against_the_file),
        cmocka_unit_test(test_config_oversized_file_is_refused_unread),
        cmocka_unit_test(test_config_directory_is_refused),
        cmocka_unit_test(test_config_node_count_is_bounded),
        cmocka_unit_test(test_config_string_loader_rejects_null_out),
        cmocka_unit_test(test_config_scope_and_environment_names),
        cmocka_unit_test(test_config_local_allow_needs_host_network),
        cmocka_unit_test(test_config_docker_allow_on_host_network_needs_shared_network),
        cmocka_unit_test(test_config_unknown_key_lists_the_accepted_keys),
        cmocka_unit_test(test_config_each_section_lists_its_keys),
        cmocka_unit_test(test_config_idle_action_pause_needs_a_provider_that_pauses),
        cmocka_unit_test(test_config_fallback_names_other_managed_profiles),
        cmocka_unit_test(test_config_near_misses_get_a_suggestion),
        cmocka_unit_test(test_config_inline_secret_points_to_env_form),
        cmocka_unit_test(test_config_remote_endpoint_needs_tls_off_loopback),
        cmocka_unit_test(test_config_queue_inbox_prefix_is_subject_tokens),
        cmocka_unit_test(test_config_worker_off_loopback_needs_tls_and_callers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
