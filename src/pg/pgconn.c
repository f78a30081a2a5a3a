/*
 * pgconn.c - opening ordinary and replication connections, and their error
 * text (see pgconn.h).
 */
#include "pgconn.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "redact.h"

/* TCP defaults that bound how long a dead database host (no FIN, no RST:
 * a crashed host, a partition) goes unnoticed. outboxd writes a standby
 * status every [postgres] status_interval_ms (1 s), so the stream always
 * has data in flight: tcp_user_timeout (Linux) ends the connection once
 * that data stays unacknowledged this long. Keepalives cover a connection
 * that sends nothing (an ordinary one between statements). Placed before
 * dbname, so that the same keyword in the user's conninfo wins. A host
 * that is alive but slow still acknowledges at the TCP level, so only a
 * silent network trips them. */
static const struct {
    const char *key, *val;
} TCP_DEFAULTS[] = {
    {"keepalives", "1"},
    {"keepalives_idle", "10"},
    {"keepalives_interval", "5"},
    {"keepalives_count", "2"},
    {"tcp_user_timeout", PGCONN_TCP_USER_TIMEOUT_MS_STR},
};
#define N_TCP (sizeof(TCP_DEFAULTS) / sizeof(TCP_DEFAULTS[0]))
#define N_PARAMS (N_TCP + 5)

/* The keyword/value arrays of o, NULL-terminated. timeout must outlive the
 * call that uses them. */
static void fill_params(const struct pgconn_opts *o, char timeout[16],
                        const char *keys[N_PARAMS], const char *vals[N_PARAMS])
{
    size_t n = 0;
    if (o->timeout_s > 0) {
        snprintf(timeout, 16, "%d", o->timeout_s);
        keys[n] = "connect_timeout";
        vals[n++] = timeout;
    }
    for (size_t i = 0; i < N_TCP; i++) {
        keys[n] = TCP_DEFAULTS[i].key;
        vals[n++] = TCP_DEFAULTS[i].val;
    }
    keys[n] = "dbname";
    vals[n++] = o->conninfo ? o->conninfo : "";
    if (o->replication) {
        keys[n] = "replication";
        vals[n++] = "database";
    }
    keys[n] = "fallback_application_name";
    vals[n++] = o->app_name ? o->app_name : "outboxd";
    keys[n] = NULL;
    vals[n] = NULL;
}

PGconn *pgconn_connect(const struct pgconn_opts *o)
{
    char timeout[16];
    const char *keys[N_PARAMS], *vals[N_PARAMS];
    fill_params(o, timeout, keys, vals);
    return PQconnectdbParams(keys, vals, 1);
}

PGconn *pgconn_start(const struct pgconn_opts *o)
{
    char timeout[16];
    const char *keys[N_PARAMS], *vals[N_PARAMS];
    fill_params(o, timeout, keys, vals);
    return PQconnectStartParams(keys, vals, 1);
}

void pgconn_clean(const char *msg, const char *conninfo, const char *what, char *out,
                  size_t outlen)
{
    if (!outlen) return;
    char raw[1024];
    snprintf(raw, sizeof(raw), "%s", msg ? msg : "");
    size_t n = strlen(raw);
    while (n > 0 && (raw[n - 1] == '\n' || raw[n - 1] == ' ')) raw[--n] = '\0';
    for (char *p = raw; *p; p++)
        if (*p == '\n' || *p == '\t') *p = ' '; /* libpq's messages span lines */
    log_one_line(raw);
    char safe[1024];
    redact_conn_error(conninfo, raw, safe, sizeof(safe));
    if (what)
        snprintf(out, outlen, "%s: %s", what, safe);
    else
        snprintf(out, outlen, "%s", safe);
}

void pgconn_message(const PGconn *conn, const PGresult *res, const char *conninfo,
                    const char *what, char *out, size_t outlen)
{
    const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!m || !*m) m = conn ? PQerrorMessage(conn) : "out of memory";
    pgconn_clean(m, conninfo, what, out, outlen);
}
