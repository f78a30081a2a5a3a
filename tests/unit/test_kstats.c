/*
 * test_kstats.c - librdkafka's per-broker statistics over a run
 * (include/kafka/kstats.h), fed two recorded statistics windows of a two-broker
 * mock cluster (tests/data/kstats, see its README.md) and small written
 * ones for what the recording does not show: a new client, a counter that
 * starts again, windows without samples, brokers that are not real.
 *
 * The expected figures are worked out by hand from the recorded windows
 * (the arithmetic is next to each).
 */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kstats.h"

static struct kstats ks;

static void setup(void) { memset(&ks, 0, sizeof(ks)); }
static void teardown(void) { kstats_free(&ks); }

/* tests/data/kstats/<name>, found relative to this source file. */
static json_t *load_window(const char *name)
{
    char path[1024];
    const char *src = __FILE__;
    const char *slash = strrchr(src, '/');
    int dir = slash ? (int)(slash - src) : 0;
    ck_assert_int_lt(snprintf(path, sizeof(path), "%.*s%s../data/kstats/%s", dir, src,
                              slash ? "/" : "", name),
                     (int)sizeof(path));
    json_error_t e;
    json_t *doc = json_load_file(path, 0, &e);
    ck_assert_msg(doc != NULL, "cannot load %s: %s", path, e.text);
    return doc;
}

/* Feeds the "brokers" object of a recorded statistics document. */
static void feed_file(const char *name)
{
    json_t *doc = load_window(name);
    json_t *brokers = json_object_get(doc, "brokers");
    ck_assert(json_is_object(brokers));
    ck_assert_int_eq(kstats_window(&ks, brokers), 0);
    json_decref(doc);
}

/* Feeds a "brokers" object written here. */
static void feed_text(const char *text)
{
    json_error_t e;
    json_t *brokers = json_loads(text, 0, &e);
    ck_assert_msg(brokers != NULL, "bad test JSON: %s", e.text);
    ck_assert_int_eq(kstats_window(&ks, brokers), 0);
    json_decref(brokers);
}

static const struct kstats_broker *broker(const char *name)
{
    for (size_t i = 0; i < ks.n; i++)
        if (strcmp(ks.b[i].name, name) == 0) return &ks.b[i];
    ck_abort_msg("broker %s not tracked", name);
    return NULL;
}

static void ck_line(const struct kstats_broker *b, const char *want)
{
    char line[512];
    kstats_format(b, line, sizeof(line));
    ck_assert_str_eq(line, want);
}

#define B2 "127.0.0.1:35987/2"
#define B1 "127.0.0.1:43767/1"

START_TEST(test_recorded_windows)
{
    feed_file("window1.json");
    feed_file("window2.json");
    ck_assert_uint_eq(ks.n, 2);
    const struct kstats_broker *b = broker(B2);
    ck_assert_uint_eq(b->windows, 2);
    /* rtt: (62 * 553 + 624 * 703) / (553 + 703) = 472958 / 1256 = 376.6 */
    ck_assert_uint_eq(b->rtt.cnt, 1256);
    ck_assert_int_eq(kstats_avg(&b->rtt), 377);
    ck_assert_int_eq(b->rtt.p99_max, 2991);
    /* int_latency: (296585 * 1890 + 962 * 980) / 2870 = 195640.6 */
    ck_assert_int_eq(kstats_avg(&b->int_latency), 195641);
    ck_assert_int_eq(b->int_latency.p99_max, 124415);
    /* outbuf_latency: (48 * 554 + 43 * 703) / 1257 = 45.2 */
    ck_assert_int_eq(kstats_avg(&b->outbuf_latency), 45);
    ck_assert_int_eq(b->outbuf_latency.p99_max, 190);
    /* cumulative: the last window's values (552, then 1255) */
    ck_assert_uint_eq(b->produce_reqs, 1255);
    ck_assert_uint_eq(b->txbytes, 200444);
    /* wake-ups, cumulative too: 1861, then 4294 */
    ck_assert_uint_eq(b->wakeups, 4294);
    /* 200444 / 1255 = 159.7 */
    ck_line(b, "kafka broker " B2 " over 2 windows: rtt avg 377 us p99 2991 us; int_latency "
               "avg 195641 us p99 124415 us; outbuf_latency avg 45 us p99 190 us; produce "
               "requests 1255, bytes per request 160; thread wake-ups 4294");
    /* rtt (100 * 249 + 85 * 327) / 576 = 91.5; int_latency (296541 * 647 +
     * 1233 * 336) / 983 = 195601.5; outbuf (37 * 249 + 35 * 327) / 576 =
     * 35.9; 84583 / 575 = 147.1 */
    ck_line(broker(B1), "kafka broker " B1 " over 2 windows: rtt avg 91 us p99 687 us; "
                        "int_latency avg 195602 us p99 122367 us; outbuf_latency avg 36 us p99 "
                        "143 us; produce requests 575, bytes per request 147; "
                        "thread wake-ups 2226");
}
END_TEST

/* A new client's counters start at 0 and add to the run's; a window
 * without samples leaves the figure alone; internal and logical brokers
 * are not counted. */
START_TEST(test_new_client_and_empty_windows)
{
    feed_file("window1.json");
    feed_file("window2.json");
    kstats_new_client(&ks);
    /* the new client's first window: more than the old one's last values,
     * which only kstats_new_client() tells apart from growth */
    feed_text("{\"" B2 "\": {\"name\": \"" B2 "\", \"source\": \"learned\", \"txbytes\": 300000,"
              " \"req\": {\"Produce\": 2000},"
              " \"rtt\": {\"avg\": 0, \"p99\": 0, \"cnt\": 0},"
              " \"int_latency\": {\"avg\": 1000, \"p99\": 200000, \"cnt\": 10}},"
              " \"rdkafka#producer-1:0/internal\": {\"name\": \"internal\", \"source\": "
              "\"internal\", \"txbytes\": 5, \"req\": {\"Produce\": 99},"
              " \"rtt\": {\"avg\": 99999, \"p99\": 99999, \"cnt\": 5}},"
              " \"GroupCoordinator\": {\"name\": \"GroupCoordinator\", \"source\": "
              "\"logical\"}}");
    ck_assert_uint_eq(ks.n, 2);
    const struct kstats_broker *b = broker(B2);
    ck_assert_uint_eq(b->windows, 3);
    ck_assert_uint_eq(b->produce_reqs, 1255 + 2000);
    ck_assert_uint_eq(b->txbytes, 200444 + 300000);
    ck_assert_uint_eq(b->rtt.cnt, 1256); /* the empty window does not count */
    ck_assert_int_eq(kstats_avg(&b->rtt), 377);
    /* (296585 * 1890 + 962 * 980 + 1000 * 10) / 2880 = 194964.7 */
    ck_assert_int_eq(kstats_avg(&b->int_latency), 194965);
    ck_assert_int_eq(b->int_latency.p99_max, 200000);
    ck_assert_uint_eq(broker(B1)->windows, 2); /* not in the third window */
}
END_TEST

/* Without kstats_new_client(), a counter below the last value means it
 * started again: 575 then 5 is 580 over the run. */
START_TEST(test_counter_started_again)
{
    feed_file("window1.json");
    feed_file("window2.json");
    feed_text("{\"" B1 "\": {\"name\": \"" B1 "\", \"source\": \"configured\", \"txbytes\": 700,"
              " \"req\": {\"Produce\": 5}}}");
    ck_assert_uint_eq(broker(B1)->produce_reqs, 580);
    ck_assert_uint_eq(broker(B1)->txbytes, 84583 + 700);
    ck_assert_uint_eq(broker(B1)->windows, 3);
}
END_TEST

/* A broker with no samples and no Produce request: n/a, the fields kept. */
START_TEST(test_nothing_to_derive)
{
    feed_text("{\"localhost:9092/bootstrap\": {\"name\": \"localhost:9092/bootstrap\","
              " \"source\": \"configured\", \"txbytes\": 120, \"req\": {\"Produce\": 0},"
              " \"rtt\": {\"avg\": 0, \"p99\": 0, \"cnt\": 0}}}");
    ck_assert_int_eq(kstats_avg(&broker("localhost:9092/bootstrap")->rtt), -1);
    ck_line(broker("localhost:9092/bootstrap"),
            "kafka broker localhost:9092/bootstrap over 1 windows: rtt avg n/a us p99 n/a us; "
            "int_latency avg n/a us p99 n/a us; outbuf_latency avg n/a us p99 n/a us; "
            "produce requests 0, bytes per request n/a; thread wake-ups 0");
}
END_TEST

/* int_latency under message.timeout.ms = 0 (outboxd's default): recorded
 * from a librdkafka 2.0.2 producer so configured against the mock (the
 * second window, trimmed to the fields read): the samples are now -
 * INT64_MAX, the avg an overflowed sum. Not counted: n/a. */
START_TEST(test_int_latency_without_message_timeout)
{
    feed_text("{\"127.0.0.1:41311/1\": {\"name\": \"127.0.0.1:41311/1\", \"source\": "
              "\"configured\", \"txbytes\": 149769, \"req\": {\"Produce\": 1058},"
              " \"int_latency\": {\"min\": -9223371998553508084, \"max\": 0, \"avg\": "
              "38301325847, \"sum\": 7124046607622, \"p99\": 0, \"outofrange\": 1600, "
              "\"cnt\": 186},"
              " \"rtt\": {\"min\": 7, \"avg\": 49, \"p99\": 145, \"cnt\": 122}}}");
    const struct kstats_broker *b = broker("127.0.0.1:41311/1");
    ck_assert_uint_eq(b->int_latency.cnt, 0);
    /* 149769 / 1058 = 141.6 */
    ck_line(b, "kafka broker 127.0.0.1:41311/1 over 1 windows: rtt avg 49 us p99 145 us; "
               "int_latency avg n/a us p99 n/a us; outbuf_latency avg n/a us p99 n/a us; "
               "produce requests 1058, bytes per request 142; thread wake-ups 0");
}
END_TEST

/* At most KSTATS_MAX_BROKERS are tracked; past them a window says so. */
START_TEST(test_bounded)
{
    for (int i = 0; i <= KSTATS_MAX_BROKERS; i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "{\"b%d\": {\"name\": \"b%d\", \"source\": \"learned\", \"req\": "
                 "{\"Produce\": %d}}}",
                 i, i, i);
        json_t *brokers = json_loads(text, 0, NULL);
        ck_assert_ptr_nonnull(brokers);
        ck_assert_int_eq(kstats_window(&ks, brokers), i < KSTATS_MAX_BROKERS ? 0 : -1);
        json_decref(brokers);
    }
    ck_assert_uint_eq(ks.n, KSTATS_MAX_BROKERS);
    ck_assert_uint_eq(broker("b7")->produce_reqs, 7);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kstats");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_recorded_windows);
    tcase_add_test(tc, test_new_client_and_empty_windows);
    tcase_add_test(tc, test_counter_started_again);
    tcase_add_test(tc, test_nothing_to_derive);
    tcase_add_test(tc, test_int_latency_without_message_timeout);
    tcase_add_test(tc, test_bounded);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
