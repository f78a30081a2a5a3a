/*
 * changes.h - the data path of one event inside the relay: a replication
 * frame's payload is decoded (decoder.h), an INSERT into the outbox is
 * mapped to a Kafka record (outbox.h) and produced through a sink
 * (sink.h); BEGIN/COMMIT open and close its transaction in the tracker,
 * and the broker's delivery report counts it off (or dead-letters it,
 * deadletter.h).
 *
 * Backpressure: when the sink says the queue is full, the event that did
 * not fit is held here and the call returns STEP_HELD. The caller then
 * reads nothing more from the stream - so the stream's buffer and the
 * decoder's state that the held event borrows stay valid - serves delivery
 * reports, and calls changes_resume() on a later turn until it returns
 * STEP_OK: every event is produced once, in stream order.
 */
#ifndef OUTBOXD_CHANGES_H
#define OUTBOXD_CHANGES_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "deadletter.h"
#include "decode.h"
#include "decoder.h"
#include "latency.h"
#include "metrics.h"
#include "outbox.h"
#include "producer.h"
#include "replproto.h"
#include "sink.h"
#include "step.h"
#include "tracker.h"

struct changes {
    const struct config *cfg;
    struct outbox_map *map; /* borrowed */
    struct decoder *dec;    /* borrowed; replaced on every stream */
    struct tracker *trk;    /* borrowed; set by changes_start() */
    struct metrics *met;    /* borrowed */
    struct sink out;
    struct deadletter dlq;
    uint64_t cur_seq;     /* open transaction, 0 if none */
    lsn_t cur_commit_lsn; /* its commit record LSN (Begin final_lsn) */
    struct outbox_event ev; /* the event being produced; kept while held */
    bool ev_held;           /* ev met a full queue: changes_resume() */
    uint64_t events_produced;
    struct latency_hist commit_to_ack; /* per ACKed event, microseconds */
    struct latency_hist heartbeat_rtt; /* heartbeat written to seen, us */
};

/* Sets c up; met's latency pointers are set to c's histograms. Free with
 * changes_free(). */
void changes_init(struct changes *c, const struct config *cfg, struct outbox_map *map,
                  struct metrics *met, struct sink out);
void changes_free(struct changes *c);

/* A stream starts: the tracker (the same one across reconnects) and the
 * decoder of this stream, both borrowed. */
void changes_start(struct changes *c, struct tracker *trk, struct decoder *dec);

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
