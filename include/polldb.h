/*
 * polldb.h - the statements of polling mode on an open connection, shared
 * by the relay (poll_relay.c) and `outboxd requeue` (requeue.c): one
 * statement with its failure classified, and the statements of polling.h
 * built for the configured table. Nothing here logs: the caller decides
 * what a failure means (retry, reconnect, stop) and logs it once.
 */
#ifndef OUTBOXD_POLLDB_H
#define OUTBOXD_POLLDB_H

#include <libpq-fe.h>

#include "outbox.h"
#include "polling.h"

/* What a failed statement means. */
enum polldb_fail {
    POLLDB_LOST,      /* the connection is gone: reconnect */
    POLLDB_SETUP,     /* the table or the SQL (SQLSTATE class 42: a missing
                       * column, no privilege), or a mismatch found here */
    POLLDB_TRANSIENT, /* lock or statement timeout, deadlock, shutdown... */
};

struct polldb_error {
    enum polldb_fail kind;
    const char *what; /* the statement's purpose (static text); NULL when msg
                       * is the whole message */
    char sqlstate[6]; /* "" when the server sent none */
    char msg[1024];   /* one line, the conninfo's password masked */
};

/* Runs one statement (autocommit: its own transaction). Returns the result
 * (the caller PQclears it) when its status is expect; NULL with e filled
 * otherwise. what names the statement for messages (static text). */
PGresult *polldb_exec(PGconn *conn, const char *conninfo, const char *what, const char *sql,
                      int nparams, const char *const *params, ExecStatusType expect,
                      struct polldb_error *e);

/* Looks up the type of map's event_id column (the array casts of the
 * statements need it) and builds q (free with polling_sql_free()). Returns
 * 0, or -1 with e filled: the lookup's failure as polldb_exec() classifies
 * it, or POLLDB_SETUP when the column does not exist or memory ran out. */
int polldb_prepare(PGconn *conn, const char *conninfo, const struct outbox_map *map,
                   struct polling_sql *q, struct polldb_error *e);

#endif
