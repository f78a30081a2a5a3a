/*
 * pgwait.c - waits for a condition in PostgreSQL on one connection, for the
 * e2e tests' wait loops (tests/e2e/lib.sh: wait_for_confirmed_lsn,
 * _slot_wait_released). Runs SQL every INTERVAL_MS until the first column
 * of its first row is true ("t"), or SECONDS have passed.
 *
 * Why not psql in a loop: every psql call starts a process and a server
 * backend, about 30 ms of CPU for psql (70 ms more through Debian's
 * pg_wrapper) and 40 ms for the backend; at five polls a second a wait
 * used most of a core of the machine whose progress it was waiting for.
 *
 *   outboxd-pgwait [-t SECONDS] [-i INTERVAL_MS] [-x] SQL
 *
 * The connection comes from libpq's environment (PGHOST, PGPORT, PGUSER,
 * PGDATABASE...), as for psql. A failed connection or query is tried
 * again at the next interval (a server that restarts, a table not yet
 * there). Prints the last first row (columns separated by a space; "(no
 * row)" when the query returned none) on stdout, and the last error, if
 * any, on stderr. Exit 0: the condition held; 1: not within SECONDS;
 * 2: usage; 3 (with -x): the first connection failed (a test that stopped
 * its server waits for nothing).
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

#define ROW_MAX 1024

/* Copies libpq's message into err without its trailing newline. */
static void set_err(char *err, size_t errlen, const char *what, const char *msg)
{
    snprintf(err, errlen, "%s: %s", what, msg ? msg : "");
    size_t n = strlen(err);
    while (n > 0 && (err[n - 1] == '\n' || err[n - 1] == ' ')) err[--n] = '\0';
}

/* Writes the first row of res into row, columns separated by a space. */
static void first_row(const PGresult *res, char *row, size_t rowlen)
{
    if (PQntuples(res) < 1) {
        snprintf(row, rowlen, "(no row)");
        return;
    }
    size_t used = 0;
    row[0] = '\0';
    for (int c = 0; c < PQnfields(res) && used < rowlen; c++)
        used += (size_t)snprintf(row + used, rowlen - used, "%s%s", c ? " " : "",
                                 PQgetisnull(res, 0, c) ? "" : PQgetvalue(res, 0, c));
}

/* One poll: 1 when the condition held, 0 when not, -1 on an error (the
 * connection is dropped when it is broken). */
static int poll_once(PGconn **conn, const char *sql, char *row, size_t rowlen, char *err,
                     size_t errlen)
{
    if (!*conn) {
        *conn = PQconnectdb("");
        if (PQstatus(*conn) != CONNECTION_OK) {
            set_err(err, errlen, "connect", PQerrorMessage(*conn));
            PQfinish(*conn);
            *conn = NULL;
            return -1;
        }
    }
    PGresult *res = PQexec(*conn, sql);
    int rc = -1;
    if (PQresultStatus(res) == PGRES_TUPLES_OK) {
        err[0] = '\0';
        first_row(res, row, rowlen);
        rc = PQntuples(res) > 0 && !PQgetisnull(res, 0, 0) &&
             strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    } else {
        set_err(err, errlen, "query", PQerrorMessage(*conn));
    }
    PQclear(res);
    if (PQstatus(*conn) != CONNECTION_OK) {
        PQfinish(*conn);
        *conn = NULL;
    }
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: outboxd-pgwait [-t SECONDS] [-i INTERVAL_MS] [-x] SQL\n");
    return 2;
}

int main(int argc, char **argv)
{
    long seconds = 60, interval_ms = 100;
    int i = 1, no_server_exit = 0;
    while (i < argc - 1 && argv[i][0] == '-') {
        if (strcmp(argv[i], "-x") == 0) {
            no_server_exit = 1;
            i++;
            continue;
        }
        char *end;
        long v = strtol(argv[i + 1], &end, 10);
        if (*end || v < 0) return usage();
        if (strcmp(argv[i], "-t") == 0) seconds = v;
        else if (strcmp(argv[i], "-i") == 0 && v > 0) interval_ms = v;
        else return usage();
        i += 2;
    }
    if (i != argc - 1) return usage();
    const char *sql = argv[i];
    char row[ROW_MAX] = "", err[512] = "";
    PGconn *conn = NULL;
    int64_t deadline = clock_mono_ms() + (int64_t)seconds * 1000;
    int held = 0;
    for (;;) {
        held = poll_once(&conn, sql, row, sizeof(row), err, sizeof(err)) == 1;
        if (no_server_exit && !conn && !held) {
            fprintf(stderr, "outboxd-pgwait: %s\n", err);
            return 3;
        }
        no_server_exit = 0; /* only the first connection */
        if (held || clock_mono_ms() >= deadline) break;
        clock_sleep_ms(interval_ms);
    }
    PQfinish(conn);
    printf("%s\n", row);
    if (!held && *err) fprintf(stderr, "outboxd-pgwait: last error: %s\n", err);
    return held ? 0 : 1;
}
