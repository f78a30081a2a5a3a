/*
 * tracker.h - which LSN may be confirmed to Postgres. Pure: no I/O.
 *
 * Every replicated transaction gets a sequence number at Begin. Each event
 * produced for it is counted as pending; the broker's delivery report
 * (in any order, across partitions) counts it off. The flush position is the
 * commit end LSN of the longest prefix of received transactions that are
 * committed and have no pending events. A transaction whose Commit has not
 * been seen is never flushable. When nothing at all is in flight (no open
 * transaction, no pending event), a keepalive's walEnd may be confirmed, so
 * an idle database does not pin WAL.
 *
 * A delivery failure marks its transaction failed: the flush position never
 * moves past it (tracker_failed() tells the relay to stop).
 *
 * Progress inside a transaction: each event gets its ordinal in its
 * transaction (0, 1, ...: its place in the stream, not its LSN, which
 * several rows of one multi-row INSERT or COPY share). The producer's
 * opaque is a delivery tag naming both (tracker_event_sent()), and the
 * tracker keeps each transaction's unbroken ACKed prefix (ackset.h). The
 * oldest unflushed transaction's Begin LSN and prefix are the progress
 * (tracker_progress()) the offset file stores, so a restart skips the
 * events the broker already has (tracker_event_skipped()).
 *
 * Each transaction also carries the times of its way through the relay,
 * for the stage latencies (relayobs.c logs them, metrics.c exports them):
 * the server's commit time, when its events were handed to the producer
 * and when its last ACK came. Once a transaction with events is flushed
 * (confirmable), the time it became so waits, with its end LSN, until a
 * standby status confirms that LSN (tracker_confirmed(): ack-to-confirm).
 * All of them are values the caller passes in: the tracker reads no clock.
 */
#ifndef OUTBOXD_TRACKER_H
#define OUTBOXD_TRACKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "latency.h"
#include "lsn.h"

struct tracker;

/* New tracker whose flush position starts at start_lsn (the stored offset or
 * the slot's confirmed position). NULL on out of memory. Free with
 * tracker_free(). */
struct tracker *tracker_new(lsn_t start_lsn);
void tracker_free(struct tracker *t);

/* Opens a transaction; returns its sequence number (>= 1), 0 on out of
 * memory. Only one transaction may be open at a time; opening one while
 * another is open is an error (returns 0). */
uint64_t tracker_begin(struct tracker *t, lsn_t final_lsn);

/* A delivery tag: the low 32 bits of the transaction's seq, then its
 * ordinal + 1 (TRACKER_ORDINAL_UNKNOWN: an event past 2^32 - 2 in one
 * transaction, or a tag naming only the transaction). Never 0. Sequence
 * numbers are dense and the ring holds far fewer than 2^32 transactions,
 * so the low bits find the transaction. */
#define TRACKER_ORDINAL_UNKNOWN 0xffffffffu

/* The tag naming transaction seq without an event (for tracker_fail()). */
uint64_t tracker_txn_tag(uint64_t seq);

/* The low 32 bits of the transaction seq in tag (for messages). */
uint32_t tracker_tag_txn(uint64_t tag);

/* Counts one more event of the open transaction seq as pending; *tag is
 * its delivery tag, the opaque its delivery report must carry. Returns 0,
 * or -1 if seq is not the open transaction. */
int tracker_event_sent(struct tracker *t, uint64_t seq, uint64_t *tag);

/* One more event of the open transaction seq was ACKed before a restart
 * and is not produced again: it takes its ordinal and counts as ACKed at
 * once. Returns 0, or -1 if seq is not the open transaction. */
int tracker_event_skipped(struct tracker *t, uint64_t seq);

/* Where the oldest transaction not yet flushed stands, when some of its
 * events are ACKed as an unbroken prefix: what a restart from the flush
 * position may skip. */
struct tracker_progress {
    lsn_t txn_lsn;  /* its Begin's final_lsn (the commit record's LSN) */
    uint64_t acked; /* its first acked events (in stream order) are ACKed */
};

/* Fills *out and returns true when that transaction exists and has an
 * ACKed prefix; false otherwise. */
bool tracker_progress(const struct tracker *t, struct tracker_progress *out);

/* Closes the open transaction seq with its commit end LSN. Returns 0 or -1
 * (seq not open, or end_lsn going backwards). */
int tracker_commit(struct tracker *t, uint64_t seq, lsn_t end_lsn);

/* Drops the open transaction without committing it (the stream broke
 * mid-transaction; it will be re-sent from an earlier position). Its
 * later acks are ignored. */
void tracker_abort_open(struct tracker *t);

/* The event of delivery tag tag was ACKed by the broker. Returns 0, 1 if
 * its transaction is unknown or already complete (ignored), -1 if it had
 * no pending event or this ordinal was ACKed already (a double ack: a
 * bug). The same as tracker_ack_at(t, tag, 0). */
int tracker_ack(struct tracker *t, uint64_t tag);

/* tracker_ack() when the delivery report was served at ack_us (Unix epoch
 * microseconds; 0: unknown). Every transaction with events that this ACK
 * makes confirmable (tag's, and committed complete ones behind it) became so
 * at ack_us; one made confirmable by its Commit instead (all its events
 * ACKed before) counts from its last ACK. They wait for
 * tracker_confirmed(). */
int tracker_ack_at(struct tracker *t, uint64_t tag, int64_t ack_us);

/* The event of tag (or its transaction, tracker_txn_tag()) failed
 * permanently. */
void tracker_fail(struct tracker *t, uint64_t tag);

/* A keepalive reported the server's walEnd: everything before it has been
 * sent to us. Advances the flush position to it when nothing is in flight;
 * otherwise remembers it and advances as soon as everything received so
 * far is ACKed (the server may send no other keepalive: it only pings a
 * client whose reported position is behind what it sent). */
void tracker_keepalive(struct tracker *t, lsn_t wal_end);

/* Records the server's commit timestamp of transaction seq (microseconds
 * since 2000-01-01, as in the stream; pgoutput and wal2json give it at
 * Begin). Ignored when seq is not in the tracker. */
void tracker_set_commit_time(struct tracker *t, uint64_t seq, int64_t commit_time);

/* Records when (Unix epoch microseconds) events of transaction seq were
 * last handed to the producer. Ignored when seq is not in the tracker. */
void tracker_set_produce_time(struct tracker *t, uint64_t seq, int64_t unix_us);

/* The times of a transaction in the tracker (0: not known). */
struct tracker_times {
    int64_t commit_time; /* tracker_set_commit_time() */
    int64_t produce_us;  /* tracker_set_produce_time() */
};

/* Fills *out for the transaction of tag and returns true; false (and
 * zeros) when it is unknown, aborted or already flushed. One lookup: the
 * delivery report's path calls it once per event. */
bool tracker_times(const struct tracker *t, uint64_t tag, struct tracker_times *out);

/* Transactions that became confirmable and wait for a status, grouped in
 * runs of the same time: at most TRACKER_MAX_RUNS runs are kept (about
 * 100 kB); past that, a newly confirmable transaction joins the newest run
 * and takes its (earlier) time, so its wait is over- rather than
 * under-stated. A status interval of 1 s at the 64 reports per clock read
 * of producer.h stays well below it. */
#define TRACKER_MAX_RUNS 4096

/* Whether tracker_confirmed(t, lsn, ...) would record anything: the oldest
 * waiting transaction ends at or before lsn (lets the caller read the
 * clock only then). */
bool tracker_confirm_due(const struct tracker *t, lsn_t lsn);

/* A standby status at now_us (Unix epoch microseconds) confirmed lsn:
 * records into h, per waiting transaction ending at or before lsn, now_us
 * minus when it became confirmable, and forgets them. A run is recorded
 * once lsn covers its newest transaction (a status confirming only part of
 * a run, e.g. capped at a publication proof, leaves it for the next). */
void tracker_confirmed(struct tracker *t, lsn_t lsn, int64_t now_us, struct latency_hist *h);

/* Transactions waiting for a status to confirm them. */
uint64_t tracker_unconfirmed_txns(const struct tracker *t);

/* Commit timestamp of the newest transaction confirmed by flush (0 before
 * the first): "now" minus it is the replication lag. */
int64_t tracker_flushed_commit_time(const struct tracker *t);

/* The LSN that may be confirmed now (monotonic). */
lsn_t tracker_flush_lsn(const struct tracker *t);

/* True when no transaction is open and no event is pending. */
bool tracker_idle(const struct tracker *t);

/* True once any event failed; the flush position is frozen before it. */
bool tracker_failed(const struct tracker *t);

/* Events sent but not yet ACKed, over all transactions. */
uint64_t tracker_pending_events(const struct tracker *t);

/* Transactions received (open or committed) but not yet flushable. */
size_t tracker_pending_txns(const struct tracker *t);

#endif
