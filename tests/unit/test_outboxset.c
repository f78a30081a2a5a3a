/*
 * test_outboxset.c - the outbox tables of one relay (outboxset.h): which
 * table a relation is, through the per-layout cache, with one table and
 * with several; the duplicate check; the table lists for SQL.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "outboxset.h"
#include "relcache.h"

static const char *const columns[OC__COUNT] = {"event_id", "aggregate_type", "aggregate_id",
                                               "aggregate_version", "event_type", "payload"};

static void add(struct outbox_set *s, const char *table, const char *name)
{
    struct outbox_map m;
    char err[256];
    ck_assert_int_eq(outbox_map_init(&m, table, columns, "t", err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_set_add(s, &m, name), 0);
}

START_TEST(test_one_table)
{
    struct outbox_set s;
    outbox_set_init(&s);
    add(&s, "app.events", NULL);
    struct relation *a = relation_new(1, "app", "events", 'd', 0);
    struct relation *b = relation_new(2, "app", "other", 'd', 0);
    struct relation *c = relation_new(3, "public", "events", 'd', 0);
    ck_assert_int_eq(outbox_set_find(&s, a), 0);
    ck_assert_int_eq(outbox_set_find(&s, b), -1);
    ck_assert_int_eq(outbox_set_find(&s, c), -1);
    ck_assert_int_eq(outbox_set_find(&s, a), 0);
    ck_assert_ptr_null(s.names[0]);
    relation_free(a);
    relation_free(b);
    relation_free(c);
    outbox_set_free(&s);
}
END_TEST

/* Interleaved relations of several tables, more layouts than the cache
 * holds, a relation without a layout id, and a new layout of a table
 * (after ALTER TABLE) whose layout id is new. */
START_TEST(test_several_tables)
{
    struct outbox_set s;
    outbox_set_init(&s);
    add(&s, "app.orders", "orders");
    add(&s, "app.billing", "billing");
    add(&s, "audit.orders", "audit");
    struct relation *rel[3 * OUTBOX_SET_SEEN];
    const char *nsp[] = {"app", "app", "audit", "app"};
    const char *name[] = {"orders", "billing", "orders", "customers"};
    const int want[] = {0, 1, 2, -1};
    for (int i = 0; i < 3 * OUTBOX_SET_SEEN; i++)
        ck_assert_ptr_nonnull(rel[i] = relation_new((uint32_t)i, nsp[i % 4], name[i % 4], 'd', 0));
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 3 * OUTBOX_SET_SEEN; i++)
            ck_assert_int_eq(outbox_set_find(&s, rel[i]), want[i % 4]);
    /* a hand-built relation (layout id 0) is looked up by name each time */
    struct relation hand = {.nspname = "app", .relname = "billing"};
    ck_assert_int_eq(outbox_set_find(&s, &hand), 1);
    hand.relname = "orders";
    ck_assert_int_eq(outbox_set_find(&s, &hand), 0);
    for (int i = 0; i < 3 * OUTBOX_SET_SEEN; i++)
        relation_free(rel[i]);
    size_t other;
    ck_assert_int_eq(outbox_set_duplicate(&s, &other), -1);
    add(&s, "audit.orders", "again");
    ck_assert_int_eq(outbox_set_duplicate(&s, &other), 3);
    ck_assert_uint_eq(other, 2);
    outbox_set_free(&s);
}
END_TEST

START_TEST(test_lists)
{
    struct outbox_set s;
    outbox_set_init(&s);
    add(&s, "app.orders", "orders");
    add(&s, "public.we\"ird\\x", "weird");
    char *t = outbox_set_tables(&s), *sch = outbox_set_array(&s, false),
         *tab = outbox_set_array(&s, true);
    ck_assert_str_eq(t, "app.orders, public.we\"ird\\x");
    ck_assert_str_eq(sch, "{\"app\",\"public\"}");
    ck_assert_str_eq(tab, "{\"orders\",\"we\\\"ird\\\\x\"}");
    free(t);
    free(sch);
    free(tab);
    outbox_set_free(&s);
}
END_TEST

/* The fingerprint of what the relay numbers (outbox_set_fingerprint()):
 * the same set in any order gives the same value; a table or a message
 * prefix more, fewer or renamed gives another. */
START_TEST(test_fingerprint)
{
    struct outbox_set a, b, c;
    char err[256];
    outbox_set_init(&a);
    outbox_set_init(&b);
    outbox_set_init(&c);
    add(&a, "app.orders", "orders");
    add(&a, "app.billing", "billing");
    add(&b, "app.billing", "billing");
    add(&b, "app.orders", "orders");
    ck_assert_uint_eq(outbox_set_fingerprint(&a), outbox_set_fingerprint(&b));
    ck_assert_uint_ne(outbox_set_fingerprint(&a), 0);
    add(&c, "app.orders", "orders");
    uint64_t one = outbox_set_fingerprint(&c);
    ck_assert_uint_ne(one, outbox_set_fingerprint(&a)); /* [outbox.billing] removed */
    ck_assert_int_eq(outbox_map_set_message_prefix(&c.maps[0], "orders", err, sizeof(err)), 0);
    uint64_t with_prefix = outbox_set_fingerprint(&c);
    ck_assert_uint_ne(with_prefix, one);
    ck_assert_int_eq(outbox_map_set_message_prefix(&c.maps[0], "order", err, sizeof(err)), 0);
    ck_assert_uint_ne(outbox_set_fingerprint(&c), with_prefix); /* renamed */
    ck_assert_uint_ne(outbox_set_fingerprint(&c), one);
    outbox_set_free(&a);
    outbox_set_free(&b);
    outbox_set_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outboxset");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_one_table);
    tcase_add_test(tc, test_several_tables);
    tcase_add_test(tc, test_lists);
    tcase_add_test(tc, test_fingerprint);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
