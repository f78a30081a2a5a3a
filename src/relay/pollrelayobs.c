/*
 * pollrelayobs.c - the polling relay's observability (pollrelay_int.h): readiness,
 * the metrics published for /metrics, and the periodic backlog query.
 */
#include "pollrelay_int.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "pgconn.h"
#include "registry.h"
#include "signals.h"

/* Between two backlog queries (the metrics; not per batch: the query reads
 * every undelivered row). */
#define BACKLOG_INTERVAL_MS 15000

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
void pr_tick(struct pr *r, int64_t now)
{
    signals_service(); /* SIGHUP, SIGUSR1/2: signals.h */
    if (!httpd_tick(r->http, now, r->next_publish_ms)) return;
    struct metrics *m = &r->met;
    m->inflight_events = r->st.inflight;
    m->kafka_queue = producer_outq_len(r->prod);
    m->kafka_brokers_up = producer_brokers_up(r->prod);
    m->kafka_unreachable = producer_unreachable_total(r->prod);
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

/* The metrics' fixed part: mode, version, the delivery errors it can count
 * at 0 from the start (metrics_seed(); row faults are quarantined, not
 * counted as failed), the start time. */
void pr_metrics_setup(struct pr *r)
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
void pr_query_backlog(struct pr *r, int64_t now)
{
    r->st.next_backlog_ms = now + BACKLOG_INTERVAL_MS;
    PGresult *res = PQexec(r->conn, r->backlog_sql);
    pr_drain_notifies(r);
    char err[1024] = "";
    struct polling_backlog b = {.seen = true};
    int rc = backlog_read(r, res, &b, err, sizeof(err));
    PQclear(res);
    if (PQstatus(r->conn) == CONNECTION_BAD) {
        char why[1100];
        snprintf(why, sizeof(why), "backlog query: %s", err);
        pr_disconnect(r, why);
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
