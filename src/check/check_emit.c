/*
 * check_emit.c - `outboxd check`'s line about the table-less outbox
 * ([outbox] message_prefix, emitmsg.h): whether the stream will carry the
 * messages (pgoutput from PostgreSQL 14 on, asked with messages 'true';
 * wal2json's message records) and whether sql/outbox_emit.sql's
 * outbox_emit() is installed. No line when message_prefix is unset.
 */
#include "check_int.h"

#include <stdio.h>
#include <string.h>

#include "stream.h"

void check_messages(struct ck *k)
{
    const char *what = "outbox messages";
    const char *prefix = k->map_ok ? k->map.message_prefix : NULL;
    char err[512];
    if (!prefix) return;
    if (!k->pg_ok) return ck_skip(k, what, "no connection to postgres");
    bool pgoutput = k->cfg->pg_plugin == PLUGIN_PGOUTPUT;
    if (pgoutput && k->server_version < 140000) {
        ck_report(k, CHECK_FAIL, what,
                  "use [postgres] plugin = wal2json, or PostgreSQL 14 or later, or unset "
                  "[outbox] message_prefix",
                  "pgoutput sends logical decoding messages from PostgreSQL 14 on; this "
                  "server is %d.%d",
                  k->server_version / 10000, k->server_version % 10000 / 100);
        return;
    }
    /* At the daemon's start only what stops it: a client may emit the
     * content itself, without outbox_emit(). */
    if (k->scope == CHECK_SCOPE_STARTUP) return;
    PGresult *r = ck_query(k,
                           "SELECT count(*) FROM pg_catalog.pg_proc p JOIN "
                           "pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
                           "WHERE p.proname = 'outbox_emit' AND n.nspname = 'public'",
                           0, NULL, err, sizeof(err));
    if (!r) return ck_query_failed(k, what, err);
    bool installed = strcmp(PQgetvalue(r, 0, 0), "0") != 0;
    PQclear(r);
    const char *how = pgoutput ? "pgoutput is asked for them: messages 'true'"
                               : "wal2json's message records";
    if (!installed) {
        ck_report(k, CHECK_WARN, what,
                  "run sql/outbox_emit.sql (or emit the content format of sql/README.md "
                  "with pg_logical_emit_message(true, ...) directly)",
                  "transactional messages with prefix \"%s\" are events (%s), but "
                  "public.outbox_emit() is not installed",
                  prefix, how);
        return;
    }
    ck_report(k, CHECK_OK, what, NULL,
              "transactional messages with prefix \"%s\" are events (%s; public.outbox_emit() "
              "installed); they have no row: outboxd verify and repair see only the table's",
              prefix, how);
}
