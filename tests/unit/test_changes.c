/*
 * test_changes.c - the relay's data path as a state machine, without a
 * server (include/pipeline/changes.h, include/pipeline/deadletter.h):
 * transaction boundaries in the tracker, backpressure (a full queue holds the event, which is
 * produced once, in order, when room comes), nothing confirmed past an
 * unACKed event, and the dead-letter outcomes under both [errors]
 * policies. The producer is a fake sink (sink.h) whose queue is full on
 * demand and which ACKs when the test says so.
 */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "changes.h"
#include "clock.h"
#include "config.h"
#include "decode.h"
#include "decoder.h"
#include "metrics.h"
#include "outbox.h"
#include "relcache.h"
#include "tracker.h"

#define MAXSENT 16

/* The fake producer: takes `room` more events (-1: any number), then says
 * the queue is full; fails every send to fail_topic with fail_err. */
struct fake {
    int room;
    const char *fail_topic;
    int fail_err;
    int nsent, nfull;
    char topic[MAXSENT][OUTBOX_TOPIC_MAX];
    char key[MAXSENT][32];
    uint64_t tag[MAXSENT];
    int64_t ts[MAXSENT]; /* each event's timestamp_ms */
};

static int fake_send(void *ctx, const struct outbox_event *ev, uint64_t tag, int *kafka_err,
                     char *err, size_t errlen)
{
    struct fake *f = ctx;
    if (f->fail_topic && strcmp(ev->topic, f->fail_topic) == 0) {
        *kafka_err = f->fail_err;
        snprintf(err, errlen, "refused by the fake");
        return PRODUCER_ERROR;
    }
    if (f->room == 0) {
        f->nfull++;
        return PRODUCER_QUEUE_FULL;
    }
    if (f->room > 0) f->room--;
    ck_assert_int_lt(f->nsent, MAXSENT);
    snprintf(f->topic[f->nsent], sizeof(f->topic[0]), "%s", ev->topic);
    snprintf(f->key[f->nsent], sizeof(f->key[0]), "%.*s", (int)ev->key.len,
             ev->key.data ? ev->key.data : "");
    f->ts[f->nsent] = ev->timestamp_ms;
    f->tag[f->nsent++] = tag;
    return PRODUCER_OK;
}

static const char *const columns[OC__COUNT] = {"event_id", "aggregate_type", "aggregate_id",
                                               "aggregate_version", "event_type", "payload"};
static const char *const table_cols[] = {"event_id",   "aggregate_type", "aggregate_id",
                                         "aggregate_version", "event_type", "payload"};

static struct config cfg;
static struct outbox_set outboxes;
static struct metrics met;
static struct tracker *trk;
static struct changes chg;
static struct fake fk;
static struct relation *rel;

static void setup_policy(const char *policy)
{
    char err[256];
    ck_assert_int_eq(config_init(&cfg), 0);
    ck_assert_int_eq(config_set(&cfg, "errors", "policy", policy, err, sizeof(err)), 0);
    struct outbox_map map;
    ck_assert_int_eq(outbox_map_init(&map, "public.outbox", columns, "events", err, sizeof(err)),
                     0);
    outbox_set_init(&outboxes);
    ck_assert_int_eq(outbox_set_add(&outboxes, &map, NULL), 0);
    metrics_init(&met);
    memset(&fk, 0, sizeof(fk));
    fk.room = -1;
    changes_init(&chg, &cfg, &outboxes, &met, (struct sink){fake_send, &fk});
    ck_assert_ptr_nonnull(trk = tracker_new(100));
    changes_start(&chg, trk, NULL);
    rel = relation_new(16384, "public", "outbox", 'd', 6);
    ck_assert_ptr_nonnull(rel);
    for (int i = 0; i < 6; i++) {
        rel->cols[i].name = strdup(table_cols[i]);
        rel->cols[i].typid = 25;
        rel->cols[i].typmod = -1;
    }
}

static void setup_dlq(void) { setup_policy("dlq"); }
static void setup_halt(void) { setup_policy("halt"); }

static void teardown(void)
{
    relation_free(rel);
    changes_free(&chg);
    tracker_free(trk);
    metrics_free(&met);
    outbox_set_free(&outboxes);
    config_free(&cfg);
}

static enum step begin(lsn_t final_lsn)
{
    struct repl_msg m = {.kind = RM_BEGIN};
    m.u.begin.final_lsn = final_lsn;
    return changes_on_message(&chg, &m);
}

static enum step commit(lsn_t commit_lsn, lsn_t end_lsn)
{
    struct repl_msg m = {.kind = RM_COMMIT};
    m.u.commit.commit_lsn = commit_lsn;
    m.u.commit.end_lsn = end_lsn;
    return changes_on_message(&chg, &m);
}

/* An outbox row with aggregate_id agg (NULL: a poison row). */
static enum step insert(const char *agg)
{
    struct col_value v[6] = {{CV_TEXT, 2, "e1"},
                             {CV_TEXT, 5, "Order"},
                             {CV_NULL, 0, NULL},
                             {CV_TEXT, 1, "1"},
                             {CV_TEXT, 7, "Created"},
                             {CV_TEXT, 2, "{}"}};
    if (agg) v[2] = (struct col_value){CV_TEXT, (uint32_t)strlen(agg), agg};
    struct repl_msg m = {.kind = RM_INSERT};
    m.u.tuple.rel = rel;
    m.u.tuple.nvalues = 6;
    m.u.tuple.values = v;
    return changes_on_message(&chg, &m);
}

/* A logical decoding message (prefix, flags 1 = transactional) holding an
 * outbox event keyed key (content: the format of emitmsg.h; NULL key: a
 * content that is not JSON). */
static enum step message(const char *prefix, uint8_t flags, const char *key)
{
    static char content[256];
    if (key)
        snprintf(content, sizeof(content),
                 "{\"v\":1,\"event_id\":\"m-%s\",\"aggregate_type\":\"Order\","
                 "\"aggregate_id\":\"%s\",\"event_type\":\"Created\",\"payload\":\"{}\"}",
                 key, key);
    else
        snprintf(content, sizeof(content), "not json");
    struct repl_msg m = {.kind = RM_MESSAGE};
    m.u.message.flags = flags;
    m.u.message.prefix = prefix;
    m.u.message.content = content;
    m.u.message.len = (uint32_t)strlen(content);
    return changes_on_message(&chg, &m);
}

/* A committed transaction [final_lsn, end_lsn) with one event keyed key. */
static void txn(lsn_t final_lsn, lsn_t end_lsn, const char *key)
{
    ck_assert_int_eq(begin(final_lsn), STEP_OK);
    ck_assert_int_eq(insert(key), STEP_OK);
    ck_assert_int_eq(commit(final_lsn, end_lsn), STEP_OK);
}

/* The broker's report on the i-th event the fake took. */
static bool report(int i, int err)
{
    struct delivery_report dr = {.tag = fk.tag[i], .err = err, .topic = fk.topic[i]};
    dr.reason = err ? "broker says no" : NULL;
    dr.key = (struct slice){fk.key[i], strlen(fk.key[i])};
    return changes_on_delivery(&chg, &dr);
}

START_TEST(test_transaction_boundaries)
{
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert("o-1"), STEP_OK);
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert_int_eq(fk.nsent, 1);
    ck_assert_str_eq(fk.key[0], "o-1");
    ck_assert_uint_eq(tracker_pending_events(trk), 1);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 100); /* not ACKed yet */
    ck_assert(report(0, 0));
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
    ck_assert_uint_eq(chg.events_produced, 1);
}
END_TEST

START_TEST(test_begin_inside_transaction_is_fatal)
{
    ck_assert_int_eq(begin(200), STEP_OK);
    uint64_t open = chg.cur_seq;
    ck_assert_int_eq(begin(300), STEP_FATAL);
    ck_assert_uint_eq(chg.cur_seq, open); /* the open one is left as it was */
    ck_assert_uint_eq(chg.cur_commit_lsn, 200);
}
END_TEST

START_TEST(test_commit_without_begin_is_fatal)
{
    ck_assert_int_eq(commit(200, 210), STEP_FATAL);
    ck_assert_int_eq(insert("o-1"), STEP_FATAL); /* an INSERT outside one, too */
    ck_assert_int_eq(fk.nsent, 0);
}
END_TEST

START_TEST(test_backpressure_holds_then_produces_once_in_order)
{
    fk.room = 1;
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert("a"), STEP_OK);
    ck_assert_int_eq(insert("b"), STEP_HELD); /* the queue is full: stop reading */
    ck_assert(changes_held(&chg));
    ck_assert_int_eq(changes_resume(&chg), STEP_HELD); /* still full */
    ck_assert_int_eq(fk.nsent, 1);
    fk.room = -1; /* reports made room */
    ck_assert_int_eq(changes_resume(&chg), STEP_OK);
    ck_assert(!changes_held(&chg));
    ck_assert_int_eq(changes_resume(&chg), STEP_OK); /* nothing held: no resend */
    ck_assert_int_eq(insert("c"), STEP_OK);
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert_int_eq(fk.nsent, 3);
    ck_assert_str_eq(fk.key[0], "a");
    ck_assert_str_eq(fk.key[1], "b");
    ck_assert_str_eq(fk.key[2], "c");
    ck_assert_uint_eq(tracker_pending_events(trk), 3);
    for (int i = 0; i < 3; i++) report(i, 0);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
}
END_TEST

START_TEST(test_nothing_confirmed_past_unacked_event)
{
    txn(200, 210, "a");
    txn(300, 310, "b");
    report(1, 0); /* the later one first */
    ck_assert_uint_eq(tracker_flush_lsn(trk), 100);
    report(0, 0);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 310);
}
END_TEST

START_TEST(test_held_event_dropped_when_stream_breaks)
{
    txn(200, 210, "a");
    fk.room = 0;
    ck_assert_int_eq(begin(300), STEP_OK);
    ck_assert_int_eq(insert("b"), STEP_HELD);
    changes_abort_open(&chg); /* the stream broke: the open one is sent again */
    ck_assert(!changes_held(&chg));
    fk.room = -1;
    ck_assert_int_eq(changes_resume(&chg), STEP_OK);
    ck_assert_int_eq(fk.nsent, 1);
    report(0, 0);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210); /* never past the dropped one */
    ck_assert_int_eq(begin(300), STEP_OK); /* a new session can open it again */
}
END_TEST

START_TEST(test_poison_row_dead_lettered_pending_until_acked)
{
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert(NULL), STEP_OK); /* NULL aggregate_id */
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert_int_eq(fk.nsent, 1);
    ck_assert_str_eq(fk.topic[0], cfg.errors_dlq_topic);
    ck_assert(!tracker_failed(trk));
    ck_assert_uint_eq(tracker_flush_lsn(trk), 100); /* in neither place yet */
    report(0, 0);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
}
END_TEST

START_TEST(test_poison_row_halts_under_halt)
{
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert(NULL), STEP_FATAL);
    ck_assert(tracker_failed(trk));
    ck_assert_int_eq(fk.nsent, 0);
}
END_TEST

START_TEST(test_failed_dlq_write_is_fatal)
{
    fk.fail_topic = cfg.errors_dlq_topic;
    fk.fail_err = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert(NULL), STEP_FATAL);
    ck_assert(tracker_failed(trk));
}
END_TEST

START_TEST(test_failed_delivery_dead_lettered_from_the_loop)
{
    txn(200, 210, "a");
    ck_assert(!report(0, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)); /* queued, not sent */
    ck_assert_int_eq(fk.nsent, 1);
    fk.room = 0; /* the DLQ write meets a full queue: held */
    ck_assert_int_eq(changes_flush_dead_letters(&chg), STEP_HELD);
    ck_assert(changes_held(&chg));
    fk.room = -1;
    ck_assert_int_eq(changes_resume(&chg), STEP_OK);
    ck_assert_int_eq(fk.nsent, 2);
    ck_assert_str_eq(fk.topic[1], cfg.errors_dlq_topic);
    ck_assert_str_eq(fk.key[1], "a");
    ck_assert_uint_eq(tracker_flush_lsn(trk), 100);
    report(1, 0);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
    ck_assert(!tracker_failed(trk));
}
END_TEST

/* Failures reported in one poll reach the dead-letter topic in the order
 * of their reports (issue 53: they went in reverse, so one aggregate's
 * dead letters were out of order). */
START_TEST(test_failed_deliveries_dead_lettered_in_report_order)
{
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert("k1"), STEP_OK);
    ck_assert_int_eq(insert("k2"), STEP_OK);
    ck_assert_int_eq(insert("k3"), STEP_OK);
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    for (int i = 0; i < 3; i++) ck_assert(!report(i, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE));
    ck_assert_int_eq(changes_flush_dead_letters(&chg), STEP_OK);
    ck_assert_int_eq(fk.nsent, 6);
    for (int i = 0; i < 3; i++) {
        char want[8];
        snprintf(want, sizeof(want), "k%d", i + 1);
        ck_assert_str_eq(fk.topic[3 + i], cfg.errors_dlq_topic);
        ck_assert_str_eq(fk.key[3 + i], want);
    }
    /* And again after the list was emptied. */
    txn(300, 310, "k4");
    ck_assert(!report(6, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE));
    ck_assert_int_eq(changes_flush_dead_letters(&chg), STEP_OK);
    ck_assert_str_eq(fk.key[7], "k4");
    for (int i = 3; i < 8; i++)
        if (i != 6) report(i, 0);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 310);
}
END_TEST

START_TEST(test_failed_delivery_halts_under_halt)
{
    txn(200, 210, "a");
    report(0, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    ck_assert(tracker_failed(trk));
    ck_assert_int_eq(changes_flush_dead_letters(&chg), STEP_OK);
    ck_assert_int_eq(fk.nsent, 1); /* nothing dead-lettered */
}
END_TEST

/* The one decision the relay and republish (rowpub.c) share: which
 * refused deliveries become dead letters. */
START_TEST(test_which_refusals_are_dead_lettered)
{
    struct delivery_report dr = {.err = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, .topic = "events"};
    bool dlq = cfg.errors_policy == ERRORS_DLQ;
    ck_assert(deadletter_takes_report(&cfg, &dr) == dlq);
    dr.err = RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
    ck_assert(deadletter_takes_report(&cfg, &dr) == dlq);
    dr.topic = cfg.errors_dlq_topic; /* a dead letter's own refusal: never again */
    ck_assert(!deadletter_takes_report(&cfg, &dr));
    dr.topic = "events";
    dr.err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART; /* poison, but the operator's to create */
    ck_assert(producer_err_is_poison(dr.err));
    ck_assert(!deadletter_takes_report(&cfg, &dr));
    dr.err = RD_KAFKA_RESP_ERR__MSG_TIMED_OUT; /* the broker may come back: not poison */
    ck_assert(!deadletter_takes_report(&cfg, &dr));
}
END_TEST

/* ---- the stages (changes.h) ---- */

#define COMMIT_T INT64_C(800000000000000) /* PG epoch us */
#define COMMIT_UNIX (COMMIT_T + PG_EPOCH_OFFSET_US)

static enum step begin_at(lsn_t final_lsn, int64_t commit_time)
{
    struct repl_msg m = {.kind = RM_BEGIN};
    m.u.begin.final_lsn = final_lsn;
    m.u.begin.commit_time = commit_time;
    return changes_on_message(&chg, &m);
}

static const struct latency_hist *stage(enum metrics_stage s) { return &chg.stages[s]; }

/* The i-th event the fake took was ACKed, the report served at us. */
static void ack_at(int i, int64_t us)
{
    struct delivery_report dr = {.tag = fk.tag[i], .topic = fk.topic[i], .served_unix_us = us};
    ck_assert(changes_on_delivery(&chg, &dr));
}

/* Commit 1 ms before the turn reads two events, handed over 300 us into
 * the turn, ACKed 2 ms later: each stage gets its share, per event, and
 * they add up to commit-to-ACK. */
START_TEST(test_stages_of_a_transaction)
{
    int64_t recv = COMMIT_UNIX + 1000;
    changes_received_at(&chg, recv);
    ck_assert_int_eq(begin_at(200, COMMIT_T), STEP_OK);
    ck_assert_int_eq(insert("a"), STEP_OK);
    ck_assert_int_eq(insert("b"), STEP_OK);
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert(changes_produced_pending(&chg));
    changes_produced_at(&chg, recv + 300);
    ck_assert(!changes_produced_pending(&chg));
    changes_produced_at(&chg, recv + 999999); /* nothing more to stamp */
    struct tracker_times tt;
    ck_assert(tracker_times(trk, fk.tag[0], &tt));
    ck_assert_int_eq(tt.produce_us, recv + 300);
    ck_assert_uint_eq(stage(STAGE_COMMIT_TO_RECEIVE)->count, 2);
    ck_assert_uint_eq(stage(STAGE_COMMIT_TO_RECEIVE)->sum_us, 2000);
    ck_assert_uint_eq(stage(STAGE_RECEIVE_TO_PRODUCE)->count, 2);
    ck_assert_uint_eq(stage(STAGE_RECEIVE_TO_PRODUCE)->sum_us, 600);
    ack_at(0, recv + 2300);
    ack_at(1, recv + 2500);
    ck_assert_uint_eq(stage(STAGE_PRODUCE_TO_ACK)->count, 2);
    ck_assert_uint_eq(stage(STAGE_PRODUCE_TO_ACK)->sum_us, 2000 + 2200);
    ck_assert_uint_eq(chg.commit_to_ack.sum_us, 3300 + 3500);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
    /* the last ACK made it confirmable; a status 700 us later confirms it */
    ck_assert_uint_eq(tracker_unconfirmed_txns(trk), 1);
    tracker_confirmed(trk, 210, recv + 3200, &chg.stages[STAGE_ACK_TO_CONFIRM]);
    ck_assert_uint_eq(stage(STAGE_ACK_TO_CONFIRM)->count, 1);
    ck_assert_uint_eq(stage(STAGE_ACK_TO_CONFIRM)->sum_us, 700);
    /* the metrics render what changes records */
    ck_assert_ptr_eq(met.stages[STAGE_PRODUCE_TO_ACK], stage(STAGE_PRODUCE_TO_ACK));
}
END_TEST

/* A transaction read over two turns: each event counts from its own turn;
 * an event held by backpressure counts from its receive to its eventual
 * send. */
START_TEST(test_stages_across_turns_and_backpressure)
{
    int64_t t1 = COMMIT_UNIX + 1000, t2 = COMMIT_UNIX + 4000;
    changes_received_at(&chg, t1);
    ck_assert_int_eq(begin_at(200, COMMIT_T), STEP_OK);
    ck_assert_int_eq(insert("a"), STEP_OK);
    changes_produced_at(&chg, t1 + 100);
    changes_received_at(&chg, t2); /* the next turn */
    fk.room = 0;
    ck_assert_int_eq(insert("b"), STEP_HELD);
    ck_assert(!changes_produced_pending(&chg)); /* held: not handed over */
    changes_produced_at(&chg, t2 + 50);
    ck_assert_uint_eq(stage(STAGE_RECEIVE_TO_PRODUCE)->count, 1);
    fk.room = -1; /* a later turn: room */
    ck_assert_int_eq(changes_resume(&chg), STEP_OK);
    ck_assert(changes_produced_pending(&chg));
    changes_received_at(&chg, t2 + 9000); /* that turn reads on: b was handed over by now */
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    /* commit-to-receive: 1000 (a), 4000 (b) */
    ck_assert_uint_eq(stage(STAGE_COMMIT_TO_RECEIVE)->count, 2);
    ck_assert_uint_eq(stage(STAGE_COMMIT_TO_RECEIVE)->sum_us, 5000);
    ck_assert_int_eq(stage(STAGE_COMMIT_TO_RECEIVE)->max_us, 4000);
    /* receive-to-produce: 100 (a), 9000 (b, held) */
    ck_assert_uint_eq(stage(STAGE_RECEIVE_TO_PRODUCE)->count, 2);
    ck_assert_uint_eq(stage(STAGE_RECEIVE_TO_PRODUCE)->sum_us, 9100);
    /* the transaction's produce time is its latest turn's */
    struct tracker_times tt;
    ck_assert(tracker_times(trk, fk.tag[0], &tt));
    ck_assert_int_eq(tt.produce_us, t2 + 9000);
}
END_TEST

/* Before the relay says when it read (no changes_received_at()), and for
 * a transaction without a commit time, nothing is recorded but
 * produce-to-ack. */
START_TEST(test_stages_without_times)
{
    ck_assert_int_eq(begin_at(200, 0), STEP_OK);
    ck_assert_int_eq(insert("a"), STEP_OK);
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    changes_produced_at(&chg, 5000);
    ck_assert_uint_eq(stage(STAGE_COMMIT_TO_RECEIVE)->count, 0);
    ck_assert_uint_eq(stage(STAGE_RECEIVE_TO_PRODUCE)->count, 0);
    ack_at(0, 5100);
    ck_assert_uint_eq(stage(STAGE_PRODUCE_TO_ACK)->count, 1);
    ck_assert_uint_eq(stage(STAGE_PRODUCE_TO_ACK)->sum_us, 100);
    ck_assert_uint_eq(chg.commit_to_ack.count, 0);
}
END_TEST

/* ---- resuming inside a transaction ---- */

START_TEST(test_skip_first_events_of_that_transaction)
{
    char k[8];
    changes_skip_first(&chg, (struct tracker_progress){200, 3});
    struct tracker_progress p;
    ck_assert(changes_progress(&chg, &p)); /* kept until it streams */
    ck_assert_uint_eq(p.txn_lsn, 200);
    ck_assert_uint_eq(p.acked, 3);
    ck_assert_int_eq(begin(200), STEP_OK);
    for (int i = 0; i < 5; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        ck_assert_int_eq(insert(k), STEP_OK);
    }
    ck_assert_int_eq(fk.nsent, 2); /* the first three were skipped */
    ck_assert_str_eq(fk.key[0], "k3");
    ck_assert_str_eq(fk.key[1], "k4");
    ck_assert_uint_eq(chg.events_skipped, 3);
    ck_assert(changes_progress(&chg, &p));
    ck_assert_uint_eq(p.acked, 3);
    ck_assert(report(0, 0));
    ck_assert(changes_progress(&chg, &p));
    ck_assert_uint_eq(p.acked, 4); /* the tracker's now: skipped + ACKed */
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert(report(1, 0));
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
    ck_assert(!changes_progress(&chg, &p));
    /* Over once it committed: a later transaction is produced whole. */
    ck_assert_int_eq(begin(300), STEP_OK);
    ck_assert_int_eq(insert("x"), STEP_OK);
    ck_assert_int_eq(fk.nsent, 3);
    ck_assert_uint_eq(chg.events_skipped, 3);
}
END_TEST

START_TEST(test_skip_only_that_transaction)
{
    /* An earlier transaction (the file's position was capped before it) is
     * produced whole; a later one first means the skip is dropped. */
    changes_skip_first(&chg, (struct tracker_progress){300, 2});
    txn(200, 210, "a");
    ck_assert_int_eq(fk.nsent, 1);
    ck_assert_int_eq(begin(400), STEP_OK);
    ck_assert_int_eq(insert("b"), STEP_OK);
    ck_assert_int_eq(insert("c"), STEP_OK);
    ck_assert_int_eq(fk.nsent, 3);
    ck_assert_uint_eq(chg.events_skipped, 0);
    struct tracker_progress p;
    ck_assert(report(0, 0));
    ck_assert(!changes_progress(&chg, &p) || p.txn_lsn != 300);
}
END_TEST

START_TEST(test_skip_again_after_a_broken_stream)
{
    /* The stream breaks inside the transaction while skipping: when it
     * streams again, its first events are skipped again, from the start. */
    changes_skip_first(&chg, (struct tracker_progress){200, 2});
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert("a"), STEP_OK);
    ck_assert_int_eq(fk.nsent, 0);
    changes_abort_open(&chg);
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert("a"), STEP_OK);
    ck_assert_int_eq(insert("b"), STEP_OK);
    ck_assert_int_eq(insert("c"), STEP_OK);
    ck_assert_int_eq(fk.nsent, 1);
    ck_assert_str_eq(fk.key[0], "c");
    ck_assert_uint_eq(chg.events_skipped, 3); /* 1 before the break, 2 after */
}
END_TEST

/* Outbox messages ([outbox] message_prefix) are events in stream order
 * with the rows; held, skipped and dead-lettered like them; a
 * non-transactional one is counted, never produced; others are ignored. */
START_TEST(test_outbox_messages)
{
    char err[128];
    ck_assert_int_eq(
        outbox_map_set_message_prefix(&outboxes.maps[0], "outbox", err, sizeof(err)), 0);
    /* resumed inside transaction 200 after two ACKed events: a row and a
     * message are skipped, in stream order */
    changes_skip_first(&chg, (struct tracker_progress){200, 2});
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(insert("r1"), STEP_OK);
    ck_assert_int_eq(message("outbox", 1, "m2"), STEP_OK);
    ck_assert_int_eq(message("outbox", 1, "m3"), STEP_OK);
    ck_assert_int_eq(message("other", 1, "x"), STEP_OK);    /* another prefix */
    ck_assert_int_eq(message("outbox", 0, "nt"), STEP_OK);  /* not transactional */
    ck_assert_int_eq(message("outbox", 0, "nt2"), STEP_OK);
    fk.room = 1;
    ck_assert_int_eq(insert("r4"), STEP_OK);
    ck_assert_int_eq(message("outbox", 1, "m5"), STEP_HELD); /* a full queue holds it */
    fk.room = -1;
    ck_assert_int_eq(changes_resume(&chg), STEP_OK);
    ck_assert_int_eq(message("outbox", 1, NULL), STEP_OK); /* poison: dead-lettered */
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert_int_eq(fk.nsent, 4);
    ck_assert_str_eq(fk.key[0], "m3");
    ck_assert_str_eq(fk.key[1], "r4");
    ck_assert_str_eq(fk.key[2], "m5");
    ck_assert_str_eq(fk.topic[3], cfg.errors_dlq_topic);
    ck_assert_uint_eq(chg.events_skipped, 2);
    ck_assert_uint_eq(metrics_get(&met.messages_ignored, "non_transactional"), 2);
    ck_assert(chg.nontx_logged);
    for (int i = 0; i < 4; i++) ck_assert(report(i, 0));
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
    /* a transactional message outside a transaction is a protocol error */
    ck_assert_int_eq(message("outbox", 1, "late"), STEP_FATAL);
}
END_TEST

/* A wal2json record of the open transaction into public.outbox keyed key;
 * NULL key: one whose aggregate_id holds a byte that is not UTF-8 (a
 * SQL_ASCII database), which cannot be decoded. */
static enum step w2j_insert(const char *key)
{
    char line[512];
    snprintf(line, sizeof(line),
             "{\"action\":\"I\",\"schema\":\"public\",\"table\":\"outbox\",\"columns\":["
             "{\"name\":\"event_id\",\"type\":\"text\",\"value\":\"e-%s\"},"
             "{\"name\":\"aggregate_type\",\"type\":\"text\",\"value\":\"Order\"},"
             "{\"name\":\"aggregate_id\",\"type\":\"text\",\"value\":\"%s\"},"
             "{\"name\":\"aggregate_version\",\"type\":\"text\",\"value\":\"1\"},"
             "{\"name\":\"event_type\",\"type\":\"text\",\"value\":\"Created\"},"
             "{\"name\":\"payload\",\"type\":\"text\",\"value\":\"{}\"}]}",
             key ? key : "bad", key ? key : "caf\xe9");
    struct repl_frame f = {.kind = RF_XLOGDATA, .data_start = 0x150, .data = line,
                           .len = strlen(line)};
    return changes_on_data(&chg, &f);
}

static enum step w2j_line(const char *line, lsn_t data_start)
{
    struct repl_frame f = {.kind = RF_XLOGDATA, .data_start = data_start, .data = line,
                           .len = strlen(line)};
    return changes_on_data(&chg, &f);
}

/* Transaction 0/C8 as wal2json streams it: k0, an undecodable record, k1
 * to k3. Returns after its commit. */
static void w2j_transaction(void)
{
    char k[8];
    ck_assert_int_eq(
        w2j_line("{\"action\":\"B\",\"lsn\":\"0/C8\",\"nextlsn\":\"0/D2\"}", 0x100),
        STEP_OK);
    ck_assert_int_eq(w2j_insert("k0"), STEP_OK);
    ck_assert_int_eq(w2j_insert(NULL), STEP_OK); /* dead-lettered (policy dlq) */
    for (int i = 1; i < 4; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        ck_assert_int_eq(w2j_insert(k), STEP_OK);
    }
    ck_assert_int_eq(
        w2j_line("{\"action\":\"C\",\"lsn\":\"0/C8\",\"nextlsn\":\"0/D2\"}", 0xD2),
        STEP_OK);
}

/* An undecodable record dead-lettered inside a transaction takes an event
 * number: a resume whose ACKed count covers it skips it in its place, and
 * no event after it (issue 53: the skip counted only outbox events, so each
 * such record made it skip one real event too many, which was lost). */
START_TEST(test_skip_counts_a_dead_lettered_record)
{
    char err[128];
    ck_assert_int_eq(config_set(&cfg, "postgres", "plugin", "wal2json", err, sizeof(err)), 0);
    struct decoder *dec = decoder_new(PLUGIN_WAL2JSON);
    ck_assert_ptr_nonnull(dec);
    changes_start(&chg, trk, dec);
    /* The first run: k0, the dead letter, k1..k3, in that order. */
    w2j_transaction();
    ck_assert_int_eq(fk.nsent, 5);
    ck_assert_str_eq(fk.key[0], "k0");
    ck_assert_str_eq(fk.topic[1], cfg.errors_dlq_topic);
    ck_assert_str_eq(fk.key[2], "k1");
    tracker_free(trk);
    /* A restart whose offset file says the first 3 were ACKed (k0, the
     * dead letter, k1): k2 and k3 are produced, nothing is dead-lettered
     * again. */
    ck_assert_ptr_nonnull(trk = tracker_new(100));
    memset(&fk, 0, sizeof(fk));
    fk.room = -1;
    changes_start(&chg, trk, dec);
    changes_skip_first(&chg, (struct tracker_progress){0xC8, 3});
    w2j_transaction();
    ck_assert_int_eq(fk.nsent, 2);
    ck_assert_str_eq(fk.key[0], "k2");
    ck_assert_str_eq(fk.key[1], "k3");
    ck_assert_uint_eq(chg.events_skipped, 3);
    ck_assert(report(0, 0));
    ck_assert(report(1, 0));
    ck_assert_uint_eq(tracker_flush_lsn(trk), 0xD2);
    tracker_free(trk);
    /* A count that stops before the record: it is dead-lettered again, in
     * its place. */
    ck_assert_ptr_nonnull(trk = tracker_new(100));
    memset(&fk, 0, sizeof(fk));
    fk.room = -1;
    changes_start(&chg, trk, dec);
    changes_skip_first(&chg, (struct tracker_progress){0xC8, 1});
    w2j_transaction();
    ck_assert_int_eq(fk.nsent, 4);
    ck_assert_str_eq(fk.topic[0], cfg.errors_dlq_topic);
    ck_assert_str_eq(fk.key[1], "k1");
    ck_assert_str_eq(fk.key[3], "k3");
    changes_start(&chg, trk, NULL);
    decoder_free(dec);
}
END_TEST

/* With two sections, a message goes with the section whose prefix it has
 * (its topic template); a prefix no section has is ignored. */
START_TEST(test_messages_of_two_sections)
{
    char err[128];
    struct outbox_map b;
    ck_assert_int_eq(outbox_map_init(&b, "public.billing", columns, "billing-events", err,
                                     sizeof(err)), 0);
    ck_assert_int_eq(outbox_map_set_message_prefix(&b, "billing", err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_set_add(&outboxes, &b, "billing"), 0);
    ck_assert_int_eq(
        outbox_map_set_message_prefix(&outboxes.maps[0], "outbox", err, sizeof(err)), 0);
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(message("billing", 1, "b1"), STEP_OK);
    ck_assert_int_eq(message("outbox", 1, "o2"), STEP_OK);
    ck_assert_int_eq(message("shipping", 1, "s3"), STEP_OK); /* no section's */
    ck_assert_int_eq(message("billing", 1, NULL), STEP_OK);  /* poison: dead-lettered */
    ck_assert_int_eq(message("billing", 1, "b4"), STEP_OK);
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert_int_eq(fk.nsent, 4);
    ck_assert_str_eq(fk.key[0], "b1");
    ck_assert_str_eq(fk.topic[0], "billing-events");
    ck_assert_str_eq(fk.key[1], "o2");
    ck_assert_str_eq(fk.topic[1], "events");
    ck_assert_str_eq(fk.topic[2], cfg.errors_dlq_topic);
    ck_assert_str_eq(fk.key[3], "b4");
    ck_assert_str_eq(fk.topic[3], "billing-events");
    for (int i = 0; i < 4; i++) ck_assert(report(i, 0));
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
}
END_TEST

/* Under [outbox] timestamp = commit, a message's record carries its
 * transaction's commit time, as a row's does. */
START_TEST(test_message_commit_timestamp)
{
    char err[128];
    ck_assert_int_eq(
        outbox_map_set_message_prefix(&outboxes.maps[0], "outbox", err, sizeof(err)), 0);
    outboxes.maps[0].timestamp_commit = true;
    ck_assert_int_eq(begin_at(200, COMMIT_T), STEP_OK);
    ck_assert_int_eq(insert("r1"), STEP_OK);
    ck_assert_int_eq(message("outbox", 1, "m2"), STEP_OK);
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert_int_eq(fk.nsent, 2);
    ck_assert_int_eq(fk.ts[0], COMMIT_UNIX / 1000);
    ck_assert_int_eq(fk.ts[1], COMMIT_UNIX / 1000);
    outboxes.maps[0].timestamp_commit = false; /* produce: no timestamp of ours */
    ck_assert_int_eq(begin_at(220, COMMIT_T), STEP_OK);
    ck_assert_int_eq(message("outbox", 1, "m3"), STEP_OK);
    ck_assert_int_eq(commit(220, 230), STEP_OK);
    ck_assert_int_eq(fk.ts[2], 0);
}
END_TEST

START_TEST(test_messages_ignored_without_prefix)
{
    ck_assert_int_eq(begin(200), STEP_OK);
    ck_assert_int_eq(message("outbox", 1, "m1"), STEP_OK);
    ck_assert_int_eq(message("outbox", 0, "m2"), STEP_OK);
    ck_assert_int_eq(commit(200, 210), STEP_OK);
    ck_assert_int_eq(fk.nsent, 0);
    ck_assert_uint_eq(metrics_get(&met.messages_ignored, "non_transactional"), 0);
    ck_assert_uint_eq(tracker_flush_lsn(trk), 210);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("changes");
    TCase *dlq = tcase_create("policy dlq");
    tcase_add_checked_fixture(dlq, setup_dlq, teardown);
    tcase_add_test(dlq, test_transaction_boundaries);
    tcase_add_test(dlq, test_begin_inside_transaction_is_fatal);
    tcase_add_test(dlq, test_commit_without_begin_is_fatal);
    tcase_add_test(dlq, test_backpressure_holds_then_produces_once_in_order);
    tcase_add_test(dlq, test_nothing_confirmed_past_unacked_event);
    tcase_add_test(dlq, test_held_event_dropped_when_stream_breaks);
    tcase_add_test(dlq, test_poison_row_dead_lettered_pending_until_acked);
    tcase_add_test(dlq, test_failed_dlq_write_is_fatal);
    tcase_add_test(dlq, test_failed_delivery_dead_lettered_from_the_loop);
    tcase_add_test(dlq, test_failed_deliveries_dead_lettered_in_report_order);
    tcase_add_test(dlq, test_which_refusals_are_dead_lettered);
    tcase_add_test(dlq, test_stages_of_a_transaction);
    tcase_add_test(dlq, test_stages_across_turns_and_backpressure);
    tcase_add_test(dlq, test_stages_without_times);
    tcase_add_test(dlq, test_skip_first_events_of_that_transaction);
    tcase_add_test(dlq, test_skip_only_that_transaction);
    tcase_add_test(dlq, test_skip_again_after_a_broken_stream);
    tcase_add_test(dlq, test_skip_counts_a_dead_lettered_record);
    tcase_add_test(dlq, test_outbox_messages);
    tcase_add_test(dlq, test_messages_ignored_without_prefix);
    tcase_add_test(dlq, test_messages_of_two_sections);
    tcase_add_test(dlq, test_message_commit_timestamp);
    suite_add_tcase(s, dlq);
    TCase *halt = tcase_create("policy halt");
    tcase_add_checked_fixture(halt, setup_halt, teardown);
    tcase_add_test(halt, test_poison_row_halts_under_halt);
    tcase_add_test(halt, test_failed_delivery_halts_under_halt);
    tcase_add_test(halt, test_which_refusals_are_dead_lettered);
    suite_add_tcase(s, halt);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
