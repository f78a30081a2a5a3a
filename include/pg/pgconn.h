/*
 * pgconn.h - opening a connection to Postgres the one way outboxd does, and
 * libpq's error text made fit for a log line.
 *
 * The user's conninfo (a key=value string or a URI) is passed as dbname
 * with expand_dbname, so everything it says applies; outboxd adds only
 * connect_timeout and TCP keepalives with tcp_user_timeout (placed first,
 * so the same keyword in the conninfo wins), fallback_application_name
 * (so pg_stat_activity tells outboxd's connections apart), and
 * replication=database for a walsender.
 */
#ifndef OUTBOXD_PGCONN_H
#define OUTBOXD_PGCONN_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

/* tcp_user_timeout (ms) outboxd sets unless the conninfo does: a dead
 * database host is noticed within about this plus one status interval
 * (deploy/standby-failover.md, "Take-over time"). */
#define PGCONN_TCP_USER_TIMEOUT_MS_STR "20000"

struct pgconn_opts {
    const char *conninfo; /* the user's, as configured */
    const char *app_name; /* fallback_application_name, e.g. "outboxd-check" */
    int timeout_s;        /* connect_timeout; 0: libpq's default (none) */
    bool replication;     /* a walsender connection (replication=database) */
};

/* Connects and waits for the outcome. Returns the connection (the caller
 * PQfinishes it, even when it failed), or NULL when out of memory. Check
 * PQstatus(): CONNECTION_OK or CONNECTION_BAD. */
PGconn *pgconn_connect(const struct pgconn_opts *o);

/* Starts a non-blocking connect (PQconnectStartParams): drive it with
 * PQconnectPoll(). Same ownership and NULL as pgconn_connect(). */
PGconn *pgconn_start(const struct pgconn_opts *o);

/* The message of a failed statement or connection, on one line: the
 * server's primary message when res has one, else libpq's text for conn
 * ("out of memory" when conn is NULL), without libpq's trailing newline,
 * line breaks and control bytes replaced, and with conninfo's password
 * masked (redact.h). Prefixed with "what: " when what is not NULL. */
void pgconn_message(const PGconn *conn, const PGresult *res, const char *conninfo,
                    const char *what, char *out, size_t outlen);

/* pgconn_message() for a text already taken from libpq (msg). */
void pgconn_clean(const char *msg, const char *conninfo, const char *what, char *out,
                  size_t outlen);

#endif
