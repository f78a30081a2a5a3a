/*
 * rowpub.h - outbox rows read from the table, published again: what
 * `outboxd repair` (repair.h) and `outboxd republish` (republish.h) share.
 * The rows of a cursor are fetched, each is mapped with
 * outbox_event_build() exactly as the relay maps a decoded row (topic
 * template, key, headers) less the commit LSN header a table row has not
 * got (outbox_event_drop_lsn_header()), handed to the producer, and the
 * delivery reports are counted until every produced event is reported.
 *
 * A row that cannot be published (a poison row, outbox.h's faults):
 *   stop (dlq NULL: repair; republish under [errors] policy = halt): no
 *     further row is produced; the row is named in the log and in
 *     rowpub.stopped_at;
 *   dead-letter (dlq set: republish under policy = dlq): its dead letter
 *     goes to [errors] dlq_topic as the relay writes it (deadletter.h),
 *     and its ACK counts like any other. A fault of the configuration
 *     (OF_SCHEMA) stops under either.
 * An event the broker refuses after it was sent (a delivery report with a
 * poison error, e.g. MSG_SIZE_TOO_LARGE from a topic's max.message.bytes)
 * is decided as the relay decides (deadletter_takes_report()): with dlq
 * set, its report is copied in the callback and its dead letter produced
 * after the poll (rowpub.refused); otherwise it is a failure.
 */
#ifndef OUTBOXD_ROWPUB_H
#define OUTBOXD_ROWPUB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "deadletter.h"
#include "outbox.h"
#include "producer.h"

struct rowpub {
    /* set by the caller */
    const struct outbox_map *map;  /* borrowed: rowpub_cursor()'s table */
    struct producer *prod;         /* borrowed; NULL with dry_run */
    const char *who;               /* "repair", "republish": the log's prefix */
    const struct deadletter *dlq;  /* borrowed; NULL: a poison row stops */
    bool dry_run;                  /* print each event instead of producing it */
    /* Called for every ACKed delivery report (may be NULL). */
    void (*acked)(void *ctx, const struct delivery_report *dr);
    void *ctx;
    /* the counts */
    uint64_t rows;          /* rows read */
    uint64_t produced;      /* events handed to the producer (dead letters too) */
    uint64_t dead_lettered; /* of produced: dead letters of poison rows and refused events */
    uint64_t refused;       /* of produced: refused by the broker, then dead-lettered */
    uint64_t acked_n, failed;
    char first_id[128], last_id[128]; /* event ids of the first and last row produced */
    char failure[512];     /* the first delivery failure; "" if none */
    char stopped_at[768];  /* the row that stopped the run; "" if none */
    /* owned: refused deliveries copied in the callback, to dead-letter */
    struct pending_dlq **copies;
    size_t ncopies, copies_cap;
};

/* Rows fetched from a cursor at a time. */
#define ROWPUB_FETCH 1000

/* The delivery callback to give producer_new() with the rowpub as ctx:
 * counts each report (acked_n, or failed with the first in failure). */
void rowpub_on_delivery(void *ctx, const struct delivery_report *dr);

/* Maps and produces row `row` of res, a row of m's table (rel: res's
 * columns; vals: room for rel->ncols values, overwritten). 0, or -1
 * logged: the row stopped the run, or the producer refused its event for
 * good (stopped_at says which). */
int rowpub_row(struct rowpub *p, const struct outbox_map *m, const PGresult *res, int row,
               const struct relation *rel, struct col_value *vals);

/* Fetches every row of the open cursor `cursor` on db (ROWPUB_FETCH at a
 * time) and publishes each. 0, or -1 logged: a statement failed, a row
 * stopped the run (stopped_at), or the producer refused an event for good
 * (stopped_at names it). What was produced before is still reported:
 * call rowpub_await(). */
int rowpub_cursor(struct rowpub *p, PGconn *db, const char *conninfo, const char *cursor);

/* Waits up to wait_ms until every produced event is reported (dead
 * letters of refused events produced and reported too). 0 when all were
 * ACKed or dead-lettered, else -1 (failed, or reports missing: the caller
 * says what). */
int rowpub_await(struct rowpub *p, int64_t wait_ms);

/* The events sent: produced, less the refused ones counted again by their
 * dead letters. */
uint64_t rowpub_sent(const struct rowpub *p);

/* Frees what p owns (copies not dead-lettered yet); p's counts stay. */
void rowpub_free(struct rowpub *p);

#endif
