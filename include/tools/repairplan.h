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
 *
 * The order within one time (one transaction: its commit timestamp, or
 * its start in the column). Neither the row's place in the heap (ctid)
 * nor its xmin is insert order: once retention deletes rows and VACUUM
 * ran, the free-space map hands out earlier pages, so a transaction's
 * later rows can sit before its earlier ones; and rows inserted inside a
 * savepoint carry the subtransaction's xid, not the transaction's. So
 * rows are ordered by [outbox] order_column (sql/outbox.sql's seq, filled
 * from a sequence at insert: nextval grows in insert order within one
 * session, savepoints included; NULL in rows older than the column sort
 * first), then by xmin and ctid, which decide only where the column is
 * NULL or missing. Without the column (repair_order_terms(NULL)) the old
 * order (xmin, ctid) is all there is: repair and republish say so with a
 * warning, and `outboxd check` warns ahead. What no term can tell: two
 * transactions with the very same time (a microsecond) are merged by the
 * column, as no row names its top-level transaction (a subtransaction's
 * rows carry their own xid, and the server offers no map to the parent).
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

/* The terms rows are sorted by, in turn: the time, then within one time
 * (see "The order within one time" above). One list renders the ORDER BY
 * (repair_select_sql(), repair_txn_order_sql()) and orders a model's rows
 * (repair_row_cmp()), so the unit test of the one is a test of the other. */
enum repair_term {
    RT_TIME,  /* the commit timestamp, or the time column */
    RT_ORDER, /* [outbox] order_column, NULLs first */
    RT_XID,   /* xmin, as a number */
    RT_CTID,  /* the place in the heap: block, then line pointer */
};
#define REPAIR_MAX_TERMS 4
struct repair_order {
    enum repair_term term[REPAIR_MAX_TERMS];
    size_t n;
};

/* The terms with order_column (NULL or "": the table has none). */
void repair_order_terms(const char *order_column, struct repair_order *out);

/* What a row is sorted on, as the server sees it. */
struct repair_rowpos {
    int64_t time_us;
    bool has_order; /* false: order_column is NULL in this row */
    int64_t order;
    uint64_t xid;  /* xmin: the (sub)transaction that inserted it */
    uint32_t block; /* ctid */
    uint16_t line;
};

/* <0, 0, >0 as a sorts before, with or after b under o (as the server's
 * ORDER BY of the same terms would). */
int repair_row_cmp(const struct repair_order *o, const struct repair_rowpos *a,
                   const struct repair_rowpos *b);

/* The ORDER BY terms after the time, e.g. "\"seq\" NULLS FIRST,
 * xmin::text::bigint, ctid" (order_column: as for repair_order_terms()).
 * malloc'd, the caller frees; NULL when out of memory. Republish orders a
 * transaction's rows by it too (repubsel.h). */
char *repair_txn_order_sql(const char *order_column);

/* The warning repair and republish log, and `outboxd check` gives, when
 * the table lacks the order column: what it risks and what to add. */
#define REPAIR_NO_ORDER_RISK                                                               \
    "a transaction's rows are then ordered by what is not insert order: their place in "  \
    "the table (ctid: new rows fill earlier pages once retention deletes rows and VACUUM " \
    "ran), their xid (a row inserted in a savepoint carries its own), or event_id "        \
    "(republish without commit timestamps); one aggregate's events can be re-published "  \
    "out of order"
#define REPAIR_NO_ORDER_FIX                                                                \
    "add the column: psql -f sql/outbox_order_column.sql (sql/README.md; a sequence "     \
    "column, no table rewrite), or set [outbox] order_column to a column that grows in "  \
    "insert order"

/* The statements over the table of m (time_column: [outbox] repair_column
 * for REPAIR_BY_COLUMN). Each returns a malloc'd string the caller frees,
 * or NULL when out of memory.
 *   select: the rows at or after $1 (the start as a timestamptz text,
 *     offset_commit_time_text()), in commit order: by time, then within
 *     one time by repair_order_terms(order_column) (NULL or "": the table
 *     has no order column);
 *     first the time in microseconds (REPAIR_COL_US) and the transaction
 *     (REPAIR_COL_XID), on which several tables' rows are merged, then
 *     every column of the table;
 *   stats: count, first and last time (text) of the rows select returns;
 *   count_untimed: how many rows have no time (no commit timestamp, or
 *     a NULL column): they cannot be placed before or after the start. */
#define REPAIR_COL_US "outboxd_repair_us"
#define REPAIR_COL_XID "outboxd_repair_xid"
char *repair_select_sql(const struct outbox_map *m, const struct repair_plan *p,
                        const char *time_column, const char *order_column);
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
