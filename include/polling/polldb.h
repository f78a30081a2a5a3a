/*
 * polldb.h - the statements of polling mode prepared on an open connection,
 * shared by the relay (pollrelay.c) and `outboxd requeue` (requeue.c): the
 * event_id column's type looked up, and the statements of polling.h built
 * for the configured table. The statements run with pgsql_exec() (pgsql.h).
 * Nothing here logs: the caller decides what a failure means (retry,
 * reconnect, stop) and logs it once.
 */
#ifndef OUTBOXD_POLLDB_H
#define OUTBOXD_POLLDB_H

#include <libpq-fe.h>

#include "outbox.h"
#include "pgsql.h"
#include "polling.h"

/* Looks up the type of map's event_id column (the array casts of the
 * statements need it) and builds q (free with polling_sql_free()). Returns
 * 0, or -1 with e filled: the lookup's failure as pgsql_exec() classifies
 * it, or PGSQL_SETUP when the column does not exist or memory ran out. */
int polldb_prepare(PGconn *conn, const char *conninfo, const struct outbox_map *map,
                   struct polling_sql *q, struct pgsql_error *e);

#endif
