/*
 * metrics.c - counters and gauges in a struct; their Prometheus text.
 *
 * Format (https://prometheus.io/docs/instrumenting/exposition_formats/):
 * per family "# HELP name text" and "# TYPE name counter|gauge|histogram",
 * then "name{label="value"} number" lines. Label values escape '\', '"'
 * and newline; HELP text escapes '\' and newline. The relays seed the
 * label values they know in advance at 0 (metrics_seed()); a labelled
 * family with no sample yet is still announced (HELP and TYPE), so that
 * operators see it exists.
 */
#include "metrics.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

void metrics_init(struct metrics *m)
{
    memset(m, 0, sizeof(*m));
    m->kafka_brokers_up = -1;
}

static void counter_free(struct labeled_counter *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->items[i].label);
    free(c->items);
    memset(c, 0, sizeof(*c));
}

void metrics_free(struct metrics *m)
{
    counter_free(&m->produced);
    counter_free(&m->acked);
    counter_free(&m->failed);
    counter_free(&m->dead_lettered);
    counter_free(&m->reconnects);
    counter_free(&m->messages_ignored);
}

/* Index of label in c, or c->n. */
static size_t find(const struct labeled_counter *c, const char *label)
{
    if (c->last < c->n && strcmp(c->items[c->last].label, label) == 0) return c->last;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->items[i].label, label) == 0) return i;
    return c->n;
}

int metrics_count(struct labeled_counter *c, const char *label, uint64_t n)
{
    size_t i = find(c, label);
    if (i == c->n && c->n >= METRICS_MAX_LABELS - 1) { /* the last one is "_other" */
        label = "_other";
        i = find(c, label);
    }
    if (i == c->n) {
        if (grow_array((void **)&c->items, &c->cap, c->n + 1, sizeof(*c->items), 8) != 0)
            return -1;
        char *copy = strdup(label);
        if (!copy) return -1;
        c->items[c->n++] = (struct labeled_value){copy, 0};
    }
    c->items[i].value += n;
    c->last = i;
    return 0;
}

int metrics_seed(struct labeled_counter *c, const char *label)
{
    return metrics_count(c, label, 0);
}

uint64_t metrics_get(const struct labeled_counter *c, const char *label)
{
    size_t i = find(c, label);
    return i < c->n ? c->items[i].value : 0;
}

static const char *const wal_status_names[] = {"", "reserved", "extended", "unreserved",
                                               "lost"};

enum slot_wal_status metrics_wal_status_parse(const char *s)
{
    for (int i = WAL_STATUS_RESERVED; s && i <= WAL_STATUS_LOST; i++)
        if (strcmp(s, wal_status_names[i]) == 0) return (enum slot_wal_status)i;
    return WAL_STATUS_UNKNOWN;
}

/* ---- text ---------------------------------------------------------------- */

static void tb_reserve(struct textbuf *b, size_t more)
{
    if (b->oom || b->len + more + 1 <= b->cap) return;
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap < b->len + more + 1)
        ncap *= 2;
    char *d = realloc(b->data, ncap);
    if (!d) {
        b->oom = true;
        return;
    }
    b->data = d;
    b->cap = ncap;
}

static void tb_put(struct textbuf *b, const char *s, size_t n)
{
    tb_reserve(b, n);
    if (b->oom) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void tb_str(struct textbuf *b, const char *s)
{
    tb_put(b, s, strlen(s));
}

static void tb_printf(struct textbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void tb_printf(struct textbuf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof(small)) {
        tb_put(b, small, (size_t)n);
        return;
    }
    tb_reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A label value: '\', '"' and newline escaped; other control bytes and
 * bytes that are not printable ASCII (topic names are ASCII) as '?'. */
static void tb_label_value(struct textbuf *b, const char *v)
{
    for (; *v; v++) {
        unsigned char ch = (unsigned char)*v;
        if (ch == '\\' || ch == '"')
            tb_put(b, (const char[]){'\\', (char)ch}, 2);
        else if (ch == '\n')
            tb_str(b, "\\n");
        else if (ch < 0x20 || ch >= 0x7f)
            tb_str(b, "?");
        else
            tb_put(b, v, 1);
    }
}

static void family(struct textbuf *b, const char *name, const char *type, const char *help)
{
    tb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge_i(struct textbuf *b, const char *name, const char *help, int64_t v)
{
    family(b, name, "gauge", help);
    tb_printf(b, "%s %" PRId64 "\n", name, v);
}

static void gauge_u(struct textbuf *b, const char *name, const char *help, uint64_t v)
{
    family(b, name, "gauge", help);
    tb_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void counter_u(struct textbuf *b, const char *name, const char *help, uint64_t v)
{
    family(b, name, "counter", help);
    tb_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void counter_labeled(struct textbuf *b, const char *name, const char *label,
                            const char *help, const struct labeled_counter *c)
{
    family(b, name, "counter", help);
    for (size_t i = 0; i < c->n; i++) {
        tb_printf(b, "%s{%s=\"", name, label);
        tb_label_value(b, c->items[i].label);
        tb_printf(b, "\"} %" PRIu64 "\n", c->items[i].value);
    }
}

/* Microseconds as seconds with 6 decimals. */
static void seconds(struct textbuf *b, int64_t us)
{
    if (us < 0) {
        tb_str(b, "-");
        us = -us;
    }
    tb_printf(b, "%" PRId64 ".%06" PRId64, us / 1000000, us % 1000000);
}

static void render_info(const struct metrics *m, struct textbuf *b)
{
    family(b, "outboxd_build_info", "gauge",
           "Always 1; the labels say which outboxd, output plugin and slot.");
    tb_str(b, "outboxd_build_info{version=\"");
    tb_label_value(b, m->version ? m->version : "");
    tb_str(b, "\",plugin=\"");
    tb_label_value(b, m->plugin ? m->plugin : "");
    tb_str(b, "\",slot=\"");
    tb_label_value(b, m->slot ? m->slot : "");
    tb_str(b, "\"} 1\n");
    family(b, "outboxd_start_time_seconds", "gauge",
           "When the process started, in seconds since the Unix epoch.");
    tb_str(b, "outboxd_start_time_seconds ");
    seconds(b, m->start_time_us);
    tb_str(b, "\n");
}

static void render_events(const struct metrics *m, struct textbuf *b)
{
    counter_labeled(b, "outboxd_events_produced_total", "topic",
                    "Events handed to the Kafka producer, by topic (the dead-letter topic "
                    "included).",
                    &m->produced);
    counter_labeled(b, "outboxd_events_acked_total", "topic",
                    "Events the broker acknowledged, by topic.", &m->acked);
    counter_labeled(b, "outboxd_events_failed_total", "reason",
                    "Events that could not be published as they are, by reason (an "
                    "outbox row fault or librdkafka's error name).",
                    &m->failed);
    counter_labeled(b, "outboxd_events_dead_lettered_total", "reason",
                    "Events written to the dead-letter topic instead, by reason.",
                    &m->dead_lettered);
    counter_u(b, "outboxd_produced_bytes_total",
              "Key and value bytes of the events handed to the producer.",
              m->produced_bytes);
    gauge_u(b, "outboxd_inflight_events", "Events produced but not yet acknowledged.",
            m->inflight_events);
    if (m->mode == METRICS_LOGICAL)
        gauge_u(b, "outboxd_inflight_transactions",
                "Transactions received but not yet confirmable (open, or with events in "
                "flight).",
                m->inflight_txns);
    gauge_i(b, "outboxd_kafka_queue_messages",
            "Messages (and delivery reports or other events) in librdkafka's queue: "
            "waiting, in flight to the broker, or reported but not yet served.",
            m->kafka_queue);
    if (m->kafka_brokers_up >= 0)
        gauge_i(b, "outboxd_kafka_brokers_up",
                "Brokers librdkafka is connected to (state UP), as of its last "
                "statistics.",
                m->kafka_brokers_up);
    counter_u(b, "outboxd_kafka_unreachable_total",
              "librdkafka's reports of a broker not reached (_TRANSPORT, "
              "_ALL_BROKERS_DOWN, a failed connect), every one; the log folds them.",
              m->kafka_unreachable);
}

static void render_positions(const struct metrics *m, struct textbuf *b)
{
    gauge_u(b, "outboxd_received_lsn",
            "Newest WAL position received on the replication stream, as a number.",
            m->received_lsn);
    gauge_u(b, "outboxd_acked_lsn",
            "WAL position up to which every event is acknowledged by the broker, as "
            "a number.",
            m->acked_lsn);
    gauge_u(b, "outboxd_confirmed_lsn",
            "WAL position last confirmed to the server (flush position of the "
            "standby status), as a number.",
            m->confirmed_lsn);
    counter_u(b, "outboxd_offset_writes_total",
              "Writes of the offset file (each a write, fsync, rename and directory "
              "fsync on the event loop).",
              m->offset_writes);
    counter_u(b, "outboxd_events_skipped_total",
              "Outbox events not produced again after a restart because the offset file "
              "says the broker ACKed them (the first events of a transaction that was "
              "partly ACKed at the stop).",
              m->events_skipped);
    family(b, "outboxd_slot_lag_bytes", "gauge",
           "pg_current_wal_lsn() - confirmed_flush_lsn of the slot, as the server sees "
           "it (periodic query on a normal connection).");
    if (m->slot_seen)
        tb_printf(b, "outboxd_slot_lag_bytes %" PRId64 "\n", m->slot_lag_bytes);
    family(b, "outboxd_slot_wal_status", "gauge",
           "The slot's wal_status: 1 for the current one, 0 for the others.");
    if (m->slot_seen && m->slot_wal_status != WAL_STATUS_UNKNOWN)
        for (int i = WAL_STATUS_RESERVED; i <= WAL_STATUS_LOST; i++)
            tb_printf(b, "outboxd_slot_wal_status{status=\"%s\"} %d\n", wal_status_names[i],
                      (int)m->slot_wal_status == i);
    family(b, "outboxd_slot_failover", "gauge",
           "1 when the slot is a failover slot, synchronised to standbys with "
           "sync_replication_slots (PostgreSQL 17+), else 0.");
    if (m->slot_seen) tb_printf(b, "outboxd_slot_failover %d\n", m->slot_failover ? 1 : 0);
    counter_u(b, "outboxd_monitor_errors_total",
              "Failures of the monitoring connection (slot query, heartbeat): connect "
              "or query errors.",
              m->monitor_errors);
}

static void render_lag(const struct metrics *m, int64_t now_us, struct textbuf *b)
{
    family(b, "outboxd_replication_lag_seconds", "gauge",
           "Now minus the commit time of the newest transaction whose events were all "
           "acknowledged (absent before the first).");
    if (m->acked_commit_time_us > 0) {
        tb_str(b, "outboxd_replication_lag_seconds ");
        seconds(b, now_us - m->acked_commit_time_us);
        tb_str(b, "\n");
    }
}

const int64_t metrics_latency_bounds_us[METRICS_LATENCY_BOUNDS] = {
    1000,    2500,    5000,    10000,   25000,    50000,    100000,   250000,
    500000,  1000000, 2500000, 5000000, 10000000, 30000000, 60000000, 300000000,
};

/* One series of a histogram, labelled key="value": cumulative buckets from
 * latency_count_le(), +Inf, _sum and _count (exact). */
static void histogram_series(struct textbuf *b, const char *name, const char *key,
                             const char *value, const struct latency_hist *h)
{
    for (int i = 0; i < METRICS_LATENCY_BOUNDS; i++) {
        /* "0.0025", "1", "300": the shortest form of the bound */
        char le[32];
        int n = snprintf(le, sizeof(le), "%.6f", (double)metrics_latency_bounds_us[i] / 1e6);
        while (n > 1 && le[n - 1] == '0') le[--n] = '\0';
        if (n > 1 && le[n - 1] == '.') le[--n] = '\0';
        tb_printf(b, "%s_bucket{%s=\"%s\",le=\"%s\"} %" PRIu64 "\n", name, key, value, le,
                  latency_count_le(h, metrics_latency_bounds_us[i]));
    }
    tb_printf(b, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name, key, value,
              h->count);
    tb_printf(b, "%s_sum{%s=\"%s\"} ", name, key, value);
    seconds(b, (int64_t)h->sum_us);
    tb_printf(b, "\n%s_count{%s=\"%s\"} %" PRIu64 "\n", name, key, value, h->count);
}

const char *metrics_stage_name(enum metrics_stage s)
{
    static const char *const names[STAGE__COUNT] = {"commit-to-receive", "receive-to-produce",
                                                    "produce-to-ack", "ack-to-confirm"};
    return s >= 0 && s < STAGE__COUNT ? names[s] : "?";
}

static void render_latency(const struct metrics *m, struct textbuf *b)
{
    static const char name[] = "outboxd_commit_to_ack_seconds";
    family(b, name, "histogram",
           "source=\"event\": from a transaction's commit (server clock) to the broker's "
           "ACK of each of its events; source=\"heartbeat\": from writing a heartbeat "
           "to seeing it on the replication stream.");
    if (m->commit_to_ack) histogram_series(b, name, "source", "event", m->commit_to_ack);
    if (m->heartbeat_rtt) histogram_series(b, name, "source", "heartbeat", m->heartbeat_rtt);
}

static void render_stages(const struct metrics *m, struct textbuf *b)
{
    static const char name[] = "outboxd_stage_latency_seconds";
    family(b, name, "histogram",
           "The stages of commit-to-ACK and after, wall clock: commit-to-receive, from a "
           "transaction's commit (server clock) to the loop turn that read each of its "
           "events from the stream; receive-to-produce, from there to the end of the "
           "turn's reading that handed the event to librdkafka (held events wait in it); "
           "produce-to-ack, from there to the broker's ACK (per event, the times of its "
           "transaction's latest hand-over); ack-to-confirm, per transaction, from the ACK "
           "that made it confirmable to the standby status that confirmed it.");
    for (int i = 0; i < STAGE__COUNT; i++)
        if (m->stages[i])
            histogram_series(b, name, "stage", metrics_stage_name((enum metrics_stage)i),
                             m->stages[i]);
}

const char *metrics_role_name(enum metrics_role r)
{
    static const char *const names[ROLE__COUNT] = {"connecting", "active", "standby"};
    return r >= 0 && r < ROLE__COUNT ? names[r] : "?";
}

/* outboxd_role: one series per role, 1 for the current one. */
static void render_role(const struct metrics *m, struct textbuf *b)
{
    family(b, "outboxd_role", "gauge",
           "1 for this instance's role on the slot: active (streaming from it), standby "
           "(another process holds it; checked every second), connecting (anything "
           "else); 0 for the others.");
    for (int i = 0; i < ROLE__COUNT; i++)
        tb_printf(b, "outboxd_role{role=\"%s\"} %d\n", metrics_role_name((enum metrics_role)i),
                  m->role == (enum metrics_role)i);
}

static void render_state(const struct metrics *m, struct textbuf *b)
{
    counter_labeled(b, "outboxd_reconnects_total", "cause",
                    "Replication connection attempts after a failure, by cause.",
                    &m->reconnects);
    counter_u(b, "outboxd_heartbeats_sent_total",
              "Heartbeat messages written with pg_logical_emit_message().",
              m->heartbeats_sent);
    counter_u(b, "outboxd_heartbeats_received_total",
              "Heartbeat messages of this slot seen back on the replication stream.",
              m->heartbeats_seen);
    counter_labeled(b, "outboxd_messages_ignored_total", "reason",
                    "Messages with [outbox] message_prefix not published, by reason "
                    "(non_transactional: not atomic with the business change).",
                    &m->messages_ignored);
    gauge_i(b, "outboxd_streaming",
            "1 while streaming from the replication slot, 0 while (re)connecting.",
            m->streaming);
    render_role(m, b);
    gauge_i(b, "outboxd_slot_lost", "1 while halted because the replication slot is "
            "invalidated or missing (outboxd repair closes the gap), else 0.", m->slot_lost);
    if (m->slot_lost && m->slot_lost_reason && *m->slot_lost_reason) {
        /* one series while halted: why, as the server says it */
        family(b, "outboxd_slot_lost_reason", "gauge",
               "1 while halted on a lost slot, labelled with why: the server's "
               "invalidation_reason (wal_removed, idle_timeout, rows_removed, "
               "wal_level_insufficient; unknown before PostgreSQL 17) or dropped.");
        tb_printf(b, "outboxd_slot_lost_reason{reason=\"%s\"} 1\n", m->slot_lost_reason);
    }
    gauge_i(b, "outboxd_ready", "1 when /readyz answers 200, else 0.", m->ready);
}

/* The schema registry client's counters; none without a registry. */
static void render_registry(const struct metrics *m, struct textbuf *b)
{
    if (!m->registry_on) return;
    const struct registry_stats *s = &m->registry;
    family(b, "outboxd_registry_lookups_total", "counter",
           "Schema lookups by result: hit (answered by the cache), fetched (an HTTP lookup "
           "found the schema), failed (an HTTP lookup failed: registry unreachable, error "
           "answer, or the subject or version missing).");
    tb_printf(b, "outboxd_registry_lookups_total{result=\"hit\"} %" PRIu64 "\n", s->hits);
    tb_printf(b, "outboxd_registry_lookups_total{result=\"fetched\"} %" PRIu64 "\n",
              s->requests_ok);
    tb_printf(b, "outboxd_registry_lookups_total{result=\"failed\"} %" PRIu64 "\n",
              s->requests_failed);
    counter_u(b, "outboxd_registry_not_found_total",
              "HTTP lookups whose subject or version does not exist in the registry.",
              s->not_found);
    gauge_i(b, "outboxd_registry_subjects", "Subject versions in the schema cache.",
            s->subjects);
}

/* One gauge of the backlog by status ("pending", "claimed", "quarantined"). */
static void backlog_gauge(struct textbuf *b, const char *name, const char *help,
                          const struct polling_backlog *q, const int64_t *v, bool as_seconds)
{
    static const char *const status[PS__COUNT] = {"pending", "claimed", "quarantined"};
    family(b, name, "gauge", help);
    for (int s = 0; q->seen && s < PS__COUNT; s++) {
        tb_printf(b, "%s{status=\"%s\"} ", name, status[s]);
        if (as_seconds)
            seconds(b, v[s] * 1000);
        else
            tb_printf(b, "%" PRId64, v[s]);
        tb_str(b, "\n");
    }
}

/* The backlog query's answer (pollbacklog.h); no samples before the first. */
static void render_backlog(const struct polling_backlog *q, struct textbuf *b)
{
    backlog_gauge(b, "outboxd_polling_backlog_rows",
                  "Polling mode: undelivered outbox rows by status (periodic query).", q,
                  q->rows, false);
    backlog_gauge(b, "outboxd_polling_backlog_oldest_age_seconds",
                  "Polling mode: now() - created_at of the oldest undelivered row of each "
                  "status, server clock (0 when there is none).",
                  q, q->oldest_ms, true);
    backlog_gauge(b, "outboxd_polling_backlog_max_attempts",
                  "Polling mode: the most failed delivery attempts of an undelivered row of "
                  "each status.",
                  q, q->max_attempts, false);
    family(b, "outboxd_polling_table_bytes", "gauge",
           "Polling mode: pg_total_relation_size() of the outbox table (table, indexes, "
           "TOAST; SENT rows until retention deletes them).");
    if (q->seen) tb_printf(b, "outboxd_polling_table_bytes %" PRId64 "\n", q->table_bytes);
}

static void render_polling(const struct metrics *m, struct textbuf *b)
{
    static const char *const names[PO__COUNT] = {"claimed",     "sent",     "retried",
                                                 "quarantined", "released", "stale"};
    family(b, "outboxd_polling_rows_total", "counter",
           "Polling mode: outbox rows claimed, and the outcomes written back (sent, "
           "retried later, quarantined, released at stop, stale: the lease was lost).");
    for (int i = 0; i < PO__COUNT; i++)
        tb_printf(b, "outboxd_polling_rows_total{outcome=\"%s\"} %" PRIu64 "\n", names[i],
                  m->polling_rows[i]);
    render_backlog(&m->backlog, b);
    gauge_i(b, "outboxd_polling_connected", "Polling mode: 1 while connected to the database.",
            m->streaming);
    gauge_i(b, "outboxd_ready", "1 when /readyz answers 200, else 0.", m->ready);
}

int metrics_render(const struct metrics *m, int64_t now_us, struct textbuf *out)
{
    render_info(m, out);
    render_events(m, out);
    if (m->mode == METRICS_POLLING) {
        render_polling(m, out);
        render_registry(m, out);
        return out->oom ? -1 : 0;
    }
    render_positions(m, out);
    render_lag(m, now_us, out);
    render_latency(m, out);
    render_stages(m, out);
    render_state(m, out);
    render_registry(m, out);
    return out->oom ? -1 : 0;
}
