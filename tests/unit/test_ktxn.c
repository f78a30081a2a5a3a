/*
 * test_ktxn.c - exactly_once's transaction pacing and committed position
 * (include/kafka/ktxn.h): when a Kafka transaction is due (events, time since
 * its first event, idle progress-only commits), and the position a commit
 * stores (flush LSN, the in-transaction count of a partly produced
 * Postgres transaction).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ktxn.h"

static struct ktxn K;

static struct offset_state at(lsn_t lsn)
{
    struct offset_state s = {.format = 2, .lsn = lsn, .has_identity = true, .timeline = 1};
    strcpy(s.system, "7301234567890123456");
    strcpy(s.slot, "outboxd");
    return s;
}

START_TEST(test_nothing_sent_not_due_before_start)
{
    ktxn_init(&K, 100, 500);
    /* No position yet (the stream has not started): never due. */
    ck_assert(!ktxn_due(&K, 0x1000, 0));
    ck_assert(!ktxn_due(&K, 0x1000, 1000000));
}
END_TEST

START_TEST(test_due_on_event_count)
{
    ktxn_init(&K, 3, 100000);
    struct offset_state p = at(0x100);
    ktxn_started(&K, &p, 0);
    ktxn_sent(&K, 10);
    ktxn_sent(&K, 11);
    ck_assert(!ktxn_due(&K, 0x100, 12));
    ktxn_sent(&K, 12);
    ck_assert_uint_eq(K.events, 3);
    ck_assert(ktxn_due(&K, 0x100, 12));
}
END_TEST

START_TEST(test_due_on_time_since_first_event)
{
    ktxn_init(&K, 1000, 100);
    struct offset_state p = at(0x100);
    ktxn_started(&K, &p, 0);
    ktxn_sent(&K, 5000); /* the clock starts at the first event, not the commit */
    ktxn_sent(&K, 5090);
    ck_assert(!ktxn_due(&K, 0x100, 5099));
    ck_assert(ktxn_due(&K, 0x100, 5100));
}
END_TEST

START_TEST(test_idle_progress_only_commit)
{
    ktxn_init(&K, 1000, 100);
    struct offset_state p = at(0x100);
    ktxn_started(&K, &p, 0);
    /* Flush has not moved: nothing to commit, however long. */
    ck_assert(!ktxn_due(&K, 0x100, 100000));
    /* Flush moved (keepalive, a transaction without outbox rows), but the
     * last commit is recent. */
    ck_assert(!ktxn_due(&K, 0x200, KTXN_IDLE_MS - 1));
    ck_assert(ktxn_due(&K, 0x200, KTXN_IDLE_MS));
    struct offset_state c = at(0x200);
    ktxn_committed(&K, &c, 2000);
    ck_assert_uint_eq(K.commits, 1);
    ck_assert(!ktxn_due(&K, 0x200, 50000));
    ck_assert(!ktxn_due(&K, 0x300, 2000 + KTXN_IDLE_MS - 1));
    ck_assert(ktxn_due(&K, 0x300, 2000 + KTXN_IDLE_MS));
}
END_TEST

START_TEST(test_commit_resets_the_open_transaction)
{
    ktxn_init(&K, 2, 100);
    struct offset_state p = at(0x100);
    ktxn_started(&K, &p, 0);
    ktxn_sent(&K, 10);
    ktxn_sent(&K, 10);
    K.committing = true;
    struct offset_state c = at(0x180);
    ktxn_committed(&K, &c, 20);
    ck_assert_uint_eq(K.events, 0);
    ck_assert(!K.committing);
    ck_assert(K.have_committed);
    ck_assert_uint_eq(K.committed.lsn, 0x180);
    ck_assert(!ktxn_due(&K, 0x180, 21));
    /* The next transaction's clock starts at its own first event. */
    ktxn_sent(&K, 500);
    ck_assert(!ktxn_due(&K, 0x180, 599));
    ck_assert(ktxn_due(&K, 0x180, 600));
}
END_TEST

START_TEST(test_abort_keeps_the_committed_position)
{
    ktxn_init(&K, 10, 100);
    struct offset_state p = at(0x100);
    ktxn_started(&K, &p, 0);
    ktxn_sent(&K, 1);
    ktxn_sent(&K, 2);
    K.committing = true;
    ktxn_aborted(&K);
    ck_assert_uint_eq(K.events, 0);
    ck_assert(!K.committing);
    ck_assert_uint_eq(K.aborts, 1);
    ck_assert_uint_eq(K.commits, 0);
    ck_assert_uint_eq(K.committed.lsn, 0x100); /* nothing of it counts */
}
END_TEST

START_TEST(test_started_sets_committed)
{
    ktxn_init(&K, 10, 100);
    ktxn_sent(&K, 1);
    struct offset_state p = at(0x4000);
    p.format = 3;
    p.has_progress = true;
    p.txn_lsn = 0x5000;
    p.txn_acked = 7;
    ktxn_started(&K, &p, 50);
    ck_assert(K.have_committed);
    ck_assert_uint_eq(K.events, 0);
    ck_assert_uint_eq(K.committed.lsn, 0x4000);
    ck_assert(K.committed.has_progress);
    ck_assert_uint_eq(K.committed.txn_acked, 7);
    ck_assert_uint_eq(K.commits, 0); /* a start is not a commit */
}
END_TEST

START_TEST(test_position_whole_transactions)
{
    struct offset_state id = at(0x10);
    struct tracker_progress none = {0};
    struct offset_state pos = ktxn_position(&id, 0x2000, 0x2000, false, none);
    ck_assert_int_eq(pos.format, 2);
    ck_assert_uint_eq(pos.lsn, 0x2000);
    ck_assert(!pos.has_progress);
    ck_assert_uint_eq(pos.txn_lsn, 0);
    ck_assert_uint_eq(pos.txn_acked, 0);
    ck_assert_str_eq(pos.system, "7301234567890123456"); /* identity kept */
    ck_assert_str_eq(pos.slot, "outboxd");
    ck_assert(pos.has_identity);
}
END_TEST

START_TEST(test_position_partial_transaction)
{
    struct offset_state id = at(0x10);
    struct tracker_progress pr = {.txn_lsn = 0x3000, .acked = 42};
    struct offset_state pos = ktxn_position(&id, 0x2000, 0x2000, true, pr);
    ck_assert_int_eq(pos.format, 3);
    ck_assert_uint_eq(pos.lsn, 0x2000);
    ck_assert(pos.has_progress);
    ck_assert_uint_eq(pos.txn_lsn, 0x3000);
    ck_assert_uint_eq(pos.txn_acked, 42);
}
END_TEST

START_TEST(test_position_progress_not_past_flush_is_dropped)
{
    struct offset_state id = at(0x10);
    /* A count of zero events says nothing. */
    struct tracker_progress zero = {.txn_lsn = 0x3000, .acked = 0};
    struct offset_state pos = ktxn_position(&id, 0x2000, 0x2000, true, zero);
    ck_assert(!pos.has_progress);
    ck_assert_int_eq(pos.format, 2);
    /* A transaction committed below flush is complete: no partial count
     * (a completed one moves flush to its commit's end, past its commit). */
    struct tracker_progress old = {.txn_lsn = 0x1ff8, .acked = 5};
    pos = ktxn_position(&id, 0x2000, 0x2000, true, old);
    ck_assert(!pos.has_progress);
    ck_assert_uint_eq(pos.txn_acked, 0);
}
END_TEST

/* A transaction committed exactly at flush is not complete: flush came from
 * a keepalive sent when the walsender stood at its commit record (or from
 * the previous commit's end, right before it). PostgreSQL sends it again
 * after a restart there, so its partial count must be kept. */
START_TEST(test_position_progress_at_flush_is_kept)
{
    struct offset_state id = at(0x10);
    struct tracker_progress at_flush = {.txn_lsn = 0x2000, .acked = 5};
    struct offset_state pos = ktxn_position(&id, 0x2000, 0x2000, true, at_flush);
    ck_assert(pos.has_progress);
    ck_assert_uint_eq(pos.txn_lsn, 0x2000);
    ck_assert_uint_eq(pos.txn_acked, 5);
}
END_TEST

/* With pgoutput the stored lsn is no further than the last publication
 * proof (a restart confirms it to the slot), and flush, past it, is the
 * acked a restart streams from: nothing committed is sent again, and the
 * slot is not confirmed past the proof (the simulator's seed 169, tests/sim:
 * before, a restart confirmed the slot past inserts that pgoutput had
 * skipped once the table left the publication). */
START_TEST(test_position_capped_by_proof)
{
    struct offset_state id = at(0x10);
    strcpy(id.database, "app"); /* a whole identity: the record is parsed back */
    strcpy(id.plugin, "pgoutput");
    struct tracker_progress pr = {.txn_lsn = 0x3000, .acked = 4};
    struct offset_state pos = ktxn_position(&id, 0x2000, 0x1800, true, pr);
    ck_assert_uint_eq(pos.lsn, 0x1800);
    ck_assert(pos.has_acked);
    ck_assert_uint_eq(pos.acked_lsn, 0x2000);
    ck_assert_uint_eq(offset_all_acked(&pos), 0x2000);
    ck_assert(pos.has_progress);
    ck_assert_uint_eq(pos.txn_acked, 4);
    /* it survives the record's text */
    char text[OFFSET_FILE_MAX], err[256];
    struct offset_state back;
    size_t n = offset_format(&pos, text, sizeof(text));
    ck_assert_uint_gt(n, 0);
    ck_assert_int_eq(offset_parse(text, n, &back, err, sizeof(err)), 0);
    ck_assert_uint_eq(back.lsn, 0x1800);
    ck_assert_uint_eq(back.acked_lsn, 0x2000);
    ck_assert_uint_eq(back.txn_lsn, 0x3000);
    /* confirmable at or past flush: no acked */
    pos = ktxn_position(&id, 0x2000, 0x2000, false, pr);
    ck_assert(!pos.has_acked);
    ck_assert_uint_eq(pos.lsn, 0x2000);
}
END_TEST

/* A progress-only commit is due when flush passes what the last commit
 * holds all ACKed, not merely its (proof-capped) lsn. */
START_TEST(test_idle_commit_after_acked)
{
    struct ktxn k;
    ktxn_init(&k, 100, 50);
    struct offset_state id = at(0x10);
    struct tracker_progress none = {0};
    struct offset_state pos = ktxn_position(&id, 0x2000, 0x1000, false, none);
    ktxn_started(&k, &pos, 0);
    ck_assert(!ktxn_due(&k, 0x2000, 10 * KTXN_IDLE_MS));
    ck_assert(ktxn_due(&k, 0x2008, 10 * KTXN_IDLE_MS));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ktxn");
    TCase *tp = tcase_create("pacing");
    tcase_add_test(tp, test_nothing_sent_not_due_before_start);
    tcase_add_test(tp, test_due_on_event_count);
    tcase_add_test(tp, test_due_on_time_since_first_event);
    tcase_add_test(tp, test_idle_progress_only_commit);
    tcase_add_test(tp, test_commit_resets_the_open_transaction);
    tcase_add_test(tp, test_abort_keeps_the_committed_position);
    tcase_add_test(tp, test_started_sets_committed);
    suite_add_tcase(s, tp);
    TCase *tq = tcase_create("position");
    tcase_add_test(tq, test_position_whole_transactions);
    tcase_add_test(tq, test_position_partial_transaction);
    tcase_add_test(tq, test_position_progress_not_past_flush_is_dropped);
    tcase_add_test(tq, test_position_progress_at_flush_is_kept);
    tcase_add_test(tq, test_position_capped_by_proof);
    tcase_add_test(tq, test_idle_commit_after_acked);
    suite_add_tcase(s, tq);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
