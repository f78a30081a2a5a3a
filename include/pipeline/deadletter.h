/*
 * deadletter.h - what happens to an event that can never be published as
 * it is (a poison row, a record that cannot be decoded, a message the
 * broker refuses for good).
 *
 * Under [errors] policy = dlq it goes to the DLQ topic instead, with its
 * key and value and headers saying why. It stays pending in the tracker
 * until the DLQ write is ACKed, so the slot never moves past an event that
 * is in neither place. Under policy = halt (and for what cannot be set
 * aside under either policy) the tracker is frozen before it and the relay
 * stops. A dead letter that meets a full producer queue is held (STEP_HELD)
 * and sent again by deadletter_retry() on a later turn of the loop.
 */
#ifndef OUTBOXD_DEADLETTER_H
#define OUTBOXD_DEADLETTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "decoder.h"
#include "lsn.h"
#include "metrics.h"
#include "outbox.h"
#include "producer.h"
#include "replproto.h"
#include "sink.h"
#include "step.h"
#include "tracker.h"

/* The reason and code of a wal2json record that cannot be decoded. */
#define INVALID_RECORD "INVALID_RECORD"

/* What to dead-letter; slices borrowed (from the stream's buffer, or the
 * bytes a pending report owns) as long as it is being sent or held. */
struct dead_letter {
    uint64_t tag; /* the event's delivery tag (tracker.h): its ACK counts it off */
    struct slice key, value, event_id;
    bool key_null, value_null;
    char topic[OUTBOX_TOPIC_MAX]; /* original topic, "" if none */
    char topic_error[OUTBOX_TOPIC_ERROR_MAX]; /* why topic is "" */
    /* The original record's headers, as the normal path built them. */
    int nheaders;
    struct outbox_header headers[OUTBOX_ROW_HEADERS];
    char reason[256];
    char code[64];
    char commit_lsn[LSN_STRLEN];
    char record_lsn[LSN_STRLEN]; /* a record that could not be decoded: its LSN */
    bool too_large; /* the value itself is what is too large */
};

struct pending_dlq; /* a failed delivery copied out of its report */

struct deadletter {
    const struct config *cfg;
    struct tracker *trk; /* borrowed; set once the first stream starts */
    struct metrics *met; /* borrowed: failed, dead_lettered, produced */
    struct sink out;
    size_t max_value;          /* value bytes kept when truncating */
    struct dead_letter scratch; /* built by deadletter_reject()/_bad_record() */
    const struct dead_letter *held;   /* refused by a full queue, or NULL */
    struct pending_dlq *held_pending; /* owns held's bytes when it is a report's */
    struct pending_dlq *pending;      /* owned: queued by deadletter_queue(), in the
                                       * order the reports came (their events' order
                                       * on a partition), sent from the head */
    struct pending_dlq **pending_tail; /* where the next one is linked */
};

/* Sets dl up (nothing allocated yet). Free with deadletter_free(). */
void deadletter_init(struct deadletter *dl, const struct config *c, struct metrics *met,
                     struct sink out);
void deadletter_free(struct deadletter *dl);

/* A slice as a NUL-terminated string for a log field ("" when NULL). */
const char *deadletter_field(const char *data, size_t len, char *out, size_t outlen);

/* Whether the failed delivery dr is dead-lettered under c rather than
 * stopping: [errors] policy = dlq, a poison error (producer.h), a topic
 * that exists (a missing one is the operator's to create), and not a dead
 * letter's own delivery (to dlq_topic). The relay (changes.c) and
 * republish (rowpub.c) decide alike. */
bool deadletter_takes_report(const struct config *c, const struct delivery_report *dr);

/* The failed delivery dr as a dead letter: its key, value, event_id and
 * headers copied, its error the code, its tag kept. For a delivery
 * callback's caller, which produces it after producer_poll() returns.
 * NULL on out of memory; else the caller frees it with
 * deadletter_copy_free(). */
struct pending_dlq *deadletter_copy(const struct delivery_report *dr);

/* The dead letter a copy holds (valid until deadletter_copy_free()). */
const struct dead_letter *deadletter_copied(const struct pending_dlq *p);

/* Frees a copy of deadletter_copy() (NULL is fine). */
void deadletter_copy_free(struct pending_dlq *p);

/* From a delivery callback: copies the failed delivery dr, to be
 * dead-lettered by deadletter_flush() from the loop (the callback runs
 * inside producer_poll(), where producing again could recurse). On out of
 * memory fails dr's transaction instead. */
void deadletter_queue(struct deadletter *dl, const struct delivery_report *dr);

/* Sends what deadletter_queue() collected, oldest report last as before.
 * STEP_OK, STEP_HELD (one is held: deadletter_retry()) or STEP_FATAL. */
enum step deadletter_flush(struct deadletter *dl);

/* Sends the held dead letter again. STEP_OK (sent: nothing held any more),
 * STEP_HELD (still full) or STEP_FATAL. */
enum step deadletter_retry(struct deadletter *dl);

/* The stream broke: the open transaction is dropped, and with it a dead
 * letter of it that was held (a held report's stays: its transaction is
 * committed). */
void deadletter_abort_open(struct deadletter *dl);

/* Whether a dead letter is held or queued. */
bool deadletter_busy(const struct deadletter *dl);

/* Halts on a bad event of delivery tag tag: logs it, freezes the tracker
 * before it. Returns STEP_FATAL. */
enum step deadletter_halt(struct deadletter *dl, uint64_t tag, const struct slice *event_id,
                          const char *commit_lsn, const char *code, const char *reason);

/* Dead-letters (policy dlq and poison) or halts on ev of delivery tag
 * tag, which failed with code. STEP_OK, STEP_HELD or STEP_FATAL. */
enum step deadletter_reject(struct deadletter *dl, uint64_t tag, const struct outbox_event *ev,
                            const char *code, const char *reason, bool poison, bool too_large);

/* The dead letter of ev (which failed with code, for reason), into d:
 * borrows ev's slices, copies its strings. deadletter_reject() sends it;
 * `outboxd republish` (rowpub.h) too. */
void deadletter_letter(struct dead_letter *d, uint64_t tag, const struct outbox_event *ev,
                       const char *code, const char *reason, bool too_large);

/* The DLQ record of d, into ev (to [errors] dlq_topic, with d's headers
 * and the dlq_* ones, a too-large value truncated); len_text gets the
 * original value length when the value is truncated ("" otherwise). ev
 * borrows from d and len_text. Only dl's configuration is used. */
void deadletter_record(const struct deadletter *dl, const struct dead_letter *d,
                       struct outbox_event *ev, char len_text[32]);

/* The frame f whose payload dec refused with why; seq is the open
 * transaction (0 if none) whose commit record is at commit_lsn.
 * STEP_OK (dead-lettered), STEP_HELD or STEP_FATAL. */
enum step deadletter_bad_record(struct deadletter *dl, const struct decoder *dec, uint64_t seq,
                                lsn_t commit_lsn, const struct repl_frame *f, const char *why);

#endif
