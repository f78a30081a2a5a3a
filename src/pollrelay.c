/*
 * pollrelay.c - polling mode (see pollrelay.h): the lease-based relay for
 * databases without logical replication.
 *
 *   NOTIFY / poll interval --> claim (one short transaction, committed)
 *        --> rows --> outbox map --> producer --> delivery reports
 *        --> outcomes --> conditional UPDATEs (SENT / PENDING / QUARANTINED)
 *
 * One thread, one wait per turn (evloop.h) over the producer's wake-up
 * pipe, the Postgres socket and the earliest deadline; the phases and
 * deadlines of the loop are pollstate.h's (start-up checks, the
 * non-blocking connect, a batch waiting for room in the producer queue,
 * the drain of a graceful stop). The queue of outcomes and its statements'
 * parameters are pollout.h's, the statements themselves polling.h's
 * (prepared by polldb.h, run with pgsql.h). No row lock is ever held while
 * the broker is talked to: the claim statement commits before the first
 * message is produced, and the outcome updates run after the reports.
 * Per-aggregate order comes from the claim statement itself: a row is
 * claimable only when no earlier row (by seq) of its aggregate is unsent,
 * so at most one event per aggregate is in flight across all relays, and
 * it was ACKed before the next is claimed.
 *
 * Errors: a step that fails logs once, then sets r->st.fatal or schedules
 * its retry; the few that return a status return 0 or -1 (pr_setup(): an
 * exit code, exitcode.h), and the producing steps say whether the row was
 * taken (false: the producer queue was full).
 */
#include "pollrelay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "backoff.h"
#include "check.h"
#include "clock.h"
#include "config_outbox.h"
#include "config_serde.h"
#include "evloop.h"
#include "exitcode.h"
#include "grow.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "outbox.h"
#include "pgconn.h"
#include "pgsql.h"
#include "polldb.h"
#include "polling.h"
#include "pollout.h"
#include "pollstate.h"
#include "producer.h"
#include "registry.h"
#include "serde.h"
#include "signals.h"
#include "str.h"

/* Late outcomes (lease lost) logged by event_id per statement. */
#define STALE_NAMED 5
/* Pause before retrying outcome updates after a failed statement. */
#define RESULT_RETRY_MS 500
/* Between two backlog queries (the metrics; not per batch: the query reads
 * every undelivered row). */
#define BACKLOG_INTERVAL_MS 15000
/* connect_timeout of the relay's connection, in seconds. */
#define CONNECT_TIMEOUT_S 10

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

/* Queues an outcome; takes ownership of event_id and error (freed on
 * OOM). */
static void add_result(struct pr *r, enum pollout_kind kind, char *event_id, int64_t gen,
                       int64_t delay_ms, char *error)
{
    char id[128];
    snprintf(id, sizeof(id), "%s", event_id);
    if (pollout_add(&r->out, kind, event_id, gen, delay_ms, error) != 0) {
        log_error("out of memory recording the outcome of event %s", id);
        r->st.fatal = true;
    }
    r->st.outcomes = r->out.n;
}

/* ---- delivery reports ---------------------------------------------------- */

static struct flight *find_flight(struct pr *r, uint64_t seq)
{
    size_t lo = 0, hi = r->st.inflight;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->fl[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->st.inflight && r->fl[lo].seq == seq ? &r->fl[lo] : NULL;
}

static void remove_flight(struct pr *r, struct flight *f)
{
    size_t i = (size_t)(f - r->fl);
    memmove(&r->fl[i], &r->fl[i + 1], (r->st.inflight - i - 1) * sizeof(*r->fl));
    r->st.inflight--;
}

/* Turns a failed try of flight f (its id handed over) into an outcome. */
static void record_failure(struct pr *r, char *event_id, int64_t gen, int attempts,
                           int kafka_err, const char *reason)
{
    const struct config *c = r->cfg;
    enum polling_action a = polling_classify(kafka_err, producer_err_is_poison(kafka_err),
                                             attempts, c->poll_max_attempts);
    const char *name = kafka_err ? producer_err_name(kafka_err) : "?";
    if (a == PA_RETRY) {
        int64_t delay = polling_backoff_ms(attempts + 1, c->poll_backoff_min_ms,
                                           c->poll_backoff_max_ms, (uint64_t)rand());
        log_debug("event %s: delivery failed (%s: %s); retry %d of %d in %" PRId64 " ms",
                  event_id, name, reason, attempts + 2, c->poll_max_attempts, delay);
        add_result(r, OUT_RETRY, event_id, gen, delay, str_printf("%s: %s", name, reason));
        return;
    }
    bool permanent = producer_err_is_poison(kafka_err);
    log_warn("event %s: %s (%s: %s); QUARANTINED until requeued", event_id,
             permanent ? "permanent delivery failure" : "attempts used up", name, reason);
    add_result(r, OUT_QUARANTINE, event_id, gen, 0,
               permanent ? str_printf("%s: %s", name, reason)
                         : str_printf("gave up after %d attempts: %s: %s", attempts + 1, name,
                                      reason));
}

static void on_delivery(void *ctx, const struct delivery_report *dr)
{
    struct pr *r = ctx;
    if (dr->err == 0)
        metrics_count(&r->met.acked, dr->topic, 1);
    else
        metrics_count(&r->met.failed, producer_err_name(dr->err), 1);
    struct flight *f = find_flight(r, dr->tag);
    if (!f) {
        log_error("internal: delivery report for unknown message %" PRIu64, dr->tag);
        return;
    }
    char *id = f->event_id;
    int64_t gen = f->gen;
    int attempts = f->attempts;
    remove_flight(r, f);
    if (dr->err == 0)
        add_result(r, OUT_SENT, id, gen, 0, NULL);
    else
        record_failure(r, id, gen, attempts, dr->err, dr->reason ? dr->reason : "?");
}

/* ---- observability ------------------------------------------------------- */

/* Why the relay is not ready, or NULL when it is. */
static const char *not_ready_reason(const struct pr *r)
{
    if (*r->stop) return "shutting down";
    if (r->st.fatal) return "a fatal error: stopping";
    if (r->st.db != DB_UP || !r->st.sql_ready) return "not connected to the database (polling)";
    if (r->serde_wait_ms && clock_mono_ms() - r->serde_wait_ms >= r->cfg->registry_not_ready_ms)
        return r->serde_wait;
    int up = producer_brokers_up(r->prod);
    if (up < 0) return "Kafka broker state not known yet (librdkafka statistics)";
    if (up == 0) return "no Kafka broker reachable";
    return NULL;
}

/* Beats on every turn; publishes a snapshot every HTTPD_PUBLISH_MS. */
static void pr_tick(struct pr *r, int64_t now)
{
    signals_service(); /* SIGHUP, SIGUSR1/2: signals.h */
    if (!httpd_tick(r->http, now, r->next_publish_ms)) return;
    struct metrics *m = &r->met;
    m->inflight_events = r->st.inflight;
    m->kafka_queue = producer_outq_len(r->prod);
    m->kafka_brokers_up = producer_brokers_up(r->prod);
    m->streaming = r->st.db == DB_UP;
    const uint64_t *rec = r->out.recorded;
    uint64_t rows[PO__COUNT] = {r->n_claimed,        rec[OUT_SENT],    rec[OUT_RETRY],
                                rec[OUT_QUARANTINE], rec[OUT_RELEASE], r->out.stale};
    memcpy(m->polling_rows, rows, sizeof(rows));
    m->registry_on = r->serdes.reg != NULL;
    if (r->serdes.reg) registry_stats(r->serdes.reg, &m->registry);
    httpd_publish_metrics(r->http, m, &r->text, clock_unix_us(), not_ready_reason(r), NULL);
    r->next_publish_ms = now + HTTPD_PUBLISH_MS;
}

/* ---- postgres ------------------------------------------------------------ */

static void disconnect(struct pr *r, const char *why)
{
    if (!r->conn) return;
    log_warn("postgres: %s; reconnecting", why);
    PQfinish(r->conn);
    r->conn = NULL;
    r->st.db = DB_DOWN;
    r->st.next_connect_ms = clock_mono_ms() + r->cfg->pg_retry_min_ms;
}

static void drain_notifies(struct pr *r)
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
        disconnect(r, why);
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
static PGresult *exec(struct pr *r, const char *what, const char *sql, int nparams,
                      const char *const *params, ExecStatusType expect)
{
    if (r->st.db != DB_UP) return NULL;
    struct pgsql_error e;
    PGresult *res =
        pgsql_exec(r->conn, r->cfg->pg_conninfo, what, sql, nparams, params, expect, &e);
    drain_notifies(r);
    if (!res) on_db_error(r, &e);
    return res;
}

/* LISTENs and (the first time) prepares the statements on a new
 * connection. */
static void connected(struct pr *r)
{
    r->st.db = DB_UP;
    backoff_reset(&r->backoff);
    PGresult *res = exec(r, "LISTEN", r->channel_sql, 0, NULL, PGRES_COMMAND_OK);
    if (!res) return;
    PQclear(res);
    struct pgsql_error e;
    if (!r->st.sql_ready) {
        if (polldb_prepare(r->conn, r->cfg->pg_conninfo, &r->map, &r->sql, &e) != 0)
            return on_db_error(r, &e);
        r->st.sql_ready = true;
    }
    r->st.claim_now = true; /* whatever was committed while we were away */
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
    log_warn("cannot connect to postgres: %s; retrying in %d ms", msg, ms);
    r->st.next_connect_ms = now + ms;
}

/* Starts a non-blocking connect; the loop drives it (connect_step()). */
static void connect_start(struct pr *r, int64_t now)
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
static void connect_step(struct pr *r, const struct evloop *l, int64_t now)
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

/* ---- writing outcomes back ----------------------------------------------- */

/* Logs the first STALE_NAMED stale outcomes of a statement by event_id:
 * after a long broker outage many outcomes can be late at once. */
static void log_stale(void *ctx, const struct pollout_entry *x, size_t nth)
{
    const struct pr *r = ctx;
    if (nth <= STALE_NAMED)
        log_warn("event %s: lease lost (no longer CLAIMED by %s at generation %" PRId64
                 "): its %s outcome is not recorded; the row's current owner decides",
                 x->event_id, r->owner, x->gen, pollout_kind_name(x->kind));
}

/* Writes the outcomes of one group (sent, or everything else) with one
 * statement. Returns 0, -1 when the statement failed (the outcomes stay
 * queued). */
static int write_group(struct pr *r, bool sent)
{
    struct pollout_params p = {0};
    int n = pollout_params(&r->out, sent, &p);
    if (n <= 0) {
        if (n < 0) log_error("out of memory writing outcomes");
        r->st.fatal = r->st.fatal || n < 0;
        pollout_params_free(&p);
        return n;
    }
    const char *params[] = {p.ids.s, p.gens.s, r->owner, p.sts.s, p.delays.s, p.errs.s,
                            p.bumps.s};
    PGresult *res = exec(r, sent ? "marking events SENT" : "recording failed deliveries",
                         sent ? r->sql.sent : r->sql.fail, sent ? 3 : 7, params,
                         PGRES_TUPLES_OK);
    pollout_params_free(&p);
    if (!res) return -1;
    int nchanged = PQntuples(res);
    const char **changed = calloc((size_t)nchanged + 1, sizeof(*changed));
    if (!changed) {
        PQclear(res);
        log_error("out of memory");
        r->st.fatal = true;
        return -1;
    }
    for (int i = 0; i < nchanged; i++) changed[i] = PQgetvalue(res, i, 0);
    size_t stale = pollout_done(&r->out, sent, changed, (size_t)nchanged, log_stale, r);
    r->st.outcomes = r->out.n;
    if (stale > STALE_NAMED)
        log_warn("... and %zu more late outcomes of expired leases (not recorded)",
                 stale - STALE_NAMED);
    free(changed);
    PQclear(res);
    if (sent && nchanged > 0) r->st.claim_now = true; /* later events are claimable now */
    return 0;
}

static void write_results(struct pr *r, int64_t now)
{
    if (!pollstate_results_due(&r->st, now)) return;
    size_t retries = pollout_count(&r->out, OUT_RETRY);
    if (retries) log_info("%zu events back to PENDING with backoff", retries);
    if (write_group(r, true) != 0 || write_group(r, false) != 0)
        r->st.results_retry_ms = clock_mono_ms() + RESULT_RETRY_MS;
}

/* ---- claiming and producing ---------------------------------------------- */

/* Produces one claimed row (its id handed over). Returns false when the
 * producer queue is full: the id is freed, the row is to be tried again. */
static bool produce_row(struct pr *r, const struct outbox_event *ev, char *event_id,
                        int64_t gen, int attempts)
{
    char err[512];
    int kafka_err = 0;
    uint64_t seq = r->next_seq + 1;
    if (grow_array((void **)&r->fl, &r->capfl, r->st.inflight + 1, sizeof(*r->fl), 64) != 0) {
        log_error("out of memory");
        free(event_id);
        r->st.fatal = true;
        return true;
    }
    int rc = producer_send(r->prod, ev, seq, &kafka_err, err, sizeof(err));
    if (rc == PRODUCER_QUEUE_FULL) {
        free(event_id);
        return false;
    }
    r->next_seq = seq;
    if (rc == PRODUCER_OK) {
        r->fl[r->st.inflight++] = (struct flight){seq, event_id, gen, attempts};
        metrics_count(&r->met.produced, ev->topic, 1);
        r->met.produced_bytes +=
            (ev->key_null ? 0 : ev->key.len) + (ev->value_null ? 0 : ev->value.len);
        return true;
    }
    metrics_count(&r->met.failed, producer_err_name(kafka_err), 1);
    record_failure(r, event_id, gen, attempts, kafka_err, err);
    return true;
}

/* Column index by name in a result, -1 if absent. */
static int result_col(const PGresult *res, const char *name)
{
    for (int i = 0; i < PQnfields(res); i++)
        if (strcmp(PQfname(res, i), name) == 0) return i;
    return -1;
}

/* Whether an outcome or a flight already holds event id. */
static bool known_event(const struct pr *r, const char *id)
{
    if (pollout_has(&r->out, id)) return true;
    for (size_t i = 0; i < r->st.inflight; i++)
        if (!strcmp(r->fl[i].event_id, id)) return true;
    return false;
}

/* Closes the claimed batch. Rows after a fatal stop were claimed but not
 * produced: they are given back. */
static void claim_close(struct pr *r)
{
    struct claimed *cl = &r->cl;
    for (int row = 0; r->st.fatal && cl->res && row < cl->nrows; row++) {
        const char *id = PQgetvalue(cl->res, row, cl->c_id);
        char *copy = known_event(r, id) ? NULL : strdup(id);
        if (copy)
            add_result(r, OUT_RELEASE, copy,
                       strtoll(PQgetvalue(cl->res, row, cl->c_gen), NULL, 10), 0, NULL);
    }
    free(cl->rel.cols);
    free(cl->vals);
    PQclear(cl->res);
    memset(cl, 0, sizeof(*cl));
    r->st.rows_pending = false;
    r->serde_wait_ms = 0; /* a row that waited for its schema is not claimed any more */
    r->serde_wait[0] = '\0';
}

/* What encode_row() made of a row. */
enum row_step {
    ROW_SEND,    /* ev is ready to produce */
    ROW_WAIT,    /* its schema is not known yet: id freed, the row stays next */
    ROW_HANDLED, /* quarantined (does not fit) or released (stopping): id handed over */
};

/* The row waits for its schema: logged once per reason, kept for /readyz. */
static void wait_for_schema(struct pr *r, const char *subject, const char *why)
{
    if (r->serde_wait_ms == 0) r->serde_wait_ms = clock_mono_ms();
    if (serde_wait_reason(r->serde_wait, sizeof(r->serde_wait), subject, why))
        log_warn("%s; the rows behind it wait until the registry answers", r->serde_wait);
}

/* ev's value in the registry's wire format (serde.h), when the section has
 * a registry converter. A payload that does not fit (or whose subject
 * cannot be named) is quarantined, a schema of the wrong type releases the
 * row and stops the relay; while the schema is not known the row waits,
 * like a row that met a full producer queue. */
static enum row_step encode_row(struct pr *r, const struct relation *rel,
                                const struct col_value *vals, int ncols,
                                struct outbox_event *ev, char *id, int64_t gen)
{
    struct serde *sd = r->serdes.by_map ? r->serdes.by_map[0] : NULL;
    if (!sd) return ROW_SEND;
    char subject[SERDE_SUBJECT_MAX], err[1024];
    enum serde_result res = SERDE_MISMATCH;
    if (serde_subject(sd, ev, rel, vals, ncols, subject, sizeof(subject), err, sizeof(err)) ==
        0)
        res = serde_encode(sd, subject, ev, clock_mono_ms(), err, sizeof(err));
    switch (res) {
    case SERDE_OK:
        if (r->serde_wait_ms)
            log_info("the schema of subject \"%s\" is known: the rows go on", subject);
        r->serde_wait_ms = 0;
        r->serde_wait[0] = '\0';
        return ROW_SEND;
    case SERDE_WAIT:
        wait_for_schema(r, subject, err);
        free(id);
        return ROW_WAIT;
    case SERDE_MISMATCH:
        log_warn("event %s cannot be published: %s: %s; QUARANTINED until requeued", id,
                 SERDE_MISMATCH_CODE, err);
        add_result(r, OUT_QUARANTINE, id, gen, 0, str_printf("%s: %s", SERDE_MISMATCH_CODE, err));
        return ROW_HANDLED;
    case SERDE_FATAL: break;
    }
    log_error("event %s: %s: %s; stopping", id, SERDE_FATAL_CODE, err);
    add_result(r, OUT_RELEASE, id, gen, 0, NULL);
    r->st.fatal = true;
    return ROW_HANDLED;
}

/* One claimed row to an event, produced. Returns false when the queue is
 * full (the row stays next). */
static bool produce_claimed_row(struct pr *r, int row)
{
    struct claimed *cl = &r->cl;
    char err[512];
    for (int i = 0; i < cl->ncols; i++) {
        bool null = PQgetisnull(cl->res, row, i);
        cl->vals[i] = (struct col_value){null ? CV_NULL : CV_TEXT,
                                         null ? 0 : (uint32_t)PQgetlength(cl->res, row, i),
                                         null ? NULL : PQgetvalue(cl->res, row, i)};
    }
    const char *raw = PQgetisnull(cl->res, row, cl->c_id) ? "" : PQgetvalue(cl->res, row, cl->c_id);
    char *id = strdup(raw);
    int64_t gen = strtoll(PQgetvalue(cl->res, row, cl->c_gen), NULL, 10);
    int attempts = atoi(PQgetvalue(cl->res, row, cl->c_att));
    if (!id) {
        log_error("out of memory");
        r->st.fatal = true;
        return true;
    }
    struct outbox_event ev;
    if (outbox_event_build(&r->map, &cl->rel, cl->vals, cl->ncols, 0, &ev, err,
                           sizeof(err)) == 0) {
        outbox_event_drop_lsn_header(&r->map, &ev); /* polling mode has no LSN */
        switch (encode_row(r, &cl->rel, cl->vals, cl->ncols, &ev, id, gen)) {
        case ROW_SEND: return produce_row(r, &ev, id, gen, attempts);
        case ROW_WAIT: return false;
        case ROW_HANDLED: return true;
        }
    }
    if (ev.fault == OF_SCHEMA) {
        /* Every row would fail: give this one back and stop. */
        log_error("event %s: %s; stopping", id, err);
        add_result(r, OUT_RELEASE, id, gen, 0, NULL);
        r->st.fatal = true;
    } else {
        log_warn("event %s cannot be published: %s: %s; QUARANTINED until requeued", id,
                 outbox_fault_name(ev.fault), err);
        add_result(r, OUT_QUARANTINE, id, gen, 0,
                   str_printf("%s: %s", outbox_fault_name(ev.fault), err));
    }
    return true;
}

/* Produces the claimed batch from its next row on. A full producer queue
 * parks the rest (rows_pending) until POLLSTATE_QUEUE_RETRY_MS later. */
static void produce_claimed(struct pr *r, int64_t now)
{
    while (r->cl.row < r->cl.nrows && !r->st.fatal) {
        if (!produce_claimed_row(r, r->cl.row)) {
            r->st.rows_pending = true;
            r->st.next_produce_ms = now + POLLSTATE_QUEUE_RETRY_MS;
            return;
        }
        r->cl.row++;
    }
    claim_close(r);
}

/* Opens the batch a claim returned: its columns and the arrays the rows are
 * read into. Returns 0, -1 (fatal) after logging why. */
static int claim_open(struct pr *r, PGresult *res)
{
    struct claimed *cl = &r->cl;
    cl->res = res;
    cl->nrows = PQntuples(res);
    cl->ncols = PQnfields(res);
    cl->c_id = result_col(res, r->map.columns[OC_EVENT_ID]);
    cl->c_gen = result_col(res, "lease_generation");
    cl->c_att = result_col(res, "attempts");
    cl->rel = (struct relation){.nspname = r->map.schema, .relname = r->map.table,
                                .ncols = cl->ncols};
    cl->rel.cols = calloc((size_t)cl->ncols + 1, sizeof(*cl->rel.cols));
    cl->vals = calloc((size_t)cl->ncols + 1, sizeof(*cl->vals));
    if (!cl->rel.cols || !cl->vals || cl->c_id < 0 || cl->c_gen < 0 || cl->c_att < 0) {
        log_error(!cl->rel.cols || !cl->vals ? "out of memory"
                                             : "the claim returned no event_id, "
                                               "lease_generation or attempts column");
        r->st.fatal = true;
        cl->nrows = 0;
        return -1;
    }
    /* The types too: a bytea column's text is decoded to its bytes (outbox.h). */
    for (int i = 0; i < cl->ncols; i++) {
        cl->rel.cols[i].name = PQfname(res, i);
        cl->rel.cols[i].typid = (uint32_t)PQftype(res, i);
    }
    return 0;
}

static void claim_and_produce(struct pr *r, int64_t now)
{
    const struct config *c = r->cfg;
    char lease[32], limit[32];
    int want = c->poll_batch_size - (int)r->st.inflight;
    r->st.claim_now = false;
    r->st.next_claim_ms = now + c->poll_interval_ms;
    if (want <= 0) return;
    snprintf(lease, sizeof(lease), "%" PRId64, c->poll_lease_ms);
    snprintf(limit, sizeof(limit), "%d", want);
    const char *params[] = {r->owner, lease, limit};
    PGresult *res = exec(r, "claiming due events", r->sql.claim, 3, params, PGRES_TUPLES_OK);
    if (!res) return;
    if (claim_open(r, res) != 0) return claim_close(r);
    if (r->cl.nrows == want) r->st.claim_now = true; /* a full batch: there may be more */
    r->n_claimed += (uint64_t)r->cl.nrows;
    if (r->cl.nrows) log_debug("claimed %d events", r->cl.nrows);
    produce_claimed(r, now);
}

/* ---- retention ----------------------------------------------------------- */

static void run_retention(struct pr *r, int64_t now)
{
    const struct config *c = r->cfg;
    char age[32], limit[32];
    long long total = 0;
    int batches = 0;
    r->st.next_retention_ms = now + c->poll_retention_interval_ms;
    snprintf(age, sizeof(age), "%" PRId64, c->poll_retention_ms);
    snprintf(limit, sizeof(limit), "%d", c->poll_retention_batch);
    const char *params[] = {age, limit};
    while (!*r->stop) {
        PGresult *res = exec(r, "deleting old SENT rows (retention)", r->sql.retention, 2,
                             params, PGRES_COMMAND_OK);
        if (!res) break;
        long long n = atoll(PQcmdTuples(res));
        PQclear(res);
        total += n;
        if (n > 0) batches++;
        if (n < c->poll_retention_batch) break;
        producer_poll(r->prod, 0); /* keep reports flowing between batches */
    }
    if (total > 0)
        log_info("retention: deleted %lld SENT rows older than %" PRId64 " s in %d batch%s",
                 total, c->poll_retention_ms / 1000, batches, batches == 1 ? "" : "es");
}

/* ---- the backlog (metrics) ---------------------------------------------- */

/* Reads the backlog query's answer into b. Returns 0, -1 with err. */
static int backlog_read(const struct pr *r, const PGresult *res, struct polling_backlog *b,
                        char *err, size_t errlen)
{
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
        pgconn_message(r->conn, res, r->cfg->pg_conninfo, NULL, err, errlen);
        return -1;
    }
    if (PQntuples(res) != PS__COUNT || PQnfields(res) != 5) {
        snprintf(err, errlen, "backlog query: %d rows of %d columns", PQntuples(res),
                 PQnfields(res));
        return -1;
    }
    for (int i = 0; i < PQntuples(res); i++) {
        const char *vals[5];
        for (int c = 0; c < 5; c++) vals[c] = PQgetvalue(res, i, c);
        if (polling_backlog_row(b, vals, err, errlen) != 0) return -1;
    }
    return 0;
}

/* Runs the backlog query (polling.h) into the metrics. A failure is logged
 * once until it succeeds again and takes the gauges away (stale numbers
 * would mislead); it never stops the relay (a table without created_at
 * still relays). */
static void query_backlog(struct pr *r, int64_t now)
{
    r->st.next_backlog_ms = now + BACKLOG_INTERVAL_MS;
    PGresult *res = PQexec(r->conn, r->backlog_sql);
    drain_notifies(r);
    char err[1024] = "";
    struct polling_backlog b = {.seen = true};
    int rc = backlog_read(r, res, &b, err, sizeof(err));
    PQclear(res);
    if (PQstatus(r->conn) == CONNECTION_BAD) {
        char why[1100];
        snprintf(why, sizeof(why), "backlog query: %s", err);
        disconnect(r, why);
        r->met.backlog.seen = false;
        return;
    }
    if (rc != 0) {
        if (!r->backlog_warned)
            log_warn("postgres: the backlog metrics are unavailable: %s; trying again every "
                     "%d s",
                     err, BACKLOG_INTERVAL_MS / 1000);
        r->backlog_warned = true;
        r->met.backlog.seen = false;
        return;
    }
    r->backlog_warned = false;
    r->met.backlog = b;
}

/* ---- the loop ------------------------------------------------------------ */

/* Waits for the producer, the Postgres socket (read, or what the connect
 * needs) or the earliest deadline, then serves the socket. */
static void wait_turn(struct pr *r, int64_t now)
{
    struct evloop l;
    evloop_begin(&l, pollstate_wake_ms(&r->st, now));
    evloop_watch(&l, producer_wakeup_fd(r->prod), false);
    evloop_watch(&l, registry_wakeup_fd(r->serdes.reg), false); /* a schema arrived */
    int fd = r->conn ? PQsocket(r->conn) : -1;
    r->connect_fd = fd;
    evloop_watch(&l, fd, r->st.db == DB_CONNECTING && r->connect_poll == PGRES_POLLING_WRITING);
    evloop_wait(&l, now);
    if (r->serdes.reg && evloop_ready(&l, registry_wakeup_fd(r->serdes.reg)))
        registry_wakeup_drain(r->serdes.reg);
    now = clock_mono_ms();
    if (r->st.db == DB_CONNECTING) return connect_step(r, &l, now);
    if (r->st.db != DB_UP || !evloop_ready(&l, fd)) return;
    if (!PQconsumeInput(r->conn)) {
        char why[1100];
        pgconn_message(r->conn, NULL, r->cfg->pg_conninfo, "connection lost", why, sizeof(why));
        return disconnect(r, why);
    }
    drain_notifies(r);
}

/* A RUN turn: whatever is due. */
static void run_due(struct pr *r, int64_t now)
{
    char err[512];
    if (pollstate_connect_due(&r->st, now)) connect_start(r, now);
    producer_poll(r->prod, 0);
    write_results(r, now);
    if (pollstate_produce_due(&r->st, now))
        produce_claimed(r, now);
    else if (pollstate_claim_due(&r->st, now))
        claim_and_produce(r, now);
    if (pollstate_retention_due(&r->st, now)) run_retention(r, now);
    if (pollstate_backlog_due(&r->st, now)) query_backlog(r, now);
    if (producer_fatal(r->prod, err, sizeof(err))) {
        log_error("kafka: fatal producer error: %s", err);
        r->st.fatal = true;
    }
}

/* A CHECK turn: set-up mistakes (missing table or columns, privileges)
 * stop here; they fail every time, a server restarting under us does
 * not. */
static void run_check(struct pr *r)
{
    bool passed = check_run(&r->kcfg, true, CHECK_SCOPE_STARTUP) == 0;
    if (pollstate_checked(&r->st, passed, clock_mono_ms(), r->cfg->pg_retry_max_ms)) {
        r->checks_failed = true;
        return;
    }
    if (!passed)
        log_warn("start-up checks failed (attempt %d of %d); trying again in %d ms",
                 r->st.check_tries, POLLSTATE_CHECK_TRIES, r->cfg->pg_retry_max_ms);
}

/* A RECORD turn: one try is one connect (when there is no connection) and
 * one write of the outcomes. */
static void record_try(struct pr *r, int64_t now)
{
    if (r->st.db == DB_CONNECTING) return; /* the wait drives it */
    if (r->st.db == DB_DOWN && !r->record_dialed) {
        r->record_dialed = true;
        connect_start(r, now);
        if (r->st.db == DB_CONNECTING) return;
    }
    r->record_dialed = false;
    r->st.results_retry_ms = 0;
    write_results(r, now);
    r->st.record_tries++;
}

/* What entering phase ph does. */
static void phase_entered(struct pr *r, enum poll_phase was, enum poll_phase ph, int64_t now)
{
    if (ph == PH_DRAIN && r->st.inflight)
        log_info("stopping: waiting for %zu outstanding deliveries", r->st.inflight);
    if (ph == PH_RECORD) { /* what is still unknown back to PENDING at once */
        for (size_t i = 0; i < r->st.inflight; i++)
            add_result(r, OUT_RELEASE, r->fl[i].event_id, r->fl[i].gen, 0, NULL);
        r->st.inflight = 0;
    }
    if (ph != PH_DONE) return;
    if (was == PH_RECORD && r->st.outcomes)
        log_warn("%zu outcomes could not be recorded; their leases will expire",
                 r->st.outcomes);
    if (was == PH_RUN) { /* fatal: releases, outcomes so far */
        if (r->cl.res) claim_close(r);
        write_results(r, now);
    }
}

/* One turn of the loop. */
static void turn(struct pr *r)
{
    int64_t now = clock_mono_ms();
    pr_tick(r, now);
    r->st.stop = *r->stop != 0;
    enum poll_phase was = r->st.phase;
    enum poll_phase ph = pollstate_advance(&r->st, now, PRODUCER_SHUTDOWN_FLUSH_MS);
    if (ph != was) phase_entered(r, was, ph, now);
    if (ph == PH_CHECK && pollstate_check_due(&r->st, now)) run_check(r);
    if (ph == PH_RUN) run_due(r, now);
    if (ph == PH_DRAIN) producer_poll(r->prod, 0);
    if (ph == PH_RECORD) record_try(r, now);
    if (ph != PH_DONE) wait_turn(r, clock_mono_ms());
}

/* ---- set-up -------------------------------------------------------------- */

/* hostname:pid, unless [polling] owner_id is set. */
static void owner_id(const struct config *c, char *out, size_t outlen)
{
    if (c->poll_owner_id) {
        snprintf(out, outlen, "%s", c->poll_owner_id);
        return;
    }
    char host[256];
    if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    snprintf(out, outlen, "%s:%ld", host, (long)getpid());
}

/* r->kcfg: message.timeout.ms defaults to half the lease in polling mode:
 * the outcome of a delivery is then known while the lease still holds.
 * Returns 0, -1 on out of memory (logged). */
static int derive_config(struct pr *r)
{
    const struct config *c = r->cfg;
    r->kcfg = *c;
    const char *set = config_kafka_get(c, "message.timeout.ms");
    if (set) {
        long long ms = atoll(set);
        if (ms == 0 || ms >= c->poll_lease_ms)
            log_warn("[kafka] message.timeout.ms = %s is not below the lease (%" PRId64
                     " ms): a slow delivery can outlive its lease and be sent again by "
                     "another relay",
                     set, c->poll_lease_ms);
        return 0;
    }
    r->kafka = calloc(c->nkafka + 1, sizeof(*r->kafka));
    if (!r->kafka) goto oom;
    if (c->nkafka) memcpy(r->kafka, c->kafka, c->nkafka * sizeof(*r->kafka));
    r->derived_timeout = true;
    struct kv *d = &r->kafka[c->nkafka];
    *d = (struct kv){strdup("message.timeout.ms"), str_printf("%" PRId64, c->poll_lease_ms / 2),
                     c->loading};
    r->kcfg.kafka = r->kafka;
    r->kcfg.nkafka = c->nkafka + 1;
    if (d->key && d->value) return 0;
oom:
    log_error("out of memory");
    return -1;
}

static void pr_free(struct pr *r)
{
    claim_close(r); /* first: on a fatal stop it may add releases */
    for (size_t i = 0; i < r->st.inflight; i++) free(r->fl[i].event_id);
    pollout_free(&r->out);
    free(r->fl);
    httpd_stop(r->http);
    free(r->backlog_sql);
    metrics_free(&r->met);
    free(r->text.data);
    producer_free(r->prod);
    PQfinish(r->conn);
    polling_sql_free(&r->sql);
    serde_set_free(&r->serdes);
    outbox_map_free(&r->map);
    if (r->derived_timeout) {
        free(r->kafka[r->cfg->nkafka].key);
        free(r->kafka[r->cfg->nkafka].value);
    }
    free(r->kafka);
}

/* The metrics' fixed part: mode, version, the delivery errors it can count
 * at 0 from the start (metrics_seed(); row faults are quarantined, not
 * counted as failed), the start time. */
static void metrics_setup(struct pr *r)
{
    metrics_init(&r->met);
    r->met.mode = METRICS_POLLING;
    r->met.version = OUTBOXD_VERSION;
    r->met.plugin = "polling";
    r->met.slot = "";
    for (size_t i = 0; producer_poison_name(i); i++)
        metrics_seed(&r->met.failed, producer_poison_name(i));
    metrics_seed(&r->met.failed, producer_timed_out_name());
    r->met.start_time_us = clock_unix_us();
}

/* Everything before the loop. Returns EXIT_OK or the exit code (logged). */
static int pr_setup(struct pr *r)
{
    const struct config *cfg = r->cfg;
    char err[1024];
    metrics_setup(r);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    owner_id(cfg, r->owner, sizeof(r->owner));
    char *qch = pgsql_quote_ident(cfg->poll_notify_channel);
    snprintf(r->channel_sql, sizeof(r->channel_sql), "LISTEN %s", qch ? qch : "outboxd");
    free(qch);
    backoff_init(&r->backoff, cfg->pg_retry_min_ms, cfg->pg_retry_max_ms);
    r->st = (struct pollstate){.phase = PH_CHECK,
                               .batch = cfg->poll_batch_size,
                               .retention = cfg->poll_retention_ms > 0};
    /* config_validate() refused several sections in polling mode. */
    if (config_outbox_map(config_outbox_at(cfg, 0), &r->map, err, sizeof(err)) != 0) {
        log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    if (config_serde_set(cfg, &r->serdes, err, sizeof(err)) != 0) {
        log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    err[0] = '\0';
    if (derive_config(r) != 0 ||
        !(r->prod = producer_new(&r->kcfg, on_delivery, r, err, sizeof(err)))) {
        if (err[0]) log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    int code = httpd_from_config(cfg->http_listen, &cfg->http_addr, &r->http);
    if (code != 0) return code;
    if (r->http && !(r->backlog_sql = polling_backlog_sql(&r->map))) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    r->st.backlog = r->backlog_sql != NULL;
    return EXIT_OK;
}

int poll_relay_run(const struct config *cfg, volatile sig_atomic_t *stop)
{
    struct pr r;
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    r.stop = stop;
    int code = pr_setup(&r);
    if (code != EXIT_OK) {
        pr_free(&r);
        return code;
    }
    while (r.st.phase != PH_DONE) turn(&r);
    code = r.st.fatal ? EXIT_FATAL : EXIT_OK;
    if (!r.checks_failed)
        log_info("polling relay stopped: claimed %" PRIu64 ", sent %" PRIu64
                 ", retried %" PRIu64 ", quarantined %" PRIu64 ", released %" PRIu64
                 ", stale outcomes %" PRIu64,
                 r.n_claimed, r.out.recorded[OUT_SENT], r.out.recorded[OUT_RETRY],
                 r.out.recorded[OUT_QUARANTINE], r.out.recorded[OUT_RELEASE], r.out.stale);
    pr_free(&r);
    return code;
}
