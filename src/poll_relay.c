/*
 * poll_relay.c - polling mode (see poll_relay.h): the lease-based relay for
 * databases without logical replication, and `outboxd requeue`.
 *
 *   NOTIFY / poll interval --> claim (one short transaction, committed)
 *        --> rows --> outbox map --> producer --> delivery reports
 *        --> outcomes --> conditional UPDATEs (SENT / PENDING / QUARANTINED)
 *
 * One thread. No row lock is ever held while the broker is talked to: the
 * claim statement commits before the first message is produced, and the
 * outcome updates run after the reports. Per-aggregate order comes from the
 * claim statement itself: a row is claimable only when no earlier row (by
 * seq) of its aggregate is unsent, so at most one event per aggregate is
 * in flight across all relays, and it was ACKed before the next is claimed.
 */
#include "poll_relay.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "check.h"
#include "httpd.h"
#include "log.h"
#include "metrics.h"
#include "str.h"
#include "outbox.h"
#include "polling.h"
#include "producer.h"
#include "redact.h"
#include "signals.h"
#include "exitcode.h"
#include "relay.h" /* RELAY_SHUTDOWN_FLUSH_MS */

/* Longest single wait of the loop, so that timers are never missed by much. */
#define MAX_WAIT_MS 1000
/* Start-up checks tried before a failure is taken for a set-up mistake. */
#define STARTUP_CHECK_TRIES 3
/* Late outcomes (lease lost) logged by event_id per statement. */
#define STALE_NAMED 5
/* Pause before retrying outcome updates after a failed statement. */
#define RESULT_RETRY_MS 500
/* Between two backlog queries (the metrics; not per batch: the query reads
 * every undelivered row). */
#define BACKLOG_INTERVAL_MS 15000

/* Kinds of outcome written back to a row. */
enum outcome { OUT_SENT, OUT_RETRY, OUT_QUARANTINE, OUT_RELEASE };

/* One claimed row produced and not yet reported. */
struct flight {
    uint64_t seq;   /* the producer opaque; increasing */
    char *event_id; /* owned, text form */
    int64_t gen;    /* lease_generation of our claim */
    int attempts;   /* failed attempts before this one */
};

/* One outcome waiting to be written to the table. */
struct result {
    enum outcome kind;
    char *event_id; /* owned */
    int64_t gen;
    int64_t delay_ms; /* OUT_RETRY */
    char *error;      /* owned, NULL: keep last_error */
};

struct pr {
    struct config *cfg;
    volatile sig_atomic_t *stop;
    struct outbox_map map;
    struct polling_sql sql;
    bool sql_ready;
    char owner[300];
    char channel_sql[200];
    PGconn *conn;
    struct producer *prod;
    bool fatal;
    bool oneshot; /* requeue: errors are final, nothing is retried */

    struct flight *fl;
    size_t nfl, capfl;
    uint64_t next_seq;

    struct result *res;
    size_t nres, capres;

    bool claim_now;
    int64_t next_claim_ms;
    int64_t next_retention_ms;
    int64_t next_connect_ms;
    int64_t results_retry_ms;
    int connect_failures;

    uint64_t n_claimed, n_sent, n_retried, n_quarantined, n_released, n_stale;

    /* observability (httpd.h): the loop publishes, the server thread reads */
    struct httpd *http; /* NULL when [http] listen is empty */
    struct metrics met;
    struct textbuf text;
    int64_t next_publish_ms;
    char *backlog_sql; /* owned; NULL without an HTTP server */
    int64_t next_backlog_ms;
    bool backlog_warned; /* the last backlog query failed and said so */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- growing arrays ------------------------------------------------------ */

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p) return -1;
    *arr = p;
    *cap = n;
    return 0;
}

/* Adds an outcome; takes ownership of event_id and error (freed on OOM). */
static void add_result(struct pr *r, enum outcome kind, char *event_id, int64_t gen,
                       int64_t delay_ms, char *error)
{
    if (grow((void **)&r->res, &r->capres, r->nres + 1, sizeof(*r->res)) != 0) {
        log_error("out of memory recording the outcome of event %s", event_id);
        free(event_id);
        free(error);
        r->fatal = true;
        return;
    }
    r->res[r->nres++] = (struct result){kind, event_id, gen, delay_ms, error};
}

/* ---- delivery reports ---------------------------------------------------- */

static struct flight *find_flight(struct pr *r, uint64_t seq)
{
    size_t lo = 0, hi = r->nfl;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->fl[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->nfl && r->fl[lo].seq == seq ? &r->fl[lo] : NULL;
}

static void remove_flight(struct pr *r, struct flight *f)
{
    size_t i = (size_t)(f - r->fl);
    memmove(&r->fl[i], &r->fl[i + 1], (r->nfl - i - 1) * sizeof(*r->fl));
    r->nfl--;
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

/* ---- observability ------------------------------------------------------- */

#define PUBLISH_MS 500

/* Why the relay is not ready, or NULL when it is. */
static const char *not_ready_reason(const struct pr *r)
{
    if (*r->stop) return "shutting down";
    if (r->fatal) return "a fatal error: stopping";
    if (!r->conn || !r->sql_ready) return "not connected to the database (polling)";
    int up = producer_brokers_up(r->prod);
    if (up < 0) return "Kafka broker state not known yet (librdkafka statistics)";
    if (up == 0) return "no Kafka broker reachable";
    return NULL;
}

/* Beats on every turn; publishes a snapshot every PUBLISH_MS. */
static void pr_tick(struct pr *r)
{
    signals_service(); /* SIGHUP, SIGUSR1/2: signals.h */
    if (!r->http) return;
    int64_t now = now_ms();
    httpd_beat(r->http, now);
    if (now < r->next_publish_ms) return;
    struct metrics *m = &r->met;
    m->inflight_events = r->nfl;
    m->kafka_queue = producer_outq_len(r->prod);
    m->kafka_brokers_up = producer_brokers_up(r->prod);
    m->streaming = r->conn != NULL;
    uint64_t rows[PO__COUNT] = {r->n_claimed,  r->n_sent,     r->n_retried,
                                r->n_quarantined, r->n_released, r->n_stale};
    memcpy(m->polling_rows, rows, sizeof(rows));
    struct timeval tv;
    gettimeofday(&tv, NULL);
    httpd_publish_metrics(r->http, m, &r->text, (int64_t)tv.tv_sec * 1000000 + tv.tv_usec,
                          not_ready_reason(r));
    r->next_publish_ms = now + PUBLISH_MS;
}

static void on_delivery(void *ctx, const struct delivery_report *dr)
{
    struct pr *r = ctx;
    if (dr->err == 0)
        metrics_count(&r->met.acked, dr->topic, 1);
    else
        metrics_count(&r->met.failed, producer_err_name(dr->err), 1);
    struct flight *f = find_flight(r, dr->seq);
    if (!f) {
        log_error("internal: delivery report for unknown message %" PRIu64, dr->seq);
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

/* ---- postgres ------------------------------------------------------------ */

static void disconnect(struct pr *r, const char *why)
{
    if (!r->conn) return;
    log_warn("postgres: %s; reconnecting", why);
    PQfinish(r->conn);
    r->conn = NULL;
    r->next_connect_ms = now_ms() + r->cfg->pg_retry_min_ms;
}

/* libpq's message without its trailing newline, into out. */
static void pg_message(const PGconn *conn, const PGresult *res, char *out, size_t outlen)
{
    const char *m = res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res)
                    : conn                            ? PQerrorMessage(conn)
                                                      : "out of memory";
    snprintf(out, outlen, "%s", m);
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ')) out[--n] = '\0';
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\t') *p = ' '; /* libpq's messages span lines */
    log_one_line(out);
}

static void drain_notifies(struct pr *r)
{
    PGnotify *n;
    while (r->conn && (n = PQnotifies(r->conn))) {
        r->claim_now = true;
        PQfreemem(n);
    }
}

/*
 * Runs one statement (autocommit: its own transaction). Returns the result
 * when its status is expect; otherwise NULL after handling the error: a
 * lost connection is dropped (reconnect later), an error about the table
 * or the SQL itself (SQLSTATE class 42, e.g. a missing column or no
 * privilege) is fatal, anything else (lock or statement timeout,
 * deadlock, server shutting down) is logged and retried later.
 */
static PGresult *exec(struct pr *r, const char *what, const char *sql, int nparams,
                      const char *const *params, ExecStatusType expect)
{
    if (!r->conn) return NULL;
    PGresult *res = PQexecParams(r->conn, sql, nparams, NULL, params, NULL, NULL, 0);
    drain_notifies(r);
    if (res && PQresultStatus(res) == expect) return res;
    char msg[1024];
    pg_message(r->conn, res, msg, sizeof(msg));
    /* The SQLSTATE is copied: PQresultErrorField() points into res. */
    char sqlstate[6] = "";
    const char *field = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (field) snprintf(sqlstate, sizeof(sqlstate), "%s", field);
    const char *st = sqlstate[0] ? sqlstate : NULL;
    PQclear(res);
    if (PQstatus(r->conn) == CONNECTION_BAD) {
        char why[1200];
        snprintf(why, sizeof(why), "%s: %s", what, msg);
        disconnect(r, why);
    } else if (r->oneshot) {
        log_error("postgres: %s: %s (SQLSTATE %s)", what, msg, st ? st : "?");
    } else if (st && strncmp(st, "42", 2) == 0) {
        log_error("postgres: %s: %s (SQLSTATE %s); stopping", what, msg, st);
        r->fatal = true;
    } else {
        log_warn("postgres: %s: %s (SQLSTATE %s); will retry", what, msg, st ? st : "?");
    }
    return NULL;
}

/* The event_id column's type, for the array casts of the statements. */
static int build_sql(struct pr *r)
{
    char err[512], *qs = polling_quote_ident(r->map.schema),
                   *qt = polling_quote_ident(r->map.table);
    char *qual = qs && qt ? str_printf("%s.%s", qs, qt) : NULL;
    free(qs);
    free(qt);
    if (!qual) {
        log_error("out of memory");
        return -1;
    }
    const char *params[] = {qual, r->map.columns[OC_EVENT_ID]};
    PGresult *res = exec(r, "looking up the event_id column",
                         "SELECT format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
                         "WHERE attrelid = $1::regclass AND attname = $2 AND attnum > 0 "
                         "AND NOT attisdropped",
                         2, params, PGRES_TUPLES_OK);
    free(qual);
    if (!res) return r->fatal ? -1 : 0;
    if (PQntuples(res) != 1) {
        log_error("%s.%s has no column \"%s\" ([outbox] column.event_id)", r->map.schema,
                  r->map.table, r->map.columns[OC_EVENT_ID]);
        PQclear(res);
        r->fatal = true;
        return -1;
    }
    int rc = polling_sql_build(&r->sql, &r->map, PQgetvalue(res, 0, 0), err, sizeof(err));
    PQclear(res);
    if (rc != 0) {
        log_error("%s", err);
        r->fatal = true;
        return -1;
    }
    r->sql_ready = true;
    return 0;
}

/* Connects, LISTENs and (the first time) prepares the statements. On a
 * failure, schedules the next try with backoff. */
static void pr_connect(struct pr *r)
{
    const char *keys[] = {"connect_timeout", "dbname", "fallback_application_name", NULL};
    const char *vals[] = {"10", r->cfg->pg_conninfo, "outboxd-polling", NULL};
    r->conn = PQconnectdbParams(keys, vals, 1);
    if (!r->conn || PQstatus(r->conn) != CONNECTION_OK) {
        char raw[1024], safe[1024];
        pg_message(r->conn, NULL, raw, sizeof(raw));
        redact_conn_error(r->cfg->pg_conninfo, raw, safe, sizeof(safe));
        PQfinish(r->conn);
        r->conn = NULL;
        int64_t ms = r->cfg->pg_retry_min_ms;
        for (int i = 0; i < r->connect_failures && ms < r->cfg->pg_retry_max_ms; i++) ms *= 2;
        if (ms > r->cfg->pg_retry_max_ms) ms = r->cfg->pg_retry_max_ms;
        r->connect_failures++;
        log_warn("cannot connect to postgres: %s; retrying in %" PRId64 " ms", safe, ms);
        r->next_connect_ms = now_ms() + ms;
        return;
    }
    r->connect_failures = 0;
    PGresult *res = exec(r, "LISTEN", r->channel_sql, 0, NULL, PGRES_COMMAND_OK);
    if (!res) return;
    PQclear(res);
    if (!r->sql_ready && build_sql(r) != 0) return;
    r->claim_now = true; /* whatever was committed while we were away */
    log_info("polling %s.%s as %s (LISTEN %s, batch %d, lease %" PRId64 " ms)", r->map.schema,
             r->map.table, r->owner, r->cfg->poll_notify_channel, r->cfg->poll_batch_size,
             r->cfg->poll_lease_ms);
}

/* ---- writing outcomes back ----------------------------------------------- */

/* A growing string for array literals. */
struct buf {
    char *s;
    size_t len, cap;
    bool oom;
};

static void buf_put(struct buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (grow((void **)&b->s, &b->cap, b->len + n + 1, 1) != 0) {
        b->oom = true;
        return;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

/* Appends one element of an array literal ("{...}"): NULL, or the text
 * double-quoted with '"' and '\' escaped. */
static void arr_elem(struct buf *b, const char *v)
{
    buf_put(b, b->len > 1 ? "," : "", b->len > 1 ? 1 : 0);
    if (!v) return buf_put(b, "NULL", 4);
    buf_put(b, "\"", 1);
    for (const char *p = v; *p; p++) {
        if (*p == '"' || *p == '\\') buf_put(b, "\\", 1);
        buf_put(b, p, 1);
    }
    buf_put(b, "\"", 1);
}

static const char *outcome_name(enum outcome k)
{
    return k == OUT_SENT         ? "SENT"
           : k == OUT_RETRY      ? "retry"
           : k == OUT_QUARANTINE ? "QUARANTINED"
                                 : "release";
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Writes the outcomes of one kind group (sent, or everything else) with one
 * statement. The rows it did not change were no longer ours: logged as
 * stale, never overwritten. Returns 0, -1 when the statement failed (the
 * outcomes stay queued). */
static int write_group(struct pr *r, bool sent)
{
    struct buf ids = {0}, gens = {0}, sts = {0}, delays = {0}, errs = {0}, bumps = {0};
    struct buf *all[] = {&ids, &gens, &sts, &delays, &errs, &bumps};
    size_t n = 0;
    char num[32];
    for (int i = 0; i < 6; i++) buf_put(all[i], "{", 1);
    for (size_t i = 0; i < r->nres; i++) {
        const struct result *x = &r->res[i];
        if ((x->kind == OUT_SENT) != sent) continue;
        n++;
        arr_elem(&ids, x->event_id);
        snprintf(num, sizeof(num), "%" PRId64, x->gen);
        arr_elem(&gens, num);
        arr_elem(&sts, x->kind == OUT_QUARANTINE ? "QUARANTINED" : "PENDING");
        snprintf(num, sizeof(num), "%" PRId64, x->kind == OUT_RETRY ? x->delay_ms : 0);
        arr_elem(&delays, num);
        arr_elem(&errs, x->error);
        arr_elem(&bumps, x->kind == OUT_RELEASE ? "0" : "1");
    }
    int rc = 0;
    for (int i = 0; i < 6; i++) buf_put(all[i], "}", 1);
    if (n == 0) goto out;
    for (int i = 0; i < 6; i++)
        if (all[i]->oom) {
            log_error("out of memory writing outcomes");
            r->fatal = true;
            rc = -1;
            goto out;
        }
    const char *params[] = {ids.s, gens.s, r->owner, sts.s, delays.s, errs.s, bumps.s};
    PGresult *res = exec(r, sent ? "marking events SENT" : "recording failed deliveries",
                         sent ? r->sql.sent : r->sql.fail, sent ? 3 : 7, params,
                         PGRES_TUPLES_OK);
    if (!res) {
        rc = -1;
        goto out;
    }
    int nchanged = PQntuples(res);
    const char **changed = calloc((size_t)nchanged + 1, sizeof(*changed));
    if (!changed) {
        PQclear(res);
        log_error("out of memory");
        r->fatal = true;
        rc = -1;
        goto out;
    }
    for (int i = 0; i < nchanged; i++) changed[i] = PQgetvalue(res, i, 0);
    qsort(changed, (size_t)nchanged, sizeof(*changed), cmp_str);
    size_t keep = 0, stale = 0;
    for (size_t i = 0; i < r->nres; i++) {
        struct result *x = &r->res[i];
        if ((x->kind == OUT_SENT) != sent) {
            r->res[keep++] = *x;
            continue;
        }
        const char *key = x->event_id;
        if (!bsearch(&key, changed, (size_t)nchanged, sizeof(*changed), cmp_str)) {
            r->n_stale++;
            /* After a long broker outage many outcomes can be late at
             * once: the first few are named, the rest counted. */
            if (++stale <= STALE_NAMED)
                log_warn("event %s: lease lost (no longer CLAIMED by %s at generation %" PRId64
                         "): its %s outcome is not recorded; the row's current owner "
                         "decides",
                         x->event_id, r->owner, x->gen, outcome_name(x->kind));
        } else if (x->kind == OUT_SENT) {
            r->n_sent++;
        } else if (x->kind == OUT_RETRY) {
            r->n_retried++;
        } else if (x->kind == OUT_QUARANTINE) {
            r->n_quarantined++;
        } else {
            r->n_released++;
        }
        free(x->event_id);
        free(x->error);
    }
    r->nres = keep;
    if (stale > STALE_NAMED)
        log_warn("... and %zu more late outcomes of expired leases (not recorded)",
                 stale - STALE_NAMED);
    free(changed);
    PQclear(res);
    if (sent && nchanged > 0) r->claim_now = true; /* later events are claimable now */
out:
    for (int i = 0; i < 6; i++) free(all[i]->s);
    return rc;
}

static void write_results(struct pr *r)
{
    if (!r->conn || !r->sql_ready || r->nres == 0 || now_ms() < r->results_retry_ms) return;
    size_t retries = 0;
    for (size_t i = 0; i < r->nres; i++) retries += r->res[i].kind == OUT_RETRY;
    if (retries) log_info("%zu events back to PENDING with backoff", retries);
    if (write_group(r, true) != 0 || write_group(r, false) != 0)
        r->results_retry_ms = now_ms() + RESULT_RETRY_MS;
}

/* ---- claiming and producing ---------------------------------------------- */

/* Drops the commit_lsn header outbox_event_build() adds: polling mode has
 * no LSN. */
static void drop_lsn_header(struct outbox_event *ev)
{
    for (int i = 0; i < ev->nheaders; i++)
        if (strcmp(ev->headers[i].name, "commit_lsn") == 0) {
            memmove(&ev->headers[i], &ev->headers[i + 1],
                    (size_t)(ev->nheaders - i - 1) * sizeof(ev->headers[0]));
            ev->nheaders--;
            return;
        }
}

/* Produces one claimed row. */
static void produce_row(struct pr *r, const struct outbox_event *ev, char *event_id,
                        int64_t gen, int attempts)
{
    char err[512];
    int kafka_err = 0;
    uint64_t seq = ++r->next_seq;
    if (grow((void **)&r->fl, &r->capfl, r->nfl + 1, sizeof(*r->fl)) != 0) {
        log_error("out of memory");
        free(event_id);
        r->fatal = true;
        return;
    }
    r->fl[r->nfl++] = (struct flight){seq, event_id, gen, attempts};
    for (;;) {
        int rc = producer_send(r->prod, ev, seq, &kafka_err, err, sizeof(err));
        if (rc == PRODUCER_OK) {
            metrics_count(&r->met.produced, ev->topic, 1);
            r->met.produced_bytes +=
                (ev->key_null ? 0 : ev->key.len) + (ev->value_null ? 0 : ev->value.len);
            return;
        }
        if (rc == PRODUCER_ERROR) break;
        producer_poll(r->prod, 100); /* queue full: serve reports, try again */
        pr_tick(r);
    }
    metrics_count(&r->met.failed, producer_err_name(kafka_err), 1);
    struct flight *f = find_flight(r, seq);
    remove_flight(r, f);
    record_failure(r, event_id, gen, attempts, kafka_err, err);
}

/* Column index by name in a result, -1 if absent. */
static int result_col(const PGresult *res, const char *name)
{
    for (int i = 0; i < PQnfields(res); i++)
        if (strcmp(PQfname(res, i), name) == 0) return i;
    return -1;
}

static void claim_and_produce(struct pr *r)
{
    const struct config *c = r->cfg;
    char lease[32], limit[32], err[512];
    int want = c->poll_batch_size - (int)r->nfl;
    r->claim_now = false;
    r->next_claim_ms = now_ms() + c->poll_interval_ms;
    if (want <= 0) return;
    snprintf(lease, sizeof(lease), "%" PRId64, c->poll_lease_ms);
    snprintf(limit, sizeof(limit), "%d", want);
    const char *params[] = {r->owner, lease, limit};
    PGresult *res = exec(r, "claiming due events", r->sql.claim, 3, params, PGRES_TUPLES_OK);
    if (!res) return;
    int n = PQntuples(res), ncols = PQnfields(res);
    int c_id = result_col(res, r->map.columns[OC_EVENT_ID]);
    int c_gen = result_col(res, "lease_generation"), c_att = result_col(res, "attempts");
    struct relation rel = {.nspname = r->map.schema, .relname = r->map.table, .ncols = ncols};
    rel.cols = calloc((size_t)ncols + 1, sizeof(*rel.cols));
    struct col_value *vals = calloc((size_t)ncols + 1, sizeof(*vals));
    if (!rel.cols || !vals || c_id < 0 || c_gen < 0 || c_att < 0) {
        log_error(!rel.cols || !vals ? "out of memory"
                                     : "the claim returned no event_id, lease_generation or "
                                       "attempts column");
        r->fatal = true;
        n = 0;
    }
    for (int i = 0; i < ncols && rel.cols; i++) rel.cols[i].name = PQfname(res, i);
    if (n == want) r->claim_now = true; /* a full batch: there may be more */
    r->n_claimed += (uint64_t)n;
    if (n) log_debug("claimed %d events", n);
    for (int row = 0; row < n && !r->fatal; row++) {
        for (int i = 0; i < ncols; i++) {
            bool null = PQgetisnull(res, row, i);
            vals[i] = (struct col_value){null ? CV_NULL : CV_TEXT,
                                         null ? 0 : (uint32_t)PQgetlength(res, row, i),
                                         null ? NULL : PQgetvalue(res, row, i)};
        }
        char *id = strdup(PQgetisnull(res, row, c_id) ? "" : PQgetvalue(res, row, c_id));
        int64_t gen = strtoll(PQgetvalue(res, row, c_gen), NULL, 10);
        int attempts = atoi(PQgetvalue(res, row, c_att));
        if (!id) {
            log_error("out of memory");
            r->fatal = true;
            break;
        }
        struct outbox_event ev;
        if (outbox_event_build(&r->map, &rel, vals, ncols, 0, &ev, err, sizeof(err)) == 0) {
            drop_lsn_header(&ev);
            produce_row(r, &ev, id, gen, attempts);
        } else if (ev.fault == OF_SCHEMA) {
            /* Every row would fail: give this one back and stop. */
            log_error("event %s: %s; stopping", id, err);
            add_result(r, OUT_RELEASE, id, gen, 0, NULL);
            r->fatal = true;
        } else {
            log_warn("event %s cannot be published: %s: %s; QUARANTINED until requeued", id,
                     outbox_fault_name(ev.fault), err);
            add_result(r, OUT_QUARANTINE, id, gen, 0,
                       str_printf("%s: %s", outbox_fault_name(ev.fault), err));
        }
    }
    /* Rows after a fatal stop were claimed but not produced: give them back. */
    for (int row = 0; r->fatal && row < n; row++) {
        const char *id = PQgetvalue(res, row, c_id);
        bool known = false;
        for (size_t i = 0; i < r->nres && !known; i++) known = !strcmp(r->res[i].event_id, id);
        for (size_t i = 0; i < r->nfl && !known; i++) known = !strcmp(r->fl[i].event_id, id);
        char *copy = known ? NULL : strdup(id);
        if (copy)
            add_result(r, OUT_RELEASE, copy, strtoll(PQgetvalue(res, row, c_gen), NULL, 10),
                       0, NULL);
    }
    free(rel.cols);
    free(vals);
    PQclear(res);
}

/* ---- retention ----------------------------------------------------------- */

static void run_retention(struct pr *r)
{
    const struct config *c = r->cfg;
    char age[32], limit[32];
    long long total = 0;
    int batches = 0;
    r->next_retention_ms = now_ms() + c->poll_retention_interval_ms;
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

/* Runs the backlog query (polling.h) into the metrics. A failure is logged
 * once until it succeeds again and takes the gauges away (stale numbers
 * would mislead); it never stops the relay (a table without created_at
 * still relays). */
static void query_backlog(struct pr *r)
{
    r->next_backlog_ms = now_ms() + BACKLOG_INTERVAL_MS;
    PGresult *res = PQexec(r->conn, r->backlog_sql);
    drain_notifies(r);
    char err[1024] = "";
    struct polling_backlog b = {.seen = true};
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
        pg_message(r->conn, res, err, sizeof(err));
    else if (PQntuples(res) != PS__COUNT || PQnfields(res) != 5)
        snprintf(err, sizeof(err), "backlog query: %d rows of %d columns", PQntuples(res),
                 PQnfields(res));
    for (int i = 0; !err[0] && i < PQntuples(res); i++) {
        const char *vals[5];
        for (int c = 0; c < 5; c++) vals[c] = PQgetvalue(res, i, c);
        polling_backlog_row(&b, vals, err, sizeof(err));
    }
    PQclear(res);
    if (PQstatus(r->conn) == CONNECTION_BAD) {
        char why[1100];
        snprintf(why, sizeof(why), "backlog query: %s", err);
        disconnect(r, why);
        r->met.backlog.seen = false;
        return;
    }
    if (err[0]) {
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

static int wait_timeout(const struct pr *r)
{
    int64_t now = now_ms(), t = now + MAX_WAIT_MS;
    bool can_claim = r->conn && r->sql_ready && (int)r->nfl < r->cfg->poll_batch_size;
    if (!r->conn) t = r->next_connect_ms < t ? r->next_connect_ms : t;
    if (can_claim && r->claim_now) return 0;
    if (can_claim && r->next_claim_ms < t) t = r->next_claim_ms;
    if (r->conn && r->cfg->poll_retention_ms > 0 && r->next_retention_ms < t)
        t = r->next_retention_ms;
    if (r->nres && r->conn && r->results_retry_ms < t) t = r->results_retry_ms;
    return t <= now ? 0 : (int)(t - now);
}

/* Sleeps until the database or the broker has something, or timeout_ms. */
static void wait_events(struct pr *r, int timeout_ms)
{
    struct pollfd fds[2];
    int n = 0;
    fds[n++] = (struct pollfd){.fd = producer_wakeup_fd(r->prod), .events = POLLIN};
    if (r->conn) fds[n++] = (struct pollfd){.fd = PQsocket(r->conn), .events = POLLIN};
    if (poll(fds, (nfds_t)n, timeout_ms) < 0 && errno != EINTR) {
        log_error("poll: %s", strerror(errno));
        r->fatal = true;
        return;
    }
    if (n == 2 && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
        if (!PQconsumeInput(r->conn)) {
            char msg[1024], why[1100];
            pg_message(r->conn, NULL, msg, sizeof(msg));
            snprintf(why, sizeof(why), "connection lost: %s", msg);
            disconnect(r, why);
            return;
        }
        drain_notifies(r);
    }
}

static void step(struct pr *r)
{
    char err[512];
    pr_tick(r);
    if (!r->conn && now_ms() >= r->next_connect_ms) pr_connect(r);
    producer_poll(r->prod, 0);
    write_results(r);
    if (r->conn && r->sql_ready && !r->fatal && (int)r->nfl < r->cfg->poll_batch_size &&
        (r->claim_now || now_ms() >= r->next_claim_ms))
        claim_and_produce(r);
    if (r->conn && r->sql_ready && !r->fatal && r->cfg->poll_retention_ms > 0 &&
        now_ms() >= r->next_retention_ms)
        run_retention(r);
    if (r->conn && r->backlog_sql && r->sql_ready && now_ms() >= r->next_backlog_ms)
        query_backlog(r);
    if (producer_fatal(r->prod, err, sizeof(err))) {
        log_error("kafka: fatal producer error: %s", err);
        r->fatal = true;
    }
    if (!r->fatal && !*r->stop) wait_events(r, wait_timeout(r));
}

/* Graceful stop: outcomes of what is in flight (bounded wait), then what is
 * still unknown back to PENDING so another relay takes it at once. */
static void drain(struct pr *r)
{
    int64_t deadline = now_ms() + RELAY_SHUTDOWN_FLUSH_MS;
    if (r->nfl) log_info("stopping: waiting for %zu outstanding deliveries", r->nfl);
    while (r->nfl && now_ms() < deadline) {
        producer_poll(r->prod, 100);
        pr_tick(r);
    }
    for (size_t i = 0; i < r->nfl; i++)
        add_result(r, OUT_RELEASE, r->fl[i].event_id, r->fl[i].gen, 0, NULL);
    r->nfl = 0;
    for (int tries = 0; r->nres && tries < 3; tries++) {
        if (!r->conn) pr_connect(r);
        r->results_retry_ms = 0;
        write_results(r);
    }
    if (r->nres) log_warn("%zu outcomes could not be recorded; their leases will expire", r->nres);
}

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

/* message.timeout.ms defaults to half the lease in polling mode: the
 * outcome of a delivery is then known while the lease still holds. */
static int set_message_timeout(struct config *c)
{
    char v[32], err[256];
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
    snprintf(v, sizeof(v), "%" PRId64, c->poll_lease_ms / 2);
    if (config_set(c, "kafka", "message.timeout.ms", v, err, sizeof(err)) != 0) {
        log_error("%s", err);
        return -1;
    }
    return 0;
}

static void pr_free(struct pr *r)
{
    for (size_t i = 0; i < r->nfl; i++) free(r->fl[i].event_id);
    for (size_t i = 0; i < r->nres; i++) {
        free(r->res[i].event_id);
        free(r->res[i].error);
    }
    free(r->fl);
    free(r->res);
    httpd_stop(r->http);
    free(r->backlog_sql);
    metrics_free(&r->met);
    free(r->text.data);
    producer_free(r->prod);
    PQfinish(r->conn);
    polling_sql_free(&r->sql);
    outbox_map_free(&r->map);
}

int poll_relay_run(struct config *cfg, volatile sig_atomic_t *stop)
{
    struct pr r;
    char err[1024];
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    r.stop = stop;
    metrics_init(&r.met);
    r.met.mode = METRICS_POLLING;
    r.met.version = OUTBOXD_VERSION;
    r.met.plugin = "polling";
    r.met.slot = "";
    /* The delivery errors it can count, at 0 from the start (metrics_seed();
     * row faults are quarantined, not counted as failed). */
    for (size_t i = 0; producer_poison_name(i); i++)
        metrics_seed(&r.met.failed, producer_poison_name(i));
    metrics_seed(&r.met.failed, producer_err_name(-192 /* _MSG_TIMED_OUT */));
    struct timeval tv;
    gettimeofday(&tv, NULL);
    r.met.start_time_us = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    owner_id(cfg, r.owner, sizeof(r.owner));
    char *qch = polling_quote_ident(cfg->poll_notify_channel);
    snprintf(r.channel_sql, sizeof(r.channel_sql), "LISTEN %s", qch ? qch : "outboxd");
    free(qch);
    if (outbox_map_init(&r.map, cfg->outbox_table, (const char *const *)cfg->outbox_columns,
                        cfg->outbox_topic, err, sizeof(err)) != 0) {
        log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    if (set_message_timeout(cfg) != 0 ||
        !(r.prod = producer_new(cfg, on_delivery, &r, err, sizeof(err)))) {
        if (!r.prod && err[0]) log_error("configuration: %s", err);
        pr_free(&r);
        return EXIT_USAGE;
    }
    int code = httpd_from_config(cfg->http_listen, &r.http);
    if (code != 0) {
        pr_free(&r);
        return code;
    }
    if (r.http && !(r.backlog_sql = polling_backlog_sql(&r.map))) {
        log_error("out of memory");
        pr_free(&r);
        return EXIT_FATAL;
    }
    pr_tick(&r);
    /* Set-up mistakes (missing table or columns, privileges) stop here;
     * they fail every time, a server restarting under us does not. */
    for (int attempt = 1; check_run(cfg, true, CHECK_SCOPE_STARTUP) != 0; attempt++) {
        if (attempt == STARTUP_CHECK_TRIES || *stop) {
            pr_free(&r);
            return EXIT_FATAL;
        }
        log_warn("start-up checks failed (attempt %d of %d); trying again in %d ms", attempt,
                 STARTUP_CHECK_TRIES, cfg->pg_retry_max_ms);
        struct timespec ts = {cfg->pg_retry_max_ms / 1000,
                              (cfg->pg_retry_max_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL); /* SIGTERM cuts it short */
    }
    while (!*stop && !r.fatal) step(&r);
    code = r.fatal ? EXIT_FATAL : EXIT_OK;
    if (!r.fatal) drain(&r);
    else if (r.conn && r.sql_ready) write_results(&r); /* releases, outcomes so far */
    log_info("polling relay stopped: claimed %" PRIu64 ", sent %" PRIu64 ", retried %" PRIu64
             ", quarantined %" PRIu64 ", released %" PRIu64 ", stale outcomes %" PRIu64,
             r.n_claimed, r.n_sent, r.n_retried, r.n_quarantined, r.n_released, r.n_stale);
    pr_free(&r);
    return code;
}

/* ---- requeue ------------------------------------------------------------- */

int poll_requeue_run(const struct config *cfg, char *const *ids, int nids)
{
    struct pr r;
    char err[1024];
    int code = EXIT_FATAL;
    memset(&r, 0, sizeof(r));
    r.cfg = (struct config *)cfg; /* not amended here */
    volatile sig_atomic_t never = 0;
    r.stop = &never;
    r.oneshot = true;
    if (outbox_map_init(&r.map, cfg->outbox_table, (const char *const *)cfg->outbox_columns,
                        cfg->outbox_topic, err, sizeof(err)) != 0) {
        log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    const char *keys[] = {"connect_timeout", "dbname", "fallback_application_name", NULL};
    const char *vals[] = {"10", cfg->pg_conninfo, "outboxd-requeue", NULL};
    r.conn = PQconnectdbParams(keys, vals, 1);
    if (!r.conn || PQstatus(r.conn) != CONNECTION_OK) {
        char raw[1024], safe[1024];
        pg_message(r.conn, NULL, raw, sizeof(raw));
        redact_conn_error(cfg->pg_conninfo, raw, safe, sizeof(safe));
        log_error("cannot connect to postgres: %s", safe);
        goto out;
    }
    if (build_sql(&r) != 0 || !r.sql_ready) goto out;
    struct buf arr = {0};
    buf_put(&arr, "{", 1);
    for (int i = 0; i < nids; i++) arr_elem(&arr, ids[i]);
    buf_put(&arr, "}", 1);
    if (arr.oom) {
        log_error("out of memory");
        free(arr.s);
        goto out;
    }
    const char *p1[] = {arr.s};
    PGresult *done = exec(&r, "requeueing", r.sql.requeue, 1, p1, PGRES_TUPLES_OK);
    PGresult *states = done ? exec(&r, "reading states", r.sql.states, 1, p1, PGRES_TUPLES_OK)
                            : NULL;
    free(arr.s);
    if (!done || !states) {
        PQclear(done);
        PQclear(states);
        goto out;
    }
    int failed = 0;
    for (int i = 0; i < nids; i++) {
        /* The server's text form may differ from the argument (uuid case). */
        const char *state = NULL, *norm = NULL;
        for (int s = 0; s < PQntuples(states) && !state; s++)
            if (!strcasecmp(PQgetvalue(states, s, 0), ids[i])) {
                state = PQgetvalue(states, s, 1);
                norm = PQgetvalue(states, s, 0);
            }
        bool requeued = false;
        for (int d = 0; d < PQntuples(done) && norm && !requeued; d++)
            requeued = !strcmp(PQgetvalue(done, d, 0), norm);
        if (requeued) {
            printf("requeued %s\n", norm);
        } else {
            failed++;
            if (state)
                printf("not requeued %s: it is %s, not QUARANTINED\n", ids[i], state);
            else
                printf("not requeued %s: no such event in %s.%s\n", ids[i], r.map.schema,
                       r.map.table);
        }
    }
    fflush(stdout);
    PQclear(done);
    PQclear(states);
    char *qch = polling_quote_ident(cfg->poll_notify_channel);
    char *notify = qch ? str_printf("NOTIFY %s", qch) : NULL;
    PGresult *nr = notify ? exec(&r, "NOTIFY", notify, 0, NULL, PGRES_COMMAND_OK) : NULL;
    PQclear(nr);
    free(qch);
    free(notify);
    code = failed ? EXIT_FATAL : EXIT_OK;
out:
    PQfinish(r.conn);
    r.conn = NULL;
    polling_sql_free(&r.sql);
    outbox_map_free(&r.map);
    return code;
}
