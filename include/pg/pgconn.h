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
 *
 * [postgres] auth = aws_rds_iam (pgconn_set_auth()): every connection
 * opened here, blocking or not, replication or ordinary, gets a fresh RDS
 * IAM token as its password, one per server of a multi-host conninfo
 * (pgauth.h: through a libpq password file in memory, never on disk).
 * Tokens are made from the AWS credentials of the standard chain
 * (awscreds.h), never cached: a reconnection an hour later signs a new
 * one. The token is never logged.
 */
#ifndef OUTBOXD_PGCONN_H
#define OUTBOXD_PGCONN_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "awscreds.h"
#include "pghosts.h"
#include "settings.h"

/* tcp_user_timeout (ms) outboxd sets unless the conninfo does: a dead
 * database host is noticed within about this plus one status interval
 * (deploy/standby-failover.md, "Take-over time"). */
#define PGCONN_TCP_USER_TIMEOUT_MS_STR "20000"

struct pgconn_opts {
    const char *conninfo; /* the user's, as configured */
    const char *app_name; /* fallback_application_name, e.g. "outboxd-check" */
    int timeout_s;        /* connect_timeout; 0: libpq's default (none) */
    bool replication;     /* a walsender connection (replication=database) */
    /* Only this one server of the conninfo, every other setting kept and
     * target_session_attrs any (check's connection to each standby);
     * NULL: the conninfo's servers as libpq tries them. */
    const struct pghost *server;
};

/* How every connection opened from now on authenticates ([postgres] auth):
 * PG_AUTH_PASSWORD (libpq's own sources: the conninfo, PGPASSWORD,
 * ~/.pgpass), or PG_AUTH_AWS_RDS_IAM with the [aws] settings aws (copied;
 * its NULLs: the environment's). main.c calls it once, before the first
 * connection. Returns 0, -1 when out of memory. */
int pgconn_set_auth(enum pg_auth method, const struct aws_settings *aws);

/* With aws_rds_iam, what the last connection's tokens were made with, for
 * check's line: the credentials' source, the region, the server(s) and
 * the user ("" before the first, or with password). */
const char *pgconn_auth_said(void);

/* Connects and waits for the outcome. Returns the connection (the caller
 * PQfinishes it, even when it failed), or NULL when out of memory or when
 * no token could be made (no AWS credentials, no region: pgconn_message()
 * with a NULL conn says which). Check PQstatus(): CONNECTION_OK or
 * CONNECTION_BAD. */
PGconn *pgconn_connect(const struct pgconn_opts *o);

/* Starts a non-blocking connect (PQconnectStartParams): drive it with
 * PQconnectPoll(). Same ownership and NULL as pgconn_connect(). */
PGconn *pgconn_start(const struct pgconn_opts *o);

/* libpq's text for conn; when conn is NULL, why the last pgconn_connect()
 * or pgconn_start() returned NULL ("out of memory", or why no token was
 * made). Not allocated. */
const char *pgconn_error(const PGconn *conn);

/* The message of a failed statement or connection, on one line: the
 * server's primary message when res has one, else pgconn_error(conn),
 * without libpq's trailing newline,
 * line breaks and control bytes replaced, and with conninfo's password
 * masked (redact.h). Prefixed with "what: " when what is not NULL. */
void pgconn_message(const PGconn *conn, const PGresult *res, const char *conninfo,
                    const char *what, char *out, size_t outlen);

/* pgconn_message() for a text already taken from libpq (msg). */
void pgconn_clean(const char *msg, const char *conninfo, const char *what, char *out,
                  size_t outlen);

#endif
