/*
 * test_polling.c - the pure part of polling mode (include/polling/polling.h):
 * backoff with jitter, outcome classification, identifier
 * quoting, the SQL of the relay's statements; and the [source] / [polling]
 * configuration keys (include/config/config.h).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_outbox.h"
#include "outbox.h"
#include "polling.h"

static char err[512];

#define HAS(hay, needle)                                                          \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "\"%s\" does not contain \"%s\"", \
                  (hay), (needle))

/* ---- backoff ---- */

START_TEST(test_backoff_grows_and_caps)
{
    /* rnd = 0: the lower end, base - base/2 (= half, rounded up). */
    ck_assert_int_eq(polling_backoff_ms(1, 1000, 300000, 0), 500);
    ck_assert_int_eq(polling_backoff_ms(2, 1000, 300000, 0), 1000);
    ck_assert_int_eq(polling_backoff_ms(3, 1000, 300000, 0), 2000);
    ck_assert_int_eq(polling_backoff_ms(10, 1000, 300000, 0), 150000); /* 512 s capped */
    ck_assert_int_eq(polling_backoff_ms(1000, 1000, 300000, 0), 150000);
    /* rnd = max of the range: the base itself. */
    ck_assert_int_eq(polling_backoff_ms(1, 1000, 300000, 500), 1000);
    ck_assert_int_eq(polling_backoff_ms(3, 1000, 300000, 2000), 4000);
    ck_assert_int_eq(polling_backoff_ms(40, 1000, 300000, 150000), 300000);
    /* The modulo wraps large random numbers into the range. */
    ck_assert_int_eq(polling_backoff_ms(1, 1000, 300000, 501), 500);
}
END_TEST

START_TEST(test_backoff_jitter_range)
{
    for (int attempts = 1; attempts <= 30; attempts++) {
        int64_t lo = INT64_MAX, hi = 0;
        for (uint64_t r = 0; r < 5000; r++) {
            int64_t d = polling_backoff_ms(attempts, 200, 10000, r * 2654435761u);
            if (d < lo) lo = d;
            if (d > hi) hi = d;
        }
        int64_t base = 200;
        for (int i = 1; i < attempts && base < 10000; i++) base *= 2;
        if (base > 10000) base = 10000;
        ck_assert_int_ge(lo, base / 2);
        ck_assert_int_le(hi, base);
        ck_assert_int_le(hi, 10000);
        ck_assert_msg(hi > lo, "no jitter at attempts %d", attempts);
    }
}
END_TEST

START_TEST(test_backoff_degenerate_bounds)
{
    /* max below min: min wins; min 0 treated as 1 ms. */
    ck_assert_int_eq(polling_backoff_ms(5, 1000, 10, 0), 500);
    ck_assert_int_ge(polling_backoff_ms(1, 0, 0, 7), 0);
    ck_assert_int_le(polling_backoff_ms(1, 0, 0, 7), 1);
}
END_TEST

/* ---- classification ---- */

START_TEST(test_classify)
{
    ck_assert_int_eq(polling_classify(0, false, 0, 10), PA_SENT);
    ck_assert_int_eq(polling_classify(0, false, 9, 10), PA_SENT); /* an ACK always wins */
    ck_assert_int_eq(polling_classify(-192 /* _MSG_TIMED_OUT */, false, 0, 10), PA_RETRY);
    ck_assert_int_eq(polling_classify(-195 /* _TRANSPORT */, false, 8, 10), PA_RETRY);
    /* The tenth failed attempt of max_attempts = 10 quarantines. */
    ck_assert_int_eq(polling_classify(-192, false, 9, 10), PA_QUARANTINE);
    ck_assert_int_eq(polling_classify(-192, false, 50, 10), PA_QUARANTINE);
    ck_assert_int_eq(polling_classify(-192, false, 0, 1), PA_QUARANTINE);
    /* Permanent errors quarantine at once. */
    ck_assert_int_eq(polling_classify(10 /* MSG_SIZE_TOO_LARGE */, true, 0, 10), PA_QUARANTINE);
    ck_assert_str_eq(polling_action_name(PA_SENT), "SENT");
    ck_assert_str_eq(polling_action_name(PA_RETRY), "RETRY");
    ck_assert_str_eq(polling_action_name(PA_QUARANTINE), "QUARANTINE");
}
END_TEST

/* ---- SQL ---- */

static struct outbox_map MAP;

static void map_init(const char *table, const char *agg_col, const char *id_col)
{
    const char *cols[OC__COUNT];
    for (int i = 0; i < OC__COUNT; i++) cols[i] = outbox_col_name(i);
    if (agg_col) cols[OC_AGGREGATE_ID] = agg_col;
    if (id_col) cols[OC_EVENT_ID] = id_col;
    ck_assert_int_eq(outbox_map_init(&MAP, table, cols, "t.${aggregate_type}", err, sizeof(err)),
                     0);
}

START_TEST(test_sql_claim)
{
    struct polling_sql q;
    map_init("public.outbox_events", NULL, NULL);
    ck_assert_int_eq(polling_sql_build(&q, &MAP, "uuid", err, sizeof(err)), 0);
    /* Due rows: PENDING and due, or CLAIMED with an expired lease. */
    HAS(q.claim, "FROM \"public\".\"outbox_events\" o");
    HAS(q.claim, "o.status IN ('PENDING', 'CLAIMED') AND o.next_attempt_at <= now()");
    HAS(q.claim, "(o.status = 'PENDING' OR o.lease_until <= now())");
    /* Per-aggregate order: no earlier unsent row of the same aggregate. */
    HAS(q.claim, "NOT EXISTS (SELECT 1 FROM \"public\".\"outbox_events\" e WHERE "
                 "e.\"aggregate_id\" = o.\"aggregate_id\" AND e.seq < o.seq AND e.status <> "
                 "'SENT')");
    HAS(q.claim, "ORDER BY o.seq LIMIT $3 FOR UPDATE OF o SKIP LOCKED");
    /* The lease: owner, next generation, expiry. */
    HAS(q.claim, "SET status = 'CLAIMED', lease_owner = $1");
    HAS(q.claim, "lease_generation = t.lease_generation + 1");
    HAS(q.claim, "lease_until = now() + $2::bigint * interval '1 millisecond'");
    HAS(q.claim, "RETURNING t.*");
    HAS(q.claim, "ORDER BY seq");
    polling_sql_free(&q);
    outbox_map_free(&MAP);
}
END_TEST

START_TEST(test_sql_outcomes_are_conditional)
{
    struct polling_sql q;
    map_init("app.\"Out\"box", "agg", "id");
    ck_assert_int_eq(polling_sql_build(&q, &MAP, "character varying(64)", err, sizeof(err)),
                     0);
    const char *cond = "t.\"id\" = a.id AND t.lease_generation = a.gen AND t.status = "
                       "'CLAIMED' AND t.lease_owner = $3";
    HAS(q.sent, "UPDATE \"app\".\"\"\"Out\"\"box\" t SET status = 'SENT', sent_at = now()");
    HAS(q.sent, "unnest($1::character varying(64)[], $2::bigint[])");
    HAS(q.sent, cond);
    HAS(q.sent, "lease_owner = NULL, lease_until = NULL");
    HAS(q.sent, "RETURNING t.\"id\"::text");
    HAS(q.fail, cond);
    HAS(q.fail, "attempts = t.attempts + a.bump");
    HAS(q.fail, "CASE WHEN a.st = 'PENDING' THEN now() + a.delay * interval '1 millisecond'");
    HAS(q.fail, "lease_owner = NULL, lease_until = NULL");
    HAS(q.fail, "last_error = coalesce(a.err, t.last_error)");
    HAS(q.claim, "e.\"agg\" = o.\"agg\"");
    /* Retention: SENT only, by sent_at, bounded, skipping locked rows. */
    HAS(q.retention, "s.status = 'SENT' AND s.sent_at < now() - $1::bigint");
    HAS(q.retention, "LIMIT $2 FOR UPDATE SKIP LOCKED");
    /* Requeue: QUARANTINED only, attempts reset, lease cleared. */
    HAS(q.requeue, "SET status = 'PENDING', attempts = 0, next_attempt_at = now()");
    HAS(q.requeue, "WHERE \"id\" = ANY($1::character varying(64)[]) AND status = 'QUARANTINED'");
    HAS(q.states, "SELECT \"id\"::text, status FROM");
    polling_sql_free(&q);
    outbox_map_free(&MAP);
}
END_TEST

START_TEST(test_state_columns)
{
    const char *want[] = {"seq",         "status",           "attempts",
                          "next_attempt_at", "lease_owner",  "lease_generation",
                          "lease_until", "sent_at",          "last_error"};
    size_t n = 0;
    for (; polling_state_columns[n]; n++) ck_assert_str_eq(polling_state_columns[n], want[n]);
    ck_assert_uint_eq(n, sizeof(want) / sizeof(want[0]));
}
END_TEST

/* ---- the backlog ---- */

START_TEST(test_backlog_sql)
{
    map_init("app.O'b", NULL, NULL);
    char *q = polling_backlog_sql(&MAP);
    ck_assert_ptr_nonnull(q);
    /* Undelivered rows only (the partial index), grouped by status. */
    HAS(q, "FROM \"app\".\"O'b\" WHERE status <> 'SENT' GROUP BY status");
    HAS(q, "min(created_at)");
    HAS(q, "max(attempts)");
    /* The table's name as a literal: its quote doubled. */
    HAS(q, "pg_total_relation_size('\"app\".\"O''b\"'::regclass)");
    /* One row per status, in enum order, 0 when absent. */
    HAS(q, "unnest(ARRAY['PENDING', 'CLAIMED', 'QUARANTINED']) WITH ORDINALITY");
    HAS(q, "LEFT JOIN b USING (status) ORDER BY s.i");
    free(q);
    outbox_map_free(&MAP);
}
END_TEST

START_TEST(test_backlog_rows_and_line)
{
    struct polling_backlog b = {.seen = true};
    char line[512];
    const char *none[][5] = {{"PENDING", "0", "0", "0", "8192"},
                             {"CLAIMED", "0", "0", "0", "8192"},
                             {"QUARANTINED", "0", "0", "0", "8192"}};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(polling_backlog_row(&b, none[i], err, sizeof(err)), 0);
    ck_assert_str_eq(polling_backlog_line(&b, line, sizeof(line)),
                     "0 undelivered rows; table 8.0 KiB");
    const char *rows[][5] = {{"PENDING", "4", "3601000", "4", "98304"},
                             {"CLAIMED", "1", "1800000", "1", "98304"},
                             {"QUARANTINED", "2", "7205000", "5", "98304"}};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(polling_backlog_row(&b, rows[i], err, sizeof(err)), 0);
    ck_assert_int_eq(b.rows[PS_QUARANTINED], 2);
    ck_assert_int_eq(b.oldest_ms[PS_PENDING], 3601000);
    ck_assert_int_eq(b.max_attempts[PS_CLAIMED], 1);
    ck_assert_int_eq(b.table_bytes, 98304);
    ck_assert_str_eq(polling_backlog_line(&b, line, sizeof(line)),
                     "7 undelivered rows: 4 pending, 1 claimed, 2 quarantined; oldest created "
                     "2h 0m ago (quarantined); at most 5 failed attempts; table 96.0 KiB");
    b.rows[PS_QUARANTINED] = 0;
    b.rows[PS_CLAIMED] = 0;
    b.rows[PS_PENDING] = 1;
    b.oldest_ms[PS_PENDING] = 45999;
    b.max_attempts[PS_QUARANTINED] = b.max_attempts[PS_CLAIMED] = 0;
    b.max_attempts[PS_PENDING] = 1;
    b.table_bytes = 3 * 1024 * 1024 + 512 * 1024;
    ck_assert_str_eq(polling_backlog_line(&b, line, sizeof(line)),
                     "1 undelivered row: 1 pending, 0 claimed, 0 quarantined; oldest created "
                     "45 s ago (pending); at most 1 failed attempt; table 3.5 MiB");
    /* Refused: an unknown status, a value that is no count. */
    const char *bad1[5] = {"SENT", "1", "0", "0", "1"};
    ck_assert_int_eq(polling_backlog_row(&b, bad1, err, sizeof(err)), -1);
    HAS(err, "unknown status \"SENT\"");
    const char *bad2[5] = {"PENDING", "1", "-5", "0", "1"};
    ck_assert_int_eq(polling_backlog_row(&b, bad2, err, sizeof(err)), -1);
    HAS(err, "\"-5\" is not a count");
}
END_TEST

/* ---- configuration ---- */

static struct config C;

static void cfg_setup(void)
{
    memset(&C, 0, sizeof(C));
    ck_assert_int_eq(config_init(&C), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "dbname=x", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "b:9092", err, sizeof(err)),
                     0);
}

START_TEST(test_config_defaults)
{
    cfg_setup();
    ck_assert_int_eq(C.source_mode, SOURCE_LOGICAL);
    ck_assert_ptr_null(C.poll_owner_id);
    ck_assert_int_eq(C.poll_batch_size, 100);
    ck_assert_int_eq(C.poll_lease_ms, 30000);
    ck_assert_int_eq(C.poll_interval_ms, 1000);
    ck_assert_int_eq(C.poll_max_attempts, 10);
    ck_assert_int_eq(C.poll_backoff_min_ms, 1000);
    ck_assert_int_eq(C.poll_backoff_max_ms, 300000);
    ck_assert_int_eq(C.poll_retention_ms, 7LL * 86400000);
    ck_assert_int_eq(C.poll_retention_batch, 1000);
    ck_assert_int_eq(C.poll_retention_interval_ms, 60000);
    ck_assert_str_eq(C.poll_notify_channel, "outboxd");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    config_free(&C);
}
END_TEST

START_TEST(test_config_sources)
{
    cfg_setup();
    char *env[] = {"OUTBOXD_SOURCE_MODE=polling", "OUTBOXD_POLLING_LEASE=45s",
                   "OUTBOXD_POLLING_OWNER_ID=relay-7", NULL};
    ck_assert_int_eq(config_load_env(&C, env, err, sizeof(err)), 0);
    ck_assert_int_eq(C.source_mode, SOURCE_POLLING);
    ck_assert_int_eq(C.poll_lease_ms, 45000);
    ck_assert_str_eq(C.poll_owner_id, "relay-7");
    ck_assert_int_eq(config_apply_set(&C, "polling.retention=0", err, sizeof(err)), 0);
    ck_assert_int_eq(C.poll_retention_ms, 0);
    ck_assert_int_eq(config_apply_set(&C, "polling.batch_size=7", err, sizeof(err)), 0);
    ck_assert_int_eq(C.poll_batch_size, 7);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    config_free(&C);
}
END_TEST

START_TEST(test_config_errors)
{
    cfg_setup();
    ck_assert_int_eq(config_set(&C, "source", "mode", "poll", err, sizeof(err)), -1);
    HAS(err, "[source] mode: \"poll\" is not one of logical|polling");
    ck_assert_int_eq(config_set(&C, "polling", "lease", "30", err, sizeof(err)), -1);
    HAS(err, "[polling] lease: \"30\" is not a duration");
    ck_assert_int_eq(config_set(&C, "polling", "batch_size", "0", err, sizeof(err)), -1);
    HAS(err, "[polling] batch_size");
    ck_assert_int_eq(config_set(&C, "polling", "leese", "1s", err, sizeof(err)), -1);
    HAS(err, "did you mean \"lease\"");
    char *env[] = {"OUTBOXD_POLLING_LEASEE=1s", NULL};
    ck_assert_int_eq(config_load_env(&C, env, err, sizeof(err)), -1);
    HAS(err, "OUTBOXD_POLLING_LEASEE is not a known key");

    /* Cross-key checks only in polling mode. */
    ck_assert_int_eq(config_set(&C, "polling", "lease", "500ms", err, sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&C, err, sizeof(err)), 0); /* logical: not used */
    ck_assert_int_eq(config_set(&C, "source", "mode", "polling", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    HAS(err, "[polling] lease: 500 ms is too short");
    ck_assert_int_eq(config_set(&C, "polling", "lease", "10s", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "polling", "backoff_min", "10m", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    HAS(err, "[polling] backoff_min (600000 ms) is larger than backoff_max (300000 ms)");
    ck_assert_int_eq(config_set(&C, "polling", "backoff_min", "0", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    HAS(err, "[polling] backoff_min must be more than 0");
    ck_assert_int_eq(config_set(&C, "polling", "backoff_min", "1s", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "polling", "retention_interval", "0", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    HAS(err, "[polling] retention_interval must be more than 0");
    ck_assert_int_eq(config_set(&C, "polling", "retention", "off", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0); /* retention off */
    ck_assert_int_eq(config_set(&C, "polling", "notify_channel", "Out-box", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    HAS(err, "[polling] notify_channel \"Out-box\"");
    config_free(&C);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("polling");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_backoff_grows_and_caps);
    tcase_add_test(tc, test_backoff_jitter_range);
    tcase_add_test(tc, test_backoff_degenerate_bounds);
    tcase_add_test(tc, test_classify);
    tcase_add_test(tc, test_sql_claim);
    tcase_add_test(tc, test_sql_outcomes_are_conditional);
    tcase_add_test(tc, test_state_columns);
    tcase_add_test(tc, test_backlog_sql);
    tcase_add_test(tc, test_backlog_rows_and_line);
    tcase_add_test(tc, test_config_defaults);
    tcase_add_test(tc, test_config_sources);
    tcase_add_test(tc, test_config_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
