/*
 * changes.h - the data path of one event inside the relay: a replication
 * frame's payload is decoded (decoder.h), an INSERT into the outbox is
 * mapped to a Kafka record (outbox.h) and produced through a sink
 * (sink.h); BEGIN/COMMIT open and close its transaction in the tracker,
 * and the broker's delivery report counts it off (or dead-letters it,
 * deadletter.h).
 *
 * Resuming inside a transaction: the offset file may say that the first N
 * events of the transaction committed at LSN X were ACKed before a stop
 * (tracker.h, offset.h). changes_skip_first() arms that; when X streams,
 * its first N outbox events are counted off as ACKed instead of produced
 * (again after a reconnect, if the stream breaks inside X), and once X
 * commits nothing more is skipped. If a transaction committed after X
 * streams first, X will not come and nothing is skipped (logged).
 *
 * Outbox messages (the table-less outbox, emitmsg.h): a transactional
 * logical decoding message whose prefix is a map's message_prefix is an
 * event like an inserted row, in stream order with the rows (statement
 * order inside a transaction): counted in the tracker, skipped on resume,
 * held under backpressure (the held event borrows the message's content
 * and the emitmsg reader's buffers, which stay valid while nothing more is
 * read), dead-lettered or halted on when its content cannot be read. A
 * non-transactional one is not published (it is not atomic with the
 * business change): outboxd_messages_ignored_total{reason=
 * "non_transactional"} counts it, and the first is logged.
 *
 * Backpressure: when the sink says the queue is full, the event that did
 * not fit is held here and the call returns STEP_HELD. The caller then
 * reads nothing more from the stream - so the stream's buffer and the
 * decoder's state that the held event borrows stay valid - serves delivery
 * reports, and calls changes_resume() on a later turn until it returns
 * STEP_OK: every event is produced once, in stream order.
 *
 * The stages of an event (enum metrics_stage), wall clock, from times the
 * relay reads once per loop turn, never per event:
 *   - commit-to-receive: the transaction's commit time (Begin) to the turn
 *     that read the event's frame (changes_received_at(), when the turn's
 *     first frame is read; every frame of the turn counts as read then);
 *   - receive-to-produce: from there to changes_produced_at() after the
 *     turn's reading (or, for an event held by backpressure, after the turn
 *     that finally sent it): an upper bound of when producer_send() took
 *     it, by at most the rest of that turn's reading;
 *   - produce-to-ack: from that time to its delivery report's
 *     served_unix_us; the time is kept per transaction (the latest turn
 *     that produced its events), so for a transaction read over several
 *     turns it understates its earlier events';
 *   - ack-to-confirm (relay.c, tracker_confirmed()): per transaction.
 * The first three add up to commit-to-ACK per event (for a transaction
 * read in one turn). Per event they cost two counter increments and one
 * histogram record (produce-to-ack); the rest is per transaction and per
 * turn.
 */
#ifndef OUTBOXD_CHANGES_H
#define OUTBOXD_CHANGES_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "deadletter.h"
#include "decode.h"
#include "decoder.h"
#include "emitmsg.h"
#include "latency.h"
#include "metrics.h"
#include "outbox.h"
#include "outboxset.h"
#include "producer.h"
#include "replproto.h"
#include "serde.h"
#include "sink.h"
#include "step.h"
#include "tracker.h"

struct changes {
    const struct config *cfg;
    struct outbox_set *outboxes; /* borrowed: the tables, the map of each */
    struct decoder *dec;    /* borrowed; replaced on every stream */
    struct tracker *trk;    /* borrowed; set by changes_start() */
    struct metrics *met;    /* borrowed */
    struct sink out;
    struct deadletter dlq;
    uint64_t cur_seq;     /* open transaction, 0 if none */
    uint64_t cur_tag;     /* delivery tag of ev (tracker.h) */
    lsn_t cur_commit_lsn; /* its commit record LSN (Begin final_lsn) */
    struct outbox_event ev; /* the event being produced; kept while held */
    struct serde_set *serdes; /* borrowed (changes_set_serdes()); NULL: none */
    struct serde *ev_serde;   /* ev's map's serde; NULL: its value is sent as built */
    bool ev_encoded;          /* ev's value is the serde's encoding already */
    char ev_subject[SERDE_SUBJECT_MAX]; /* ev's registry subject */
    int64_t serde_wait_ms;    /* when ev started waiting for its schema; 0: not */
    char serde_wait[700];     /* why it waits: subject and the registry's answer */
    struct emitmsg **emit;  /* owned: a reader per map (outboxes->n), each made at
                             * its map's first outbox message; NULL: none yet */
    bool nontx_logged;      /* a non-transactional outbox message was logged */
    bool ev_held;           /* ev met a full queue: changes_resume() */
    uint64_t events_produced;
    /* resuming inside a transaction (changes_skip_first()) */
    struct tracker_progress skip; /* skip.acked == 0: nothing to skip */
    uint64_t skip_seen;           /* its events skipped so far */
    uint64_t events_skipped;      /* in all: outboxd_events_skipped_total */
    struct latency_hist commit_to_ack; /* per ACKed event, microseconds */
    struct latency_hist heartbeat_rtt; /* heartbeat written to seen, us */
    struct latency_hist stages[STAGE__COUNT]; /* enum metrics_stage, us */
    /* the stages' bookkeeping (see above) */
    int64_t recv_us;         /* when this turn's frames were read; 0: not yet */
    int64_t cur_commit_time; /* the open transaction's (PG epoch us), 0 if unknown */
    uint64_t recv_events;    /* its events read at recv_us, not yet recorded */
    uint64_t batch_events;   /* events produced since changes_produced_at(), all read
                              * at recv_us ... */
    uint64_t batch_first_seq, batch_last_seq; /* ... in these transactions */
};

/* Sets c up; met's latency pointers are set to c's histograms. Free with
 * changes_free(). */
void changes_init(struct changes *c, const struct config *cfg, struct outbox_set *outboxes,
                  struct metrics *met, struct sink out);
void changes_free(struct changes *c);

/* The registry serdes of the outbox maps (config_serde_set()), borrowed:
 * an event of a map with a serde has its value encoded and framed
 * (serde.h) before it is produced; while its schema is not known the event
 * is held, like on a full queue. */
void changes_set_serdes(struct changes *c, struct serde_set *serdes);

/* When an event has waited for its schema since wait_ms or longer ago
 * (monotonic), why: "waiting since ... for the schema of subject ...";
 * else NULL. */
const char *changes_serde_waiting(const struct changes *c, int64_t since_ms);

/* A stream starts: the tracker (the same one across reconnects) and the
 * decoder of this stream, both borrowed. */
void changes_start(struct changes *c, struct tracker *trk, struct decoder *dec);

/* The frames handled from now on were read at now_unix_us (Unix epoch
 * microseconds): one clock read per loop turn that reads the stream. Ends
 * the batch of produced events first (changes_produced_at()). */
void changes_received_at(struct changes *c, int64_t now_unix_us);

/* Whether events were produced since the last changes_produced_at(): the
 * caller reads the clock only then. */
bool changes_produced_pending(const struct changes *c);

/* The events produced since the last call were handed to the producer by
 * now_unix_us: records their receive-to-produce and stores the time in
 * their transactions (produce-to-ack). Call it before serving delivery
 * reports. */
void changes_produced_at(struct changes *c, int64_t now_unix_us);

/* The first p.acked outbox events of the transaction committed at
 * p.txn_lsn were ACKed before a restart: skip them when it streams. */
void changes_skip_first(struct changes *c, struct tracker_progress p);

/* The skip still to come, when armed and not yet over (the offset file
 * keeps it meanwhile): fills *out and returns true. */
bool changes_skip_pending(const struct changes *c, struct tracker_progress *out);

/* The progress inside a transaction the offset file may store now: the
 * tracker's (tracker_progress()), or the skip still to come when the
 * tracker has none or less of that transaction. Returns false for none. */
bool changes_progress(const struct changes *c, struct tracker_progress *out);

/* Handles the payload of one XLogData frame. STEP_OK, STEP_HELD or
 * STEP_FATAL (logged). */
enum step changes_on_data(struct changes *c, const struct repl_frame *f);

/* Handles one decoded message (what changes_on_data() does after
 * decoding). Same results. */
enum step changes_on_message(struct changes *c, const struct repl_msg *m);

/* Whether an event or a dead letter waits for room in the queue. */
bool changes_held(const struct changes *c);

/* Sends what is held again. STEP_OK (nothing held any more), STEP_HELD or
 * STEP_FATAL. */
enum step changes_resume(struct changes *c);

/* Dead-letters what delivery reports queued (deadletter_flush()). */
enum step changes_flush_dead_letters(struct changes *c);

/* The stream broke: drops the open transaction (it will be sent again)
 * and whatever of it was held. */
void changes_abort_open(struct changes *c);

/* A delivery report (producer.h's callback, relayed): an ACK counts the
 * event off in the tracker; a failure dead-letters or fails it. Returns
 * true for an ACK. */
bool changes_on_delivery(struct changes *c, const struct delivery_report *dr);

#endif
