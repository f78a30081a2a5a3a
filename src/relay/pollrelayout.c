/*
 * pollrelayout.c - the polling relay's outcomes (pollrelay_int.h): delivery reports
 * turned into outcomes (sent, retry with backoff, quarantine), the outcomes
 * written back with conditional UPDATEs, and retention.
 */
#include "pollrelay_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "str.h"

/* Late outcomes (lease lost) logged by event_id per statement. */
#define STALE_NAMED 5
/* Pause before retrying outcome updates after a failed statement. */
#define RESULT_RETRY_MS 500

/* Queues an outcome; takes ownership of event_id and error (freed on
 * OOM). */
void pr_add_result(struct pr *r, enum pollout_kind kind, char *event_id, int64_t gen,
                       int64_t delay_ms, char *error)
{
    char id[128];
    snprintf(id, sizeof(id), "%s", event_id);
    if (pollout_add(&r->out, kind, event_id, gen, delay_ms, error) != 0) {
        log_error("out of memory recording the outcome of event %s", id);
        r->st.fatal = true;
    }
    r->st.outcomes = r->out.n;
}

/* ---- delivery reports ---------------------------------------------------- */

static struct flight *find_flight(struct pr *r, uint64_t seq)
{
    size_t lo = 0, hi = r->st.inflight;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->fl[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->st.inflight && r->fl[lo].seq == seq ? &r->fl[lo] : NULL;
}

static void remove_flight(struct pr *r, struct flight *f)
{
    size_t i = (size_t)(f - r->fl);
    memmove(&r->fl[i], &r->fl[i + 1], (r->st.inflight - i - 1) * sizeof(*r->fl));
    r->st.inflight--;
}

/* Turns a failed try of flight f (its id handed over) into an outcome. */
void pr_record_failure(struct pr *r, char *event_id, int64_t gen, int attempts,
                           int kafka_err, const char *reason)
{
    const struct config *c = r->cfg;
    enum polling_action a = polling_classify(kafka_err, producer_err_is_poison(kafka_err),
                                             attempts, c->poll_max_attempts);
    const char *name = kafka_err ? producer_err_name(kafka_err) : "?";
    if (a == PA_RETRY) {
        int64_t delay = polling_backoff_ms(attempts + 1, c->poll_backoff_min_ms,
                                           c->poll_backoff_max_ms, (uint64_t)rand());
        log_debug("event %s: delivery failed (%s: %s); retry %d of %d in %" PRId64 " ms",
                  event_id, name, reason, attempts + 2, c->poll_max_attempts, delay);
        pr_add_result(r, OUT_RETRY, event_id, gen, delay, str_printf("%s: %s", name, reason));
        return;
    }
    bool permanent = producer_err_is_poison(kafka_err);
    log_warn("event %s: %s (%s: %s); QUARANTINED until requeued", event_id,
             permanent ? "permanent delivery failure" : "attempts used up", name, reason);
    pr_add_result(r, OUT_QUARANTINE, event_id, gen, 0,
               permanent ? str_printf("%s: %s", name, reason)
                         : str_printf("gave up after %d attempts: %s: %s", attempts + 1, name,
                                      reason));
}

void pr_on_delivery(void *ctx, const struct delivery_report *dr)
{
    struct pr *r = ctx;
    if (dr->err == 0)
        metrics_count(&r->met.acked, dr->topic, 1);
    else
        metrics_count(&r->met.failed, producer_err_name(dr->err), 1);
    struct flight *f = find_flight(r, dr->tag);
    if (!f) {
        log_error("internal: delivery report for unknown message %" PRIu64, dr->tag);
        return;
    }
    char *id = f->event_id;
    int64_t gen = f->gen;
    int attempts = f->attempts;
    remove_flight(r, f);
    if (dr->err == 0)
        pr_add_result(r, OUT_SENT, id, gen, 0, NULL);
    else
        pr_record_failure(r, id, gen, attempts, dr->err, dr->reason ? dr->reason : "?");
}

/* ---- writing outcomes back ----------------------------------------------- */

/* Logs the first STALE_NAMED stale outcomes of a statement by event_id:
 * after a long broker outage many outcomes can be late at once. */
static void log_stale(void *ctx, const struct pollout_entry *x, size_t nth)
{
    const struct pr *r = ctx;
    if (nth <= STALE_NAMED)
        log_warn("event %s: lease lost (no longer CLAIMED by %s at generation %" PRId64
                 "): its %s outcome is not recorded; the row's current owner decides",
                 x->event_id, r->owner, x->gen, pollout_kind_name(x->kind));
}

/* Writes the outcomes of one group (sent, or everything else) with one
 * statement. Returns 0, -1 when the statement failed (the outcomes stay
 * queued). */
static int write_group(struct pr *r, bool sent)
{
    struct pollout_params p = {0};
    int n = pollout_params(&r->out, sent, &p);
    if (n <= 0) {
        if (n < 0) log_error("out of memory writing outcomes");
        r->st.fatal = r->st.fatal || n < 0;
        pollout_params_free(&p);
        return n;
    }
    const char *params[] = {p.ids.s, p.gens.s, r->owner, p.sts.s, p.delays.s, p.errs.s,
                            p.bumps.s};
    PGresult *res = pr_exec(r, sent ? "marking events SENT" : "recording failed deliveries",
                         sent ? r->sql.sent : r->sql.fail, sent ? 3 : 7, params,
                         PGRES_TUPLES_OK);
    pollout_params_free(&p);
    if (!res) return -1;
    int nchanged = PQntuples(res);
    const char **changed = calloc((size_t)nchanged + 1, sizeof(*changed));
    if (!changed) {
        PQclear(res);
        log_error("out of memory");
        r->st.fatal = true;
        return -1;
    }
    for (int i = 0; i < nchanged; i++) changed[i] = PQgetvalue(res, i, 0);
    size_t stale = pollout_done(&r->out, sent, changed, (size_t)nchanged, log_stale, r);
    r->st.outcomes = r->out.n;
    if (stale > STALE_NAMED)
        log_warn("... and %zu more late outcomes of expired leases (not recorded)",
                 stale - STALE_NAMED);
    free(changed);
    PQclear(res);
    if (sent && nchanged > 0) r->st.claim_now = true; /* later events are claimable now */
    return 0;
}

void pr_write_results(struct pr *r, int64_t now)
{
    if (!pollstate_results_due(&r->st, now)) return;
    size_t retries = pollout_count(&r->out, OUT_RETRY);
    if (retries) log_info("%zu events back to PENDING with backoff", retries);
    if (write_group(r, true) != 0 || write_group(r, false) != 0)
        r->st.results_retry_ms = clock_mono_ms() + RESULT_RETRY_MS;
}

/* ---- retention ----------------------------------------------------------- */

void pr_run_retention(struct pr *r, int64_t now)
{
    const struct config *c = r->cfg;
    char age[32], limit[32];
    long long total = 0;
    int batches = 0;
    r->st.next_retention_ms = now + c->poll_retention_interval_ms;
    snprintf(age, sizeof(age), "%" PRId64, c->poll_retention_ms);
    snprintf(limit, sizeof(limit), "%d", c->poll_retention_batch);
    const char *params[] = {age, limit};
    while (!*r->stop) {
        PGresult *res = pr_exec(r, "deleting old SENT rows (retention)", r->sql.retention, 2,
                             params, PGRES_COMMAND_OK);
        if (!res) break;
        long long n = atoll(PQcmdTuples(res));
        PQclear(res);
        total += n;
        if (n > 0) batches++;
        if (n < c->poll_retention_batch) break;
        producer_poll(r->prod, 0); /* keep reports flowing between batches */
    }
    if (total > 0)
        log_info("retention: deleted %lld SENT rows older than %" PRId64 " s in %d batch%s",
                 total, c->poll_retention_ms / 1000, batches, batches == 1 ? "" : "es");
}
