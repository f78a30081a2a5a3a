/*
 * relaytxn.h - [delivery] mode = exactly_once in the logical relay: Kafka
 * transactions around the events, the progress record committed with
 * them, the confirmation capped at what committed, and starting over from
 * the committed position when a transaction fails. One of the relay's
 * files (relay_int.h); the pacing is ktxn.h, the progress topic
 * progress.h.
 *
 * The guarantee rests on three rules:
 *   - a Kafka transaction commits only once every message in it is ACKed,
 *     with a progress record (progress.h) of the position those messages
 *     complete: the events and the position commit atomically;
 *   - nothing past the last committed position is confirmed to the slot or
 *     written to the offset file (relaytxn_cap());
 *   - whatever breaks a transaction (the stream, a failed delivery, a
 *     failed commit) aborts it and restarts the stream from the committed
 *     position: read_committed consumers never see the aborted copies, and
 *     what comes again is the same events in the same order.
 * A second instance with the same transactional.id fences the first at
 * its start (init_transactions): the first's next commit fails, and it
 * stops.
 */
#ifndef OUTBOXD_RELAYTXN_H
#define OUTBOXD_RELAYTXN_H

#include <stdbool.h>

#include "confirm.h"
#include "producer.h"
#include "step.h"

struct relay;
struct relay_txn;

/* Whether the relay runs [delivery] mode = exactly_once. */
bool relaytxn_on(const struct relay *r);

/* slot_setup's position hook (slotsetup.h): the first time, makes the
 * transactional producer (fencing an older instance), then reads the
 * progress topic, falling back to the offset file when it holds no record
 * for this transactional.id; after that, the committed position. */
enum step relaytxn_position(void *relay, const char *system, struct offset_state *out,
                            int *have);

/* The stream (re)started from the position slot_open_stream() chose: the
 * slot confirmed to start, everything before from in Kafka (from >= start:
 * the stored acked, resume_stream_from()), progress inside the transaction
 * at from (NULL: none). */
void relaytxn_started(struct relay *r, const struct offset_state *identity, lsn_t start,
                      lsn_t from, const struct tracker_progress *progress);

/* A delivery report in this mode; returns whether it goes on to the data
 * path. A failed one breaks the transaction (relaytxn_turn() says
 * STEP_BROKEN), or, refused by the broker as poison, stops the relay. */
bool relaytxn_on_delivery(struct relay *r, const struct delivery_report *dr);

/* The transactional client hit a fatal error (err): STEP_FATAL when it was
 * fenced or is not authorized, else it is replaced and STEP_BROKEN (the
 * stream starts over from the committed position). */
enum step relaytxn_fatal(struct relay *r, const char *err);

/* A send found the open transaction failed (why: the producer's error):
 * the next turn aborts it and streams again. */
void relaytxn_failed(struct relay *r, const char *why);

/* An event was produced. */
void relaytxn_sent(struct relay_txn *t);

/* While true the stream is not read: a commit waits for the last ACKs. */
bool relaytxn_holds_stream(const struct relay *r);

/* The turn's transaction work: commits when due and every message is
 * reported. STEP_OK, STEP_BROKEN (the transaction failed: enter_recover()
 * starts over with relaytxn_reset()) or STEP_FATAL (fenced). */
enum step relaytxn_turn(struct relay *r);

/* Caps what the confirmer sees at the committed position. */
void relaytxn_cap(const struct relay *r, struct confirm_view *v);

/* The slot is held by another process (relaystate.c enter_standby(), with
 * no stream and nothing open): this instance's client is closed (the
 * holder, if it is the other instance of a hot standby pair, fences it
 * anyway), and the next start reads the progress topic afresh, since the
 * holder commits meanwhile. */
void relaytxn_stand_by(struct relay *r);

/* Aborts the open transaction, discards its reports and the tracker: the
 * next stream starts from the committed position. STEP_OK or STEP_FATAL. */
enum step relaytxn_reset(struct relay *r);

/* A graceful stop with every message reported: commits what is open. */
void relaytxn_finish(struct relay *r);

/* A fatal error: aborts what is open (best effort). */
void relaytxn_fail(struct relay *r);

#endif
