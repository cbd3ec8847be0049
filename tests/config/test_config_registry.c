/* test_config_registry.c - sbx_provider_register: registered providers are found by lookup, by
 * the config loader and in the names list; bad names, missing traits and duplicates are refused;
 * registration from several threads at once loses nothing; a full table is refused. */
#include <pthread.h>

#include "sbx/provider.h"
#include "tests/config/config_test_util.h"
#include "tests/config/test_providers.h"

static const sbx_provider_ops reg_one = {.name = "reg_one", .traits = SBX_PROVIDER_PROVISIONS};

static void test_config_registry_registered_provider_is_found(void **state)
{
    (void)state;
    assert_null(sbx_provider_lookup("reg_one"));
    assert_int_equal(sbx_provider_register(&reg_one, NULL), SBX_OK);
    assert_ptr_equal(sbx_provider_lookup("reg_one"), &reg_one);
    assert_non_null(strstr(sbx_provider_names(), "reg_one"));
    const sbx_provider_ops *const *list;
    size_t n = sbx_provider_builtins(&list);
    bool seen = false;
    for (size_t i = 0; i < n; i++)
        seen = seen || list[i] == &reg_one;
    assert_true(seen);
    sbx_config *cfg = load_ok("sandbox:\n  profiles:\n    default: {type: reg_one}\n");
    assert_string_equal(cfg->profiles[0].type, "reg_one");
    sbx_config_free(cfg);
}

static void test_config_registry_duplicate_name_is_refused(void **state)
{
    (void)state;
    static const sbx_provider_ops again = {.name = "test_managed",
                                           .traits = SBX_PROVIDER_PROVISIONS};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_register(&again, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "already exists"));
    assert_ptr_not_equal(sbx_provider_lookup("test_managed"), &again);
}

static void test_config_registry_bad_names_and_traits_are_refused(void **state)
{
    (void)state;
    static const sbx_provider_ops upper = {.name = "Docker2", .traits = SBX_PROVIDER_ATTACHES};
    static const sbx_provider_ops empty = {.name = "", .traits = SBX_PROVIDER_ATTACHES};
    static const sbx_provider_ops spaced = {.name = "a b", .traits = SBX_PROVIDER_ATTACHES};
    static const sbx_provider_ops long_name = {.name = "abcdefghijklmnopqrstuvwxyz0123456789",
                                               .traits = SBX_PROVIDER_ATTACHES};
    static const sbx_provider_ops no_traits = {.name = "no_traits", .traits = 0};
    static const sbx_provider_ops no_name = {.name = NULL, .traits = SBX_PROVIDER_ATTACHES};
    assert_int_equal(sbx_provider_register(&upper, NULL), SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_provider_register(&empty, NULL), SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_provider_register(&spaced, NULL), SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_provider_register(&long_name, NULL), SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_provider_register(&no_traits, NULL), SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_provider_register(&no_name, NULL), SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_provider_register(NULL, NULL), SBX_E_INVALID_ARGUMENT);
    assert_null(sbx_provider_lookup("no_traits"));
    assert_null(sbx_provider_lookup(NULL));
}

/* Threads registering distinct names (and one shared name) at the same time. */
#define REG_THREADS 8
#define REG_PER_THREAD 3
static char thread_names[REG_THREADS][REG_PER_THREAD][16];
static sbx_provider_ops thread_ops[REG_THREADS][REG_PER_THREAD];
static sbx_provider_ops shared_ops[REG_THREADS];
static int shared_ok[REG_THREADS];

static void *register_some(void *arg)
{
    size_t t = (size_t)arg;
    for (size_t i = 0; i < REG_PER_THREAD; i++)
        if (sbx_provider_register(&thread_ops[t][i], NULL) != SBX_OK)
            return (void *)1;
    shared_ok[t] = sbx_provider_register(&shared_ops[t], NULL) == SBX_OK;
    return NULL;
}

static void test_config_registry_concurrent_registration_loses_nothing(void **state)
{
    (void)state;
    pthread_t threads[REG_THREADS];
    for (size_t t = 0; t < REG_THREADS; t++) {
        for (size_t i = 0; i < REG_PER_THREAD; i++) {
            snprintf(thread_names[t][i], sizeof(thread_names[t][i]), "th_%zu_%zu", t, i);
            thread_ops[t][i] =
                (sbx_provider_ops){.name = thread_names[t][i], .traits = SBX_PROVIDER_PROVISIONS};
        }
        shared_ops[t] = (sbx_provider_ops){.name = "th_shared", .traits = SBX_PROVIDER_ATTACHES};
    }
    for (size_t t = 0; t < REG_THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, register_some, (void *)t), 0);
    for (size_t t = 0; t < REG_THREADS; t++) {
        void *rc = (void *)1;
        assert_int_equal(pthread_join(threads[t], &rc), 0);
        assert_null(rc);
    }
    for (size_t t = 0; t < REG_THREADS; t++)
        for (size_t i = 0; i < REG_PER_THREAD; i++)
            assert_ptr_equal(sbx_provider_lookup(thread_names[t][i]), &thread_ops[t][i]);
    int winners = 0;
    for (size_t t = 0; t < REG_THREADS; t++)
        winners += shared_ok[t];
    assert_int_equal(winners, 1); /* exactly one registration of a contended name wins */
}

/* Runs last: fills the table. */
static void test_config_registry_full_table_is_refused(void **state)
{
    (void)state;
    static char names[SBX_MAX_PROVIDERS][16];
    static sbx_provider_ops ops[SBX_MAX_PROVIDERS];
    sbx_status st = SBX_OK;
    size_t i;
    for (i = 0; i < SBX_MAX_PROVIDERS && st == SBX_OK; i++) {
        snprintf(names[i], sizeof(names[i]), "fill_%zu", i);
        ops[i] = (sbx_provider_ops){.name = names[i], .traits = SBX_PROVIDER_PROVISIONS};
        st = sbx_provider_register(&ops[i], NULL);
    }
    assert_int_equal(st, SBX_E_RESOURCE_EXHAUSTED);
    assert_int_equal(sbx_provider_builtins(NULL), SBX_MAX_PROVIDERS);
    /* everything registered before the table filled is still there */
    assert_ptr_equal(sbx_provider_lookup("reg_one"), &reg_one);
    assert_ptr_equal(sbx_provider_lookup(names[0]), &ops[0]);
}

int main(void)
{
    config_test_register_providers();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_registry_registered_provider_is_found),
        cmocka_unit_test(test_config_registry_duplicate_name_is_refused),
        cmocka_unit_test(test_config_registry_bad_names_and_traits_are_refused),
        cmocka_unit_test(test_config_registry_concurrent_registration_loses_nothing),
        cmocka_unit_test(test_config_registry_full_table_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
