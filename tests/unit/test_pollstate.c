/*
 * test_pollstate.c - the states of the polling relay's loop
 * (include/polling/pollstate.h): phase changes, what is due, and when a turn wakes.
 */
#include <check.h>

#include "pollstate.h"

#define FLUSH 10000

/* A relay in RUN, connected, statements built, nothing due. */
static struct pollstate running(void)
{
    return (struct pollstate){.phase = PH_RUN, .db = DB_UP, .sql_ready = true, .batch = 4,
                              .next_connect_ms = 1000000, .next_claim_ms = 1000000,
                              .next_retention_ms = 1000000, .results_retry_ms = 0,
                              .next_backlog_ms = 1000000};
}

START_TEST(test_stop_drains_then_records)
{
    struct pollstate s = running();
    s.inflight = 2;
    ck_assert_int_eq(pollstate_advance(&s, 100, FLUSH), PH_RUN);
    s.stop = true;
    s.rows_pending = true; /* a batch still waits for the queue: finish it first */
    ck_assert_int_eq(pollstate_advance(&s, 100, FLUSH), PH_RUN);
    s.rows_pending = false;
    ck_assert_int_eq(pollstate_advance(&s, 200, FLUSH), PH_DRAIN);
    ck_assert_int_eq(s.drain_deadline_ms, 200 + FLUSH);
    ck_assert_int_eq(pollstate_advance(&s, 200 + FLUSH - 1, FLUSH), PH_DRAIN);
    ck_assert_int_eq(pollstate_advance(&s, 200 + FLUSH, FLUSH), PH_RECORD);
    ck_assert_int_eq(s.record_tries, 0);
}
END_TEST

START_TEST(test_drain_ends_when_nothing_in_flight)
{
    struct pollstate s = running();
    s.stop = true;
    s.inflight = 1;
    ck_assert_int_eq(pollstate_advance(&s, 0, FLUSH), PH_DRAIN);
    ck_assert_int_eq(pollstate_advance(&s, 5, FLUSH), PH_DRAIN);
    s.inflight = 0;
    ck_assert_int_eq(pollstate_advance(&s, 6, FLUSH), PH_RECORD);
}
END_TEST

START_TEST(test_record_tries_are_bounded)
{
    struct pollstate s = running();
    s.phase = PH_RECORD;
    s.outcomes = 3;
    for (int i = 0; i < POLLSTATE_RECORD_TRIES; i++) {
        ck_assert_int_eq(pollstate_advance(&s, 0, FLUSH), PH_RECORD);
        s.record_tries++;
    }
    ck_assert_int_eq(pollstate_advance(&s, 0, FLUSH), PH_DONE);
    s = running();
    s.phase = PH_RECORD;
    s.outcomes = 0; /* all written */
    ck_assert_int_eq(pollstate_advance(&s, 0, FLUSH), PH_DONE);
}
END_TEST

START_TEST(test_fatal_ends_at_once)
{
    struct pollstate s = running();
    s.fatal = true;
    s.inflight = 3;
    ck_assert_int_eq(pollstate_advance(&s, 0, FLUSH), PH_DONE);
    s = running();
    ck_assert_int_gt(pollstate_wake_ms(&s, 50), 50);
    s.fatal = true;
    ck_assert_int_eq(pollstate_wake_ms(&s, 50), 50);
}
END_TEST

START_TEST(test_checks_retry_then_give_up)
{
    struct pollstate s = {.phase = PH_CHECK};
    ck_assert(pollstate_check_due(&s, 0));
    ck_assert(!pollstate_checked(&s, false, 10, 500));
    ck_assert_int_eq(s.phase, PH_CHECK);
    ck_assert_int_eq(s.next_check_ms, 510);
    ck_assert(!pollstate_check_due(&s, 509));
    ck_assert(pollstate_check_due(&s, 510));
    ck_assert_int_eq(pollstate_wake_ms(&s, 100), 510);
    ck_assert(!pollstate_checked(&s, false, 510, 500));
    ck_assert(pollstate_checked(&s, false, 1010, 500)); /* the third failure */
    ck_assert_int_eq(s.phase, PH_DONE);
    ck_assert(s.fatal);
    s = (struct pollstate){.phase = PH_CHECK};
    ck_assert(!pollstate_checked(&s, true, 0, 500));
    ck_assert_int_eq(s.phase, PH_RUN);
    ck_assert(!s.fatal);
}
END_TEST

START_TEST(test_stop_cuts_the_check_pause)
{
    struct pollstate s = {.phase = PH_CHECK};
    pollstate_checked(&s, false, 0, 5000);
    ck_assert(!pollstate_check_due(&s, 100));
    s.stop = true;
    ck_assert(pollstate_check_due(&s, 100));
    ck_assert_int_eq(pollstate_wake_ms(&s, 100), 100);
    ck_assert(pollstate_checked(&s, false, 100, 5000)); /* a failure on a stop is final */
    ck_assert_int_eq(s.phase, PH_DONE);
}
END_TEST

START_TEST(test_claim_due)
{
    struct pollstate s = running();
    ck_assert(!pollstate_claim_due(&s, 0));
    ck_assert(pollstate_claim_due(&s, 1000000)); /* the poll interval */
    s.claim_now = true;
    ck_assert(pollstate_claim_due(&s, 0));
    ck_assert_int_eq(pollstate_wake_ms(&s, 7), 7);
    s.inflight = 4; /* the batch is in flight */
    ck_assert(!pollstate_claim_due(&s, 0));
    ck_assert_int_gt(pollstate_wake_ms(&s, 7), 7);
    s.inflight = 0;
    s.rows_pending = true; /* the last batch is not produced yet */
    ck_assert(!pollstate_claim_due(&s, 0));
    s.rows_pending = false;
    s.sql_ready = false;
    ck_assert(!pollstate_claim_due(&s, 0));
    s.sql_ready = true;
    s.db = DB_CONNECTING;
    ck_assert(!pollstate_claim_due(&s, 0));
    s.db = DB_UP;
    s.phase = PH_DRAIN;
    ck_assert(!pollstate_claim_due(&s, 0));
}
END_TEST

START_TEST(test_backpressure_retry)
{
    struct pollstate s = running();
    s.rows_pending = true;
    s.next_produce_ms = 100 + POLLSTATE_QUEUE_RETRY_MS;
    ck_assert(!pollstate_produce_due(&s, 100));
    ck_assert(pollstate_produce_due(&s, 100 + POLLSTATE_QUEUE_RETRY_MS));
    ck_assert_int_eq(pollstate_wake_ms(&s, 100), 100 + POLLSTATE_QUEUE_RETRY_MS);
    s.stop = true; /* a stop waits for the batch */
    ck_assert_int_eq(pollstate_wake_ms(&s, 100), 100 + POLLSTATE_QUEUE_RETRY_MS);
}
END_TEST

START_TEST(test_connect_deadlines)
{
    struct pollstate s = running();
    s.db = DB_DOWN;
    s.next_connect_ms = 300;
    ck_assert(!pollstate_connect_due(&s, 299));
    ck_assert(pollstate_connect_due(&s, 300));
    ck_assert_int_eq(pollstate_wake_ms(&s, 0), 300);
    s.phase = PH_RECORD; /* RECORD connects on its own tries */
    ck_assert(!pollstate_connect_due(&s, 300));
    s = running();
    s.db = DB_CONNECTING;
    s.connect_deadline_ms = 10400;
    ck_assert(!pollstate_connect_expired(&s, 10399));
    ck_assert(pollstate_connect_expired(&s, 10400));
    ck_assert_int_eq(pollstate_wake_ms(&s, 10000), 10400);
    ck_assert_int_eq(pollstate_wake_ms(&s, 0), POLLSTATE_MAX_WAIT_MS);
    s.phase = PH_RECORD;
    ck_assert_int_eq(pollstate_wake_ms(&s, 10000), 10400);
    s.db = DB_UP;
    ck_assert_int_eq(pollstate_wake_ms(&s, 10000), 10000);
}
END_TEST

START_TEST(test_timers)
{
    struct pollstate s = running();
    s.outcomes = 2;
    s.results_retry_ms = 600;
    ck_assert(!pollstate_results_due(&s, 599));
    ck_assert(pollstate_results_due(&s, 600));
    ck_assert_int_eq(pollstate_wake_ms(&s, 0), 600);
    s.outcomes = 0;
    s.retention = true;
    s.next_retention_ms = 700;
    ck_assert(pollstate_retention_due(&s, 700));
    ck_assert_int_eq(pollstate_wake_ms(&s, 0), 700);
    s.retention = false;
    ck_assert(!pollstate_retention_due(&s, 700));
    s.backlog = true;
    s.next_backlog_ms = 800;
    ck_assert(!pollstate_backlog_due(&s, 799));
    ck_assert(pollstate_backlog_due(&s, 800));
    ck_assert_int_eq(pollstate_wake_ms(&s, 0), 800);
    s = running();
    s.phase = PH_DRAIN;
    s.inflight = 1;
    s.drain_deadline_ms = 450;
    ck_assert_int_eq(pollstate_wake_ms(&s, 0), 450);
    s.inflight = 0;
    ck_assert_int_eq(pollstate_wake_ms(&s, 0), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pollstate");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_stop_drains_then_records);
    tcase_add_test(tc, test_drain_ends_when_nothing_in_flight);
    tcase_add_test(tc, test_record_tries_are_bounded);
    tcase_add_test(tc, test_fatal_ends_at_once);
    tcase_add_test(tc, test_checks_retry_then_give_up);
    tcase_add_test(tc, test_stop_cuts_the_check_pause);
    tcase_add_test(tc, test_claim_due);
    tcase_add_test(tc, test_backpressure_retry);
    tcase_add_test(tc, test_connect_deadlines);
    tcase_add_test(tc, test_timers);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
