/*
 * deadletter.c - events that can never be published as they are: the DLQ
 * write, or the halt (see deadletter.h).
 */
#include "deadletter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Delivery failures reported inside producer_poll() cannot be re-produced
 * there (the queue may be full, and polling from the callback would
 * recurse): they are copied here and dead-lettered from the loop. */
struct pending_dlq {
    struct dead_letter d;
    char *buf; /* owns key, value and event_id bytes; freed after the send */
    struct pending_dlq *next;
};

/* Headroom for key and headers when a too-large value is truncated. */
#define DLQ_HEADROOM 16384

void deadletter_init(struct deadletter *dl, const struct config *c, struct metrics *met,
                     struct sink out)
{
    memset(dl, 0, sizeof(*dl));
    dl->cfg = c;
    dl->met = met;
    dl->out = out;
    const char *mmb = config_kafka_get(c, "message.max.bytes");
    long max_bytes = mmb ? atol(mmb) : 1000000;
    dl->max_value = max_bytes > 2 * DLQ_HEADROOM ? (size_t)(max_bytes - DLQ_HEADROOM)
                                                  : (size_t)max_bytes / 2;
}

static void free_pending(struct pending_dlq *p)
{
    if (!p) return;
    free(p->buf);
    free(p);
}

void deadletter_free(struct deadletter *dl)
{
    while (dl->pending) {
        struct pending_dlq *p = dl->pending;
        dl->pending = p->next;
        free_pending(p);
    }
    free_pending(dl->held_pending);
    dl->held_pending = NULL;
    dl->held = NULL;
}

const char *deadletter_field(const char *data, size_t len, char *out, size_t outlen)
{
    snprintf(out, outlen, "%.*s", data ? (int)len : 0, data ? data : "");
    return out;
}

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

void deadletter_record(const struct deadletter *dl, const struct dead_letter *d,
                       struct outbox_event *ev, char len_text[32])
{
    memset(ev, 0, sizeof(*ev));
    snprintf(ev->topic, sizeof(ev->topic), "%s", dl->cfg->errors_dlq_topic);
    ev->key = d->key;
    ev->key_null = d->key_null;
    ev->value = d->value;
    ev->value_null = d->value_null;
    ev->event_id = d->event_id;
    if (d->too_large && ev->value.len > dl->max_value) {
        snprintf(len_text, 32, "%zu", ev->value.len);
        ev->value.len = dl->max_value;
    } else {
        len_text[0] = '\0';
    }
    outbox_dlq_headers(ev, d->headers, d->nheaders,
                       &(struct outbox_dlq){.topic = d->topic,
                                            .topic_error = d->topic_error,
                                            .reason = d->reason,
                                            .code = d->code,
                                            .record_lsn = d->record_lsn,
                                            .truncated_from = len_text});
}

/* Produces the DLQ record of d. STEP_OK, STEP_HELD (d is kept in dl->held
 * and must stay valid until deadletter_retry() sends it) or STEP_FATAL. */
static enum step dead_letter_send(struct deadletter *dl, const struct dead_letter *d)
{
    char err[512], len_text[32];
    int kafka_err = -1;
    struct outbox_event ev;
    deadletter_record(dl, d, &ev, len_text);
    int rc = dl->out.send(dl->out.ctx, &ev, d->tag, &kafka_err, err, sizeof(err));
    if (rc == PRODUCER_QUEUE_FULL) {
        dl->held = d;
        return STEP_HELD;
    }
    dl->held = NULL;
    char id[128], label[160];
    const struct log_field *fields = LOG_FIELDS(
        {"event_id", deadletter_field(d->event_id.data, d->event_id.len, id, sizeof(id))},
        {"lsn", d->commit_lsn});
    dead_letter_label(d, label, sizeof(label));
    if (rc != PRODUCER_OK) {
        tracker_fail(dl->trk, d->tag);
        log_kv(LOG_ERROR, fields,
               "%s (commit_lsn %s): the dead-letter write failed too (%s); "
               "stopping without confirming past it",
               label, d->commit_lsn, err);
        return STEP_FATAL;
    }
    metrics_count(&dl->met->produced, dl->cfg->errors_dlq_topic, 1);
    dl->met->produced_bytes +=
        (d->key_null ? 0 : d->key.len) + (d->value_null ? 0 : ev.value.len);
    metrics_count(&dl->met->dead_lettered, d->code, 1);
    log_kv(LOG_WARN, fields, "%s (commit_lsn %s) dead-lettered to %s: %s: %s", label,
           d->commit_lsn, dl->cfg->errors_dlq_topic, d->code, d->reason);
    return STEP_OK;
}

enum step deadletter_halt(struct deadletter *dl, uint64_t tag, const struct slice *event_id,
                          const char *commit_lsn, const char *code, const char *reason)
{
    tracker_fail(dl->trk, tag);
    char id[128], label[160];
    log_kv(LOG_ERROR,
           LOG_FIELDS(
               {"event_id", deadletter_field(event_id->data, event_id->len, id, sizeof(id))},
               {"lsn", commit_lsn}),
           "%s (commit_lsn %s) cannot be published: %s: %s; stopping without "
           "confirming past it ([errors] policy = %s)",
           event_label(event_id, label, sizeof(label)), commit_lsn, code, reason,
           dl->cfg->errors_policy == ERRORS_DLQ ? "dlq" : "halt");
    return STEP_FATAL;
}

enum step deadletter_reject(struct deadletter *dl, uint64_t tag, const struct outbox_event *ev,
                            const char *code, const char *reason, bool poison, bool too_large)
{
    metrics_count(&dl->met->failed, code, 1);
    if (dl->cfg->errors_policy != ERRORS_DLQ || !poison)
        return deadletter_halt(dl, tag, &ev->event_id, ev->commit_lsn, code, reason);
    deadletter_letter(&dl->scratch, tag, ev, code, reason, too_large);
    return dead_letter_send(dl, &dl->scratch);
}

void deadletter_letter(struct dead_letter *d, uint64_t tag, const struct outbox_event *ev,
                       const char *code, const char *reason, bool too_large)
{
    *d = (struct dead_letter){.tag = tag,
                              .key = ev->key,
                              .value = ev->value,
                              .event_id = ev->event_id,
                              .key_null = ev->key_null,
                              .value_null = ev->value_null,
                              .too_large = too_large};
    snprintf(d->topic, sizeof(d->topic), "%s", ev->topic);
    snprintf(d->topic_error, sizeof(d->topic_error), "%s", ev->topic_error);
    d->nheaders = ev->nheaders < OUTBOX_ROW_HEADERS ? ev->nheaders : OUTBOX_ROW_HEADERS;
    memcpy(d->headers, ev->headers, (size_t)d->nheaders * sizeof(d->headers[0]));
    snprintf(d->reason, sizeof(d->reason), "%s", reason);
    snprintf(d->code, sizeof(d->code), "%s", code);
    snprintf(d->commit_lsn, sizeof(d->commit_lsn), "%s", ev->commit_lsn);
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

/* Stops on a record that cannot be set aside. Returns STEP_FATAL. */
static enum step halt_on_stream_record(struct deadletter *dl, uint64_t seq, lsn_t commit_lsn,
                                       const char *at, const char *why)
{
    const struct config *c = dl->cfg;
    char commit[LSN_STRLEN], what[224];
    bool wal2json = c->pg_plugin == PLUGIN_WAL2JSON;
    if (seq) tracker_fail(dl->trk, tracker_txn_tag(seq));
    if (!wal2json)
        snprintf(what, sizeof(what), "a protocol error");
    else if (seq)
        snprintf(what, sizeof(what),
                 "it is no change of the open transaction (commit_lsn %s) but a begin or "
                 "commit record, or one whose action cannot be read, so it cannot be "
                 "dead-lettered",
                 lsn_format(commit_lsn, commit));
    else
        snprintf(what, sizeof(what),
                 "it is outside any transaction, so it cannot be attributed to one or "
                 "dead-lettered");
    if (wal2json) metrics_count(&dl->met->failed, INVALID_RECORD, 1);
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", at}),
           "%s %s at LSN %s cannot be decoded: %s; %s; stopping without confirming "
           "past it",
           plugin_name(c->pg_plugin), wal2json ? "record" : "message", at, why, what);
    return STEP_FATAL;
}

/* The dead letter of the undecodable record f at at, into d. */
static void bad_record_letter(struct dead_letter *d, uint64_t tag, lsn_t commit_lsn,
                              const struct repl_frame *f, const char *at, const char *why)
{
    *d = (struct dead_letter){.tag = tag,
                              .key_null = true,
                              .value = {f->data, f->len},
                              .too_large = true /* truncated when it is */};
    snprintf(d->reason, sizeof(d->reason), "%.*s", (int)sizeof(d->reason) - 1, why);
    snprintf(d->code, sizeof(d->code), "%s", INVALID_RECORD);
    snprintf(d->topic_error, sizeof(d->topic_error),
             "the record could not be decoded, so it has no row to render the topic from");
    lsn_format(commit_lsn, d->commit_lsn);
    d->headers[d->nheaders++] =
        (struct outbox_header){"commit_lsn", {d->commit_lsn, strlen(d->commit_lsn)}};
    snprintf(d->record_lsn, sizeof(d->record_lsn), "%s", at);
}

enum step deadletter_bad_record(struct deadletter *dl, const struct decoder *dec, uint64_t seq,
                                lsn_t commit_lsn, const struct repl_frame *f, const char *why)
{
    const struct config *c = dl->cfg;
    char at[LSN_STRLEN];
    lsn_format(f->data_start, at);
    if (seq == 0 || decoder_failure(dec, f->data, f->len) != DF_CHANGE)
        return halt_on_stream_record(dl, seq, commit_lsn, at, why);
    metrics_count(&dl->met->failed, INVALID_RECORD, 1);
    uint64_t tag;
    if (tracker_event_sent(dl->trk, seq, &tag) != 0) return STEP_FATAL;
    struct dead_letter *d = &dl->scratch;
    bad_record_letter(d, tag, commit_lsn, f, at, why);
    if (c->errors_policy == ERRORS_DLQ) return dead_letter_send(dl, d);
    tracker_fail(dl->trk, tag);
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", at}),
           "%s record at LSN %s (commit_lsn %s) cannot be decoded: %s: %s; stopping "
           "without confirming past it ([errors] policy = halt). To get past it: set "
           "[errors] policy = dlq and restart (the record goes to %s with its LSN); or, "
           "accepting the loss of that whole transaction, move the slot past its commit "
           "with SELECT pg_replication_slot_advance('%s', '%s'::pg_lsn + 1) while outboxd "
           "is stopped, then run outboxd accept-slot -c FILE",
           plugin_name(c->pg_plugin), at, d->commit_lsn, INVALID_RECORD, why,
           c->errors_dlq_topic, c->pg_slot, d->commit_lsn);
    return STEP_FATAL;
}

/* Copies dr's key, value, event_id and headers into one buffer owned by p
 * (d's slices point into it). Returns 0, -1 on out of memory. */
static int copy_report_bytes(struct pending_dlq *p, const struct delivery_report *dr, int nh)
{
    size_t n = dr->key.len + dr->value.len + dr->event_id.len;
    for (int i = 0; i < nh; i++)
        n += strlen(dr->headers[i].name) + 1 + dr->headers[i].value.len;
    char *q = p->buf = malloc(n ? n : 1);
    if (!q) return -1;
    struct dead_letter *d = &p->d;
    if (dr->key.len) memcpy(q, dr->key.data, dr->key.len);
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
    return 0;
}

bool deadletter_takes_report(const struct config *c, const struct delivery_report *dr)
{
    return c->errors_policy == ERRORS_DLQ && producer_err_is_poison(dr->err) &&
           !producer_err_is_missing_topic(dr->err) && strcmp(dr->topic, c->errors_dlq_topic) != 0;
}

struct pending_dlq *deadletter_copy(const struct delivery_report *dr)
{
    int nh = dr->nheaders < OUTBOX_ROW_HEADERS ? dr->nheaders : OUTBOX_ROW_HEADERS;
    struct pending_dlq *p = calloc(1, sizeof(*p));
    if (!p || copy_report_bytes(p, dr, nh) != 0) {
        free(p);
        return NULL;
    }
    struct dead_letter *d = &p->d;
    d->tag = dr->tag;
    d->key_null = dr->key_null;
    d->value_null = dr->value_null;
    d->too_large = producer_err_is_too_large(dr->err);
    snprintf(d->topic, sizeof(d->topic), "%s", dr->topic);
    snprintf(d->reason, sizeof(d->reason), "%s", dr->reason);
    snprintf(d->code, sizeof(d->code), "%s", producer_err_name(dr->err));
    snprintf(d->commit_lsn, sizeof(d->commit_lsn), "%.*s", (int)dr->commit_lsn.len,
             dr->commit_lsn.data ? dr->commit_lsn.data : "");
    return p;
}

const struct dead_letter *deadletter_copied(const struct pending_dlq *p) { return &p->d; }

void deadletter_copy_free(struct pending_dlq *p) { free_pending(p); }

void deadletter_queue(struct deadletter *dl, const struct delivery_report *dr)
{
    struct pending_dlq *p = deadletter_copy(dr);
    if (!p) {
        tracker_fail(dl->trk, dr->tag);
        log_error("out of memory while dead-lettering; stopping");
        return;
    }
    if (!dl->pending) dl->pending_tail = &dl->pending;
    *dl->pending_tail = p;
    dl->pending_tail = &p->next;
}

/* Sends the pending p; keeps it as held_pending when the queue is full. */
static enum step send_pending(struct deadletter *dl, struct pending_dlq *p)
{
    enum step rc = dead_letter_send(dl, &p->d);
    if (rc == STEP_HELD) {
        dl->held_pending = p;
        return rc;
    }
    free_pending(p);
    return rc;
}

enum step deadletter_flush(struct deadletter *dl)
{
    enum step rc = dl->held ? STEP_HELD : STEP_OK;
    while (dl->pending && rc == STEP_OK) {
        struct pending_dlq *p = dl->pending;
        dl->pending = p->next;
        rc = send_pending(dl, p);
    }
    return rc;
}

enum step deadletter_retry(struct deadletter *dl)
{
    if (!dl->held) return STEP_OK;
    struct pending_dlq *p = dl->held_pending;
    dl->held_pending = NULL;
    if (p) return send_pending(dl, p);
    return dead_letter_send(dl, dl->held);
}

void deadletter_abort_open(struct deadletter *dl)
{
    if (!dl->held_pending) dl->held = NULL;
}

bool deadletter_busy(const struct deadletter *dl) { return dl->held || dl->pending; }
