/*
 * pgauth.h - [postgres] auth = aws_rds_iam: which server, port and user
 * each RDS IAM token is made for, and the libpq password file that hands
 * each server its own token.
 *
 * An RDS auth token is signed for one endpoint (host:port) and one
 * database user, and libpq takes a single `password` for every server of
 * a multi-host conninfo (host=a,b). Its password file, though, is read per
 * server, when the connection is set up (PQconnectStartParams, before the
 * first server is tried): one line host:port:*:*:TOKEN per server gives
 * each the token for its own name, and libpq keeps pairing the servers,
 * trying them in turn, target_session_attrs and load_balance_hosts as
 * always. pgconn.c writes these lines to a memory file (never the disk)
 * for each new connection. Pure: conninfo text in, targets and lines out
 * (tests/unit/test_pgauth.c); the environment is read as libpq reads it
 * (PGHOST, PGHOSTADDR, PGPORT, PGUSER).
 */
#ifndef OUTBOXD_PGAUTH_H
#define OUTBOXD_PGAUTH_H

#include <stddef.h>

#include "pghosts.h"

/* One server a connection may try, as libpq's password file lookup names
 * it: the host, else the hostaddr, else "localhost" (libpq's default
 * socket); the port (the conninfo's, PGPORT, else 5432); the user (the
 * conninfo's, PGUSER, else the operating system user). */
struct pgauth_target {
    char host[256];
    char port[16];
    char user[128];
};

/* The servers a connection with conninfo tries (or, when only is not
 * NULL, that one server of it: check's connection to each standby), into
 * out. os_user: the user libpq falls back to. Returns how many, or -1 with
 * err (the conninfo does not parse, its host and port lists do not pair,
 * more than max). */
int pgauth_targets(const char *conninfo, const struct pghost *only, const char *os_user,
                   struct pgauth_target *out, int max, char *err, size_t errlen);

/* One line of a libpq password file giving password to t's host and port
 * (any database, any user: the token names the user): host:port:*:*:PW
 * with ':' and '\' escaped, ending in a newline. Allocated (the caller
 * frees, after wiping it: it holds the password); NULL on OOM. */
char *pgauth_passfile_line(const struct pgauth_target *t, const char *password);

#endif
