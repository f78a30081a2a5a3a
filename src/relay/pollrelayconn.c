/*
 * pollrelayconn.c - the polling relay's PostgreSQL connection (pollrelay_int.h): the
 * non-blocking connect and its timeout, LISTEN and the statements
 * prepared on a new connection, NOTIFYs, and what a failed statement
 * does (reconnect, stop, or retry later).
 */
#include "pollrelay_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pgconn.h"
#include "pgsql.h"
#include "polldb.h"

/* connect_timeout of the relay's connection, in seconds. */
#define CONNECT_TIMEOUT_S 10

/* ---- postgres ------------------------------------------------------------ */

void pr_disconnect(struct pr *r, const char *why)
{
    if (!r->conn) return;
    log_warn("postgres: %s; reconnecting", why);
    char line[1400];
    (void)outage_fail(&r->pg_outage, clock_mono_ms(), why, line, sizeof(line)); /* said */
    PQfinish(r->conn);
    r->conn = NULL;
    r->st.db = DB_DOWN;
    r->st.next_connect_ms = clock_mono_ms() + r->cfg->pg_retry_min_ms;
}

void pr_drain_notifies(struct pr *r)
{
    PGnotify *n;
    while (r->conn && (n = PQnotifies(r->conn))) {
        r->st.claim_now = true;
        PQfreemem(n);
    }
}

/* Acts on a failed statement: a lost connection is dropped (reconnect
 * later), a set-up mistake is fatal, anything else is retried later. */
static void on_db_error(struct pr *r, const struct pgsql_error *e)
{
    const char *st = e->sqlstate[0] ? e->sqlstate : "?";
    if (e->kind == PGSQL_LOST) {
        char why[1200];
        snprintf(why, sizeof(why), "%s: %s", e->what ? e->what : "postgres", e->msg);
        pr_disconnect(r, why);
    } else if (e->kind == PGSQL_SETUP) {
        if (e->what)
            log_error("postgres: %s: %s (SQLSTATE %s); stopping", e->what, e->msg, st);
        else
            log_error("%s", e->msg);
        r->st.fatal = true;
    } else {
        log_warn("postgres: %s: %s (SQLSTATE %s); will retry", e->what, e->msg, st);
    }
}

/* Runs one statement (pgsql_exec()). Returns the result when its status
 * is expect; otherwise NULL after on_db_error(). */
PGresult *pr_exec(struct pr *r, const char *what, const char *sql, int nparams,
                      const char *const *params, ExecStatusType expect)
{
    if (r->st.db != DB_UP) return NULL;
    struct pgsql_error e;
    PGresult *res =
        pgsql_exec(r->conn, r->cfg->pg_conninfo, what, sql, nparams, params, expect, &e);
    pr_drain_notifies(r);
    if (!res) on_db_error(r, &e);
    return res;
}

/* LISTENs and (the first time) prepares the statements on a new
 * connection. */
static void connected(struct pr *r)
{
    r->st.db = DB_UP;
    backoff_reset(&r->backoff);
    PGresult *res = pr_exec(r, "LISTEN", r->channel_sql, 0, NULL, PGRES_COMMAND_OK);
    if (!res) return;
    PQclear(res);
    struct pgsql_error e;
    if (!r->st.sql_ready) {
        if (polldb_prepare(r->conn, r->cfg->pg_conninfo, &r->map, &r->sql, &e) != 0)
            return on_db_error(r, &e);
        r->st.sql_ready = true;
    }
    r->st.claim_now = true; /* whatever was committed while we were away */
    char line[512];
    if (outage_ok(&r->pg_outage, clock_mono_ms(), line, sizeof(line))) log_info("%s", line);
    log_info("polling %s.%s as %s (LISTEN %s, batch %d, lease %" PRId64 " ms)", r->map.schema,
             r->map.table, r->owner, r->cfg->poll_notify_channel, r->cfg->poll_batch_size,
             r->cfg->poll_lease_ms);
}

/* A connect failed (why: libpq's text, or NULL to take it from the
 * connection): the next one after the backoff. */
static void connect_failed(struct pr *r, const char *why, int64_t now)
{
    char msg[1024];
    if (why)
        pgconn_clean(why, r->cfg->pg_conninfo, NULL, msg, sizeof(msg));
    else
        pgconn_message(r->conn, NULL, r->cfg->pg_conninfo, NULL, msg, sizeof(msg));
    PQfinish(r->conn);
    r->conn = NULL;
    r->st.db = DB_DOWN;
    int ms = backoff_next(&r->backoff, rand());
    log_debug("cannot connect to postgres: %s; retrying in %d ms", msg, ms);
    /* Said at once for the first failure, then once per OUTAGE_EVERY_MS. */
    char cause[1100], line[1400];
    snprintf(cause, sizeof(cause), "cannot connect to postgres: %s", msg);
    if (outage_fail(&r->pg_outage, now, cause, line, sizeof(line)))
        log_warn("%s; next attempt in %d ms", line, ms);
    r->st.next_connect_ms = now + ms;
}

/* Starts a non-blocking connect; the loop drives it (pr_connect_step()). */
void pr_connect_start(struct pr *r, int64_t now)
{
    struct pgconn_opts o = {.conninfo = r->cfg->pg_conninfo,
                            .app_name = "outboxd-polling",
                            .timeout_s = CONNECT_TIMEOUT_S};
    r->conn = pgconn_start(&o);
    r->st.db = DB_CONNECTING;
    r->st.connect_deadline_ms = now + CONNECT_TIMEOUT_S * 1000;
    r->connect_poll = PGRES_POLLING_WRITING; /* libpq: how to begin */
    if (!r->conn || PQstatus(r->conn) == CONNECTION_BAD) connect_failed(r, NULL, now);
}

/* libpq's text for a connect that timed out, as its blocking connect
 * words it ("connection to server at "HOST", port PORT failed: timeout
 * expired"), into out. */
static void timeout_text(const PGconn *conn, char *out, size_t outlen)
{
    const char *host = PQhost(conn), *addr = PQhostaddr(conn), *port = PQport(conn);
    host = host ? host : "";
    port = port ? port : "";
    if (host[0] == '/')
        snprintf(out, outlen, "connection to server on socket \"%s/.s.PGSQL.%s\" failed: "
                 "timeout expired", host, port);
    else if (addr && addr[0] && strcmp(addr, host) != 0)
        snprintf(out, outlen, "connection to server at \"%s\" (%s), port %s failed: timeout "
                 "expired", host, addr, port);
    else
        snprintf(out, outlen, "connection to server at \"%s\", port %s failed: timeout expired",
                 host, port);
}

/* Advances the connect when its socket was ready; fails it at the
 * deadline, as libpq's connect_timeout does a blocking one (the whole
 * connect: libpq's would try the next host of a list). */
void pr_connect_step(struct pr *r, const struct evloop *l, int64_t now)
{
    if (r->connect_fd < 0 || evloop_ready(l, r->connect_fd)) {
        r->connect_poll = PQconnectPoll(r->conn);
        if (r->connect_poll == PGRES_POLLING_OK) return connected(r);
        if (r->connect_poll == PGRES_POLLING_FAILED) return connect_failed(r, NULL, now);
    }
    if (!pollstate_connect_expired(&r->st, now)) return;
    char why[600];
    timeout_text(r->conn, why, sizeof(why));
    connect_failed(r, why, now);
}
