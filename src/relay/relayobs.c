/*
 * relayobs.c - the logical relay's metrics, readiness and monitor glue
 * (see relayobs.h). It changes struct relay_obs (relay_int.h); the other
 * files of the relay go through relay_publish_soon() and friends.
 */
#include "relayobs.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "fixit.h"
#include "kstats.h"
#include "log.h"
#include "relaytxn.h"
#include "signals.h"
#include "standby.h"

/* ---- observability -------------------------------------------------------
 * The loop beats on every turn and publishes a snapshot for the HTTP
 * server's thread every HTTPD_PUBLISH_MS (see httpd.h). */

/* The Kafka side of readiness: why not, or NULL. */
static const char *kafka_not_ready(const struct relay *r)
{
    int up = producer_brokers_up(r->prod);
    if (up < 0) return "Kafka broker state not known yet (librdkafka statistics)";
    if (up == 0) return "no Kafka broker reachable";
    return NULL;
}

/* Why the relay is not ready, or NULL when it is. A standby (the slot is
 * held by another process) is ready while it could take over: it reached
 * the server and sees a Kafka broker (in exactly_once it has no Kafka
 * client before the take-over: the server is all it can see). It is doing
 * its job, and a StatefulSet's rolling update waits for each pod to be
 * ready, so a standby that never were would stall it (README "Hot
 * standby"). */
static const char *not_ready_reason(const struct relay *r)
{
    if (*r->stop) return "shutting down";
    if (r->trk && tracker_failed(r->trk)) return "an event failed: stopping";
    if (r->obs.pub_lost) return "the outbox table is no longer published: stopping";
    if (r->slot_lost)
        return "the replication slot is lost (invalidated or missing): halted; run outboxd "
               "repair (README \"Gap repair\")";
    if (r->standby.held)
        return relaytxn_on(r) && !producer_txn_ready(r->prod) ? NULL : kafka_not_ready(r);
    if (!r->streaming) return "not streaming from the replication slot (connecting)";
    const char *schema = changes_serde_waiting(&r->chg, clock_mono_ms() -
                                                            r->cfg->registry_not_ready_ms);
    if (schema) return schema;
    if (r->backoff.failures > 0)
        return "the replication stream keeps failing (not yet up for 5 s since the last "
               "failure)";
    return kafka_not_ready(r);
}

/* What /readyz adds to "ready" (NULL: nothing): a standby (of slot) says
 * so. */
static const char *ready_note(const struct relay_standby *s, const char *slot, char *buf,
                              size_t len)
{
    if (!s->held) return NULL;
    char pid[32] = "pid unknown";
    if (s->holder_pid) snprintf(pid, sizeof(pid), "pid %d", s->holder_pid);
    snprintf(buf, len, "standing by: slot \"%s\" is held by another process (%s)", slot,
             pid);
    return buf;
}

/* Fills the gauges of r->met from the modules that own the values. */
static void collect_gauges(struct relay *r)
{
    struct metrics *m = &r->met;
    m->inflight_events = r->trk ? tracker_pending_events(r->trk) : 0;
    m->inflight_txns = r->trk ? tracker_pending_txns(r->trk) : 0;
    m->kafka_queue = producer_outq_len(r->prod);
    m->kafka_brokers_up = producer_brokers_up(r->prod);
    m->kafka_unreachable = producer_unreachable_total(r->prod);
    m->received_lsn = r->confirm.received_lsn;
    m->acked_lsn = r->trk ? tracker_flush_lsn(r->trk) : r->confirm.stored_lsn;
    m->confirmed_lsn = r->confirm.sent_lsn;
    m->streaming = r->streaming;
    m->slot_lost = r->slot_lost;
    m->slot_lost_reason = r->slot_lost_reason;
    m->registry_on = r->serdes.reg != NULL;
    if (r->serdes.reg) registry_stats(r->serdes.reg, &m->registry);
    m->role = r->streaming ? ROLE_ACTIVE : r->standby.held ? ROLE_STANDBY : ROLE_CONNECTING;
    int64_t t = r->trk ? tracker_flushed_commit_time(r->trk) : 0;
    m->acked_commit_time_us = t ? t + PG_EPOCH_OFFSET_US : 0;
}

void relay_publish(struct relay *r, int64_t now)
{
    char note[256];
    collect_gauges(r);
    httpd_publish_metrics(r->obs.http, &r->met, &r->obs.text, clock_unix_us(),
                          not_ready_reason(r),
                          ready_note(&r->standby, r->cfg->pg_slot, note, sizeof(note)));
    r->obs.next_publish_ms = now + HTTPD_PUBLISH_MS;
}

void relay_publish_soon(struct relay_obs *o)
{
    o->next_publish_ms = 0;
}

void relay_stream_started(struct relay_obs *o)
{
    o->server_stopping = false;
    relay_publish_soon(o);
}

bool relay_server_stopping(struct relay_obs *o)
{
    bool stopping = o->server_stopping;
    o->server_stopping = false;
    return stopping;
}

/* The outbox table left the publication (or it stopped publishing inserts):
 * pgoutput skips its inserts from the change on, without a word. */
static void publication_lost(struct relay *r, const struct monitor_report *rep)
{
    const struct config *c = r->cfg;
    char a[LSN_STRLEN], b[LSN_STRLEN], fix[512];
    r->obs.pub_lost = true;
    relay_publish_soon(&r->obs); /* not ready: say so at once */
    metrics_count(&r->met.failed, "NOT_IN_PUBLICATION", 1);
    if (rep->pub_member)
        fixit_publish_inserts(fix, sizeof(fix), c->pg_publication);
    else if (rep->pub_leaves)
        snprintf(fix, sizeof(fix),
                 "ALTER PUBLICATION %s SET (publish_via_partition_root = true)",
                 c->pg_publication);
    else if (r->outboxes.n == 1)
        fixit_add_table(fix, sizeof(fix), c->pg_publication, r->tables);
    else /* which one is missing: outboxd check's publication lines say */
        snprintf(fix, sizeof(fix), "add the missing one with %s (outboxd check names it)",
                 fixit_add_table((char[256]){0}, 256, c->pg_publication, "TABLE_NAME"));
    lsn_format(r->confirm.proven_lsn, a);
    lsn_format(rep->pub_lsn, b);
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", a}),
           "%s %s is no longer published by publication \"%s\" (%s): "
           "pgoutput skips its inserts, so events committed after %s (the last position "
           "where membership was proven; found out at %s) may be missing from Kafka. The "
           "slot is not confirmed past %s. Stopping. Fix: %s; pgoutput will not send the "
           "events committed while the table was out of the publication even then (it "
           "decodes each change with the catalog of its time): list them with outboxd "
           "verify and insert them again",
           r->outboxes.n == 1 ? "the outbox table" : "one of the outbox tables", r->tables,
           c->pg_publication,
           rep->pub_member   ? "it no longer publishes inserts"
           : rep->pub_leaves ? "the table is partitioned and the publication has "
                               "publish_via_partition_root = false: pgoutput sends its "
                               "inserts as its partitions'"
                             : "the table was removed from it",
           a, b, a, fix);
}

/* A publication check answered: membership proven up to rep->pub_lsn, or
 * lost. A missing publication proves nothing (the stream itself fails on
 * it, see slotsetup.c). */
static void on_publication_check(struct relay *r, const struct monitor_report *rep)
{
    r->obs.proofs++;
    if (!r->confirm.pub_capped || r->obs.pub_lost) return;
    if (!rep->pub_found) {
        if (!r->obs.pub_missing_warned)
            log_warn("publication \"%s\" does not exist (publication check): nothing is "
                     "confirmed until it does",
                     r->cfg->pg_publication);
        r->obs.pub_missing_warned = true;
        return;
    }
    r->obs.pub_missing_warned = false;
    if (!rep->pub_insert || !rep->pub_member) {
        publication_lost(r, rep);
        return;
    }
    confirmer_proven(&r->confirm, rep->pub_lsn);
}

/* On a standby, its WAL receiver (standby.h): a warning past
 * STANDBY_RECEIVER_WARN_MS without streaming, again every
 * STANDBY_RECEIVER_WARN_EVERY_MS, and a line when it streams again. */
static void on_receiver(struct relay *r, const char *status, int64_t now)
{
    struct relay_obs *o = &r->obs;
    int64_t stalled = standby_receiver_stalled(status, now, &o->receiver_since_ms);
    if (stalled == 0) {
        if (o->receiver_warn_ms)
            log_info("the standby receives WAL again (its WAL receiver is %s): decoding "
                     "goes on",
                     *status ? status : "gone: the server was promoted");
        o->receiver_warn_ms = 0;
        return;
    }
    if (stalled < STANDBY_RECEIVER_WARN_MS || now < o->receiver_warn_ms) return;
    log_warn("the standby this slot is on has received no WAL for %lld s (its WAL "
             "receiver is %s): slot \"%s\" decodes nothing more, and its lag, measured "
             "against the standby's own replay position, does not grow. Its primary is "
             "down, or another server was promoted and this standby cannot follow it (its "
             "log: \"new timeline ... forked off current database system timeline ... "
             "before current recovery point\": then it must be rebuilt from the new "
             "primary, without the slot, and the gap repaired, deploy/standby-failover.md)",
             (long long)(stalled / 1000),
             strcmp(status, "none") == 0 ? "not running" : status, r->cfg->pg_slot);
    o->receiver_warn_ms = now + STANDBY_RECEIVER_WARN_EVERY_MS;
}

/* Steps the monitoring connection and counts what it found. */
static void monitor_tick(struct relay *r, int64_t now)
{
    struct monitor_report rep;
    monitor_step(r->obs.mon, now, clock_unix_us(), &rep);
    struct metrics *m = &r->met;
    if (rep.slot_answer) {
        m->slot_seen = rep.slot_found && rep.lag_bytes >= 0;
        m->slot_lag_bytes = rep.lag_bytes;
        m->slot_wal_status = metrics_wal_status_parse(rep.wal_status);
        m->slot_failover = rep.failover;
        if (rep.slot_found) on_receiver(r, rep.receiver, now);
    }
    if (rep.heartbeat_sent) m->heartbeats_sent++;
    if (rep.failed) m->monitor_errors++;
    if (rep.pub_answer) on_publication_check(r, &rep);
    if (rep.server_stopping && r->confirm.pub_capped) r->obs.server_stopping = true;
}

/* The start of every turn of the loop: signals, the monitor, the HTTP
 * server's beat and snapshot. */
void relay_tick(struct relay *r)
{
    signals_service(); /* SIGHUP, SIGUSR1/2: signals.h */
    int64_t now = clock_mono_ms();
    if (r->obs.mon) monitor_tick(r, now);
    if (httpd_tick(r->obs.http, now, r->obs.next_publish_ms)) relay_publish(r, now);
}

/* Every reason and cause this relay can count, at 0 from the start (see
 * metrics_seed()): the row faults, the undecodable record, the poison
 * errors (dead-lettered or failed), a lost publication, a delivery that
 * timed out, and the causes of reconnects (connect_step() and
 * enter_recover() in relaystate.c). Other librdkafka errors still appear
 * when first counted. */
void relay_seed_metrics(struct metrics *m, bool pub_capped)
{
    for (int f = OF_SCHEMA; f < OF__COUNT; f++) {
        metrics_seed(&m->failed, outbox_fault_name((enum outbox_fault)f));
        if (f != OF_SCHEMA)
            metrics_seed(&m->dead_lettered, outbox_fault_name((enum outbox_fault)f));
    }
    metrics_seed(&m->failed, INVALID_RECORD);
    metrics_seed(&m->dead_lettered, INVALID_RECORD);
    for (size_t i = 0; producer_poison_name(i); i++) {
        metrics_seed(&m->failed, producer_poison_name(i));
        metrics_seed(&m->dead_lettered, producer_poison_name(i));
    }
    metrics_seed(&m->failed, producer_timed_out_name());
    if (pub_capped) metrics_seed(&m->failed, "NOT_IN_PUBLICATION");
    metrics_seed(&m->messages_ignored, "non_transactional");
    static const char *const causes[] = {"connect_failed", "connection_lost", "slot_in_use",
                                         "stream_lost", "fenced"};
    for (size_t i = 0; i < sizeof(causes) / sizeof(causes[0]); i++)
        metrics_seed(&m->reconnects, causes[i]);
}

/* One line with the commit-to-ACK latency of every event ACKed since
 * start (the benchmark reads it; so can an operator). */
static void log_commit_to_ack(const struct latency_hist *h)
{
    if (h->count == 0) return;
    log_info("commit-to-ACK latency over %llu events: p50 %lld us, p99 %lld us, max %lld us, "
             "p90 %lld us, p99.9 %lld us, mean %llu us",
             (unsigned long long)h->count, (long long)latency_quantile(h, 0.50),
             (long long)latency_quantile(h, 0.99), (long long)h->max_us,
             (long long)latency_quantile(h, 0.90), (long long)latency_quantile(h, 0.999),
             (unsigned long long)(h->sum_us / h->count));
}

/* One line per stage with samples (changes.h says what each measures;
 * tests/bench parses them). */
static void log_stage(enum metrics_stage s, const struct latency_hist *h)
{
    if (h->count == 0) return;
    log_info("stage %s over %llu %s: p50 %lld us, p99 %lld us, max %lld us",
             metrics_stage_name(s), (unsigned long long)h->count,
             s == STAGE_ACK_TO_CONFIRM ? "transactions" : "events",
             (long long)latency_quantile(h, 0.50), (long long)latency_quantile(h, 0.99),
             (long long)h->max_us);
}

/* One line per Kafka broker: librdkafka's statistics over the run. */
static void log_brokers(const struct kstats *ks)
{
    char line[1024];
    for (size_t i = 0; i < ks->n; i++) {
        kstats_format(&ks->b[i], line, sizeof(line));
        log_info("%s", line);
    }
}

void relay_log_latency(const struct relay *r)
{
    log_commit_to_ack(&r->chg.commit_to_ack);
    for (int s = 0; s < STAGE__COUNT; s++)
        log_stage((enum metrics_stage)s, &r->chg.stages[s]);
    if (r->prod) log_brokers(producer_kstats(r->prod));
}
