/*
 * relay.c - the event loop and the wiring of the logical relay.
 *
 *   replication socket --frames--> changes.c: decode -> map -> produce
 *        ^                                                  |
 *        | status (flush LSN)                               v
 *   offset file <-- tracker <--delivery reports-- producer (librdkafka)
 *
 * One thread, one loop (run_loop()), one wait per turn (evloop.h): the
 * replication socket, librdkafka's wake-up pipe, the monitor's socket and
 * the earliest timer (status deadline, monitor, metrics snapshot, the
 * current state's deadline); signals end the wait. What has to wait is a
 * state of the loop, never a nested wait (enum relay_state). A standby
 * status goes out at least every status_interval_ms and at once when the
 * server asks for a reply, between frames: the walsender drops a client
 * that stays silent for wal_sender_timeout, even while outboxd waits for
 * the broker (backpressure), so the status path never depends on reading.
 * Every step returns an enum step (step.h).
 */
#include "relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backoff.h"
#include "changes.h"
#include "checks.h"
#include "clock.h"
#include "confirm.h"
#include "decoder.h"
#include "evloop.h"
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
#include "slotsetup.h"
#include "step.h"
#include "stream.h"
#include "tracker.h"

/* Minimum time between two wake-ups of the loop (see wait_turn()): while
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

/* While an event is held (backpressure), it is tried again at least this
 * often, even without a delivery report (a new topic may wait for the
 * producer's replacement, producer.h). */
#define HELD_RETRY_MS 100

/* The longest wait of one turn, whatever the timers say. */
#define TURN_MAX_MS 1000

/* What the loop is doing; each state says what its turn waits for. */
enum relay_state {
    RS_CONNECT, /* open the stream (slotsetup.c) */
    RS_BACKOFF, /* a connection failed: wait until state_until_ms */
    RS_STREAM,  /* read, produce, confirm; while changes_held(), not reading:
                 * backpressure */
    RS_RECOVER, /* the stream broke: wait for the outstanding deliveries */
    RS_DRAIN,   /* stopping: wait for them, RELAY_SHUTDOWN_FLUSH_MS at most */
    RS_PROVE,   /* stopping, pgoutput: a last publication check (FINAL_PROOF_MS) */
    RS_DONE,    /* exit with exit_code */
};

struct relay {
    const struct config *cfg;
    volatile sig_atomic_t *stop;
    struct outbox_map map;
    struct decoder *dec;
    struct tracker *trk;
    struct producer *prod;
    struct stream *st;
    struct changes chg; /* the data path: decode, map, produce, ACK */

    enum relay_state state;
    int64_t state_until_ms;  /* RS_BACKOFF/RS_DRAIN/RS_PROVE: its deadline */
    int64_t next_log_ms;     /* RS_RECOVER: next progress line */
    uint64_t proofs_before;  /* RS_PROVE: r->proofs when it asked */
    int exit_code;           /* RS_DONE */
    lsn_t received_lsn;      /* newest wal_end seen on the stream */
    lsn_t stored_lsn;        /* last LSN in the offset file */
    lsn_t start_lsn;         /* validated start of this connection (resume.h) */
    struct offset_state identity; /* the stream the offset file is written for */
    bool rewrite_offset;     /* write the file at the next status even if the
                              * position did not move (absent, format 1, new
                              * timeline) */
    bool offset_failed;      /* a write failed (logged): never retried */
    int64_t last_write_ms;   /* when the offset file was last written */
    uint64_t acked_at_write; /* events_acked then */
    lsn_t sent_lsn;          /* last flush LSN sent to the server */
    int64_t next_status_ms;  /* monotonic deadline of the next status */
    int64_t last_status_ms;  /* when the last one went out */
    int64_t last_wake_us;    /* when wait_turn() last returned while reading */
    size_t wake_bytes;       /* stream bytes read since then */
    uint64_t events_acked;
    bool streaming;                  /* START_REPLICATION done, not broken since */
    struct httpd *http;              /* NULL when [http] listen is empty */
    int64_t next_publish_ms;         /* monotonic deadline of the next snapshot */
    struct metrics met;              /* counted here, rendered for /metrics */
    struct textbuf text;             /* the rendering, reused */
    const char *retry_cause;         /* why slot_open_stream() said STEP_BROKEN */
    struct monitor *mon;             /* slot lag, heartbeats, publication check */
    struct backoff backoff;          /* reconnects, across streams that keep failing */
    int64_t stream_up_ms;            /* when the current stream started */
    bool pub_capped;                 /* pgoutput: confirm only proven positions */
    lsn_t proven_lsn;                /* outbox published for commits before it */
    uint64_t proofs;                 /* publication checks answered */
    bool pub_lost;                   /* the outbox is no longer published: stop */
    bool pub_missing_on_stream;      /* the stream said the publication is missing */
    bool pub_missing_warned;         /* ... and so did the publication check */
    bool server_stopping;            /* the monitor saw the server shut down */
    char stream_err[512];            /* why the last stream broke */
};

/* ---- observability -------------------------------------------------------
 * The loop beats on every turn and publishes a snapshot for the HTTP
 * server's thread every HTTPD_PUBLISH_MS (see httpd.h). */

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
    m->received_lsn = r->received_lsn;
    m->acked_lsn = r->trk ? tracker_flush_lsn(r->trk) : r->stored_lsn;
    m->confirmed_lsn = r->sent_lsn;
    m->streaming = r->streaming;
    int64_t t = r->trk ? tracker_flushed_commit_time(r->trk) : 0;
    m->acked_commit_time_us = t ? t + PG_EPOCH_OFFSET_US : 0;
}

static void publish(struct relay *r, int64_t now)
{
    collect_gauges(r);
    httpd_publish_metrics(r->http, &r->met, &r->text, clock_unix_us(), not_ready_reason(r));
    r->next_publish_ms = now + HTTPD_PUBLISH_MS;
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
    lsn_format(r->proven_lsn, a);
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
    if (!r->pub_capped || r->pub_lost) return;
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
    if (rep->pub_lsn > r->proven_lsn) r->proven_lsn = rep->pub_lsn;
}

/* Steps the monitoring connection and counts what it found. */
static void monitor_tick(struct relay *r, int64_t now)
{
    struct monitor_report rep;
    monitor_step(r->mon, now, clock_unix_us(), &rep);
    struct metrics *m = &r->met;
    if (rep.slot_answer) {
        m->slot_seen = rep.slot_found && rep.lag_bytes >= 0;
        m->slot_lag_bytes = rep.lag_bytes;
        m->slot_wal_status = metrics_wal_status_parse(rep.wal_status);
    }
    if (rep.heartbeat_sent) m->heartbeats_sent++;
    if (rep.failed) m->monitor_errors++;
    if (rep.pub_answer) on_publication_check(r, &rep);
    if (rep.server_stopping && r->pub_capped) r->server_stopping = true;
}

/* The start of every turn of the loop: signals, the monitor, the HTTP
 * server's beat and snapshot. */
static void relay_tick(struct relay *r)
{
    signals_service(); /* SIGHUP, SIGUSR1/2: signals.h */
    int64_t now = clock_mono_ms();
    if (r->mon) monitor_tick(r, now);
    if (httpd_tick(r->http, now, r->next_publish_ms)) publish(r, now);
}

/* ---- delivery reports ---------------------------------------------------- */

static void on_delivery(void *ctx, const struct delivery_report *dr)
{
    struct relay *r = ctx;
    if (changes_on_delivery(&r->chg, dr)) r->events_acked++;
}

/* The data path's sink: the producer. */
static int send_to_producer(void *ctx, const struct outbox_event *ev, uint64_t seq,
                            int *kafka_err, char *err, size_t errlen)
{
    return producer_send(ctx, ev, seq, kafka_err, err, errlen);
}

/* ---- status -------------------------------------------------------------- */

/* What may be confirmed now: the ACKed position, with pgoutput never past
 * the last proven publication membership (confirm.h). */
static lsn_t confirmable(const struct relay *r)
{
    return confirm_position(tracker_flush_lsn(r->trk), r->pub_capped, r->proven_lsn,
                            r->sent_lsn);
}

/* Writes lsn to the offset file with the stream's identity. Returns 0, or
 * -1 after logging the failure (once: a failed write is not retried, so
 * the final status on the way out does not log it again). */
static int store_offset(struct relay *r, lsn_t lsn)
{
    char err[512];
    if (r->offset_failed) return -1;
    struct offset_state st = r->identity;
    st.lsn = lsn;
    if (offset_write(r->cfg->offsets_file, &st, err, sizeof(err)) != 0) {
        log_error("%s; stopping without confirming past %s", err,
                  lsn_format(r->stored_lsn, (char[LSN_STRLEN]){0}));
        r->offset_failed = true;
        return -1;
    }
    r->stored_lsn = lsn;
    r->rewrite_offset = false;
    r->last_write_ms = clock_mono_ms();
    r->acked_at_write = r->events_acked;
    r->met.offset_writes++;
    return 0;
}

/* Whether send_status() would write the offset file now. force: the
 * position must be stored now (stop, reconnect, fatal error). Events ACKed
 * since the last write move it at once; an advance by keepalives alone (or
 * transactions without events) is written at most once per
 * status_interval_ms: under a busy database whose other tables keep the
 * walsender sending keepalives, writing each would cost a write, two
 * fsyncs and a rename on the event loop tens of times a second. */
static bool offset_write_due(const struct relay *r, bool force, int64_t now)
{
    lsn_t flush = confirmable(r);
    if (r->rewrite_offset && flush >= r->stored_lsn) return true;
    return resume_write_due(flush, r->stored_lsn, r->events_acked != r->acked_at_write,
                            force, now, r->last_write_ms, r->cfg->pg_status_interval_ms);
}

/*
 * Confirms what the offset file holds: first the tracker's flush LSN goes to
 * the file (durably, when due: see offset_write_due()), then the file's
 * position to the server, never beyond what the server has sent. The order
 * matters: if outboxd dies between the two, the file is ahead of the slot,
 * which is safe because it only ever holds ACKed positions; and the slot
 * is never ahead of the file, which is what lets a start tell that someone
 * else moved it (resume.h).
 */
static int send_status_ex(struct relay *r, bool reply, bool force)
{
    char err[512], a[LSN_STRLEN];
    lsn_t flush = confirmable(r);
    if (r->offset_failed) return STEP_FATAL;
    if (offset_write_due(r, force, clock_mono_ms()) &&
        store_offset(r, flush > r->stored_lsn ? flush : r->stored_lsn) != 0)
        return STEP_FATAL;
    if (!r->st) return STEP_OK; /* between connections: the file is enough */
    lsn_t confirm = resume_clamp_flush(r->stored_lsn, r->received_lsn, r->start_lsn);
    lsn_t written = r->received_lsn > confirm ? r->received_lsn : confirm;
    if (stream_send_status(r->st, written, confirm, reply, err, sizeof(err)) != 0) {
        log_warn("%s", err);
        return STEP_BROKEN;
    }
    if (confirm != r->sent_lsn && log_get_level() >= LOG_DEBUG)
        log_kv(LOG_DEBUG, LOG_FIELDS({"lsn", lsn_format(confirm, a)}),
               "confirmed %s (pending: %llu events in %zu transactions)", a,
               (unsigned long long)tracker_pending_events(r->trk),
               tracker_pending_txns(r->trk));
    r->sent_lsn = confirm;
    r->last_status_ms = clock_mono_ms();
    r->next_status_ms = r->last_status_ms + r->cfg->pg_status_interval_ms;
    return STEP_OK;
}

static int send_status(struct relay *r, bool reply)
{
    return send_status_ex(r, reply, false);
}

/* A status goes out every status_interval_ms, and sooner (but at most
 * every STATUS_CAUGHT_UP_GAP_MS) once everything received is ACKed and the
 * flush position moved: a relay that has caught up says so at once, so the
 * slot (and the server's view of the lag) does not trail a drained stream
 * by up to a whole interval. While busy, one update per interval is
 * enough, and cheaper. */
#define STATUS_CAUGHT_UP_GAP_MS 20

/* When the next status is due (monotonic ms). */
static int64_t status_deadline(const struct relay *r)
{
    if (tracker_idle(r->trk) && confirmable(r) != r->sent_lsn &&
        r->events_acked != r->acked_at_write &&
        r->last_status_ms + STATUS_CAUGHT_UP_GAP_MS < r->next_status_ms)
        return r->last_status_ms + STATUS_CAUGHT_UP_GAP_MS;
    return r->next_status_ms;
}

static int status_if_due(struct relay *r)
{
    return clock_mono_ms() >= status_deadline(r) ? send_status(r, false) : STEP_OK;
}

/* ---- streaming ----------------------------------------------------------- */

/* Handles one CopyData payload: a keepalive (answered at once when the
 * server asks) or an XLogData frame for the data path. STEP_OK, STEP_HELD
 * (the frame's event waits for room: read nothing more), STEP_BROKEN (the
 * reply could not be sent) or STEP_FATAL. */
static enum step on_frame(struct relay *r, const char *buf, int len)
{
    char err[512];
    struct repl_frame f;
    if (repl_parse_frame(buf, (size_t)len, &f, err, sizeof(err)) != 0) {
        log_error("replication protocol: %s", err);
        return STEP_FATAL;
    }
    if (f.wal_end > r->received_lsn) r->received_lsn = f.wal_end;
    if (f.kind == RF_KEEPALIVE) {
        tracker_keepalive(r->trk, f.wal_end);
        return f.reply_requested ? send_status(r, false) : STEP_OK;
    }
    return changes_on_data(&r->chg, &f);
}

/* Reads and handles up to READ_BATCH frames; stops at the first that is
 * not STEP_OK (and at STEP_HELD: the held event borrows the stream's
 * buffer, which the next read would reuse). */
static enum step read_frames(struct relay *r)
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
        enum step st = on_frame(r, buf, len);
        if (st != STEP_OK) return st;
    }
    return STEP_OK;
}

/* What ends a stream besides the stream itself: a failed event, the lost
 * publication, a server shutting down, librdkafka giving up. */
static enum step stream_health(struct relay *r)
{
    char err[512];
    if (tracker_failed(r->trk) || r->pub_lost) return STEP_FATAL;
    if (r->server_stopping) {
        /* A walsender of a shutting-down server waits until the client
         * has confirmed everything sent; with the monitor gone (fast
         * shutdown ends it first) nothing past the last publication
         * check can be confirmed, so the server would wait forever.
         * Ending the stream lets it stop; the rest is re-delivered. */
        r->server_stopping = false;
        log_warn("the server is shutting down: ending the replication stream, "
                 "confirmed up to the last publication check");
        return STEP_BROKEN;
    }
    if (r->backoff.failures > 0 && clock_mono_ms() - r->stream_up_ms >= STREAM_HEALTHY_MS) {
        log_info("the replication stream has stayed up for %d ms: healthy again",
                 STREAM_HEALTHY_MS);
        backoff_reset(&r->backoff);
        r->next_publish_ms = 0;
    }
    if (producer_fatal(r->prod, err, sizeof(err))) {
        log_error("kafka producer failed: %s", err);
        return STEP_FATAL;
    }
    if (producer_refused(r->prod, err, sizeof(err))) {
        log_error("kafka: the broker refused the connection for good: %s; stopping "
                  "without confirming anything not ACKed (exit %d)",
                  err, EXIT_USAGE);
        return STEP_USAGE;
    }
    return STEP_OK;
}

/* One turn of RS_STREAM: the held event first (after serving reports),
 * then the stream, reports, dead letters, health, the status. Returns
 * STEP_OK or STEP_HELD to stay, or what ends the stream. */
static enum step stream_turn(struct relay *r)
{
    enum step rc = STEP_OK;
    if (changes_held(&r->chg)) {
        producer_poll(r->prod, 0);
        rc = changes_resume(&r->chg);
    }
    if (rc == STEP_OK) rc = read_frames(r);
    producer_poll(r->prod, 0);
    if (rc == STEP_OK) rc = changes_flush_dead_letters(&r->chg);
    if (rc != STEP_OK && rc != STEP_HELD) return rc;
    enum step health = stream_health(r);
    if (health != STEP_OK) return health;
    enum step st = status_if_due(r);
    return st != STEP_OK ? st : rc;
}

/* Builds the turn's wait for the current state into l. */
static void wait_for(struct relay *r, struct evloop *l, int64_t now)
{
    evloop_begin(l, now + TURN_MAX_MS);
    evloop_watch(l, producer_wakeup_fd(r->prod), false);
    if (r->mon) {
        bool out;
        evloop_watch(l, monitor_wait_fd(r->mon, &out), out);
        evloop_until(l, now + monitor_due_in(r->mon, now));
    }
    if (r->http) evloop_until(l, r->next_publish_ms);
    switch (r->state) {
    case RS_STREAM:
        evloop_until(l, status_deadline(r));
        if (r->backoff.failures > 0) evloop_until(l, r->stream_up_ms + STREAM_HEALTHY_MS);
        if (changes_held(&r->chg)) {
            evloop_until(l, now + HELD_RETRY_MS); /* the stream is not read */
            break;
        }
        evloop_watch(l, stream_fd(r->st), false);
        if (stream_pending(r->st)) evloop_until(l, now);
        break;
    case RS_RECOVER: evloop_until(l, r->next_log_ms); break;
    default: evloop_until(l, r->state_until_ms); break;
    }
}

/* Coalesces the wake-ups of a stream that is being read (see below). */
static void nap_before_reading(struct relay *r)
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
    int64_t since = clock_mono_us() - r->last_wake_us;
    if (since >= 0 && since < gap) {
        struct timespec nap = {0, (long)(gap - since) * 1000};
        nanosleep(&nap, NULL);
    }
}

/* Sleeps until a socket is ready, the state's earliest timer is due, or a
 * signal arrives. */
static void wait_turn(struct relay *r)
{
    bool reading = r->state == RS_STREAM && !changes_held(&r->chg);
    if (reading) nap_before_reading(r);
    struct evloop l;
    wait_for(r, &l, clock_mono_ms());
    evloop_wait(&l, clock_mono_ms());
    if (reading) r->last_wake_us = clock_mono_us();
}

/* ---- set-up -------------------------------------------------------------- */

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
    r->met.start_time_us = clock_unix_us();
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
    r->pub_capped = plugin_parse(c->pg_plugin) == PLUGIN_PGOUTPUT;
    changes_init(&r->chg, c, &r->map, &r->met, (struct sink){send_to_producer, r->prod});
    seed_metrics(&r->met, r->pub_capped);
    if ((c->http_listen && *c->http_listen) || c->pg_heartbeat_interval_ms > 0 ||
        r->pub_capped) {
        struct monitor_config mc = {.conninfo = c->pg_conninfo,
                                    .slot = c->pg_slot,
                                    .interval_ms = c->pg_monitor_interval_ms,
                                    .heartbeat_ms = c->pg_heartbeat_interval_ms,
                                    .publication = r->pub_capped ? c->pg_publication : NULL,
                                    .schema = r->map.schema,
                                    .table = r->map.table};
        if (!(r->mon = monitor_new(&mc))) {
            log_error("out of memory");
            return EXIT_FATAL;
        }
    }
    int code = httpd_from_config(c->http_listen, &r->http);
    if (code != 0) return code;
    if (r->http) publish(r, clock_mono_ms());
    return 0;
}

static void relay_free(struct relay *r)
{
    httpd_stop(r->http);
    monitor_free(r->mon);
    metrics_free(&r->met);
    free(r->text.data);
    changes_free(&r->chg);
    producer_free(r->prod);
    stream_close(r->st);
    tracker_free(r->trk);
    decoder_free(r->dec);
    outbox_map_free(&r->map);
}


/* ---- the states ----------------------------------------------------------
 * Each enter_* sets a state up; each *_step runs one turn of it and says
 * whether the loop should wait before the next (false: go on at once). */

static void finish(struct relay *r, int exit_code)
{
    r->state = RS_DONE;
    r->exit_code = exit_code;
}

/* A fatal error (rc: STEP_FATAL or STEP_USAGE) while a tracker may exist:
 * confirm the ACKed prefix (never past the failure), then stop. */
static void finish_failed(struct relay *r, enum step rc)
{
    producer_poll(r->prod, 0);
    if (r->trk) send_status_ex(r, false, true);
    finish(r, step_exit_code(rc));
}

/* Counts a failed attempt (what: where it failed) and waits for the
 * backoff, which keeps growing until a stream stays healthy. */
static void enter_backoff(struct relay *r, const char *what)
{
    int ms = backoff_next(&r->backoff, rand());
    log_info("%s: attempt %d failed, next in %d ms", what, r->backoff.failures, ms);
    r->next_publish_ms = 0; /* not ready: say so at once */
    r->state = RS_BACKOFF;
    r->state_until_ms = clock_mono_ms() + ms;
}

/* A graceful stop: stop reading, let outstanding deliveries finish. */
static void enter_drain(struct relay *r)
{
    if (!r->trk) { /* nothing was ever streamed */
        finish(r, EXIT_OK);
        return;
    }
    log_info("stopping: draining outstanding deliveries");
    r->state = RS_DRAIN;
    r->state_until_ms = clock_mono_ms() + RELAY_SHUTDOWN_FLUSH_MS;
}

/* The slot setup's view of the relay, for slot_open_stream(). */
static void setup_from_relay(const struct relay *r, struct slot_setup *s)
{
    *s = (struct slot_setup){.cfg = r->cfg,
                             .map = &r->map,
                             .pub_capped = r->pub_capped,
                             .pub_missing_on_stream = r->pub_missing_on_stream,
                             .streamed = r->trk != NULL,
                             .acked_lsn = r->trk ? tracker_flush_lsn(r->trk) : 0,
                             .confirmed_lsn = r->sent_lsn ? r->sent_lsn : r->stored_lsn};
}

/* The stream is open from start: a new session of the tracker (created on
 * the first connection) and of the status. */
static enum step stream_started(struct relay *r, lsn_t start)
{
    if (!r->trk && !(r->trk = tracker_new(start))) {
        log_error("out of memory");
        return STEP_FATAL;
    }
    changes_start(&r->chg, r->trk, r->dec);
    if (start > r->stored_lsn) r->stored_lsn = start;
    r->start_lsn = start;
    r->sent_lsn = start;
    r->received_lsn = 0;
    r->next_status_ms = clock_mono_ms() + r->cfg->pg_status_interval_ms;
    r->streaming = true;
    r->server_stopping = false;
    r->stream_up_ms = clock_mono_ms();
    r->next_publish_ms = 0; /* ready now: say so at once */
    r->stream_err[0] = '\0';
    r->state = RS_STREAM;
    return STEP_OK;
}

/* RS_CONNECT: one attempt at opening the stream. */
static bool connect_step(struct relay *r)
{
    struct slot_setup s;
    setup_from_relay(r, &s);
    enum step rc = slot_open_stream(&s);
    r->st = s.st;
    r->retry_cause = s.retry_cause;
    if (rc == STEP_OK || rc == STEP_BROKEN) {
        r->identity = s.identity;
        r->rewrite_offset = s.rewrite_offset;
        if (s.have_offset) r->stored_lsn = s.stored_lsn;
    }
    if (rc == STEP_BROKEN) {
        metrics_count(&r->met.reconnects, r->retry_cause ? r->retry_cause : "connect_failed",
                      1);
        stream_close(r->st);
        r->st = NULL;
        enter_backoff(r, "connecting to the slot");
        return true;
    }
    if (rc != STEP_OK) {
        finish(r, step_exit_code(rc)); /* logged; nothing to confirm */
        return false;
    }
    if (*r->stop) {
        enter_drain(r);
        return false;
    }
    if (stream_started(r, s.start) != STEP_OK) finish(r, EXIT_FATAL);
    return false;
}

/* The stream broke: drop the transaction that was streaming (it will be
 * sent again) and this stream's decoder, then wait in RS_RECOVER for
 * every event already produced to be reported. */
static void enter_recover(struct relay *r)
{
    metrics_count(&r->met.reconnects, "stream_lost", 1);
    /* Checked on the next connection, with a normal query. */
    r->pub_missing_on_stream =
        r->pub_capped && slot_says_publication_missing(r->stream_err, r->cfg->pg_publication);
    changes_abort_open(&r->chg);
    r->streaming = false;
    r->next_publish_ms = 0; /* not ready: say so at once */
    stream_close(r->st);
    r->st = NULL;
    decoder_free(r->dec);
    if (!(r->dec = decoder_new((enum plugin_kind)plugin_parse(r->cfg->pg_plugin)))) {
        log_error("out of memory");
        finish_failed(r, STEP_FATAL);
        return;
    }
    changes_start(&r->chg, r->trk, r->dec);
    r->state = RS_RECOVER;
    r->next_log_ms = 0;
}

/* RS_RECOVER. Once every event produced is reported, the position they
 * complete is stored: reconnecting from there re-sends nothing that was
 * ACKed, and the tracker starts the new session idle. There is no
 * connection to keep alive meanwhile, so waiting for a broker that is down
 * costs nothing but time. */
static bool recover_step(struct relay *r)
{
    char a[LSN_STRLEN];
    producer_poll(r->prod, 0);
    enum step rc = STEP_OK;
    if (!tracker_failed(r->trk)) rc = changes_resume(&r->chg);
    if (rc == STEP_OK && !tracker_failed(r->trk)) rc = changes_flush_dead_letters(&r->chg);
    bool waiting = producer_outq_len(r->prod) > 0 || rc == STEP_HELD;
    if (waiting && !tracker_failed(r->trk) && rc != STEP_FATAL) {
        if (clock_mono_ms() >= r->next_log_ms) {
            log_info("replication connection lost: waiting for %d outstanding "
                     "deliveries before reconnecting",
                     producer_outq_len(r->prod));
            r->next_log_ms = clock_mono_ms() + 10000;
        }
        return true;
    }
    if (tracker_failed(r->trk) || rc == STEP_FATAL) {
        finish_failed(r, STEP_FATAL);
        return false;
    }
    rc = send_status_ex(r, false, true); /* writes the offset file only */
    if (rc != STEP_OK) {
        finish_failed(r, rc);
        return false;
    }
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(tracker_flush_lsn(r->trk), a)}),
           "reconnecting from %s", a);
    /* The backoff grows until a stream stays up STREAM_HEALTHY_MS. */
    enter_backoff(r, "replication stream lost");
    return true;
}

/* RS_BACKOFF: until its deadline (reports and the monitor are served). */
static bool backoff_step(struct relay *r)
{
    producer_poll(r->prod, 0);
    if (r->pub_lost) {
        finish_failed(r, STEP_FATAL);
        return false;
    }
    if (clock_mono_ms() < r->state_until_ms) return true;
    r->state = RS_CONNECT;
    return false;
}

/* RS_STREAM: one turn; a broken stream goes to RS_RECOVER, a fatal error
 * ends the relay. */
static bool stream_step(struct relay *r)
{
    enum step rc = stream_turn(r);
    if (rc == STEP_OK || rc == STEP_HELD) return true;
    if (rc == STEP_BROKEN) {
        enter_recover(r);
        return false;
    }
    finish_failed(r, rc);
    return false;
}

/* The end of a graceful stop: confirm what was ACKed, end the stream. */
static void confirm_and_finish(struct relay *r)
{
    char a[LSN_STRLEN];
    if (send_status_ex(r, false, true) == STEP_OK && r->st) stream_finish(r->st);
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(r->stored_lsn, a)}),
           "confirmed %s; produced %llu events, %llu ACKed", a,
           (unsigned long long)r->chg.events_produced, (unsigned long long)r->events_acked);
    finish(r, EXIT_OK);
}

/* pgoutput: one more publication check, so that a graceful stop confirms
 * everything ACKed (bounded by FINAL_PROOF_MS; without it the position
 * stays at the last proof and a restart re-delivers the rest). */
static void enter_prove(struct relay *r)
{
    if (!r->pub_capped || !r->mon || r->pub_lost ||
        tracker_flush_lsn(r->trk) <= r->proven_lsn) {
        confirm_and_finish(r);
        return;
    }
    r->proofs_before = r->proofs;
    monitor_check_publication_now(r->mon);
    r->state = RS_PROVE;
    r->state_until_ms = clock_mono_ms() + FINAL_PROOF_MS;
}

/* RS_DRAIN: until every event is reported or the deadline passes. */
static bool drain_step(struct relay *r)
{
    producer_poll(r->prod, 0);
    int left = producer_outq_len(r->prod);
    if (left > 0 && clock_mono_ms() < r->state_until_ms) return true;
    if (left > 0)
        log_warn("%d events not ACKed within %d ms; they will be re-delivered after "
                 "restart",
                 left, RELAY_SHUTDOWN_FLUSH_MS);
    enter_prove(r);
    return false;
}

/* RS_PROVE: until the check answers or FINAL_PROOF_MS pass. */
static bool prove_step(struct relay *r)
{
    producer_poll(r->prod, 0);
    if (r->proofs == r->proofs_before && clock_mono_ms() < r->state_until_ms) return true;
    confirm_and_finish(r);
    return false;
}

/* One turn of the current state. Returns whether to wait before the next. */
static bool step(struct relay *r)
{
    bool stoppable = r->state == RS_CONNECT || r->state == RS_BACKOFF ||
                     r->state == RS_STREAM || r->state == RS_RECOVER;
    if (stoppable && *r->stop) {
        enter_drain(r);
        return false;
    }
    switch (r->state) {
    case RS_CONNECT: return connect_step(r);
    case RS_BACKOFF: return backoff_step(r);
    case RS_STREAM: return stream_step(r);
    case RS_RECOVER: return recover_step(r);
    case RS_DRAIN: return drain_step(r);
    case RS_PROVE: return prove_step(r);
    case RS_DONE: break;
    }
    return false;
}

/* The loop: every wait of the relay happens in wait_turn(). */
static int run_loop(struct relay *r)
{
    r->state = RS_CONNECT;
    while (r->state != RS_DONE) {
        relay_tick(r);
        if (step(r) && r->state != RS_DONE) wait_turn(r);
    }
    return r->exit_code;
}

/* One line with the commit-to-ACK latency of every event ACKed since
 * start (the benchmark reads it; so can an operator). */
static void log_latency_summary(const struct relay *r)
{
    const struct latency_hist *h = &r->chg.commit_to_ack;
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
    if (code == 0) code = run_loop(&r);
    log_latency_summary(&r);
    relay_free(&r);
    return code;
}
