/*
 * pollrelay.c - polling mode (see pollrelay.h): the lease-based relay for
 * databases without logical replication.
 *
 *   NOTIFY / poll interval --> claim (one short transaction, committed)
 *        --> rows --> outbox map --> producer --> delivery reports
 *        --> outcomes --> conditional UPDATEs (SENT / PENDING / QUARANTINED)
 *
 * One thread, one wait per turn (evloop.h) over the producer's wake-up
 * pipe, the Postgres socket and the earliest deadline; the phases and
 * deadlines of the loop are pollstate.h's (start-up checks, the
 * non-blocking connect, a batch waiting for room in the producer queue,
 * the drain of a graceful stop). The queue of outcomes and its statements'
 * parameters are pollout.h's, the statements themselves polling.h's
 * (prepared by polldb.h, run with pgsql.h). No row lock is ever held while
 * the broker is talked to: the claim statement commits before the first
 * message is produced, and the outcome updates run after the reports.
 * Per-aggregate order comes from the claim statement itself: a row is
 * claimable only when no earlier row (by seq) of its aggregate is unsent,
 * so at most one event per aggregate is in flight across all relays, and
 * it was ACKed before the next is claimed.
 *
 * The files of the relay and what each does: pollrelay_int.h.
 *
 * Errors: a step that fails logs once, then sets r->st.fatal or schedules
 * its retry; the few that return a status return 0 or -1 (pr_setup(): an
 * exit code, exitcode.h), and the producing steps say whether the row was
 * taken (false: the producer queue was full).
 */
#include "pollrelay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "config_outbox.h"
#include "config_serde.h"
#include "exitcode.h"
#include "log.h"
#include "pgconn.h"
#include "pgsql.h"
#include "pollrelay_int.h"
#include "registry.h"
#include "str.h"

/* ---- the loop ------------------------------------------------------------ */

/* Waits for the producer, the Postgres socket (read, or what the connect
 * needs) or the earliest deadline, then serves the socket. */
static void wait_turn(struct pr *r, int64_t now)
{
    struct evloop l;
    evloop_begin(&l, pollstate_wake_ms(&r->st, now));
    evloop_watch(&l, producer_wakeup_fd(r->prod), false);
    evloop_watch(&l, registry_wakeup_fd(r->serdes.reg), false); /* a schema arrived */
    int fd = r->conn ? PQsocket(r->conn) : -1;
    r->connect_fd = fd;
    evloop_watch(&l, fd, r->st.db == DB_CONNECTING && r->connect_poll == PGRES_POLLING_WRITING);
    evloop_wait(&l, now);
    if (r->serdes.reg && evloop_ready(&l, registry_wakeup_fd(r->serdes.reg)))
        registry_wakeup_drain(r->serdes.reg);
    now = clock_mono_ms();
    if (r->st.db == DB_CONNECTING) return pr_connect_step(r, &l, now);
    if (r->st.db != DB_UP || !evloop_ready(&l, fd)) return;
    if (!PQconsumeInput(r->conn)) {
        char why[1100];
        pgconn_message(r->conn, NULL, r->cfg->pg_conninfo, "connection lost", why, sizeof(why));
        return pr_disconnect(r, why);
    }
    pr_drain_notifies(r);
}

/* A RUN turn: whatever is due. */
static void run_due(struct pr *r, int64_t now)
{
    char err[512];
    if (pollstate_connect_due(&r->st, now)) pr_connect_start(r, now);
    producer_poll(r->prod, 0);
    pr_write_results(r, now);
    if (pollstate_produce_due(&r->st, now))
        pr_produce_claimed(r, now);
    else if (pollstate_claim_due(&r->st, now))
        pr_claim_and_produce(r, now);
    if (pollstate_retention_due(&r->st, now)) pr_run_retention(r, now);
    if (pollstate_backlog_due(&r->st, now)) pr_query_backlog(r, now);
    if (producer_fatal(r->prod, err, sizeof(err))) {
        log_error("kafka: fatal producer error: %s", err);
        r->st.fatal = true;
    }
}

/* A CHECK turn: set-up mistakes (missing table or columns, privileges)
 * stop here; they fail every time, a server restarting under us does
 * not. */
static void run_check(struct pr *r)
{
    bool passed = check_run(&r->kcfg, true, CHECK_SCOPE_STARTUP) == 0;
    if (pollstate_checked(&r->st, passed, clock_mono_ms(), r->cfg->pg_retry_max_ms)) {
        r->checks_failed = true;
        return;
    }
    if (!passed)
        log_warn("start-up checks failed (attempt %d of %d); trying again in %d ms",
                 r->st.check_tries, POLLSTATE_CHECK_TRIES, r->cfg->pg_retry_max_ms);
}

/* A RECORD turn: one try is one connect (when there is no connection) and
 * one write of the outcomes. */
static void record_try(struct pr *r, int64_t now)
{
    if (r->st.db == DB_CONNECTING) return; /* the wait drives it */
    if (r->st.db == DB_DOWN && !r->record_dialed) {
        r->record_dialed = true;
        pr_connect_start(r, now);
        if (r->st.db == DB_CONNECTING) return;
    }
    r->record_dialed = false;
    r->st.results_retry_ms = 0;
    pr_write_results(r, now);
    r->st.record_tries++;
}

/* What entering phase ph does. */
static void phase_entered(struct pr *r, enum poll_phase was, enum poll_phase ph, int64_t now)
{
    if (ph == PH_DRAIN && r->st.inflight)
        log_info("stopping: waiting for %zu outstanding deliveries", r->st.inflight);
    if (ph == PH_RECORD) { /* what is still unknown back to PENDING at once */
        for (size_t i = 0; i < r->st.inflight; i++)
            pr_add_result(r, OUT_RELEASE, r->fl[i].event_id, r->fl[i].gen, 0, NULL);
        r->st.inflight = 0;
    }
    if (ph != PH_DONE) return;
    if (was == PH_RECORD && r->st.outcomes)
        log_warn("%zu outcomes could not be recorded; their leases will expire",
                 r->st.outcomes);
    if (was == PH_RUN) { /* fatal: releases, outcomes so far */
        if (r->cl.res) pr_claim_close(r);
        pr_write_results(r, now);
    }
}

/* One turn of the loop. */
static void turn(struct pr *r)
{
    int64_t now = clock_mono_ms();
    pr_tick(r, now);
    r->st.stop = *r->stop != 0;
    enum poll_phase was = r->st.phase;
    enum poll_phase ph = pollstate_advance(&r->st, now, PRODUCER_SHUTDOWN_FLUSH_MS);
    if (ph != was) phase_entered(r, was, ph, now);
    if (ph == PH_CHECK && pollstate_check_due(&r->st, now)) run_check(r);
    if (ph == PH_RUN) run_due(r, now);
    if (ph == PH_DRAIN) producer_poll(r->prod, 0);
    if (ph == PH_RECORD) record_try(r, now);
    if (ph != PH_DONE) wait_turn(r, clock_mono_ms());
}

/* ---- set-up -------------------------------------------------------------- */

/* hostname:pid, unless [polling] owner_id is set. */
static void owner_id(const struct config *c, char *out, size_t outlen)
{
    if (c->poll_owner_id) {
        snprintf(out, outlen, "%s", c->poll_owner_id);
        return;
    }
    char host[256];
    if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "unknown");
    host[sizeof(host) - 1] = '\0';
    snprintf(out, outlen, "%s:%ld", host, (long)getpid());
}

/* r->kcfg: message.timeout.ms defaults to half the lease in polling mode:
 * the outcome of a delivery is then known while the lease still holds.
 * Returns 0, -1 on out of memory (logged). */
static int derive_config(struct pr *r)
{
    const struct config *c = r->cfg;
    r->kcfg = *c;
    const char *set = config_kafka_get(c, "message.timeout.ms");
    if (set) {
        long long ms = atoll(set);
        if (ms == 0 || ms >= c->poll_lease_ms)
            log_warn("[kafka] message.timeout.ms = %s is not below the lease (%" PRId64
                     " ms): a slow delivery can outlive its lease and be sent again by "
                     "another relay",
                     set, c->poll_lease_ms);
        return 0;
    }
    r->kafka = calloc(c->nkafka + 1, sizeof(*r->kafka));
    if (!r->kafka) goto oom;
    if (c->nkafka) memcpy(r->kafka, c->kafka, c->nkafka * sizeof(*r->kafka));
    r->derived_timeout = true;
    struct kv *d = &r->kafka[c->nkafka];
    *d = (struct kv){strdup("message.timeout.ms"), str_printf("%" PRId64, c->poll_lease_ms / 2),
                     c->loading};
    r->kcfg.kafka = r->kafka;
    r->kcfg.nkafka = c->nkafka + 1;
    if (d->key && d->value) return 0;
oom:
    log_error("out of memory");
    return -1;
}

static void pr_free(struct pr *r)
{
    pr_claim_close(r); /* first: on a fatal stop it may add releases */
    for (size_t i = 0; i < r->st.inflight; i++) free(r->fl[i].event_id);
    pollout_free(&r->out);
    free(r->fl);
    httpd_stop(r->http);
    free(r->backlog_sql);
    metrics_free(&r->met);
    free(r->text.data);
    producer_free(r->prod);
    PQfinish(r->conn);
    polling_sql_free(&r->sql);
    serde_set_free(&r->serdes);
    outbox_map_free(&r->map);
    if (r->derived_timeout) {
        free(r->kafka[r->cfg->nkafka].key);
        free(r->kafka[r->cfg->nkafka].value);
    }
    free(r->kafka);
}

/* Everything before the loop. Returns EXIT_OK or the exit code (logged). */
static int pr_setup(struct pr *r)
{
    const struct config *cfg = r->cfg;
    char err[1024];
    pr_metrics_setup(r);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    owner_id(cfg, r->owner, sizeof(r->owner));
    char *qch = pgsql_quote_ident(cfg->poll_notify_channel);
    snprintf(r->channel_sql, sizeof(r->channel_sql), "LISTEN %s", qch ? qch : "outboxd");
    free(qch);
    backoff_init(&r->backoff, cfg->pg_retry_min_ms, cfg->pg_retry_max_ms);
    outage_init(&r->pg_outage, "postgres", NULL, OUTAGE_EVERY_MS);
    r->st = (struct pollstate){.phase = PH_CHECK,
                               .batch = cfg->poll_batch_size,
                               .retention = cfg->poll_retention_ms > 0};
    /* config_validate() refused several sections in polling mode. */
    if (config_outbox_map(config_outbox_at(cfg, 0), &r->map, err, sizeof(err)) != 0) {
        log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    if (config_serde_set(cfg, &r->serdes, err, sizeof(err)) != 0) {
        log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    err[0] = '\0';
    if (derive_config(r) != 0 ||
        !(r->prod = producer_new(&r->kcfg, pr_on_delivery, r, err, sizeof(err)))) {
        if (err[0]) log_error("configuration: %s", err);
        return EXIT_USAGE;
    }
    int code = httpd_from_config(cfg->http_listen, &cfg->http_addr, &r->http);
    if (code != 0) return code;
    if (r->http && !(r->backlog_sql = polling_backlog_sql(&r->map))) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    r->st.backlog = r->backlog_sql != NULL;
    return EXIT_OK;
}

int poll_relay_run(const struct config *cfg, volatile sig_atomic_t *stop)
{
    struct pr r;
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    r.stop = stop;
    int code = pr_setup(&r);
    if (code != EXIT_OK) {
        pr_free(&r);
        return code;
    }
    while (r.st.phase != PH_DONE) turn(&r);
    code = r.st.fatal ? EXIT_FATAL : EXIT_OK;
    if (!r.checks_failed)
        log_info("polling relay stopped: claimed %" PRIu64 ", sent %" PRIu64
                 ", retried %" PRIu64 ", quarantined %" PRIu64 ", released %" PRIu64
                 ", stale outcomes %" PRIu64,
                 r.n_claimed, r.out.recorded[OUT_SENT], r.out.recorded[OUT_RETRY],
                 r.out.recorded[OUT_QUARANTINE], r.out.recorded[OUT_RELEASE], r.out.stale);
    pr_free(&r);
    return code;
}
