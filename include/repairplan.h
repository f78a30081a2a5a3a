/*
 * repairplan.h - what `outboxd repair` (repair.h) does, decided from what
 * it found, with no I/O (tests/unit/test_repairplan.c): whether the slot
 * needs repairing at all, where the re-published range starts and what
 * that start is compared with, and the statement that selects the rows.
 *
 * The boundary. The offset file (format 4) keeps the commit time of the
 * newest transaction whose events were all ACKed. Every row committed at
 * or after that time, less [outbox] repair_margin, is re-published: rows
 * of the same time are sent again (duplicates, never gaps). The margin
 * covers what a timestamp cannot order exactly: commit timestamps are
 * taken just before the commit record is written, so two concurrent
 * commits may carry times in the other order than their LSNs; and an
 * insert-time column (created_at DEFAULT now()) holds the transaction's
 * start, earlier than its commit by as long as the transaction ran.
 *   - track_commit_timestamp = on: pg_xact_commit_timestamp(xmin), the
 *     same time the stream's Begin carried, in commit order;
 *   - else [outbox] repair_column (e.g. created_at): the margin must be
 *     longer than the longest transaction that inserts outbox rows;
 *   - --since TIMESTAMP replaces the file's time (an offset file of an
 *     older outboxd has none).
 * Rows whose commit timestamp is unknown (committed before the setting
 * was on, or frozen by VACUUM) cannot be placed: repair counts them and
 * says so, it never sends them silently or skips them silently.
 */
#ifndef OUTBOXD_REPAIRPLAN_H
#define OUTBOXD_REPAIRPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"
#include "offset.h"
#include "outbox.h"

/* What repair found: the offset file, the slot, the server's setting and
 * the configuration. */
struct repair_facts {
    const struct offset_state *file; /* NULL: no offset file */
    const char *offsets_path;
    const char *slot;                /* [postgres] slot */
    const char *plugin;              /* [postgres] plugin */
    const char *database;            /* the database connected to */
    bool slot_exists;
    bool slot_active;
    int slot_active_pid;
    const char *slot_wal_status; /* "lost": invalidated; "" if unknown */
    bool track_commit_timestamp; /* the server's setting */
    const char *time_column;     /* [outbox] repair_column; NULL: none */
    int64_t margin_us;           /* [outbox] repair_margin */
    int64_t since_us;            /* --since (Unix epoch, us); 0: not given */
    bool at_start;               /* the daemon asks (on_slot_loss = repair): a slot
                                  * in use is another instance's, not an error */
};

enum repair_action {
    REPAIR_NOT_NEEDED, /* the slot is there and usable: nothing to do */
    REPAIR_RUN,        /* re-publish from from_us, then a new slot */
    REPAIR_REFUSED,    /* an operator must decide: message says what */
};

enum repair_by {
    REPAIR_BY_COMMIT_TS, /* pg_xact_commit_timestamp(xmin) */
    REPAIR_BY_COLUMN,    /* [outbox] repair_column */
};

struct repair_plan {
    enum repair_action action;
    bool drop_slot;   /* the slot exists but is invalidated: dropped first */
    enum repair_by by;
    int64_t from_us;  /* rows at or after this (Unix epoch, us) are re-sent */
    int64_t boundary_us; /* the time it was derived from (before the margin) */
    bool from_since;  /* the boundary came from --since */
    char message[1024]; /* REPAIR_NOT_NEEDED, REPAIR_REFUSED: why */
};

/* Decides for f. */
void repair_plan_decide(const struct repair_facts *f, struct repair_plan *out);

/* The statements over the table of m (time_column: [outbox] repair_column
 * for REPAIR_BY_COLUMN). Each returns a malloc'd string the caller frees,
 * or NULL when out of memory.
 *   select: the rows at or after $1 (the start as a timestamptz text,
 *     offset_commit_time_text()), in commit order: by time, then
 *     transaction, then ctid (insertion order for an append-only table);
 *     first the time in microseconds (REPAIR_COL_US) and the transaction
 *     (REPAIR_COL_XID), on which several tables' rows are merged, then
 *     every column of the table;
 *   stats: count, first and last time (text) of the rows select returns;
 *   count_untimed: how many rows have no time (no commit timestamp, or
 *     a NULL column): they cannot be placed before or after the start. */
#define REPAIR_COL_US "outboxd_repair_us"
#define REPAIR_COL_XID "outboxd_repair_xid"
char *repair_select_sql(const struct outbox_map *m, const struct repair_plan *p,
                        const char *time_column);
char *repair_stats_sql(const struct outbox_map *m, const struct repair_plan *p,
                       const char *time_column);
char *repair_count_untimed_sql(const struct outbox_map *m, const struct repair_plan *p,
                               const char *time_column);

/* Whether the outbox table's rows are deleted after insert, or kept only
 * briefly, judged from pg_stat_user_tables (REPAIR_ROW_COUNTS_SQL: counts
 * since the statistics were reset): most inserted rows deleted (n_tup_del
 * more than half n_tup_ins), or no live row left while rows were inserted
 * (TRUNCATE does not count in n_tup_del). live < 0: not known. Then repair
 * and republish find little or nothing to send. A few deletes (a
 * retention job removing old rows) are fine. */
bool repair_rows_gone(long long inserted, long long deleted, long long live);

/* n_tup_ins, n_tup_del, n_live_tup of the table of oid $1 (text). */
#define REPAIR_ROW_COUNTS_SQL                                                              \
    "SELECT n_tup_ins, n_tup_del, n_live_tup FROM pg_catalog.pg_stat_user_tables "        \
    "WHERE relid = $1::oid"

#endif
