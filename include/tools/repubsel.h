/*
 * repubsel.h - what `outboxd republish` (republish.h) selects, with no
 * I/O: its command-line options and the statements over the outbox table
 * that read the selection. Unit-tested without a server
 * (tests/unit/test_repubsel.c).
 *
 * Options (each selection ANDed with the others; at least one is needed):
 *   --event-id ID[,ID...]     repeatable: these events
 *   --aggregate TYPE:ID       one aggregate (split at the first ':'), or
 *   --aggregate-type TYPE --aggregate-id ID   the same, for a type with ':'
 *   --since TS [--until TS]   [outbox] repair_column at or after TS (and
 *                             before TS): timestamps PostgreSQL reads,
 *                             e.g. '2026-12-03 16:00+00'
 *   --outbox NAME             the table of [outbox.NAME] (needed when there
 *                             are several outbox sections)
 *   --dry-run                 list what would be sent, send nothing
 *
 * Order of the rows (the order they are produced in):
 *   with an aggregate selected and [outbox] column.aggregate_version in
 *   the table: by that version first (NULLs first); then in commit order
 *   when track_commit_timestamp is on (pg_xact_commit_timestamp(xmin),
 *   rows committed before it was on first), within one commit time in
 *   insert order: [outbox] order_column, then xmin and ctid
 *   (repair_txn_order_sql(), repairplan.h); else by the time column (when
 *   the table has it), then order_column, then event_id. The order column
 *   is what makes a transaction's rows come out in insert order: without
 *   it (NULL in struct repub_table), republish warns (republish.c).
 */
#ifndef OUTBOXD_REPUBSEL_H
#define OUTBOXD_REPUBSEL_H

#include <stdbool.h>
#include <stddef.h>

#include "outbox.h"

struct repub_options {
    char **ids;             /* owned, each owned: the --event-id values, split */
    size_t nids, capids;
    const char *agg_type;   /* borrowed from argv; NULL: no aggregate */
    const char *agg_id;     /* --aggregate: points into agg_buf */
    char *agg_buf;          /* owned: --aggregate TYPE:ID, split */
    const char *since, *until; /* borrowed from argv; NULL: none */
    const char *outbox;     /* --outbox NAME: the [outbox.NAME] section; NULL: the
                             * only one (or the plain [outbox]) */
    bool dry_run;
};

/* Takes the option at argv[*i] (and its value, advancing *i) when it is
 * one of republish's. 1 taken, 0 not one of them, -1 with err (a missing
 * or empty value, a repeated one, out of memory). Free o with
 * repub_options_free(). */
int repub_option(struct repub_options *o, int argc, char **argv, int *i, char *err,
                 size_t errlen);

/* After the last option: 0 when o selects something, else -1 with err
 * (no selection, half an aggregate, --until without --since). */
int repub_options_check(const struct repub_options *o, char *err, size_t errlen);

void repub_options_free(struct repub_options *o);

/* The selection as one line for messages, e.g. "event_id in (a, b) and
 * aggregate Order:42 and repair_column created_at >= '...'", into out. */
const char *repub_describe(const struct repub_options *o, const char *time_column, char *out,
                           size_t outlen);

/* What the table has, looked up by the caller. */
struct repub_table {
    const char *id_type;  /* format_type() of the event_id column */
    bool commit_ts;       /* track_commit_timestamp = on */
    bool has_time_column; /* the table has time_column */
    bool has_version;     /* the table has the aggregate_version column */
    const char *order_column; /* [outbox] order_column when the table has it,
                               * else NULL */
};

/* The statements and their text parameters. */
struct repub_sql {
    char *select;  /* every column of the selected rows, in order */
    char *count;   /* count(*) of them */
    char *missing; /* with --event-id: the ids asked for that select
                    * does not return (text); NULL otherwise */
    const char *params[5]; /* borrowed from o, but for ids_param */
    int nparams;
    char *ids_param; /* owned: the ids as an array literal */
};

/* Builds q for o over m's table (time_column: [outbox] repair_column).
 * 0, or -1 with err (--since or --until without time_column in the
 * table; out of memory). Free with repub_sql_free() either way. */
int repub_sql_build(const struct outbox_map *m, const struct repub_options *o,
                    const char *time_column, const struct repub_table *t, struct repub_sql *q,
                    char *err, size_t errlen);
void repub_sql_free(struct repub_sql *q);

#endif
