/*
 * test_tracker.c - the ACK/LSN tracker (include/ack/tracker.h).
 *
 * The flush position is the commit end LSN of the longest prefix of received
 * transactions that are committed with no pending events; a keepalive may
 * move it only when nothing is in flight; a failure freezes it before the
 * failed transaction; it never goes backwards.
 */
#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quiet_check.h"
#include "tracker.h"

#define START 0x1000ULL

static struct tracker *T;

/* Commit timestamp of transaction seq as tracker_times() gives it; 0 if
 * unknown, aborted or already flushed. */
static int64_t tracker_commit_time(const struct tracker *t, uint64_t seq)
{
    struct tracker_times tt;
    tracker_times(t, tracker_txn_tag(seq), &tt);
    return tt.commit_time;
}

static void setup(void)
{
    T = tracker_new(START);
    ck_assert_ptr_nonnull(T);
}

static void teardown(void)
{
    tracker_free(T);
    T = NULL;
}

#define FLUSH_EQ(v) ck_assert_uint_eq(tracker_flush_lsn(T), (v))

/* A committed transaction with n events, none acked. */
static uint64_t txn(lsn_t final_lsn, lsn_t end_lsn, int n)
{
    uint64_t s = tracker_begin(T, final_lsn);
    ck_assert_uint_ne(s, 0);
    for (int i = 0; i < n; i++) qck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_commit(T, s, end_lsn), 0);
    return s;
}

START_TEST(test_initial_state)
{
    FLUSH_EQ(START);
    ck_assert(tracker_idle(T));
    ck_assert(!tracker_failed(T));
    ck_assert_uint_eq(tracker_pending_events(T), 0);
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
}
END_TEST

START_TEST(test_start_zero)
{
    struct tracker *t = tracker_new(0);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(tracker_flush_lsn(t), 0);
    uint64_t s = tracker_begin(t, 0x50);
    ck_assert_uint_ne(s, 0);
    ck_assert_int_eq(tracker_commit(t, s, 0x58), 0);
    ck_assert_uint_eq(tracker_flush_lsn(t), 0x58);
    tracker_free(t);
}
END_TEST

START_TEST(test_seq_numbers)
{
    uint64_t prev = 0;
    for (int i = 0; i < 10; i++) {
        uint64_t s = tracker_begin(T, START + 0x100 * (i + 1));
        ck_assert_uint_ge(s, 1);
        ck_assert_uint_gt(s, prev); /* distinct, increasing */
        prev = s;
        ck_assert_int_eq(tracker_commit(T, s, START + 0x100 * (i + 1) + 8), 0);
    }
}
END_TEST

START_TEST(test_single_txn_needs_commit_and_all_acks)
{
    uint64_t s = tracker_begin(T, 0x2000);
    ck_assert_uint_ne(s, 0);
    ck_assert(!tracker_idle(T));
    ck_assert_uint_eq(tracker_pending_txns(T), 1);
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 3);
    FLUSH_EQ(START);

    ck_assert_int_eq(tracker_commit(T, s, 0x2010), 0);
    FLUSH_EQ(START);
    ck_assert(!tracker_idle(T));
    ck_assert_uint_eq(tracker_pending_txns(T), 1);

    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 2);
    FLUSH_EQ(START);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    FLUSH_EQ(START);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 0);
    FLUSH_EQ(0x2010);
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
    ck_assert(tracker_idle(T));
    ck_assert(!tracker_failed(T));
}
END_TEST

START_TEST(test_acks_before_commit)
{
    uint64_t s = tracker_begin(T, 0x2000);
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 0);
    /* All acked but not committed: never flushable, not idle. */
    FLUSH_EQ(START);
    ck_assert(!tracker_idle(T));
    ck_assert_uint_eq(tracker_pending_txns(T), 1);
    ck_assert_int_eq(tracker_commit(T, s, 0x2010), 0);
    FLUSH_EQ(0x2010);
    ck_assert(tracker_idle(T));
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
}
END_TEST

START_TEST(test_out_of_order_acks)
{
    uint64_t s1 = txn(0x2000, 0x2010, 2);
    uint64_t s2 = txn(0x3000, 0x3010, 1);
    ck_assert_uint_eq(tracker_pending_events(T), 3);
    ck_assert_uint_eq(tracker_pending_txns(T), 2);

    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0); /* txn 2 complete first */
    FLUSH_EQ(START);
    ck_assert_uint_eq(tracker_pending_txns(T), 2);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(START);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0); /* txn 1 completes: jump */
    FLUSH_EQ(0x3010);
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 0);
    ck_assert(tracker_idle(T));
}
END_TEST

START_TEST(test_partial_prefix)
{
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = txn(0x3000, 0x3010, 1);
    uint64_t s3 = txn(0x4000, 0x4010, 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s3)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(0x2010); /* only txn 1: txn 2 still pending */
    ck_assert_uint_eq(tracker_pending_txns(T), 2);
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0);
    FLUSH_EQ(0x4010);
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
}
END_TEST

START_TEST(test_open_txn_blocks_later)
{
    /* Commit of txn 1 and all its acks done, txn 2 open: flush = txn 1. */
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = tracker_begin(T, 0x3000);
    ck_assert_uint_ne(s2, 0);
    ck_assert_int_eq(tracker_event_sent(T, s2, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(0x2010);
    ck_assert_uint_eq(tracker_pending_txns(T), 1);
    ck_assert_int_eq(tracker_commit(T, s2, 0x3010), 0);
    FLUSH_EQ(0x3010);
}
END_TEST

START_TEST(test_empty_txn_at_head)
{
    uint64_t s = tracker_begin(T, 0x2000);
    ck_assert_uint_ne(s, 0);
    FLUSH_EQ(START);
    ck_assert_int_eq(tracker_commit(T, s, 0x2008), 0);
    FLUSH_EQ(0x2008);
    ck_assert(tracker_idle(T));
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
    /* A run of empty transactions. */
    for (int i = 1; i <= 5; i++) {
        s = tracker_begin(T, 0x2000 + 0x100 * i);
        ck_assert_int_eq(tracker_commit(T, s, 0x2008 + 0x100 * i), 0);
        FLUSH_EQ(0x2008 + 0x100 * i);
    }
}
END_TEST

START_TEST(test_empty_txn_behind_incomplete)
{
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    txn(0x3000, 0x3010, 0); /* empty */
    txn(0x3100, 0x3110, 0); /* empty */
    FLUSH_EQ(START);
    ck_assert_uint_eq(tracker_pending_txns(T), 3);
    ck_assert(!tracker_idle(T));
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(0x3110);
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
}
END_TEST

START_TEST(test_keepalive_idle)
{
    tracker_keepalive(T, 0x5000);
    FLUSH_EQ(0x5000);
    tracker_keepalive(T, 0x4000); /* never backwards */
    FLUSH_EQ(0x5000);
    tracker_keepalive(T, START); /* below the start too */
    FLUSH_EQ(0x5000);
    tracker_keepalive(T, 0x6000);
    FLUSH_EQ(0x6000);
    ck_assert(tracker_idle(T));
    /* After a completed transaction. */
    uint64_t s = txn(0x7000, 0x7010, 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    FLUSH_EQ(0x7010);
    tracker_keepalive(T, 0x7008);
    FLUSH_EQ(0x7010);
    tracker_keepalive(T, 0x8000);
    FLUSH_EQ(0x8000);
}
END_TEST

START_TEST(test_keepalive_below_start)
{
    tracker_keepalive(T, START - 1);
    FLUSH_EQ(START);
    tracker_keepalive(T, 0);
    FLUSH_EQ(START);
}
END_TEST

START_TEST(test_keepalive_open_txn)
{
    /* Open transaction with no events yet. */
    uint64_t s = tracker_begin(T, 0x2000);
    ck_assert_uint_ne(s, 0);
    tracker_keepalive(T, 0x9000);
    FLUSH_EQ(START);
    /* With events. */
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    tracker_keepalive(T, 0x9000);
    FLUSH_EQ(START);
    /* All events acked, still open. */
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    tracker_keepalive(T, 0x9000);
    FLUSH_EQ(START);
    /* Once nothing is in flight, the remembered walEnd is confirmed without
     * waiting for another keepalive (the server may not send one). */
    ck_assert_int_eq(tracker_commit(T, s, 0x2010), 0);
    FLUSH_EQ(0x9000);
}
END_TEST

START_TEST(test_keepalive_pending_events)
{
    uint64_t s = txn(0x2000, 0x2010, 2);
    tracker_keepalive(T, 0x9000);
    FLUSH_EQ(START);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    tracker_keepalive(T, 0x9000);
    FLUSH_EQ(START);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    FLUSH_EQ(0x9000);
    ck_assert(tracker_idle(T));
}
END_TEST

START_TEST(test_keepalive_forgotten_on_abort)
{
    /* A keepalive seen while a transaction streamed, then the stream broke:
     * the walEnd must not be confirmed past the dropped transaction. */
    uint64_t s = tracker_begin(T, 0x2000);
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    tracker_keepalive(T, 0x2010);
    tracker_abort_open(T);
    ck_assert(tracker_idle(T));
    FLUSH_EQ(START);
    /* A keepalive of the new stream applies as usual. */
    tracker_keepalive(T, 0x1800);
    FLUSH_EQ(0x1800);
}
END_TEST

START_TEST(test_keepalive_not_after_failure)
{
    uint64_t s = txn(0x2000, 0x2010, 1);
    tracker_fail(T, tracker_txn_tag(s));
    tracker_keepalive(T, 0x9000);
    FLUSH_EQ(START);
}
END_TEST

START_TEST(test_keepalive_pending_in_later_txn)
{
    /* txn 1 flushed, txn 2 committed but pending: not idle. */
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = txn(0x3000, 0x3010, 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(0x2010);
    ck_assert(!tracker_idle(T));
    tracker_keepalive(T, 0x9000);
    FLUSH_EQ(0x2010);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0);
    FLUSH_EQ(0x9000);
}
END_TEST

START_TEST(test_failure_freezes)
{
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = txn(0x3000, 0x3010, 2);
    uint64_t s3 = txn(0x4000, 0x4010, 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(0x2010);
    ck_assert(!tracker_failed(T));
    tracker_fail(T, tracker_txn_tag(s2));
    ck_assert(tracker_failed(T));
    (void)tracker_ack(T, tracker_txn_tag(s2)); /* the other event of the failed txn */
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s3)), 0);
    FLUSH_EQ(0x2010);
    /* A later empty transaction (if the tracker still accepts one). */
    uint64_t s4 = tracker_begin(T, 0x5000);
    if (s4 != 0) (void)tracker_commit(T, s4, 0x5010);
    FLUSH_EQ(0x2010);
    tracker_keepalive(T, 0x9000); /* frozen: not even a keepalive */
    FLUSH_EQ(0x2010);
    ck_assert(tracker_failed(T));
}
END_TEST

START_TEST(test_failure_of_first_txn)
{
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = txn(0x3000, 0x3010, 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0);
    tracker_fail(T, tracker_txn_tag(s1));
    ck_assert(tracker_failed(T));
    FLUSH_EQ(START);
    tracker_keepalive(T, 0x9000);
    FLUSH_EQ(START);
}
END_TEST

START_TEST(test_failure_of_open_txn)
{
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = tracker_begin(T, 0x3000);
    ck_assert_int_eq(tracker_event_sent(T, s2, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_event_sent(T, s2, &(uint64_t){0}), 0);
    tracker_fail(T, tracker_txn_tag(s2));
    ck_assert(tracker_failed(T));
    (void)tracker_ack(T, tracker_txn_tag(s2));
    (void)tracker_commit(T, s2, 0x3010);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    /* Earlier transaction may still complete, never past the failed one. */
    ck_assert_uint_le(tracker_flush_lsn(T), 0x2010);
    ck_assert_uint_ge(tracker_flush_lsn(T), START);
    uint64_t s3 = tracker_begin(T, 0x4000);
    if (s3 != 0) (void)tracker_commit(T, s3, 0x4010);
    tracker_keepalive(T, 0x9000);
    ck_assert_uint_le(tracker_flush_lsn(T), 0x2010);
}
END_TEST

START_TEST(test_failure_later_earlier_completes)
{
    /* txn 2 fails while txn 1 is still pending; txn 1 then completes. The
     * flush position may reach txn 1's end but never txn 2's or later. */
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = txn(0x3000, 0x3010, 1);
    uint64_t s3 = txn(0x4000, 0x4010, 1);
    tracker_fail(T, tracker_txn_tag(s2));
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s3)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    lsn_t f = tracker_flush_lsn(T);
    ck_assert_msg(f == START || f == 0x2010, "flush %" PRIx64, f);
    tracker_keepalive(T, 0x9000);
    ck_assert_uint_eq(tracker_flush_lsn(T), f);
}
END_TEST

START_TEST(test_abort_open)
{
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = tracker_begin(T, 0x3000);
    ck_assert_uint_ne(s2, 0);
    ck_assert_int_eq(tracker_event_sent(T, s2, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_event_sent(T, s2, &(uint64_t){0}), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 3);
    ck_assert_uint_eq(tracker_pending_txns(T), 2);

    tracker_abort_open(T);
    /* The dropped transaction's events no longer count. */
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    /* Its late acks are ignored. */
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 1);
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    /* It cannot be committed nor receive events any more. */
    ck_assert_int_eq(tracker_event_sent(T, s2, &(uint64_t){0}), -1);
    ck_assert_int_eq(tracker_commit(T, s2, 0x3010), -1);
    FLUSH_EQ(START);

    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(0x2010);
    ck_assert(tracker_idle(T));
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
    ck_assert(!tracker_failed(T));

    /* The stream resumes: the same transaction comes again, a new seq. */
    uint64_t s3 = tracker_begin(T, 0x3000);
    ck_assert_uint_ne(s3, 0);
    ck_assert_uint_ne(s3, s2);
    ck_assert_int_eq(tracker_event_sent(T, s3, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_commit(T, s3, 0x3010), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 1); /* still ignored */
    FLUSH_EQ(0x2010);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s3)), 0);
    FLUSH_EQ(0x3010);
}
END_TEST

START_TEST(test_abort_open_pending_txns)
{
    /* "Transactions received (open or committed) but not yet flushable":
     * a dropped transaction is neither open nor committed. */
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = tracker_begin(T, 0x3000);
    ck_assert_int_eq(tracker_event_sent(T, s2, &(uint64_t){0}), 0);
    ck_assert_uint_eq(tracker_pending_txns(T), 2);
    tracker_abort_open(T);
    ck_assert_uint_eq(tracker_pending_txns(T), 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
}
END_TEST

START_TEST(test_abort_open_then_idle_keepalive)
{
    uint64_t s = tracker_begin(T, 0x3000);
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    tracker_abort_open(T);
    ck_assert(tracker_idle(T));
    ck_assert_uint_eq(tracker_pending_events(T), 0);
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
    FLUSH_EQ(START);
    tracker_keepalive(T, 0x2000);
    FLUSH_EQ(0x2000);
}
END_TEST

START_TEST(test_abort_nothing_open)
{
    uint64_t s = txn(0x2000, 0x2010, 1);
    tracker_abort_open(T); /* no open transaction: nothing happens */
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    ck_assert_uint_eq(tracker_pending_txns(T), 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    FLUSH_EQ(0x2010);
    tracker_abort_open(T);
    FLUSH_EQ(0x2010);
    ck_assert(tracker_idle(T));
}
END_TEST

START_TEST(test_double_ack)
{
    /* Open transaction: one event sent, acked twice. */
    uint64_t s = tracker_begin(T, 0x2000);
    ck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), -1);
    ck_assert_uint_eq(tracker_pending_events(T), 0); /* no underflow */
    /* An ack with no event sent at all. */
    uint64_t s2;
    ck_assert_int_eq(tracker_commit(T, s, 0x2010), 0);
    s2 = tracker_begin(T, 0x3000);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), -1);
    ck_assert_uint_eq(tracker_pending_events(T), 0);
}
END_TEST

START_TEST(test_double_ack_committed_pending)
{
    /* txn committed with 2 events; txn before it still pending so it is not
     * flushed; ack 1 of 2 then fine. Counter never underflows. */
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    uint64_t s2 = txn(0x3000, 0x3010, 2);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0);
    int rc = tracker_ack(T, tracker_txn_tag(s2)); /* third ack of a 2-event txn */
    ck_assert_int_ne(rc, 0);
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    FLUSH_EQ(START);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(0x3010);
}
END_TEST

START_TEST(test_ack_unknown_or_complete)
{
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(12345)), 1); /* never begun */
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(0)), 1);
    uint64_t s = txn(0x2000, 0x2010, 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s + 1000)), 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    FLUSH_EQ(0x2010);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 1); /* already complete */
    FLUSH_EQ(0x2010);
    ck_assert_uint_eq(tracker_pending_events(T), 0);
    ck_assert(tracker_idle(T));
}
END_TEST

START_TEST(test_begin_while_open)
{
    uint64_t s1 = tracker_begin(T, 0x2000);
    ck_assert_uint_ne(s1, 0);
    ck_assert_uint_eq(tracker_begin(T, 0x3000), 0);
    /* The first one is still the open transaction. */
    ck_assert_int_eq(tracker_event_sent(T, s1, &(uint64_t){0}), 0);
    ck_assert_uint_eq(tracker_pending_txns(T), 1);
    ck_assert_int_eq(tracker_commit(T, s1, 0x2010), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    FLUSH_EQ(0x2010);
}
END_TEST

START_TEST(test_event_sent_wrong_seq)
{
    ck_assert_int_eq(tracker_event_sent(T, 1, &(uint64_t){0}), -1); /* nothing open */
    uint64_t s1 = txn(0x2000, 0x2010, 1);
    ck_assert_int_eq(tracker_event_sent(T, s1, &(uint64_t){0}), -1); /* committed */
    uint64_t s2 = tracker_begin(T, 0x3000);
    ck_assert_int_eq(tracker_event_sent(T, s2 + 1, &(uint64_t){0}), -1);
    ck_assert_int_eq(tracker_event_sent(T, s1, &(uint64_t){0}), -1);
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    ck_assert_int_eq(tracker_event_sent(T, s2, &(uint64_t){0}), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 2);
}
END_TEST

START_TEST(test_commit_wrong_seq)
{
    ck_assert_int_eq(tracker_commit(T, 1, 0x2010), -1); /* nothing open */
    uint64_t s1 = tracker_begin(T, 0x2000);
    ck_assert_int_eq(tracker_commit(T, s1 + 1, 0x2010), -1);
    ck_assert_int_eq(tracker_commit(T, s1, 0x2010), 0);
    ck_assert_int_eq(tracker_commit(T, s1, 0x2020), -1); /* twice */
    FLUSH_EQ(0x2010);
}
END_TEST

START_TEST(test_commit_backwards)
{
    uint64_t s1 = txn(0x3000, 0x3010, 1);
    uint64_t s2 = tracker_begin(T, 0x2000);
    ck_assert_uint_ne(s2, 0);
    ck_assert_int_eq(tracker_commit(T, s2, 0x2010), -1);
    /* Whatever happened to s2, the flush never passes below or to a
     * backwards LSN once txn 1 completes. */
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    ck_assert_uint_ge(tracker_flush_lsn(T), 0x3010);
}
END_TEST

START_TEST(test_commit_backwards_after_flush)
{
    uint64_t s1 = txn(0x3000, 0x3010, 0);
    (void)s1;
    FLUSH_EQ(0x3010);
    uint64_t s2 = tracker_begin(T, 0x2000);
    ck_assert_uint_ne(s2, 0);
    ck_assert_int_eq(tracker_commit(T, s2, 0x2010), -1);
    ck_assert_uint_ge(tracker_flush_lsn(T), 0x3010);
}
END_TEST

START_TEST(test_pending_counters)
{
    uint64_t s1 = txn(0x2000, 0x2010, 3);
    uint64_t s2 = txn(0x3000, 0x3010, 2);
    uint64_t s3 = tracker_begin(T, 0x4000);
    ck_assert_int_eq(tracker_event_sent(T, s3, &(uint64_t){0}), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 6);
    ck_assert_uint_eq(tracker_pending_txns(T), 3);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s2)), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 4);
    ck_assert_uint_eq(tracker_pending_txns(T), 3); /* s2 done but not flushable */
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s1)), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    ck_assert_uint_eq(tracker_pending_txns(T), 1); /* only the open one */
    FLUSH_EQ(0x3010);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s3)), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 0);
    ck_assert_uint_eq(tracker_pending_txns(T), 1);
    ck_assert(!tracker_idle(T));
    ck_assert_int_eq(tracker_commit(T, s3, 0x4010), 0);
    ck_assert_uint_eq(tracker_pending_txns(T), 0);
    ck_assert(tracker_idle(T));
    FLUSH_EQ(0x4010);
}
END_TEST

START_TEST(test_many_events_one_txn)
{
    uint64_t s = tracker_begin(T, 0x2000);
    for (int i = 0; i < 100000; i++) qck_assert_int_eq(tracker_event_sent(T, s, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_commit(T, s, 0x2010), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 100000);
    for (int i = 0; i < 99999; i++) qck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    FLUSH_EQ(START);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(s)), 0);
    FLUSH_EQ(0x2010);
}
END_TEST

/* ---- randomized run against a reference model ---- */

static uint64_t rng;
static uint64_t rnd(void)
{
    uint64_t x = rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd() >> 33) % n; }

struct mtxn {
    uint64_t seq;
    lsn_t end;
    int nevents;   /* to send */
    int sent;
    int pending;   /* sent, not acked */
    int committed;
};

static void random_run(uint64_t seed, int ntx, int max_events, int ack_lag,
                       uint32_t ack_pct)
{
    rng = seed;
    lsn_t start = 0x100000 + rnd_below(0x1000);
    struct tracker *t = tracker_new(start);
    qck_assert_ptr_nonnull(t);

    struct mtxn *tx = calloc((size_t)ntx, sizeof(*tx));
    /* One entry per outstanding event: its transaction index. */
    size_t outcap = (size_t)ntx * (size_t)(max_events + 1);
    int *out = malloc(outcap * sizeof(int));
    size_t nout = 0;
    qck_assert_ptr_nonnull(tx);
    qck_assert_ptr_nonnull(out);

    lsn_t model_flush = start, prev_flush = start, last_lsn = start;
    int head = 0;  /* first transaction not in the completed prefix */
    int next = 0;  /* next transaction to begin */
    int open = -1; /* index of the open transaction */
    uint64_t model_pending = 0;
    long steps = 0;
    int max_inflight = 0;

    while (head < ntx) {
        uint32_t r = rnd_below(100);
        bool did_ack = false;
        if (nout > 0 && (r < ack_pct || (next >= ntx && open < 0) ||
                         nout > (size_t)ack_lag)) {
            /* Ack a random outstanding event (any transaction). */
            size_t k = rnd_below((uint32_t)nout);
            int i = out[k];
            out[k] = out[--nout];
            qck_assert_int_eq(tracker_ack(t, tracker_txn_tag(tx[i].seq)), 0);
            tx[i].pending--;
            model_pending--;
            did_ack = true;
        } else if (open >= 0) {
            struct mtxn *m = &tx[open];
            if (m->sent < m->nevents && rnd_below(4) != 0) {
                qck_assert_int_eq(tracker_event_sent(t, m->seq, &(uint64_t){0}), 0);
                m->sent++;
                m->pending++;
                model_pending++;
                out[nout++] = open;
            } else if (m->sent == m->nevents) {
                last_lsn += 1 + rnd_below(0x80);
                m->end = last_lsn;
                qck_assert_int_eq(tracker_commit(t, m->seq, m->end), 0);
                m->committed = 1;
                open = -1;
            }
        } else if (next < ntx) {
            if (rnd_below(10) == 0 && nout == 0) {
                /* Keepalive while idle: a little past the last commit. */
                qck_assert(tracker_idle(t));
                lsn_t w = last_lsn + rnd_below(0x40);
                tracker_keepalive(t, w);
                if (w > model_flush) model_flush = w;
                if (w > last_lsn) last_lsn = w;
            } else if (rnd_below(10) == 0) {
                /* Keepalive, maybe behind: no effect unless idle. */
                lsn_t w = last_lsn > 0x40 ? last_lsn - rnd_below(0x40) : last_lsn;
                bool idle = (nout == 0);
                qck_assert(tracker_idle(t) == idle);
                tracker_keepalive(t, w);
                if (idle && w > model_flush) model_flush = w;
            } else {
                struct mtxn *m = &tx[next];
                last_lsn += 1 + rnd_below(0x100);
                m->seq = tracker_begin(t, last_lsn);
                qck_assert_uint_ne(m->seq, 0);
                m->nevents = (int)rnd_below((uint32_t)max_events + 1);
                open = next++;
            }
        }
        (void)did_ack;

        /* Reference: longest completed prefix. */
        while (head < ntx && tx[head].committed && tx[head].pending == 0 &&
               tx[head].sent == tx[head].nevents) {
            if (tx[head].end > model_flush) model_flush = tx[head].end;
            head++;
        }
        lsn_t f = tracker_flush_lsn(t);
        qck_assert_msg(f == model_flush,
                      "step %ld: flush %" PRIX64 " want %" PRIX64
                      " (head txn %d of %d)",
                      steps, f, model_flush, head, ntx);
        qck_assert_msg(f >= prev_flush, "flush went backwards at step %ld", steps);
        prev_flush = f;
        qck_assert_uint_eq(tracker_pending_events(t), model_pending);
        size_t model_txns = (size_t)(next - head);
        if (next - head > max_inflight) max_inflight = next - head;
        qck_assert_msg(tracker_pending_txns(t) == model_txns,
                      "step %ld: pending_txns %zu want %zu", steps,
                      tracker_pending_txns(t), model_txns);
        qck_assert(tracker_idle(t) == (open < 0 && model_pending == 0));
        qck_assert(!tracker_failed(t));
        steps++;
    }
    qck_assert_uint_ge(tracker_flush_lsn(t), tx[ntx - 1].end);
    if (ack_lag >= 500) /* the scenario did hold many transactions at once */
        qck_assert_int_ge(max_inflight, 150);
    qck_assert_uint_eq(tracker_pending_events(t), 0);
    qck_assert_uint_eq(tracker_pending_txns(t), 0);
    qck_assert(tracker_idle(t));
    free(out);
    free(tx);
    tracker_free(t);
}

START_TEST(test_random_against_model)
{
    /* Several seeds and shapes: many small txns with short ack lag, fewer
     * big ones with long lag (acks spread over many transactions). */
    random_run(0x5EED0001ULL + (uint64_t)_i * 7919, 5000, 4, 20, 45);
    /* Acks lag far behind: hundreds of transactions in flight at once. */
    random_run(0xC0FFEE00ULL + (uint64_t)_i * 104729, 3000, 10, 800, 8);
    random_run(0xBADC0DEULL + (uint64_t)_i * 31, 3000, 1, 3, 30);
    random_run(0xFEEDULL + (uint64_t)_i, 4000, 2, 2000, 3);
}
END_TEST

/* Commit times are kept per transaction until it is flushed; the newest
 * flushed one is what replication lag is measured from. */
START_TEST(test_commit_times)
{
    ck_assert_int_eq(tracker_flushed_commit_time(T), 0);
    uint64_t a = tracker_begin(T, 0x2000);
    tracker_set_commit_time(T, a, 111);
    ck_assert_int_eq(tracker_event_sent(T, a, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_commit(T, a, 0x2010), 0);
    uint64_t b = tracker_begin(T, 0x3000);
    tracker_set_commit_time(T, b, 222);
    ck_assert_int_eq(tracker_event_sent(T, b, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_commit(T, b, 0x3010), 0);
    ck_assert_int_eq(tracker_commit_time(T, a), 111);
    ck_assert_int_eq(tracker_commit_time(T, b), 222);
    ck_assert_int_eq(tracker_commit_time(T, b + 1), 0); /* unknown */
    /* b completes first: nothing flushed yet, a still blocks. */
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(b)), 0);
    ck_assert_int_eq(tracker_flushed_commit_time(T), 0);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(a)), 0);
    ck_assert_int_eq(tracker_flushed_commit_time(T), 222);
    ck_assert_int_eq(tracker_commit_time(T, a), 0); /* popped */
    /* An aborted transaction reports no commit time. */
    uint64_t c = tracker_begin(T, 0x4000);
    tracker_set_commit_time(T, c, 333);
    ck_assert_int_eq(tracker_event_sent(T, c, &(uint64_t){0}), 0);
    uint64_t d = tracker_begin(T, 0x5000); /* refused: c is open */
    ck_assert_uint_eq(d, 0);
    tracker_abort_open(T);
    ck_assert_int_eq(tracker_commit_time(T, c), 0);
    ck_assert_int_eq(tracker_flushed_commit_time(T), 222);
}
END_TEST

START_TEST(test_stage_times)
{
    struct tracker_times tt;
    uint64_t a = tracker_begin(T, 0x2000);
    tracker_set_commit_time(T, a, 111);
    ck_assert_int_eq(tracker_event_sent(T, a, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_event_sent(T, a, &(uint64_t){0}), 0);
    tracker_set_produce_time(T, a, 5000);
    ck_assert(tracker_times(T, tracker_txn_tag(a), &tt));
    ck_assert_int_eq(tt.commit_time, 111);
    ck_assert_int_eq(tt.produce_us, 5000);
    tracker_set_produce_time(T, a, 6000); /* the latest handing wins */
    ck_assert_int_eq(tracker_commit(T, a, 0x2010), 0);
    ck_assert(tracker_times(T, tracker_txn_tag(a), &tt));
    ck_assert_int_eq(tt.produce_us, 6000);
    tracker_set_produce_time(T, a + 5, 1); /* unknown: ignored */
    ck_assert(!tracker_times(T, tracker_txn_tag(a + 5), &tt));
    ck_assert_int_eq(tt.commit_time, 0);
    ck_assert_int_eq(tt.produce_us, 0);
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(a), 7000), 0);
    ck_assert(tracker_times(T, tracker_txn_tag(a), &tt)); /* one event still pending */
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(a), 7100), 0);
    ck_assert(!tracker_times(T, tracker_txn_tag(a), &tt)); /* flushed */
    /* aborted: no times */
    uint64_t b = tracker_begin(T, 0x3000);
    tracker_set_produce_time(T, b, 8000);
    ck_assert_int_eq(tracker_event_sent(T, b, &(uint64_t){0}), 0);
    tracker_abort_open(T);
    ck_assert(!tracker_times(T, tracker_txn_tag(b), &tt));
}
END_TEST

/* A transaction with events becomes confirmable when the ACK that
 * completes the prefix up to it is served; a status confirming its end LSN
 * records the wait, once. */
START_TEST(test_ack_to_confirm)
{
    static struct latency_hist h;
    memset(&h, 0, sizeof(h));
    uint64_t a = txn(0x2000, 0x2010, 1);
    uint64_t b = txn(0x3000, 0x3010, 1);
    uint64_t c = txn(0x4000, 0x4010, 2);
    txn(0x5000, 0x5010, 0); /* no events: never counted */
    ck_assert(!tracker_confirm_due(T, 0x9000));
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(b), 1000), 0); /* a blocks b */
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 0);
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(a), 1500), 0); /* a and b at 1500 */
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 2);
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(c), 2000), 0);
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(c), 2500), 0); /* c (and the empty one) at 2500 */
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 3);
    FLUSH_EQ(0x5010);
    /* A status behind b's end confirms neither a nor b: they share a run. */
    ck_assert(!tracker_confirm_due(T, 0x200F));
    tracker_confirmed(T, 0x200F, 9999, &h);
    ck_assert_uint_eq(h.count, 0);
    tracker_confirmed(T, 0x3010, 4000, &h); /* a and b: 2500 us each */
    ck_assert_uint_eq(h.count, 2);
    ck_assert_uint_eq(h.sum_us, 5000);
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 1);
    ck_assert(tracker_confirm_due(T, 0x4010));
    tracker_confirmed(T, 0x6000, 4600, &h); /* c: 2100 us */
    ck_assert_uint_eq(h.count, 3);
    ck_assert_uint_eq(h.sum_us, 7100);
    ck_assert_int_eq(h.max_us, 2500);
    tracker_confirmed(T, 0x6000, 9000, &h); /* nothing left */
    ck_assert_uint_eq(h.count, 3);
    ck_assert(!tracker_confirm_due(T, UINT64_MAX));
}
END_TEST

/* A transaction whose events were all ACKed before its Commit counts from
 * its last ACK; an unknown ACK time (tracker_ack) and an aborted
 * transaction record nothing. */
START_TEST(test_ack_to_confirm_commit_and_unknown)
{
    static struct latency_hist h;
    memset(&h, 0, sizeof(h));
    uint64_t a = tracker_begin(T, 0x2000);
    ck_assert_int_eq(tracker_event_sent(T, a, &(uint64_t){0}), 0);
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(a), 300), 0);
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 0); /* not committed */
    ck_assert_int_eq(tracker_commit(T, a, 0x2010), 0);
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 1);
    uint64_t b = txn(0x3000, 0x3010, 1);
    ck_assert_int_eq(tracker_ack(T, tracker_txn_tag(b)), 0); /* no time: not counted */
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 1);
    uint64_t c = tracker_begin(T, 0x4000);
    ck_assert_int_eq(tracker_event_sent(T, c, &(uint64_t){0}), 0);
    tracker_abort_open(T);
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(c), 900), 1);
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 1);
    tracker_confirmed(T, tracker_flush_lsn(T), 1000, &h);
    ck_assert_uint_eq(h.count, 1);
    ck_assert_uint_eq(h.sum_us, 700);
}
END_TEST

/* Past TRACKER_MAX_RUNS distinct times, later transactions join the newest
 * run: every transaction is still counted once, none with a shorter wait
 * than its own. */
START_TEST(test_ack_to_confirm_bounded)
{
    static struct latency_hist h;
    memset(&h, 0, sizeof(h));
    int n = TRACKER_MAX_RUNS + 100;
    for (int i = 0; i < n; i++) {
        uint64_t s = txn(0x10000 + 0x100 * (lsn_t)i, 0x10010 + 0x100 * (lsn_t)i, 1);
        ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(s), 1000 + i), 0);
    }
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), (uint64_t)n);
    int64_t now = 1000 + n;
    tracker_confirmed(T, tracker_flush_lsn(T), now, &h);
    ck_assert_uint_eq(h.count, (uint64_t)n);
    ck_assert_uint_eq(tracker_unconfirmed_txns(T), 0);
    /* exact: sum of (now - (1000 + i)) = sum of (n - i) for i < n */
    uint64_t exact = (uint64_t)n * (uint64_t)(n + 1) / 2;
    ck_assert_uint_ge(h.sum_us, exact);
    /* the last 101 took the time of run TRACKER_MAX_RUNS - 1 */
    uint64_t over = 0;
    for (int i = TRACKER_MAX_RUNS; i < n; i++) over += (uint64_t)(i - (TRACKER_MAX_RUNS - 1));
    ck_assert_uint_eq(h.sum_us, exact + over);
    /* the queue is reused after it emptied */
    uint64_t s = txn(0x900000, 0x900010, 1);
    ck_assert_int_eq(tracker_ack_at(T, tracker_txn_tag(s), 50), 0);
    tracker_confirmed(T, 0x900010, 80, &h);
    ck_assert_uint_eq(h.count, (uint64_t)n + 1);
}
END_TEST

/* ---- delivery tags and progress inside a transaction ---- */

/* Sends n events of the open transaction s; their tags into tags[]. */
static void send_n(uint64_t s, int n, uint64_t *tags)
{
    for (int i = 0; i < n; i++) qck_assert_int_eq(tracker_event_sent(T, s, &tags[i]), 0);
}

START_TEST(test_tags_name_txn_and_ordinal)
{
    uint64_t s = tracker_begin(T, 0x2000), tags[3];
    send_n(s, 3, tags);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_ne(tags[i], 0);
        ck_assert_uint_eq(tracker_tag_txn(tags[i]), (uint32_t)s);
        ck_assert_uint_eq((uint32_t)tags[i], (uint32_t)(i + 1));
    }
    ck_assert_uint_eq((uint32_t)tracker_txn_tag(s), TRACKER_ORDINAL_UNKNOWN);
}
END_TEST

START_TEST(test_progress_is_the_acked_prefix)
{
    struct tracker_progress p;
    uint64_t s = tracker_begin(T, 0x2000), tags[5];
    send_n(s, 5, tags);
    ck_assert(!tracker_progress(T, &p)); /* nothing ACKed */
    ck_assert_int_eq(tracker_ack(T, tags[1]), 0);
    ck_assert(!tracker_progress(T, &p)); /* 0 is not: no prefix */
    ck_assert_int_eq(tracker_ack(T, tags[0]), 0);
    ck_assert(tracker_progress(T, &p));
    ck_assert_uint_eq(p.txn_lsn, 0x2000); /* the Begin's final_lsn */
    ck_assert_uint_eq(p.acked, 2);
    ck_assert_int_eq(tracker_ack(T, tags[3]), 0);
    ck_assert(tracker_progress(T, &p));
    ck_assert_uint_eq(p.acked, 2); /* 2 still out */
    ck_assert_int_eq(tracker_ack(T, tags[2]), 0);
    ck_assert(tracker_progress(T, &p));
    ck_assert_uint_eq(p.acked, 4);
    ck_assert_int_eq(tracker_ack(T, tags[3]), -1); /* double ACK of one ordinal */
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    ck_assert_int_eq(tracker_ack(T, tags[4]), 0);
    ck_assert_int_eq(tracker_commit(T, s, 0x2010), 0);
    FLUSH_EQ(0x2010);
    ck_assert(!tracker_progress(T, &p)); /* flushed: the position says it all */
}
END_TEST

START_TEST(test_progress_of_the_oldest_only)
{
    /* Progress names the oldest transaction not flushed; a later one's
     * ACKs count only once it is the oldest. */
    struct tracker_progress p;
    uint64_t a[2], b[3];
    uint64_t s1 = tracker_begin(T, 0x2000);
    send_n(s1, 2, a);
    ck_assert_int_eq(tracker_commit(T, s1, 0x2010), 0);
    uint64_t s2 = tracker_begin(T, 0x3000);
    send_n(s2, 3, b);
    ck_assert_int_eq(tracker_ack(T, b[0]), 0);
    ck_assert_int_eq(tracker_ack(T, b[1]), 0);
    ck_assert(!tracker_progress(T, &p)); /* s1 has nothing ACKed */
    ck_assert_int_eq(tracker_ack(T, a[0]), 0);
    ck_assert(tracker_progress(T, &p));
    ck_assert_uint_eq(p.txn_lsn, 0x2000);
    ck_assert_uint_eq(p.acked, 1);
    ck_assert_int_eq(tracker_ack(T, a[1]), 0);
    FLUSH_EQ(0x2010);
    ck_assert(tracker_progress(T, &p)); /* now s2, open, with two ACKed */
    ck_assert_uint_eq(p.txn_lsn, 0x3000);
    ck_assert_uint_eq(p.acked, 2);
}
END_TEST

START_TEST(test_skipped_events_count_as_acked)
{
    struct tracker_progress p;
    uint64_t s = tracker_begin(T, 0x2000), tags[2];
    for (int i = 0; i < 3; i++) ck_assert_int_eq(tracker_event_skipped(T, s), 0);
    ck_assert_uint_eq(tracker_pending_events(T), 0);
    ck_assert(tracker_progress(T, &p));
    ck_assert_uint_eq(p.acked, 3);
    send_n(s, 2, tags);
    ck_assert_uint_eq((uint32_t)tags[0], 4); /* ordinal 3: after the skipped ones */
    ck_assert_int_eq(tracker_ack(T, tags[1]), 0);
    ck_assert(tracker_progress(T, &p));
    ck_assert_uint_eq(p.acked, 3);
    ck_assert_int_eq(tracker_ack(T, tags[0]), 0);
    ck_assert(tracker_progress(T, &p));
    ck_assert_uint_eq(p.acked, 5);
    ck_assert_int_eq(tracker_event_skipped(T, s + 1), -1); /* not the open one */
    ck_assert_int_eq(tracker_commit(T, s, 0x2010), 0);
    FLUSH_EQ(0x2010);
}
END_TEST

START_TEST(test_progress_gone_with_abort)
{
    struct tracker_progress p;
    uint64_t s = tracker_begin(T, 0x2000), tags[2];
    send_n(s, 2, tags);
    ck_assert_int_eq(tracker_ack(T, tags[0]), 0);
    ck_assert(tracker_progress(T, &p));
    tracker_abort_open(T);
    ck_assert(!tracker_progress(T, &p));
    ck_assert_int_eq(tracker_ack(T, tags[1]), 1); /* late: ignored */
}
END_TEST

START_TEST(test_stale_tag_ignored)
{
    /* Tags keep 32 bits of seq: far more transactions than that may pass,
     * as long as the ring holds fewer. Push past 2^32 is too slow; check
     * that a stale tag of a flushed transaction is ignored instead. */
    uint64_t old[1];
    uint64_t s = tracker_begin(T, 0x2000);
    send_n(s, 1, old);
    ck_assert_int_eq(tracker_ack(T, old[0]), 0);
    ck_assert_int_eq(tracker_commit(T, s, 0x2010), 0);
    for (int i = 0; i < 100; i++) txn(0x3000 + 0x10 * (lsn_t)i, 0x3008 + 0x10 * (lsn_t)i, 0);
    uint64_t s2 = tracker_begin(T, 0x5000), cur[1];
    send_n(s2, 1, cur);
    ck_assert_int_eq(tracker_ack(T, old[0]), 1); /* stale: unknown */
    ck_assert_uint_eq(tracker_pending_events(T), 1);
    ck_assert_int_eq(tracker_ack(T, cur[0]), 0);
}
END_TEST

/* Random ACK orders over several transactions: progress is always the
 * oldest unflushed transaction's unbroken prefix, as a model counts it. */
START_TEST(test_progress_random_against_model)
{
    srand(99 + (unsigned)_i);
    enum { NTX = 40, MAXEV = 60 };
    uint64_t tags[NTX][MAXEV];
    bool acked[NTX][MAXEV] = {{false}};
    int nev[NTX];
    uint64_t out[NTX * MAXEV];
    int nout = 0;
    for (int x = 0; x < NTX; x++) {
        uint64_t s = tracker_begin(T, 0x10000 + 0x100 * (lsn_t)x);
        nev[x] = 1 + rand() % MAXEV;
        send_n(s, nev[x], tags[x]);
        for (int i = 0; i < nev[x]; i++) out[nout++] = (uint64_t)x << 32 | (uint64_t)i;
        qck_assert_int_eq(tracker_commit(T, s, 0x10000 + 0x100 * (lsn_t)x + 8), 0);
    }
    int oldest = 0;
    while (nout > 0) {
        int k = rand() % nout;
        int x = (int)(out[k] >> 32), i = (int)(uint32_t)out[k];
        out[k] = out[--nout];
        qck_assert_int_eq(tracker_ack(T, tags[x][i]), 0);
        acked[x][i] = true;
        while (oldest < NTX) {
            int j = 0;
            while (j < nev[oldest] && acked[oldest][j]) j++;
            if (j < nev[oldest]) break;
            oldest++;
        }
        struct tracker_progress p;
        bool has = tracker_progress(T, &p);
        if (oldest == NTX) {
            qck_assert(!has);
            continue;
        }
        int prefix = 0;
        while (prefix < nev[oldest] && acked[oldest][prefix]) prefix++;
        qck_assert_int_eq(has, prefix > 0);
        if (has) {
            qck_assert_uint_eq(p.txn_lsn, 0x10000 + 0x100 * (lsn_t)oldest);
            qck_assert_uint_eq(p.acked, (uint64_t)prefix);
        }
    }
    FLUSH_EQ(0x10000 + 0x100 * (NTX - 1) + 8);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tracker");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_initial_state);
    tcase_add_test(tc, test_start_zero);
    tcase_add_test(tc, test_seq_numbers);
    tcase_add_test(tc, test_single_txn_needs_commit_and_all_acks);
    tcase_add_test(tc, test_acks_before_commit);
    tcase_add_test(tc, test_out_of_order_acks);
    tcase_add_test(tc, test_partial_prefix);
    tcase_add_test(tc, test_open_txn_blocks_later);
    tcase_add_test(tc, test_empty_txn_at_head);
    tcase_add_test(tc, test_empty_txn_behind_incomplete);
    tcase_add_test(tc, test_keepalive_idle);
    tcase_add_test(tc, test_keepalive_below_start);
    tcase_add_test(tc, test_keepalive_open_txn);
    tcase_add_test(tc, test_keepalive_pending_events);
    tcase_add_test(tc, test_keepalive_forgotten_on_abort);
    tcase_add_test(tc, test_keepalive_not_after_failure);
    tcase_add_test(tc, test_keepalive_pending_in_later_txn);
    tcase_add_test(tc, test_failure_freezes);
    tcase_add_test(tc, test_failure_of_first_txn);
    tcase_add_test(tc, test_failure_of_open_txn);
    tcase_add_test(tc, test_failure_later_earlier_completes);
    tcase_add_test(tc, test_abort_open);
    tcase_add_test(tc, test_abort_open_pending_txns);
    tcase_add_test(tc, test_abort_open_then_idle_keepalive);
    tcase_add_test(tc, test_abort_nothing_open);
    tcase_add_test(tc, test_double_ack);
    tcase_add_test(tc, test_double_ack_committed_pending);
    tcase_add_test(tc, test_ack_unknown_or_complete);
    tcase_add_test(tc, test_begin_while_open);
    tcase_add_test(tc, test_event_sent_wrong_seq);
    tcase_add_test(tc, test_commit_wrong_seq);
    tcase_add_test(tc, test_commit_backwards);
    tcase_add_test(tc, test_commit_backwards_after_flush);
    tcase_add_test(tc, test_pending_counters);
    tcase_add_test(tc, test_many_events_one_txn);
    tcase_add_test(tc, test_commit_times);
    tcase_add_test(tc, test_stage_times);
    tcase_add_test(tc, test_ack_to_confirm);
    tcase_add_test(tc, test_ack_to_confirm_commit_and_unknown);
    tcase_add_test(tc, test_ack_to_confirm_bounded);
    tcase_add_loop_test(tc, test_random_against_model, 0, 4);
    tcase_add_test(tc, test_tags_name_txn_and_ordinal);
    tcase_add_test(tc, test_progress_is_the_acked_prefix);
    tcase_add_test(tc, test_progress_of_the_oldest_only);
    tcase_add_test(tc, test_skipped_events_count_as_acked);
    tcase_add_test(tc, test_progress_gone_with_abort);
    tcase_add_test(tc, test_stale_tag_ignored);
    tcase_add_loop_test(tc, test_progress_random_against_model, 0, 4);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
