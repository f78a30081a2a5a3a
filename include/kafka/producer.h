/*
 * producer.h - the Kafka side: one librdkafka producer, delivery reports
 * handed back as (tag, error) to a callback.
 *
 * The record's timestamp is ev->timestamp_ms when set ([outbox] timestamp
 * = commit, outbox.h), else the time producer_send() is called
 * (librdkafka's CreateTime default).
 *
 * Ownership: outboxd passes key, value and headers by copy
 * (RD_KAFKA_MSG_F_COPY), so the caller's buffers may be released as soon as
 * producer_send() returns. The per-message opaque is the caller's 64-bit
 * tag (the relay's delivery tag, tracker.h; the polling relay's row seq),
 * not a pointer, so a late report can never touch freed memory.
 */
#ifndef OUTBOXD_PRODUCER_H
#define OUTBOXD_PRODUCER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "outbox.h"

struct producer;

/* One delivery report. Strings are borrowed for the callback's duration. */
struct delivery_report {
    uint64_t tag; /* the opaque given to producer_send() */
    int err;      /* 0 (RD_KAFKA_RESP_ERR_NO_ERROR): the broker ACKed it */
    const char *reason; /* NULL when err == 0 */
    const char *topic;
    struct slice event_id;   /* the event_id header */
    struct slice commit_lsn; /* the commit_lsn header */
    /* Failures only: the message's key, value and headers (names and
     * values borrowed like the strings; at most OUTBOX_MAX_HEADERS). */
    struct slice key;
    bool key_null;
    struct slice value;
    bool value_null;
    int nheaders;
    const struct outbox_header *headers;
    /* Wall clock (Unix epoch, microseconds) when the report was served:
     * read at the first report of each producer_poll() and again every
     * PRODUCER_DR_CLOCK_EVERY reports, not per report, as a drain serves
     * thousands of reports in one poll (a clock read per event was ~2 % of
     * the benchmark's CPU). Off by at most the time to serve that many. */
    int64_t served_unix_us;
};

#define PRODUCER_DR_CLOCK_EVERY 64

/*
 * Called from producer_poll() (on the caller's thread) once per message.
 * A non-zero err means the message failed for good: librdkafka has already
 * retried what it could.
 */
typedef void (*producer_delivery_fn)(void *ctx, const struct delivery_report *dr);

/* Creates the producer from [kafka] (outboxd's defaults already merged by
 * config). NULL with a reason in err (librdkafka's own message for a bad
 * property). Free with producer_free(). */
struct producer *producer_new(const struct config *c, producer_delivery_fn fn, void *ctx,
                              char *err, size_t errlen);

/* Destroys the producer without waiting; undelivered messages are dropped
 * (never confirmed, so they are re-delivered after restart). */
void producer_free(struct producer *p);

/* How long a graceful stop waits for outstanding deliveries. */
#define PRODUCER_SHUTDOWN_FLUSH_MS 10000

#define PRODUCER_OK 0
#define PRODUCER_QUEUE_FULL 1
#define PRODUCER_ERROR (-1)

/* Distinct topics one librdkafka client is given before it is replaced by
 * a fresh one (librdkafka keeps every topic it has seen until the client is
 * destroyed: see producer.c). The replacement waits until every message is
 * ACKed, so it costs a pause of about one broker round trip plus the
 * client's start (measured in tests/bench/many_topics.sh); a bound of
 * 1,000 keeps librdkafka's topic state to a few MB and makes the pause rare
 * unless more than 1,000 topics are in use at the same time. */
#define PRODUCER_MAX_TOPICS 1000

/* Enqueues ev with opaque tag. Never waits for the broker. Returns
 * PRODUCER_OK, PRODUCER_QUEUE_FULL (serve reports with producer_poll() and
 * try again: the queue is full, or a new topic waits for the client's
 * replacement, see PRODUCER_MAX_TOPICS), or PRODUCER_ERROR with
 * librdkafka's code in *kafka_err and a reason in err (permanent: e.g.
 * message larger than message.max.bytes, or a value that can never fit the
 * queue: MSG_SIZE_TOO_LARGE). */
int producer_send(struct producer *p, const struct outbox_event *ev, uint64_t tag,
                  int *kafka_err, char *err, size_t errlen);

/* 1 when the brokers refused the connection in a way waiting cannot heal
 * (kafka_err_is_refusal(): SASL authentication failed, the broker's
 * certificate did not verify, the identity provider refused or its
 * certificate did not verify), with who refused (kafka_refusal_who()), the
 * error, librdkafka's reason and the fix in err; 0 otherwise. The relay
 * exits 2 on it. */
int producer_refused(const struct producer *p, char *err, size_t errlen);

/* True for errors about one message or its topic (too large, invalid or
 * unauthorised topic...): dead-letter material, unlike broker or network
 * failures. */
bool producer_err_is_poison(int err);

/* The name of the i-th of the errors producer_err_is_poison() accepts
 * (e.g. "MSG_SIZE_TOO_LARGE"), NULL past the last: the reasons the failed
 * and dead-lettered counters start with at 0. */
const char *producer_poison_name(size_t i);

/* True when the error says the topic does not exist (a broker with
 * auto.create.topics.enable = false, or a topic deleted): librdkafka
 * reports it after topic.metadata.propagation.max.ms (30 s). The logical
 * relay halts on it under either policy: it is the operator's to fix
 * (create the topic), and dead-lettering every event of that topic would
 * hide the mistake. Polling mode keeps it a poison error. */
bool producer_err_is_missing_topic(int err);

/* True for MSG_SIZE_TOO_LARGE: the message itself is too large (a dead
 * letter of it carries a truncated value). */
bool producer_err_is_too_large(int err);

/* The name of the error of a message that timed out before the broker
 * ACKed it (librdkafka's _MSG_TIMED_OUT): a failed counter's label. */
const char *producer_timed_out_name(void);

/* librdkafka's name of an error code, e.g. "MSG_SIZE_TOO_LARGE". */
const char *producer_err_name(int err);

/* Serves delivery reports and errors, waiting up to timeout_ms for the first.
 * Returns the number of events served. */
int producer_poll(struct producer *p, int timeout_ms);

/* A descriptor that becomes readable when reports are waiting; used in the
 * event loop's select(). producer_poll() drains it. */
int producer_wakeup_fd(const struct producer *p);

/* Waits up to timeout_ms for every queued message to be reported.
 * Returns the number of messages still outstanding. */
int producer_flush(struct producer *p, int timeout_ms);

/* Messages queued or in flight. */
int producer_outq_len(const struct producer *p);

/* Brokers librdkafka is connected to (state UP) as of its last statistics
 * (every statistics.interval.ms, 1 s by default); -1 before the first. */
int producer_brokers_up(const struct producer *p);

/* librdkafka's reports of a broker not reached, every one, since the start
 * (of the process: kafkaconf.h's kafka_unreachable_total()). */
uint64_t producer_unreachable_total(const struct producer *p);

struct kstats;

/* librdkafka's per-broker statistics accumulated over every statistics
 * window so far, across the replacements of the client (kstats.h); owned
 * by p. */
const struct kstats *producer_kstats(const struct producer *p);

/* ---- exactly_once ([delivery] mode, relaytxn.h) ----
 * In that mode producer_new() only checks the configuration; the client is
 * made by producer_txn_init() once the transactional.id is known, and
 * producer_send() begins a Kafka transaction when none is open. */

/* The opaque of the progress record: its report is not handed on. */
#define PRODUCER_TAG_PROGRESS UINT64_MAX

/* transaction.timeout.ms unless [kafka] sets it: under the walsender's
 * default wal_sender_timeout (60 s), so that an instance that stalls has
 * its transaction aborted by the broker before the server lets another
 * instance take the slot. message.timeout.ms defaults to the same. */
#define PRODUCER_TXN_TIMEOUT_MS "30000"

/* Results of the producer_txn_* calls (a reason in err unless OK). */
#define PRODUCER_TXN_OK 0
#define PRODUCER_TXN_ABORT 1   /* the transaction failed: abort it and start over */
#define PRODUCER_TXN_FATAL (-1) /* the client cannot go on (fenced: another instance) */

/* Makes the transactional client with transactional.id txn_id and runs
 * init_transactions (fences any older client with that id and ends its
 * open transaction). Waits up to timeout_ms. Done once; later calls
 * return PRODUCER_TXN_OK. PRODUCER_TXN_ABORT: try again later. */
int producer_txn_init(struct producer *p, const char *txn_id, int timeout_ms, char *err,
                      size_t errlen);

/* Whether a Kafka transaction is open (begun, not committed or aborted). */
bool producer_txn_open(const struct producer *p);

/* Whether a send since the last abort failed because the transaction did
 * (begin_transaction refused, or _STATE: an abortable error): the event is
 * not at fault, the transaction must be aborted and sent again. */
bool producer_txn_failed(const struct producer *p);

/* Whether the transactional client exists (producer_txn_init() done). */
bool producer_txn_ready(const struct producer *p);

/* Whether the client's fatal error is one a new client would hit too:
 * fenced by a newer instance with the same transactional.id, or not
 * authorized. Other fatal errors (librdkafka's INVALID_TXN_STATE on an
 * abort, for one) end only this client. */
bool producer_txn_must_stop(struct producer *p);

/* Whether the client's fatal error is a newer instance's fence (its
 * init_transactions with the same transactional.id). */
bool producer_txn_fenced(struct producer *p);

/* Purges and destroys the transactional client (its purged messages are
 * reported first, with errors); producer_txn_init() makes a new one, whose
 * init_transactions aborts what this one left open. */
void producer_txn_discard(struct producer *p);

/* Produces the progress record (key, value) to partition 0 of topic in
 * the open transaction (begun if none is) and commits it, waiting up to
 * timeout_ms. Call with every other message reported. */
int producer_txn_commit(struct producer *p, const char *topic, const char *key,
                        const char *value, int timeout_ms, char *err, size_t errlen);

/* Aborts the open transaction (purges what is queued; its reports come
 * with errors), waiting up to timeout_ms. OK when none is open. */
int producer_txn_abort(struct producer *p, int timeout_ms, char *err, size_t errlen);

/* Returns 1 and a reason in err when librdkafka hit a fatal error (e.g. the
 * idempotent producer lost its state); the producer is then unusable. */
int producer_fatal(struct producer *p, char *err, size_t errlen);

#endif
