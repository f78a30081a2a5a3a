/*
 * ktxn.h - the pacing and the committed position of exactly_once's Kafka
 * transactions (relaytxn.h does the I/O). Pure: no clock, no broker.
 *
 * A Kafka transaction is open from the first event produced after a commit
 * until it is due (ktxn_due()): KTXN events, or txn_max_ms after its first
 * event, or, with no event in it, the flush position moved past the
 * committed one (keepalives, transactions without outbox rows) and
 * KTXN_IDLE_MS passed since the last commit: the slot is confirmed only up
 * to a committed position, so an idle relay still commits one
 * progress-only transaction now and then to let the server release WAL.
 */
#ifndef OUTBOXD_KTXN_H
#define OUTBOXD_KTXN_H

#include <stdbool.h>
#include <stdint.h>

#include "lsn.h"
#include "offset.h"
#include "tracker.h"

/* The least time between two progress-only transactions. */
#define KTXN_IDLE_MS 1000

struct ktxn {
    uint64_t max_events;     /* [delivery] txn_max_events */
    int64_t max_ms;          /* [delivery] txn_max_ms */
    uint64_t events;         /* produced in the open transaction */
    int64_t first_ms;        /* monotonic time of its first */
    bool committing;         /* due: the stream is not read until it commits */
    bool started;            /* committed is set (ktxn_started()); stays set: */
    struct offset_state committed; /* every event up to it is in a committed
                                    * transaction (or was, before this run):
                                    * nothing past it is confirmed, whatever
                                    * happens to the client (relaytxn_cap()) */
    bool have_committed;     /* committed is exactly what committed last, and
                              * a restart resumes there; false once the
                              * client was replaced or discarded (a commit
                              * may have completed unseen, or another
                              * instance commits): the restart reads the
                              * progress topic again, while committed,
                              * possibly behind, still caps */
    int64_t last_commit_ms;  /* monotonic */
    uint64_t commits, aborts; /* in this run */
};

void ktxn_init(struct ktxn *k, uint64_t max_events, int64_t max_ms);

/* An event (or a dead letter) was produced into the open transaction. */
void ktxn_sent(struct ktxn *k, int64_t now_ms);

/* Whether the open transaction should commit now, given the tracker's
 * flush position (tracker_flush_lsn()): with no event in it, when flush is
 * past what the last commit holds all ACKed (offset_all_acked()). */
bool ktxn_due(const struct ktxn *k, lsn_t flush, int64_t now_ms);

/* The position a commit now would store: identity (the stream's, as the
 * offset file is written) with every transaction before flush in Kafka,
 * and progress when has_progress (a transaction partly produced: its first
 * progress.acked events). Its lsn is confirmable (<= flush): what the slot
 * may be confirmed to, which with pgoutput is no further than the last
 * publication proof (confirm.h); flush, when past it, is its acked, where
 * a restart streams from. (A restart confirms the stored lsn to the slot:
 * were it flush, the slot would pass the proof; resuming from confirmable
 * instead would send committed events again.) */
struct offset_state ktxn_position(const struct offset_state *identity, lsn_t flush,
                                  lsn_t confirmable, bool has_progress,
                                  struct tracker_progress progress);

/* The stream (re)starts from pos: everything before it counts as
 * committed. */
void ktxn_started(struct ktxn *k, const struct offset_state *pos, int64_t now_ms);

/* A transaction committed pos. */
void ktxn_committed(struct ktxn *k, const struct offset_state *pos, int64_t now_ms);

/* The open transaction was aborted: nothing in it counts. */
void ktxn_aborted(struct ktxn *k);

#endif
