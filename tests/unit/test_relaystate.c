/*
 * test_relaystate.c - a graceful stop's order in the relay's loop
 * (relaystate.h), without a database: a stop ends the stream state and
 * drains; the drain waits for outstanding deliveries before the final
 * confirmation; the position then confirmed (the offset file) is never
 * past an event that was not ACKed. The producer is a real librdkafka
 * producer whose broker (127.0.0.1:1) never answers, so what it was given
 * stays outstanding; the drain's deadline is moved by the test, not waited
 * for.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "changes.h"
#include "clock.h"
#include "config.h"
#include "offset.h"
#include "relayconfirm.h"
#include "relaystate.h"

static struct config cfg;
static struct relay r;
static volatile sig_atomic_t stop_flag;
static char offsets[64];

static void on_report(void *ctx, const struct delivery_report *dr)
{
    struct relay *rr = ctx;
    if (changes_on_delivery(&rr->chg, dr)) rr->events_acked++;
}

static int send_to(void *ctx, const struct outbox_event *ev, uint64_t seq, int *kafka_err,
                   char *err, size_t errlen)
{
    return producer_send(ctx, ev, seq, kafka_err, err, errlen);
}

static const char *const columns[OC__COUNT] = {"event_id", "aggregate_type", "aggregate_id",
                                               "aggregate_version", "event_type", "payload"};

static void setup(void)
{
    char err[512];
    snprintf(offsets, sizeof(offsets), "/tmp/test_relaystate.%d.offset", (int)getpid());
    unlink(offsets);
    ck_assert_int_eq(config_init(&cfg), 0);
    ck_assert_int_eq(config_set(&cfg, "offsets", "file", offsets, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&cfg, "kafka", "bootstrap.servers", "127.0.0.1:1", err,
                                sizeof(err)),
                     0);
    memset(&r, 0, sizeof(r));
    stop_flag = 0;
    r.cfg = &cfg;
    r.stop = &stop_flag;
    metrics_init(&r.met);
    struct outbox_map map;
    ck_assert_int_eq(outbox_map_init(&map, "public.outbox", columns, "events", err, sizeof(err)),
                     0);
    outbox_set_init(&r.outboxes);
    ck_assert_int_eq(outbox_set_add(&r.outboxes, &map, NULL), 0);
    r.prod = producer_new(&cfg, on_report, &r, err, sizeof(err));
    ck_assert_msg(r.prod != NULL, "producer_new: %s", err);
    changes_init(&r.chg, &cfg, &r.outboxes, &r.met, (struct sink){send_to, r.prod});
    ck_assert_ptr_nonnull(r.trk = tracker_new(100));
    changes_start(&r.chg, r.trk, NULL);
    confirmer_init(&r.confirm, cfg.offsets_file, cfg.pg_status_interval_ms, false,
                   confirm_io_stream(&r.st));
    struct confirmer *c = &r.confirm;
    c->stored_lsn = c->sent_lsn = c->start_lsn = 100;
    c->identity = (struct offset_state){.format = 2, .has_identity = true, .timeline = 1};
    snprintf(c->identity.system, sizeof(c->identity.system), "1");
    snprintf(c->identity.slot, sizeof(c->identity.slot), "s");
    snprintf(c->identity.plugin, sizeof(c->identity.plugin), "pgoutput");
    snprintf(c->identity.database, sizeof(c->identity.database), "d");
}

static void teardown(void)
{
    decoder_free(r.dec); /* a recovery makes a new one */
    changes_free(&r.chg);
    producer_free(r.prod);
    tracker_free(r.trk);
    metrics_free(&r.met);
    outbox_set_free(&r.outboxes);
    config_free(&cfg);
    unlink(offsets);
}

/* A transaction [final_lsn, end_lsn) with nevents outbox events. */
static void txn(lsn_t final_lsn, lsn_t end_lsn, int nevents)
{
    struct repl_msg m = {.kind = RM_BEGIN};
    m.u.begin.final_lsn = final_lsn;
    ck_assert_int_eq(changes_on_message(&r.chg, &m), STEP_OK);
    for (int i = 0; i < nevents; i++) {
        struct outbox_event ev = {.topic = "events", .key = {"k", 1}, .value = {"{}", 2}};
        int kerr;
        char err[256];
        ck_assert_int_eq(tracker_event_sent(r.trk, r.chg.cur_seq, &(uint64_t){0}), 0);
        ck_assert_int_eq(producer_send(r.prod, &ev, r.chg.cur_seq, &kerr, err, sizeof(err)),
                         PRODUCER_OK);
    }
    m = (struct repl_msg){.kind = RM_COMMIT};
    m.u.commit.commit_lsn = final_lsn;
    m.u.commit.end_lsn = end_lsn;
    ck_assert_int_eq(changes_on_message(&r.chg, &m), STEP_OK);
}

/* The LSN in the offset file, 0 when there is none. */
static lsn_t stored(void)
{
    char err[512];
    struct offset_state st;
    int rc = offset_read(offsets, &st, err, sizeof(err));
    ck_assert_msg(rc >= 0, "%s", err);
    return rc == 1 ? st.lsn : 0;
}

START_TEST(test_stop_drains_then_confirms_only_acked)
{
    txn(140, 150, 0); /* nothing to ACK: flushable at once */
    txn(240, 250, 1); /* outstanding: its broker never answers */
    r.state = RS_STREAM;
    stop_flag = 1;
    ck_assert(!relay_step(&r)); /* the stop ends the stream state... */
    ck_assert_int_eq(r.state, RS_DRAIN); /* ...for the drain */
    ck_assert(relay_step(&r));           /* an event outstanding: wait */
    ck_assert_int_eq(r.state, RS_DRAIN);
    ck_assert_uint_eq(stored(), 0); /* nothing confirmed before the drain ends */
    r.state_until_ms = clock_mono_ms() - 1; /* PRODUCER_SHUTDOWN_FLUSH_MS passed */
    relay_step(&r);
    ck_assert_int_eq(r.state, RS_DONE);
    ck_assert_int_eq(r.exit_code, 0);
    ck_assert_uint_eq(stored(), 150); /* never past the unACKed event */
}
END_TEST

/* exactly_once (issue 53, item 6): events count as ACKed in the tracker
 * while their Kafka transaction is open; when the transactional client
 * fails for good it is replaced (replace_failed_client(), and
 * discard_fenced_client() and relaytxn_stand_by() alike, clear
 * have_committed), and the new client's init_transactions aborts that
 * transaction. A forced status then (a stop, a fatal error) must still
 * confirm only what committed: before the fix the cap was lifted with
 * have_committed, and the offset file and the slot went past the aborted
 * events. */
START_TEST(test_exactly_once_cap_holds_after_client_replaced)
{
    char err[256];
    ck_assert_int_eq(config_set(&cfg, "delivery", "mode", "exactly_once", err, sizeof(err)),
                     0);
    struct offset_state pos = r.confirm.identity;
    pos.lsn = 100;
    ktxn_started(&r.txn.kt, &pos, clock_mono_ms());
    txn(140, 150, 0); /* in the open Kafka transaction: all "ACKed" */
    txn(240, 250, 0);
    ck_assert_uint_eq(tracker_flush_lsn(r.trk), 250);
    ck_assert_int_eq(relay_send_status_ex(&r, false, true), STEP_OK);
    ck_assert_uint_le(stored(), 100); /* capped while the client is the same */
    r.txn.kt.have_committed = false;  /* what replacing the client does */
    ck_assert_int_eq(relay_send_status_ex(&r, false, true), STEP_OK);
    ck_assert_uint_le(stored(), 100); /* and after */
    /* A commit moves the cap. */
    pos.lsn = 250;
    ktxn_committed(&r.txn.kt, &pos, clock_mono_ms());
    ck_assert_int_eq(relay_send_status_ex(&r, false, true), STEP_OK);
    ck_assert_uint_eq(stored(), 250);
}
END_TEST

START_TEST(test_drain_with_nothing_outstanding_confirms_at_once)
{
    txn(140, 150, 0);
    r.state = RS_STREAM;
    stop_flag = 1;
    relay_step(&r);
    ck_assert_int_eq(r.state, RS_DRAIN);
    ck_assert(!relay_step(&r)); /* no wait: nothing outstanding */
    ck_assert_int_eq(r.state, RS_DONE);
    ck_assert_uint_eq(stored(), 150);
}
END_TEST

START_TEST(test_failed_event_ends_recovery_with_exit_1)
{
    txn(140, 150, 0);
    tracker_fail(r.trk, tracker_txn_tag(1)); /* a transaction failed (here: an earlier one) */
    r.state = RS_RECOVER;
    relay_step(&r);
    ck_assert_int_eq(r.state, RS_DONE);
    ck_assert_int_eq(r.exit_code, 1);
}
END_TEST

/* A stream whose last status is older than its fence (standby.h: the
 * process stalled, the server may have given the slot away) is dropped
 * before anything more is read from it: r.st is NULL here, so a read would
 * crash. It is counted as fenced, and the recovery waits for the event
 * already handed to librdkafka, as after any lost stream. */
START_TEST(test_stream_past_its_fence_is_dropped_unread)
{
    txn(140, 150, 0);
    txn(240, 250, 1); /* in flight */
    r.state = RS_STREAM;
    r.standby.fence_ms = 3000;
    r.stream_up_ms = clock_mono_ms() - 10000;
    r.confirm.last_status_ms = clock_mono_ms() - 3100;
    ck_assert(!relay_step(&r));
    ck_assert_int_eq(r.state, RS_RECOVER);
    ck_assert_uint_eq(metrics_get(&r.met.reconnects, "fenced"), 1);
    ck_assert_uint_eq(metrics_get(&r.met.reconnects, "stream_lost"), 0);
    ck_assert(!r.standby.fenced); /* the next loss is counted as what it is */
    ck_assert(relay_step(&r)); /* the event in flight: wait for its report */
    ck_assert_int_eq(r.state, RS_RECOVER);
    ck_assert_uint_eq(stored(), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("relaystate");
    TCase *tc = tcase_create("stop");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_stop_drains_then_confirms_only_acked);
    tcase_add_test(tc, test_exactly_once_cap_holds_after_client_replaced);
    tcase_add_test(tc, test_drain_with_nothing_outstanding_confirms_at_once);
    tcase_add_test(tc, test_failed_event_ends_recovery_with_exit_1);
    tcase_add_test(tc, test_stream_past_its_fence_is_dropped_unread);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
