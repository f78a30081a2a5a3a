/*
 * stream.c - the replication connection (libpq, CopyBoth).
 *
 * The same connection serves the few SQL queries outboxd needs before
 * streaming (slot and publication lookups): a replication=database
 * walsender accepts simple-protocol SQL, but not the extended protocol, so
 * parameters are escaped with PQescapeLiteral/PQescapeIdentifier.
 */
#include "stream.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "redact.h"
#include "replproto.h"

struct stream {
    PGconn *conn;
    char sqlstate[6]; /* of the last failed statement, "" if none */
};

/* Copies libpq's message (which ends in a newline) into err. */
static void pq_error(PGconn *conn, const char *what, char *err, size_t errlen)
{
    const char *m = conn ? PQerrorMessage(conn) : "out of memory";
    size_t n = strlen(m);
    while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' ')) n--;
    snprintf(err, errlen, "%s: %.*s", what, (int)n, m);
}

struct stream *stream_connect(const char *conninfo, char *err, size_t errlen)
{
    /* expand_dbname=1: the dbname value is parsed as a full conninfo
     * string or URI; the keywords after it override what it says. */
    const char *keys[] = {"dbname", "replication", "fallback_application_name", NULL};
    const char *vals[] = {conninfo, "database", "outboxd", NULL};
    struct stream *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->conn = PQconnectdbParams(keys, vals, 1);
    if (!s->conn || PQstatus(s->conn) != CONNECTION_OK) {
        char raw[1024], safe[1024];
        pq_error(s->conn, "cannot connect to postgres", raw, sizeof(raw));
        redact_conn_error(conninfo, raw, safe, sizeof(safe));
        snprintf(err, errlen, "%s", safe);
        stream_close(s);
        return NULL;
    }
    return s;
}

void stream_close(struct stream *s)
{
    if (!s) return;
    PQfinish(s->conn);
    free(s);
}

/* Runs one simple-protocol statement; returns the result (caller PQclears)
 * when its status is expect, else NULL with err. */
static PGresult *run(struct stream *s, const char *sql, ExecStatusType expect,
                     const char *what, char *err, size_t errlen)
{
    PGresult *r = PQexec(s->conn, sql);
    s->sqlstate[0] = '\0';
    if (PQresultStatus(r) != expect) {
        const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
        if (st) snprintf(s->sqlstate, sizeof(s->sqlstate), "%s", st);
        pq_error(s->conn, what, err, errlen);
        PQclear(r);
        return NULL;
    }
    return r;
}

int stream_slot_info(struct stream *s, const char *slot, struct slot_info *out,
                     char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    char *lit = PQescapeLiteral(s->conn, slot, strlen(slot));
    if (!lit) {
        pq_error(s->conn, "slot name", err, errlen);
        return -1;
    }
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT plugin, database, coalesce(confirmed_flush_lsn::text, '0/0'), "
             "active, coalesce(active_pid, 0) FROM pg_catalog.pg_replication_slots "
             "WHERE slot_name = %s",
             lit);
    PQfreemem(lit);
    PGresult *r = run(s, sql, PGRES_TUPLES_OK, "reading pg_replication_slots", err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 1) {
        out->exists = true;
        snprintf(out->plugin, sizeof(out->plugin), "%s", PQgetvalue(r, 0, 0));
        snprintf(out->database, sizeof(out->database), "%s", PQgetvalue(r, 0, 1));
        lsn_parse(PQgetvalue(r, 0, 2), &out->confirmed_flush);
        out->active = PQgetvalue(r, 0, 3)[0] == 't';
        out->active_pid = atoi(PQgetvalue(r, 0, 4));
    }
    PQclear(r);
    return 0;
}

int stream_create_slot(struct stream *s, const char *slot, const char *plugin,
                       char *err, size_t errlen)
{
    char *id = PQescapeIdentifier(s->conn, slot, strlen(slot));
    char *pl = PQescapeIdentifier(s->conn, plugin, strlen(plugin));
    char sql[512];
    if (!id || !pl) {
        PQfreemem(id);
        PQfreemem(pl);
        pq_error(s->conn, "slot name", err, errlen);
        return -1;
    }
    snprintf(sql, sizeof(sql), "CREATE_REPLICATION_SLOT %s LOGICAL %s NOEXPORT_SNAPSHOT",
             id, pl);
    PQfreemem(id);
    PQfreemem(pl);
    PGresult *r = run(s, sql, PGRES_TUPLES_OK, "creating replication slot", err, errlen);
    if (!r) return -1;
    PQclear(r);
    return 0;
}

int stream_publication_exists(struct stream *s, const char *publication, char *err,
                              size_t errlen)
{
    char *lit = PQescapeLiteral(s->conn, publication, strlen(publication));
    if (!lit) {
        pq_error(s->conn, "publication name", err, errlen);
        return -1;
    }
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = %s",
             lit);
    PQfreemem(lit);
    PGresult *r = run(s, sql, PGRES_TUPLES_OK, "reading pg_publication", err, errlen);
    if (!r) return -1;
    int found = PQntuples(r) == 1;
    PQclear(r);
    return found;
}

/* Appends to out the value of wal2json's add-tables for schema.table:
 * wal2json splits on ',' and '.', and reads '*' as a wildcard, so those
 * (and space, quote and backslash) are escaped with a backslash. */
static void wal2json_table_filter(const char *schema, const char *table, char *out,
                                  size_t outlen)
{
    size_t n = 0;
    const char *parts[2] = {schema, table};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && n + 1 < outlen) out[n++] = '.';
        for (const char *p = parts[i]; *p && n + 2 < outlen; p++) {
            if (strchr(" ',.*\\", *p)) out[n++] = '\\';
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

/* Builds the option list of START_REPLICATION for t into out. Returns 0,
 * or -1 on an escaping failure. */
static int plugin_options(struct stream *s, const struct stream_target *t, char *out,
                          size_t outlen)
{
    if (t->plugin == PLUGIN_PGOUTPUT) {
        /* publication_names is a comma-separated list of identifiers inside
         * a string literal: quote the name as an identifier, then as a
         * literal. */
        char *pubid = PQescapeIdentifier(s->conn, t->publication, strlen(t->publication));
        char *publit = pubid ? PQescapeLiteral(s->conn, pubid, strlen(pubid)) : NULL;
        if (publit)
            snprintf(out, outlen, "proto_version '1', publication_names %s%s", publit,
                     t->messages ? ", messages 'true'" : "");
        PQfreemem(pubid);
        PQfreemem(publit);
        return publit ? 0 : -1;
    }
    char filter[512];
    wal2json_table_filter(t->schema, t->table, filter, sizeof(filter));
    char *lit = PQescapeLiteral(s->conn, filter, strlen(filter));
    if (!lit) return -1;
    /* include-types 'false': outboxd maps columns by name, and a type name
     * on every column of every row ("timestamp with time zone") made up
     * 13 % of the benchmark's lines, for the walsender to print and outboxd
     * to parse. */
    snprintf(out, outlen,
             "\"format-version\" '2', \"include-transaction\" 'true', "
             "\"include-lsn\" 'true', \"include-timestamp\" 'true', "
             "\"include-types\" 'false', \"add-tables\" %s, \"actions\" 'insert'",
             lit);
    PQfreemem(lit);
    return 0;
}

int stream_start(struct stream *s, const struct stream_target *t, lsn_t start, char *err,
                 size_t errlen)
{
    char lsn[LSN_STRLEN], options[1024], sql[1400];
    char *id = PQescapeIdentifier(s->conn, t->slot, strlen(t->slot));
    int ok = id && plugin_options(s, t, options, sizeof(options)) == 0;
    if (ok)
        snprintf(sql, sizeof(sql), "START_REPLICATION SLOT %s LOGICAL %s (%s)", id,
                 lsn_format(start, lsn), options);
    PQfreemem(id);
    if (!ok) {
        pq_error(s->conn, "START_REPLICATION", err, errlen);
        return -1;
    }
    PGresult *r = run(s, sql, PGRES_COPY_BOTH, "START_REPLICATION", err, errlen);
    if (!r) return -1;
    PQclear(r);
    if (PQsetnonblocking(s->conn, 1) != 0) {
        pq_error(s->conn, "PQsetnonblocking", err, errlen);
        return -1;
    }
    return 0;
}

int stream_plugin_allowed(struct stream *s, const char *plugin, char *err, size_t errlen)
{
    PGresult *r = PQexec(s->conn, "SHOW output_plugin_libraries");
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        const char *st = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        int none = st && strcmp(st, "42704") == 0; /* no such setting: allowed */
        /* A role without pg_read_all_settings may not read it (42501): let
         * the server decide when the slot is used, and say why. */
        int hidden = st && strcmp(st, "42501") == 0;
        if (hidden)
            log_warn("cannot read output_plugin_libraries (GRANT pg_read_all_settings TO "
                     "this role to let outboxd check it); going on");
        else if (!none)
            pq_error(s->conn, "SHOW output_plugin_libraries", err, errlen);
        PQclear(r);
        return none || hidden ? 1 : -1;
    }
    const char *list = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "";
    int allowed = plugin_listed(list, plugin);
    if (!allowed)
        snprintf(err, errlen,
                 "the server's output_plugin_libraries (\"%s\") does not list %s: run "
                 "ALTER SYSTEM SET output_plugin_libraries = pgoutput, wal2json (an "
                 "unquoted list), then reload the configuration",
                 list, plugin);
    PQclear(r);
    return allowed;
}

int stream_fd(const struct stream *s) { return PQsocket(s->conn); }

const char *stream_sqlstate(const struct stream *s) { return s->sqlstate; }

bool stream_broken(const struct stream *s) { return PQstatus(s->conn) == CONNECTION_BAD; }

bool stream_error_is_fatal(const char *err)
{
    /* Retrying cannot fix these: the server answered and said no. */
    static const char *const fatal[] = {
        "password authentication failed", "authentication failed",
        "no pg_hba.conf entry", "does not exist", /* role or database */
        "permission denied", "must be superuser or replication role",
        "invalid connection option", "invalid URI", "missing \"=\"",
    };
    for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
        if (strstr(err, fatal[i])) return true;
    return false;
}

int stream_read(struct stream *s, char **buf, int *len, char *err, size_t errlen)
{
    *buf = NULL;
    /* A status update that did not fit the socket earlier goes out now. */
    if (PQflush(s->conn) < 0) {
        pq_error(s->conn, "replication stream", err, errlen);
        return -1;
    }
    int n = PQgetCopyData(s->conn, buf, 1);
    if (n == 0) {
        /* Nothing buffered: pull what the socket has, then try again. */
        if (PQconsumeInput(s->conn) == 0) {
            pq_error(s->conn, "replication stream", err, errlen);
            return -1;
        }
        n = PQgetCopyData(s->conn, buf, 1);
    }
    if (n > 0) {
        *len = n;
        return 1;
    }
    if (n == 0) return 0;
    if (n == -1) {
        /* The server ended the copy: fetch its reason. */
        PGresult *r = PQgetResult(s->conn);
        if (r && PQresultStatus(r) == PGRES_FATAL_ERROR)
            pq_error(s->conn, "replication stream ended", err, errlen);
        else
            snprintf(err, errlen, "replication stream ended by the server");
        PQclear(r);
        return -1;
    }
    pq_error(s->conn, "replication stream", err, errlen);
    return -1;
}

void stream_free_buf(char *buf) { PQfreemem(buf); }

int stream_send_status(struct stream *s, lsn_t written, lsn_t flushed, bool reply,
                       char *err, size_t errlen)
{
    char msg[REPL_STATUS_LEN];
    repl_build_status(msg, written, flushed, flushed, repl_now(), reply);
    if (PQputCopyData(s->conn, msg, sizeof(msg)) <= 0) {
        pq_error(s->conn, "sending status update", err, errlen);
        return -1;
    }
    /* Non-blocking: PQflush returns 1 when data is still queued; it goes out
     * with the next flush, which the event loop retries. */
    if (PQflush(s->conn) < 0) {
        pq_error(s->conn, "sending status update", err, errlen);
        return -1;
    }
    return 0;
}

void stream_finish(struct stream *s)
{
    if (PQputCopyEnd(s->conn, NULL) > 0) {
        PQsetnonblocking(s->conn, 0);
        PQflush(s->conn);
        PGresult *r;
        /* After CopyDone the walsender answers with CopyDone and the end of
         * the command; discard any last CopyData. */
        char *buf;
        while (PQgetCopyData(s->conn, &buf, 0) > 0) PQfreemem(buf);
        while ((r = PQgetResult(s->conn)) != NULL) PQclear(r);
    }
}
