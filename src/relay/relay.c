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

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "config_outbox.h"
#include "config_serde.h"
#include "confirm.h"
#include "evloop.h"
#include "exitcode.h"
#include "log.h"
#include "relayconfirm.h"
#include "relayobs.h"
#include "relaystate.h"
#include "relaytxn.h"

/* Minimum time between two wake-ups of the loop (see wait_turn()): while
 * the stream is live, and while it is a backlog, which a wake-up that
 * found at least BACKLOG_BYTES of it says it is. */
#define WAKE_GAP_US 1000
#define WAKE_GAP_BACKLOG_US 10000
#define BACKLOG_BYTES 65536

/* While an event is held (backpressure), it is tried again at least this
 * often, even without a delivery report (a new topic may wait for the
 * producer's replacement, producer.h). */
#define HELD_RETRY_MS 100

/* The longest wait of one turn, whatever the timers say. */
#define TURN_MAX_MS 1000

/* ---- delivery reports ---------------------------------------------------- */

static void on_delivery(void *ctx, const struct delivery_report *dr)
{
    struct relay *r = ctx;
    if (relaytxn_on(r) && !relaytxn_on_delivery(r, dr)) return;
    if (changes_on_delivery(&r->chg, dr)) r->events_acked++;
}

/* The data path's sink: the producer (in exactly_once, into the open
 * Kafka transaction). */
static int send_to_producer(void *ctx, const struct outbox_event *ev, uint64_t tag,
                            int *kafka_err, char *err, size_t errlen)
{
    struct relay *r = ctx;
    int rc = producer_send(r->prod, ev, tag, kafka_err, err, errlen);
    if (!relaytxn_on(r)) return rc;
    if (rc == PRODUCER_OK) relaytxn_sent(&r->txn);
    /* The transaction failed, not the event: held, and the turn aborts the
     * transaction and streams again from the committed position. */
    if (rc == PRODUCER_ERROR && producer_txn_failed(r->prod)) {
        relaytxn_failed(r, err);
        return PRODUCER_QUEUE_FULL;
    }
    return rc;
}

/* ---- the wait ------------------------------------------------------------ */

/* Whether this turn reads the stream: not while an event waits for room
 * (backpressure) or a Kafka transaction waits for its last ACKs. */
static bool reading_stream(const struct relay *r)
{
    return r->state == RS_STREAM && !changes_held(&r->chg) && !relaytxn_holds_stream(r);
}

/* Builds the turn's wait for the current state into l. */
static void wait_for(struct relay *r, struct evloop *l, int64_t now)
{
    evloop_begin(l, now + TURN_MAX_MS);
    evloop_watch(l, producer_wakeup_fd(r->prod), false);
    evloop_watch(l, registry_wakeup_fd(r->serdes.reg), false); /* a schema arrived */
    if (r->obs.mon) {
        bool out;
        evloop_watch(l, monitor_wait_fd(r->obs.mon, &out), out);
        evloop_until(l, now + monitor_due_in(r->obs.mon, now));
    }
    if (r->obs.http) evloop_until(l, r->obs.next_publish_ms);
    switch (r->state) {
    case RS_STREAM:
        evloop_until(l, relay_status_deadline(r));
        if (r->backoff.failures > 0) evloop_until(l, r->stream_up_ms + STREAM_HEALTHY_MS);
        if (!reading_stream(r)) {
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
     * added. The short gap measured against none and 250 us (librdkafka
     * 2.14.2, three-broker mock, 5,000 events/s, one run each):
     * commit-to-ACK p50 3.7-4.2 ms against 3.1 and 3.3, p99 no better
     * without it, CPU 24-27 against 33-34 ms per 1,000 events
     * (tests/bench/librdkafka.md). */
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
    bool reading = reading_stream(r);
    if (reading) nap_before_reading(r);
    struct evloop l;
    int64_t now = clock_mono_ms();
    wait_for(r, &l, now);
    evloop_wait(&l, now);
    if (r->serdes.reg && evloop_ready(&l, registry_wakeup_fd(r->serdes.reg)))
        registry_wakeup_drain(r->serdes.reg);
    if (reading) r->last_wake_us = clock_mono_us();
}

/* ---- set-up -------------------------------------------------------------- */

int relay_init(struct relay *r, const struct config *c, volatile sig_atomic_t *stop)
{
    char err[1024];
    memset(r, 0, sizeof(*r));
    r->cfg = c;
    r->stop = stop;
    metrics_init(&r->met);
    r->met.version = OUTBOXD_VERSION;
    r->met.plugin = plugin_name(c->pg_plugin);
    r->met.slot = c->pg_slot;
    r->met.start_time_us = clock_unix_us();
    if (config_outbox_set(c, &r->outboxes, err, sizeof(err)) != 0) {
        log_error("%s", err);
        return EXIT_USAGE;
    }
    if (!(r->tables = outbox_set_tables(&r->outboxes)) ||
        !(r->pub_schemas = outbox_set_array(&r->outboxes, false)) ||
        !(r->pub_tables = outbox_set_array(&r->outboxes, true))) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    if (!(r->dec = decoder_new(c->pg_plugin))) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    if (!(r->prod = producer_new(c, on_delivery, r, err, sizeof(err)))) {
        log_error("%s", err);
        return EXIT_USAGE;
    }
    backoff_init(&r->backoff, c->pg_retry_min_ms, c->pg_retry_max_ms);
    outage_init(&r->pg_outage, "postgres", NULL, OUTAGE_EVERY_MS);
    /* pgoutput: the monitor proves the outbox is still published, and
     * nothing is confirmed beyond what it proved (confirm.h). */
    confirmer_init(&r->confirm, c->offsets_file, c->pg_status_interval_ms,
                   c->pg_plugin == PLUGIN_PGOUTPUT, confirm_io_stream(&r->st));
    changes_init(&r->chg, c, &r->outboxes, &r->met, (struct sink){send_to_producer, r});
    if (config_serde_set(c, &r->serdes, err, sizeof(err)) != 0) {
        log_error("%s", err);
        return EXIT_USAGE;
    }
    changes_set_serdes(&r->chg, &r->serdes);
    ktxn_init(&r->txn.kt, (uint64_t)c->delivery_txn_max_events, c->delivery_txn_max_ms);
    relay_seed_metrics(&r->met, r->confirm.pub_capped);
    if ((c->http_listen && *c->http_listen) || c->pg_heartbeat_interval_ms > 0 ||
        r->confirm.pub_capped) {
        struct monitor_config mc = {.conninfo = c->pg_conninfo,
                                    .slot = c->pg_slot,
                                    .interval_ms = c->pg_monitor_interval_ms,
                                    .heartbeat_ms = c->pg_heartbeat_interval_ms,
                                    .publication =
                                        r->confirm.pub_capped ? c->pg_publication : NULL,
                                    .schemas = r->pub_schemas,
                                    .tables = r->pub_tables};
        if (!(r->obs.mon = monitor_new(&mc))) {
            log_error("out of memory");
            return EXIT_FATAL;
        }
    }
    int code = httpd_from_config(c->http_listen, &c->http_addr, &r->obs.http);
    if (code != 0) return code;
    if (r->obs.http) relay_publish(r, clock_mono_ms());
    return 0;
}

void relay_free(struct relay *r)
{
    httpd_stop(r->obs.http);
    monitor_free(r->obs.mon);
    metrics_free(&r->met);
    free(r->obs.text.data);
    changes_free(&r->chg);
    serde_set_free(&r->serdes);
    producer_free(r->prod);
    stream_close(r->st);
    tracker_free(r->trk);
    decoder_free(r->dec);
    outbox_set_free(&r->outboxes);
    free(r->tables);
    free(r->pub_schemas);
    free(r->pub_tables);
}

bool relay_turn(struct relay *r)
{
    relay_tick(r);
    return relay_step(r);
}

/* The loop: every wait of the relay happens in wait_turn(). */
static int run_loop(struct relay *r)
{
    r->state = RS_CONNECT;
    while (r->state != RS_DONE)
        if (relay_turn(r) && r->state != RS_DONE) wait_turn(r);
    return r->exit_code;
}

int relay_run(const struct config *c, volatile sig_atomic_t *stop, bool *slot_lost)
{
    struct relay r;
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int code = relay_init(&r, c, stop);
    /* Fail fast on set-up mistakes (wal_level, role, outbox table,
     * publication); an unreachable server is left to the retry loop. */
    if (code == 0 && (code = check_run(c, true, CHECK_SCOPE_STARTUP)) != 0)
        code = code == EXIT_USAGE ? EXIT_USAGE : EXIT_FATAL;
    if (code == 0) code = run_loop(&r);
    if (slot_lost) *slot_lost = r.slot_lost;
    relay_log_latency(&r);
    relay_free(&r);
    return code;
}
