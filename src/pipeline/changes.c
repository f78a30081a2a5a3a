/*
 * changes.c - one event's way through the relay, in the order it takes:
 * a frame's payload is decoded, BEGIN/COMMIT drive the tracker, an INSERT
 * into the outbox is mapped and produced, and its delivery report comes
 * back (see changes.h; backpressure holds the event here).
 */
#include "changes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "heartbeat.h"
#include "log.h"

/* prepare_serde() failed: produce_built()'s "built" for it. */
#define SERDE_SUBJECT_FAILED 2

void changes_init(struct changes *c, const struct config *cfg, struct outbox_set *outboxes,
                  struct metrics *met, struct sink out)
{
    memset(c, 0, sizeof(*c));
    c->cfg = cfg;
    c->outboxes = outboxes;
    c->met = met;
    c->out = out;
    deadletter_init(&c->dlq, cfg, met, out);
    met->commit_to_ack = &c->commit_to_ack;
    for (int i = 0; i < STAGE__COUNT; i++) met->stages[i] = &c->stages[i];
    if (cfg->pg_heartbeat_interval_ms > 0) met->heartbeat_rtt = &c->heartbeat_rtt;
}

void changes_free(struct changes *c)
{
    deadletter_free(&c->dlq);
    for (size_t i = 0; c->emit && i < c->outboxes->n; i++) emitmsg_free(c->emit[i]);
    free(c->emit);
    c->emit = NULL;
}

void changes_set_serdes(struct changes *c, struct serde_set *serdes) { c->serdes = serdes; }

const char *changes_serde_waiting(const struct changes *c, int64_t since_ms)
{
    return c->ev_held && c->serde_wait_ms && c->serde_wait_ms <= since_ms ? c->serde_wait
                                                                            : NULL;
}

void changes_start(struct changes *c, struct tracker *trk, struct decoder *dec)
{
    c->trk = trk;
    c->dlq.trk = trk;
    c->dec = dec;
}

/* Records commit-to-receive for the open transaction's events read at
 * recv_us (all of them share the value). */
static void record_received(struct changes *c)
{
    if (c->recv_events && c->recv_us && c->cur_commit_time)
        latency_record_n(&c->stages[STAGE_COMMIT_TO_RECEIVE],
                         c->recv_us - PG_EPOCH_OFFSET_US - c->cur_commit_time, c->recv_events);
    c->recv_events = 0;
}

void changes_received_at(struct changes *c, int64_t now_unix_us)
{
    changes_produced_at(c, now_unix_us);
    record_received(c);
    c->recv_us = now_unix_us;
}

bool changes_produced_pending(const struct changes *c) { return c->batch_events > 0; }

void changes_produced_at(struct changes *c, int64_t now_unix_us)
{
    if (c->batch_events == 0) return;
    if (c->recv_us)
        latency_record_n(&c->stages[STAGE_RECEIVE_TO_PRODUCE], now_unix_us - c->recv_us,
                         c->batch_events);
    /* Sequence numbers are dense: the batch's transactions are a range
     * (those already flushed are not in the tracker any more). */
    for (uint64_t s = c->batch_first_seq; s <= c->batch_last_seq; s++)
        tracker_set_produce_time(c->trk, s, now_unix_us);
    c->batch_events = 0;
}

/* An event of the open transaction went to the producer. */
static void note_produced(struct changes *c)
{
    if (c->batch_events++ == 0) c->batch_first_seq = c->cur_seq;
    c->batch_last_seq = c->cur_seq;
}

void changes_skip_first(struct changes *c, struct tracker_progress p) { c->skip = p; }

/* Whether the open transaction is the one to skip in. */
static bool skipping(const struct changes *c)
{
    return c->skip.acked != 0 && c->cur_seq != 0 && c->cur_commit_lsn == c->skip.txn_lsn;
}

bool changes_skip_pending(const struct changes *c, struct tracker_progress *out)
{
    if (c->skip.acked == 0) return false;
    *out = c->skip;
    return true;
}

bool changes_progress(const struct changes *c, struct tracker_progress *out)
{
    struct tracker_progress skip;
    bool have = c->trk && tracker_progress(c->trk, out);
    if (changes_skip_pending(c, &skip) &&
        (!have || (out->txn_lsn == skip.txn_lsn && out->acked < skip.acked))) {
        *out = skip;
        return true;
    }
    return have;
}

/* A transaction committed at final_lsn begins: is it the one to skip in? */
static void begin_skip(struct changes *c, lsn_t final_lsn)
{
    char a[LSN_STRLEN], b[LSN_STRLEN];
    if (c->skip.acked == 0 || final_lsn < c->skip.txn_lsn) return;
    if (final_lsn == c->skip.txn_lsn) {
        c->skip_seen = 0;
        return;
    }
    log_warn("the offset file says the first %llu events of transaction %s were ACKed, but "
             "transaction %s, committed after it, streams first: nothing is skipped",
             (unsigned long long)c->skip.acked, lsn_format(c->skip.txn_lsn, a),
             lsn_format(final_lsn, b));
    c->skip.acked = 0;
}

/* The transaction being skipped in commits: the skip is over. */
static void end_skip(struct changes *c)
{
    char a[LSN_STRLEN];
    if (!skipping(c)) return;
    if (c->skip_seen < c->skip.acked)
        log_warn("transaction %s has %llu outbox events, fewer than the %llu the offset file "
                 "says were ACKed; all of them were skipped",
                 lsn_format(c->skip.txn_lsn, a), (unsigned long long)c->skip_seen,
                 (unsigned long long)c->skip.acked);
    else
        log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(c->skip.txn_lsn, a)}),
               "skipped the first %llu events of transaction %s: the broker ACKed them "
               "before the restart",
               (unsigned long long)c->skip_seen, a);
    c->skip.acked = 0;
}

/* Whether the next outbox event of the open transaction is one ACKed
 * before the restart; if so it is counted off in the tracker. */
static bool skip_event(struct changes *c)
{
    if (!skipping(c) || c->skip_seen >= c->skip.acked) return false;
    if (tracker_event_skipped(c->trk, c->cur_seq) != 0) return false;
    c->skip_seen++;
    c->events_skipped++;
    return true;
}

static enum step on_begin(struct changes *c, const struct repl_msg *m)
{
    if (c->cur_seq != 0) {
        log_error("protocol error: BEGIN inside an open transaction");
        return STEP_FATAL;
    }
    c->cur_seq = tracker_begin(c->trk, m->u.begin.final_lsn);
    if (c->cur_seq == 0) {
        log_error("out of memory");
        return STEP_FATAL;
    }
    c->cur_commit_lsn = m->u.begin.final_lsn;
    c->cur_commit_time = m->u.begin.commit_time;
    begin_skip(c, m->u.begin.final_lsn);
    c->recv_events = 0;
    tracker_set_commit_time(c->trk, c->cur_seq, m->u.begin.commit_time);
    return STEP_OK;
}

static enum step on_commit(struct changes *c, const struct repl_msg *m)
{
    char a[LSN_STRLEN], b[LSN_STRLEN];
    if (c->cur_seq == 0) {
        log_error("protocol error: COMMIT without BEGIN");
        return STEP_FATAL;
    }
    if (m->u.commit.commit_lsn != c->cur_commit_lsn)
        log_warn("COMMIT lsn %s differs from BEGIN final_lsn %s",
                 lsn_format(m->u.commit.commit_lsn, a), lsn_format(c->cur_commit_lsn, b));
    if (tracker_commit(c->trk, c->cur_seq, m->u.commit.end_lsn) != 0) {
        log_error("protocol error: COMMIT end %s goes backwards",
                  lsn_format(m->u.commit.end_lsn, a));
        return STEP_FATAL;
    }
    record_received(c);
    end_skip(c);
    c->cur_seq = 0;
    return STEP_OK;
}

/* The schema for c->ev is not known yet: held, and why is kept for
 * /readyz and logged once per wait. */
static enum step wait_for_schema(struct changes *c, const char *why)
{
    c->ev_held = true;
    if (c->serde_wait_ms == 0) c->serde_wait_ms = clock_mono_ms();
    if (serde_wait_reason(c->serde_wait, sizeof(c->serde_wait), c->ev_subject, why))
        log_warn("%s; the stream is held until the registry answers", c->serde_wait);
    return STEP_HELD;
}

/* c->ev's value in the registry's wire format, once (a held event is not
 * encoded twice). STEP_OK to send it; STEP_HELD while its schema is not
 * known; else the event was dead-lettered or halted on. */
static enum step encode_event(struct changes *c)
{
    char err[1024];
    enum serde_result r =
        serde_encode(c->ev_serde, c->ev_subject, &c->ev, clock_mono_ms(), err, sizeof(err));
    switch (r) {
    case SERDE_OK:
        c->ev_encoded = true;
        if (c->serde_wait_ms) log_info("the schema of subject \"%s\" is known: the stream "
                                       "goes on", c->ev_subject);
        c->serde_wait_ms = 0;
        c->serde_wait[0] = '\0';
        return STEP_OK;
    case SERDE_WAIT: return wait_for_schema(c, err);
    case SERDE_MISMATCH:
        c->ev_held = false;
        c->serde_wait_ms = 0;
        return deadletter_reject(&c->dlq, c->cur_tag, &c->ev, SERDE_MISMATCH_CODE, err, true,
                                 false);
    case SERDE_FATAL: break;
    }
    c->ev_held = false;
    c->serde_wait_ms = 0;
    return deadletter_reject(&c->dlq, c->cur_tag, &c->ev, SERDE_FATAL_CODE, err, false, false);
}

/* Sends c->ev (counted in the tracker already). A full queue holds it;
 * a permanent error dead-letters or halts on it. */
static enum step send_event(struct changes *c)
{
    char err[512];
    int kafka_err = -1;
    const struct outbox_event *ev = &c->ev;
    if (c->ev_serde && !c->ev_encoded) {
        enum step st = encode_event(c);
        if (st != STEP_OK || !c->ev_encoded) return st;
    }
    int rc = c->out.send(c->out.ctx, ev, c->cur_tag, &kafka_err, err, sizeof(err));
    c->ev_held = rc == PRODUCER_QUEUE_FULL;
    if (c->ev_held) return STEP_HELD;
    if (rc == PRODUCER_OK) {
        note_produced(c);
        c->events_produced++;
        metrics_count(&c->met->produced, ev->topic, 1);
        c->met->produced_bytes +=
            (ev->key_null ? 0 : ev->key.len) + (ev->value_null ? 0 : ev->value.len);
        return STEP_OK;
    }
    return deadletter_reject(
        &c->dlq, c->cur_tag, ev, producer_err_name(kafka_err), err,
        producer_err_is_poison(kafka_err) && !producer_err_is_missing_topic(kafka_err),
        producer_err_is_too_large(kafka_err));
}

/* The serde of map which and the subject of c->ev (built from rel and
 * values) into c->ev_serde and c->ev_subject. 0, or -1 with err: the
 * subject cannot be named (a poison event). */
static int prepare_serde(struct changes *c, int which, const struct relation *rel,
                         const struct col_value *values, int nvalues, char *err, size_t errlen)
{
    c->ev_encoded = false;
    c->ev_serde = c->serdes && c->serdes->by_map ? c->serdes->by_map[which] : NULL;
    if (!c->ev_serde) return 0;
    return serde_subject(c->ev_serde, &c->ev, rel, values, nvalues, c->ev_subject,
                         sizeof(c->ev_subject), err, errlen);
}

/* The event just built into c->ev (built: outbox_event_build()'s result,
 * err its reason) is counted in the open transaction and sent, or
 * dead-lettered or halted on. */
static enum step produce_built(struct changes *c, int built, const char *err)
{
    if (tracker_event_sent(c->trk, c->cur_seq, &c->cur_tag) != 0) {
        log_error("internal: event outside a transaction");
        return STEP_FATAL;
    }
    c->recv_events++;
    if (built == 0) return send_event(c);
    if (built == SERDE_SUBJECT_FAILED)
        return deadletter_reject(&c->dlq, c->cur_tag, &c->ev, SERDE_MISMATCH_CODE, err, true,
                                 false);
    return deadletter_reject(&c->dlq, c->cur_tag, &c->ev, outbox_fault_name(c->ev.fault), err,
                             c->ev.fault != OF_SCHEMA, false);
}

static enum step on_insert(struct changes *c, const struct repl_msg *m)
{
    char err[512];
    const struct relation *rel = m->u.tuple.rel;
    int which = outbox_set_find(c->outboxes, rel);
    if (which < 0) return STEP_OK;
    if (c->cur_seq == 0) {
        log_error("protocol error: INSERT into %s.%s outside a transaction", rel->nspname,
                  rel->relname);
        return STEP_FATAL;
    }
    if (skip_event(c)) return STEP_OK;
    const struct outbox_map *map = &c->outboxes->maps[which];
    int built = outbox_event_build(map, rel, m->u.tuple.values, m->u.tuple.nvalues,
                                   c->cur_commit_lsn, &c->ev, err, sizeof(err));
    outbox_event_set_commit_time(map, &c->ev, c->cur_commit_time);
    if (built == 0 && prepare_serde(c, which, rel, m->u.tuple.values, m->u.tuple.nvalues, err,
                                    sizeof(err)) != 0)
        built = SERDE_SUBJECT_FAILED;
    return produce_built(c, built, err);
}

/* The message reader of map which, made at its first message (NULL on out
 * of memory). */
static struct emitmsg *emit_reader(struct changes *c, int which)
{
    if (!c->emit && !(c->emit = calloc(c->outboxes->n, sizeof(*c->emit)))) return NULL;
    const struct outbox_map *map = &c->outboxes->maps[which];
    if (!c->emit[which]) c->emit[which] = emitmsg_new(map, map->message_prefix);
    return c->emit[which];
}

/* A transactional message of map which's prefix: an event like a row. */
static enum step on_outbox_message(struct changes *c, const struct repl_msg *m, int which)
{
    char err[512];
    if (c->cur_seq == 0) {
        log_error("protocol error: transactional message \"%s\" outside a transaction",
                  m->u.message.prefix);
        return STEP_FATAL;
    }
    struct emitmsg *reader = emit_reader(c, which);
    if (!reader) {
        log_error("out of memory");
        return STEP_FATAL;
    }
    if (skip_event(c)) return STEP_OK;
    const struct outbox_map *map = &c->outboxes->maps[which];
    int built = emitmsg_event_build(reader, map, m->u.message.content, m->u.message.len,
                                    c->cur_commit_lsn, &c->ev, err, sizeof(err));
    outbox_event_set_commit_time(map, &c->ev, c->cur_commit_time);
    const struct relation *rel;
    const struct col_value *vals;
    int nvals;
    emitmsg_last_row(reader, &rel, &vals, &nvals);
    if (built == 0 && prepare_serde(c, which, rel, vals, nvals, err, sizeof(err)) != 0)
        built = SERDE_SUBJECT_FAILED;
    if (built != 0 && c->ev.fault == OF_BAD_MESSAGE) {
        size_t n = strlen(err);
        snprintf(err + n, sizeof(err) - n,
                 " (message prefix \"%s\"; the format is in sql/README.md)",
                 m->u.message.prefix);
    }
    return produce_built(c, built, err);
}

/* A non-transactional message of the outbox's prefix: not an event, since
 * it is written even when the business change rolls back. Counted; the
 * first is logged. */
static enum step on_non_transactional(struct changes *c, const struct repl_msg *m)
{
    char lsn[LSN_STRLEN];
    metrics_count(&c->met->messages_ignored, "non_transactional", 1);
    if (c->nontx_logged) return STEP_OK;
    c->nontx_logged = true;
    log_kv(LOG_WARN, LOG_FIELDS({"lsn", lsn_format(m->u.message.lsn, lsn)}),
           "a non-transactional message with prefix \"%s\" at %s is not published: it is "
           "written even if the transaction around it rolls back, so it is not atomic with "
           "the business change (call pg_logical_emit_message(true, ...), as outbox_emit() "
           "does); outboxd_messages_ignored_total{reason=\"non_transactional\"} counts "
           "these, this is logged once",
           m->u.message.prefix, lsn);
    return STEP_OK;
}

/* A heartbeat of ours came back on the stream: its round trip. */
static void on_heartbeat(struct changes *c, int64_t sent_us)
{
    c->met->heartbeats_seen++;
    latency_record(&c->heartbeat_rtt, clock_unix_us() - sent_us);
}

enum step changes_on_message(struct changes *c, const struct repl_msg *m)
{
    switch (m->kind) {
    case RM_BEGIN: return on_begin(c, m);
    case RM_COMMIT: return on_commit(c, m);
    case RM_RELATION:
        log_debug("relation %u %s.%s (%d columns)", m->u.relation.rel->relid,
                  m->u.relation.rel->nspname, m->u.relation.rel->relname,
                  m->u.relation.rel->ncols);
        return STEP_OK;
    case RM_INSERT: return on_insert(c, m);
    case RM_MESSAGE: {
        int64_t sent_us;
        int which = outbox_set_find_prefix(c->outboxes, m->u.message.prefix);
        if (which >= 0)
            return (m->u.message.flags & 1) ? on_outbox_message(c, m, which)
                                            : on_non_transactional(c, m);
        if (heartbeat_parse(m->u.message.prefix, m->u.message.content, m->u.message.len,
                            c->cfg->pg_slot, &sent_us))
            on_heartbeat(c, sent_us);
        return STEP_OK;
    }
    default:
        /* UPDATE, DELETE, TRUNCATE of the outbox and everything else are not
         * events: the outbox is append-only from outboxd's point of view. */
        return STEP_OK;
    }
}

enum step changes_on_data(struct changes *c, const struct repl_frame *f)
{
    char err[512];
    struct repl_msg m;
    if (decoder_decode(c->dec, f->data_start, f->data, f->len, &m, err, sizeof(err)) == 0)
        return changes_on_message(c, &m);
    /* An undecodable change of the open transaction is dead-lettered in an
     * event's place (deadletter_bad_record()): it takes an event number,
     * which the ACKed count of a resume includes, so it is skipped like an
     * event. The same bytes fail the same way when they stream again. */
    if (c->cur_seq != 0 && decoder_failure(c->dec, f->data, f->len) == DF_CHANGE &&
        skip_event(c))
        return STEP_OK;
    return deadletter_bad_record(&c->dlq, c->dec, c->cur_seq, c->cur_commit_lsn, f, err);
}

bool changes_held(const struct changes *c) { return c->ev_held || c->dlq.held; }

enum step changes_resume(struct changes *c)
{
    if (c->dlq.held) return deadletter_retry(&c->dlq);
    if (c->ev_held) return send_event(c);
    return STEP_OK;
}

enum step changes_flush_dead_letters(struct changes *c) { return deadletter_flush(&c->dlq); }

void changes_abort_open(struct changes *c)
{
    tracker_abort_open(c->trk);
    record_received(c); /* they were received, if not produced */
    c->cur_seq = 0;
    c->ev_held = false;
    c->serde_wait_ms = 0;
    deadletter_abort_open(&c->dlq);
}

/* A failed delivery: dead-lettered (policy dlq, poison, not the DLQ's own
 * record, topic exists) or the end (the tracker freezes before it). */
static void on_delivery_failed(struct changes *c, const struct delivery_report *dr)
{
    const struct config *cfg = c->cfg;
    bool to_dlq = strcmp(dr->topic, cfg->errors_dlq_topic) == 0;
    bool missing = producer_err_is_missing_topic(dr->err);
    if (deadletter_takes_report(cfg, dr)) {
        metrics_count(&c->met->failed, producer_err_name(dr->err), 1);
        deadletter_queue(&c->dlq, dr); /* still pending until the DLQ write is ACKed */
        return;
    }
    tracker_fail(c->trk, dr->tag);
    if (!to_dlq) metrics_count(&c->met->failed, producer_err_name(dr->err), 1);
    char id[128], lsn[LSN_STRLEN + 8];
    log_kv(LOG_ERROR,
           LOG_FIELDS({"event_id", deadletter_field(dr->event_id.data, dr->event_id.len, id,
                                                    sizeof(id))},
                      {"lsn", deadletter_field(dr->commit_lsn.data, dr->commit_lsn.len, lsn,
                                               sizeof(lsn))}),
           "delivery of event %.*s (commit_lsn %.*s) to topic %s failed: %s: %s; "
           "stopping without confirming past it%s%s%s",
           (int)dr->event_id.len, dr->event_id.data ? dr->event_id.data : "?",
           (int)dr->commit_lsn.len, dr->commit_lsn.data ? dr->commit_lsn.data : "?",
           dr->topic, producer_err_name(dr->err), dr->reason,
           missing ? " (under either [errors] policy: the topic does not exist and the "
                     "broker did not create it; create topic "
                   : "",
           missing ? dr->topic : "",
           missing ? ", then start outboxd again: it resumes at this event)" : "");
}

bool changes_on_delivery(struct changes *c, const struct delivery_report *dr)
{
    if (dr->err != 0) {
        on_delivery_failed(c, dr);
        return false;
    }
    metrics_count(&c->met->acked, dr->topic, 1);
    struct tracker_times tt;
    if (tracker_times(c->trk, dr->tag, &tt)) {
        if (tt.commit_time != 0)
            latency_record(&c->commit_to_ack,
                           dr->served_unix_us - PG_EPOCH_OFFSET_US - tt.commit_time);
        if (tt.produce_us != 0)
            latency_record(&c->stages[STAGE_PRODUCE_TO_ACK], dr->served_unix_us - tt.produce_us);
    }
    if (tracker_ack_at(c->trk, dr->tag, dr->served_unix_us) < 0)
        log_error("internal: delivery report (tag %#llx) for transaction %lu with no "
                  "pending event, or a second one for the same event",
                  (unsigned long long)dr->tag, (unsigned long)tracker_tag_txn(dr->tag));
    return true;
}
