/*
 * relaystate.c - what each state of the relay's loop does in one turn
 * (enum relay_state, relaystate.h): connecting, streaming (with
 * backpressure), recovering from a broken stream, the reconnect backoff,
 * and a graceful stop's drain and last publication proof. None of them
 * waits: relay.c's loop does, once per turn, for what the state needs.
 */
#include "relaystate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "exitcode.h"
#include "log.h"
#include "relay.h"
#include "relaytxn.h"
#include "slotsetup.h"

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
    confirmer_received(&r->confirm, f.wal_end);
    if (f.kind == RF_KEEPALIVE) {
        tracker_keepalive(r->trk, f.wal_end);
        return f.reply_requested ? send_status(r, false) : STEP_OK;
    }
    return changes_on_data(&r->chg, &f);
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
        if (i == 0) changes_received_at(&r->chg, clock_unix_us());
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
        if (relaytxn_on(r)) return relaytxn_fatal(r, err);
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
    enum step st = status_if_due(r);
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
    r->state_until_ms = clock_mono_ms() + PRODUCER_SHUTDOWN_FLUSH_MS;
}

/* The slot setup's view of the relay, for slot_open_stream(). */
static void setup_from_relay(const struct relay *r, struct slot_setup *s)
{
    *s = (struct slot_setup){.cfg = r->cfg,
                             .map = &r->map,
                             .pub_capped = r->confirm.pub_capped,
                             .pub_missing_on_stream = r->pub_missing_on_stream,
                             .streamed = r->trk != NULL,
                             .acked_lsn = r->trk ? tracker_flush_lsn(r->trk) : 0,
                             .confirmed_lsn = r->confirm.sent_lsn ? r->confirm.sent_lsn
                                                                  : r->confirm.stored_lsn,
                             .position = relaytxn_on(r) ? relaytxn_position : NULL,
                             .position_ctx = (void *)r};
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
    if (s.prepared) {
        r->confirm.identity = s.identity;
        r->confirm.rewrite_offset = s.rewrite_offset;
        if (s.have_offset) r->confirm.stored_lsn = s.stored_lsn;
        if (s.resume_inside) {
            r->confirm.stored_has_progress = true;
            r->confirm.stored_progress = s.resume_progress;
            changes_skip_first(&r->chg, s.resume_progress);
        } else if (!s.streamed) {
            changes_skip_first(&r->chg, (struct tracker_progress){0, 0});
        }
        if (relaytxn_on(r))
            relaytxn_started(r, &s.identity, s.start,
                             s.resume_inside ? &s.resume_progress : NULL);
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
        r->slot_lost = s.slot_lost;
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
        r->confirm.pub_capped &&
        slot_says_publication_missing(r->stream_err, r->cfg->pg_publication);
    bool eos = relaytxn_on(r);
    if (!eos) changes_abort_open(&r->chg);
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
    if (eos) {
        /* exactly_once: what is not committed is aborted and streamed
         * again from the committed position (relaytxn.h). */
        if (relaytxn_reset(r) != STEP_OK) {
            finish_failed(r, STEP_FATAL);
            return;
        }
        changes_start(&r->chg, NULL, r->dec);
        enter_backoff(r, r->stream_err[0] ? r->stream_err : "replication stream lost");
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
    char skipped[96] = "", kept[128] = "", b[LSN_STRLEN];
    if (send_status_ex(r, false, true) == STEP_OK && r->st) stream_finish(r->st);
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
    if (!r->confirm.pub_capped || !r->mon || r->pub_lost ||
        tracker_flush_lsn(r->trk) <= r->confirm.proven_lsn) {
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
                 left, PRODUCER_SHUTDOWN_FLUSH_MS);
    relaytxn_finish(r); /* exactly_once: commit what is open, or abort it */
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
    case RS_DONE: break;
    }
    return false;
}

