/*
 * test_repubsel.c - the selection of `outboxd republish` (repubsel.h): its
 * options (what is taken, what is refused and why) and the statements it
 * builds (conditions ANDed, parameters numbered in order, the row order).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repubsel.h"

static struct repub_options O;
static char err[512];

static void setup(void) { memset(&O, 0, sizeof(O)); }
static void teardown(void) { repub_options_free(&O); }

/* Parses the NULL-terminated words as republish's options: 0 when every
 * one was taken and the result checks, else -1 (err says why), or -2 when
 * a word is not one of republish's. */
static int parse(const char *const *words)
{
    char *argv[32];
    int argc = 0;
    while (words[argc]) {
        argv[argc] = (char *)words[argc];
        argc++;
    }
    for (int i = 0; i < argc; i++) {
        int r = repub_option(&O, argc, argv, &i, err, sizeof(err));
        if (r == 0) return -2;
        if (r < 0) return -1;
    }
    return repub_options_check(&O, err, sizeof(err));
}

START_TEST(test_ids_repeatable_and_comma_lists)
{
    const char *w[] = {"--event-id", "a, b", "--event-id", "c", NULL};
    ck_assert_int_eq(parse(w), 0);
    ck_assert_uint_eq(O.nids, 3);
    ck_assert_str_eq(O.ids[0], "a");
    ck_assert_str_eq(O.ids[1], "b");
    ck_assert_str_eq(O.ids[2], "c");
    ck_assert(!O.dry_run);
}
END_TEST

START_TEST(test_empty_id_refused)
{
    const char *w[] = {"--event-id", "a,,b", NULL};
    ck_assert_int_eq(parse(w), -1);
    ck_assert_ptr_nonnull(strstr(err, "empty event id"));
}
END_TEST

START_TEST(test_aggregate_split_at_first_colon)
{
    const char *w[] = {"--aggregate", "Order:urn:42", "--dry-run", NULL};
    ck_assert_int_eq(parse(w), 0);
    ck_assert_str_eq(O.agg_type, "Order");
    ck_assert_str_eq(O.agg_id, "urn:42");
    ck_assert(O.dry_run);
}
END_TEST

START_TEST(test_outbox_section)
{
    const char *w[] = {"--outbox", "orders", "--event-id", "a", NULL};
    ck_assert_int_eq(parse(w), 0);
    ck_assert_str_eq(O.outbox, "orders");
    const char *twice[] = {"--outbox", "a", "--outbox", "b", "--event-id", "a", NULL};
    teardown();
    setup();
    ck_assert_int_eq(parse(twice), -1);
    ck_assert_ptr_nonnull(strstr(err, "--outbox given twice"));
}
END_TEST

START_TEST(test_aggregate_two_options)
{
    const char *w[] = {"--aggregate-type", "a:b", "--aggregate-id", "7", NULL};
    ck_assert_int_eq(parse(w), 0);
    ck_assert_str_eq(O.agg_type, "a:b");
    ck_assert_str_eq(O.agg_id, "7");
}
END_TEST

START_TEST(test_bad_selections_refused)
{
    static const char *const bad[][5] = {
        {NULL},                                   /* nothing selected */
        {"--aggregate", "Order", NULL},           /* no ':' */
        {"--aggregate", ":42", NULL},             /* no type */
        {"--aggregate", "Order:", NULL},          /* no id */
        {"--aggregate-type", "Order", NULL},      /* half an aggregate */
        {"--aggregate-id", "42", NULL},           /* the other half */
        {"--until", "2026-12-03", NULL},          /* no --since */
        {"--since", "x", "--since", "y", NULL},   /* twice */
        {"--since", "", NULL},                    /* empty */
        {"--event-id", NULL},                     /* no value */
        {"--aggregate", "a:1", "--aggregate", "b:2", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setup();
        err[0] = '\0';
        ck_assert_msg(parse(bad[i]) == -1, "case %zu accepted", i);
        ck_assert_msg(err[0] != '\0', "case %zu: no reason", i);
        teardown();
    }
}
END_TEST

START_TEST(test_other_words_not_taken)
{
    const char *w[] = {"-c", "x.ini", NULL};
    ck_assert_int_eq(parse(w), -2);
}
END_TEST

/* ---- statements ---- */

static struct outbox_map M;

static void map_setup(void)
{
    setup();
    const char *cols[OC__COUNT] = {"id", "agg type", "aggregate_id",
                                   "aggregate_version", "event_type", "payload"};
    ck_assert_int_eq(outbox_map_init(&M, "app.Out\"box", cols, "t", err, sizeof(err)), 0);
}

static void map_teardown(void)
{
    outbox_map_free(&M);
    teardown();
}

START_TEST(test_sql_all_selections_anded)
{
    const char *w[] = {"--event-id", "a,b\"c", "--aggregate", "Order:42", "--since", "S",
                       "--until", "U", NULL};
    ck_assert_int_eq(parse(w), 0);
    struct repub_table t = {.id_type = "uuid", .has_time_column = true, .has_version = true};
    struct repub_sql q;
    ck_assert_int_eq(repub_sql_build(&M, &O, "created_at", &t, &q, err, sizeof(err)), 0);
    const char *where =
        "WHERE true AND \"id\" = ANY($1::uuid[]) AND \"agg type\" = $2 AND \"aggregate_id\" = $3 "
        "AND \"created_at\" >= $4::timestamptz AND \"created_at\" < $5::timestamptz";
    char want[1024];
    snprintf(want, sizeof(want),
             "SELECT * FROM \"app\".\"Out\"\"box\" %s ORDER BY \"aggregate_version\" NULLS "
             "FIRST, \"created_at\" NULLS FIRST, \"id\"",
             where);
    ck_assert_str_eq(q.select, want);
    snprintf(want, sizeof(want), "SELECT count(*) FROM \"app\".\"Out\"\"box\" %s", where);
    ck_assert_str_eq(q.count, want);
    snprintf(want, sizeof(want),
             "SELECT u::text FROM unnest($1::uuid[]) u WHERE u NOT IN (SELECT \"id\" FROM "
             "\"app\".\"Out\"\"box\" %s)",
             where);
    ck_assert_str_eq(q.missing, want);
    ck_assert_int_eq(q.nparams, 5);
    ck_assert_str_eq(q.params[0], "{\"a\",\"b\\\"c\"}");
    ck_assert_str_eq(q.params[1], "Order");
    ck_assert_str_eq(q.params[2], "42");
    ck_assert_str_eq(q.params[3], "S");
    ck_assert_str_eq(q.params[4], "U");
    repub_sql_free(&q);
}
END_TEST

START_TEST(test_sql_commit_order)
{
    const char *w[] = {"--since", "S", NULL};
    ck_assert_int_eq(parse(w), 0);
    struct repub_table t = {.id_type = "text", .commit_ts = true, .has_time_column = true,
                            .has_version = true};
    struct repub_sql q;
    ck_assert_int_eq(repub_sql_build(&M, &O, "created_at", &t, &q, err, sizeof(err)), 0);
    /* no aggregate selected: no version first; commit order */
    ck_assert_str_eq(q.select,
                     "SELECT * FROM \"app\".\"Out\"\"box\" WHERE true AND \"created_at\" >= "
                     "$1::timestamptz ORDER BY pg_catalog.pg_xact_commit_timestamp(xmin) NULLS "
                     "FIRST, xmin::text::bigint, ctid");
    ck_assert_ptr_null(q.missing);
    ck_assert_int_eq(q.nparams, 1);
    repub_sql_free(&q);
}
END_TEST

/* With the order column, a transaction's rows in insert order: after the
 * commit time (or the time column), by it; never by ctid or event_id
 * first (a UUID event_id is random within a transaction). */
START_TEST(test_sql_order_column)
{
    const char *w[] = {"--since", "S", NULL};
    ck_assert_int_eq(parse(w), 0);
    struct repub_table t = {.id_type = "uuid", .commit_ts = true, .has_time_column = true,
                            .order_column = "seq"};
    struct repub_sql q;
    ck_assert_int_eq(repub_sql_build(&M, &O, "created_at", &t, &q, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(q.select, " ORDER BY "
                                           "pg_catalog.pg_xact_commit_timestamp(xmin) NULLS "
                                           "FIRST, \"seq\" NULLS FIRST, xmin::text::bigint, "
                                           "ctid"));
    repub_sql_free(&q);
    t.commit_ts = false;
    ck_assert_int_eq(repub_sql_build(&M, &O, "created_at", &t, &q, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(q.select, " ORDER BY \"created_at\" NULLS FIRST, "
                                           "\"seq\" NULLS FIRST, \"id\""));
    repub_sql_free(&q);
    t.has_time_column = false;
    repub_options_free(&O);
    const char *a[] = {"--aggregate", "A:1", NULL};
    ck_assert_int_eq(parse(a), 0);
    ck_assert_int_eq(repub_sql_build(&M, &O, "", &t, &q, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(strstr(q.select, " ORDER BY \"seq\" NULLS FIRST, \"id\""));
    repub_sql_free(&q);
}
END_TEST

START_TEST(test_sql_no_time_column)
{
    const char *w[] = {"--aggregate", "A:1", NULL};
    ck_assert_int_eq(parse(w), 0);
    struct repub_table t = {.id_type = "text"};
    struct repub_sql q;
    ck_assert_int_eq(repub_sql_build(&M, &O, "", &t, &q, err, sizeof(err)), 0);
    /* no version column, no time column, no commit timestamps: event id */
    ck_assert_str_eq(q.select, "SELECT * FROM \"app\".\"Out\"\"box\" WHERE true AND \"agg "
                               "type\" = $1 AND \"aggregate_id\" = $2 ORDER BY \"id\"");
    repub_sql_free(&q);
}
END_TEST

START_TEST(test_sql_since_needs_the_column)
{
    const char *w[] = {"--since", "S", NULL};
    ck_assert_int_eq(parse(w), 0);
    struct repub_table t = {.id_type = "uuid", .commit_ts = true};
    struct repub_sql q;
    ck_assert_int_eq(repub_sql_build(&M, &O, "created_at", &t, &q, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "no column \"created_at\" ([outbox] repair_column)"));
    repub_sql_free(&q);
}
END_TEST

START_TEST(test_describe)
{
    const char *w[] = {"--event-id", "a,b", "--aggregate", "O:1", "--since", "S", "--until",
                       "U", NULL};
    ck_assert_int_eq(parse(w), 0);
    char out[256];
    ck_assert_str_eq(repub_describe(&O, "created_at", out, sizeof(out)),
                     "event_id in (a, b) and aggregate O:1 and created_at >= 'S' and "
                     "created_at < 'U'");
    char small[12];
    repub_describe(&O, "created_at", small, sizeof(small)); /* truncated, terminated */
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("repubsel");
    TCase *tc = tcase_create("options");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_ids_repeatable_and_comma_lists);
    tcase_add_test(tc, test_empty_id_refused);
    tcase_add_test(tc, test_aggregate_split_at_first_colon);
    tcase_add_test(tc, test_aggregate_two_options);
    tcase_add_test(tc, test_outbox_section);
    tcase_add_test(tc, test_bad_selections_refused);
    tcase_add_test(tc, test_other_words_not_taken);
    suite_add_tcase(s, tc);
    TCase *sq = tcase_create("statements");
    tcase_add_checked_fixture(sq, map_setup, map_teardown);
    tcase_add_test(sq, test_sql_all_selections_anded);
    tcase_add_test(sq, test_sql_commit_order);
    tcase_add_test(sq, test_sql_order_column);
    tcase_add_test(sq, test_sql_no_time_column);
    tcase_add_test(sq, test_sql_since_needs_the_column);
    tcase_add_test(sq, test_describe);
    suite_add_tcase(s, sq);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
