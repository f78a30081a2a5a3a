/*
 * relay.c - the event loop.
 *
 *   replication socket --frames--> decoder --inserts--> outbox map
 *        ^                                                  |
 *        | status (flush LSN)                               v
 *   offset file <-- tracker <--delivery reports-- producer (librdkafka)
 *
 * One thread. The loop reads what the socket has (in bounded batches),
 * produces outbox events as they stream, serves delivery reports, and
 * sends a standby status update at least every status_interval_ms and at
 * once when the server asks for a reply: the walsender drops a client that
 * stays silent for wal_sender_timeout, even while outboxd is waiting for
 * the broker (backpressure), so the status path never depends on reading.
 */
#include "relay.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "backoff.h"
#include "check.h"
#include "connerr.h"
#include "confirm.h"
#include "decoder.h"
#include "exitcode.h"
#include "httpd.h"
#include "latency.h"
#include "log.h"
#include "metrics.h"
#include "monitor.h"
#include "offset.h"
#include "outbox.h"
#include "producer.h"
#include "replproto.h"
#include "resume.h"
#include "signals.h"
#include "stream.h"
#include "tracker.h"

/* Minimum time between two wake-ups of the loop (see wait_io()): while
 * the stream is live, and while it is a backlog, which a wake-up that
 * found at least BACKLOG_BYTES of it says it is. */
#define WAKE_GAP_US 1000
#define WAKE_GAP_BACKLOG_US 10000
#define BACKLOG_BYTES 65536

/* A replication stream is healthy once it has stayed up this long; until
 * then, after a failure, the relay is not ready and the reconnect backoff
 * keeps growing (a stream that starts and fails at once is a failure,
 * not a recovery). */
#define STREAM_HEALTHY_MS 5000

/* How long a graceful stop waits for a last publication check (pgoutput),
 * so that it can confirm what it ACKed. */
#define FINAL_PROOF_MS 3000

/* Frames handled before the loop serves reports and status again. */
#define READ_BATCH 4096

/* Outcome of a step of the stream loop. */
#define STEP_OK 0
#define STEP_STOP 1      /* SIGTERM/SIGINT seen */
#define STEP_FATAL (-1)  /* exit 1: nothing to retry */
#define STEP_BROKEN (-3) /* the replication connection failed: reconnect */
#define STEP_REFUSED (-4) /* exit 2: the brokers refuse outboxd's security settings */

struct relay {
    const struct config *cfg;
    volatile sig_atomic_t *stop;
    struct outbox_map map;
    struct decoder *dec;
    struct tracker *trk;
    struct producer *prod;
    struct stream *st;

    uint64_t cur_seq;        /* open transaction, 0 if none */
    lsn_t cur_commit_lsn;    /* its commit record LSN (Begin final_lsn) */
    struct confirmer confirm; /* every LSN kept, the offset file, the status */
    int64_t last_wake_us;    /* when wait_io() last returned */
    size_t wake_bytes;       /* stream bytes read since then */
    uint64_t events_produced;
    uint64_t events_acked;
    struct latency_hist commit_to_ack; /* per ACKed event, microseconds */
    struct latency_hist heartbeat_rtt; /* heartbeat written to seen, us */
    struct pending_dlq *dlq_pending; /* failed deliveries to dead-letter */
    size_t dlq_max_value;            /* value bytes kept when truncating */
    bool streaming;                  /* START_REPLICATION done, not broken since */
    struct httpd *http;              /* NULL when [http] listen is empty */
    int64_t next_publish_ms;         /* monotonic deadline of the next snapshot */
    struct metrics met;              /* counted here, rendered for /metrics */
    struct textbuf text;             /* the rendering, reused */
    const char *retry_cause;         /* why open_stream() said RETRY_LATER */
    struct monitor *mon;             /* slot lag, heartbeats, publication check */
    struct backoff backoff;          /* reconnects, across streams that keep failing */
    int64_t stream_up_ms;            /* when the current stream started */
    uint64_t proofs;                 /* publication checks answered */
    bool pub_lost;                   /* the outbox is no longer published: stop */
    bool pub_missing_on_stream;      /* the stream said the publication is missing */
    bool pub_missing_warned;         /* ... and so did the publication check */
    bool server_stopping;            /* the monitor saw the server shut down */
    char stream_err[512];            /* why the last stream broke */
};

/* Microseconds between 2000-01-01 00:00 UTC (Postgres' epoch) and 1970's. */
#define PG_EPOCH_OFFSET_US 946684800000000LL

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- observability -------------------------------------------------------
 * The loop beats on every turn and publishes a snapshot for the HTTP
 * server's thread every PUBLISH_MS (see httpd.h); relay_tick() is called
 * from every loop that can run for a while, the waiting ones included. */

#define PUBLISH_MS 500

static int64_t now_unix_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* Why the relay is not ready, or NULL when it is. */
static const char *not_ready_reason(const struct relay *r)
{
    if (*r->stop) return "shutting down";
    if (r->trk && tracker_failed(r->trk)) return "an event failed: stopping";
    if (r->pub_lost) return "the outbox table is no longer published: stopping";
    if (!r->streaming) return "not streaming from the replication slot (connecting)";
    if (r->backoff.failures > 0)
        return "the replication stream keeps failing (not yet up for 5 s since the last "
               "failure)";
    int up = producer_brokers_up(r->prod);
    if (up < 0) return "Kafka broker state not known yet (librdkafka statistics)";
    if (up == 0) return "no Kafka broker reachable";
    return NULL;
}

/* Fills the gauges of r->met from the modules that own the values. */
static void collect_gauges(struct relay *r)
{
    struct metrics *m = &r->met;
    m->inflight_events = r->trk ? tracker_pending_events(r->trk) : 0;
    m->inflight_txns = r->trk ? tracker_pending_txns(r->trk) : 0;
    m->kafka_queue = producer_outq_len(r->prod);
    m->kafka_brokers_up = producer_brokers_up(r->prod);
    m->received_lsn = r->confirm.received_lsn;
    m->acked_lsn = r->trk ? tracker_flush_lsn(r->trk) : r->confirm.stored_lsn;
    m->confirmed_lsn = r->confirm.sent_lsn;
    m->streaming = r->streaming;
    int64_t t = r->trk ? tracker_flushed_commit_time(r->trk) : 0;
    m->acked_commit_time_us = t ? t + PG_EPOCH_OFFSET_US : 0;
}

static void publish(struct relay *r, int64_t now)
{
    collect_gauges(r);
    httpd_publish_metrics(r->http, &r->met, &r->text, now_unix_us(), not_ready_reason(r));
    r->next_publish_ms = now + PUBLISH_MS;
}

/* The outbox table left the publication (or it stopped publishing inserts):
 * pgoutput skips its inserts from the change on, without a word. */
static void publication_lost(struct relay *r, const struct monitor_report *rep)
{
    const struct config *c = r->cfg;
    char a[LSN_STRLEN], b[LSN_STRLEN], fix[512];
    r->pub_lost = true;
    r->next_publish_ms = 0; /* not ready: say so at once */
    metrics_count(&r->met.failed, "NOT_IN_PUBLICATION", 1);
    if (rep->pub_member)
        snprintf(fix, sizeof(fix), "ALTER PUBLICATION %s SET (publish = 'insert')",
                 c->pg_publication);
    else
        snprintf(fix, sizeof(fix), "ALTER PUBLICATION %s ADD TABLE %s", c->pg_publication,
                 c->outbox_table);
    lsn_format(r->confirm.proven_lsn, a);
    lsn_format(rep->pub_lsn, b);
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", a}),
           "the outbox table %s.%s is no longer published by publication \"%s\" (%s): "
           "pgoutput skips its inserts, so events committed after %s (the last position "
           "where membership was proven; found out at %s) may be missing from Kafka. The "
           "slot is not confirmed past %s. Stopping. Fix: %s; pgoutput will not send the "
           "events committed while the table was out of the publication even then (it "
           "decodes each change with the catalog of its time): list them with outboxd "
           "verify and insert them again",
           r->map.schema, r->map.table, c->pg_publication,
           rep->pub_member ? "it no longer publishes inserts"
                           : "the table was removed from it",
           a, b, a, fix);
}

/* A publication check answered: membership proven up to rep->pub_lsn, or
 * lost. A missing publication proves nothing (the stream itself fails on
 * it, see prepare_stream()). */
static void on_publication_check(struct relay *r, const struct monitor_report *rep)
{
    r->proofs++;
    if (!r->confirm.pub_capped || r->pub_lost) return;
    if (!rep->pub_found) {
        if (!r->pub_missing_warned)
            log_warn("publication \"%s\" does not exist (publication check): nothing is "
                     "confirmed until it does",
                     r->cfg->pg_publication);
        r->pub_missing_warned = true;
        return;
    }
    r->pub_missing_warned = false;
    if (!rep->pub_insert || !rep->pub_member) {
        publication_lost(r, rep);
        return;
    }
    confirmer_proven(&r->confirm, rep->pub_lsn);
}

/* Steps the monitoring connection and counts what it found. */
static void monitor_tick(struct relay *r, int64_t now)
{
    struct monitor_report rep;
    monitor_step(r->mon, now, now_unix_us(), &rep);
    struct metrics *m = &r->met;
    if (rep.slot_answer) {
        m->slot_seen = rep.slot_found && rep.lag_bytes >= 0;
        m->slot_lag_bytes = rep.lag_bytes;
        m->slot_wal_status = metrics_wal_status_parse(rep.wal_status);
    }
    if (rep.heartbeat_sent) m->heartbeats_sent++;
    if (rep.failed) m->monitor_errors++;
    if (rep.pub_answer) on_publication_check(r, &rep);
    if (rep.server_stopping && r->confirm.pub_capped) r->server_stopping = true;
}

static void relay_tick(struct relay *r)
{
    signals_service(); /* SIGHUP, SIGUSR1/2: signals.h */
    int64_t now = now_ms();
    if (r->mon) monitor_tick(r, now);
    if (!r->http) return;
    httpd_beat(r->http, now);
    if (now >= r->next_publish_ms) publish(r, now);
}

/* A heartbeat of ours came back on the stream: its round trip. */
static void on_heartbeat(struct relay *r, int64_t sent_us)
{
    r->met.heartbeats_seen++;
    latency_record(&r->heartbeat_rtt, now_unix_us() - sent_us);
}

/* ---- delivery reports ---------------------------------------------------- */

/* A slice as a NUL-terminated string for a log field ("" when NULL). */
static const char *field_text(const char *data, size_t len, char *out, size_t outlen)
{
    snprintf(out, outlen, "%.*s", data ? (int)len : 0, data ? data : "");
    return out;
}

static void queue_dead_letter(struct relay *r, const struct delivery_report *dr);

static void on_delivery(void *ctx, const struct delivery_report *dr)
{
    struct relay *r = ctx;
    if (dr->err == 0) {
        r->events_acked++;
        metrics_count(&r->met.acked, dr->topic, 1);
        int64_t commit_time = tracker_commit_time(r->trk, dr->seq);
        if (commit_time != 0)
            latency_record(&r->commit_to_ack,
                           dr->served_unix_us - PG_EPOCH_OFFSET_US - commit_time);
        if (tracker_ack(r->trk, dr->seq) < 0)
            log_error("internal: delivery report for transaction %llu with no pending "
                      "event",
                      (unsigned long long)dr->seq);
        return;
    }
    bool to_dlq = strcmp(dr->topic, r->cfg->errors_dlq_topic) == 0;
    bool missing = producer_err_is_missing_topic(dr->err);
    if (!to_dlq && !missing && r->cfg->errors_policy == ERRORS_DLQ &&
        producer_err_is_poison(dr->err)) {
        metrics_count(&r->met.failed, producer_err_name(dr->err), 1);
        queue_dead_letter(r, dr); /* still pending until the DLQ write is ACKed */
        return;
    }
    tracker_fail(r->trk, dr->seq);
    if (!to_dlq) metrics_count(&r->met.failed, producer_err_name(dr->err), 1);
    char id[128], lsn[LSN_STRLEN + 8];
    log_kv(
        LOG_ERROR,
        LOG_FIELDS(
            {"event_id", field_text(dr->event_id.data, dr->event_id.len, id, sizeof(id))},
            {"lsn", field_text(dr->commit_lsn.data, dr->commit_lsn.len, lsn, sizeof(lsn))}),
        "delivery of event %.*s (commit_lsn %.*s) to topic %s failed: %s: %s; "
        "stopping without confirming past it%s%s%s",
        (int)dr->event_id.len, dr->event_id.data ? dr->event_id.data : "?",
        (int)dr->commit_lsn.len, dr->commit_lsn.data ? dr->commit_lsn.data : "?", dr->topic,
        producer_err_name(dr->err), dr->reason,
        missing ? " (under either [errors] policy: the topic does not exist and the broker "
                  "did not create it; create topic "
                : "",
        missing ? dr->topic : "",
        missing ? ", then start outboxd again: it resumes at this event)" : "");
}

/* ---- status --------------------------------------------------------------
 * confirm.h decides and does the work; these say what the relay sees. */

/* What the confirmer reads now: the tracker, the ACK count, the stream,
 * the clock. */
static struct confirm_view confirm_view(const struct relay *r)
{
    return (struct confirm_view){.acked = tracker_flush_lsn(r->trk),
                                 .idle = tracker_idle(r->trk),
                                 .events_acked = r->events_acked,
                                 .pending_events = tracker_pending_events(r->trk),
                                 .pending_txns = tracker_pending_txns(r->trk),
                                 .connected = r->st != NULL,
                                 .now_ms = now_ms()};
}

/* Writes the offset file when due, then confirms it to the server
 * (confirmer_status()). force: store the position now (stop, reconnect,
 * fatal error). Returns a STEP_* code. */
static int send_status_ex(struct relay *r, bool reply, bool force)
{
    struct confirm_view v = confirm_view(r);
    int rc = confirmer_status(&r->confirm, &v, reply, force);
    r->met.offset_writes = r->confirm.offset_writes;
    return rc == CONFIRM_OK ? STEP_OK : rc == CONFIRM_BROKEN ? STEP_BROKEN : STEP_FATAL;
}

static int send_status(struct relay *r, bool reply)
{
    return send_status_ex(r, reply, false);
}

/* When the next status is due (monotonic ms; confirmer_deadline()). */
static int64_t status_deadline(const struct relay *r)
{
    struct confirm_view v = confirm_view(r);
    return confirmer_deadline(&r->confirm, &v);
}

static int status_if_due(struct relay *r)
{
    return now_ms() >= status_deadline(r) ? send_status(r, false) : STEP_OK;
}

/* ---- changes ------------------------------------------------------------- */

/* Enqueues ev under seq, waiting while librdkafka's queue is full. While
 * it waits, nothing is read from the replication socket (backpressure), but
 * delivery reports are served and status updates keep the connection
 * alive. Returns a STEP_* code; on a permanent produce error returns
 * STEP_FATAL with librdkafka's code in *kafka_err (-1 when the error is
 * not the producer's) and the reason in err. */
static int send_waiting(struct relay *r, const struct outbox_event *ev, uint64_t seq,
                        int *kafka_err, char *err, size_t errlen)
{
    for (;;) {
        int rc = producer_send(r->prod, ev, seq, kafka_err, err, errlen);
        if (rc == PRODUCER_OK) return STEP_OK;
        if (rc == PRODUCER_ERROR) return STEP_FATAL;
        producer_poll(r->prod, 100);
        *kafka_err = -1;
        snprintf(err, errlen, "stopped while waiting for the producer queue");
        if (tracker_failed(r->trk) || r->pub_lost) return STEP_FATAL;
        relay_tick(r);
        int st = status_if_due(r);
        if (st != STEP_OK) return st;
        if (*r->stop) return STEP_STOP;
    }
}

/* ---- dead letters ---------------------------------------------------------
 * Under [errors] policy = dlq an event that can never be published as it is
 * goes to the DLQ topic instead, with its key and value and headers saying
 * why. It stays pending in the tracker until the DLQ write is ACKed, so the
 * slot never moves past an event that is in neither place. */

/* What to dead-letter; slices borrowed or owned as the caller says. */
struct dead_letter {
    uint64_t seq;
    struct slice key, value, event_id;
    bool key_null, value_null;
    char topic[OUTBOX_TOPIC_MAX]; /* original topic, "" if none */
    char topic_error[OUTBOX_TOPIC_ERROR_MAX]; /* why topic is "" */
    /* The original record's headers, as the normal path built them. */
    int nheaders;
    struct outbox_header headers[OUTBOX_ROW_HEADERS];
    char reason[256];
    char code[64];
    char commit_lsn[LSN_STRLEN];
    char record_lsn[LSN_STRLEN]; /* a record that could not be decoded: its LSN */
    bool too_large; /* the value itself is what is too large */
};

/* "event <id>" ("(NULL)" or "\"\"" for a NULL or empty one), into out. */
static const char *event_label(const struct slice *event_id, char *out, size_t outlen)
{
    if (!event_id->data)
        snprintf(out, outlen, "event (NULL)");
    else if (event_id->len == 0)
        snprintf(out, outlen, "event \"\"");
    else
        snprintf(out, outlen, "event %.*s", (int)event_id->len, event_id->data);
    return out;
}

/* event_label(), or "<CODE> record at <LSN>" for a record that could not be
 * decoded, into out. */
static const char *dead_letter_label(const struct dead_letter *d, char *out, size_t outlen)
{
    if (!d->record_lsn[0]) return event_label(&d->event_id, out, outlen);
    snprintf(out, outlen, "%s record at %s", d->code, d->record_lsn);
    return out;
}

/* Headroom for key and headers when a too-large value is truncated. */
#define DLQ_HEADROOM 16384

static int dead_letter_send(struct relay *r, const struct dead_letter *d)
{
    char err[512], len_text[32];
    int kafka_err = -1;
    struct outbox_event ev;
    memset(&ev, 0, sizeof(ev));
    snprintf(ev.topic, sizeof(ev.topic), "%s", r->cfg->errors_dlq_topic);
    ev.key = d->key;
    ev.key_null = d->key_null;
    ev.value = d->value;
    ev.value_null = d->value_null;
    ev.event_id = d->event_id;
    if (d->too_large && ev.value.len > r->dlq_max_value) {
        snprintf(len_text, sizeof(len_text), "%zu", ev.value.len);
        ev.value.len = r->dlq_max_value;
    } else {
        len_text[0] = '\0';
    }
    outbox_dlq_headers(&ev, d->headers, d->nheaders,
                       &(struct outbox_dlq){.topic = d->topic,
                                            .topic_error = d->topic_error,
                                            .reason = d->reason,
                                            .code = d->code,
                                            .record_lsn = d->record_lsn,
                                            .truncated_from = len_text});

    int rc = send_waiting(r, &ev, d->seq, &kafka_err, err, sizeof(err));
    char id[128], label[160];
    const struct log_field *fields = LOG_FIELDS(
        {"event_id", field_text(d->event_id.data, d->event_id.len, id, sizeof(id))},
        {"lsn", d->commit_lsn});
    dead_letter_label(d, label, sizeof(label));
    if (rc == STEP_FATAL) {
        tracker_fail(r->trk, d->seq);
        log_kv(LOG_ERROR, fields,
               "%s (commit_lsn %s): the dead-letter write failed too (%s); "
               "stopping without confirming past it",
               label, d->commit_lsn, err);
        return STEP_FATAL;
    }
    if (rc == STEP_OK) {
        metrics_count(&r->met.produced, r->cfg->errors_dlq_topic, 1);
        r->met.produced_bytes +=
            (d->key_null ? 0 : d->key.len) + (d->value_null ? 0 : ev.value.len);
        metrics_count(&r->met.dead_lettered, d->code, 1);
    }
    if (rc == STEP_OK)
        log_kv(LOG_WARN, fields, "%s (commit_lsn %s) dead-lettered to %s: %s: %s", label,
               d->commit_lsn, r->cfg->errors_dlq_topic, d->code, d->reason);
    return rc;
}

/* Halts on a bad event: logs it, freezes the tracker before it. */
static int halt_on(struct relay *r, uint64_t seq, const struct slice *event_id,
                   const char *commit_lsn, const char *code, const char *reason)
{
    tracker_fail(r->trk, seq);
    char id[128], label[160];
    log_kv(
        LOG_ERROR,
        LOG_FIELDS({"event_id", field_text(event_id->data, event_id->len, id, sizeof(id))},
                   {"lsn", commit_lsn}),
        "%s (commit_lsn %s) cannot be published: %s: %s; stopping without "
        "confirming past it ([errors] policy = %s)",
        event_label(event_id, label, sizeof(label)), commit_lsn, code, reason,
        r->cfg->errors_policy == ERRORS_DLQ ? "dlq" : "halt");
    return STEP_FATAL;
}

/* Dead-letters or halts on the outbox event ev that failed with code. */
static int reject(struct relay *r, const struct outbox_event *ev, const char *code,
                  const char *reason, bool poison, bool too_large)
{
    metrics_count(&r->met.failed, code, 1);
    if (r->cfg->errors_policy != ERRORS_DLQ || !poison)
        return halt_on(r, r->cur_seq, &ev->event_id, ev->commit_lsn, code, reason);
    struct dead_letter d = {.seq = r->cur_seq,
                            .key = ev->key,
                            .value = ev->value,
                            .event_id = ev->event_id,
                            .key_null = ev->key_null,
                            .value_null = ev->value_null,
                            .too_large = too_large};
    snprintf(d.topic, sizeof(d.topic), "%s", ev->topic);
    snprintf(d.topic_error, sizeof(d.topic_error), "%s", ev->topic_error);
    d.nheaders = ev->nheaders < OUTBOX_ROW_HEADERS ? ev->nheaders : OUTBOX_ROW_HEADERS;
    memcpy(d.headers, ev->headers, (size_t)d.nheaders * sizeof(d.headers[0]));
    snprintf(d.reason, sizeof(d.reason), "%s", reason);
    snprintf(d.code, sizeof(d.code), "%s", code);
    snprintf(d.commit_lsn, sizeof(d.commit_lsn), "%s", ev->commit_lsn);
    return dead_letter_send(r, &d);
}

/* ---- records that cannot be decoded --------------------------------------
 * A wal2json record that is not valid JSON (a SQL_ASCII database stores any
 * bytes, and wal2json copies them into its strings as they are) or not the
 * JSON expected. A change record inside a transaction is one bad event of
 * it: under policy = dlq its raw bytes go to the DLQ as an event of that
 * transaction (pending until the write is ACKed, so the slot never moves
 * past a record that is in neither place), and streaming goes on; the
 * decoder kept its state as it was. A record that opens or closes a
 * transaction, or comes outside one, cannot be set aside without losing
 * track of where transactions end: stop. A pgoutput message that does not
 * decode is a protocol error (pgoutput sends text as it is stored, so bad
 * UTF-8 does not make one): stop too. Both stops name the record's LSN. */
#define INVALID_RECORD "INVALID_RECORD"

/* Stops on a record that cannot be set aside. Returns STEP_FATAL. */
static int halt_on_stream_record(struct relay *r, const char *at, const char *why)
{
    char commit[LSN_STRLEN], what[224];
    bool wal2json = plugin_parse(r->cfg->pg_plugin) == PLUGIN_WAL2JSON;
    if (r->cur_seq) tracker_fail(r->trk, r->cur_seq);
    if (!wal2json)
        snprintf(what, sizeof(what), "a protocol error");
    else if (r->cur_seq)
        snprintf(what, sizeof(what),
                 "it is no change of the open transaction (commit_lsn %s) but a begin or "
                 "commit record, or one whose action cannot be read, so it cannot be "
                 "dead-lettered",
                 lsn_format(r->cur_commit_lsn, commit));
    else
        snprintf(what, sizeof(what),
                 "it is outside any transaction, so it cannot be attributed to one or "
                 "dead-lettered");
    if (wal2json) metrics_count(&r->met.failed, INVALID_RECORD, 1);
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", at}),
           "%s %s at LSN %s cannot be decoded: %s; %s; stopping without confirming "
           "past it",
           r->cfg->pg_plugin, wal2json ? "record" : "message", at, why, what);
    return STEP_FATAL;
}

/* A frame whose payload the decoder refused with why. Returns a STEP_*
 * code. */
static int on_bad_record(struct relay *r, const struct repl_frame *f, const char *why)
{
    char at[LSN_STRLEN];
    lsn_format(f->data_start, at);
    if (r->cur_seq == 0 || decoder_failure(r->dec, f->data, f->len) != DF_CHANGE)
        return halt_on_stream_record(r, at, why);
    metrics_count(&r->met.failed, INVALID_RECORD, 1);
    if (tracker_event_sent(r->trk, r->cur_seq) != 0) return STEP_FATAL;
    struct dead_letter d = {.seq = r->cur_seq,
                            .key_null = true,
                            .value = {f->data, f->len},
                            .too_large = true /* truncated when it is */};
    snprintf(d.reason, sizeof(d.reason), "%.*s", (int)sizeof(d.reason) - 1, why);
    snprintf(d.code, sizeof(d.code), "%s", INVALID_RECORD);
    snprintf(d.topic_error, sizeof(d.topic_error),
             "the record could not be decoded, so it has no row to render the topic from");
    lsn_format(r->cur_commit_lsn, d.commit_lsn);
    d.headers[d.nheaders++] =
        (struct outbox_header){"commit_lsn", {d.commit_lsn, strlen(d.commit_lsn)}};
    snprintf(d.record_lsn, sizeof(d.record_lsn), "%s", at);
    if (r->cfg->errors_policy == ERRORS_DLQ) return dead_letter_send(r, &d);
    tracker_fail(r->trk, r->cur_seq);
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", at}),
           "%s record at LSN %s (commit_lsn %s) cannot be decoded: %s: %s; stopping "
           "without confirming past it ([errors] policy = halt). To get past it: set "
           "[errors] policy = dlq and restart (the record goes to %s with its LSN); or, "
           "accepting the loss of that whole transaction, move the slot past its commit "
           "with SELECT pg_replication_slot_advance('%s', '%s'::pg_lsn + 1) while outboxd "
           "is stopped, then run outboxd accept-slot -c FILE",
           r->cfg->pg_plugin, at, d.commit_lsn, INVALID_RECORD, why,
           r->cfg->errors_dlq_topic, r->cfg->pg_slot, d.commit_lsn);
    return STEP_FATAL;
}

/* Delivery failures reported inside producer_poll() cannot be re-produced
 * there (the queue may be full, and polling from the callback would
 * recurse): they are copied here and dead-lettered from the loop. */
struct pending_dlq {
    struct dead_letter d;
    char *buf; /* owns key, value and event_id bytes; freed after the send */
    struct pending_dlq *next;
};

static void queue_dead_letter(struct relay *r, const struct delivery_report *dr)
{
    int nh = dr->nheaders < OUTBOX_ROW_HEADERS ? dr->nheaders : OUTBOX_ROW_HEADERS;
    size_t n = dr->key.len + dr->value.len + dr->event_id.len;
    for (int i = 0; i < nh; i++)
        n += strlen(dr->headers[i].name) + 1 + dr->headers[i].value.len;
    struct pending_dlq *p = calloc(1, sizeof(*p));
    char *buf = malloc(n ? n : 1);
    if (!p || !buf) {
        free(p);
        free(buf);
        tracker_fail(r->trk, dr->seq);
        log_error("out of memory while dead-lettering; stopping");
        return;
    }
    struct dead_letter *d = &p->d;
    char *q = buf;
    memcpy(q, dr->key.data, dr->key.len);
    d->key = (struct slice){q, dr->key.len};
    q += dr->key.len;
    if (dr->value.len) memcpy(q, dr->value.data, dr->value.len);
    d->value = (struct slice){q, dr->value.len};
    q += dr->value.len;
    if (dr->event_id.data) {
        memcpy(q, dr->event_id.data, dr->event_id.len);
        d->event_id = (struct slice){q, dr->event_id.len};
        q += dr->event_id.len;
    }
    for (int i = 0; i < nh; i++) { /* every header of the original record */
        const struct outbox_header *h = &dr->headers[i];
        size_t nlen = strlen(h->name) + 1;
        memcpy(q, h->name, nlen);
        d->headers[i].name = q;
        q += nlen;
        if (h->value.len) memcpy(q, h->value.data, h->value.len);
        d->headers[i].value = (struct slice){h->value.data ? q : NULL, h->value.len};
        q += h->value.len;
    }
    d->nheaders = nh;
    d->seq = dr->seq;
    d->key_null = dr->key_null;
    d->value_null = dr->value_null;
    d->too_large = dr->err == 10 /* MSG_SIZE_TOO_LARGE */;
    snprintf(d->topic, sizeof(d->topic), "%s", dr->topic);
    snprintf(d->reason, sizeof(d->reason), "%s", dr->reason);
    snprintf(d->code, sizeof(d->code), "%s", producer_err_name(dr->err));
    snprintf(d->commit_lsn, sizeof(d->commit_lsn), "%.*s", (int)dr->commit_lsn.len,
             dr->commit_lsn.data ? dr->commit_lsn.data : "");
    p->buf = buf;
    p->next = r->dlq_pending;
    r->dlq_pending = p;
}

/* Sends what queue_dead_letter() collected. Returns a STEP_* code. */
static int flush_dead_letters(struct relay *r)
{
    int rc = STEP_OK;
    while (r->dlq_pending && rc == STEP_OK) {
        struct pending_dlq *p = r->dlq_pending;
        r->dlq_pending = p->next;
        rc = dead_letter_send(r, &p->d);
        free(p->buf);
        free(p);
    }
    return rc;
}

static void free_dead_letters(struct relay *r)
{
    while (r->dlq_pending) {
        struct pending_dlq *p = r->dlq_pending;
        r->dlq_pending = p->next;
        free(p->buf);
        free(p);
    }
}

/* Produces one outbox event (see send_waiting()). Returns a STEP_* code. */
static int produce(struct relay *r, const struct outbox_event *ev)
{
    char err[512];
    int kafka_err = -1;
    if (tracker_event_sent(r->trk, r->cur_seq) != 0) {
        log_error("internal: event outside a transaction");
        return STEP_FATAL;
    }
    int rc = send_waiting(r, ev, r->cur_seq, &kafka_err, err, sizeof(err));
    if (rc == STEP_OK) {
        r->events_produced++;
        metrics_count(&r->met.produced, ev->topic, 1);
        r->met.produced_bytes +=
            (ev->key_null ? 0 : ev->key.len) + (ev->value_null ? 0 : ev->value.len);
    }
    if (rc != STEP_FATAL || kafka_err < 0) return rc;
    return reject(r, ev, producer_err_name(kafka_err), err,
                  producer_err_is_poison(kafka_err) && !producer_err_is_missing_topic(kafka_err),
                  kafka_err == 10 /* MSG_SIZE_TOO_LARGE */);
}

static int on_insert(struct relay *r, const struct repl_msg *m)
{
    char err[512];
    const struct relation *rel = m->u.tuple.rel;
    if (!outbox_is_table(&r->map, rel)) return 0;
    if (r->cur_seq == 0) {
        log_error("protocol error: INSERT into %s.%s outside a transaction", rel->nspname,
                  rel->relname);
        return STEP_FATAL;
    }
    struct outbox_event ev;
    if (outbox_event_build(&r->map, rel, m->u.tuple.values, m->u.tuple.nvalues,
                           r->cur_commit_lsn, &ev, err, sizeof(err)) == 0)
        return produce(r, &ev);
    if (tracker_event_sent(r->trk, r->cur_seq) != 0) return STEP_FATAL;
    return reject(r, &ev, outbox_fault_name(ev.fault), err, ev.fault != OF_SCHEMA, false);
}

static int on_message(struct relay *r, const struct repl_msg *m)
{
    char a[LSN_STRLEN], b[LSN_STRLEN];
    switch (m->kind) {
    case RM_BEGIN:
        if (r->cur_seq != 0) {
            log_error("protocol error: BEGIN inside an open transaction");
            return -1;
        }
        r->cur_seq = tracker_begin(r->trk, m->u.begin.final_lsn);
        if (r->cur_seq == 0) {
            log_error("out of memory");
            return -1;
        }
        r->cur_commit_lsn = m->u.begin.final_lsn;
        tracker_set_commit_time(r->trk, r->cur_seq, m->u.begin.commit_time);
        return 0;
    case RM_COMMIT:
        if (r->cur_seq == 0) {
            log_error("protocol error: COMMIT without BEGIN");
            return -1;
        }
        if (m->u.commit.commit_lsn != r->cur_commit_lsn)
            log_warn("COMMIT lsn %s differs from BEGIN final_lsn %s",
                     lsn_format(m->u.commit.commit_lsn, a), lsn_format(r->cur_commit_lsn, b));
        if (tracker_commit(r->trk, r->cur_seq, m->u.commit.end_lsn) != 0) {
            log_error("protocol error: COMMIT end %s goes backwards",
                      lsn_format(m->u.commit.end_lsn, a));
            return -1;
        }
        r->cur_seq = 0;
        return 0;
    case RM_RELATION:
        log_debug("relation %u %s.%s (%d columns)", m->u.relation.rel->relid,
                  m->u.relation.rel->nspname, m->u.relation.rel->relname,
                  m->u.relation.rel->ncols);
        return 0;
    case RM_INSERT:
        return on_insert(r, m);
    case RM_MESSAGE: {
        int64_t sent_us;
        if (heartbeat_parse(m->u.message.prefix, m->u.message.content, m->u.message.len,
                            r->cfg->pg_slot, &sent_us))
            on_heartbeat(r, sent_us);
        return 0;
    }
    default:
        /* UPDATE, DELETE, TRUNCATE of the outbox and everything else are not
         * events: the outbox is append-only from outboxd's point of view. */
        return 0;
    }
}

/* Handles one CopyData payload. Returns 0, 1 on stop requested, -1 fatal. */
static int on_frame(struct relay *r, const char *buf, int len)
{
    char err[512];
    struct repl_frame f;
    if (repl_parse_frame(buf, (size_t)len, &f, err, sizeof(err)) != 0) {
        log_error("replication protocol: %s", err);
        return -1;
    }
    confirmer_received(&r->confirm, f.wal_end);
    if (f.kind == RF_KEEPALIVE) {
        tracker_keepalive(r->trk, f.wal_end);
        return f.reply_requested ? send_status(r, false) : 0;
    }
    struct repl_msg m;
    if (decoder_decode(r->dec, f.data_start, f.data, f.len, &m, err, sizeof(err)) != 0)
        return on_bad_record(r, &f, err);
    return on_message(r, &m);
}

/* Reads and handles up to READ_BATCH frames. Returns a STEP_* code. */
static int read_frames(struct relay *r)
{
    char err[512];
    for (int i = 0; i < READ_BATCH && !*r->stop; i++) {
        char *buf;
        int len;
        int rc = stream_read(r->st, &buf, &len, err, sizeof(err));
        if (rc == 0) return STEP_OK;
        if (rc < 0) {
            log_warn("%s", err);
            snprintf(r->stream_err, sizeof(r->stream_err), "%s", err);
            return STEP_BROKEN;
        }
        r->wake_bytes += (size_t)len;
        rc = on_frame(r, buf, len);
        if (rc != 0) return rc;
    }
    return 0;
}

/* Sleeps until the socket or the producer has something, or the next
 * status is due. Signals interrupt select() (handlers installed without
 * SA_RESTART), so a stop is seen at once. */
static void wait_io(struct relay *r)
{
    /* Wake-up coalescing: the walsender sends each transaction as soon as
     * it is decoded and librdkafka signals every batch of delivery reports,
     * so a relay that keeps up would wake for a handful of events each
     * time; the context switches then cost more CPU than the events. At
     * most one wake-up per WAKE_GAP_US lets work pile up a little (adding
     * at most that much latency).
     *
     * Draining a backlog, latency is moot and the cost per wake-up is all
     * there is: each one pays select(), a recv() per ~11 kB, the kernel's
     * work on every segment the walsender sent meanwhile, and wakes the
     * broker thread. Napping WAKE_GAP_BACKLOG_US then lets the kernel
     * coalesce the walsender's many small sends, and leaves the CPU to the
     * walsender, which is the bottleneck on a small machine (benchmark,
     * pgoutput, 500,000 events: 2.6-2.7 us of CPU per event without the
     * nap, medians 1.7-2.2 us with 6 ms, 1.8 us with 10 ms; the drain got
     * faster, too). A live stream at 5,000 events/s of ~700 bytes brings
     * ~4 kB per wake-up and stays at the short gap. At the short gap only
     * a stream of over ~90,000 such events/s (64 kB per ms) counts as a
     * backlog; once there, a stream of under ~9,000 events/s (64 kB per
     * 10 ms) no longer does, and in between up to 10 ms of latency may be
     * added. */
    bool backlog = r->wake_bytes >= BACKLOG_BYTES;
    int64_t gap = backlog ? WAKE_GAP_BACKLOG_US : WAKE_GAP_US;
    r->wake_bytes = 0;
    int64_t since = now_us() - r->last_wake_us;
    if (since >= 0 && since < gap) {
        struct timespec nap = {0, (long)(gap - since) * 1000};
        nanosleep(&nap, NULL);
    }
    int sfd = stream_fd(r->st), pfd = producer_wakeup_fd(r->prod), mfd = -1;
    int64_t now = now_ms();
    fd_set rfds, wfds;
    FD_ZERO(&rfds);
    FD_ZERO(&wfds);
    FD_SET(sfd, &rfds);
    FD_SET(pfd, &rfds);
    int64_t wait = status_deadline(r) - now;
    if (r->mon) {
        bool out;
        if ((mfd = monitor_wait_fd(r->mon, &out)) >= 0 && mfd < FD_SETSIZE)
            FD_SET(mfd, out ? &wfds : &rfds);
        int64_t due = monitor_due_in(r->mon, now);
        if (due < wait) wait = due;
    }
    if (wait < 0 || stream_pending(r->st)) wait = 0;
    if (wait > 1000) wait = 1000;
    struct timeval tv = {(time_t)(wait / 1000), (suseconds_t)((wait % 1000) * 1000)};
    int nfds = sfd > pfd ? sfd : pfd;
    if (mfd > nfds && mfd < FD_SETSIZE) nfds = mfd;
    select(nfds + 1, &rfds, &wfds, NULL, &tv);
    r->last_wake_us = now_us();
}

/* ---- start-up ------------------------------------------------------------ */

/* prepare_stream()/open_stream() result: not an exit code, try again. */
#define RETRY_LATER (-2)

/* Logs a server error about loading the output plugin, adding the fix when
 * the plugin's library is missing on the server (SQLSTATE 58P01,
 * undefined_file: "could not access file "wal2json""). */
static void log_plugin_error(const struct relay *r, const char *err)
{
    if (strcmp(stream_sqlstate(r->st), "58P01") == 0)
        log_error("%s: the output plugin %s is not installed on the server (Debian: "
                  "apt-get install postgresql-15-%s)",
                  err, r->cfg->pg_plugin, r->cfg->pg_plugin);
    else
        log_error("%s", err);
}

/* Whether a stream error is pgoutput's "publication "P" does not exist"
 * (SQLSTATE 42704, raised by the walsender while decoding). */
static bool says_publication_missing(const char *err, const char *publication)
{
    char what[300];
    snprintf(what, sizeof(what), "publication \"%s\" does not exist", publication);
    return strstr(err, what) != NULL;
}

/* The stream failed with "publication does not exist". pgoutput looks the
 * publication up in the catalog as of the change it decodes (the historic
 * snapshot), so a publication dropped after the slot's position fails
 * every change between the drop and its re-creation, on every reconnect:
 * waiting cannot heal it. exists_now: a normal query sees it today. */
static void log_publication_gap(const struct relay *r, bool exists_now)
{
    const struct config *c = r->cfg;
    char a[LSN_STRLEN];
    lsn_format(r->confirm.sent_lsn ? r->confirm.sent_lsn : r->confirm.stored_lsn, a);
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", a}),
           "the replication stream fails with: publication \"%s\" does not exist, %s: it "
           "was dropped%s after the slot's position %s. pgoutput reads the publication as "
           "of each change it decodes, so slot \"%s\" can never see it for the changes "
           "in between, and every reconnect fails at the same change. Fix: %smove the slot "
           "past them with SELECT pg_replication_slot_advance('%s', "
           "pg_current_wal_lsn()) while outboxd is stopped (or drop and re-create the "
           "slot), then start outboxd (outboxd accept-slot -c FILE accepts the slot's "
           "position over the offset file). The events committed after %s are skipped "
           "by that: list them with outboxd verify and insert them again",
           c->pg_publication,
           exists_now ? "while the database has it now" : "and the database has none now",
           exists_now ? " and created again" : "", a, c->pg_slot,
           exists_now ? "" : "create the publication (see sql/outbox.sql), ", c->pg_slot, a);
}

/* Connects, checks publication and slot, creates the slot if allowed.
 * Returns 0, or an exit code. Fills *start with where to stream from. */
static int prepare_stream(struct relay *r, lsn_t *start)
{
    const struct config *c = r->cfg;
    char err[1024], a[LSN_STRLEN];
    struct offset_state file;
    int have_offset = offset_read(c->offsets_file, &file, err, sizeof(err));
    if (have_offset < 0) {
        log_error("%s", err); /* only an operator can repair it */
        return EXIT_USAGE;
    }
    int rc;

    if (!(r->st = stream_connect(c->pg_conninfo, err, sizeof(err)))) {
        const char *fix = connerr_fix(err);
        if (fix) {
            /* Waiting cannot heal it: an operator must (exit 2, not restarted). */
            log_error("%s; not retrying: %s", err, fix);
            return EXIT_USAGE;
        }
        log_warn("%s", err);
        r->retry_cause = "connect_failed";
        return RETRY_LATER;
    }
    r->retry_cause = "connection_lost"; /* unless said otherwise below */
    /* Only pgoutput reads a publication; wal2json filters by table name. */
    rc = plugin_parse(c->pg_plugin) == PLUGIN_PGOUTPUT
             ? stream_publication_exists(r->st, c->pg_publication, err, sizeof(err))
             : 1;
    if (rc < 0 && stream_broken(r->st)) {
        log_warn("%s", err);
        return RETRY_LATER;
    }
    if (rc >= 0 && r->pub_missing_on_stream) {
        log_publication_gap(r, rc == 1);
        return EXIT_FATAL;
    }
    if (rc <= 0) {
        if (rc < 0)
            log_error("%s", err);
        else
            log_error("publication \"%s\" does not exist in this database: create it "
                      "with CREATE PUBLICATION %s FOR TABLE %s WITH (publish = "
                      "'insert') (see sql/outbox.sql)",
                      c->pg_publication, c->pg_publication, c->outbox_table);
        return EXIT_FATAL;
    }
    rc = stream_plugin_allowed(r->st, c->pg_plugin, err, sizeof(err));
    if (rc <= 0) {
        if (rc < 0 && stream_broken(r->st)) {
            log_warn("%s", err);
            return RETRY_LATER;
        }
        log_error("%s", err);
        return EXIT_FATAL;
    }
    struct server_ident id;
    if (stream_identify(r->st, &id, err, sizeof(err)) != 0) {
        log_warn("%s", err);
        return stream_broken(r->st) ? RETRY_LATER : EXIT_FATAL;
    }
    struct slot_info si;
    if (stream_slot_info(r->st, c->pg_slot, &si, err, sizeof(err)) != 0) {
        log_warn("%s", err);
        return stream_broken(r->st) ? RETRY_LATER : EXIT_FATAL;
    }
    struct resume_server srv;
    resume_server_init(&srv, id.system, id.timeline, id.xlogpos, id.dbname, c->pg_slot,
                       c->pg_plugin);
    srv.slot_exists = si.exists;
    srv.slot_confirmed = si.confirmed_flush;
    if (!have_offset && r->trk && !si.exists) {
        /* Streaming, but nothing stored yet: what was streamed is the file. */
        resume_identity(&srv, tracker_flush_lsn(r->trk), &file);
        have_offset = 1;
    }
    if (si.exists && strcmp(si.plugin, c->pg_plugin) != 0) {
        log_error("replication slot \"%s\" uses plugin %s, but [postgres] plugin is %s: "
                  "set plugin = %s or use another slot",
                  c->pg_slot, si.plugin, c->pg_plugin, si.plugin);
        return EXIT_USAGE;
    }
    if (si.exists && si.active) {
        log_warn("replication slot \"%s\" is in use by another process (pid %d)",
                 c->pg_slot, si.active_pid);
        r->retry_cause = "slot_in_use";
        return RETRY_LATER;
    }
    struct resume_decision d;
    resume_decide(have_offset ? &file : NULL, &srv, c->offsets_file, c->path, &d);
    if (d.refused) {
        log_error("%s", d.message);
        return EXIT_USAGE;
    }
    if (d.note[0]) log_msg(d.note_is_warning ? LOG_WARN : LOG_INFO, "%s", d.note);
    if (d.verdict == RESUME_NO_SLOT) {
        if (!c->pg_create_slot) {
            log_error("replication slot \"%s\" does not exist and [postgres] create_slot "
                      "is false: create it with SELECT pg_create_logical_replication_slot"
                      "('%s', '%s')",
                      c->pg_slot, c->pg_slot, c->pg_plugin);
            return EXIT_FATAL;
        }
        if (stream_create_slot(r->st, c->pg_slot, c->pg_plugin, err, sizeof(err)) != 0) {
            log_plugin_error(r, err);
            return EXIT_FATAL;
        }
        log_info("created replication slot \"%s\" (plugin %s)", c->pg_slot, c->pg_plugin);
        if (stream_slot_info(r->st, c->pg_slot, &si, err, sizeof(err)) != 0) {
            log_error("%s", err);
            return EXIT_FATAL;
        }
        d.start = si.confirmed_flush;
    }
    resume_identity(&srv, d.start, &r->confirm.identity);
    /* Absent, format 1 or from an older timeline: write it as this stream's
     * at the first status. */
    r->confirm.rewrite_offset =
        !have_offset || !file.has_identity || file.timeline != id.timeline;
    if (have_offset) r->confirm.stored_lsn = file.lsn;
    *start = d.start;
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(d.start, a)}),
           "streaming slot \"%s\" from %s (offset file %s, slot confirmed %s, server at %s, "
           "system %s, timeline %u)",
           c->pg_slot, a, have_offset ? "present" : "absent",
           lsn_format(si.confirmed_flush, (char[LSN_STRLEN]){0}),
           lsn_format(id.xlogpos, (char[LSN_STRLEN]){0}), id.system, (unsigned)id.timeline);
    return 0;
}

/* Every reason and cause this relay can count, at 0 from the start (see
 * metrics_seed()): the row faults, the undecodable record, the poison
 * errors (dead-lettered or failed), a lost publication, a delivery that
 * timed out, and the causes of reconnects (open_stream_retrying(),
 * relay_run()). Other librdkafka errors still appear when first counted. */
static void seed_metrics(struct metrics *m, bool pub_capped)
{
    for (int f = OF_SCHEMA; f <= OF_BAD_TOPIC; f++) {
        metrics_seed(&m->failed, outbox_fault_name((enum outbox_fault)f));
        if (f != OF_SCHEMA)
            metrics_seed(&m->dead_lettered, outbox_fault_name((enum outbox_fault)f));
    }
    metrics_seed(&m->failed, INVALID_RECORD);
    metrics_seed(&m->dead_lettered, INVALID_RECORD);
    for (size_t i = 0; producer_poison_name(i); i++) {
        metrics_seed(&m->failed, producer_poison_name(i));
        metrics_seed(&m->dead_lettered, producer_poison_name(i));
    }
    metrics_seed(&m->failed, producer_err_name(-192 /* _MSG_TIMED_OUT */));
    if (pub_capped) metrics_seed(&m->failed, "NOT_IN_PUBLICATION");
    static const char *const causes[] = {"connect_failed", "connection_lost", "slot_in_use",
                                         "stream_lost"};
    for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
        metrics_seed(&m->reconnects, causes[i]);
}

static int relay_init(struct relay *r, const struct config *c, volatile sig_atomic_t *stop)
{
    char err[1024];
    memset(r, 0, sizeof(*r));
    r->cfg = c;
    r->stop = stop;
    metrics_init(&r->met);
    r->met.version = OUTBOXD_VERSION;
    r->met.plugin = c->pg_plugin;
    r->met.slot = c->pg_slot;
    r->met.start_time_us = now_unix_us();
    r->met.commit_to_ack = &r->commit_to_ack;
    if (c->pg_heartbeat_interval_ms > 0) r->met.heartbeat_rtt = &r->heartbeat_rtt;
    const char *mmb = config_kafka_get(c, "message.max.bytes");
    long max_bytes = mmb ? atol(mmb) : 1000000;
    r->dlq_max_value = max_bytes > 2 * DLQ_HEADROOM ? (size_t)(max_bytes - DLQ_HEADROOM)
                                                     : (size_t)max_bytes / 2;
    if (outbox_map_init(&r->map, c->outbox_table, (const char *const *)c->outbox_columns,
                        c->outbox_topic, err, sizeof(err)) != 0) {
        log_error("[outbox] %s", err);
        return EXIT_USAGE;
    }
    if (!(r->dec = decoder_new((enum plugin_kind)plugin_parse(c->pg_plugin)))) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    if (!(r->prod = producer_new(c, on_delivery, r, err, sizeof(err)))) {
        log_error("%s", err);
        return EXIT_USAGE;
    }
    backoff_init(&r->backoff, c->pg_retry_min_ms, c->pg_retry_max_ms);
    /* pgoutput: the monitor proves the outbox is still published, and
     * nothing is confirmed beyond what it proved (confirm.h). */
    confirmer_init(&r->confirm, c->offsets_file, c->pg_status_interval_ms,
                   plugin_parse(c->pg_plugin) == PLUGIN_PGOUTPUT, confirm_io_stream(&r->st));
    seed_metrics(&r->met, r->confirm.pub_capped);
    if ((c->http_listen && *c->http_listen) || c->pg_heartbeat_interval_ms > 0 ||
        r->confirm.pub_capped) {
        struct monitor_config mc = {.conninfo = c->pg_conninfo,
                                    .slot = c->pg_slot,
                                    .interval_ms = c->pg_monitor_interval_ms,
                                    .heartbeat_ms = c->pg_heartbeat_interval_ms,
                                    .publication =
                                        r->confirm.pub_capped ? c->pg_publication : NULL,
                                    .schema = r->map.schema,
                                    .table = r->map.table};
        if (!(r->mon = monitor_new(&mc))) {
            log_error("out of memory");
            return EXIT_FATAL;
        }
    }
    int code = httpd_from_config(c->http_listen, &r->http);
    if (code != 0) return code;
    if (r->http) publish(r, now_ms());
    return 0;
}

static void relay_free(struct relay *r)
{
    httpd_stop(r->http);
    monitor_free(r->mon);
    metrics_free(&r->met);
    free(r->text.data);
    free_dead_letters(r);
    producer_free(r->prod);
    stream_close(r->st);
    tracker_free(r->trk);
    decoder_free(r->dec);
    outbox_map_free(&r->map);
}

/* ---- shutdown ------------------------------------------------------------ */

/* pgoutput: one more publication check, so that a graceful stop confirms
 * everything ACKed (bounded by FINAL_PROOF_MS; without it the position
 * stays at the last proof and a restart re-delivers the rest). */
static void prove_publication_now(struct relay *r)
{
    if (!r->confirm.pub_capped || !r->mon || r->pub_lost ||
        tracker_flush_lsn(r->trk) <= r->confirm.proven_lsn)
        return;
    uint64_t before = r->proofs;
    monitor_check_publication_now(r->mon);
    for (int64_t end = now_ms() + FINAL_PROOF_MS; r->proofs == before && now_ms() < end;) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        relay_tick(r);
    }
}

/* Stops reading, lets outstanding deliveries finish (bounded), confirms
 * what was ACKed, ends the stream. */
static void drain_and_confirm(struct relay *r)
{
    char a[LSN_STRLEN];
    int left = producer_flush(r->prod, RELAY_SHUTDOWN_FLUSH_MS);
    producer_poll(r->prod, 0);
    if (left > 0)
        log_warn("%d events not ACKed within %d ms; they will be re-delivered after "
                 "restart",
                 left, RELAY_SHUTDOWN_FLUSH_MS);
    prove_publication_now(r);
    if (send_status_ex(r, false, true) == STEP_OK && r->st) stream_finish(r->st);
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(r->confirm.stored_lsn, a)}),
           "confirmed %s; produced %llu events, %llu ACKed", a,
           (unsigned long long)r->events_produced, (unsigned long long)r->events_acked);
}

/* Connects and starts streaming. Returns 0, an exit code, or RETRY_LATER
 * when the slot is held by another process (a previous outboxd whose
 * walsender has not noticed its death yet, or a second instance). */
static int open_stream(struct relay *r, lsn_t *start)
{
    char err[1024];
    int code = prepare_stream(r, start);
    if (code != 0) return code;
    const struct config *c = r->cfg;
    struct stream_target t = {
        .plugin = (enum plugin_kind)plugin_parse(c->pg_plugin),
        .slot = c->pg_slot,
        .publication = c->pg_publication,
        .messages = c->pg_heartbeat_interval_ms > 0,
        .schema = r->map.schema,
        .table = r->map.table,
        .direct_read = c->pg_direct_read,
    };
    /* After a reconnect, stream from what is ACKed: with pgoutput the
     * confirmed position (*start) may trail it for want of a publication
     * proof, and the tracker has counted everything up to it already. */
    lsn_t from = *start;
    if (r->trk && tracker_flush_lsn(r->trk) > from) from = tracker_flush_lsn(r->trk);
    if (stream_start(r->st, &t, from, err, sizeof(err)) != 0) {
        bool in_use = strcmp(stream_sqlstate(r->st), "55006") == 0;
        if (in_use || stream_broken(r->st)) {
            log_warn("%s", err);
            if (in_use) r->retry_cause = "slot_in_use";
            return RETRY_LATER;
        }
        if (r->confirm.pub_capped && says_publication_missing(err, c->pg_publication))
            log_publication_gap(r, true); /* prepare_stream() just found it */
        else
            log_plugin_error(r, err);
        return EXIT_FATAL;
    }
    log_info("reading the replication stream %s",
             stream_direct(r->st) ? "from the socket directly"
             : c->pg_direct_read ? "through libpq (the connection is encrypted)"
                                 : "through libpq ([postgres] direct_read = false)");
    return 0;
}

/* Sleeps ms milliseconds unless a stop is requested first. */
static void sleep_unless_stopped(struct relay *r, int ms)
{
    while (ms > 0 && !*r->stop) {
        int step = ms < 100 ? ms : 100;
        struct timespec ts = {0, (long)step * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
        relay_tick(r);
    }
}

/* Counts a failed attempt (what: where it failed) and waits for the
 * backoff, which keeps growing until a stream stays healthy. */
static void backoff_pause(struct relay *r, const char *what)
{
    int ms = backoff_next(&r->backoff, rand());
    log_info("%s: attempt %d failed, next in %d ms", what, r->backoff.failures, ms);
    r->next_publish_ms = 0; /* not ready: say so at once */
    relay_tick(r);
    sleep_unless_stopped(r, ms);
}

/* open_stream() until it succeeds, fails for good, or a stop is requested;
 * waits with the backoff between attempts. */
static int open_stream_retrying(struct relay *r, lsn_t *start)
{
    for (;;) {
        int code = open_stream(r, start);
        if (code != RETRY_LATER) return code;
        metrics_count(&r->met.reconnects,
                      r->retry_cause ? r->retry_cause : "connect_failed", 1);
        stream_close(r->st);
        r->st = NULL;
        backoff_pause(r, "connecting to the slot");
        if (*r->stop) return EXIT_OK;
        if (r->pub_lost) return EXIT_FATAL;
    }
}

/* Streams until a stop, a fatal error or a broken connection. Returns a
 * STEP_* code. */
static int stream_loop(struct relay *r)
{
    char err[512];
    int rc = STEP_OK;
    while (!*r->stop && rc == STEP_OK) {
        relay_tick(r);
        rc = read_frames(r);
        producer_poll(r->prod, 0);
        if (rc == STEP_OK) rc = flush_dead_letters(r);
        if (rc == STEP_OK && (tracker_failed(r->trk) || r->pub_lost)) rc = STEP_FATAL;
        if (rc == STEP_OK && r->server_stopping) {
            /* A walsender of a shutting-down server waits until the client
             * has confirmed everything sent; with the monitor gone (fast
             * shutdown ends it first) nothing past the last publication
             * check can be confirmed, so the server would wait forever.
             * Ending the stream lets it stop; the rest is re-delivered. */
            r->server_stopping = false;
            log_warn("the server is shutting down: ending the replication stream, "
                     "confirmed up to the last publication check");
            rc = STEP_BROKEN;
        }
        if (rc == STEP_OK && r->backoff.failures > 0 &&
            now_ms() - r->stream_up_ms >= STREAM_HEALTHY_MS) {
            log_info("the replication stream has stayed up for %d ms: healthy again",
                     STREAM_HEALTHY_MS);
            backoff_reset(&r->backoff);
            r->next_publish_ms = 0;
        }
        if (rc == STEP_OK && producer_fatal(r->prod, err, sizeof(err))) {
            log_error("kafka producer failed: %s", err);
            rc = STEP_FATAL;
        }
        if (rc == STEP_OK && producer_refused(r->prod, err, sizeof(err))) {
            log_error("kafka: the broker refused the connection for good: %s; stopping "
                      "without confirming anything not ACKed (exit %d)",
                      err, EXIT_USAGE);
            rc = STEP_REFUSED;
        }
        if (rc == STEP_OK) rc = status_if_due(r);
        if (rc == STEP_OK && !*r->stop) wait_io(r);
    }
    return rc == STEP_OK ? STEP_STOP : rc;
}

/*
 * After the replication connection broke: drop the transaction that was
 * streaming (it will be sent again), wait for every event already produced
 * to be reported, and store the position they complete. Reconnecting from
 * there re-sends nothing that was ACKed, and the tracker starts the new
 * session idle. There is no connection to keep alive meanwhile, so waiting
 * for a broker that is down costs nothing but time. Returns a STEP_* code.
 */
static int recover_from_broken_stream(struct relay *r)
{
    char a[LSN_STRLEN];
    tracker_abort_open(r->trk);
    r->cur_seq = 0;
    r->streaming = false;
    r->next_publish_ms = 0; /* not ready: say so at once */
    relay_tick(r);
    stream_close(r->st);
    r->st = NULL;
    decoder_free(r->dec);
    if (!(r->dec = decoder_new((enum plugin_kind)plugin_parse(r->cfg->pg_plugin)))) {
        log_error("out of memory");
        return STEP_FATAL;
    }
    int64_t next_log = 0;
    while (!*r->stop && !tracker_failed(r->trk) && producer_outq_len(r->prod) > 0) {
        if (now_ms() >= next_log) {
            log_info("replication connection lost: waiting for %d outstanding "
                     "deliveries before reconnecting",
                     producer_outq_len(r->prod));
            next_log = now_ms() + 10000;
        }
        producer_poll(r->prod, 100);
        relay_tick(r);
        if (flush_dead_letters(r) != STEP_OK) break;
    }
    producer_poll(r->prod, 0);
    if (tracker_failed(r->trk)) return STEP_FATAL;
    if (*r->stop) return STEP_STOP;
    int rc = send_status_ex(r, false, true); /* writes the offset file only */
    if (rc != STEP_OK) return rc;
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(tracker_flush_lsn(r->trk), a)}),
           "reconnecting from %s", a);
    return STEP_OK;
}

/* Connects (retrying transient failures) and starts streaming. Returns 0 or
 * an exit code. The tracker is created on the first connection. */
static int connect_stream(struct relay *r)
{
    lsn_t start = 0;
    int code = open_stream_retrying(r, &start);
    if (code != 0 || *r->stop) return code;
    if (!r->trk && !(r->trk = tracker_new(start))) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    confirmer_stream_started(&r->confirm, start, now_ms());
    r->streaming = true;
    r->server_stopping = false;
    r->stream_up_ms = now_ms();
    r->next_publish_ms = 0; /* ready now: say so at once */
    relay_tick(r);
    return 0;
}

/* One line with the commit-to-ACK latency of every event ACKed since
 * start (the benchmark reads it; so can an operator). */
static void log_latency_summary(const struct relay *r)
{
    const struct latency_hist *h = &r->commit_to_ack;
    if (h->count == 0) return;
    log_info("commit-to-ACK latency over %llu events: p50 %lld us, p99 %lld us, max %lld us, "
             "p90 %lld us, p99.9 %lld us, mean %llu us",
             (unsigned long long)h->count, (long long)latency_quantile(h, 0.50),
             (long long)latency_quantile(h, 0.99), (long long)h->max_us,
             (long long)latency_quantile(h, 0.90), (long long)latency_quantile(h, 0.999),
             (unsigned long long)(h->sum_us / h->count));
}

int relay_run(const struct config *c, volatile sig_atomic_t *stop)
{
    struct relay r;
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int code = relay_init(&r, c, stop);
    /* Fail fast on set-up mistakes (wal_level, role, outbox table,
     * publication); an unreachable server is left to the retry loop. */
    if (code == 0 && check_run(c, true, CHECK_SCOPE_STARTUP) != 0) code = EXIT_FATAL;
    int rc = STEP_STOP;
    while (code == 0 && !*stop) {
        if ((code = connect_stream(&r)) != 0 || *stop) break;
        r.stream_err[0] = '\0';
        rc = stream_loop(&r);
        if (rc != STEP_BROKEN) break;
        metrics_count(&r.met.reconnects, "stream_lost", 1);
        /* Checked on the next connection, with a normal query. */
        r.pub_missing_on_stream = r.confirm.pub_capped &&
                                  says_publication_missing(r.stream_err, c->pg_publication);
        rc = recover_from_broken_stream(&r);
        if (rc != STEP_OK) break;
        /* The backoff grows until a stream stays up STREAM_HEALTHY_MS. */
        backoff_pause(&r, "replication stream lost");
        if (r.pub_lost) rc = STEP_FATAL;
        if (rc != STEP_OK) break;
    }
    if (code == 0 && (rc == STEP_FATAL || rc == STEP_REFUSED)) {
        /* Confirm the ACKed prefix (never past the failure), then stop. */
        producer_poll(r.prod, 0);
        if (r.trk) send_status_ex(&r, false, true);
        code = rc == STEP_REFUSED ? EXIT_USAGE : EXIT_FATAL;
    } else if (code == 0 && r.trk) {
        log_info("stopping: draining outstanding deliveries");
        drain_and_confirm(&r);
    }
    log_latency_summary(&r);
    relay_free(&r);
    return code;
}
