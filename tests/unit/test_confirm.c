/*
 * test_confirm.c - confirmation (include/ack/confirm.h), without a server: the
 * pure decisions (the position that may be confirmed, when the offset file
 * is written, the status deadline, what a status carries) and
 * confirmer_status(), the sequence the daemon runs, against a fake offset
 * file and a fake stream that check the ordering rules at each call.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "confirm.h"

#define INTERVAL 10000 /* status_interval_ms */
#define T0 1000000     /* "now" at the stream's start */

/* ---- the fake I/O ----
 * The file holds file_lsn after each successful write; a send records what
 * the status carried and what the file held at that moment. */
struct fake {
    int writes, sends;
    lsn_t file_lsn;       /* what the offset file holds */
    int fail_write;       /* the next write fails */
    int fail_send;        /* the next send fails */
    lsn_t written, flushed;
    lsn_t file_at_send;   /* file_lsn when the last status went out */
    int64_t file_commit_time; /* the commit time the file holds */
    bool file_progress;   /* the file holds progress: */
    struct tracker_progress progress;
    bool file_has_acked;  /* the file holds acked: */
    lsn_t file_acked;
    bool reply;
};

static struct fake fk;

static int fake_write(void *ctx, const char *path, const struct offset_state *st,
                      char *err, size_t errlen)
{
    (void)path;
    struct fake *f = ctx;
    f->writes++;
    if (f->fail_write) {
        f->fail_write = 0;
        snprintf(err, errlen, "fake: disk full");
        return -1;
    }
    f->file_lsn = st->lsn;
    f->file_commit_time = st->commit_time_us;
    f->file_progress = st->has_progress;
    f->progress = (struct tracker_progress){st->txn_lsn, st->txn_acked};
    f->file_has_acked = st->has_acked;
    f->file_acked = st->acked_lsn;
    /* The rules of every file written (offset.h, formats 3 and 5). */
    if (st->has_progress) ck_assert_uint_ge(st->txn_lsn, st->lsn);
    if (st->has_acked) ck_assert_uint_gt(st->acked_lsn, st->lsn);
    if (st->has_acked && st->has_progress) ck_assert_uint_ge(st->txn_lsn, st->acked_lsn);
    return 0;
}

static int fake_send(void *ctx, lsn_t written, lsn_t flushed, bool reply, char *err,
                     size_t errlen)
{
    struct fake *f = ctx;
    f->sends++;
    if (f->fail_send) {
        f->fail_send = 0;
        snprintf(err, errlen, "fake: connection lost");
        return -1;
    }
    f->written = written;
    f->flushed = flushed;
    f->file_at_send = f->file_lsn;
    f->reply = reply;
    /* The rules every status obeys, whatever led to it. */
    ck_assert_msg(flushed <= f->file_lsn, "status confirms %llu past the file's %llu",
                  (unsigned long long)flushed, (unsigned long long)f->file_lsn);
    ck_assert_uint_ge(written, flushed);
    return 0;
}

/* A confirmer streaming from start, file already at start. */
static struct confirmer c;
static struct confirm_view v;

static void setup_capped(lsn_t start, bool capped)
{
    memset(&fk, 0, sizeof(fk));
    fk.file_lsn = start;
    confirmer_init(&c, "/nonexistent/offsets", INTERVAL, capped,
                   (struct confirm_io){fake_write, fake_send, &fk});
    c.stored_lsn = start;
    c.last_write_ms = T0;
    confirmer_stream_started(&c, start, T0);
    v = (struct confirm_view){.acked = start, .idle = true, .connected = true,
                              .now_ms = T0};
}

static void setup(lsn_t start)
{
    setup_capped(start, false);
}

/* Events ACKed up to lsn; the stream has sent up to it. */
static void ack_events(lsn_t lsn, int n)
{
    confirmer_received(&c, lsn);
    v.acked = lsn;
    v.events_acked += (uint64_t)n;
}

/* A keepalive moved the tracker's flush position (no event). */
static void keepalive(lsn_t lsn)
{
    confirmer_received(&c, lsn);
    v.acked = lsn;
}

/* The offset file holds lsn (written for an earlier stream). */
static void file_holds(lsn_t lsn)
{
    c.stored_lsn = lsn;
    fk.file_lsn = lsn;
}

/* The next status carries written and flushed. */
static void expect_status_lsns(lsn_t written, lsn_t flushed)
{
    lsn_t w, f;
    confirmer_status_lsns(&c, &w, &f);
    ck_assert_uint_eq(f, flushed);
    ck_assert_uint_eq(w, written);
}

/* So many writes and sends so far; the file holds file_lsn. */
static void expect_io(int writes, int sends, lsn_t file_lsn)
{
    ck_assert_int_eq(fk.writes, writes);
    ck_assert_int_eq(fk.sends, sends);
    ck_assert_uint_eq(fk.file_lsn, file_lsn);
}

/* ---- confirm_position() ---- */

START_TEST(test_uncapped_is_acked)
{
    ck_assert_uint_eq(confirm_position(500, false, 0, 100), 500);
    ck_assert_uint_eq(confirm_position(500, false, 200, 100), 500);
}
END_TEST

START_TEST(test_capped_at_proven)
{
    ck_assert_uint_eq(confirm_position(500, true, 300, 100), 300);
    ck_assert_uint_eq(confirm_position(500, true, 500, 100), 500);
    ck_assert_uint_eq(confirm_position(500, true, 900, 100), 500); /* proof ahead */
}
END_TEST

START_TEST(test_never_below_floor)
{
    /* Nothing proven yet (0), or a proof older than the start position. */
    ck_assert_uint_eq(confirm_position(500, true, 0, 100), 100);
    ck_assert_uint_eq(confirm_position(500, true, 50, 100), 100);
    ck_assert_uint_eq(confirm_position(50, false, 0, 100), 100);
}
END_TEST

/* ---- ordering: file, then status ---- */

START_TEST(test_file_written_before_status)
{
    setup(1000);
    ack_events(2000, 3);
    ck_assert(confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, true, false), CONFIRM_OK);
    expect_io(1, 1, 2000);
    ck_assert_uint_eq(fk.file_at_send, 2000); /* the file held it when it was sent */
    ck_assert_uint_eq(fk.flushed, 2000);      /* ... and the same status carried it */
    ck_assert_uint_eq(fk.written, 2000);
    ck_assert(fk.reply);
    ck_assert_uint_eq(c.stored_lsn, 2000);
    ck_assert_uint_eq(c.sent_lsn, 2000);
    ck_assert_uint_eq(c.offset_writes, 1);
}
END_TEST

START_TEST(test_status_never_past_file)
{
    /* A keepalive-only advance not yet due for the file: the status goes
     * out (the connection must be kept alive) at the file's position. */
    setup(1000);
    keepalive(5000);
    v.now_ms = T0 + 1;
    ck_assert(!confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(0, 1, 1000);
    ck_assert_uint_eq(fk.flushed, 1000);
    ck_assert_uint_eq(fk.written, 5000); /* received: reported as written */
    ck_assert_uint_eq(c.sent_lsn, 1000);
}
END_TEST

START_TEST(test_status_never_past_received)
{
    /* The file is ahead of what this connection has received so far (it
     * was written for a later position than the start): the status stops
     * at received. */
    setup(500);
    file_holds(1000);
    confirmer_received(&c, 700);
    expect_status_lsns(700, 700);
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ck_assert_uint_eq(fk.flushed, 700);
    /* received never goes back */
    confirmer_received(&c, 600);
    ck_assert_uint_eq(c.received_lsn, 700);
}
END_TEST

START_TEST(test_status_at_start_before_anything_received)
{
    /* Nothing received yet: the validated start position is what the
     * server has sent, neither 0 nor the file's later position. */
    setup(500);
    file_holds(1000);
    expect_status_lsns(500, 500);
    /* A new stream never lowers the file's position, and raises it to a
     * later start. */
    confirmer_stream_started(&c, 400, T0);
    ck_assert_uint_eq(c.stored_lsn, 1000);
    confirmer_stream_started(&c, 1200, T0);
    ck_assert_uint_eq(c.stored_lsn, 1200);
    ck_assert_uint_eq(c.sent_lsn, 1200);
    ck_assert_uint_eq(c.received_lsn, 0);
    ck_assert_int_eq(c.next_status_ms, T0 + INTERVAL);
}
END_TEST

START_TEST(test_pgoutput_never_past_proof)
{
    setup_capped(1000, true);
    ack_events(5000, 2);
    /* Nothing proven since the start: nothing beyond it is confirmed. */
    ck_assert_uint_eq(confirmer_confirmable(&c, &v), 1000);
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_uint_eq(fk.file_lsn, 1000);
    ck_assert_uint_eq(fk.flushed, 1000);
    confirmer_proven(&c, 3000);
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_uint_eq(fk.file_lsn, 3000);
    ck_assert_uint_eq(fk.flushed, 3000);
    confirmer_proven(&c, 2000); /* an older proof does not take it back */
    ck_assert_uint_eq(c.proven_lsn, 3000);
    confirmer_proven(&c, 9000);
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_uint_eq(fk.flushed, 5000); /* a proof ahead: the ACKed position */
}
END_TEST

/* The commit time stored is always of a transaction at or before the
 * position stored: the newest ACKed one once the position reaches it,
 * else the one stored before (repair re-sends from it: a later one would
 * skip events). */
START_TEST(test_commit_time_never_ahead_of_position)
{
    setup_capped(1000, true);
    c.identity.commit_time_us = 111; /* what the file held at start */
    ack_events(5000, 2);
    v.acked_commit_time_us = 555; /* the transaction ending at 5000 */
    confirmer_proven(&c, 3000);   /* only 3000 may be confirmed */
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_uint_eq(fk.file_lsn, 3000);
    ck_assert_int_eq(fk.file_commit_time, 111);
    confirmer_proven(&c, 5000);
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_uint_eq(fk.file_lsn, 5000);
    ck_assert_int_eq(fk.file_commit_time, 555);
    /* A keepalive beyond it: no newer transaction, the time stays. */
    keepalive(6000);
    v.acked_commit_time_us = 555;
    confirmer_proven(&c, 6000);
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_uint_eq(fk.file_lsn, 6000);
    ck_assert_int_eq(fk.file_commit_time, 555);
    /* Nothing known (0) never erases a stored time. */
    keepalive(7000);
    v.acked_commit_time_us = 0;
    confirmer_proven(&c, 7000);
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_int_eq(fk.file_commit_time, 555);
}
END_TEST

START_TEST(test_uncapped_ignores_proof)
{
    setup(1000);
    ack_events(5000, 2);
    ck_assert_uint_eq(confirmer_confirmable(&c, &v), 5000);
}
END_TEST

/* ---- when the file is written ---- */

START_TEST(test_keepalive_advance_waits_interval)
{
    setup(1000);
    keepalive(2000);
    v.now_ms = T0 + INTERVAL - 1;
    ck_assert(!confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(0, 1, 1000);
    v.now_ms = T0 + INTERVAL;
    ck_assert(confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(1, 2, 2000);
    ck_assert_uint_eq(fk.flushed, 2000);
    /* The next keepalive-only advance waits a whole interval again. */
    keepalive(3000);
    v.now_ms = T0 + 2 * INTERVAL - 1;
    ck_assert(!confirmer_write_due(&c, &v, false));
    v.now_ms = T0 + 2 * INTERVAL;
    ck_assert(confirmer_write_due(&c, &v, false));
}
END_TEST

START_TEST(test_acked_events_written_at_once)
{
    setup(1000);
    ack_events(2000, 1);
    v.now_ms = T0 + 1;
    ck_assert(confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ck_assert_uint_eq(fk.file_lsn, 2000);
    ck_assert_int_eq(c.last_write_ms, T0 + 1);
    /* Once written, the same ACK count does not count as new events. */
    keepalive(3000);
    v.now_ms = T0 + 2;
    ck_assert(!confirmer_write_due(&c, &v, false));
    ack_events(4000, 1);
    ck_assert(confirmer_write_due(&c, &v, false));
}
END_TEST

START_TEST(test_no_write_without_advance)
{
    setup(1000);
    v.events_acked = 5; /* ACKed, but the position did not move */
    v.now_ms = T0 + INTERVAL;
    ck_assert(!confirmer_write_due(&c, &v, false));
    ck_assert(!confirmer_write_due(&c, &v, true));
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    expect_io(0, 1, 1000);
}
END_TEST

START_TEST(test_force_writes)
{
    setup(1000);
    keepalive(2000);
    v.now_ms = T0 + 1;
    ck_assert(confirmer_write_due(&c, &v, true));
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    expect_io(1, 1, 2000);
    ck_assert_uint_eq(fk.flushed, 2000);
}
END_TEST

START_TEST(test_rewrite_even_without_advance)
{
    /* Absent file, format 1 or a new timeline: written at the first
     * status, at the same position, then no more. */
    setup(1000);
    c.rewrite_offset = true;
    v.now_ms = T0 + 1;
    ck_assert(confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(1, 1, 1000);
    ck_assert(!c.rewrite_offset);
    ck_assert(!confirmer_write_due(&c, &v, false));
}
END_TEST

START_TEST(test_between_connections_file_only)
{
    setup(1000);
    ack_events(2000, 1);
    v.connected = false;
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    expect_io(1, 0, 2000);
    ck_assert_uint_eq(c.sent_lsn, 1000); /* nothing was confirmed to the server */
    ck_assert_uint_eq(c.statuses_sent, 0);
}
END_TEST

/* statuses_sent counts the statuses that reached the server, and only
 * those: sent_lsn is then what the server was told. */
START_TEST(test_statuses_sent_counted)
{
    setup(1000);
    ck_assert_uint_eq(c.statuses_sent, 0);
    ack_events(2000, 1);
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ck_assert_uint_eq(c.statuses_sent, 1);
    ck_assert_uint_eq(c.sent_lsn, fk.flushed);
    ck_assert_int_eq(confirmer_status(&c, &v, true, false), CONFIRM_OK); /* no move */
    ck_assert_uint_eq(c.statuses_sent, 2);
    fk.fail_send = 1;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_BROKEN);
    ck_assert_uint_eq(c.statuses_sent, 2);
    fk.fail_write = 1;
    ack_events(3000, 1);
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_FAILED);
    ck_assert_uint_eq(c.statuses_sent, 2);
}
END_TEST

/* ---- failures ---- */

START_TEST(test_failed_write_never_retried)
{
    setup(1000);
    ack_events(2000, 1);
    fk.fail_write = 1;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_FAILED);
    expect_io(1, 0, 1000); /* nothing confirmed after it */
    ck_assert(c.offset_failed);
    ck_assert_uint_eq(c.stored_lsn, 1000);
    ck_assert_uint_eq(c.offset_writes, 0);
    /* Later statuses, forced ones and further ACKs included, neither write
     * nor confirm. */
    ack_events(3000, 1);
    v.now_ms = T0 + 2 * INTERVAL;
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_FAILED);
    ck_assert_int_eq(confirmer_status(&c, &v, true, false), CONFIRM_FAILED);
    expect_io(1, 0, 1000);
    ck_assert_uint_eq(c.sent_lsn, 1000);
}
END_TEST

START_TEST(test_failed_send_is_broken)
{
    setup(1000);
    ack_events(2000, 1);
    v.now_ms = T0 + 5;
    fk.fail_send = 1;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_BROKEN);
    ck_assert_uint_eq(fk.file_lsn, 2000); /* the file was written first */
    ck_assert_uint_eq(c.sent_lsn, 1000);  /* not sent: not counted as sent */
    ck_assert_int_eq(c.next_status_ms, T0 + INTERVAL);
}
END_TEST

/* ---- the status deadline ---- */

START_TEST(test_deadline_interval)
{
    setup(1000);
    ck_assert_int_eq(confirmer_deadline(&c, &v), T0 + INTERVAL);
    v.now_ms = T0 + 7;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ck_assert_int_eq(c.last_status_ms, T0 + 7);
    ck_assert_int_eq(confirmer_deadline(&c, &v), T0 + 7 + INTERVAL);
}
END_TEST

/* Sets up the caught-up case: a status went out at T0 + 100, events were
 * ACKed since the last write (T0), the tracker is idle and the position
 * moved past what was sent. */
static void caught_up(void)
{
    setup(1000);
    v.now_ms = T0 + 100;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ack_events(2000, 1);
}

START_TEST(test_caught_up_fast_status)
{
    caught_up();
    ck_assert_int_eq(confirmer_status_deadline(&c, &v), T0 + 100 + STATUS_CAUGHT_UP_GAP_MS);
    /* That status writes and confirms the position; then back to the
     * interval. */
    v.now_ms = T0 + 100 + STATUS_CAUGHT_UP_GAP_MS;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ck_assert_uint_eq(fk.flushed, 2000);
    ck_assert_int_eq(confirmer_status_deadline(&c, &v), v.now_ms + INTERVAL);
}
END_TEST

START_TEST(test_caught_up_needs_idle)
{
    caught_up();
    v.idle = false;
    ck_assert_int_eq(confirmer_status_deadline(&c, &v), T0 + 100 + INTERVAL);
}
END_TEST

START_TEST(test_caught_up_needs_acks_since_write)
{
    caught_up();
    v.events_acked = c.acked_at_write; /* a keepalive-only advance */
    ck_assert_int_eq(confirmer_status_deadline(&c, &v), T0 + 100 + INTERVAL);
}
END_TEST

START_TEST(test_caught_up_needs_a_move)
{
    caught_up();
    v.acked = c.sent_lsn; /* ACKed, but nothing new to confirm */
    ck_assert_int_eq(confirmer_status_deadline(&c, &v), T0 + 100 + INTERVAL);
}
END_TEST

START_TEST(test_caught_up_never_later_than_interval)
{
    /* An interval shorter than the gap: the interval's deadline stands. */
    caught_up();
    c.next_status_ms = c.last_status_ms + STATUS_CAUGHT_UP_GAP_MS - 1;
    ck_assert_int_eq(confirmer_status_deadline(&c, &v), c.next_status_ms);
}
END_TEST

START_TEST(test_caught_up_capped_at_proof)
{
    /* pgoutput: ACKed past the last proof only: nothing confirmable moved,
     * so no fast status. */
    setup_capped(1000, true);
    v.now_ms = T0 + 100;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ack_events(2000, 1);
    ck_assert_int_eq(confirmer_status_deadline(&c, &v), T0 + 100 + INTERVAL);
    confirmer_proven(&c, 2000);
    ck_assert_int_eq(confirmer_status_deadline(&c, &v), T0 + 100 + STATUS_CAUGHT_UP_GAP_MS);
}
END_TEST

/* ---- progress inside a transaction ---- */

/* The tracker's progress: the first acked events of transaction txn. */
static void progress(lsn_t txn, uint64_t acked, int newly_acked)
{
    v.has_progress = true;
    v.progress = (struct tracker_progress){txn, acked};
    v.events_acked += (uint64_t)newly_acked;
    v.idle = false;
}

START_TEST(test_progress_written_without_a_move)
{
    setup(1000);
    progress(2000, 10, 10);
    v.now_ms = T0 + 1;
    ck_assert(confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(1, 1, 1000);
    ck_assert(fk.file_progress);
    ck_assert_uint_eq(fk.progress.txn_lsn, 2000);
    ck_assert_uint_eq(fk.progress.acked, 10);
    ck_assert_uint_eq(fk.flushed, 1000); /* the slot is not moved by it */
    /* Unchanged: not written again; more ACKed: written. */
    ck_assert(!confirmer_write_due(&c, &v, false));
    progress(2000, 25, 15);
    ck_assert(confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ck_assert_uint_eq(fk.progress.acked, 25);
    /* The transaction completes: the position moves, the progress goes. */
    v.has_progress = false;
    ack_events(2100, 5);
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(3, 3, 2100);
    ck_assert(!fk.file_progress);
    ck_assert(!c.stored_has_progress);
}
END_TEST

START_TEST(test_progress_moved_needs_acks_or_force)
{
    setup(1000);
    /* After a restart the skip to come is the view's progress, and the file
     * holds it already: nothing new to write. */
    c.stored_has_progress = true;
    c.stored_progress = (struct tracker_progress){2000, 7};
    progress(2000, 7, 0);
    ck_assert(!confirmer_write_due(&c, &v, false));
    ck_assert(!confirmer_write_due(&c, &v, true));
    /* A different progress without a new ACK waits for force. */
    progress(2000, 8, 0);
    ck_assert(!confirmer_write_due(&c, &v, false));
    ck_assert(confirmer_write_due(&c, &v, true));
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_uint_eq(fk.progress.acked, 8);
}
END_TEST

START_TEST(test_stored_progress_kept_while_ahead)
{
    setup(1000);
    c.stored_has_progress = true;
    c.stored_progress = (struct tracker_progress){5000, 7};
    /* Keepalives (the transaction has not streamed yet) move the position,
     * still before it: the file keeps the progress. */
    keepalive(3000);
    v.now_ms = T0 + INTERVAL;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(1, 1, 3000);
    ck_assert(fk.file_progress);
    ck_assert_uint_eq(fk.progress.txn_lsn, 5000);
    ck_assert_uint_eq(fk.progress.acked, 7);
    /* Past its commit, it says nothing any more: dropped. */
    keepalive(6000);
    v.now_ms = T0 + 2 * INTERVAL;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(2, 2, 6000);
    ck_assert(!fk.file_progress);
}
END_TEST

/* The race of real.pgoutput.test_large_txn (tests/REHEARSALS.md): idle, outboxd
 * confirms a keepalive that stands at the commit record of a transaction
 * not streamed yet; then the transaction streams and is stopped half-way.
 * Its progress is written though it commits exactly at the position:
 * PostgreSQL sends it again after a restart there. */
START_TEST(test_progress_at_the_confirmed_position_written)
{
    setup(1000);
    keepalive(2000);
    v.now_ms = T0 + INTERVAL;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(1, 1, 2000);
    ck_assert(!fk.file_progress);
    progress(2000, 10, 10);
    v.now_ms = T0 + INTERVAL + 1;
    ck_assert(confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    ck_assert(fk.file_progress);
    ck_assert_uint_eq(fk.file_lsn, 2000);
    ck_assert_uint_eq(fk.progress.txn_lsn, 2000);
    ck_assert_uint_eq(fk.progress.acked, 10);
}
END_TEST

/* ---- acked: safe to resume from, ahead of what may be confirmed ---- */

START_TEST(test_acked_runs_ahead_of_proof)
{
    /* pgoutput, nothing proven past the start: the ACKs are written as
     * acked between statuses, the position (and the status) stay. */
    setup_capped(1000, true);
    ack_events(5000, 10);
    v.idle = false;
    v.now_ms = T0 + ACKED_WRITE_MS - 1;
    ck_assert(!confirmer_acked_write_due(&c, &v));
    ck_assert_int_eq(confirmer_deadline(&c, &v), T0 + ACKED_WRITE_MS);
    v.now_ms = T0 + ACKED_WRITE_MS;
    ck_assert(confirmer_acked_write_due(&c, &v));
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    expect_io(1, 0, 1000); /* no status between statuses */
    ck_assert(fk.file_has_acked);
    ck_assert_uint_eq(fk.file_acked, 5000);
    ck_assert_uint_eq(c.stored_acked, 5000);
    ck_assert(!confirmer_acked_write_due(&c, &v)); /* written */
    ck_assert_int_eq(confirmer_deadline(&c, &v), T0 + INTERVAL);
}
END_TEST

START_TEST(test_acked_writes_apart)
{
    /* ACKs every 10 ms: one write per ACKED_WRITE_MS, not one per ACK. */
    setup_capped(1000, true);
    v.idle = false;
    int writes = 0;
    for (int ms = 10; ms <= 1000; ms += 10) {
        ack_events(1000 + (lsn_t)ms * 10, 1);
        v.now_ms = T0 + ms;
        if (v.now_ms >= confirmer_deadline(&c, &v)) {
            ck_assert(confirmer_acked_write_due(&c, &v));
            ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
            writes++;
            /* What is ACKed now is in the file. */
            ck_assert_uint_eq(fk.file_acked, v.acked);
        }
    }
    ck_assert_int_eq(writes, 1000 / ACKED_WRITE_MS);
    ck_assert_int_eq(fk.sends, 0);
}
END_TEST

START_TEST(test_acked_write_needs_acks)
{
    /* A keepalive moves the tracker's position without an event: the
     * interval rule for those holds (test_keepalive_advance_waits_interval). */
    setup_capped(1000, true);
    keepalive(5000);
    v.now_ms = T0 + 5 * ACKED_WRITE_MS;
    ck_assert(!confirmer_acked_write_due(&c, &v));
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    expect_io(0, 0, 1000);
    ck_assert_int_eq(confirmer_deadline(&c, &v), T0 + INTERVAL);
}
END_TEST

START_TEST(test_acked_never_goes_back)
{
    /* After a restart the file says 9000 is all ACKed, the new tracker
     * starts behind it: the file keeps 9000 until the stream passes it. */
    setup_capped(1000, true);
    c.stored_acked = 9000;
    ack_events(2000, 1);
    v.now_ms = T0 + ACKED_WRITE_MS;
    ck_assert(!confirmer_acked_write_due(&c, &v)); /* nothing past 9000 */
    confirmer_proven(&c, 1500);
    v.now_ms = T0 + INTERVAL;
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(1, 1, 1500);
    ck_assert(fk.file_has_acked);
    ck_assert_uint_eq(fk.file_acked, 9000);
    ack_events(9500, 1);
    v.now_ms += ACKED_WRITE_MS;
    ck_assert(confirmer_acked_write_due(&c, &v));
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    ck_assert_uint_eq(fk.file_acked, 9500);
}
END_TEST

START_TEST(test_proof_reaches_acked_at_the_status)
{
    /* Between statuses only acked moves; at the status after a proof the
     * position moves to it and acked (no longer ahead) is left out. */
    setup_capped(1000, true);
    ack_events(5000, 10);
    v.idle = false;
    v.now_ms = T0 + ACKED_WRITE_MS;
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    confirmer_proven(&c, 6000);
    v.now_ms = T0 + INTERVAL;
    ck_assert_int_eq(confirmer_deadline(&c, &v), T0 + INTERVAL);
    ck_assert(confirmer_write_due(&c, &v, false));
    ck_assert_int_eq(confirmer_status(&c, &v, false, false), CONFIRM_OK);
    expect_io(2, 1, 5000);
    ck_assert(!fk.file_has_acked);
    ck_assert_uint_eq(fk.flushed, 5000);
}
END_TEST

START_TEST(test_progress_behind_acked_left_out)
{
    /* The stored progress's transaction (3000) is all ACKed now (acked
     * 5000): it is not written again. */
    setup_capped(1000, true);
    c.stored_has_progress = true;
    c.stored_progress = (struct tracker_progress){3000, 7};
    ack_events(5000, 10);
    v.now_ms = T0 + ACKED_WRITE_MS;
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    ck_assert(fk.file_has_acked);
    ck_assert(!fk.file_progress);
}
END_TEST

START_TEST(test_progress_inside_written_apart)
{
    /* One large transaction after acked: its ACKed prefix grows, acked does
     * not; the progress is written between statuses too. */
    setup_capped(1000, true);
    v.idle = false;
    v.has_progress = true;
    v.progress = (struct tracker_progress){4000, 100};
    v.events_acked = 100;
    v.now_ms = T0 + ACKED_WRITE_MS;
    ck_assert(confirmer_acked_write_due(&c, &v));
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    ck_assert(fk.file_progress);
    ck_assert_uint_eq(fk.progress.acked, 100);
    v.progress.acked = 250;
    v.events_acked = 250;
    v.now_ms += ACKED_WRITE_MS;
    ck_assert(confirmer_acked_write_due(&c, &v));
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    ck_assert_uint_eq(fk.progress.acked, 250);
    ck_assert_int_eq(fk.sends, 0);
}
END_TEST

START_TEST(test_uncapped_position_written_apart)
{
    /* wal2json: nothing waits for a proof; the position itself is written
     * between statuses (no acked line: it would equal lsn). */
    setup(1000);
    ack_events(5000, 10);
    v.idle = false;
    v.now_ms = T0 + ACKED_WRITE_MS;
    ck_assert(confirmer_acked_write_due(&c, &v));
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    expect_io(1, 0, 5000);
    ck_assert(!fk.file_has_acked);
}
END_TEST

START_TEST(test_slow_writes_spaced_out)
{
    /* A write took 50 ms (a busy disk): the next waits 10 times that, so
     * writing takes at most about a tenth of the loop's time. */
    setup_capped(1000, true);
    v.idle = false;
    ack_events(2000, 1);
    v.now_ms = T0 + ACKED_WRITE_MS;
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_OK);
    confirmer_write_took(&c, 50);
    ck_assert_int_eq(confirmer_acked_write_gap(&c), 50 * ACKED_WRITE_COST_FACTOR);
    ack_events(3000, 1);
    v.now_ms += ACKED_WRITE_MS;
    ck_assert(!confirmer_acked_write_due(&c, &v));
    ck_assert_int_eq(confirmer_deadline(&c, &v),
                     T0 + ACKED_WRITE_MS + 50 * ACKED_WRITE_COST_FACTOR);
    v.now_ms = T0 + ACKED_WRITE_MS + 50 * ACKED_WRITE_COST_FACTOR;
    ck_assert(confirmer_acked_write_due(&c, &v));
    /* Fast again: back to ACKED_WRITE_MS. */
    confirmer_write_took(&c, 2);
    ck_assert_int_eq(confirmer_acked_write_gap(&c), ACKED_WRITE_MS);
}
END_TEST

START_TEST(test_store_after_failed_write)
{
    setup_capped(1000, true);
    ack_events(5000, 10);
    v.now_ms = T0 + ACKED_WRITE_MS;
    fk.fail_write = 1;
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_FAILED);
    ack_events(6000, 1);
    v.now_ms += ACKED_WRITE_MS;
    ck_assert_int_eq(confirmer_store(&c, &v), CONFIRM_FAILED); /* never retried */
    ck_assert_int_eq(fk.writes, 1);
    ck_assert_int_eq(confirmer_deadline(&c, &v), T0 + INTERVAL);
}
END_TEST

/* exactly_once's commit time reaches the file through the confirmer; 0
 * (not known) keeps the one held. */
START_TEST(test_commit_time_written)
{
    setup(1000);
    confirmer_commit_time(&c, 1700000000000000);
    confirmer_commit_time(&c, 0);
    ack_events(2000, 1);
    ck_assert_int_eq(confirmer_status(&c, &v, false, true), CONFIRM_OK);
    ck_assert_int_eq(fk.writes, 1);
    ck_assert_int_eq(fk.file_commit_time, 1700000000000000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("confirm");
    TCase *tc = tcase_create("position");
    tcase_add_test(tc, test_uncapped_is_acked);
    tcase_add_test(tc, test_capped_at_proven);
    tcase_add_test(tc, test_never_below_floor);
    suite_add_tcase(s, tc);
    tc = tcase_create("ordering");
    tcase_add_test(tc, test_file_written_before_status);
    tcase_add_test(tc, test_status_never_past_file);
    tcase_add_test(tc, test_status_never_past_received);
    tcase_add_test(tc, test_status_at_start_before_anything_received);
    tcase_add_test(tc, test_pgoutput_never_past_proof);
    tcase_add_test(tc, test_uncapped_ignores_proof);
    suite_add_tcase(s, tc);
    tc = tcase_create("writes");
    tcase_add_test(tc, test_keepalive_advance_waits_interval);
    tcase_add_test(tc, test_acked_events_written_at_once);
    tcase_add_test(tc, test_no_write_without_advance);
    tcase_add_test(tc, test_force_writes);
    tcase_add_test(tc, test_rewrite_even_without_advance);
    tcase_add_test(tc, test_between_connections_file_only);
    tcase_add_test(tc, test_statuses_sent_counted);
    tcase_add_test(tc, test_failed_write_never_retried);
    tcase_add_test(tc, test_failed_send_is_broken);
    suite_add_tcase(s, tc);
    tc = tcase_create("deadline");
    tcase_add_test(tc, test_deadline_interval);
    tcase_add_test(tc, test_caught_up_fast_status);
    tcase_add_test(tc, test_caught_up_needs_idle);
    tcase_add_test(tc, test_caught_up_needs_acks_since_write);
    tcase_add_test(tc, test_caught_up_needs_a_move);
    tcase_add_test(tc, test_caught_up_never_later_than_interval);
    tcase_add_test(tc, test_caught_up_capped_at_proof);
    tcase_add_test(tc, test_progress_written_without_a_move);
    tcase_add_test(tc, test_progress_moved_needs_acks_or_force);
    tcase_add_test(tc, test_stored_progress_kept_while_ahead);
    tcase_add_test(tc, test_progress_at_the_confirmed_position_written);
    tcase_add_test(tc, test_commit_time_never_ahead_of_position);
    suite_add_tcase(s, tc);
    tc = tcase_create("acked");
    tcase_add_test(tc, test_acked_runs_ahead_of_proof);
    tcase_add_test(tc, test_acked_writes_apart);
    tcase_add_test(tc, test_acked_write_needs_acks);
    tcase_add_test(tc, test_acked_never_goes_back);
    tcase_add_test(tc, test_proof_reaches_acked_at_the_status);
    tcase_add_test(tc, test_progress_behind_acked_left_out);
    tcase_add_test(tc, test_progress_inside_written_apart);
    tcase_add_test(tc, test_uncapped_position_written_apart);
    tcase_add_test(tc, test_slow_writes_spaced_out);
    tcase_add_test(tc, test_store_after_failed_write);
    tcase_add_test(tc, test_commit_time_written);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
