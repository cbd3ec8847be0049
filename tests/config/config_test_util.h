/* config_test_util.h - small helpers for the config tests: load a YAML string expecting success
 * or a CONFIG error containing a fragment, and write temporary files. Header-only (static). */
#ifndef SBX_TESTS_CONFIG_UTIL_H
#define SBX_TESTS_CONFIG_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sbx/config.h"

static inline sbx_config *load_ok(const char *yaml)
{
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    sbx_status st = sbx_config_load_string(yaml, strlen(yaml), "test.yaml", &cfg, &err);
    if (st != SBX_OK)
        fprintf(stderr, "unexpected error: %s\n", err.message);
    assert_int_equal(st, SBX_OK);
    assert_non_null(cfg);
    return cfg;
}

/* Asserts a CONFIG error whose message contains every fragment (NULL-terminated list). */
static inline void load_fails(const char *yaml, ...)
{
    sbx_config *cfg = (sbx_config *)0x1;
    sbx_error err = {0};
    sbx_status st = sbx_config_load_string(yaml, strlen(yaml), "test.yaml", &cfg, &err);
    if (st == SBX_OK)
        sbx_config_free(cfg);
    assert_int_equal(st, SBX_E_CONFIG);
    assert_null(cfg);
    va_list ap;
    va_start(ap, yaml);
    for (const char *f = va_arg(ap, const char *); f != NULL; f = va_arg(ap, const char *)) {
        if (strstr(err.message, f) == NULL)
            fprintf(stderr, "message lacks \"%s\": %s\n", f, err.message);
        assert_non_null(strstr(err.message, f));
    }
    va_end(ap);
}

/* A fresh private directory for a test; the caller removes what it creates. */
static inline void make_temp_dir(char *out, size_t size)
{
    snprintf(out, size, "%s/sbx-config-test.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(out));
}

static inline void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

#endif
