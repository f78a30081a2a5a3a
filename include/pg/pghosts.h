/*
 * pghosts.h - the servers a libpq conninfo names. A multi-host conninfo
 * (host=a,b port=5432,5433, or postgres://a:5432,b:5433/db) lets outboxd
 * follow a promoted standby (target_session_attrs=read-write);
 * `outboxd check` connects to each listed server on its own to see which
 * is the primary and how the standbys are set up. Pure: libpq's comma
 * lists in, one entry per server out (tests/unit/test_pghosts.c).
 */
#ifndef OUTBOXD_PGHOSTS_H
#define OUTBOXD_PGHOSTS_H

#include <stdbool.h>
#include <stddef.h>

#define PGHOSTS_MAX 16

struct pghost {
    char host[256];    /* "" when only hostaddr (or nothing) names it */
    char hostaddr[64]; /* "" if not given */
    char port[16];     /* "" if not given: libpq's default (PGPORT, 5432) */
};

/* Splits libpq's host, hostaddr and port values (each NULL or empty when
 * not set; each may be a comma-separated list) into out, the way libpq
 * pairs them: hostaddr, when set, has as many entries as host (if set);
 * port has one entry, used for every server, or one per server. Returns
 * the number of servers (1 when nothing is set: libpq's default), or -1
 * with err when the lists do not pair or there are more than max. */
int pghosts_split(const char *host, const char *hostaddr, const char *port,
                  struct pghost *out, int max, char *err, size_t errlen);

/* "host:port" for log lines and check lines: the host, else the hostaddr,
 * else "default"; the port, else "default port". Returns out. */
char *pghost_label(const struct pghost *h, char *out, size_t outlen);

/* Whether h is this machine: its host is empty (libpq's default Unix
 * socket), a socket directory (starts with '/' or '@'), "localhost" or a
 * loopback address (127.0.0.0/8, ::1), and its hostaddr, when given, is a
 * loopback address too. Any other name counts as another machine, even
 * one that resolves to a loopback address: nothing is looked up. */
bool pghost_is_local(const struct pghost *h);

/* Whether libpq's sslmode value authenticates the server: verify-ca or
 * verify-full. disable, allow, prefer (libpq's default) and require do
 * not: a machine in the network path can pose as the server (and, below
 * require, talk to outboxd in plain text). */
bool pghosts_sslmode_verifies(const char *sslmode);

#endif
