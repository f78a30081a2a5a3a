/*
 * rowpub.c - outbox rows of a cursor published again (see rowpub.h): the
 * fetch loop, the mapping of each row, the produce, the ACK accounting.
 */
#include "rowpub.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "grow.h"
#include "log.h"
#include "pgsql.h"
#include "str.h"

/* Counts a failure; the first one's text is kept in failure. */
static void note_failure(struct rowpub *p, const char *id, size_t idlen, const char *topic,
                         const char *code, const char *reason)
{
    if (p->failed++ == 0)
        snprintf(p->failure, sizeof(p->failure), "event %.*s to %s: %s (%s)", (int)idlen,
                 id ? id : "", topic ? topic : "?", code, reason ? reason : "");
}

/* Keeps a copy of the refused delivery dr to dead-letter after the poll.
 * 0, or -1 (out of memory). */
static int keep_refused(struct rowpub *p, const struct delivery_report *dr)
{
    struct pending_dlq *c = NULL;
    if (grow_array((void **)&p->copies, &p->copies_cap, p->ncopies + 1, sizeof(*p->copies),
                   8) != 0 ||
        !(c = deadletter_copy(dr)))
        return -1;
    p->copies[p->ncopies++] = c;
    return 0;
}

void rowpub_on_delivery(void *ctx, const struct delivery_report *dr)
{
    struct rowpub *p = ctx;
    if (dr->err == 0) {
        p->acked_n++;
        if (p->acked) p->acked(p->ctx, dr);
        return;
    }
    if (p->dlq && deadletter_takes_report(p->dlq->cfg, dr) && keep_refused(p, dr) == 0) return;
    note_failure(p, dr->event_id.data, dr->event_id.len, dr->topic, producer_err_name(dr->err),
                 dr->reason);
}

/* Remembers ev's id as the last (and, the first time, the first) produced. */
static void note_id(struct rowpub *p, const struct outbox_event *ev)
{
    char id[sizeof(p->last_id)];
    snprintf(id, sizeof(id), "%.*s", ev->event_id.data ? (int)ev->event_id.len : 0,
             ev->event_id.data ? ev->event_id.data : "");
    if (!p->first_id[0]) snprintf(p->first_id, sizeof(p->first_id), "%s", id);
    snprintf(p->last_id, sizeof(p->last_id), "%s", id);
}

/* Hands ev to the producer (dry run: prints it), serving reports while its
 * queue is full. PRODUCER_OK, or PRODUCER_ERROR with librdkafka's code in
 * *kafka_err and the reason in err (refused for good). */
static int produce(struct rowpub *p, const struct outbox_event *ev, int *kafka_err, char *err,
                   size_t errlen)
{
    int rc;
    if (p->dry_run) {
        printf("%s: would send event %.*s to %s, key %.*s\n", p->who, (int)ev->event_id.len,
               ev->event_id.data ? ev->event_id.data : "", ev->topic,
               ev->key_null ? 4 : (int)ev->key.len, ev->key_null ? "NULL" : ev->key.data);
        rc = PRODUCER_OK;
    } else {
        while ((rc = producer_send(p->prod, ev, p->produced + 1, kafka_err, err, errlen)) ==
               PRODUCER_QUEUE_FULL)
            producer_poll(p->prod, 100); /* copies wait: no produce in a produce */
    }
    if (rc != PRODUCER_OK) return PRODUCER_ERROR;
    p->produced++;
    note_id(p, ev);
    return PRODUCER_OK;
}

/* Stops the run at ev, of a row of m's table: what in stopped_at and the
 * log. Returns -1. */
static int stop_at(struct rowpub *p, const struct outbox_map *m, const struct outbox_event *ev,
                   const char *what, const char *code, const char *reason)
{
    snprintf(p->stopped_at, sizeof(p->stopped_at), "%s (%s.%s; %s: %s; event_id %.*s)%s",
             what, m->schema, m->table, code, reason,
             ev->event_id.data ? (int)ev->event_id.len : 0,
             ev->event_id.data ? ev->event_id.data : "",
             ev->fault != OF_NONE ? ": fix or delete the row, then run it again" : "");
    log_error("%s: %s", p->who, p->stopped_at);
    return -1;
}

/* Produces the dead letter d (deadletter_record()'s record) and counts it.
 * PRODUCER_OK, or PRODUCER_ERROR with librdkafka's code in *kafka_err and
 * the reason in err. */
static int produce_dead_letter(struct rowpub *p, const struct dead_letter *d, int *kafka_err,
                               char *err, size_t errlen)
{
    struct outbox_event rec;
    char len_text[32];
    deadletter_record(p->dlq, d, &rec, len_text);
    if (produce(p, &rec, kafka_err, err, errlen) != PRODUCER_OK) return PRODUCER_ERROR;
    p->dead_lettered++;
    return PRODUCER_OK;
}

/* ev (a row of m's table) cannot be published as it is (code, reason):
 * its dead letter is produced when p has a dead-letter writer and the
 * fault is the event's own (poison), as the relay does (deadletter.h);
 * else the run stops here. 0, or -1 logged. */
static int reject(struct rowpub *p, const struct outbox_map *m, const struct outbox_event *ev,
                  const char *code, const char *reason, bool poison, bool too_large)
{
    if (!p->dlq || !poison)
        return stop_at(p, m, ev,
                       ev->fault != OF_NONE ? "a row cannot be published"
                                            : "an event cannot be produced",
                       code, reason);
    struct dead_letter d;
    char err[512];
    int kafka_err = 0;
    deadletter_letter(&d, p->produced + 1, ev, code, reason, too_large);
    if (produce_dead_letter(p, &d, &kafka_err, err, sizeof(err)) != PRODUCER_OK)
        return stop_at(p, m, ev, "the dead-letter write failed too",
                       producer_err_name(kafka_err), err);
    log_warn("%s: event %.*s cannot be published (%s: %s): dead-lettered to %s ([errors] "
             "policy = dlq)",
             p->who, ev->event_id.data ? (int)ev->event_id.len : 0,
             ev->event_id.data ? ev->event_id.data : "", code, reason,
             p->dlq->cfg->errors_dlq_topic);
    return 0;
}

/* Produces the dead letters of the refused deliveries copied since the
 * last call (they were sent once already: counted in refused). A dead
 * letter that cannot be produced either is a failure. */
static void dead_letter_refused(struct rowpub *p)
{
    for (size_t i = 0; i < p->ncopies; i++) {
        const struct dead_letter *d = deadletter_copied(p->copies[i]);
        char err[512];
        int kafka_err = 0;
        if (produce_dead_letter(p, d, &kafka_err, err, sizeof(err)) == PRODUCER_OK) {
            p->refused++;
            log_warn("%s: event %.*s was refused by the broker (%s: %s): dead-lettered to %s "
                     "([errors] policy = dlq)",
                     p->who, (int)d->event_id.len, d->event_id.data ? d->event_id.data : "",
                     d->code, d->reason, p->dlq->cfg->errors_dlq_topic);
        } else {
            note_failure(p, d->event_id.data, d->event_id.len, d->topic, d->code,
                         "refused, and its dead letter could not be produced either");
            log_error("%s: event %.*s was refused by the broker (%s: %s) and its dead letter "
                      "cannot be produced: %s: %s",
                      p->who, (int)d->event_id.len, d->event_id.data ? d->event_id.data : "",
                      d->code, d->reason, producer_err_name(kafka_err), err);
        }
        deadletter_copy_free(p->copies[i]);
    }
    p->ncopies = 0;
}

/* Serves delivery reports for up to ms, then dead-letters what they refused. */
static void serve_reports(struct rowpub *p, int ms)
{
    producer_poll(p->prod, ms);
    if (p->ncopies) dead_letter_refused(p);
}

/* Produces ev (a row of m's table); a refusal for good is rejected as the
 * relay does: poison unless the topic is missing (the operator's to fix).
 * 0, or -1 logged. */
static int send_event(struct rowpub *p, const struct outbox_map *m,
                      const struct outbox_event *ev)
{
    char err[512];
    int kafka_err = 0;
    if (produce(p, ev, &kafka_err, err, sizeof(err)) == PRODUCER_OK) return 0;
    return reject(p, m, ev, producer_err_name(kafka_err), err,
                  producer_err_is_poison(kafka_err) && !producer_err_is_missing_topic(kafka_err),
                  producer_err_is_too_large(kafka_err));
}

int rowpub_row(struct rowpub *p, const struct outbox_map *m, const PGresult *res, int row,
               const struct relation *rel, struct col_value *vals)
{
    char err[512];
    for (int i = 0; i < rel->ncols; i++) {
        bool null = PQgetisnull(res, row, i);
        vals[i] = (struct col_value){null ? CV_NULL : CV_TEXT,
                                     null ? 0 : (uint32_t)PQgetlength(res, row, i),
                                     null ? NULL : PQgetvalue(res, row, i)};
    }
    struct outbox_event ev;
    p->rows++;
    if (outbox_event_build(m, rel, vals, rel->ncols, 0, &ev, err, sizeof(err)) != 0)
        return reject(p, m, &ev, outbox_fault_name(ev.fault), err, ev.fault != OF_SCHEMA,
                      false);
    outbox_event_drop_lsn_header(m, &ev); /* a row read from the table has none */
    return send_event(p, m, &ev);
}

/* Publishes every row of res. 0, or -1 logged. */
static int publish_result(struct rowpub *p, const PGresult *res)
{
    int n = PQntuples(res), ncols = PQnfields(res), rc = 0;
    struct relation rel = {.nspname = p->map->schema, .relname = p->map->table, .ncols = ncols};
    rel.cols = calloc((size_t)ncols + 1, sizeof(*rel.cols));
    struct col_value *vals = calloc((size_t)ncols + 1, sizeof(*vals));
    if (!rel.cols || !vals) {
        log_error("%s: out of memory", p->who);
        rc = -1;
    }
    /* The types too: a bytea column's text is decoded to its bytes (outbox.h). */
    for (int i = 0; rc == 0 && i < ncols; i++) {
        rel.cols[i].name = PQfname(res, i);
        rel.cols[i].typid = (uint32_t)PQftype(res, i);
    }
    for (int row = 0; rc == 0 && row < n; row++) rc = rowpub_row(p, p->map, res, row, &rel, vals);
    if (p->prod) serve_reports(p, 0);
    free(rel.cols);
    free(vals);
    return rc;
}

int rowpub_cursor(struct rowpub *p, PGconn *db, const char *conninfo, const char *cursor)
{
    char *fetch = str_printf("FETCH FORWARD %d FROM %s", ROWPUB_FETCH, cursor);
    int rc = fetch ? 0 : -1;
    if (!fetch) log_error("%s: out of memory", p->who);
    while (rc == 0) {
        struct pgsql_error e;
        PGresult *res =
            pgsql_exec(db, conninfo, "fetching rows", fetch, 0, NULL, PGRES_TUPLES_OK, &e);
        if (!res) {
            log_error("%s: fetching rows: %s", p->who, e.msg);
            rc = -1;
            break;
        }
        rc = publish_result(p, res);
        int n = PQntuples(res);
        PQclear(res);
        if (n < ROWPUB_FETCH) break;
    }
    free(fetch);
    return rc;
}

int rowpub_await(struct rowpub *p, int64_t wait_ms)
{
    if (p->dry_run) return 0;
    int64_t until = clock_mono_ms() + wait_ms;
    if (p->ncopies) dead_letter_refused(p);
    while (p->acked_n + p->failed + p->refused < p->produced && clock_mono_ms() < until)
        serve_reports(p, 200);
    return p->failed == 0 && p->acked_n + p->refused == p->produced ? 0 : -1;
}

uint64_t rowpub_sent(const struct rowpub *p) { return p->produced - p->refused; }

void rowpub_free(struct rowpub *p)
{
    for (size_t i = 0; i < p->ncopies; i++) deadletter_copy_free(p->copies[i]);
    free(p->copies);
    p->copies = NULL;
    p->ncopies = p->copies_cap = 0;
}
