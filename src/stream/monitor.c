/*
 * monitor.c - slot lag, wal_status (and a standby's WAL receiver) and
 * heartbeats on a normal connection, non-blocking, stepped by the relay's
 * event loop (see monitor.h).
 *
 * One statement at a time: the connection is DOWN, CONNECTING, IDLE, or
 * BUSY with one query (slot or heartbeat). libpq is only called when
 * poll() says the socket is ready, so a step never waits. A connection or
 * query that takes longer than STUCK_MS is abandoned and opened again at
 * the next interval.
 */
#include "monitor.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heartbeat.h"
#include "log.h"
#include "pgconn.h"

#define STUCK_MS 15000

enum mon_state { M_DOWN, M_CONNECTING, M_IDLE, M_BUSY };
enum mon_query { Q_SLOT, Q_HEARTBEAT, Q_PUB_LSN, Q_PUB_MEMBER };

struct monitor {
    struct monitor_config c;
    PGconn *conn;
    enum mon_state state;
    PostgresPollingStatusType poll_dir; /* while CONNECTING */
    enum mon_query query;               /* while BUSY */
    bool flushing;                      /* the query is not fully sent yet */
    int64_t state_since_ms;
    int64_t next_connect_ms;
    int64_t next_slot_ms;
    int64_t next_heartbeat_ms;
    bool told_standby; /* the standby's heartbeat line was logged */
    int64_t next_pub_ms;
    int pub_ms;       /* publication check period; 0: none */
    lsn_t pub_lsn;    /* read by Q_PUB_LSN for the Q_PUB_MEMBER that follows */
    int failures; /* consecutive; only the first of a streak is a warning */
};

struct monitor *monitor_new(const struct monitor_config *c)
{
    struct monitor *m = calloc(1, sizeof(*m));
    if (!m) return NULL;
    m->c = *c;
    if (c->publication)
        m->pub_ms = c->interval_ms < MONITOR_PUB_MS ? c->interval_ms : MONITOR_PUB_MS;
    return m;
}

static void disconnect(struct monitor *m, int64_t now_ms)
{
    PQfinish(m->conn);
    m->conn = NULL;
    m->state = M_DOWN;
    m->next_connect_ms = now_ms + m->c.interval_ms;
}

void monitor_free(struct monitor *m)
{
    if (!m) return;
    PQfinish(m->conn);
    free(m);
}

/* Logs a failure (a warning for the first of a streak) and closes. reason:
 * what went wrong, or NULL for the connection's own message. */
static void failed(struct monitor *m, int64_t now_ms, const char *what, const char *reason,
                   struct monitor_report *out)
{
    char why[768];
    if (reason)
        pgconn_clean(reason, m->c.conninfo, NULL, why, sizeof(why));
    else
        pgconn_message(m->conn, NULL, m->c.conninfo, NULL, why, sizeof(why));
    enum log_level level = m->failures++ == 0 ? LOG_WARN : LOG_DEBUG;
    log_kv(level, LOG_FIELDS({"monitor", what}),
           "monitor connection (slot lag, heartbeat): %s; retrying in %d ms", why,
           m->c.interval_ms);
    out->failed = true;
    /* A shutting-down server ends normal connections first (fast shutdown)
     * and then waits for its walsenders (see relay.c). */
    out->server_stopping = strstr(why, "terminating connection due to administrator") ||
                           strstr(why, "the database system is shutting down");
    disconnect(m, now_ms);
}

/* Whether fd is ready in the given direction right now. */
static bool ready(int fd, bool write)
{
    struct pollfd p = {.fd = fd, .events = write ? POLLOUT : POLLIN};
    return poll(&p, 1, 0) > 0;
}

static void start_connect(struct monitor *m, int64_t now_ms, struct monitor_report *out)
{
    m->conn = pgconn_start(
        &(struct pgconn_opts){.conninfo = m->c.conninfo, .app_name = "outboxd-monitor"});
    if (!m->conn || PQstatus(m->conn) == CONNECTION_BAD) {
        failed(m, now_ms, "connect", NULL, out);
        return;
    }
    m->state = M_CONNECTING;
    m->poll_dir = PGRES_POLLING_WRITING;
    m->state_since_ms = now_ms;
}

static void continue_connect(struct monitor *m, int64_t now_ms, struct monitor_report *out)
{
    if (!ready(PQsocket(m->conn), m->poll_dir == PGRES_POLLING_WRITING)) return;
    m->poll_dir = PQconnectPoll(m->conn);
    if (m->poll_dir == PGRES_POLLING_FAILED) {
        failed(m, now_ms, "connect", NULL, out);
    } else if (m->poll_dir == PGRES_POLLING_OK) {
        if (PQsetnonblocking(m->conn, 1) != 0) {
            failed(m, now_ms, "connect", NULL, out);
            return;
        }
        if (m->failures > 0) log_info("monitor connection (slot lag, heartbeat) restored");
        m->state = M_IDLE;
    }
}

static const char *query_name(enum mon_query q)
{
    return q == Q_SLOT ? "slot query" : q == Q_HEARTBEAT ? "heartbeat" : "publication check";
}

/* The monitor's statements, one per mon_query. The server's WAL position:
 * on a standby (logical decoding there, PostgreSQL 16+) the position
 * replayed, as pg_current_wal_lsn() refuses to run during recovery. A
 * statement after it sees every transaction replayed before it, as on a
 * primary one sees every one committed before its position: the proof
 * holds the same way. */
#define SQL_WAL_POS                                                                        \
    "CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.pg_last_wal_replay_lsn() "  \
    "ELSE pg_catalog.pg_current_wal_lsn() END"
#define SQL_PUB_LSN "SELECT (" SQL_WAL_POS ")::text"
#define SQL_PUB_MEMBER                                                                     \
    "SELECT p.pubinsert, NOT EXISTS (SELECT 1 FROM unnest($2::text[], $3::text[]) o(s, t) " \
    "WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables t "                   \
    "WHERE t.pubname = p.pubname AND t.schemaname = o.s AND t.tablename = o.t)), "         \
    "NOT p.pubviaroot AND EXISTS (SELECT 1 "                                               \
    "FROM unnest($2::text[], $3::text[]) o(s, t) JOIN pg_catalog.pg_namespace n "          \
    "ON n.nspname = o.s JOIN pg_catalog.pg_class c "                                       \
    "ON c.relnamespace = n.oid AND c.relname = o.t WHERE c.relkind = 'p') "                \
    "FROM pg_catalog.pg_publication p WHERE p.pubname = $1"
/* failover through to_jsonb: the column exists from PostgreSQL 17 on, and
 * one statement serves every version (NULL, so false, below). */
/* On a standby, its WAL receiver's status too (standby.h): "none" when it
 * has no receiver, "?" when the role may not see it (pg_read_all_stats). */
#define SQL_SLOT                                                                           \
    "SELECT ((" SQL_WAL_POS ") - confirmed_flush_lsn)::bigint, wal_status, "              \
    "coalesce((to_jsonb(s) ->> 'failover')::boolean, false), "                             \
    "CASE WHEN pg_catalog.pg_is_in_recovery() THEN coalesce((SELECT "                      \
    "coalesce(status, '?') FROM pg_catalog.pg_stat_wal_receiver), 'none') END "            \
    "FROM pg_catalog.pg_replication_slots s WHERE slot_name = $1"
/* A standby cannot write WAL: there the heartbeat is not written (NULL);
 * the slot still advances, with the primary's WAL replayed and the
 * keepalives that carry its position (deploy/standby-failover.md). */
#define SQL_HEARTBEAT                                                                      \
    "SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL "                          \
    "ELSE pg_catalog.pg_logical_emit_message(false, $1, $2) END"

static int send_sql(struct monitor *m, const char *sql, int nparams, const char *const *params)
{
    return PQsendQueryParams(m->conn, sql, nparams, NULL, params, NULL, NULL, 0);
}

static void send_query(struct monitor *m, enum mon_query q, int64_t now_ms,
                       int64_t now_unix_us, struct monitor_report *out)
{
    char content[256];
    int rc;
    if (q == Q_PUB_LSN) {
        /* Its own statement, before the membership query: see monitor.h. */
        rc = send_sql(m, SQL_PUB_LSN, 0, NULL);
        m->next_pub_ms = now_ms + m->pub_ms;
    } else if (q == Q_PUB_MEMBER) {
        rc = send_sql(m, SQL_PUB_MEMBER, 3,
                      (const char *const[]){m->c.publication, m->c.schemas, m->c.tables});
    } else if (q == Q_SLOT) {
        rc = send_sql(m, SQL_SLOT, 1, (const char *const[]){m->c.slot});
        m->next_slot_ms = now_ms + m->c.interval_ms;
    } else {
        heartbeat_content(m->c.slot, now_unix_us, content, sizeof(content));
        rc = send_sql(m, SQL_HEARTBEAT, 2, (const char *const[]){HEARTBEAT_PREFIX, content});
        m->next_heartbeat_ms = now_ms + m->c.heartbeat_ms;
    }
    if (rc != 1) {
        failed(m, now_ms, query_name(q), NULL, out);
        return;
    }
    m->state = M_BUSY;
    m->query = q;
    m->flushing = true;
    m->state_since_ms = now_ms;
}

static void take_result(struct monitor *m, PGresult *res, struct monitor_report *out)
{
    if (m->query == Q_HEARTBEAT) {
        bool standby = PQntuples(res) == 1 && PQgetisnull(res, 0, 0);
        out->heartbeat_sent = !standby;
        if (standby && !m->told_standby)
            log_info("monitor: the server is a standby (in recovery): heartbeats are not "
                     "written there; the slot advances with the primary's WAL as it is "
                     "replayed");
        m->told_standby = standby;
        return;
    }
    if (m->query == Q_PUB_LSN) {
        m->pub_lsn = 0;
        if (PQntuples(res) == 1) lsn_parse(PQgetvalue(res, 0, 0), &m->pub_lsn);
        return;
    }
    if (m->query == Q_PUB_MEMBER) {
        if (m->pub_lsn == 0) return; /* no position read: proves nothing */
        out->pub_answer = true;
        out->pub_lsn = m->pub_lsn;
        out->pub_found = PQntuples(res) == 1;
        if (!out->pub_found) return;
        out->pub_insert = PQgetvalue(res, 0, 0)[0] == 't';
        out->pub_member = PQgetvalue(res, 0, 1)[0] == 't';
        out->pub_leaves = PQgetvalue(res, 0, 2)[0] == 't';
        return;
    }
    out->slot_answer = true;
    out->slot_found = PQntuples(res) == 1;
    if (!out->slot_found) return;
    out->lag_bytes = PQgetisnull(res, 0, 0) ? -1 : strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    snprintf(out->wal_status, sizeof(out->wal_status), "%s",
             PQgetisnull(res, 0, 1) ? "" : PQgetvalue(res, 0, 1));
    out->failover = PQnfields(res) > 2 && PQgetvalue(res, 0, 2)[0] == 't';
    if (PQnfields(res) > 3 && !PQgetisnull(res, 0, 3))
        snprintf(out->receiver, sizeof(out->receiver), "%s", PQgetvalue(res, 0, 3));
}

static void continue_query(struct monitor *m, int64_t now_ms, struct monitor_report *out)
{
    const char *what = query_name(m->query);
    if (m->flushing) {
        int f = PQflush(m->conn);
        if (f < 0) {
            failed(m, now_ms, what, NULL, out);
            return;
        }
        m->flushing = f == 1;
        if (m->flushing) return;
    }
    if (!ready(PQsocket(m->conn), false)) return;
    if (PQconsumeInput(m->conn) == 0) {
        failed(m, now_ms, what, NULL, out);
        return;
    }
    if (PQisBusy(m->conn)) return;
    PGresult *res;
    char err[512] = "";
    while ((res = PQgetResult(m->conn)) != NULL) {
        if (PQresultStatus(res) == PGRES_TUPLES_OK)
            take_result(m, res, out);
        else if (!err[0])
            snprintf(err, sizeof(err), "%s", PQresultErrorMessage(res));
        PQclear(res);
    }
    if (err[0]) {
        failed(m, now_ms, what, err, out);
        return;
    }
    m->failures = 0;
    m->state = M_IDLE;
    if (m->query == Q_PUB_LSN) send_query(m, Q_PUB_MEMBER, now_ms, 0, out);
}

void monitor_step(struct monitor *m, int64_t now_ms, int64_t now_unix_us,
                  struct monitor_report *out)
{
    memset(out, 0, sizeof(*out));
    if (m->state != M_DOWN && m->state != M_IDLE && now_ms - m->state_since_ms > STUCK_MS) {
        char why[96];
        snprintf(why, sizeof(why), "no answer within %d ms", STUCK_MS);
        failed(m, now_ms, m->state == M_CONNECTING ? "connect" : "query", why, out);
        return;
    }
    switch (m->state) {
    case M_DOWN:
        if (now_ms >= m->next_connect_ms) start_connect(m, now_ms, out);
        break;
    case M_CONNECTING:
        continue_connect(m, now_ms, out);
        break;
    case M_BUSY:
        continue_query(m, now_ms, out);
        break;
    case M_IDLE:
        break;
    }
    if (m->state != M_IDLE) return;
    /* Whichever is due and waited longest first, so that none starves. */
    enum mon_query q = Q_SLOT;
    int64_t due = m->next_slot_ms;
    if (m->c.heartbeat_ms > 0 && m->next_heartbeat_ms < due) {
        q = Q_HEARTBEAT;
        due = m->next_heartbeat_ms;
    }
    if (m->pub_ms > 0 && m->next_pub_ms < due) {
        q = Q_PUB_LSN;
        due = m->next_pub_ms;
    }
    if (now_ms >= due) send_query(m, q, now_ms, now_unix_us, out);
}

void monitor_check_publication_now(struct monitor *m)
{
    if (m->pub_ms > 0) m->next_pub_ms = 0;
}

int monitor_wait_fd(const struct monitor *m, bool *want_write)
{
    *want_write = false;
    if (m->state == M_CONNECTING) {
        *want_write = m->poll_dir == PGRES_POLLING_WRITING;
        return PQsocket(m->conn);
    }
    if (m->state == M_BUSY) {
        *want_write = m->flushing;
        return PQsocket(m->conn);
    }
    return -1;
}

int64_t monitor_due_in(const struct monitor *m, int64_t now_ms)
{
    int64_t due;
    if (m->state == M_DOWN) {
        due = m->next_connect_ms;
    } else if (m->state == M_IDLE) {
        due = m->next_slot_ms;
        if (m->c.heartbeat_ms > 0 && m->next_heartbeat_ms < due) due = m->next_heartbeat_ms;
        if (m->pub_ms > 0 && m->next_pub_ms < due) due = m->next_pub_ms;
    } else {
        due = m->state_since_ms + STUCK_MS + 1;
    }
    return due > now_ms ? due - now_ms : 0;
}
