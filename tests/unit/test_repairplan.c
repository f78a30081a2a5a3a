/*
 * test_repairplan.c - the decisions of `outboxd repair` (repairplan.h):
 * when the slot needs no repair, when an operator must decide, where the
 * re-published range starts and what it is compared with, and the SQL.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "repairplan.h"

#define T0 (INT64_C(1796316491) * 1000000) /* 2026-12-03 16:48:11 UTC */
#define MARGIN (INT64_C(60) * 1000000)

static struct offset_state file;
static struct repair_facts F;
static struct repair_plan P;

/* A file of format 4 on database app/slot outboxd/pgoutput; the slot gone;
 * track_commit_timestamp on. */
static void setup(void)
{
    memset(&file, 0, sizeof(file));
    file.format = 4;
    file.has_identity = true;
    file.lsn = 0x16B374D848ULL;
    snprintf(file.system, sizeof(file.system), "7312345678901234567");
    snprintf(file.database, sizeof(file.database), "app");
    snprintf(file.slot, sizeof(file.slot), "outboxd");
    snprintf(file.plugin, sizeof(file.plugin), "pgoutput");
    file.timeline = 1;
    file.commit_time_us = T0;
    F = (struct repair_facts){.file = &file,
                              .offsets_path = "/var/lib/outboxd/outboxd.offset",
                              .slot = "outboxd",
                              .plugin = "pgoutput",
                              .database = "app",
                              .slot_wal_status = "",
                              .track_commit_timestamp = true,
                              .margin_us = MARGIN};
}

static void decide(void) { repair_plan_decide(&F, &P); }

START_TEST(test_dropped_slot_commit_ts)
{
    decide();
    ck_assert_int_eq(P.action, REPAIR_RUN);
    ck_assert(!P.drop_slot);
    ck_assert_int_eq(P.by, REPAIR_BY_COMMIT_TS);
    ck_assert_int_eq(P.boundary_us, T0);
    ck_assert_int_eq(P.from_us, T0 - MARGIN);
    ck_assert(!P.from_since);
}
END_TEST

START_TEST(test_invalidated_slot_is_dropped_first)
{
    F.slot_exists = true;
    F.slot_wal_status = "lost";
    decide();
    ck_assert_int_eq(P.action, REPAIR_RUN);
    ck_assert(P.drop_slot);
}
END_TEST

START_TEST(test_usable_slot_needs_nothing)
{
    static const char *const usable[] = {"reserved", "extended", "unreserved", ""};
    F.slot_exists = true;
    for (size_t i = 0; i < sizeof(usable) / sizeof(usable[0]); i++) {
        F.slot_wal_status = usable[i];
        decide();
        ck_assert_int_eq(P.action, REPAIR_NOT_NEEDED);
        ck_assert(!P.drop_slot);
        ck_assert_ptr_nonnull(strstr(P.message, "usable"));
    }
}
END_TEST

START_TEST(test_active_slot_refused)
{
    /* Even an invalidated one: something still holds it. */
    F.slot_exists = true;
    F.slot_active = true;
    F.slot_active_pid = 4242;
    F.slot_wal_status = "lost";
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
    ck_assert(!P.drop_slot);
    ck_assert_ptr_nonnull(strstr(P.message, "in use by process 4242"));
    /* The daemon at start: another instance holds it, which is no error. */
    F.at_start = true;
    decide();
    ck_assert_int_eq(P.action, REPAIR_NOT_NEEDED);
    ck_assert_ptr_nonnull(strstr(P.message, "waits for the slot"));
}
END_TEST

START_TEST(test_column_when_no_commit_ts)
{
    F.track_commit_timestamp = false;
    F.time_column = "created_at";
    decide();
    ck_assert_int_eq(P.action, REPAIR_RUN);
    ck_assert_int_eq(P.by, REPAIR_BY_COLUMN);
    ck_assert_int_eq(P.from_us, T0 - MARGIN);
    /* commit timestamps win when both are there: they are commit order */
    F.track_commit_timestamp = true;
    decide();
    ck_assert_int_eq(P.by, REPAIR_BY_COMMIT_TS);
}
END_TEST

START_TEST(test_no_time_source_refused)
{
    F.track_commit_timestamp = false;
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
    ck_assert_ptr_nonnull(strstr(P.message, "track_commit_timestamp"));
    ck_assert_ptr_nonnull(strstr(P.message, "repair_column"));
    F.time_column = ""; /* set but empty is not set */
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
}
END_TEST

START_TEST(test_no_commit_time_needs_since)
{
    file.format = 3;
    file.commit_time_us = 0;
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
    ck_assert_ptr_nonnull(strstr(P.message, "--since"));
    ck_assert_ptr_nonnull(strstr(P.message, "older outboxd"));
    F.file = NULL;
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
    ck_assert_ptr_nonnull(strstr(P.message, "no offset file"));
    /* --since answers both */
    F.since_us = T0 - 3600 * INT64_C(1000000);
    decide();
    ck_assert_int_eq(P.action, REPAIR_RUN);
    ck_assert(P.from_since);
    ck_assert_int_eq(P.from_us, F.since_us - MARGIN);
}
END_TEST

START_TEST(test_fresh_start_needs_nothing)
{
    /* The daemon's first start: no slot, no file. */
    F.file = NULL;
    F.at_start = true;
    decide();
    ck_assert_int_eq(P.action, REPAIR_NOT_NEEDED);
    ck_assert_ptr_nonnull(strstr(P.message, "nothing was streamed yet"));
    /* A file says something was streamed: that is a loss to repair. */
    F.file = &file;
    decide();
    ck_assert_int_eq(P.action, REPAIR_RUN);
    /* The command without a file still needs --since. */
    F.file = NULL;
    F.at_start = false;
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
}
END_TEST

START_TEST(test_since_overrides_file)
{
    F.since_us = T0 - 10 * INT64_C(1000000);
    decide();
    ck_assert_int_eq(P.action, REPAIR_RUN);
    ck_assert_int_eq(P.boundary_us, F.since_us);
}
END_TEST

START_TEST(test_other_stream_refused)
{
    snprintf(file.slot, sizeof(file.slot), "other");
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
    ck_assert_ptr_nonnull(strstr(P.message, "slot other"));
    setup();
    snprintf(file.database, sizeof(file.database), "billing");
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
    /* --since does not make another stream's file this one's */
    F.since_us = T0;
    decide();
    ck_assert_int_eq(P.action, REPAIR_REFUSED);
}
END_TEST

START_TEST(test_sql)
{
    struct outbox_map m;
    char err[256];
    const char *cols[OC__COUNT] = {"event_id", "aggregate_type", "aggregate_id",
                                   "aggregate_version", "event_type", "payload"};
    ck_assert_int_eq(outbox_map_init(&m, "app.Out\"box", cols, "t", err, sizeof(err)), 0);
    decide();
    char *s = repair_select_sql(&m, &P, NULL, NULL);
    char *c = repair_count_untimed_sql(&m, &P, NULL);
    ck_assert_str_eq(s, "SELECT (extract(epoch FROM pg_catalog.pg_xact_commit_timestamp(xmin)) "
                        "* 1000000)::bigint AS outboxd_repair_us, xmin::text::bigint AS "
                        "outboxd_repair_xid, * FROM \"app\".\"Out\"\"box\" WHERE "
                        "pg_catalog.pg_xact_commit_timestamp(xmin) >= $1::timestamptz ORDER BY "
                        "pg_catalog.pg_xact_commit_timestamp(xmin), xmin::text::bigint, ctid");
    ck_assert_str_eq(c, "SELECT count(*) FROM \"app\".\"Out\"\"box\" WHERE "
                        "pg_catalog.pg_xact_commit_timestamp(xmin) IS NULL");
    free(s);
    free(c);
    s = repair_stats_sql(&m, &P, NULL);
    ck_assert_str_eq(s, "SELECT count(*), min(pg_catalog.pg_xact_commit_timestamp(xmin))::text, "
                        "max(pg_catalog.pg_xact_commit_timestamp(xmin))::text FROM "
                        "\"app\".\"Out\"\"box\" WHERE "
                        "pg_catalog.pg_xact_commit_timestamp(xmin) >= $1::timestamptz");
    free(s);
    F.track_commit_timestamp = false;
    F.time_column = "created_at";
    decide();
    s = repair_select_sql(&m, &P, F.time_column, "");
    c = repair_count_untimed_sql(&m, &P, F.time_column);
    ck_assert_str_eq(s, "SELECT (extract(epoch FROM \"created_at\") * 1000000)::bigint AS "
                        "outboxd_repair_us, xmin::text::bigint AS outboxd_repair_xid, * FROM "
                        "\"app\".\"Out\"\"box\" WHERE \"created_at\" >= "
                        "$1::timestamptz ORDER BY \"created_at\", xmin::text::bigint, ctid");
    ck_assert_str_eq(c, "SELECT count(*) FROM \"app\".\"Out\"\"box\" WHERE \"created_at\" IS NULL");
    free(s);
    free(c);
    /* with the order column: by it within one time, before xmin and ctid */
    s = repair_select_sql(&m, &P, F.time_column, "seq");
    ck_assert_str_eq(s, "SELECT (extract(epoch FROM \"created_at\") * 1000000)::bigint AS "
                        "outboxd_repair_us, xmin::text::bigint AS outboxd_repair_xid, * FROM "
                        "\"app\".\"Out\"\"box\" WHERE \"created_at\" >= $1::timestamptz "
                        "ORDER BY \"created_at\", \"seq\" NULLS FIRST, xmin::text::bigint, "
                        "ctid");
    free(s);
    F.track_commit_timestamp = true;
    decide();
    s = repair_select_sql(&m, &P, NULL, "Seq No");
    ck_assert_ptr_nonnull(strstr(s, "ORDER BY pg_catalog.pg_xact_commit_timestamp(xmin), "
                                    "\"Seq No\" NULLS FIRST, xmin::text::bigint, ctid"));
    free(s);
    s = repair_txn_order_sql("seq");
    ck_assert_str_eq(s, "\"seq\" NULLS FIRST, xmin::text::bigint, ctid");
    free(s);
    s = repair_txn_order_sql(NULL);
    ck_assert_str_eq(s, "xmin::text::bigint, ctid");
    free(s);
    outbox_map_free(&m);
}
END_TEST

/* A model of an outbox table whose physical order is not its insert
 * order, sorted as the server sorts repair's SELECT (the same terms render
 * its ORDER BY: test_sql). One time (one transaction, commit timestamp
 * T0) holds the rows of transaction 700, whose first row went in inside a
 * released savepoint (xid 701), and whose later rows landed on earlier
 * pages (the free-space map after retention's DELETE and VACUUM); another
 * transaction's rows come at T0 + 1. A model row's insert order is its
 * index in ins[]. */
static const struct repair_rowpos ins[] = {
    /* transaction 700, committed at T0, inserted in this order */
    {T0, true, 1001, 701, 40, 3}, /* in the savepoint: the subtransaction's xid */
    {T0, true, 1002, 700, 40, 4},
    {T0, true, 1004, 700, 12, 1}, /* page 40 was full: an earlier page */
    {T0, true, 1005, 700, 12, 2},
    {T0, true, 1007, 700, 3, 9},
    /* transaction 702 (its seq values interleave with 700's), at T0 + 1 */
    {T0 + 1, true, 1003, 702, 41, 1},
    {T0 + 1, true, 1006, 702, 5, 1},
};
#define NINS (sizeof(ins) / sizeof(ins[0]))

static struct repair_order model_order;
static int model_cmp(const void *a, const void *b)
{
    return repair_row_cmp(&model_order, *(const struct repair_rowpos *const *)a,
                          *(const struct repair_rowpos *const *)b);
}

/* How many pairs of rows the model's sort puts after a row inserted later
 * (0: in insert order). No two rows tie, so where they start is moot. */
static int sorted_inversions(const char *order_column)
{
    const struct repair_rowpos *rows[NINS];
    for (size_t i = 0; i < NINS; i++) rows[i] = &ins[i];
    repair_order_terms(order_column, &model_order);
    qsort(rows, NINS, sizeof(rows[0]), model_cmp);
    int inv = 0;
    for (size_t i = 0; i < NINS; i++)
        for (size_t j = i + 1; j < NINS; j++)
            if (rows[i] > rows[j]) inv++;
    return inv;
}

START_TEST(test_order_is_insert_order)
{
    ck_assert_int_eq(sorted_inversions("seq"), 0);
    /* without the column, xmin and ctid are all there is: out of order
     * (what outboxd check warns of) */
    ck_assert_int_gt(sorted_inversions(NULL), 0);
    ck_assert_int_gt(sorted_inversions(""), 0);
}
END_TEST

/* Rows older than the column (NULL there, after the migration) sort
 * before the rows that have it at the same time, and among themselves by
 * xmin, then ctid, as before. */
START_TEST(test_order_nulls_first)
{
    struct repair_order o;
    repair_order_terms("seq", &o);
    struct repair_rowpos old1 = {T0, false, 0, 500, 9, 1}, old2 = {T0, false, 0, 500, 9, 2},
                         old3 = {T0, false, 0, 501, 1, 1}, now = {T0, true, 1, 400, 1, 1},
                         later = {T0 + 1, false, 0, 1, 1, 1};
    ck_assert_int_lt(repair_row_cmp(&o, &old1, &old2), 0);
    ck_assert_int_lt(repair_row_cmp(&o, &old2, &old3), 0);
    ck_assert_int_lt(repair_row_cmp(&o, &old3, &now), 0);
    ck_assert_int_gt(repair_row_cmp(&o, &later, &now), 0);
    ck_assert_int_eq(repair_row_cmp(&o, &now, &now), 0);
}
END_TEST

/* Rows deleted after insert: most inserted deleted, or none live while
 * some were inserted (TRUNCATE); a retention's few deletes are not. */
START_TEST(test_rows_gone)
{
    ck_assert(repair_rows_gone(1000, 990, 10));
    ck_assert(repair_rows_gone(1000, 501, -1));
    ck_assert(!repair_rows_gone(1000, 500, 500));
    ck_assert(!repair_rows_gone(1000, 10, 990));
    ck_assert(repair_rows_gone(1000, 0, 0));  /* truncated */
    ck_assert(!repair_rows_gone(0, 0, 0));    /* nothing inserted yet */
    ck_assert(!repair_rows_gone(1000, 0, -1)); /* live not known */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("repairplan");
    TCase *tc = tcase_create("decide");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_dropped_slot_commit_ts);
    tcase_add_test(tc, test_invalidated_slot_is_dropped_first);
    tcase_add_test(tc, test_usable_slot_needs_nothing);
    tcase_add_test(tc, test_active_slot_refused);
    tcase_add_test(tc, test_column_when_no_commit_ts);
    tcase_add_test(tc, test_no_time_source_refused);
    tcase_add_test(tc, test_no_commit_time_needs_since);
    tcase_add_test(tc, test_fresh_start_needs_nothing);
    tcase_add_test(tc, test_since_overrides_file);
    tcase_add_test(tc, test_other_stream_refused);
    tcase_add_test(tc, test_sql);
    tcase_add_test(tc, test_rows_gone);
    tcase_add_test(tc, test_order_is_insert_order);
    tcase_add_test(tc, test_order_nulls_first);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
