/*
 * pollstate.h - the states of the polling relay's loop (pollrelay.c), with
 * no I/O: which phase the relay is in, what is due on this turn, and when
 * the next turn must wake at the latest. Unit-tested without a server.
 *
 * The relay waits in one place (evloop.h); everything that used to wait on
 * its own is a state here:
 *
 *   CHECK   the start-up checks, retried every pg_retry_max_ms up to
 *           POLLSTATE_CHECK_TRIES times (a stop runs the next one at once)
 *   RUN     connect (non-blocking, bounded by the connect timeout), claim,
 *           produce (a full producer queue parks the rest of the claimed
 *           batch: rows_pending), write outcomes, retention, backlog
 *   DRAIN   a graceful stop: wait for the outstanding deliveries until the
 *           drain deadline (PRODUCER_SHUTDOWN_FLUSH_MS after the stop)
 *   RECORD  write the outcomes, up to POLLSTATE_RECORD_TRIES tries, each
 *           one connect (when needed) and one write
 *   DONE    the loop ends
 *
 * A fatal error in CHECK or RUN ends the loop at once (DONE).
 */
#ifndef OUTBOXD_POLLSTATE_H
#define OUTBOXD_POLLSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Start-up checks tried before a failure is taken for a set-up mistake. */
#define POLLSTATE_CHECK_TRIES 3
/* Tries at recording the outcomes after a graceful stop. */
#define POLLSTATE_RECORD_TRIES 3
/* Longest single wait of the loop, so that timers are never missed by much. */
#define POLLSTATE_MAX_WAIT_MS 1000
/* Pause before producing the rest of a batch after the queue was full. */
#define POLLSTATE_QUEUE_RETRY_MS 100

enum poll_phase { PH_CHECK, PH_RUN, PH_DRAIN, PH_RECORD, PH_DONE };

/* The Postgres connection. */
enum poll_db { DB_DOWN, DB_CONNECTING, DB_UP };

struct pollstate {
    enum poll_phase phase;
    enum poll_db db;
    bool sql_ready;   /* the statements are built (after the first connect) */
    bool stop, fatal; /* a graceful stop was asked for; a fatal error */
    bool claim_now;   /* NOTIFY, a full batch or a SENT row: claim at once */
    bool rows_pending; /* claimed rows wait for room in the producer queue */
    bool retention, backlog; /* enabled */
    size_t inflight, outcomes; /* produced and not reported; not written */
    int batch;                 /* [polling] batch_size */
    int check_tries;           /* start-up checks failed so far */
    int record_tries;          /* RECORD: tries made */
    /* Deadlines, monotonic ms (clock.h). */
    int64_t next_check_ms, next_connect_ms, connect_deadline_ms, next_claim_ms,
        next_retention_ms, results_retry_ms, next_backlog_ms, next_produce_ms,
        drain_deadline_ms;
};

/* Whether each step of a RUN turn is due at now. */
bool pollstate_connect_due(const struct pollstate *s, int64_t now);
bool pollstate_connect_expired(const struct pollstate *s, int64_t now);
bool pollstate_claim_due(const struct pollstate *s, int64_t now);
bool pollstate_produce_due(const struct pollstate *s, int64_t now);
bool pollstate_results_due(const struct pollstate *s, int64_t now);
bool pollstate_retention_due(const struct pollstate *s, int64_t now);
bool pollstate_backlog_due(const struct pollstate *s, int64_t now);
bool pollstate_check_due(const struct pollstate *s, int64_t now);

/* Moves s to the phase its facts call for at now and returns it: CHECK
 * and RUN end (DONE) on a fatal error; RUN becomes DRAIN on a stop once no
 * claimed row waits to be produced (drain_deadline_ms = now + flush_ms);
 * DRAIN becomes RECORD when nothing is in flight or the deadline passed;
 * RECORD becomes DONE when every outcome is written or the tries are used
 * up. CHECK becomes RUN through pollstate_checked(). */
enum poll_phase pollstate_advance(struct pollstate *s, int64_t now, int64_t flush_ms);

/* The outcome of one start-up check at now: passed moves CHECK to RUN;
 * a failure schedules the next try retry_ms later, or is fatal after
 * POLLSTATE_CHECK_TRIES failures or on a stop. Returns true when the
 * failure was the last try (the relay gives up). */
bool pollstate_checked(struct pollstate *s, bool passed, int64_t now, int64_t retry_ms);

/* The latest time the next turn may wake at (a deadline at or before now:
 * do not wait; so after a fatal error). */
int64_t pollstate_wake_ms(const struct pollstate *s, int64_t now);

#endif
