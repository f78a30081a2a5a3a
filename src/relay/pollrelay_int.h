/*
 * pollrelay_int.h - the polling relay's state, private to its files
 * (src/relay/pollrelay*.c; the public interface is pollrelay.h):
 *   pollrelay.c       the loop and its set-up
 *   pollrelayconn.c   the PostgreSQL connection: non-blocking connect,
 *                     statements, LISTEN/NOTIFY, errors
 *   pollrelayclaim.c  claiming a batch and producing its rows
 *   pollrelayout.c    delivery reports to outcomes, outcomes written back,
 *                     retention
 *   pollrelayobs.c    readiness, the metrics, the backlog query
 * Each function below says which file has it; struct pr is changed by all
 * of them, from the one thread of the loop.
 */
#ifndef OUTBOXD_POLLRELAY_INT_H
#define OUTBOXD_POLLRELAY_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "backoff.h"
#include "config.h"
#include "evloop.h"
#include "httpd.h"
#include "metrics.h"
#include "outage.h"
#include "outbox.h"
#include "polling.h"
#include "pollout.h"
#include "pollstate.h"
#include "producer.h"
#include "serde.h"

/* One claimed row produced and not yet reported. */
struct flight {
    uint64_t seq;   /* the producer opaque; increasing */
    char *event_id; /* owned, text form */
    int64_t gen;    /* lease_generation of our claim */
    int attempts;   /* failed attempts before this one */
};

/* A claimed batch being produced (rows_pending: the queue was full). */
struct claimed {
    PGresult *res; /* owned; NULL when no batch is open */
    int row, nrows, ncols;
    int c_id, c_gen, c_att;
    struct relation rel;   /* rel.cols owned */
    struct col_value *vals; /* owned */
};

struct pr {
    const struct config *cfg;
    /* cfg as the producer and the checks see it: a shallow copy whose
     * [kafka] pairs (kafka, owned array; its last pair's strings owned when
     * derived_timeout) add message.timeout.ms when it is not set. */
    struct config kcfg;
    struct kv *kafka;
    bool derived_timeout;
    volatile sig_atomic_t *stop;
    struct outbox_map map;
    struct serde_set serdes; /* the registry converter, if the section has one */
    int64_t serde_wait_ms;   /* when the row next in line started waiting for its
                              * schema; 0: none waits */
    char serde_wait[700];    /* why, for /readyz */
    struct polling_sql sql;
    char owner[300];
    char channel_sql[200];
    PGconn *conn;
    PostgresPollingStatusType connect_poll; /* what PQconnectPoll() waits for */
    int connect_fd;                         /* the socket the last wait watched */
    bool record_dialed; /* RECORD: this try's connect was started */
    bool checks_failed; /* the start-up checks gave up: no summary line */
    struct backoff backoff;
    struct outage pg_outage; /* the connection's failures, said folded (outage.h) */
    struct pollstate st; /* phase, deadlines; st.inflight counts fl,
                          * st.outcomes mirrors out.n */
    struct producer *prod;

    struct flight *fl;
    size_t capfl;
    uint64_t next_seq;
    struct pollout out;
    struct claimed cl;
    uint64_t n_claimed;

    /* observability (httpd.h): the loop publishes, the server thread reads */
    struct httpd *http; /* NULL when [http] listen is empty */
    struct metrics met;
    struct textbuf text;
    int64_t next_publish_ms;
    char *backlog_sql; /* owned; NULL without an HTTP server */
    bool backlog_warned; /* the last backlog query failed and said so */
};

/* pollrelayout.c: queues an outcome; takes ownership of event_id and error
 * (freed on OOM). */
void pr_add_result(struct pr *r, enum pollout_kind kind, char *event_id, int64_t gen,
                   int64_t delay_ms, char *error);
/* pollrelayout.c: turns a failed try (its id handed over) into an outcome:
 * a retry with backoff or the quarantine. */
void pr_record_failure(struct pr *r, char *event_id, int64_t gen, int attempts,
                       int kafka_err, const char *reason);
/* pollrelayout.c: the producer's delivery report callback (ctx: the pr). */
void pr_on_delivery(void *ctx, const struct delivery_report *dr);
/* pollrelayout.c: writes the queued outcomes when due. */
void pr_write_results(struct pr *r, int64_t now);
/* pollrelayout.c: deletes old SENT rows, in batches. */
void pr_run_retention(struct pr *r, int64_t now);

/* pollrelayconn.c: drops the connection (why: logged); reconnects later. */
void pr_disconnect(struct pr *r, const char *why);
/* pollrelayconn.c: consumes NOTIFYs: each one asks for a claim. */
void pr_drain_notifies(struct pr *r);
/* pollrelayconn.c: runs one statement (pgsql_exec()). Returns the result
 * when its status is expect; otherwise NULL after acting on the error. */
PGresult *pr_exec(struct pr *r, const char *what, const char *sql, int nparams,
                  const char *const *params, ExecStatusType expect);
/* pollrelayconn.c: starts a non-blocking connect; the loop drives it
 * (pr_connect_step()). */
void pr_connect_start(struct pr *r, int64_t now);
/* pollrelayconn.c: advances the connect when its socket was ready; fails
 * it at the deadline. */
void pr_connect_step(struct pr *r, const struct evloop *l, int64_t now);

/* pollrelayclaim.c: closes the claimed batch (rows after a fatal stop are
 * given back). */
void pr_claim_close(struct pr *r);
/* pollrelayclaim.c: produces the claimed batch from its next row on. */
void pr_produce_claimed(struct pr *r, int64_t now);
/* pollrelayclaim.c: claims due rows and produces them. */
void pr_claim_and_produce(struct pr *r, int64_t now);

/* pollrelayobs.c: beats on every turn; publishes a snapshot every
 * HTTPD_PUBLISH_MS. */
void pr_tick(struct pr *r, int64_t now);
/* pollrelayobs.c: the backlog query into the metrics. */
void pr_query_backlog(struct pr *r, int64_t now);
/* pollrelayobs.c: the metrics' fixed part. */
void pr_metrics_setup(struct pr *r);

#endif
