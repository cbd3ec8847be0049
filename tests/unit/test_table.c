/* test_table.c - the one hash table of libsbx's maps (core/table.h): entries whose hashes share
 * a bucket are each found by their own hash and key, a link taken out from the head, middle or
 * tail of a chain leaves the others in place, and SBX_TABLE_EACH visits every entry once, also
 * when its body frees them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/table.h"

#define BUCKETS 8
#define ENTRIES 6

typedef struct item {
    int key;
    sbx_link link; /* not first: SBX_ENTRY subtracts its offset */
} item;

static item *find(const sbx_table *t, uint64_t hash, int key)
{
    for (sbx_link *l = sbx_table_first(t, hash); l != NULL; l = l->next) {
        item *it = SBX_ENTRY(l, item, link);
        if (l->hash == hash && it->key == key)
            return it;
    }
    return NULL;
}

/* Hashes 3, 11, 19, ... all fall in bucket 3 of 8; the key tells entries apart. */
static uint64_t colliding(int i)
{
    return 3 + (uint64_t)i * BUCKETS;
}

static void test_table_colliding_entries_are_found_and_taken_out_one_by_one(void **state)
{
    (void)state;
    sbx_link *buckets[BUCKETS] = {0};
    sbx_table t;
    sbx_table_init(&t, buckets, BUCKETS);
    item items[ENTRIES];
    for (int i = 0; i < ENTRIES; i++) {
        items[i].key = i;
        sbx_table_add(&t, &items[i].link, colliding(i));
        assert_int_equal(sbx_table_slot(&t, colliding(i)), 3);
    }
    for (int i = 0; i < ENTRIES; i++)
        assert_ptr_equal(find(&t, colliding(i), i), &items[i]);
    assert_null(find(&t, colliding(1), 2)); /* the hash of one, the key of another */
    assert_null(find(&t, 4, 0));            /* an empty bucket */
    /* out of the chain's head (the last added), its middle and its tail (the first added) */
    int out[] = {ENTRIES - 1, 2, 0};
    for (size_t k = 0; k < sizeof out / sizeof out[0]; k++) {
        sbx_table_del(&t, &items[out[k]].link);
        assert_null(find(&t, colliding(out[k]), out[k]));
    }
    for (int i = 0; i < ENTRIES; i++)
        if (i != 0 && i != 2 && i != ENTRIES - 1)
            assert_ptr_equal(find(&t, colliding(i), i), &items[i]);
}

static void test_table_each_visits_every_entry_once_and_may_free_it(void **state)
{
    (void)state;
    sbx_link *buckets[BUCKETS] = {0};
    sbx_table t;
    sbx_table_init(&t, buckets, BUCKETS);
    int seen[ENTRIES * 2] = {0};
    for (int i = 0; i < ENTRIES * 2; i++) {
        item *it = malloc(sizeof *it);
        assert_non_null(it);
        it->key = i;
        sbx_table_add(&t, &it->link, (uint64_t)i * 5); /* some buckets shared, some empty */
    }
    int visited = 0;
    SBX_TABLE_EACH(&t, l)
    {
        item *it = SBX_ENTRY(l, item, link);
        seen[it->key]++;
        visited++;
        free(it); /* as a map's destroy does: the next link was read before */
    }
    assert_int_equal(visited, ENTRIES * 2);
    for (int i = 0; i < ENTRIES * 2; i++)
        assert_int_equal(seen[i], 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_colliding_entries_are_found_and_taken_out_one_by_one),
        cmocka_unit_test(test_table_each_visits_every_entry_once_and_may_free_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
