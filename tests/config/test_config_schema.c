/* test_config_schema.c - every row of the config's key tables (core/config_impl.h) is reachable:
 * walking the tables from config_sandbox_fields (through nested sections and the tables that
 * custom keys read with: profiles, callers, policy) gives each key's dotted path, and two files
 * that together set every one of those keys both load. A row whose key a file cannot reach
 * (a table no walk or reader uses, a typo in a key) fails here, as does a new key nobody added
 * to these files. The values set are checked for the keys test_config_load.c's every-key test
 * does not check. */
#include "core/config_impl.h"
#include "tests/config/config_test_util.h"
#include "tests/config/test_providers.h"

/* Everything but the second broker.queue login (nkey instead of user + password_env). */
static const char file_a[] =
    "sandbox:\n"
    "  default_profile: p1\n"
    "  secret_file: /s\n"
    "  node: n1\n"
    "  runtime_dir: /run/x\n"
    "  snapshot_dir: /snap\n"
    "  snapshot_max_mb: 5\n"
    "  principal_sandboxes: 9\n"
    "  broker:\n"
    "    flavor: remote\n"
    "    threads: 2\n"
    "    queue_depth: 3\n"
    "    wait_timeout_ms: 4\n"
    "    lru_size: 5\n"
    "    principal_threads: 2\n"
    "    remote:\n"
    "      endpoint: https://w.example:7443\n"
    "      ca_file: /ca\n"
    "      cert_file: /c\n"
    "      key_file: /k\n"
    "      token_env: T\n"
    "      connect_timeout_ms: 6\n"
    "    queue:\n"
    "      url: tls://nats.example:4222,tls://nats2.example:4222\n"
    "      ca_file: /qca\n"
    "      cert_file: /qc\n"
    "      key_file: /qk\n"
    "      user: u\n"
    "      password_env: QP\n"
    "      token_env: QT\n"
    "      name: jobs-1\n"
    "      inbox_prefix: _INBOX_jobs.tenant-a\n"
    "      replicas: 3\n"
    "      ack_wait_ms: 101\n"
    "      node_wait_ms: 7\n"
    "      completion_ttl_s: 8\n"
    "      dedup_window_s: 9\n"
    "      connect_timeout_ms: 10\n"
    "  worker:\n"
    "    listen: 127.0.0.1:0\n"
    "    tls: {cert_file: /s.pem, key_file: /s.key, client_ca_file: /cca.pem}\n"
    "    auth:\n"
    "      callers:\n"
    "        - {name: a, token_env: A_TOKEN, subjects: ['*']}\n"
    "        - {name: b, cert_subject: b.example, subjects: [u1]}\n"
    "    max_message_bytes: 2048\n"
    "    drain_timeout_ms: 11\n"
    "    record: /rec\n"
    "    record_max_bytes: 12\n"
    "    record_keep: 13\n"
    "    log_level: debug\n"
    "    log_file: /log\n"
    "    metrics_listen: 127.0.0.1:9464\n"
    "    serve: both\n"
    "    drain_notice_ms: 14\n"
    "  profiles:\n"
    "    p1:\n"
    "      type: test_both\n"
    "      scope: per_runtime\n"
    "      environment: attached\n"
    "      attach_to: box\n"
    "      idle_timeout_s: 15\n"
    "      idle_action: reset\n"
    "      identity: {mode: user}\n"
    "      policy:\n"
    "        network_egress: allowlist\n"
    "        network_allow: [pypi.org]\n"
    "        fs_read: [/r]\n"
    "        fs_write: [/w]\n"
    "        cpu: 0.25\n"
    "        memory_mb: 16\n"
    "        pids: 17\n"
    "        disk_mb: 18\n"
    "        timeout_ms: 19\n"
    "        output_limit_bytes: 20\n"
    "        lenient: true\n"
    "    p2:\n"
    "      type: test_managed\n"
    "      fallback: [p3]\n"
    "    p3:\n"
    "      type: test_managed\n";

/* The queue login file_a cannot set beside user + password_env. */
static const char file_b[] =
    "sandbox:\n"
    "  broker:\n"
    "    queue:\n"
    "      url: nats://127.0.0.1:4222\n"
    "      nkey: UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUVW\n"
    "      nkey_seed_env: QSEED\n";

#define PATHS_MAX 256

typedef struct paths {
    char *items[PATHS_MAX];
    size_t n;
} paths;

static void add_path(paths *ps, const char *path)
{
    for (size_t i = 0; i < ps->n; i++)
        if (strcmp(ps->items[i], path) == 0)
            return;
    assert_true(ps->n < PATHS_MAX);
    ps->items[ps->n] = strdup(path);
    assert_non_null(ps->items[ps->n]);
    ps->n++;
}

static void free_paths(paths *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        free(ps->items[i]);
}

/* The dotted path of every row reachable from fields, a profile's keys under "profiles.*". */
static void walk_table(const field *fields, const char *prefix, paths *ps)
{
    for (size_t f = 0; fields[f].key != NULL; f++) {
        char path[256];
        snprintf(path, sizeof(path), "%s.%s", prefix, fields[f].key);
        add_path(ps, path);
        if (fields[f].sub == NULL)
            continue;
        if (fields[f].sub == config_profile_fields)
            strncat(path, ".*", sizeof(path) - strlen(path) - 1);
        walk_table(fields[f].sub, path, ps);
    }
}

/* The dotted path of every key a document sets (list items share their list's path; the
 * names under sandbox.profiles become "*"; a profile's provider block is not descended). */
static void walk_node(const config_node *n, const char *prefix, paths *ps)
{
    if (n == NULL)
        return;
    if (n->kind == CONFIG_SEQ)
        for (size_t i = 0; i < n->n_kids; i++)
            walk_node(n->kids[i], prefix, ps);
    if (n->kind != CONFIG_MAP)
        return;
    bool profiles = strcmp(prefix, "(top).sandbox.profiles") == 0;
    for (size_t i = 0; i + 1 < n->n_kids; i += 2) {
        char path[256];
        snprintf(path, sizeof(path), "%s.%s", prefix, profiles ? "*" : n->kids[i]->text);
        if (!profiles)
            add_path(ps, path);
        walk_node(n->kids[i + 1], path, ps);
    }
}

static void file_paths(const char *yaml, paths *ps)
{
    config_node *root = NULL;
    sbx_error err = {0};
    assert_int_equal(config_yaml_parse(yaml, strlen(yaml), "t", &root, &err), SBX_OK);
    walk_node(root, "(top)", ps);
    config_node_free(root);
}

static void test_config_schema_every_row_is_set_by_a_file_that_loads(void **state)
{
    (void)state;
    paths rows = {0}, set = {0};
    walk_table(config_sandbox_fields, "(top).sandbox", &rows);
    assert_true(rows.n >= 80); /* every section's keys, not just the top level */
    file_paths(file_a, &set);
    file_paths(file_b, &set);
    for (size_t i = 0; i < rows.n; i++) {
        bool found = false;
        for (size_t j = 0; j < set.n && !found; j++)
            found = strcmp(rows.items[i], set.items[j]) == 0;
        if (!found)
            fprintf(stderr, "no test file sets %s\n", rows.items[i]);
        assert_true(found);
    }
    free_paths(&rows);
    free_paths(&set);
    sbx_config_free(load_ok(file_a));
    sbx_config_free(load_ok(file_b));
}

/* The keys test_config_every_key_is_parsed_into_its_field does not look at. */
static void test_config_schema_rows_land_in_their_members(void **state)
{
    (void)state;
    sbx_config *cfg = load_ok(file_a);
    const sbx_queue_config *q = &cfg->broker.queue;
    assert_string_equal(q->url, "tls://nats.example:4222,tls://nats2.example:4222");
    assert_string_equal(q->ca_file, "/qca");
    assert_string_equal(q->cert_file, "/qc");
    assert_string_equal(q->key_file, "/qk");
    assert_string_equal(q->user, "u");
    assert_string_equal(q->password_env, "QP");
    assert_string_equal(q->token_env, "QT");
    assert_string_equal(q->name, "jobs-1");
    assert_string_equal(q->inbox_prefix, "_INBOX_jobs.tenant-a");
    assert_int_equal(q->replicas, 3);
    assert_int_equal(q->ack_wait_ms, 101);
    assert_int_equal(q->node_wait_ms, 7);
    assert_int_equal(q->completion_ttl_s, 8);
    assert_int_equal(q->dedup_window_s, 9);
    assert_int_equal(q->connect_timeout_ms, 10);
    const sbx_worker_config *w = &cfg->worker;
    assert_int_equal(w->record_max_bytes, 12);
    assert_int_equal(w->record_keep, 13);
    assert_string_equal(w->log_level, "debug");
    assert_string_equal(w->log_file, "/log");
    assert_string_equal(w->metrics_listen, "127.0.0.1:9464");
    assert_string_equal(w->serve, "both");
    assert_int_equal(w->drain_notice_ms, 14);
    const sbx_profile_config *p = sbx_config_profile(cfg, NULL);
    assert_string_equal(p->name, "p1");
    assert_false(p->idle_pause);
    assert_true(p->policy->cpu == 0.25);
    assert_int_equal(p->policy->pids, 17);
    assert_int_equal(sbx_config_profile(cfg, "p2")->n_fallback, 1);
    sbx_config_free(cfg);

    cfg = load_ok(file_b);
    assert_string_equal(cfg->broker.queue.nkey,
                        "UABCDEFGHIJKLMNOPQRSTUVWXYZ234567ABCDEFGHIJKLMNOPQRSTUVW");
    assert_string_equal(cfg->broker.queue.nkey_seed_env, "QSEED");
    /* the rows' defaults where file_b sets nothing */
    assert_string_equal(cfg->broker.queue.name, "sbx");
    assert_int_equal(cfg->broker.queue.replicas, 1);
    assert_int_equal(cfg->broker.queue.ack_wait_ms, 30000);
    assert_int_equal(cfg->worker.record_max_bytes, 256LL * 1024 * 1024);
    assert_int_equal(cfg->worker.record_keep, 4);
    assert_string_equal(cfg->worker.log_level, "info");
    assert_string_equal(cfg->worker.serve, "grpc");
    assert_null(cfg->worker.metrics_listen);
    assert_int_equal(cfg->snapshot_max_mb, 1024);
    sbx_config_free(cfg);
}

int main(void)
{
    config_test_register_providers();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_schema_every_row_is_set_by_a_file_that_loads),
        cmocka_unit_test(test_config_schema_rows_land_in_their_members),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
