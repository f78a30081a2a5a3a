/*
 * pollrelayclaim.c - the polling relay's claims (pollrelay_int.h): a batch claimed
 * (one short transaction, committed before the first message is
 * produced), its rows mapped (outbox.h) and encoded (serde.h), produced
 * until the producer queue is full.
 */
#include "pollrelay_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "grow.h"
#include "log.h"
#include "str.h"

/* ---- claiming and producing ---------------------------------------------- */

/* Produces one claimed row (its id handed over). Returns false when the
 * producer queue is full: the id is freed, the row is to be tried again. */
static bool produce_row(struct pr *r, const struct outbox_event *ev, char *event_id,
                        int64_t gen, int attempts)
{
    char err[512];
    int kafka_err = 0;
    uint64_t seq = r->next_seq + 1;
    if (grow_array((void **)&r->fl, &r->capfl, r->st.inflight + 1, sizeof(*r->fl), 64) != 0) {
        log_error("out of memory");
        free(event_id);
        r->st.fatal = true;
        return true;
    }
    int rc = producer_send(r->prod, ev, seq, &kafka_err, err, sizeof(err));
    if (rc == PRODUCER_QUEUE_FULL) {
        free(event_id);
        return false;
    }
    r->next_seq = seq;
    if (rc == PRODUCER_OK) {
        r->fl[r->st.inflight++] = (struct flight){seq, event_id, gen, attempts};
        metrics_count(&r->met.produced, ev->topic, 1);
        r->met.produced_bytes +=
            (ev->key_null ? 0 : ev->key.len) + (ev->value_null ? 0 : ev->value.len);
        return true;
    }
    metrics_count(&r->met.failed, producer_err_name(kafka_err), 1);
    pr_record_failure(r, event_id, gen, attempts, kafka_err, err);
    return true;
}

/* Column index by name in a result, -1 if absent. */
static int result_col(const PGresult *res, const char *name)
{
    for (int i = 0; i < PQnfields(res); i++)
        if (strcmp(PQfname(res, i), name) == 0) return i;
    return -1;
}

/* Whether an outcome or a flight already holds event id. */
static bool known_event(const struct pr *r, const char *id)
{
    if (pollout_has(&r->out, id)) return true;
    for (size_t i = 0; i < r->st.inflight; i++)
        if (!strcmp(r->fl[i].event_id, id)) return true;
    return false;
}

/* Closes the claimed batch. Rows after a fatal stop were claimed but not
 * produced: they are given back. */
void pr_claim_close(struct pr *r)
{
    struct claimed *cl = &r->cl;
    for (int row = 0; r->st.fatal && cl->res && row < cl->nrows; row++) {
        const char *id = PQgetvalue(cl->res, row, cl->c_id);
        char *copy = known_event(r, id) ? NULL : strdup(id);
        if (copy)
            pr_add_result(r, OUT_RELEASE, copy,
                       strtoll(PQgetvalue(cl->res, row, cl->c_gen), NULL, 10), 0, NULL);
    }
    free(cl->rel.cols);
    free(cl->vals);
    PQclear(cl->res);
    memset(cl, 0, sizeof(*cl));
    r->st.rows_pending = false;
    r->serde_wait_ms = 0; /* a row that waited for its schema is not claimed any more */
    r->serde_wait[0] = '\0';
}

/* What encode_row() made of a row. */
enum row_step {
    ROW_SEND,    /* ev is ready to produce */
    ROW_WAIT,    /* its schema is not known yet: id freed, the row stays next */
    ROW_HANDLED, /* quarantined (does not fit) or released (stopping): id handed over */
};

/* The row waits for its schema: logged once per reason, kept for /readyz. */
static void wait_for_schema(struct pr *r, const char *subject, const char *why)
{
    if (r->serde_wait_ms == 0) r->serde_wait_ms = clock_mono_ms();
    if (serde_wait_reason(r->serde_wait, sizeof(r->serde_wait), subject, why))
        log_warn("%s; the rows behind it wait until the registry answers", r->serde_wait);
}

/* ev's value in the registry's wire format (serde.h), when the section has
 * a registry converter. A payload that does not fit (or whose subject
 * cannot be named) is quarantined, a schema of the wrong type releases the
 * row and stops the relay; while the schema is not known the row waits,
 * like a row that met a full producer queue. */
static enum row_step encode_row(struct pr *r, const struct relation *rel,
                                const struct col_value *vals, int ncols,
                                struct outbox_event *ev, char *id, int64_t gen)
{
    struct serde *sd = r->serdes.by_map ? r->serdes.by_map[0] : NULL;
    if (!sd) return ROW_SEND;
    char subject[SERDE_SUBJECT_MAX], err[1024];
    enum serde_result res = SERDE_MISMATCH;
    if (serde_subject(sd, ev, rel, vals, ncols, subject, sizeof(subject), err, sizeof(err)) ==
        0)
        res = serde_encode(sd, subject, ev, clock_mono_ms(), err, sizeof(err));
    switch (res) {
    case SERDE_OK:
        if (r->serde_wait_ms)
            log_info("the schema of subject \"%s\" is known: the rows go on", subject);
        r->serde_wait_ms = 0;
        r->serde_wait[0] = '\0';
        return ROW_SEND;
    case SERDE_WAIT:
        wait_for_schema(r, subject, err);
        free(id);
        return ROW_WAIT;
    case SERDE_MISMATCH:
        log_warn("event %s cannot be published: %s: %s; QUARANTINED until requeued", id,
                 SERDE_MISMATCH_CODE, err);
        pr_add_result(r, OUT_QUARANTINE, id, gen, 0, str_printf("%s: %s", SERDE_MISMATCH_CODE, err));
        return ROW_HANDLED;
    case SERDE_FATAL: break;
    }
    log_error("event %s: %s: %s; stopping", id, SERDE_FATAL_CODE, err);
    pr_add_result(r, OUT_RELEASE, id, gen, 0, NULL);
    r->st.fatal = true;
    return ROW_HANDLED;
}

/* One claimed row to an event, produced. Returns false when the queue is
 * full (the row stays next). */
static bool produce_claimed_row(struct pr *r, int row)
{
    struct claimed *cl = &r->cl;
    char err[512];
    for (int i = 0; i < cl->ncols; i++) {
        bool null = PQgetisnull(cl->res, row, i);
        cl->vals[i] = (struct col_value){null ? CV_NULL : CV_TEXT,
                                         null ? 0 : (uint32_t)PQgetlength(cl->res, row, i),
                                         null ? NULL : PQgetvalue(cl->res, row, i)};
    }
    const char *raw = PQgetisnull(cl->res, row, cl->c_id) ? "" : PQgetvalue(cl->res, row, cl->c_id);
    char *id = strdup(raw);
    int64_t gen = strtoll(PQgetvalue(cl->res, row, cl->c_gen), NULL, 10);
    int attempts = atoi(PQgetvalue(cl->res, row, cl->c_att));
    if (!id) {
        log_error("out of memory");
        r->st.fatal = true;
        return true;
    }
    struct outbox_event ev;
    if (outbox_event_build(&r->map, &cl->rel, cl->vals, cl->ncols, 0, &ev, err,
                           sizeof(err)) == 0) {
        outbox_event_drop_lsn_header(&r->map, &ev); /* polling mode has no LSN */
        switch (encode_row(r, &cl->rel, cl->vals, cl->ncols, &ev, id, gen)) {
        case ROW_SEND: return produce_row(r, &ev, id, gen, attempts);
        case ROW_WAIT: return false;
        case ROW_HANDLED: return true;
        }
    }
    if (ev.fault == OF_SCHEMA) {
        /* Every row would fail: give this one back and stop. */
        log_error("event %s: %s; stopping", id, err);
        pr_add_result(r, OUT_RELEASE, id, gen, 0, NULL);
        r->st.fatal = true;
    } else {
        log_warn("event %s cannot be published: %s: %s; QUARANTINED until requeued", id,
                 outbox_fault_name(ev.fault), err);
        pr_add_result(r, OUT_QUARANTINE, id, gen, 0,
                   str_printf("%s: %s", outbox_fault_name(ev.fault), err));
    }
    return true;
}

/* Produces the claimed batch from its next row on. A full producer queue
 * parks the rest (rows_pending) until POLLSTATE_QUEUE_RETRY_MS later. */
void pr_produce_claimed(struct pr *r, int64_t now)
{
    while (r->cl.row < r->cl.nrows && !r->st.fatal) {
        if (!produce_claimed_row(r, r->cl.row)) {
            r->st.rows_pending = true;
            r->st.next_produce_ms = now + POLLSTATE_QUEUE_RETRY_MS;
            return;
        }
        r->cl.row++;
    }
    pr_claim_close(r);
}

/* Opens the batch a claim returned: its columns and the arrays the rows are
 * read into. Returns 0, -1 (fatal) after logging why. */
static int claim_open(struct pr *r, PGresult *res)
{
    struct claimed *cl = &r->cl;
    cl->res = res;
    cl->nrows = PQntuples(res);
    cl->ncols = PQnfields(res);
    cl->c_id = result_col(res, r->map.columns[OC_EVENT_ID]);
    cl->c_gen = result_col(res, "lease_generation");
    cl->c_att = result_col(res, "attempts");
    cl->rel = (struct relation){.nspname = r->map.schema, .relname = r->map.table,
                                .ncols = cl->ncols};
    cl->rel.cols = calloc((size_t)cl->ncols + 1, sizeof(*cl->rel.cols));
    cl->vals = calloc((size_t)cl->ncols + 1, sizeof(*cl->vals));
    if (!cl->rel.cols || !cl->vals || cl->c_id < 0 || cl->c_gen < 0 || cl->c_att < 0) {
        log_error(!cl->rel.cols || !cl->vals ? "out of memory"
                                             : "the claim returned no event_id, "
                                               "lease_generation or attempts column");
        r->st.fatal = true;
        cl->nrows = 0;
        return -1;
    }
    /* The types too: a bytea column's text is decoded to its bytes (outbox.h). */
    for (int i = 0; i < cl->ncols; i++) {
        cl->rel.cols[i].name = PQfname(res, i);
        cl->rel.cols[i].typid = (uint32_t)PQftype(res, i);
    }
    return 0;
}

void pr_claim_and_produce(struct pr *r, int64_t now)
{
    const struct config *c = r->cfg;
    char lease[32], limit[32];
    int want = c->poll_batch_size - (int)r->st.inflight;
    r->st.claim_now = false;
    r->st.next_claim_ms = now + c->poll_interval_ms;
    if (want <= 0) return;
    snprintf(lease, sizeof(lease), "%" PRId64, c->poll_lease_ms);
    snprintf(limit, sizeof(limit), "%d", want);
    const char *params[] = {r->owner, lease, limit};
    PGresult *res = pr_exec(r, "claiming due events", r->sql.claim, 3, params, PGRES_TUPLES_OK);
    if (!res) return;
    if (claim_open(r, res) != 0) return pr_claim_close(r);
    if (r->cl.nrows == want) r->st.claim_now = true; /* a full batch: there may be more */
    r->n_claimed += (uint64_t)r->cl.nrows;
    if (r->cl.nrows) log_debug("claimed %d events", r->cl.nrows);
    pr_produce_claimed(r, now);
}
