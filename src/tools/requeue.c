/*
 * requeue.c - `outboxd requeue` (see requeue.h): one connection, the
 * requeue statement and the states statement of polling.h, a line per
 * event_id, a NOTIFY. Errors are final: nothing is retried. Its steps log
 * an error once and return -1; otherwise 0, or how many events were not
 * requeued.
 */
#include "requeue.h"

#include <stdio.h>
#include <stdlib.h>

#include <libpq-fe.h>

#include "config_outbox.h"
#include "exitcode.h"
#include "log.h"
#include "outbox.h"
#include "pgconn.h"
#include "pgsql.h"
#include "polldb.h"
#include "polling.h"
#include "str.h"

struct requeue {
    const struct config *cfg;
    struct outbox_map map;
    struct polling_sql sql;
    PGconn *conn;
};

static void log_db_error(const struct pgsql_error *e)
{
    if (!e->what)
        log_error("%s", e->msg);
    else
        log_error("postgres: %s: %s (SQLSTATE %s)", e->what, e->msg,
                  e->sqlstate[0] ? e->sqlstate : "?");
}

/* Connects and builds the statements. Returns 0, -1 after logging why. */
static int requeue_open(struct requeue *q)
{
    struct pgconn_opts o = {.conninfo = q->cfg->pg_conninfo,
                            .app_name = "outboxd-requeue",
                            .timeout_s = 10};
    q->conn = pgconn_connect(&o);
    if (!q->conn || PQstatus(q->conn) != CONNECTION_OK) {
        char msg[1024];
        pgconn_message(q->conn, NULL, q->cfg->pg_conninfo, NULL, msg, sizeof(msg));
        log_error("cannot connect to postgres: %s", msg);
        return -1;
    }
    struct pgsql_error e;
    if (polldb_prepare(q->conn, q->cfg->pg_conninfo, &q->map, &q->sql, &e) != 0) {
        log_db_error(&e);
        return -1;
    }
    return 0;
}

/* One statement with the ids as its parameter; NULL after logging why. */
static PGresult *run_with_ids(struct requeue *q, const char *what, const char *sql,
                              const char *ids)
{
    struct pgsql_error e;
    const char *params[] = {ids};
    PGresult *res = pgsql_exec(q->conn, q->cfg->pg_conninfo, what, sql, 1, params,
                               PGRES_TUPLES_OK, &e);
    if (!res) log_db_error(&e);
    return res;
}

/* Prints the verdict for each id. Returns how many were not requeued, -1
 * on out of memory. */
static int print_verdicts(const struct requeue *q, char *const *ids, int nids,
                          const PGresult *done, const PGresult *states)
{
    struct polling_requeue_answer a = {.ndone = PQntuples(done), .nstates = PQntuples(states)};
    const char **v = calloc((size_t)(a.ndone + 2 * a.nstates) + 1, sizeof(*v));
    char *table = str_printf("%s.%s", q->map.schema, q->map.table);
    int failed = -1;
    if (v && table) {
        for (int i = 0; i < a.ndone; i++) v[i] = PQgetvalue(done, i, 0);
        for (int i = 0; i < a.nstates; i++) {
            v[a.ndone + i] = PQgetvalue(states, i, 0);
            v[a.ndone + a.nstates + i] = PQgetvalue(states, i, 1);
        }
        a.done = v;
        a.state_ids = v + a.ndone;
        a.states = v + a.ndone + a.nstates;
        char line[1200];
        failed = 0;
        for (int i = 0; i < nids; i++) {
            failed += !polling_requeue_verdict(ids[i], &a, table, line, sizeof(line));
            printf("%s\n", line);
        }
        fflush(stdout);
    }
    free(v);
    free(table);
    return failed;
}

/* Requeues, then prints. Returns how many were not requeued, -1 after
 * logging an error. */
static int requeue_ids(struct requeue *q, char *const *ids, int nids)
{
    struct pgsql_array arr = {0};
    for (int i = 0; i < nids; i++) pgsql_array_add(&arr, ids[i]);
    const char *text = pgsql_array_text(&arr);
    PGresult *done = NULL, *states = NULL;
    if (text && (done = run_with_ids(q, "requeueing", q->sql.requeue, text)))
        states = run_with_ids(q, "reading states", q->sql.states, text);
    else if (!text)
        log_error("out of memory");
    int failed = done && states ? print_verdicts(q, ids, nids, done, states) : -1;
    if (done && states && failed < 0) log_error("out of memory");
    PQclear(done);
    PQclear(states);
    pgsql_array_free(&arr);
    return failed;
}

/* Wakes the relays (they LISTEN); a failure is logged and changes nothing. */
static void notify_relays(struct requeue *q)
{
    char *qch = pgsql_quote_ident(q->cfg->poll_notify_channel);
    char *notify = qch ? str_printf("NOTIFY %s", qch) : NULL;
    struct pgsql_error e;
    PGresult *res = notify ? pgsql_exec(q->conn, q->cfg->pg_conninfo, "NOTIFY", notify, 0,
                                        NULL, PGRES_COMMAND_OK, &e)
                           : NULL;
    if (notify && !res) log_db_error(&e);
    PQclear(res);
    free(qch);
    free(notify);
}

int poll_requeue_run(const struct config *cfg, char *const *ids, int nids)
{
    struct requeue q = {.cfg = cfg};
    char err[1024];
    if (config_outbox_count(cfg) > 1) {
        log_error("requeue: the configuration has %zu [outbox.NAME] sections, and requeue "
                  "serves the one table of [source] mode = polling",
                  config_outbox_count(cfg));
        return EXIT_USAGE;
    }
    if (config_outbox_map(config_outbox_at(cfg, 0), &q.map, err, sizeof(err)) != 0) {
        log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    int failed = requeue_open(&q) == 0 ? requeue_ids(&q, ids, nids) : -1;
    if (failed >= 0) notify_relays(&q);
    PQfinish(q.conn);
    polling_sql_free(&q.sql);
    outbox_map_free(&q.map);
    return failed == 0 ? EXIT_OK : EXIT_FATAL;
}
