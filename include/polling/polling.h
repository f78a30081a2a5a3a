/*
 * polling.h - the pure part of polling mode ([source] mode = polling): no
 * I/O, so it is unit-tested without a server.
 *
 *  - the retry delay: exponential backoff with jitter;
 *  - what a delivery outcome does to the row (SENT, back to PENDING,
 *    QUARANTINED);
 *  - the SQL text of every statement the polling relay runs, built once
 *    from the configured table and column names (quoted with pgsql.h, which
 *    also builds the array literals of their parameters);
 *  - the backlog (metrics, `outboxd check`);
 *  - the line `outboxd requeue` prints per event.
 *
 * The polling table is the outbox table of [outbox] table with the state
 * columns of sql/outbox_polling.sql, whose names are fixed: seq, status,
 * attempts, next_attempt_at, lease_owner, lease_generation, lease_until,
 * sent_at, last_error.
 */
#ifndef OUTBOXD_POLLING_H
#define OUTBOXD_POLLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox.h"
#include "pollbacklog.h"

/* The delay before retry number attempts + 1, after attempts failed ones
 * (attempts >= 1): base = min(max_ms, min_ms * 2^(attempts - 1)), then
 * "equal jitter": base / 2 + (rnd % (base / 2 + 1)), so that relays
 * retrying the same outage spread out, never below base / 2 nor above
 * max_ms. rnd is any random number (the caller's). */
int64_t polling_backoff_ms(int attempts, int64_t min_ms, int64_t max_ms, uint64_t rnd);

/* What a delivery outcome does to the claimed row. */
enum polling_action {
    PA_SENT,       /* broker ACK: mark SENT */
    PA_RETRY,      /* retriable or unknown: PENDING, attempts + 1, backoff */
    PA_QUARANTINE, /* permanent, or the attempts are used up: QUARANTINED */
};

/* The action for a delivery with librdkafka error code kafka_err (0 =
 * ACK) on a row that had failed attempts times before this try;
 * permanent says whether the error is about the message itself (e.g.
 * producer_err_is_poison()). A retriable failure that would make the
 * attempts reach max_attempts quarantines instead. */
enum polling_action polling_classify(int kafka_err, bool permanent, int attempts,
                                     int max_attempts);

/* "SENT", "RETRY", "QUARANTINE". */
const char *polling_action_name(enum polling_action a);

/*
 * The statements, with their parameters. T is the table, EID the event_id
 * column, AGG the aggregate_id column, ETYPE the event_id column's type
 * (format_type(), looked up at start).
 *
 * claim ($1 owner text, $2 lease ms bigint, $3 limit int): one statement,
 *   hence one short transaction: up to $3 rows in seq order that are due -
 *   PENDING with next_attempt_at <= now(), or CLAIMED with lease_until <=
 *   now() (an expired lease) - and have no earlier row (smaller seq) of the
 *   same aggregate that is not SENT, locked FOR UPDATE SKIP LOCKED, set to
 *   CLAIMED with owner $1, lease_generation + 1 and lease_until =
 *   next_attempt_at = now() + $2 ms; returns every column (t.*) in seq
 *   order.
 * sent ($1 ids ETYPE[], $2 generations bigint[], $3 owner): SENT, sent_at,
 *   lease cleared, for rows still CLAIMED by owner $3 at that generation;
 *   returns the event_ids it changed (text).
 * fail ($1 ids, $2 generations, $3 owner, $4 new status text[] ('PENDING'
 *   or 'QUARANTINED'), $5 retry delays ms bigint[], $6 errors text[] (NULL
 *   keeps last_error), $7 attempt increments int[] (0 for a release that
 *   was no attempt)): same condition; lease cleared; returns event_ids.
 * retention ($1 age ms bigint, $2 limit int): deletes up to $2 SENT rows
 *   whose sent_at is older than $1 ms (rows locked elsewhere are skipped);
 *   one small transaction per call.
 * requeue ($1 ids ETYPE[]): QUARANTINED -> PENDING, attempts 0, due now,
 *   lease cleared; returns the event_ids it changed.
 * states ($1 ids ETYPE[]): event_id, status of those rows (for messages).
 */
struct polling_sql {
    char *claim;
    char *sent;
    char *fail;
    char *retention;
    char *requeue;
    char *states;
};

/* Builds every statement for map's table and columns; etype is the event_id
 * column's type as format_type() prints it (trusted text from the server).
 * Returns 0, or -1 with a reason in err. Free with polling_sql_free(). */
int polling_sql_build(struct polling_sql *q, const struct outbox_map *map,
                      const char *etype, char *err, size_t errlen);
void polling_sql_free(struct polling_sql *q);

/*
 * The backlog: what is not delivered yet, for the metrics (a periodic
 * query of the polling relay) and `outboxd check`.
 *
 * polling_backlog_sql(): one statement, no parameters, one row per
 * undelivered status in the order of enum polling_status:
 *   status text ('PENDING', 'CLAIMED', 'QUARANTINED'), rows bigint, the age
 *   of the oldest row by created_at in ms (now() - min(created_at), server
 *   clock; 0 when none, never negative), the most failed attempts of a row
 *   (0 when none), and pg_total_relation_size() of the table (table,
 *   indexes, TOAST; the same on every row).
 * It reads the undelivered rows only (status <> 'SENT': the partial index
 * of sql/outbox_polling.sql), every one of them, so its cost grows with
 * the backlog, not with the SENT rows retention keeps. The answer is read
 * into a struct polling_backlog (pollbacklog.h).
 */

/* "PENDING", "CLAIMED", "QUARANTINED" (the status column's values). */
const char *polling_status_name(enum polling_status s);

/* The statement for map's table; malloc'd (caller frees), NULL on out of
 * memory. */
char *polling_backlog_sql(const struct outbox_map *map);

/* Reads one row of the statement's answer (its text values) into b.
 * Returns 0, or -1 with a reason in err (an unknown status, a value that
 * is not a number). b->seen is left to the caller. */
int polling_backlog_row(struct polling_backlog *b, const char *const vals[5], char *err,
                        size_t errlen);

/* The backlog in one line for `outboxd check`, e.g. "12 undelivered rows:
 * 10 pending, 1 claimed, 1 quarantined; oldest 3m 20s (pending); at most
 * 4 attempts; table 1.2 MiB". Returns out. */
char *polling_backlog_line(const struct polling_backlog *b, char *out, size_t outlen);

/* What the requeue and states statements answered (text values). */
struct polling_requeue_answer {
    const char *const *done; /* event_ids the requeue changed */
    int ndone;
    const char *const *state_ids, *const *states; /* event_id, status pairs */
    int nstates;
};

/* The line `outboxd requeue` prints for the argument id (no newline):
 * "requeued ID" (the server's text form of the id), "not requeued ID: it
 * is STATUS, not QUARANTINED", or "not requeued ID: no such event in
 * TABLE". The id matches the server's form case-insensitively (uuids).
 * Returns whether id was requeued. */
bool polling_requeue_verdict(const char *id, const struct polling_requeue_answer *ans,
                             const char *table, char *out, size_t outlen);

/* The state columns the polling table must have, NULL-terminated. */
extern const char *const polling_state_columns[];

#endif
