/* test_held.c - providers/common/held.c: list_held's pages read to the end and reported only
 * then; a page that fails, a next token that repeats or is too long, and pages that do not end
 * within the bound each fail and report nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/common/held.h"

/* A scripted listing: page k lists sandbox "s<k>" for subject "u<k>" and names next[k] as the
 * next page's token (NULL: the last page); fail_at fails that page. */
typedef struct script {
    const char *next[8];
    int fail_at;
    int pages; /* pages read */
    char tokens[8][32];
} script;

static sbx_status page(void *arg, const char *token, sbx_held_found *found, char **next,
                       sbx_error *err)
{
    script *sc = arg;
    int k = sc->pages++;
    snprintf(sc->tokens[k & 7], sizeof sc->tokens[0], "%s", token);
    if (k == sc->fail_at)
        return sbx_error_set(err, SBX_E_PERMISSION_DENIED, "page %d refused", k);
    char id[16], subject[16];
    snprintf(id, sizeof id, "s%d", k);
    snprintf(subject, sizeof subject, "u%d", k);
    assert_true(sbx_held_add(found, id, subject));
    const char *n = sc->next[k < 8 ? k : 7];
    *next = n != NULL ? strdup(n) : NULL;
    return SBX_OK;
}

typedef struct seen {
    char ids[8][16];
    size_t n;
} seen;

static void held(void *arg, const char *sandbox_id, const char *subject)
{
    seen *s = arg;
    assert_int_equal(subject[0], 'u');
    assert_string_equal(subject + 1, sandbox_id + 1);
    if (s->n < 8)
        snprintf(s->ids[s->n], sizeof s->ids[0], "%s", sandbox_id);
    s->n++;
}

static const sbx_held_pager pager = {
    .provider = "test", .profile = "p", .page_size = 1, .max_pages = 4, .max_token = 8};

static void test_held_pages_are_read_to_the_end_then_reported(void **state)
{
    (void)state;
    script sc = {.next = {"a", "b", NULL}, .fail_at = -1};
    seen s = {0};
    sbx_error err;
    assert_int_equal(sbx_held_list_pages(&pager, page, &sc, held, &s, &err), SBX_OK);
    assert_int_equal(sc.pages, 3);
    assert_string_equal(sc.tokens[0], "");
    assert_string_equal(sc.tokens[1], "a");
    assert_string_equal(sc.tokens[2], "b");
    assert_int_equal(s.n, 3);
    assert_string_equal(s.ids[2], "s2");
}

static void test_held_a_failed_page_reports_nothing(void **state)
{
    (void)state;
    script sc = {.next = {"a", "b", NULL}, .fail_at = 2};
    seen s = {0};
    sbx_error err;
    assert_int_equal(sbx_held_list_pages(&pager, page, &sc, held, &s, &err),
                     SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(err.message, "page 2 refused"));
    assert_int_equal(s.n, 0);
}

static void test_held_a_token_that_repeats_or_is_too_long_fails(void **state)
{
    (void)state;
    script loop = {.next = {"a", "a", NULL}, .fail_at = -1};
    seen s = {0};
    sbx_error err;
    assert_int_equal(sbx_held_list_pages(&pager, page, &loop, held, &s, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "the page just read (a loop)"));
    assert_int_equal(loop.pages, 2);
    script longer = {.next = {"123456789", NULL}, .fail_at = -1};
    assert_int_equal(sbx_held_list_pages(&pager, page, &longer, held, &s, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "too long"));
    assert_int_equal(longer.pages, 1);
    assert_int_equal(s.n, 0);
}

static void test_held_pages_that_do_not_end_fail_at_the_bound(void **state)
{
    (void)state;
    script sc = {.next = {"a", "b", "c", "d", "e", "f", "g", "h"}, .fail_at = -1};
    seen s = {0};
    sbx_error err;
    assert_int_equal(sbx_held_list_pages(&pager, page, &sc, held, &s, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "test: profile 'p': listing its sandboxes did not end "
                                        "after 4 pages of 1"));
    assert_int_equal(sc.pages, 4);
    assert_int_equal(s.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_pages_are_read_to_the_end_then_reported),
        cmocka_unit_test(test_held_a_failed_page_reports_nothing),
        cmocka_unit_test(test_held_a_token_that_repeats_or_is_too_long_fails),
        cmocka_unit_test(test_held_pages_that_do_not_end_fail_at_the_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
