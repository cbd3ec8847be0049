/* test_strbuf.c - core/strbuf.c: appends across growth, printf in place and after growing,
 * POSIX shell quoting (a quote inside, an empty word, a NUL-free binary byte), take of an empty
 * buffer, an allocation failure (a reserve beyond memory) that makes take return NULL, and the
 * shell-name rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"

static void test_strbuf_appends_across_growth(void **state)
{
    (void)state;
    sbx_strbuf b = {0};
    for (int i = 0; i < 1000; i++)
        sbx_strbuf_puts(&b, "abc");
    sbx_strbuf_putc(&b, '!');
    assert_int_equal(b.len, 3001);
    assert_int_equal(b.p[3000], '!');
    assert_int_equal(b.p[3001], '\0');
    assert_false(b.oom);
    char *s = sbx_strbuf_take(&b);
    assert_int_equal(strlen(s), 3001);
    assert_null(b.p);
    assert_int_equal(b.len, 0);
    free(s);
}

static void test_strbuf_printf_in_place_and_after_growing(void **state)
{
    (void)state;
    sbx_strbuf b = {0};
    sbx_strbuf_printf(&b, "%s=%d;", "x", 42); /* nothing allocated yet */
    assert_string_equal(b.p, "x=42;");
    char big[1000];
    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    sbx_strbuf_printf(&b, "[%s]", big); /* beyond the first 256 bytes */
    assert_int_equal(b.len, 5 + 1001);
    assert_int_equal(b.p[b.len - 1], ']');
    assert_int_equal(b.p[b.len], '\0');
    sbx_strbuf_printf(&b, "%c", 'z'); /* fits the room left */
    assert_int_equal(b.p[b.len - 1], 'z');
    sbx_strbuf_free(&b);
    assert_null(b.p);
}

static void test_strbuf_shell_quote(void **state)
{
    (void)state;
    sbx_strbuf b = {0};
    const char *word = "it's $(x) `y`";
    sbx_strbuf_shell_quote(&b, word, strlen(word));
    sbx_strbuf_putc(&b, ' ');
    sbx_strbuf_shell_quote(&b, "", 0);
    sbx_strbuf_putc(&b, ' ');
    sbx_strbuf_shell_quote(&b, "''", 2);
    assert_string_equal(b.p, "'it'\\''s $(x) `y`' '' ''\\'''\\'''");
    sbx_strbuf_free(&b);
}

static void test_strbuf_take_of_nothing_is_empty(void **state)
{
    (void)state;
    sbx_strbuf b = {0};
    char *s = sbx_strbuf_take(&b);
    assert_non_null(s);
    assert_string_equal(s, "");
    free(s);
}

static void test_strbuf_failed_allocation_is_remembered(void **state)
{
    (void)state;
    sbx_strbuf b = {0};
    sbx_strbuf_puts(&b, "kept");
    assert_false(sbx_strbuf_reserve(&b, SIZE_MAX - 8));
    assert_true(b.oom);
    sbx_strbuf_puts(&b, " lost"); /* ignored: the text is already incomplete */
    sbx_strbuf_printf(&b, "%d", 7);
    assert_string_equal(b.p, "kept");
    assert_null(sbx_strbuf_take(&b)); /* never a cut text as if it were whole */
    assert_null(b.p);
    assert_false(b.oom); /* empty and usable again */
    sbx_strbuf_puts(&b, "again");
    assert_string_equal(b.p, "again");
    sbx_strbuf_free(&b);
}

static void test_shell_names(void **state)
{
    (void)state;
    assert_true(sbx_shell_name_ok("PATH"));
    assert_true(sbx_shell_name_ok("_x1"));
    assert_false(sbx_shell_name_ok("1X"));
    assert_false(sbx_shell_name_ok("A-B"));
    assert_false(sbx_shell_name_ok("A=B"));
    assert_false(sbx_shell_name_ok("A B"));
    assert_false(sbx_shell_name_ok(""));
    assert_false(sbx_shell_name_ok(NULL));
}

/* The ", "-separated lists of names in error messages: joined in order, and a list longer than
 * its buffer is cut, still terminated, never written past the end. */
static void test_list_add_joins_and_cuts(void **state)
{
    (void)state;
    char list[32] = "";
    sbx_list_add(list, sizeof list, "alpha");
    assert_string_equal(list, "alpha");
    sbx_list_add(list, sizeof list, "beta");
    sbx_list_add(list, sizeof list, "gamma");
    assert_string_equal(list, "alpha, beta, gamma");
    char small[12];
    memset(small, 'X', sizeof small);
    small[0] = '\0';
    char guard = small[sizeof small - 1];
    for (int i = 0; i < 5; i++)
        sbx_list_add(small, sizeof small - 1, "name");
    assert_string_equal(small, "name, name");
    assert_int_equal(small[sizeof small - 1], guard); /* the byte past cap is untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strbuf_appends_across_growth),
        cmocka_unit_test(test_strbuf_printf_in_place_and_after_growing),
        cmocka_unit_test(test_strbuf_shell_quote),
        cmocka_unit_test(test_strbuf_take_of_nothing_is_empty),
        cmocka_unit_test(test_strbuf_failed_allocation_is_remembered),
        cmocka_unit_test(test_shell_names),
        cmocka_unit_test(test_list_add_joins_and_cuts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
