/* test_config_mutations.c - the config decoder on damaged input: every example and bad file,
 * truncated at every length and with deterministic byte mutations (flips, inserted YAML
 * punctuation, duplicated spans), must load or be refused with SBX_E_CONFIG whose message starts
 * with "name:LINE:COLUMN: " -- never crash (ASan watches), never another status, never an error
 * without a location. The same check is the libFuzzer target fuzz_config.c (SBX_FUZZ=ON). */
#include <dirent.h>
#include <stdint.h>

#include "tests/config/config_test_util.h"
#include "tests/config/test_providers.h"

/* Mutations per file: enough to reach every parser state the files exercise, few enough to stay
 * well under a second per file under ASan. */
#define MUTATIONS_PER_FILE 300

static int checked, refused;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull; /* fixed seed: the test is deterministic */
static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* "fuzz:12:3: ..." */
static bool has_location(const char *message)
{
    const char *p = message;
    if (strncmp(p, "fuzz:", 5) != 0)
        return false;
    p += 5;
    for (int part = 0; part < 2; part++) {
        if (*p < '1' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p++ != ':')
            return false;
    }
    return *p == ' ';
}

static void check_one(const char *data, size_t len)
{
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    sbx_status st = sbx_config_load_string(data, len, "fuzz", &cfg, &err);
    checked++;
    if (st == SBX_OK) {
        assert_non_null(cfg);
        sbx_config_free(cfg);
        return;
    }
    refused++;
    assert_null(cfg);
    if (st != SBX_E_CONFIG || !has_location(err.message)) {
        fprintf(stderr, "status %s, message \"%s\" for input:\n%.*s\n", sbx_status_name(st),
                err.message, (int)len, data);
        fail();
    }
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(65536);
    assert_non_null(buf);
    *len = fread(buf, 1, 65536, f);
    fclose(f);
    return buf;
}

static const char *const punctuation[] = {":",  "-", "[",  "]",  "{", "}", ",", "&", "*", "!",
                                          "\"", "'", "\t", "\n", "#", "|", ">", "%", "@", "\xff"};

static void mutate_file(const char *path)
{
    size_t len;
    char *orig = read_all(path, &len);
    char *buf = malloc(len * 2 + 64);
    assert_non_null(buf);
    check_one(orig, len);
    for (size_t cut = 0; cut < len; cut++) /* every truncation */
        check_one(orig, cut);
    for (int m = 0; m < MUTATIONS_PER_FILE; m++) {
        memcpy(buf, orig, len);
        size_t n = len;
        size_t at = len ? (size_t)(next_random() % len) : 0;
        switch (next_random() % 4) {
        case 0: /* flip a byte */
            if (n)
                buf[at] = (char)(buf[at] ^ (char)(1u << (next_random() % 8)));
            break;
        case 1: { /* insert YAML punctuation */
            const char *p =
                punctuation[next_random() % (sizeof(punctuation) / sizeof(*punctuation))];
            size_t k = strlen(p);
            memmove(buf + at + k, buf + at, n - at);
            memcpy(buf + at, p, k);
            n += k;
            break;
        }
        case 2: /* delete a span */
            if (n) {
                size_t k = 1 + (size_t)(next_random() % 8);
                if (at + k > n)
                    k = n - at;
                memmove(buf + at, buf + at + k, n - at - k);
                n -= k;
            }
            break;
        default: { /* duplicate a span (duplicate keys, repeated blocks) */
            size_t k = 1 + (size_t)(next_random() % 40);
            if (at + k > n)
                k = n - at;
            memmove(buf + at + k, buf + at, n - at);
            n += k;
            break;
        }
        }
        check_one(buf, n);
    }
    free(buf);
    free(orig);
}

static int yaml_only(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 5 && strcmp(d->d_name + n - 5, ".yaml") == 0;
}

static void mutate_dir(const char *dir)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, yaml_only, alphasort);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
        mutate_file(path);
        free(names[i]);
    }
    free(names);
}

static void test_config_damaged_input_is_refused_with_a_location(void **state)
{
    (void)state;
    mutate_dir(getenv("SBX_EXAMPLES_DIR"));
    mutate_dir(getenv("SBX_CONFIG_BAD_DIR"));
    /* the mutations really reached both outcomes */
    assert_true(refused > 0);
    assert_true(checked - refused > 0);
}

int main(void)
{
    config_test_register_providers();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_damaged_input_is_refused_with_a_location),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
