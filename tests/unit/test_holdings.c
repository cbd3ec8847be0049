/* test_holdings.c - each principal's count of live sandboxes (core/holdings.c): requests of
 * one principal racing to make sandboxes get at most its limit of places between them, a
 * settled failure or a drop gives a place back, principals do not share places, and the check
 * at the limit lists a principal's sandboxes at most once per HOLDINGS_CHECK_EVERY_MS; out of
 * memory (strdup failing, through the linker's --wrap), nothing is counted that was not made
 * and no place is taken back from another request. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/holdings.h"

/* The linker sends holdings.c's strdup here (-Wl,--wrap=strdup, tests/unit/CMakeLists.txt):
 * while strdup_fails is set, every copy fails as on ENOMEM. */
char *__real_strdup(const char *s);
char *__wrap_strdup(const char *s);
static volatile int strdup_fails;

char *__wrap_strdup(const char *s)
{
    return strdup_fails ? NULL : __real_strdup(s);
}

#define RACERS 8
#define ROUNDS 2000

typedef struct racer {
    holdings *h;
    int got;
} racer;

/* Reserves and gives back, over and over: a place is never held by more than the limit. */
static void *race(void *arg)
{
    racer *r = arg;
    for (int i = 0; i < ROUNDS; i++) {
        size_t held;
        holding_place pl;
        if (holdings_reserve(r->h, "tenant-a", &held, &pl)) {
            r->got++;
            holdings_settle(r->h, "tenant-a", pl, 0, NULL);
        }
    }
    return NULL;
}

static void test_holdings_racing_reservations_never_pass_the_limit(void **state)
{
    (void)state;
    holdings *h = holdings_new(3);
    /* two places taken for good: the racers share one */
    size_t held;
    holding_place pl;
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl));
    holdings_settle(h, "tenant-a", pl, 0, "sb-1");
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl));
    holdings_settle(h, "tenant-a", pl, 0, "sb-2");
    racer r[RACERS];
    pthread_t th[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer){.h = h};
        assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    int got = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(th[i], NULL);
        got += r[i].got;
    }
    assert_true(got > 0);
    /* every racer's place was given back: one is free, and only one */
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl));
    assert_int_equal(held, 2);
    assert_false(holdings_reserve(h, "tenant-a", &held, &pl));
    assert_int_equal(held, 3);
    holdings_settle(h, "tenant-a", pl, 0, NULL);
    holdings_free(h);
}

static void test_holdings_places_are_per_principal_and_dropped_by_slot_and_id(void **state)
{
    (void)state;
    holdings *h = holdings_new(1);
    size_t held;
    holding_place pl;
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl));
    holdings_settle(h, "tenant-a", pl, 0, "sb-1");
    assert_false(holdings_reserve(h, "tenant-a", &held, &pl));
    assert_true(holdings_reserve(h, "tenant-b", &held, &pl)); /* another principal's own place */
    holdings_settle(h, "tenant-b", pl, 0, "sb-1");
    /* a drop names the principal, the profile slot and the id: another slot's or principal's
     * sandbox of the same id is not it */
    holdings_drop(h, "tenant-a", 1, "sb-1");
    holdings_drop(h, "tenant-c", 0, "sb-1");
    assert_false(holdings_reserve(h, "tenant-a", &held, &pl));
    holdings_drop(h, "tenant-a", 0, "sb-1");
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl));
    assert_int_equal(held, 0);
    holdings_free(h); /* frees what is still held and reserved */
}

static void test_holdings_check_lists_at_most_once_a_second(void **state)
{
    (void)state;
    holdings *h = holdings_new(2);
    holding *list;
    assert_int_equal(holdings_due_check(h, "tenant-a", 5000, &list), 0); /* holds none */
    size_t held;
    holding_place pl;
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl));
    holdings_settle(h, "tenant-a", pl, 3, "sb-1");
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl)); /* being made: not listed */
    assert_int_equal(holdings_due_check(h, "tenant-a", 5000, &list), 1);
    assert_string_equal(list[0].sandbox_id, "sb-1");
    assert_int_equal(list[0].slot, 3);
    holdings_list_free(list, 1);
    assert_int_equal(holdings_due_check(h, "tenant-a", 5000 + HOLDINGS_CHECK_EVERY_MS - 1, &list),
                     0);
    assert_null(list);
    assert_int_equal(holdings_due_check(h, "tenant-a", 5000 + HOLDINGS_CHECK_EVERY_MS, &list), 1);
    holdings_list_free(list, 1);
    holdings_free(h);
}

static void test_holdings_out_of_memory_counts_nothing_it_did_not_record(void **state)
{
    (void)state;
    holdings *h = holdings_new(1);
    size_t held;
    holding_place pl;
    /* no record for the principal: the place is not counted, and its settle takes nothing */
    strdup_fails = 1;
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl));
    assert_false(pl.counted);
    strdup_fails = 0;
    holding_place other;
    assert_true(holdings_reserve(h, "tenant-a", &held, &other)); /* a request meanwhile */
    assert_true(other.counted);
    holdings_settle(h, "tenant-a", pl, 0, "sb-uncounted");
    holding_place third;
    assert_false(holdings_reserve(h, "tenant-a", &held, &third)); /* other's place stands */
    assert_int_equal(held, 1);
    /* the sandbox's id cannot be copied: made, but not counted (the engine's shortage is never
     * a tenant's refusal) */
    strdup_fails = 1;
    holdings_settle(h, "tenant-a", other, 0, "sb-1");
    /* a sandbox listed at open is not counted either */
    holdings_add(h, "tenant-b", 0, "sb-2");
    strdup_fails = 0;
    assert_true(holdings_reserve(h, "tenant-a", &held, &pl));
    holdings_settle(h, "tenant-a", pl, 0, NULL);
    assert_true(holdings_reserve(h, "tenant-b", &held, &pl));
    holdings_settle(h, "tenant-b", pl, 0, NULL);
    /* with memory back, a listed sandbox counts once however often it is listed */
    holdings_add(h, "tenant-b", 0, "sb-2");
    holdings_add(h, "tenant-b", 0, "sb-2");
    assert_false(holdings_reserve(h, "tenant-b", &held, &pl));
    assert_int_equal(held, 1);
    holdings_drop(h, "tenant-b", 0, "sb-2");
    assert_true(holdings_reserve(h, "tenant-b", &held, &pl));
    holdings_settle(h, "tenant-b", pl, 0, NULL);
    holdings_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holdings_racing_reservations_never_pass_the_limit),
        cmocka_unit_test(test_holdings_places_are_per_principal_and_dropped_by_slot_and_id),
        cmocka_unit_test(test_holdings_check_lists_at_most_once_a_second),
        cmocka_unit_test(test_holdings_out_of_memory_counts_nothing_it_did_not_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
