/*
 * confirm.h - confirmation: every LSN the relay keeps, the offset file write
 * and the standby status update that confirms it to the server.
 *
 * The rules outboxd's no-loss guarantee rests on (README "What it
 * guarantees", "Offsets"), each decided by one function below:
 *   - the offset file is written before a status carries its position, and
 *     a status never confirms past the file (confirmer_status_lsns());
 *   - never past what the server sent: received wal_end, or the validated
 *     start before anything arrived (resume_clamp_flush());
 *   - with pgoutput, never past the last proven publication membership
 *     (confirm_position());
 *   - ACKed events are written at the next status and, between statuses,
 *     at most ACKED_WRITE_MS apart (without a status), a keepalive-only
 *     advance at most once per status_interval_ms, a forced status (stop,
 *     reconnect, fatal error) always (confirmer_write_due());
 *   - the file's acked (what is safe to resume from: every transaction
 *     before it delivered) runs ahead of its lsn (what may be confirmed:
 *     proven) and never goes back (confirmer_acked_to_store());
 *   - progress inside a transaction (tracker_progress()) is written with
 *     the position when it moved and events were ACKed since the last
 *     write; a stored one is kept while its transaction is still ahead of
 *     the position written (confirmer_progress_to_store());
 *   - a failed write is never retried and nothing is confirmed after it;
 *   - a status every status_interval_ms, and sooner once caught up
 *     (confirmer_deadline(), STATUS_CAUGHT_UP_GAP_MS).
 *
 * The decisions are pure: they read the confirmer and a confirm_view, what
 * the relay sees at one moment (the tracker's flush position, whether it
 * is idle, the ACK count, the clock). confirmer_status() executes them; its
 * I/O (the offset file, the stream) goes through struct confirm_io (the
 * daemon's: relayconfirm.h, confirm_io_stream()), so the
 * tests run the very sequence the daemon runs against fakes
 * (tests/unit/test_confirm.c), without a server.
 *
 * With pgoutput, an event reaches outboxd only while the outbox table is in
 * the publication (and the publication publishes inserts). That can change
 * under a running outboxd (ALTER PUBLICATION ... DROP TABLE): pgoutput then
 * skips the table's changes without a word. The monitor connection
 * (monitor.h) proves membership up to a WAL position; a position beyond the
 * last proven one is never confirmed, so the slot never moves past a point
 * where events may have been skipped unseen.
 */
#ifndef OUTBOXD_CONFIRM_H
#define OUTBOXD_CONFIRM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"
#include "offset.h"
#include "tracker.h"

/* A status goes out every status_interval_ms, and sooner (but at most
 * every STATUS_CAUGHT_UP_GAP_MS) once everything received is ACKed and the
 * flush position moved: a relay that has caught up says so at once, so the
 * slot (and the server's view of the lag) does not trail a drained stream
 * by up to a whole interval. While busy, one update per interval is
 * enough, and cheaper. */
#define STATUS_CAUGHT_UP_GAP_MS 20

/* While events are ACKed, the offset file is written (with acked, offset.h
 * format 5) at most this far apart, between statuses too: a crash re-sends
 * the events in flight plus at most this much of ACKed traffic, whatever
 * the status interval and however long the publication proof lags. */
#define ACKED_WRITE_MS 100
/* ... and further apart when a write takes long (two fsyncs on a busy
 * disk, on the event loop): at least this many times the last write's
 * duration, so that those writes never take more than about a tenth of
 * the loop's time. */
#define ACKED_WRITE_COST_FACTOR 10

/* confirmer_status() results. */
#define CONFIRM_OK 0
#define CONFIRM_FAILED (-1) /* the offset file write failed (now or before): stop */
#define CONFIRM_BROKEN (-2) /* the status could not be sent: reconnect */

/* The I/O of a status. Both return 0, or -1 with the reason in err. */
struct confirm_io {
    int (*write_offset)(void *ctx, const char *path, const struct offset_state *st,
                        char *err, size_t errlen);
    int (*send_status)(void *ctx, lsn_t written, lsn_t flushed, bool reply, char *err,
                       size_t errlen);
    void *ctx;
};

/* What the relay sees now; filled afresh for each decision. */
struct confirm_view {
    lsn_t acked;             /* tracker_flush_lsn(): every event up to it ACKed */
    int64_t acked_commit_time_us; /* commit time (Unix epoch) of the newest
                                   * transaction up to acked; 0 if none */
    bool idle;               /* tracker_idle(): nothing open, nothing pending */
    bool has_progress;       /* progress is set: */
    struct tracker_progress progress; /* tracker_progress(), or a skip to come
                                       * (changes_skip_pending()) */
    uint64_t events_acked;   /* events ACKed since start */
    uint64_t pending_events; /* tracker_pending_events(), for the debug line */
    size_t pending_txns;     /* tracker_pending_txns(), for the debug line */
    bool connected;          /* a stream to send the status on */
    int64_t now_ms;          /* monotonic clock */
};

struct confirmer {
    /* configuration (confirmer_init) */
    const char *offsets_file;
    int64_t interval_ms;     /* [postgres] status_interval_ms */
    struct confirm_io io;
    bool pub_capped;         /* pgoutput: confirm only proven positions */
    /* positions */
    lsn_t received_lsn;      /* newest wal_end seen on the stream */
    lsn_t stored_lsn;        /* last LSN in the offset file */
    lsn_t stored_acked;      /* ... and its acked: all ACKed before it (at most
                              * stored_lsn when the file has none) */
    bool stored_has_progress; /* ... and the progress it holds, if any */
    struct tracker_progress stored_progress;
    lsn_t start_lsn;         /* validated start of this connection (resume.h) */
    lsn_t sent_lsn;          /* last flush LSN sent to the server */
    lsn_t proven_lsn;        /* outbox published for commits before it */
    /* the offset file */
    struct offset_state identity; /* the stream the offset file is written for */
    bool rewrite_offset;     /* write the file at the next status even if the
                              * position did not move (absent, format 1, new
                              * timeline) */
    bool offset_failed;      /* a write failed (logged): never retried */
    int64_t last_write_ms;   /* when the offset file was last written */
    uint64_t acked_at_write; /* events_acked at the last write with a status */
    uint64_t acked_at_store; /* events_acked at the last write of any kind */
    uint64_t offset_writes;  /* successful writes (outboxd_offset_writes_total) */
    int64_t write_cost_ms;   /* how long the last write took (confirmer_write_took()) */
    /* the status */
    int64_t next_status_ms;  /* monotonic deadline of the next status */
    int64_t last_status_ms;  /* when the last one went out */
    uint64_t statuses_sent;  /* statuses that went out: each confirmed sent_lsn to the
                              * server (the relay's ack-to-confirm stage is measured
                              * at each) */
};

/* ---- pure ---- */

/* What may be confirmed now: the tracker's flush position acked, capped at
 * proven when capped is true (pgoutput; proven = 0 before the first proof),
 * and never below floor (the position already confirmed: going back
 * confirms nothing and a PG15 walsender would take it). */
lsn_t confirm_position(lsn_t acked, bool capped, lsn_t proven, lsn_t floor);

/* Everything zero but the configuration (offsets_file is borrowed). */
void confirmer_init(struct confirmer *c, const char *offsets_file, int64_t interval_ms,
                    bool pub_capped, struct confirm_io io);

/* A stream started at start (validated, resume.h): the file holds at least
 * it, it counts as sent, nothing is received yet, the next status is due a
 * whole interval from now. */
void confirmer_stream_started(struct confirmer *c, lsn_t start, int64_t now_ms);

/* A frame (or keepalive) with this wal_end arrived. */
void confirmer_received(struct confirmer *c, lsn_t wal_end);

/* The publication check proved membership up to lsn (pgoutput). */
void confirmer_proven(struct confirmer *c, lsn_t lsn);

/* The newest transaction delivered so far committed at commit_time_us
 * (Unix epoch): the identity written with the next position holds it, for
 * `outboxd repair`. 0 (not known yet) changes nothing. */
void confirmer_commit_time(struct confirmer *c, int64_t commit_time_us);

/* confirm_position() for this confirmer: v's ACKed position, capped, never
 * below what was sent. */
lsn_t confirmer_confirmable(const struct confirmer *c, const struct confirm_view *v);

/* The acked the next write stores: v's, or the stored one while v's is
 * behind it (after a restart, until the stream passes it). */
lsn_t confirmer_acked_to_store(const struct confirmer *c, const struct confirm_view *v);

/* Whether events ACKed since the last write moved acked past what the file
 * holds (or the progress inside a transaction after it) and the write gap
 * (confirmer_acked_write_gap()) has passed since: the file is written now,
 * without waiting for the status. */
bool confirmer_acked_write_due(const struct confirmer *c, const struct confirm_view *v);

/* The least time between two writes of ACKed events: ACKED_WRITE_MS, or
 * ACKED_WRITE_COST_FACTOR times the last write's duration when longer. */
int64_t confirmer_acked_write_gap(const struct confirmer *c);

/* The last write took ms (measured by the caller around the step that
 * wrote). */
void confirmer_write_took(struct confirmer *c, int64_t ms);

/* Whether confirmer_status() writes the offset file now. force: the
 * position must be stored now (stop, reconnect, fatal error). Events ACKed
 * since the last write move it at once; an advance by keepalives alone (or
 * transactions without events) is written at most once per interval_ms:
 * under a busy database whose other tables keep the walsender sending
 * keepalives, writing each would cost a write, two fsyncs and a rename on
 * the event loop tens of times a second. A file to be rewritten (absent,
 * format 1, new timeline) is written even if the position did not move. */
bool confirmer_write_due(const struct confirmer *c, const struct confirm_view *v,
                         bool force);

/* The progress the next write stores with position lsn (into *out; false:
 * none): v's, or else the stored one while its transaction commits after
 * lsn (it stays true: those events are ACKed). */
bool confirmer_progress_to_store(const struct confirmer *c, const struct confirm_view *v,
                                 lsn_t lsn, struct tracker_progress *out);

/* The LSNs the next status carries: flushed, what the file holds but never
 * past what the server sent (resume_clamp_flush()); written, what was
 * received (never below flushed). */
void confirmer_status_lsns(const struct confirmer *c, lsn_t *written, lsn_t *flushed);

/* When the next status is due (monotonic ms): the interval's deadline, or
 * STATUS_CAUGHT_UP_GAP_MS after the last one when the tracker is idle,
 * events were ACKed since the last write and the position moved. */
int64_t confirmer_status_deadline(const struct confirmer *c, const struct confirm_view *v);

/* When the confirmer next has work (monotonic ms): the status deadline, or
 * sooner the next write of ACKed events (ACKED_WRITE_MS after the last
 * write, while some wait to be written). */
int64_t confirmer_deadline(const struct confirmer *c, const struct confirm_view *v);

/* ---- the step that does the I/O ---- */

/*
 * Confirms what the offset file holds: first the tracker's flush LSN goes to
 * the file (durably, when due: see confirmer_write_due()), then the file's
 * position to the server, never beyond what the server has sent; with no
 * stream (between connections) the file is enough. The order matters: if
 * outboxd dies between the two, the file is ahead of the slot, which is
 * safe because it only ever holds ACKed positions; and the slot is never
 * ahead of the file, which is what lets a start tell that someone else
 * moved it (resume.h). reply: ask the server to answer. Logs what fails
 * (a failed write once: it is not retried, so the final status on the way
 * out does not log it again). Returns CONFIRM_OK, CONFIRM_FAILED or
 * CONFIRM_BROKEN.
 */
int confirmer_status(struct confirmer *c, const struct confirm_view *v, bool reply,
                     bool force);

/* Writes the offset file if due (confirmer_write_due()), without a status:
 * the writes between statuses. Returns CONFIRM_OK or CONFIRM_FAILED. */
int confirmer_store(struct confirmer *c, const struct confirm_view *v);

#endif
