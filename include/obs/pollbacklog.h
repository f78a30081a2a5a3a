/*
 * pollbacklog.h - the backlog of a polling table as numbers: what is not
 * delivered yet, by status. Types only, so that the metrics (metrics.h)
 * can hold and render it without polling mode's SQL; the query that fills
 * it, its parser and its one-line summary for `outboxd check` are
 * polling.h's (polling_backlog_sql(), polling_backlog_row(),
 * polling_backlog_line()).
 */
#ifndef OUTBOXD_POLLBACKLOG_H
#define OUTBOXD_POLLBACKLOG_H

#include <stdbool.h>
#include <stdint.h>

/* The undelivered values of the status column, in the order the backlog
 * query answers them. */
enum polling_status { PS_PENDING, PS_CLAIMED, PS_QUARANTINED, PS__COUNT };

struct polling_backlog {
    bool seen; /* false until the first answer */
    int64_t rows[PS__COUNT];
    int64_t oldest_ms[PS__COUNT]; /* 0 when there is no row */
    int64_t max_attempts[PS__COUNT];
    int64_t table_bytes;
};

#endif
