/*
 * stream.c - the replication connection (libpq, CopyBoth).
 *
 * The same connection serves the few SQL queries outboxd needs before
 * streaming (slot and publication lookups): a replication=database
 * walsender accepts simple-protocol SQL, but not the extended protocol, so
 * parameters are escaped with PQescapeLiteral/PQescapeIdentifier.
 *
 * The stream itself is read in one of two ways:
 * - direct (the default on a plain TCP or Unix socket): outboxd sends
 *   START_REPLICATION through libpq and from then on reads and writes the
 *   socket itself (pgwire.h frames it). libpq's PQgetCopyData() allocates
 *   and copies every CopyData message, and reads at most about 16 kB per
 *   recv(); read directly, a frame is handed out where it lies in a 256 kB
 *   buffer. That was about 6 % of the CPU of a backlog drain (callgrind,
 *   ~700 of ~11,300 instructions per event).
 * - libpq: PQgetCopyData(). Used for encrypted connections (SSL, GSS),
 *   whose bytes only libpq can read, and when [postgres] direct_read is off.
 * libpq must never see the socket again once direct reading starts, so the
 * connection is only closed afterwards (stream_close()).
 */
#include "stream.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "decoder.h" /* plugin_listed() */
#include "fixit.h"
#include "log.h"
#include "pgconn.h"
#include "pgsql.h"
#include "pgwire.h"
#include "pubnotice.h"
#include "replproto.h"
#include "slotcmd.h"
#include "str.h"

/* Receive buffer of the direct reader: one recv() takes up to this much. A
 * message larger than it grows the buffer, which shrinks back once empty. */
#define STREAM_RBUF (256 * 1024)
/* Status updates not yet taken by the socket (each is 39 bytes). */
#define STREAM_OBUF 4096
/* How long stream_finish() waits for the server to end the copy. */
#define STREAM_FINISH_MS 5000
/* libpq's connect_timeout for the replication connection, unless the
 * conninfo sets one. It applies to each server of a multi-host conninfo:
 * a primary that died without a trace (no RST: a host down, a network
 * cut) costs this long before the next server is tried, not the kernel's
 * TCP connect timeout (about two minutes). */
#define STREAM_CONNECT_TIMEOUT_S 10

struct stream {
    PGconn *conn;
    char sqlstate[6]; /* of the last failed statement, "" if none */
    bool direct;      /* reading the socket itself (see the top of the file) */
    bool broken;      /* direct: the connection failed or the server ended it */
    char *rbuf;       /* direct: received bytes [rstart, rend) not yet handed out */
    size_t rcap, rstart, rend;
    char obuf[STREAM_OBUF]; /* direct: bytes to send, olen of them */
    size_t olen;
    char *copy; /* libpq: the CopyData buffer handed out last (PQfreemem) */
    char pub[128]; /* pgoutput: the publication streamed, "" before stream_start */
    /* libpq: the stream error of a "skipped loading publication" notice the
     * notice receiver saw (pubnotice.h), "" if none. */
    char pub_skip_err[1024];
};

/* libpq's notices on the replication connection: logged like the direct
 * reader's, and PostgreSQL 18's skipped publication kept for stream_read()
 * to end the stream with (pubnotice.h). */
static void on_notice(void *arg, const PGresult *r)
{
    struct stream *s = arg;
    const char *text = PQresultErrorMessage(r);
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    if (s->pub[0] && !s->pub_skip_err[0] && pubnotice_is_skip(text, state ? state : "")) {
        pubnotice_stream_error(s->pub, text, s->pub_skip_err, sizeof(s->pub_skip_err));
        return;
    }
    char line[768];
    snprintf(line, sizeof(line), "%s", text ? text : "");
    line[strcspn(line, "\n")] = '\0';
    log_warn("server notice: %s", line);
}

struct stream *stream_connect(const char *conninfo, char *err, size_t errlen)
{
    struct stream *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->conn = pgconn_connect(&(struct pgconn_opts){.conninfo = conninfo,
                                                   .app_name = "outboxd",
                                                   .timeout_s = STREAM_CONNECT_TIMEOUT_S,
                                                   .replication = true});
    if (!s->conn || PQstatus(s->conn) != CONNECTION_OK) {
        pgconn_message(s->conn, NULL, conninfo, "cannot connect to postgres", err, errlen);
        stream_close(s);
        return NULL;
    }
    PQsetNoticeReceiver(s->conn, on_notice, s);
    return s;
}

void stream_close(struct stream *s)
{
    if (!s) return;
    PQfreemem(s->copy);
    free(s->rbuf);
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
        pgconn_message(s->conn, NULL, NULL, what, err, errlen);
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
        pgconn_message(s->conn, NULL, NULL, "slot name", err, errlen);
        return -1;
    }
    char sql[512];
    /* failover and synced exist from 17 on (slotcmd.h). */
    bool v17 = stream_server_major(s) >= SLOTCMD_FAILOVER_MAJOR;
    snprintf(sql, sizeof(sql),
             "SELECT plugin, database, coalesce(confirmed_flush_lsn::text, '0/0'), "
             "active, coalesce(active_pid, 0), coalesce(wal_status, ''), %s "
             "FROM pg_catalog.pg_replication_slots "
             "WHERE slot_name = %s",
             v17 ? "failover, synced, coalesce(invalidation_reason, ''), "
                   "coalesce(inactive_since::text, '')"
                 : "false, false, '', ''",
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
        snprintf(out->wal_status, sizeof(out->wal_status), "%s", PQgetvalue(r, 0, 5));
        out->has_failover_flag = v17;
        out->failover = PQgetvalue(r, 0, 6)[0] == 't';
        out->synced = PQgetvalue(r, 0, 7)[0] == 't';
        snprintf(out->invalidation_reason, sizeof(out->invalidation_reason), "%s",
                 PQgetvalue(r, 0, 8));
        snprintf(out->inactive_since, sizeof(out->inactive_since), "%s", PQgetvalue(r, 0, 9));
    }
    PQclear(r);
    return 0;
}

int stream_identify_conn(struct pg_conn *conn, struct server_ident *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof(*out));
    PGresult *r = PQexec(conn, "IDENTIFY_SYSTEM");
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) < 4) {
        pgconn_message(conn, NULL, NULL, "IDENTIFY_SYSTEM", err, errlen);
        PQclear(r);
        return -1;
    }
    snprintf(out->system, sizeof(out->system), "%s", PQgetvalue(r, 0, 0));
    out->timeline = (uint32_t)strtoul(PQgetvalue(r, 0, 1), NULL, 10);
    bool ok = lsn_parse(PQgetvalue(r, 0, 2), &out->xlogpos);
    snprintf(out->dbname, sizeof(out->dbname), "%s", PQgetvalue(r, 0, 3));
    PQclear(r);
    if (!ok || !out->system[0]) {
        snprintf(err, errlen, "IDENTIFY_SYSTEM: unexpected answer");
        return -1;
    }
    return 0;
}

char *stream_timeline_history_conn(struct pg_conn *conn, uint32_t tli, char *err,
                                   size_t errlen)
{
    char sql[64];
    snprintf(sql, sizeof(sql), "TIMELINE_HISTORY %u", (unsigned)tli);
    PGresult *r = PQexec(conn, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1 || PQnfields(r) < 2) {
        pgconn_message(conn, r, NULL, "TIMELINE_HISTORY", err, errlen);
        PQclear(r);
        return NULL;
    }
    /* The file's bytes as they are (text), whatever the column's type. */
    char *out = strndup(PQgetvalue(r, 0, 1), (size_t)PQgetlength(r, 0, 1));
    if (!out) snprintf(err, errlen, "TIMELINE_HISTORY: out of memory");
    PQclear(r);
    return out;
}

char *stream_timeline_history(struct stream *s, uint32_t tli, char *err, size_t errlen)
{
    return stream_timeline_history_conn(s->conn, tli, err, errlen);
}

int stream_identify(struct stream *s, struct server_ident *out, char *err, size_t errlen)
{
    s->sqlstate[0] = '\0';
    return stream_identify_conn(s->conn, out, err, errlen);
}

int stream_create_slot(struct stream *s, const char *slot, const char *plugin,
                       const struct slot_create_opts *o, struct slot_created *out, char *err,
                       size_t errlen)
{
    char *id = PQescapeIdentifier(s->conn, slot, strlen(slot));
    char *pl = PQescapeIdentifier(s->conn, plugin, strlen(plugin));
    char sql[512];
    if (!id || !pl) {
        PQfreemem(id);
        PQfreemem(pl);
        pgconn_message(s->conn, NULL, NULL, "slot name", err, errlen);
        return -1;
    }
    /* The command for this server's version (slotcmd.h). */
    int built = slotcmd_create(id, pl, o, stream_server_major(s), sql, sizeof(sql), err, errlen);
    PQfreemem(id);
    PQfreemem(pl);
    if (built != 0) return -1;
    PGresult *r = run(s, sql, PGRES_TUPLES_OK, "creating replication slot", err, errlen);
    if (!r) return -1;
    if (out) {
        /* slot_name, consistent_point, snapshot_name, output_plugin */
        memset(out, 0, sizeof(*out));
        if (PQntuples(r) == 1 && PQnfields(r) >= 3) {
            lsn_parse(PQgetvalue(r, 0, 1), &out->consistent_point);
            if (!PQgetisnull(r, 0, 2))
                snprintf(out->snapshot, sizeof(out->snapshot), "%s", PQgetvalue(r, 0, 2));
        }
    }
    PQclear(r);
    return 0;
}

int stream_alter_slot_failover(struct stream *s, const char *slot, bool failover,
                               char *err, size_t errlen)
{
    char *id = PQescapeIdentifier(s->conn, slot, strlen(slot));
    char sql[256];
    if (!id) {
        pgconn_message(s->conn, NULL, NULL, "slot name", err, errlen);
        return -1;
    }
    int built = slotcmd_alter_failover(id, failover, stream_server_major(s), sql, sizeof(sql),
                                       err, errlen);
    PQfreemem(id);
    if (built != 0) return -1;
    PGresult *r = run(s, sql, PGRES_COMMAND_OK, "altering replication slot", err, errlen);
    if (!r) return -1;
    PQclear(r);
    return 0;
}

int stream_drop_slot(struct stream *s, const char *slot, char *err, size_t errlen)
{
    char *id = PQescapeIdentifier(s->conn, slot, strlen(slot));
    if (!id) {
        pgconn_message(s->conn, NULL, NULL, "slot name", err, errlen);
        return -1;
    }
    char sql[256];
    snprintf(sql, sizeof(sql), "DROP_REPLICATION_SLOT %s", id);
    PQfreemem(id);
    PGresult *r = run(s, sql, PGRES_COMMAND_OK, "dropping replication slot", err, errlen);
    if (!r) return -1;
    PQclear(r);
    return 0;
}

int stream_publication_exists(struct stream *s, const char *publication, char *err,
                              size_t errlen)
{
    char *lit = PQescapeLiteral(s->conn, publication, strlen(publication));
    if (!lit) {
        pgconn_message(s->conn, NULL, NULL, "publication name", err, errlen);
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

/* Runs sql, whose one row's first column is a boolean, after putting
 * schema and table in as literals (two %s). 1 true, 0 false or no row, -1
 * with err. */
static int table_query(struct stream *s, const char *fmt, const char *schema,
                       const char *table, const char *what, char *err, size_t errlen)
{
    char *ns = PQescapeLiteral(s->conn, schema, strlen(schema));
    char *tb = PQescapeLiteral(s->conn, table, strlen(table));
    char *sql = ns && tb ? str_printf(fmt, ns, tb) : NULL;
    PQfreemem(ns);
    PQfreemem(tb);
    if (!sql) {
        pgconn_message(s->conn, NULL, NULL, "escaping the outbox table's name", err,
                       errlen);
        return -1;
    }
    PGresult *r = run(s, sql, PGRES_TUPLES_OK, what, err, errlen);
    free(sql);
    if (!r) return -1;
    int yes = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return yes;
}

int stream_table_partitioned(struct stream *s, const char *schema, const char *table,
                             char *err, size_t errlen)
{
    return table_query(s,
                       "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c "
                       "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = 'p')",
                       schema, table, "reading the outbox table's kind", err, errlen);
}

int stream_table_has_bytea(struct stream *s, const char *schema, const char *table,
                           char *err, size_t errlen)
{
    return table_query(s,
                       "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a "
                       "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
                       "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 "
                       "AND NOT a.attisdropped "
                       "AND a.atttypid = 'pg_catalog.bytea'::pg_catalog.regtype)",
                       schema, table, "reading the outbox table's column types", err,
                       errlen);
}

/* bytea_output = hex for the walsender's session, whatever the server,
 * database or role says: wal2json drops the first two characters of a
 * bytea's text (the "\x" of the hex format), which loses bytes of an
 * escape-format text (outbox.h: a bytea column's value is its bytes).
 * 0, or -1 with err. */
static int value_settings(struct stream *s, char *err, size_t errlen)
{
    PGresult *r =
        run(s, "SET bytea_output = hex", PGRES_COMMAND_OK, "SET bytea_output", err, errlen);
    if (!r) return -1;
    PQclear(r);
    return 0;
}

/* ---- the direct reader ---------------------------------------------------- */

/* Marks the connection failed; returns -1. */
static int direct_fail(struct stream *s, char *err, size_t errlen, const char *fmt,
                       const char *what)
{
    s->broken = true;
    snprintf(err, errlen, fmt, what);
    return -1;
}

/* Sends what obuf holds, as much as the socket takes without blocking.
 * Returns 0 (the rest stays queued) or -1 with err. */
static int direct_flush(struct stream *s, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < s->olen) {
        ssize_t n = send(PQsocket(s->conn), s->obuf + off, s->olen - off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        return direct_fail(s, err, errlen, "replication stream: send: %s",
                           n < 0 ? strerror(errno) : "nothing sent");
    }
    memmove(s->obuf, s->obuf + off, s->olen - off);
    s->olen -= off;
    return 0;
}

/* Queues one frontend message (header, then body) and flushes. */
static int direct_send(struct stream *s, const char header[PGWIRE_HEADER_LEN],
                       const char *body, size_t len, char *err, size_t errlen)
{
    if (s->olen + PGWIRE_HEADER_LEN + len > sizeof(s->obuf))
        return direct_fail(s, err, errlen, "replication stream: %s",
                           "the server has not read the last status updates");
    memcpy(s->obuf + s->olen, header, PGWIRE_HEADER_LEN);
    if (len > 0) memcpy(s->obuf + s->olen + PGWIRE_HEADER_LEN, body, len);
    s->olen += PGWIRE_HEADER_LEN + len;
    return direct_flush(s, err, errlen);
}

/* Makes room for a message of need bytes: moves the unread bytes to the
 * front, grows the buffer when the message is larger than it, and gives a
 * grown buffer back once it is empty. Returns 0 or -1 (out of memory). */
static int direct_make_room(struct stream *s, size_t need)
{
    size_t unread = s->rend - s->rstart;
    if (unread == 0) s->rstart = s->rend = 0;
    if (unread == 0 && s->rcap > STREAM_RBUF) {
        free(s->rbuf);
        s->rbuf = NULL;
        s->rcap = 0;
    }
    if (s->rstart > 0) {
        memmove(s->rbuf, s->rbuf + s->rstart, unread);
        s->rstart = 0;
        s->rend = unread;
    }
    size_t cap = need > STREAM_RBUF ? need : STREAM_RBUF;
    if (s->rcap >= cap) return 0;
    char *b = realloc(s->rbuf, cap);
    if (!b) return -1;
    s->rbuf = b;
    s->rcap = cap;
    return 0;
}

/* One recv() into the buffer. Returns 1 with bytes, 0 when the socket has
 * none, -1 with err when the connection failed or was closed. */
static int direct_recv(struct stream *s, char *err, size_t errlen)
{
    for (;;) {
        ssize_t n = recv(PQsocket(s->conn), s->rbuf + s->rend, s->rcap - s->rend, MSG_DONTWAIT);
        if (n > 0) {
            s->rend += (size_t)n;
            return 1;
        }
        if (n == 0)
            return direct_fail(s, err, errlen, "replication stream: %s",
                               "server closed the connection unexpectedly");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return direct_fail(s, err, errlen, "replication stream: recv: %s", strerror(errno));
    }
}

/* The next complete message, receiving as needed. Returns 1 with *m (valid
 * until the next call), 0 when the socket has no more for now, -1 with err. */
static int direct_next(struct stream *s, struct pgwire_msg *m, char *err, size_t errlen)
{
    bool received = false;
    for (;;) {
        size_t need;
        char why[256];
        long n = pgwire_next(s->rbuf + s->rstart, s->rend - s->rstart, m, &need, why,
                             sizeof(why));
        if (n > 0) {
            s->rstart += (size_t)n;
            return 1;
        }
        if (n < 0) return direct_fail(s, err, errlen, "replication stream: %s", why);
        /* One recv() per call once the buffer ran dry: the loop above
         * comes back when select() says there is more. */
        if (received) return 0;
        if (direct_make_room(s, need) != 0)
            return direct_fail(s, err, errlen, "replication stream: %s", "out of memory");
        int rc = direct_recv(s, err, errlen);
        if (rc <= 0) return rc;
        received = rc > 0 && s->rend - s->rstart < need;
    }
}

/* Handles a message that is not CopyData. Returns 0 to go on, -1 with err
 * when the stream is over (what says where, e.g. "replication stream
 * ended"). */
static int direct_other(struct stream *s, const struct pgwire_msg *m, const char *what,
                        char *err, size_t errlen)
{
    char text[768];
    switch (m->type) {
    case 'N': {
        char state[6] = {0};
        pgwire_error_text(m->body, m->len, text, sizeof(text), state);
        if (s->pub[0] && pubnotice_is_skip(text, state)) {
            /* Nothing after it is read: the slot is not confirmed past the
             * changes the server skipped (pubnotice.h). */
            pubnotice_stream_error(s->pub, text, err, errlen);
            return -1;
        }
        log_warn("server notice: %s", text);
        return 0;
    }
    case 'S': /* ParameterStatus */
    case 'A': /* NotificationResponse */
        return 0;
    case 'E':
        if (pgwire_error_text(m->body, m->len, text, sizeof(text), s->sqlstate) == 0)
            s->broken = true;
        snprintf(err, errlen, "%s: %s", what, text);
        return -1;
    case 'c':
        s->broken = true;
        snprintf(err, errlen, "replication stream ended by the server");
        return -1;
    default:
        return direct_fail(s, err, errlen, "replication stream: unexpected message '%s'",
                           (char[2]){m->type >= 32 && m->type < 127 ? m->type : '?', 0});
    }
}

/* Waits until the socket is readable (or writable, out) or ms pass; -1 =
 * no limit. Returns poll()'s result. */
static int wait_socket(const struct stream *s, bool out, int ms)
{
    struct pollfd p = {.fd = PQsocket(s->conn), .events = out ? POLLOUT : POLLIN};
    int rc;
    while ((rc = poll(&p, 1, ms)) < 0 && errno == EINTR) {
    }
    return rc;
}

/* START_REPLICATION sent through libpq, answered on the socket: the
 * CopyBothResponse, or an ErrorResponse (SQLSTATE kept, e.g. 55006 when
 * another process holds the slot). The frames that follow the response
 * may already be in the buffer; stream_read() takes them from there. */
static int start_direct(struct stream *s, const char *sql, char *err, size_t errlen)
{
    s->sqlstate[0] = '\0';
    /* The buffer exists from here on: no NULL arithmetic later. */
    if (direct_make_room(s, PGWIRE_HEADER_LEN) != 0) {
        snprintf(err, errlen, "START_REPLICATION: out of memory");
        return -1;
    }
    if (!PQsendQuery(s->conn, sql) || PQflush(s->conn) != 0) {
        pgconn_message(s->conn, NULL, NULL, "START_REPLICATION", err, errlen);
        s->broken = PQstatus(s->conn) == CONNECTION_BAD;
        return -1;
    }
    for (;;) {
        struct pgwire_msg m;
        int rc = direct_next(s, &m, err, errlen);
        if (rc < 0) return -1;
        if (rc == 0) {
            /* Like PQexec, no time limit: the server answers or fails. */
            if (wait_socket(s, false, -1) < 0)
                return direct_fail(s, err, errlen, "START_REPLICATION: poll: %s",
                                   strerror(errno));
            continue;
        }
        if (m.type == 'W') return 0;
        if (m.type == 'd')
            return direct_fail(s, err, errlen, "START_REPLICATION: %s",
                               "CopyData before CopyBothResponse");
        if (direct_other(s, &m, "START_REPLICATION", err, errlen) != 0) return -1;
    }
}

/* The next CopyData payload, as stream_read() says. */
static int read_direct(struct stream *s, char **buf, int *len, char *err, size_t errlen)
{
    if (s->olen > 0 && direct_flush(s, err, errlen) != 0) return -1;
    for (;;) {
        struct pgwire_msg m;
        int rc = direct_next(s, &m, err, errlen);
        if (rc <= 0) return rc;
        if (m.type == 'd') {
            if (m.len > (size_t)INT32_MAX)
                return direct_fail(s, err, errlen, "replication stream: %s",
                                   "CopyData message too large");
            *buf = (char *)m.body;
            *len = (int)m.len;
            return 1;
        }
        if (direct_other(s, &m, "replication stream ended", err, errlen) != 0) return -1;
    }
}

/* CopyDone, then what the server sends until its ReadyForQuery (bounded). */
static void finish_direct(struct stream *s)
{
    char err[256], done[PGWIRE_HEADER_LEN];
    pgwire_copydone(done);
    if (direct_send(s, done, NULL, 0, err, sizeof(err)) != 0) return;
    int64_t t0 = clock_mono_ms();
    for (;;) {
        long left = STREAM_FINISH_MS - (long)(clock_mono_ms() - t0);
        if (left <= 0) return;
        bool out = s->olen > 0;
        if (wait_socket(s, out, (int)left) <= 0) return;
        if (out) {
            if (direct_flush(s, err, sizeof(err)) != 0) return;
            continue;
        }
        struct pgwire_msg m;
        int rc;
        while ((rc = direct_next(s, &m, err, sizeof(err))) > 0)
            if (m.type == 'Z' || m.type == 'E') return;
        if (rc < 0) return;
    }
}

/* START_REPLICATION through libpq, which then reads the stream. */
static int start_libpq(struct stream *s, const char *sql, char *err, size_t errlen)
{
    PGresult *r = run(s, sql, PGRES_COPY_BOTH, "START_REPLICATION", err, errlen);
    if (!r) return -1;
    PQclear(r);
    if (PQsetnonblocking(s->conn, 1) != 0) {
        pgconn_message(s->conn, NULL, NULL, "PQsetnonblocking", err, errlen);
        return -1;
    }
    return 0;
}

int stream_start(struct stream *s, const struct stream_target *t, lsn_t start, char *err,
                 size_t errlen)
{
    char lsn[LSN_STRLEN], *sql = NULL;
    if (value_settings(s, err, errlen) != 0) return -1;
    char *id = PQescapeIdentifier(s->conn, t->slot, strlen(t->slot));
    if (id)
        sql = str_printf("START_REPLICATION SLOT %s LOGICAL %s (%s)", id,
                         lsn_format(start, lsn), t->options);
    PQfreemem(id);
    if (!sql) {
        pgconn_message(s->conn, NULL, NULL, "START_REPLICATION", err, errlen);
        return -1;
    }
    snprintf(s->pub, sizeof(s->pub), "%s", t->publication ? t->publication : "");
    s->pub_skip_err[0] = '\0';
    /* Only libpq can read an encrypted connection's bytes. */
    s->direct = t->direct_read && !PQsslInUse(s->conn) && !PQgssEncInUse(s->conn);
    int rc = s->direct ? start_direct(s, sql, err, errlen) : start_libpq(s, sql, err, errlen);
    free(sql);
    return rc;
}

int stream_show(struct stream *s, const char *name, char *out, size_t outlen, char *err,
                size_t errlen)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SHOW %s", name); /* name: outboxd's own constants */
    PGresult *r = run(s, sql, PGRES_TUPLES_OK, sql, err, errlen);
    if (!r) return -1;
    snprintf(out, outlen, "%s", PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    return 0;
}

int stream_has_standby(struct stream *s, bool *has, char *err, size_t errlen)
{
    PGresult *r = run(s,
                      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots "
                      "WHERE slot_type = 'physical') OR EXISTS (SELECT 1 FROM "
                      "pg_catalog.pg_stat_replication)",
                      PGRES_TUPLES_OK, "looking for standbys", err, errlen);
    if (!r) return -1;
    *has = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    return 0;
}

int stream_in_recovery(struct stream *s, bool *standby, char *err, size_t errlen)
{
    PGresult *r = run(s, "SELECT pg_catalog.pg_is_in_recovery()", PGRES_TUPLES_OK,
                      "asking whether the server is a standby", err, errlen);
    if (!r) return -1;
    *standby = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    return 0;
}

int stream_sender_timeout(struct stream *s, int64_t *ms, char *err, size_t errlen)
{
    /* The session's own value: wal_sender_timeout may be set per role or
     * in the conninfo's options, and this walsender is the one it governs. */
    PGresult *r = run(s,
                      "SELECT setting::bigint FROM pg_catalog.pg_settings "
                      "WHERE name = 'wal_sender_timeout'",
                      PGRES_TUPLES_OK, "reading wal_sender_timeout", err, errlen);
    if (!r) return -1;
    *ms = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
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
            pgconn_message(s->conn, NULL, NULL, "SHOW output_plugin_libraries", err, errlen);
        PQclear(r);
        return none || hidden ? 1 : -1;
    }
    const char *list = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "";
    int allowed = plugin_listed(list, plugin);
    if (!allowed)
        snprintf(err, errlen,
                 "the server's output_plugin_libraries (\"%s\") does not list %s: %s", list,
                 plugin, fixit_allow_plugin());
    PQclear(r);
    return allowed;
}

char *stream_server_label(const struct stream *s, char *out, size_t outlen)
{
    /* With a multi-host conninfo these name the server libpq settled on. */
    const char *host = PQhost(s->conn), *port = PQport(s->conn);
    snprintf(out, outlen, "%s:%s", host && *host ? host : "?", port && *port ? port : "?");
    return out;
}

int stream_fd(const struct stream *s) { return PQsocket(s->conn); }

int stream_server_major(const struct stream *s)
{
    return PQserverVersion(s->conn) / 10000;
}

bool stream_direct(const struct stream *s) { return s->direct; }

bool stream_pending(const struct stream *s)
{
    if (!s->direct || s->rend == s->rstart) return false;
    struct pgwire_msg m;
    size_t need;
    char why[8];
    return pgwire_next(s->rbuf + s->rstart, s->rend - s->rstart, &m, &need, why, sizeof(why)) != 0;
}

const char *stream_sqlstate(const struct stream *s) { return s->sqlstate; }

bool stream_broken(const struct stream *s)
{
    return s->broken || PQstatus(s->conn) == CONNECTION_BAD;
}

int stream_read(struct stream *s, char **buf, int *len, char *err, size_t errlen)
{
    *buf = NULL;
    if (s->direct) return read_direct(s, buf, len, err, errlen);
    PQfreemem(s->copy);
    s->copy = NULL;
    /* A status update that did not fit the socket earlier goes out now. */
    if (PQflush(s->conn) < 0) {
        pgconn_message(s->conn, NULL, NULL, "replication stream", err, errlen);
        return -1;
    }
    int n = PQgetCopyData(s->conn, buf, 1);
    if (n == 0) {
        /* Nothing buffered: pull what the socket has, then try again. */
        if (PQconsumeInput(s->conn) == 0) {
            pgconn_message(s->conn, NULL, NULL, "replication stream", err, errlen);
            return -1;
        }
        n = PQgetCopyData(s->conn, buf, 1);
    }
    if (s->pub_skip_err[0]) {
        /* The notice came before this message: nothing from here on. */
        if (n > 0) PQfreemem(*buf);
        *buf = NULL;
        snprintf(err, errlen, "%s", s->pub_skip_err);
        return -1;
    }
    if (n > 0) {
        s->copy = *buf;
        *len = n;
        return 1;
    }
    if (n == 0) return 0;
    if (n == -1) {
        /* The server ended the copy: fetch its reason. */
        PGresult *r = PQgetResult(s->conn);
        if (r && PQresultStatus(r) == PGRES_FATAL_ERROR)
            pgconn_message(s->conn, NULL, NULL, "replication stream ended", err, errlen);
        else
            snprintf(err, errlen, "replication stream ended by the server");
        PQclear(r);
        return -1;
    }
    pgconn_message(s->conn, NULL, NULL, "replication stream", err, errlen);
    return -1;
}

int stream_send_status(struct stream *s, lsn_t written, lsn_t flushed, bool reply,
                       char *err, size_t errlen)
{
    char msg[REPL_STATUS_LEN];
    repl_build_status(msg, written, flushed, flushed, repl_now(), reply);
    if (s->direct) {
        char header[PGWIRE_HEADER_LEN];
        pgwire_copydata_header(header, sizeof(msg));
        return direct_send(s, header, msg, sizeof(msg), err, errlen);
    }
    if (PQputCopyData(s->conn, msg, sizeof(msg)) <= 0) {
        pgconn_message(s->conn, NULL, NULL, "sending status update", err, errlen);
        return -1;
    }
    /* Non-blocking: PQflush returns 1 when data is still queued; it goes out
     * with the next flush, which the event loop retries. */
    if (PQflush(s->conn) < 0) {
        pgconn_message(s->conn, NULL, NULL, "sending status update", err, errlen);
        return -1;
    }
    return 0;
}

void stream_finish(struct stream *s)
{
    if (s->direct) {
        if (!s->broken) finish_direct(s);
        return;
    }
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
