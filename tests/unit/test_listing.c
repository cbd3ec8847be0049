/* test_listing.c - core/listing.c: a ListFiles answer in one form whichever provider gave it
 * (names, whole paths, paths with trailing slashes), and entries that name no file of the
 * listed directory (empty, ".", "..", repeated: what a hostile sandbox can answer) left out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/listing.h"

static sbx_result *listing(const char *const *paths, size_t n)
{
    sbx_result *r = sbx_result_new();
    assert_non_null(r);
    for (size_t i = 0; i < n; i++) {
        sbx_file *f = sbx_file_new();
        assert_non_null(f);
        if (paths[i] != NULL)
            assert_true(sbx_set_string(&f->path, paths[i]));
        else
            f->path = NULL;
        f->size = i; /* which entry it was */
        assert_true(sbx_result_add_file(r, f));
    }
    return r;
}

static void expect(const sbx_result *r, const char *const *want, size_t n)
{
    assert_int_equal(r->n_files, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(r->files[i]->path, want[i]);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void names_and_whole_paths_give_the_same_listing(void **state)
{
    (void)state;
    static const char *const names[] = {"b", "a", "sub"};
    static const char *const whole[] = {"/w/tree/sub/", "/w/tree/b", "/w/tree/a"};
    static const char *const want[] = {"/w/tree/a", "/w/tree/b", "/w/tree/sub"};
    for (int form = 0; form < 2; form++) {
        sbx_result *r = form == 0 ? listing(names, N(names)) : listing(whole, N(whole));
        assert_int_equal(sbx_listing_normalize("/w/tree/", r), 0);
        expect(r, want, N(want));
        sbx_message_free(&r->base);
    }
}

static void the_listed_path_is_kept_as_asked(void **state)
{
    (void)state;
    static const char *const in[] = {"/home/user/x"};
    static const char *const dot[] = {"./x"}, *const root[] = {"/x"}, *const rel[] = {"d/x"};
    struct {
        const char *dir;
        const char *const *want;
    } cases[] = {{".", dot}, {"/", root}, {"//", root}, {"d//", rel}};
    for (size_t i = 0; i < N(cases); i++) {
        sbx_result *r = listing(in, N(in));
        assert_int_equal(sbx_listing_normalize(cases[i].dir, r), 0);
        expect(r, cases[i].want, 1);
        sbx_message_free(&r->base);
    }
}

static void entries_naming_no_file_of_the_directory_are_left_out(void **state)
{
    (void)state;
    static const char *const in[] = {"..",  "/w/..", "x", ".",    "/w/.", "",
                                     "///", NULL,    "y", "/w/x", "/w/x/"};
    static const char *const want[] = {"/w/x", "/w/y"};
    sbx_result *r = listing(in, N(in));
    /* 7 without a name, and x twice more */
    assert_int_equal(sbx_listing_normalize("/w", r), 9);
    expect(r, want, N(want));
    assert_int_equal(r->files[0]->size, 2); /* the first x the provider gave is the one kept */
    sbx_message_free(&r->base);
}

static void an_empty_listing_stays_empty(void **state)
{
    (void)state;
    sbx_result *r = sbx_result_new();
    assert_non_null(r);
    assert_int_equal(sbx_listing_normalize("/w", r), 0);
    assert_int_equal(r->n_files, 0);
    sbx_message_free(&r->base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_and_whole_paths_give_the_same_listing),
        cmocka_unit_test(the_listed_path_is_kept_as_asked),
        cmocka_unit_test(entries_naming_no_file_of_the_directory_are_left_out),
        cmocka_unit_test(an_empty_listing_stays_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
