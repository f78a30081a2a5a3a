/*
 * polldb.c - polling mode's statements prepared on an open connection
 * (see polldb.h).
 */
#include "polldb.h"

#include <stdio.h>
#include <stdlib.h>

/* A failure found here, not by the server: the whole message in e. */
static int setup_error(struct pgsql_error *e, const char *msg)
{
    e->kind = PGSQL_SETUP;
    e->what = NULL;
    e->sqlstate[0] = '\0';
    snprintf(e->msg, sizeof(e->msg), "%s", msg);
    return -1;
}

int polldb_prepare(PGconn *conn, const char *conninfo, const struct outbox_map *map,
                   struct polling_sql *q, struct pgsql_error *e)
{
    char *qual = pgsql_quote_qualified(map->schema, map->table);
    if (!qual) return setup_error(e, "out of memory");
    const char *params[] = {qual, map->columns[OC_EVENT_ID]};
    PGresult *res = pgsql_exec(
        conn, conninfo, "looking up the event_id column",
        "SELECT format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
        "WHERE attrelid = $1::regclass AND attname = $2 AND attnum > 0 AND NOT attisdropped",
        2, params, PGRES_TUPLES_OK, e);
    free(qual);
    if (!res) return -1;
    char err[512];
    int rc = 0;
    if (PQntuples(res) != 1) {
        snprintf(err, sizeof(err), "%s.%s has no column \"%s\" ([outbox] column.event_id)",
                 map->schema, map->table, map->columns[OC_EVENT_ID]);
        rc = setup_error(e, err);
    } else if (polling_sql_build(q, map, PQgetvalue(res, 0, 0), err, sizeof(err)) != 0) {
        rc = setup_error(e, err);
    }
    PQclear(res);
    return rc;
}
