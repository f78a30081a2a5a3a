/*
 * polldb.c - polling mode's statements on an open connection (see
 * polldb.h).
 */
#include "polldb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgconn.h"
#include "str.h"

PGresult *polldb_exec(PGconn *conn, const char *conninfo, const char *what, const char *sql,
                      int nparams, const char *const *params, ExecStatusType expect,
                      struct polldb_error *e)
{
    PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (res && PQresultStatus(res) == expect) return res;
    pgconn_message(conn, res, conninfo, NULL, e->msg, sizeof(e->msg));
    /* The SQLSTATE is copied: PQresultErrorField() points into res. */
    const char *field = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    snprintf(e->sqlstate, sizeof(e->sqlstate), "%s", field ? field : "");
    e->what = what;
    PQclear(res);
    if (PQstatus(conn) == CONNECTION_BAD)
        e->kind = POLLDB_LOST;
    else if (strncmp(e->sqlstate, "42", 2) == 0)
        e->kind = POLLDB_SETUP;
    else
        e->kind = POLLDB_TRANSIENT;
    return NULL;
}

/* A failure found here, not by the server: the whole message in e. */
static int setup_error(struct polldb_error *e, const char *msg)
{
    e->kind = POLLDB_SETUP;
    e->what = NULL;
    e->sqlstate[0] = '\0';
    snprintf(e->msg, sizeof(e->msg), "%s", msg);
    return -1;
}

int polldb_prepare(PGconn *conn, const char *conninfo, const struct outbox_map *map,
                   struct polling_sql *q, struct polldb_error *e)
{
    char *qs = polling_quote_ident(map->schema), *qt = polling_quote_ident(map->table);
    char *qual = qs && qt ? str_printf("%s.%s", qs, qt) : NULL;
    free(qs);
    free(qt);
    if (!qual) return setup_error(e, "out of memory");
    const char *params[] = {qual, map->columns[OC_EVENT_ID]};
    PGresult *res = polldb_exec(
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
