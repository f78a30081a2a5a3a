/*
 * pgconn.c - opening ordinary and replication connections, and their error
 * text (see pgconn.h).
 */
#include "pgconn.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "redact.h"

/* The keyword/value arrays of o, NULL-terminated. timeout must outlive the
 * call that uses them. */
static void fill_params(const struct pgconn_opts *o, char timeout[16], const char *keys[5],
                        const char *vals[5])
{
    int n = 0;
    if (o->timeout_s > 0) {
        snprintf(timeout, 16, "%d", o->timeout_s);
        keys[n] = "connect_timeout";
        vals[n++] = timeout;
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
    const char *keys[5], *vals[5];
    fill_params(o, timeout, keys, vals);
    return PQconnectdbParams(keys, vals, 1);
}

PGconn *pgconn_start(const struct pgconn_opts *o)
{
    char timeout[16];
    const char *keys[5], *vals[5];
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
