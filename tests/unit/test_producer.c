/*
 * test_producer.c - producer.h's delivery path against librdkafka's
 * in-process mock cluster (rdkafka_mock.h; tests/mockbroker.c hosts the
 * same one for the end-to-end tests): a produced event's delivery report
 * carries its seq and topic, a failed one its key, value and headers too;
 * a full queue answers PRODUCER_QUEUE_FULL and loses nothing; a value that
 * can never fit the queue is refused at once; producer_flush() returns
 * what is still outstanding; the error classification the relays depend
 * on (poison, missing topic, names).
 *
 * Each test gets its own mock cluster (one broker) and producer, built
 * from a struct config as the daemon builds it (config_init, [kafka] keys,
 * producer_new), so outboxd's own librdkafka defaults apply: idempotence
 * on, no delivery timeout. The mock does not check idempotent sequence
 * numbers, so nothing here relies on idempotence after retriable errors;
 * the injected failure is a permanent one (MSG_SIZE_TOO_LARGE).
 *
 * Waiting: every wait is a loop of producer_poll() calls bounded by a
 * generous deadline (WAIT_MS) that only fails the test when exceeded;
 * nothing asserts on how long anything took.
 */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "config.h"
#include "outbox.h"
#include "producer.h"

#define WAIT_MS 30000
#define MAX_REPORTS 256
#define TOPIC "orders"

/* One delivery report, copied out of the callback (its strings are
 * borrowed for the callback's duration only). */
struct report {
    uint64_t tag;
    int err;
    char topic[64];
    char key[64], value[64], event_id[64], commit_lsn[64];
    int nheaders;
    char header_names[OUTBOX_MAX_HEADERS][32];
    char header_values[OUTBOX_MAX_HEADERS][64];
};

static struct report reports[MAX_REPORTS];
static int nreports;

static rd_kafka_t *host; /* hosts the mock cluster */
static rd_kafka_mock_cluster_t *mc;
static struct config cfg;
static struct producer *prod;

static void copy_slice(char *out, size_t outlen, struct slice s)
{
    snprintf(out, outlen, "%.*s", s.data ? (int)s.len : 0, s.data ? s.data : "");
}

static void on_delivery(void *ctx, const struct delivery_report *dr)
{
    struct report *r;

    (void)ctx;
    ck_assert_int_lt(nreports, MAX_REPORTS);
    r = &reports[nreports++];
    memset(r, 0, sizeof(*r));
    r->tag = dr->tag;
    r->err = dr->err;
    ck_assert(dr->err == 0 ? dr->reason == NULL : dr->reason != NULL);
    snprintf(r->topic, sizeof(r->topic), "%s", dr->topic);
    copy_slice(r->key, sizeof(r->key), dr->key);
    copy_slice(r->value, sizeof(r->value), dr->value);
    copy_slice(r->event_id, sizeof(r->event_id), dr->event_id);
    copy_slice(r->commit_lsn, sizeof(r->commit_lsn), dr->commit_lsn);
    r->nheaders = dr->nheaders;
    for (int i = 0; i < dr->nheaders && i < OUTBOX_MAX_HEADERS; i++) {
        snprintf(r->header_names[i], sizeof(r->header_names[i]), "%s", dr->headers[i].name);
        copy_slice(r->header_values[i], sizeof(r->header_values[i]), dr->headers[i].value);
    }
}

/* A mock cluster of one broker with topic TOPIC (one partition). */
static void setup(void)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();

    nreports = 0;
    ck_assert(rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)) ==
              RD_KAFKA_CONF_OK);
    host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    ck_assert_msg(host != NULL, "rd_kafka_new: %s", errstr);
    mc = rd_kafka_mock_cluster_new(host, 1);
    ck_assert_msg(mc != NULL, "librdkafka could not create its mock cluster");
    ck_assert_int_eq(rd_kafka_mock_topic_create(mc, TOPIC, 1, 1), 0);
    ck_assert_int_eq(config_init(&cfg), 0);
    prod = NULL;
}

static void teardown(void)
{
    producer_free(prod);
    config_free(&cfg);
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(host);
}

/* Sets [kafka] key = value. */
static void kafka_set(const char *key, const char *value)
{
    char err[256];

    ck_assert_msg(config_set(&cfg, "kafka", key, value, err, sizeof(err)) == 0, "%s", err);
}

/* The producer, pointed at the mock cluster, with the keys set so far. */
static void start_producer(void)
{
    char err[512];

    kafka_set("bootstrap.servers", rd_kafka_mock_cluster_bootstraps(mc));
    prod = producer_new(&cfg, on_delivery, NULL, err, sizeof(err));
    ck_assert_msg(prod != NULL, "producer_new: %s", err);
}

/* The event with seq n: key "k<n>", value "v<n>", headers event_id
 * "e<n>", event_type "created", commit_lsn "0/<n>". It borrows from bufs
 * (kept by the caller until producer_send() returns: it copies). */
struct event_bufs {
    char key[16], value[16], event_id[16];
};

static void make_event(struct outbox_event *ev, struct event_bufs *b, uint64_t n)
{
    memset(ev, 0, sizeof(*ev));
    snprintf(ev->topic, sizeof(ev->topic), "%s", TOPIC);
    snprintf(b->key, sizeof(b->key), "k%llu", (unsigned long long)n);
    snprintf(b->value, sizeof(b->value), "v%llu", (unsigned long long)n);
    snprintf(b->event_id, sizeof(b->event_id), "e%llu", (unsigned long long)n);
    snprintf(ev->commit_lsn, sizeof(ev->commit_lsn), "0/%llX", (unsigned long long)n);
    ev->key = (struct slice){b->key, strlen(b->key)};
    ev->value = (struct slice){b->value, strlen(b->value)};
    ev->event_id = (struct slice){b->event_id, strlen(b->event_id)};
    ev->headers[0] = (struct outbox_header){"event_id", ev->event_id};
    ev->headers[1] = (struct outbox_header){"event_type", {"created", 7}};
    ev->headers[2] =
        (struct outbox_header){"commit_lsn", {ev->commit_lsn, strlen(ev->commit_lsn)}};
    ev->nheaders = 3;
}

/* producer_send() of event n. */
static int send_event(uint64_t n, int *kafka_err, char *err, size_t errlen)
{
    struct outbox_event ev;
    struct event_bufs b;

    make_event(&ev, &b, n);
    *kafka_err = 0;
    return producer_send(prod, &ev, n, kafka_err, err, errlen);
}

static void send_ok(uint64_t n)
{
    char err[256];
    int kerr;

    ck_assert_msg(send_event(n, &kerr, err, sizeof(err)) == PRODUCER_OK, "send %llu: %s",
                  (unsigned long long)n, err);
}

/* Polls until want reports arrived in all; fails after WAIT_MS. */
static void wait_reports(int want)
{
    int64_t deadline = clock_mono_ms() + WAIT_MS;

    while (nreports < want) {
        ck_assert_msg(clock_mono_ms() < deadline, "%d of %d delivery reports after %d ms",
                      nreports, want, WAIT_MS);
        producer_poll(prod, 100);
    }
}

/* How many reports have seq n. */
static int reports_of(uint64_t n)
{
    int count = 0;

    for (int i = 0; i < nreports; i++)
        count += reports[i].tag == n;
    return count;
}

START_TEST(test_delivery_reports_seq_and_topic)
{
    start_producer();
    for (uint64_t n = 100; n < 105; n++)
        send_ok(n);
    wait_reports(5);
    for (int i = 0; i < nreports; i++) {
        ck_assert_int_eq(reports[i].err, 0);
        ck_assert_str_eq(reports[i].topic, TOPIC);
        /* One partition: reported in the order produced. */
        ck_assert_uint_eq(reports[i].tag, 100 + (uint64_t)i);
    }
    ck_assert_int_eq(producer_outq_len(prod), 0);
    ck_assert_int_eq(producer_poll(prod, 0), 0); /* nothing reported twice */
    ck_assert_int_eq(nreports, 5);
}
END_TEST

START_TEST(test_failed_report_carries_the_event)
{
    start_producer();
    send_ok(1);
    wait_reports(1); /* connected, the partition's leader known */
    ck_assert_int_eq(reports[0].err, 0);
    /* The next Produce request fails for good (not retriable). */
    rd_kafka_mock_push_request_errors(mc, 0 /* ApiKey Produce */, 1,
                                      RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    send_ok(7);
    wait_reports(2);
    ck_assert_uint_eq(reports[1].tag, 7);
    ck_assert_int_eq(reports[1].err, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    ck_assert(producer_err_is_poison(reports[1].err));
    ck_assert_str_eq(producer_err_name(reports[1].err), "MSG_SIZE_TOO_LARGE");
    ck_assert_str_eq(reports[1].topic, TOPIC);
    ck_assert_str_eq(reports[1].key, "k7");
    ck_assert_str_eq(reports[1].value, "v7");
    ck_assert_str_eq(reports[1].event_id, "e7");
    ck_assert_str_eq(reports[1].commit_lsn, "0/7");
    ck_assert_int_eq(reports[1].nheaders, 3);
    ck_assert_str_eq(reports[1].header_names[0], "event_id");
    ck_assert_str_eq(reports[1].header_values[0], "e7");
    ck_assert_str_eq(reports[1].header_names[1], "event_type");
    ck_assert_str_eq(reports[1].header_values[1], "created");
    ck_assert_str_eq(reports[1].header_names[2], "commit_lsn");
    ck_assert_str_eq(reports[1].header_values[2], "0/7");
    /* The producer goes on: the next event is delivered. */
    send_ok(8);
    wait_reports(3);
    ck_assert_uint_eq(reports[2].tag, 8);
    ck_assert_int_eq(reports[2].err, 0);
}
END_TEST

START_TEST(test_queue_full_loses_nothing)
{
    enum { N = 40, QUEUE = 5 };
    char err[256];
    int kerr, fulls = 0, rc;

    kafka_set("queue.buffering.max.messages", "5");
    start_producer();
    /* Without a poll, reports are not served and the queue keeps them:
     * the sixth send finds it full. */
    for (uint64_t n = 0; n < QUEUE; n++)
        send_ok(n);
    rc = send_event(QUEUE, &kerr, err, sizeof(err));
    ck_assert_int_eq(rc, PRODUCER_QUEUE_FULL);
    /* The five are still held. rd_kafka_outq_len() also counts events
     * waiting in the main queue (an error or statistics event): under
     * valgrind beside a CPU hog one was there, and it said 6. */
    ck_assert_int_ge(producer_outq_len(prod), QUEUE);
    /* The relay's way: on QUEUE_FULL serve reports and send again. */
    for (uint64_t n = QUEUE; n < N;) {
        rc = send_event(n, &kerr, err, sizeof(err));
        ck_assert_msg(rc != PRODUCER_ERROR, "send %llu: %s", (unsigned long long)n, err);
        if (rc == PRODUCER_QUEUE_FULL) {
            fulls++;
            producer_poll(prod, 100);
            continue;
        }
        n++;
    }
    ck_assert_int_gt(fulls, 0);
    ck_assert_int_eq(producer_flush(prod, WAIT_MS), 0);
    ck_assert_int_eq(nreports, N);
    for (uint64_t n = 0; n < N; n++)
        ck_assert_msg(reports_of(n) == 1, "seq %llu reported %d times",
                      (unsigned long long)n, reports_of(n));
    for (int i = 0; i < nreports; i++)
        ck_assert_int_eq(reports[i].err, 0);
}
END_TEST

START_TEST(test_value_that_never_fits_the_queue)
{
    struct outbox_event ev;
    struct event_bufs b;
    char big[3000], err[512];
    int kerr = 0;

    kafka_set("queue.buffering.max.kbytes", "2");
    kafka_set("message.max.bytes", "1000");
    start_producer();
    make_event(&ev, &b, 1);
    memset(big, 'x', sizeof(big));
    ev.value = (struct slice){big, sizeof(big)};
    ck_assert_int_eq(producer_send(prod, &ev, 1, &kerr, err, sizeof(err)), PRODUCER_ERROR);
    ck_assert_int_eq(kerr, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    ck_assert(producer_err_is_poison(kerr));
    ck_assert_msg(strstr(err, "can never fit the producer's queue") != NULL, "%s", err);
    ck_assert_int_eq(producer_outq_len(prod), 0);
    ck_assert_int_eq(nreports, 0); /* refused, so never reported */
}
END_TEST

START_TEST(test_flush_returns_outstanding)
{
    start_producer();
    ck_assert_int_eq(rd_kafka_mock_broker_set_down(mc, 1), 0);
    for (uint64_t n = 0; n < 3; n++)
        send_ok(n);
    /* No broker, no delivery timeout: all three stay queued, none reported.
     * The queue length also counts librdkafka's events not yet served (a
     * broker-down error under valgrind on a loaded machine: 5 was seen in
     * rehearsal AA), so at least 3. */
    ck_assert_int_ge(producer_flush(prod, 300), 3);
    ck_assert_int_ge(producer_outq_len(prod), 3);
    ck_assert_int_eq(nreports, 0);
    ck_assert_int_eq(rd_kafka_mock_broker_set_up(mc, 1), 0);
    ck_assert_int_eq(producer_flush(prod, WAIT_MS), 0);
    ck_assert_int_eq(nreports, 3);
    for (uint64_t n = 0; n < 3; n++)
        ck_assert_int_eq(reports_of(n), 1);
}
END_TEST

START_TEST(test_error_classification)
{
    /* Dead-letter material: about the message or its topic, with the
     * names the failed and dead-lettered counters are seeded with. */
    static const struct {
        int code;
        const char *name;
    } poison[] = {
        {RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, "MSG_SIZE_TOO_LARGE"},
        {RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE, "INVALID_MSG_SIZE"},
        {RD_KAFKA_RESP_ERR_INVALID_MSG, "INVALID_MSG"},
        {RD_KAFKA_RESP_ERR_INVALID_RECORD, "INVALID_RECORD"},
        {RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION, "TOPIC_EXCEPTION"},
        {RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, "TOPIC_AUTHORIZATION_FAILED"},
        {RD_KAFKA_RESP_ERR_POLICY_VIOLATION, "POLICY_VIOLATION"},
        {RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, "_UNKNOWN_TOPIC"},
        {RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, "UNKNOWN_TOPIC_OR_PART"},
        {RD_KAFKA_RESP_ERR__INVALID_ARG, "_INVALID_ARG"},
        {RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP, "INVALID_TIMESTAMP"},
    };
    /* Broker, network or producer state: never dead-lettered. */
    static const int not_poison[] = {
        RD_KAFKA_RESP_ERR_NO_ERROR,
        RD_KAFKA_RESP_ERR__MSG_TIMED_OUT,
        RD_KAFKA_RESP_ERR__TRANSPORT,
        RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
        RD_KAFKA_RESP_ERR__QUEUE_FULL,
        RD_KAFKA_RESP_ERR__FATAL,
        RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
        RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
        RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED,
        RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
    };
    size_t i, npoison = sizeof(poison) / sizeof(poison[0]);

    for (i = 0; i < npoison; i++) {
        ck_assert_msg(producer_err_is_poison(poison[i].code), "%s", poison[i].name);
        ck_assert_str_eq(producer_err_name(poison[i].code), poison[i].name);
        /* producer_poison_name() lists them, in this order. */
        ck_assert_ptr_nonnull(producer_poison_name(i));
        ck_assert_str_eq(producer_poison_name(i), poison[i].name);
    }
    ck_assert_ptr_null(producer_poison_name(npoison));
    for (i = 0; i < sizeof(not_poison) / sizeof(not_poison[0]); i++)
        ck_assert_msg(!producer_err_is_poison(not_poison[i]), "%s",
                      producer_err_name(not_poison[i]));
    ck_assert(producer_err_is_missing_topic(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
    ck_assert(producer_err_is_missing_topic(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART));
    ck_assert(!producer_err_is_missing_topic(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED));
    ck_assert(!producer_err_is_missing_topic(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE));
    ck_assert(!producer_err_is_missing_topic(0));
    /* The names the metrics and logs use (README: reason labels). */
    ck_assert_str_eq(producer_err_name(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE),
                     "MSG_SIZE_TOO_LARGE");
    ck_assert_str_eq(producer_err_name(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT), "_MSG_TIMED_OUT");
    ck_assert_str_eq(producer_err_name(RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC), "_UNKNOWN_TOPIC");
    /* relay.c seeds the timeout counter with -192 and tests for 10. */
    ck_assert_str_eq(producer_err_name(-192), "_MSG_TIMED_OUT");
    ck_assert_str_eq(producer_err_name(10), "MSG_SIZE_TOO_LARGE");
    ck_assert_int_eq(PRODUCER_OK, 0);
    ck_assert_int_ne(PRODUCER_QUEUE_FULL, PRODUCER_OK);
    ck_assert_int_ne(PRODUCER_QUEUE_FULL, PRODUCER_ERROR);
}
END_TEST

static Suite *producer_suite(void)
{
    Suite *s = suite_create("producer");
    TCase *mock = tcase_create("mock-cluster");
    TCase *codes = tcase_create("codes");

    tcase_set_timeout(mock, 120);
    tcase_add_checked_fixture(mock, setup, teardown);
    tcase_add_test(mock, test_delivery_reports_seq_and_topic);
    tcase_add_test(mock, test_failed_report_carries_the_event);
    tcase_add_test(mock, test_queue_full_loses_nothing);
    tcase_add_test(mock, test_value_that_never_fits_the_queue);
    tcase_add_test(mock, test_flush_returns_outstanding);
    suite_add_tcase(s, mock);
    tcase_add_test(codes, test_error_classification);
    suite_add_tcase(s, codes);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(producer_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
