/* test_config_examples.c - every file under examples/ loads. Providers not built into this
 * binary are stood in by schemas registered from test_providers.c that mirror the option names
 * the examples use; a provider that IS built in always wins (registration never shadows it), so
 * as each real provider lands, its examples are checked against its real schema. An example that
 * no longer matches fails here with its file:line:column: update the example (examples/
 * documents every key) to the provider's option names.
 * Every example profile's own policy must also be enforceable by its (built-in) provider, as the
 * engine checks it before each execution: an example that strict mode would refuse on every call
 * is a broken example. */
#include <dirent.h>
#include <sys/stat.h>

#include "core/policy.h"
#include "sbx/provider.h"

#include "tests/config/config_test_util.h"
#include "tests/config/test_providers.h"

static int yaml_only(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 5 && strcmp(d->d_name + n - 5, ".yaml") == 0;
}

static const char *examples_dir(void)
{
    const char *d = getenv("SBX_EXAMPLES_DIR");
    assert_non_null(d);
    return d;
}

static sbx_config *load_example(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", examples_dir(), name);
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    if (sbx_config_load(path, &cfg, &err) != SBX_OK)
        fprintf(stderr, "%s\n", err.message);
    return cfg;
}

static void test_config_every_example_loads(void **state)
{
    (void)state;
    struct dirent **names = NULL;
    int n = scandir(examples_dir(), &names, yaml_only, alphasort);
    assert_true(n >= 6);
    int failures = 0;
    for (int i = 0; i < n; i++) {
        sbx_config *cfg = load_example(names[i]->d_name);
        if (cfg == NULL) {
            fprintf(stderr, "  examples/%s does not load (see above)\n", names[i]->d_name);
            failures++;
        }
        sbx_config_free(cfg);
        free(names[i]);
    }
    free(names);
    assert_int_equal(failures, 0);
}

static void test_config_example_ec2_ssm_is_attached_as_user(void **state)
{
    (void)state;
    sbx_config *cfg = load_example("ec2-ssm-attached.yaml");
    assert_non_null(cfg);
    const sbx_profile_config *p = sbx_config_profile(cfg, NULL);
    assert_string_equal(p->type, "ec2_ssm");
    assert_int_equal(p->environment, SBX_ENV_ATTACHED);
    assert_int_equal(p->identity_mode, SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER);
    sbx_config_free(cfg);
}

static void test_config_example_reference_states_the_defaults(void **state)
{
    (void)state;
    /* reference.yaml sets every key to its default: it must equal the built-in default. */
    sbx_config *ref = load_example("reference.yaml");
    assert_non_null(ref);
    sbx_config *def = NULL;
    assert_int_equal(sbx_config_default(&def, NULL), SBX_OK);
    const sbx_profile_config *a = &ref->profiles[0], *b = &def->profiles[0];
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->type, b->type);
    assert_int_equal(a->scope, b->scope);
    assert_int_equal(a->environment, b->environment);
    assert_int_equal(a->idle_timeout_s, b->idle_timeout_s);
    assert_int_equal(a->identity_mode, b->identity_mode);
    assert_int_equal(a->policy->network_egress, b->policy->network_egress);
    assert_true(a->policy->cpu == b->policy->cpu);
    assert_int_equal(a->policy->memory_mb, b->policy->memory_mb);
    assert_int_equal(a->policy->pids, b->policy->pids);
    assert_int_equal(a->policy->disk_mb, b->policy->disk_mb);
    assert_int_equal(a->policy->timeout_ms, b->policy->timeout_ms);
    assert_int_equal(a->policy->output_limit_bytes, b->policy->output_limit_bytes);
    assert_int_equal(a->policy->lenient, b->policy->lenient);
    assert_int_equal(ref->snapshot_max_mb, def->snapshot_max_mb);
    if (geteuid() == 0) /* the root defaults are the ones the file states */
        assert_string_equal(ref->snapshot_dir, def->snapshot_dir);
    assert_string_equal(ref->broker.flavor, def->broker.flavor);
    assert_int_equal(ref->broker.threads, def->broker.threads);
    assert_int_equal(ref->broker.queue_depth, def->broker.queue_depth);
    assert_int_equal(ref->broker.wait_timeout_ms, def->broker.wait_timeout_ms);
    assert_int_equal(ref->broker.lru_size, def->broker.lru_size);
    assert_int_equal(ref->broker.remote.connect_timeout_ms, def->broker.remote.connect_timeout_ms);
    assert_string_equal(ref->worker.listen, def->worker.listen);
    assert_int_equal(ref->worker.max_message_bytes, def->worker.max_message_bytes);
    assert_int_equal(ref->worker.drain_timeout_ms, def->worker.drain_timeout_ms);
    assert_int_equal(ref->worker.record_max_bytes, def->worker.record_max_bytes);
    assert_int_equal(ref->worker.record_keep, def->worker.record_keep);
    assert_string_equal(ref->worker.log_level, def->worker.log_level);
    sbx_config_free(ref);
    sbx_config_free(def);
}

/* The engine's check (core/engine.c): the provider's check_policy, else its capabilities. */
static int unenforceable_in(const sbx_config *cfg, const char *file, const char *runtime_dir)
{
    int failures = 0;
    for (size_t i = 0; i < cfg->n_profiles; i++) {
        const sbx_profile_config *p = &cfg->profiles[i];
        const sbx_provider_ops *ops = sbx_provider_lookup(p->type);
        if (ops == NULL || ops->open == NULL)
            continue;
        sbx_provider_ctx ctx = {.profile = p->name,
                                .options = p->options,
                                .environment = p->environment,
                                .attach_to = p->attach_to,
                                .node = cfg->node,
                                .runtime_dir = runtime_dir};
        void *state = NULL;
        sbx_error err = {0};
        if (ops->open(&ctx, &state, &err) != SBX_OK) {
            fprintf(stderr, "  (examples/%s profile %s: provider %s did not open here: %s)\n", file,
                    p->name, p->type, err.message);
            continue;
        }
        sbx_strlist list = {0};
        sbx_status st;
        if (ops->check_policy != NULL) {
            st = ops->check_policy(state, p->policy, &list, &err);
        } else {
            sbx_capabilities caps;
            sbx__v1__capabilities__init(&caps);
            ops->capabilities(state, &caps);
            st = sbx_policy_unenforceable(&caps, p->policy, &list);
            protobuf_c_message_free_unpacked((ProtobufCMessage *)&caps, NULL);
        }
        if (st != SBX_OK || (list.n > 0 && !p->policy->lenient)) {
            char *joined = sbx_strlist_join(&list, ", ");
            fprintf(stderr, "examples/%s profile %s: provider %s cannot enforce [%s] (strict)\n",
                    file, p->name, p->type, joined ? joined : "?");
            free(joined);
            failures++;
        }
        sbx_strlist_clear(&list);
        ops->close(state);
    }
    return failures;
}

static void test_config_example_policies_are_enforceable(void **state)
{
    (void)state;
    char runtime_dir[256];
    make_temp_dir(runtime_dir, sizeof(runtime_dir));
    struct dirent **names = NULL;
    int n = scandir(examples_dir(), &names, yaml_only, alphasort);
    assert_true(n >= 6);
    int failures = 0;
    for (int i = 0; i < n; i++) {
        sbx_config *cfg = load_example(names[i]->d_name);
        if (cfg != NULL)
            failures += unenforceable_in(cfg, names[i]->d_name, runtime_dir);
        sbx_config_free(cfg);
        free(names[i]);
    }
    free(names);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", runtime_dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(failures, 0);
}

int main(void)
{
    config_test_register_providers();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_every_example_loads),
        cmocka_unit_test(test_config_example_ec2_ssm_is_attached_as_user),
        cmocka_unit_test(test_config_example_reference_states_the_defaults),
        cmocka_unit_test(test_config_example_policies_are_enforceable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
