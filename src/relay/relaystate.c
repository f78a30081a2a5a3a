/*
 * relaystate.c - what each state of the relay's loop does in one turn
 * (enum relay_state, relay_int.h): connecting, streaming (with
 * backpressure), recovering from a broken stream, the reconnect backoff,
 * and a graceful stop's drain and last publication proof. None of them
 * waits: relay.c's loop does, once per turn, for what the state needs.
 * It changes the loop's state and struct relay_standby (relay_int.h).
 */
#include "relaystate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "exitcode.h"
#include "log.h"
#include "outage.h"
#include "relayconfirm.h"
#include "relayobs.h"
#include "relaytxn.h"
#include "replproto.h"
#include "slotsetup.h"
#include "standby.h"

/* While standing by, "still standing by" is logged this often. */
#define STANDBY_LOG_MS 300000

/* ---- the fence (standby.h) ------------------------------------------------ */

/* When the server last heard from this stream at the latest: its last
 * status, or its start (monotonic ms). */
static int64_t last_status_or_start(const struct relay *r)
{
    return r->confirm.last_status_ms > r->stream_up_ms ? r->confirm.last_status_ms
                                                       : r->stream_up_ms;
}

/* Whether the stream is past its fence: its last status (or its start)
 * is older than fence_ms, so the server may have cut it and given the
 * slot to another instance. Read before every frame is handed on. */
static bool past_fence(const struct relay *r)
{
    return standby_fenced(clock_mono_ms(), last_status_or_start(r), r->standby.fence_ms);
}

/* The stream is past its fence: nothing more of it goes to Kafka. Says
 * what was in flight and who delivers it; STEP_BROKEN drops the
 * connection (enter_recover()), after which the slot is either free again
 * or held by the other instance (standing by). */
static enum step fence_stream(struct relay *r)
{
    char a[LSN_STRLEN];
    int64_t last = last_status_or_start(r);
    uint64_t inflight = r->trk ? tracker_pending_events(r->trk) : 0;
    lsn_t confirmed = r->confirm.sent_lsn ? r->confirm.sent_lsn : r->confirm.stored_lsn;
    r->standby.fenced = true;
    snprintf(r->stream_err, sizeof(r->stream_err), "replication stream fenced after a stall");
    log_kv(LOG_WARN, LOG_FIELDS({"lsn", lsn_format(confirmed, a)}),
           "fenced: no status has gone to the server for %lld ms (this process did not "
           "run: stopped, frozen or starved), more than the fence of %lld ms (3/4 of the "
           "walsender's wal_sender_timeout): the server may have cut this stream and given "
           "slot \"%s\" to another instance. Nothing more is read from this stream: "
           "dropping the connection. %llu events were in flight (received, not reported "
           "ACKed: those already handed to librdkafka may still be delivered, as "
           "duplicates); the slot is confirmed up to %s, and the instance that holds the "
           "slot delivers everything after it again",
           (long long)(clock_mono_ms() - last), (long long)r->standby.fence_ms,
           r->cfg->pg_slot, (unsigned long long)inflight, a);
    return STEP_BROKEN;
}

/* ---- streaming ----------------------------------------------------------- */

/* Handles one frame of the stream: a keepalive (answered at once when the
 * server asks) or an XLogData frame for the data path. STEP_OK, STEP_HELD
 * (the frame's event waits for room: read nothing more), STEP_BROKEN (the
 * reply could not be sent) or STEP_FATAL. */
static enum step relay_on_frame(struct relay *r, const struct repl_frame *f)
{
    confirmer_received(&r->confirm, f->wal_end);
    if (f->kind == RF_KEEPALIVE) {
        tracker_keepalive(r->trk, f->wal_end);
        return f->reply_requested ? relay_send_status(r, false) : STEP_OK;
    }
    return changes_on_data(&r->chg, f);
}

/* One CopyData payload, parsed, for relay_on_frame(). */
static enum step on_frame(struct relay *r, const char *buf, int len)
{
    char err[512];
    struct repl_frame f;
    if (repl_parse_frame(buf, (size_t)len, &f, err, sizeof(err)) != 0) {
        log_error("replication protocol: %s", err);
        return STEP_FATAL;
    }
    return relay_on_frame(r, &f);
}

/* Reads and handles up to READ_BATCH frames; stops at the first that is
 * not STEP_OK (and at STEP_HELD: the held event borrows the stream's
 * buffer, which the next read would reuse). The wall clock is read once,
 * at the turn's first frame: every frame of the turn counts as received
 * then (changes.h, the stages). */
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
        /* A stall may have begun anywhere, even inside this batch. */
        if (past_fence(r)) return fence_stream(r);
        if (i == 0) changes_received_at(&r->chg, clock_unix_us());
        r->wake_bytes += (size_t)len;
        enum step st = on_frame(r, buf, len);
        if (st != STEP_OK) return st;
    }
    return STEP_OK;
}

/* What ends a stream besides the stream itself: a failed event, the lost
 * publication, a server shutting down, librdkafka giving up. */
/* With hot_standby and hot_standby_yield: whether this active instance
 * has reached no Kafka broker for the yield, and so gives the slot up to a
 * standby that may (standby.h); says so when it does. */
static bool yield_to_standby(struct relay *r)
{
    const struct config *c = r->cfg;
    if (!c->pg_hot_standby || c->pg_hot_standby_yield_ms <= 0) return false;
    int64_t lost = standby_kafka_lost(producer_brokers_up(r->prod), clock_mono_ms(),
                                      &r->standby.kafka_lost_since_ms);
    if (!standby_should_yield(lost, c->pg_hot_standby_yield_ms)) return false;
    log_error("no Kafka broker reachable for %lld ms while holding slot \"%s\" ([postgres] "
              "hot_standby_yield = %lld ms): stopping (exit 1) so that a standby instance "
              "that reaches Kafka takes the slot over; nothing past the last ACK is "
              "confirmed, and a restarted instance stands by",
              (long long)lost, c->pg_slot, (long long)c->pg_hot_standby_yield_ms);
    return true;
}

static enum step stream_health(struct relay *r)
{
    char err[1536]; /* a refusal: librdkafka's reason (512) and its fix */
    if (tracker_failed(r->trk) || r->obs.pub_lost) return STEP_FATAL;
    if (relay_server_stopping(&r->obs)) {
        /* A walsender of a shutting-down server waits until the client
         * has confirmed everything sent; with the monitor gone (fast
         * shutdown ends it first) nothing past the last publication
         * check can be confirmed, so the server would wait forever.
         * Ending the stream lets it stop; the rest is re-delivered. */
        log_warn("the server is shutting down: ending the replication stream, "
                 "confirmed up to the last publication check");
        return STEP_BROKEN;
    }
    /* (A standby's wait resets the backoff, not the outage it followed.) */
    if ((r->backoff.failures > 0 || r->pg_outage.down) &&
        clock_mono_ms() - r->stream_up_ms >= STREAM_HEALTHY_MS) {
        char line[1024];
        if (outage_ok(&r->pg_outage, clock_mono_ms(), line, sizeof(line)))
            log_info("%s; the replication stream has stayed up for %d ms: healthy again",
                     line, STREAM_HEALTHY_MS);
        else
            log_info("the replication stream has stayed up for %d ms: healthy again",
                     STREAM_HEALTHY_MS);
        backoff_reset(&r->backoff);
        relay_publish_soon(&r->obs);
    }
    if (yield_to_standby(r)) return STEP_FATAL;
    if (producer_fatal(r->prod, err, sizeof(err))) {
        if (relaytxn_on(r)) return relaytxn_fatal(r, err);
        log_error("kafka producer failed: %s", err);
        return STEP_FATAL;
    }
    if (producer_refused(r->prod, err, sizeof(err))) {
        log_error("kafka: %s; stopping without confirming anything not ACKed (exit %d)",
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
    if (past_fence(r)) return fence_stream(r); /* not even the held event */
    if (changes_held(&r->chg)) {
        producer_poll(r->prod, 0);
        rc = changes_resume(&r->chg);
    }
    if (rc == STEP_OK && !relaytxn_holds_stream(r)) rc = read_frames(r);
    /* what this turn produced was handed over by now: before any of its
     * delivery reports is served (one clock read, only if anything was) */
    if (changes_produced_pending(&r->chg)) changes_produced_at(&r->chg, clock_unix_us());
    producer_poll(r->prod, 0);
    if (rc == STEP_OK) rc = changes_flush_dead_letters(&r->chg);
    if (rc == STEP_OK || rc == STEP_HELD) {
        enum step t = relaytxn_turn(r); /* exactly_once: commit when due */
        if (t != STEP_OK) rc = t;
    }
    if (rc != STEP_OK && rc != STEP_HELD) return rc;
    enum step health = stream_health(r);
    if (health != STEP_OK) return health;
    enum step st = relay_status_if_due(r);
    return st != STEP_OK ? st : rc;
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
    relaytxn_fail(r);
    if (r->trk) relay_send_status_ex(r, false, true);
    finish(r, step_exit_code(rc));
}

/* Counts a failed attempt (what: where it failed) and waits for the
 * backoff, which keeps growing until a stream stays healthy. */
static void enter_backoff(struct relay *r, const char *what, const char *why)
{
    int ms = backoff_next(&r->backoff, rand());
    char cause[768], line[1024];
    log_debug("%s: attempt %d failed, next in %d ms", what, r->backoff.failures, ms);
    /* Said at once for the first failure, then once per OUTAGE_EVERY_MS
     * (outage.h); the reconnects counter counts each. */
    snprintf(cause, sizeof(cause), "%s%s%s", what, why && *why ? ": " : "", why ? why : "");
    if (outage_fail(&r->pg_outage, clock_mono_ms(), cause, line, sizeof(line)))
        log_warn("%s; next attempt in %d ms", line, ms);
    relay_publish_soon(&r->obs); /* not ready: say so at once */
    r->state = RS_BACKOFF;
    r->state_until_ms = clock_mono_ms() + ms;
}

/* The slot is held by another process (its walsender pid, 0: unknown):
 * stand by, checking again every standby_check_ms(), which is not a
 * failure (the backoff starts over). Said when it starts, when the holder
 * changes and every STANDBY_LOG_MS. */
static void enter_standby(struct relay *r, int pid)
{
    const struct config *c = r->cfg;
    int64_t now = clock_mono_ms();
    int every = standby_check_ms(c->pg_retry_max_ms);
    bool changed = pid != 0 && pid != r->standby.holder_pid;
    if (!r->standby.held) {
        r->standby.since_ms = now;
        relay_publish_soon(&r->obs); /* say so at once */
        if (relaytxn_on(r)) relaytxn_stand_by(r);
    }
    if (!r->standby.held || changed || now >= r->standby.log_ms) {
        if (c->pg_hot_standby)
            log_info("standing by: replication slot \"%s\" is held by another process "
                     "(pid %d)%s; checking every %d ms, taking it over when it is free",
                     c->pg_slot, pid ? pid : r->standby.holder_pid,
                     r->standby.held ? " (still)" : "", every);
        else
            log_warn("replication slot \"%s\" is in use by another process (pid %d): "
                     "waiting for it, checking every %d ms. If that is another outboxd "
                     "instance sharing the slot, set [postgres] hot_standby = true in both "
                     "(README \"Hot standby\")",
                     c->pg_slot, pid ? pid : r->standby.holder_pid, every);
        r->standby.log_ms = now + STANDBY_LOG_MS;
    }
    r->standby.held = true;
    if (pid) r->standby.holder_pid = pid;
    backoff_reset(&r->backoff);
    r->state = RS_BACKOFF;
    r->state_until_ms = now + every;
}

/* The slot is lost (slotsetup.c logged why). With on_slot_loss = repair
 * the relay ends at once (main.c repairs); with halt, an operator must act:
 * the relay streams nothing but keeps /readyz (503, the reason) and
 * /metrics (outboxd_slot_lost 1) up for halt_linger, so the alert fires and
 * whoever looks sees why, then exits 2. Nothing is retried. */
static void enter_halted(struct relay *r)
{
    const struct config *c = r->cfg;
    if (c->pg_on_slot_loss != SLOT_LOSS_HALT || c->pg_halt_linger_ms <= 0 ||
        !*c->http_listen) {
        finish(r, EXIT_USAGE);
        return;
    }
    log_info("halted: serving /readyz and /metrics with the reason for %lld s, then exiting "
             "with status 2 ([postgres] halt_linger)",
             (long long)(c->pg_halt_linger_ms / 1000));
    relay_publish_soon(&r->obs); /* say so at once */
    r->state = RS_HALTED;
    r->state_until_ms = clock_mono_ms() + c->pg_halt_linger_ms;
}

/* RS_HALTED: until halt_linger passed or a stop; exit 2 either way. */
static bool halted_step(struct relay *r)
{
    producer_poll(r->prod, 0);
    if (!*r->stop && clock_mono_ms() < r->state_until_ms) return true;
    finish(r, EXIT_USAGE);
    return false;
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
    r->state_until_ms = clock_mono_ms() + PRODUCER_SHUTDOWN_FLUSH_MS;
}

/* The slot setup's view of the relay, for slot_open_stream(). */
static void setup_from_relay(const struct relay *r, struct slot_setup *s)
{
    *s = (struct slot_setup){.cfg = r->cfg,
                             .outboxes = &r->outboxes,
                             .pub_capped = r->confirm.pub_capped,
                             .pub_missing_on_stream = r->pub_missing_on_stream,
                             .streamed = r->trk != NULL,
                             .acked_lsn = r->trk ? tracker_flush_lsn(r->trk) : 0,
                             .confirmed_lsn = r->confirm.sent_lsn ? r->confirm.sent_lsn
                                                                  : r->confirm.stored_lsn,
                             .position = relaytxn_on(r) ? relaytxn_position : NULL,
                             .position_ctx = (void *)r};
}

/* The stream started: a standby (s) takes the slot over. */
static void take_slot_over(struct relay_standby *s)
{
    if (s->held)
        log_info("the slot is free: taking it over after standing by for %lld ms",
                 (long long)(clock_mono_ms() - s->since_ms));
    s->held = false;
    s->holder_pid = 0;
    s->kafka_lost_since_ms = 0;
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
    confirmer_stream_started(&r->confirm, start, clock_mono_ms());
    take_slot_over(&r->standby);
    r->streaming = true;
    r->stream_up_ms = clock_mono_ms();
    relay_stream_started(&r->obs); /* ready now: say so at once */
    r->stream_err[0] = '\0';
    r->state = RS_STREAM;
    return STEP_OK;
}

/* A stream was prepared with identity and plan (resume_plan()); streamed:
 * a stream ran before in this process. The confirmer takes the stored
 * position, the changes the skip inside a transaction (none on a first
 * stream without one), exactly_once its committed position. */
static void relay_take_plan(struct relay *r, const struct offset_state *identity,
                            const struct resume_plan *p, bool streamed)
{
    confirm_from_plan(&r->confirm, identity, p);
    if (p->resume_inside)
        changes_skip_first(&r->chg, p->progress);
    else if (!streamed)
        changes_skip_first(&r->chg, (struct tracker_progress){0, 0});
    if (relaytxn_on(r))
        relaytxn_started(r, identity, p->start, resume_stream_from(p, false, 0),
                         p->resume_inside ? &p->progress : NULL);
}

/* RS_CONNECT: one attempt at opening the stream. */
static bool connect_step(struct relay *r)
{
    struct slot_setup s;
    setup_from_relay(r, &s);
    enum step rc = slot_open_stream(&s);
    r->st = s.st;
    r->retry_cause = s.retry_cause;
    if (s.prepared) relay_take_plan(r, &s.identity, &s.plan, s.streamed);
    if (rc == STEP_BROKEN) {
        metrics_count(&r->met.reconnects, r->retry_cause ? r->retry_cause : "connect_failed",
                      1);
        stream_close(r->st);
        r->st = NULL;
        if (r->retry_cause && strcmp(r->retry_cause, "slot_in_use") == 0) {
            enter_standby(r, s.holder_pid);
            return true;
        }
        r->standby.held = false;
        enter_backoff(r, "connecting to the slot", s.retry_err);
        return true;
    }
    r->standby.fence_ms = standby_fence_ms(s.sender_timeout_ms);
    if (rc != STEP_OK) {
        r->slot_lost = s.slot_lost;
        snprintf(r->slot_lost_reason, sizeof(r->slot_lost_reason), "%s", s.lost_reason);
        if (r->slot_lost) {
            enter_halted(r);
            return false;
        }
        finish(r, step_exit_code(rc)); /* logged; nothing to confirm */
        return false;
    }
    if (*r->stop) {
        enter_drain(r);
        return false;
    }
    if (stream_started(r, s.plan.start) != STEP_OK) finish(r, EXIT_FATAL);
    return false;
}

/* The stream broke: drop the transaction that was streaming (it will be
 * sent again) and this stream's decoder, then wait in RS_RECOVER for
 * every event already produced to be reported. */
static void enter_recover(struct relay *r)
{
    metrics_count(&r->met.reconnects, r->standby.fenced ? "fenced" : "stream_lost", 1);
    r->standby.fenced = false;
    /* Checked on the next connection, with a normal query. */
    r->pub_missing_on_stream =
        r->confirm.pub_capped &&
        slot_says_publication_missing(r->stream_err, r->cfg->pg_publication);
    bool eos = relaytxn_on(r);
    if (!eos) changes_abort_open(&r->chg);
    r->streaming = false;
    relay_publish_soon(&r->obs); /* not ready: say so at once */
    stream_close(r->st);
    r->st = NULL;
    decoder_free(r->dec);
    if (!(r->dec = decoder_new(r->cfg->pg_plugin))) {
        log_error("out of memory");
        finish_failed(r, STEP_FATAL);
        return;
    }
    if (eos) {
        /* exactly_once: what is not committed is aborted and streamed
         * again from the committed position (relaytxn.h). */
        if (relaytxn_reset(r) != STEP_OK) {
            finish_failed(r, STEP_FATAL);
            return;
        }
        changes_start(&r->chg, NULL, r->dec);
        enter_backoff(r, "replication stream lost", r->stream_err);
        return;
    }
    changes_start(&r->chg, r->trk, r->dec);
    r->state = RS_RECOVER;
    r->recover_since_ms = clock_mono_ms();
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
        /* Once at once, then once per outage interval (outage.h): a broker
         * down for an hour is 120 lines, not 360, and each says how long. */
        int64_t now = clock_mono_ms();
        if (now >= r->next_log_ms) {
            char d[32];
            if (r->next_log_ms == 0)
                log_info("replication connection lost: waiting for %d outstanding "
                         "deliveries before reconnecting",
                         producer_outq_len(r->prod));
            else
                log_info("replication connection lost %s ago: still waiting for %d "
                         "outstanding deliveries before reconnecting",
                         outage_duration(now - r->recover_since_ms, d, sizeof d),
                         producer_outq_len(r->prod));
            r->next_log_ms = now + OUTAGE_EVERY_MS;
        }
        return true;
    }
    if (tracker_failed(r->trk) || rc == STEP_FATAL) {
        finish_failed(r, STEP_FATAL);
        return false;
    }
    rc = relay_send_status_ex(r, false, true); /* writes the offset file only */
    if (rc != STEP_OK) {
        finish_failed(r, rc);
        return false;
    }
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(tracker_flush_lsn(r->trk), a)}),
           "reconnecting from %s", a);
    /* The backoff grows until a stream stays up STREAM_HEALTHY_MS. */
    enter_backoff(r, "replication stream lost", r->stream_err);
    return true;
}

/* RS_BACKOFF: until its deadline (reports and the monitor are served). */
static bool backoff_step(struct relay *r)
{
    producer_poll(r->prod, 0);
    if (r->obs.pub_lost) {
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
    char skipped[96] = "", kept[128] = "", b[LSN_STRLEN];
    if (relay_send_status_ex(r, false, true) == STEP_OK && r->st) stream_finish(r->st);
    if (r->chg.events_skipped)
        snprintf(skipped, sizeof(skipped), ", %llu skipped as ACKed before the restart",
                 (unsigned long long)r->chg.events_skipped);
    if (r->confirm.stored_has_progress)
        snprintf(kept, sizeof(kept),
                 "; the offset file keeps the first %llu events of transaction %s as ACKed",
                 (unsigned long long)r->confirm.stored_progress.acked,
                 lsn_format(r->confirm.stored_progress.txn_lsn, b));
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(r->confirm.stored_lsn, a)}),
           "confirmed %s; produced %llu events, %llu ACKed%s%s", a,
           (unsigned long long)r->chg.events_produced, (unsigned long long)r->events_acked,
           skipped, kept);
    finish(r, EXIT_OK);
}

/* pgoutput: one more publication check, so that a graceful stop confirms
 * everything ACKed (bounded by FINAL_PROOF_MS; without it the position
 * stays at the last proof and a restart re-delivers the rest). */
static void enter_prove(struct relay *r)
{
    if (!r->confirm.pub_capped || !r->obs.mon || r->obs.pub_lost ||
        tracker_flush_lsn(r->trk) <= r->confirm.proven_lsn) {
        confirm_and_finish(r);
        return;
    }
    r->proofs_before = r->obs.proofs;
    monitor_check_publication_now(r->obs.mon);
    r->state = RS_PROVE;
    r->state_until_ms = clock_mono_ms() + FINAL_PROOF_MS;
}

/* RS_DRAIN: until every event is reported or the deadline passes. As in
 * RS_RECOVER, what reports leave to do is done too: the dead letter of a
 * delivery refused meanwhile is written, and an event held for room is
 * sent (no frame is read). Left undone, the offset file would count the
 * transaction's events only up to it, and the restart would send the ACKed
 * ones after it again (the simulator's seed 273, tests/sim). */
static bool drain_step(struct relay *r)
{
    producer_poll(r->prod, 0);
    enum step rc = tracker_failed(r->trk) ? STEP_FATAL : changes_resume(&r->chg);
    if (rc == STEP_OK) rc = changes_flush_dead_letters(&r->chg);
    int left = producer_outq_len(r->prod);
    bool more = left > 0 || rc == STEP_HELD || deadletter_busy(&r->chg.dlq);
    if (rc == STEP_FATAL) { /* the tracker failed, or a dead letter cannot be written */
        finish_failed(r, rc);
        return false;
    }
    if (more && clock_mono_ms() < r->state_until_ms) return true;
    if (left > 0)
        log_warn("%d events not ACKed within %d ms; they will be re-delivered after "
                 "restart",
                 left, PRODUCER_SHUTDOWN_FLUSH_MS);
    relaytxn_finish(r); /* exactly_once: commit what is open, or abort it */
    enter_prove(r);
    return false;
}

/* RS_PROVE: until the check answers or FINAL_PROOF_MS pass. */
static bool prove_step(struct relay *r)
{
    producer_poll(r->prod, 0);
    if (r->obs.proofs == r->proofs_before && clock_mono_ms() < r->state_until_ms)
        return true;
    confirm_and_finish(r);
    return false;
}

/* One turn of the current state. Returns whether to wait before the next. */
bool relay_step(struct relay *r)
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
    case RS_HALTED: return halted_step(r);
    case RS_DONE: break;
    }
    return false;
}

