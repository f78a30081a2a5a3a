/*
 * relaytxn.c - exactly_once in the logical relay (see relaytxn.h): the
 * transactional producer's start, commits paced by ktxn.h, the confirm
 * cap, and the abort that starts the stream over. It changes struct
 * relay_txn (relay_int.h); nothing else does.
 */
#include "relaytxn.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "progress.h"
#include "relay_int.h"

/* The longest wait of one commit or abort on the event loop. The loop
 * sends no status meanwhile, so it stays well under wal_sender_timeout
 * (60 s by default). Every message is ACKed before a commit starts, so a
 * commit waits for one record and EndTxn: milliseconds, unless a broker
 * fails right then. */
#define TXN_WAIT_MS 10000

/* init_transactions at start: it waits for the broker to end an older
 * instance's transaction (fenced: aborted), and for a transaction
 * coordinator (none while its log's partition is below
 * min.insync.replicas). The loop does not run meanwhile, so a stop waits
 * for it: a failed attempt goes through the reconnect backoff and tries
 * again, with a fresh client. */
#define TXN_INIT_MS TXN_WAIT_MS

bool relaytxn_on(const struct relay *r)
{
    return r->cfg->delivery_mode == DELIVERY_EXACTLY_ONCE;
}

/* Makes the transactional producer: r->txn.id from the configuration or
 * outboxd-<system>-<slot>. */
static enum step init_producer(struct relay *r, const char *system)
{
    char err[1024];
    const struct config *c = r->cfg;
    if (c->delivery_transactional_id && *c->delivery_transactional_id)
        snprintf(r->txn.id, sizeof(r->txn.id), "%s", c->delivery_transactional_id);
    else
        snprintf(r->txn.id, sizeof(r->txn.id), "outboxd-%s-%s", system, c->pg_slot);
    int rc = producer_txn_init(r->prod, r->txn.id, TXN_INIT_MS, err, sizeof(err));
    if (rc == PRODUCER_TXN_FATAL) {
        log_error("%s (transactional.id %s)", err, r->txn.id);
        return STEP_FATAL;
    }
    if (rc != PRODUCER_TXN_OK) {
        log_warn("%s (transactional.id %s): trying again", err, r->txn.id);
        r->retry_cause = "kafka_unavailable";
        return STEP_BROKEN;
    }
    log_info("kafka: transactional producer %s ready (exactly_once; an older instance "
             "with this id is fenced)",
             r->txn.id);
    return STEP_OK;
}

/* The progress topic's record for r->txn.id, else the offset file's. */
static enum step read_stored(struct relay *r, struct offset_state *out, int *have)
{
    char err[1024], a[LSN_STRLEN];
    const struct config *c = r->cfg;
    if (progress_topic_ensure(c, c->delivery_progress_topic, TXN_WAIT_MS, err,
                              sizeof(err)) != 0 ||
        (*have = progress_read(c, c->delivery_progress_topic, r->txn.id,
                               TXN_WAIT_MS, out, err, sizeof(err))) < 0) {
        log_warn("%s: trying again", err);
        r->retry_cause = "kafka_unavailable";
        return STEP_BROKEN;
    }
    if (*have) {
        log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(out->lsn, a)}),
               "the progress topic %s holds %s for %s", c->delivery_progress_topic, a,
               r->txn.id);
        return STEP_OK;
    }
    *have = offset_read(c->offsets_file, out, err, sizeof(err));
    if (*have < 0) {
        log_error("%s", err);
        return STEP_USAGE;
    }
    log_info("the progress topic %s has no record for %s: the position comes from the "
             "offset file %s (%s)",
             c->delivery_progress_topic, r->txn.id, c->offsets_file,
             *have ? "present" : "absent");
    return STEP_OK;
}

enum step relaytxn_position(void *relay, const char *system, struct offset_state *out,
                            int *have)
{
    struct relay *r = relay;
    if (r->txn.kt.have_committed) { /* a restart after an abort: what committed */
        enum step rc = producer_txn_ready(r->prod) ? STEP_OK : init_producer(r, system);
        *out = r->txn.kt.committed;
        *have = 1;
        return rc;
    }
    enum step rc = init_producer(r, system);
    return rc == STEP_OK ? read_stored(r, out, have) : rc;
}

void relaytxn_started(struct relay *r, const struct offset_state *identity, lsn_t start,
                      lsn_t from, const struct tracker_progress *progress)
{
    struct tracker_progress none = {0, 0};
    struct offset_state pos = ktxn_position(identity, from, start, progress != NULL,
                                            progress ? *progress : none);
    ktxn_started(&r->txn.kt, &pos, clock_mono_ms());
}

bool relaytxn_on_delivery(struct relay *r, const struct delivery_report *dr)
{
    if (r->txn.discard) return false; /* an aborted transaction's */
    if (!dr->err) return true;
    if (producer_err_is_poison(dr->err) && !producer_err_is_missing_topic(dr->err) &&
        !r->txn.refused) {
        r->txn.refused = true;
        log_error("kafka: the broker refused event %.*s of transaction %.*s on %s: %s (%s). "
                  "In exactly_once a refused message fails its Kafka transaction, so it "
                  "cannot be dead-lettered: fix the cause (e.g. message.max.bytes) and "
                  "restart; nothing after the last committed transaction is confirmed",
                  (int)dr->event_id.len, dr->event_id.data, (int)dr->commit_lsn.len,
                  dr->commit_lsn.data, dr->topic, producer_err_name(dr->err),
                  dr->reason ? dr->reason : "");
    } else if (!r->txn.broken) {
        snprintf(r->stream_err, sizeof(r->stream_err),
                 "kafka: a delivery failed in the open transaction (%s: %s)",
                 producer_err_name(dr->err), dr->reason ? dr->reason : "");
        r->txn.broken = true;
    }
    return false;
}

void relaytxn_failed(struct relay *r, const char *why)
{
    if (r->txn.broken) return;
    snprintf(r->stream_err, sizeof(r->stream_err),
             "kafka: the open transaction failed (%.400s): aborting it", why);
    r->txn.broken = true;
}

void relaytxn_sent(struct relay_txn *t)
{
    ktxn_sent(&t->kt, clock_mono_ms());
}

bool relaytxn_holds_stream(const struct relay *r)
{
    return relaytxn_on(r) && r->txn.kt.committing;
}

/* Closes t's transactional client (in p), dropping the reports it serves
 * meanwhile; the next start makes a new one. */
static void discard_client(struct relay_txn *t, struct producer *p)
{
    t->discard = true;
    producer_txn_discard(p);
    t->discard = false;
}

/* [postgres] hot_standby: a client fenced by a newer one with the same
 * transactional.id is the other instance of the pair taking the slot over
 * (after this one stalled: README "Hot standby"); its init_transactions
 * aborted what this one had open. Not fatal: the client is discarded, the
 * stream starts over, finds the slot held and stands by, and a new client
 * is made if this instance takes the slot back. Returns whether it was. */
static bool discard_fenced_client(struct relay *r, const char *err)
{
    if (!r->cfg->pg_hot_standby || !producer_txn_fenced(r->prod)) return false;
    log_warn("%s: another outboxd instance with transactional.id %s took the slot over "
             "([postgres] hot_standby), and the broker aborted this one's open transaction; "
             "its client is discarded (a new one is made at the next take-over)",
             err, r->txn.id);
    discard_client(&r->txn, r->prod);
    /* the other one commits now: read them at the take-over */
    r->txn.kt.have_committed = false;
    return true;
}

void relaytxn_stand_by(struct relay *r)
{
    /* The holder commits from now on: at the take-over the position is the
     * progress topic's again, not what this instance committed last. */
    r->txn.kt.have_committed = false;
    if (!producer_txn_ready(r->prod)) return;
    log_info("exactly_once: standing by, so this instance's transactional client is closed; "
             "a new one is made at the take-over (its init_transactions fences the other "
             "instance's)");
    discard_client(&r->txn, r->prod);
}

/* After a fatal error of the transactional client (err): false when it was
 * fenced or is not authorized (stop), unless hot_standby explains the
 * fence; else the client is replaced (a new one's init_transactions aborts
 * what this one left open) and true. */
static bool replace_failed_client(struct relay *r, const char *err)
{
    char a[LSN_STRLEN];
    if (discard_fenced_client(r, err)) return true;
    if (producer_txn_must_stop(r->prod)) return false;
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", lsn_format(offset_all_acked(&r->txn.kt.committed), a)}),
           "%s: the transactional client %s failed for good; a new one aborts its open "
           "transaction, and the stream starts over from the committed position %s",
           err, r->txn.id, a);
    discard_client(&r->txn, r->prod);
    /* A commit of the old client may have completed at the broker after it
     * gave up waiting (all brokers down during commit_transaction): the
     * position is read again from the progress topic, after the new
     * client's init_transactions has finished or aborted it. */
    r->txn.kt.have_committed = false;
    return true;
}

enum step relaytxn_fatal(struct relay *r, const char *err)
{
    if (replace_failed_client(r, err)) {
        snprintf(r->stream_err, sizeof(r->stream_err), "kafka: the transactional client "
                 "failed and was replaced");
        r->retry_cause = "kafka_unavailable";
        return STEP_BROKEN;
    }
    log_error("kafka producer failed: %s. If another outboxd with transactional.id %s "
              "started, it fenced this one and continues from the last committed position",
              err, r->txn.id);
    return STEP_FATAL;
}

/* Commits the open transaction (or a progress-only one) with the position
 * every reported event completes. */
static enum step commit(struct relay *r)
{
    char err[1024], text[1024], a[LSN_STRLEN];
    struct tracker_progress p = {0, 0};
    bool has = changes_progress(&r->chg, &p);
    /* The commit time of the newest transaction in it, kept with the
     * position for `outboxd repair` (the identity's, until one commits). */
    int64_t ct = tracker_flushed_commit_time(r->trk);
    if (ct) confirmer_commit_time(&r->confirm, ct + PG_EPOCH_OFFSET_US);
    /* With pgoutput no further than the last publication proof: a restart
     * confirms the stored lsn to the slot (the simulator's seed 169). What
     * is all committed never goes back, as the offset file's acked does not
     * (confirmer_acked_to_store()): the tracker starts at the slot's
     * position, and after a restart from a stored acked past it, its flush
     * stays there until the first transaction streamed completes (seed 54:
     * the next restart sent the transactions in between again). */
    lsn_t flush = tracker_flush_lsn(r->trk);
    lsn_t stored = offset_all_acked(&r->txn.kt.committed);
    if (flush < stored) flush = stored;
    lsn_t confirmable = confirm_position(flush, r->confirm.pub_capped, r->confirm.proven_lsn,
                                         r->txn.kt.committed.lsn);
    struct offset_state pos = ktxn_position(&r->confirm.identity, flush, confirmable, has, p);
    if (!offset_format(&pos, text, sizeof(text))) {
        log_error("the progress record does not fit %zu bytes", sizeof(text));
        return STEP_FATAL;
    }
    uint64_t events = r->txn.kt.events;
    int rc = producer_txn_commit(r->prod, r->cfg->delivery_progress_topic, r->txn.id, text,
                                 TXN_WAIT_MS, err, sizeof(err));
    if (rc == PRODUCER_TXN_FATAL) return relaytxn_fatal(r, err);
    if (rc != PRODUCER_TXN_OK) {
        snprintf(r->stream_err, sizeof(r->stream_err), "%.500s", err);
        log_warn("%s", err);
        return STEP_BROKEN;
    }
    ktxn_committed(&r->txn.kt, &pos, clock_mono_ms());
    log_kv(LOG_DEBUG, LOG_FIELDS({"lsn", lsn_format(pos.lsn, a)}),
           "kafka transaction committed: %llu messages, position %s%s",
           (unsigned long long)events, a, pos.has_progress ? " (inside a transaction)" : "");
    return STEP_OK;
}

enum step relaytxn_turn(struct relay *r)
{
    if (!relaytxn_on(r)) return STEP_OK;
    if (r->txn.refused) return STEP_FATAL;
    if (r->txn.broken) return STEP_BROKEN;
    if (!r->txn.kt.committing) {
        if (!ktxn_due(&r->txn.kt, tracker_flush_lsn(r->trk), clock_mono_ms()))
            return STEP_OK;
        r->txn.kt.committing = true;
    }
    if (producer_outq_len(r->prod) > 0 || changes_held(&r->chg)) return STEP_OK;
    return commit(r);
}

void relaytxn_cap(const struct relay *r, struct confirm_view *v)
{
    const struct offset_state *c = &r->txn.kt.committed;
    /* Capped from the first start on, also after the client was replaced
     * (have_committed false): the tracker still counts the events of the
     * transaction that client left open as ACKed, and a new client's
     * init_transactions aborts it. The position known committed may be
     * behind (a commit completed unseen): confirming less is safe. */
    if (!relaytxn_on(r) || !r->txn.kt.started) return;
    lsn_t committed = offset_all_acked(c);
    v->idle = v->idle && v->acked <= committed;
    v->acked = committed < v->acked ? committed : v->acked;
    v->has_progress = c->has_progress;
    v->progress = (struct tracker_progress){c->txn_lsn, c->txn_acked};
}

/* Aborts the open transaction; its reports are served and dropped. */
static enum step abort_open(struct relay *r, int wait_ms)
{
    char err[1024];
    int rc = PRODUCER_TXN_OK;
    r->txn.discard = true;
    if (producer_txn_open(r->prod)) {
        rc = producer_txn_abort(r->prod, wait_ms, err, sizeof(err));
        /* Any failed abort, fatal or not (after a commit_transaction that
         * timed out, librdkafka refuses the abort with _CONFLICT: the commit
         * is still in progress), is left to a new client, whose
         * init_transactions settles what this one left open. */
        if (rc != PRODUCER_TXN_OK && replace_failed_client(r, err)) rc = PRODUCER_TXN_OK;
        if (rc != PRODUCER_TXN_OK) log_error("%s (transactional.id %s)", err, r->txn.id);
    }
    int64_t until = clock_mono_ms() + wait_ms;
    while (producer_outq_len(r->prod) > 0 && clock_mono_ms() < until)
        producer_poll(r->prod, 100);
    producer_poll(r->prod, 0);
    r->txn.discard = false;
    ktxn_aborted(&r->txn.kt);
    return rc == PRODUCER_TXN_OK ? STEP_OK : STEP_FATAL;
}

enum step relaytxn_reset(struct relay *r)
{
    char a[LSN_STRLEN];
    uint64_t events = r->txn.kt.events;
    enum step rc = abort_open(r, TXN_WAIT_MS);
    r->txn.broken = false;
    if (r->trk) changes_abort_open(&r->chg);
    tracker_free(r->trk);
    r->trk = NULL;
    if (rc != STEP_OK) return rc;
    log_kv(LOG_WARN, LOG_FIELDS({"lsn", lsn_format(offset_all_acked(&r->txn.kt.committed), a)}),
           "kafka transaction aborted (%llu messages; read_committed consumers never see "
           "them): starting over from the committed position %s",
           (unsigned long long)events, a);
    return STEP_OK;
}

void relaytxn_finish(struct relay *r)
{
    if (!relaytxn_on(r) || !r->trk || producer_outq_len(r->prod) > 0 || r->txn.broken ||
        r->txn.refused) {
        if (relaytxn_on(r)) relaytxn_fail(r);
        return;
    }
    if (!producer_txn_open(r->prod) &&
        tracker_flush_lsn(r->trk) <= offset_all_acked(&r->txn.kt.committed))
        return;
    if (commit(r) != STEP_OK) relaytxn_fail(r);
}

void relaytxn_fail(struct relay *r)
{
    if (relaytxn_on(r) && producer_txn_open(r->prod)) abort_open(r, 5000);
}
