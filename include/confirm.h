/*
 * confirm.h - the position outboxd may confirm (offset file and server),
 * from what the tracker says is ACKed and what else must hold. Pure.
 *
 * With pgoutput, an event reaches outboxd only while the outbox table is in
 * the publication (and the publication publishes inserts). That can change
 * under a running outboxd (ALTER PUBLICATION ... DROP TABLE): pgoutput then
 * skips the table's changes without a word. The monitor connection
 * (monitor.h) proves membership up to a WAL position; a position beyond the
 * last proven one is never confirmed, so the slot never moves past a point
 * where events may have been skipped unseen.
 */
#ifndef OUTBOXD_CONFIRM_H
#define OUTBOXD_CONFIRM_H

#include <stdbool.h>

#include "lsn.h"

/* What may be confirmed now: the tracker's flush position acked, capped at
 * proven when capped is true (pgoutput; proven = 0 before the first proof),
 * and never below floor (the position already confirmed: going back
 * confirms nothing and a PG15 walsender would take it). */
lsn_t confirm_position(lsn_t acked, bool capped, lsn_t proven, lsn_t floor);

#endif
