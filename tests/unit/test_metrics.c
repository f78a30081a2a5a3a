/*
 * test_metrics.c - include/obs/metrics.h: labelled counters (and their
 * cardinality cap), wal_status parsing, and the Prometheus text rendered
 * from known values: names, types, label escaping, LSNs as numbers,
 * replication lag from the clock given, absent samples for unknown values.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

static struct metrics m;
static struct textbuf tb;

static void setup(void)
{
    metrics_init(&m);
    m.version = "9.9.9";
    m.plugin = "pgoutput";
    m.slot = "s";
    m.start_time_us = INT64_C(1700000000250000);
    memset(&tb, 0, sizeof(tb));
}

static void teardown(void)
{
    metrics_free(&m);
    free(tb.data);
}

static const char *render(int64_t now_us)
{
    tb.len = 0;
    ck_assert_int_eq(metrics_render(&m, now_us, &tb), 0);
    ck_assert_uint_eq(strlen(tb.data), tb.len);
    return tb.data;
}

/* True when text has line as one whole line. */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return 1;
    return 0;
}

#define ck_line(text, line)                                                                \
    ck_assert_msg(has_line(text, line), "missing line: %s\n%s", line, text)
#define ck_no_line(text, line)                                                             \
    ck_assert_msg(!has_line(text, line), "unexpected line: %s", line)

START_TEST(test_counters_by_label)
{
    ck_assert_int_eq(metrics_count(&m.produced, "a", 1), 0);
    ck_assert_int_eq(metrics_count(&m.produced, "b", 2), 0);
    ck_assert_int_eq(metrics_count(&m.produced, "a", 3), 0);
    ck_assert_uint_eq(metrics_get(&m.produced, "a"), 4);
    ck_assert_uint_eq(metrics_get(&m.produced, "b"), 2);
    ck_assert_uint_eq(metrics_get(&m.produced, "c"), 0);
    ck_assert_uint_eq(m.produced.n, 2);
    const char *t = render(0);
    ck_line(t, "# TYPE outboxd_events_produced_total counter");
    ck_line(t, "outboxd_events_produced_total{topic=\"a\"} 4");
    ck_line(t, "outboxd_events_produced_total{topic=\"b\"} 2");
}
END_TEST

START_TEST(test_label_cap)
{
    char label[32];
    for (int i = 0; i < METRICS_MAX_LABELS + 50; i++) {
        snprintf(label, sizeof(label), "t%d", i);
        ck_assert_int_eq(metrics_count(&m.acked, label, 1), 0);
    }
    /* The first METRICS_MAX_LABELS - 1 keep their own series, the rest
     * share "_other" (the last slot). */
    ck_assert_uint_eq(m.acked.n, METRICS_MAX_LABELS);
    ck_assert_uint_eq(metrics_get(&m.acked, "t0"), 1);
    ck_assert_uint_eq(metrics_get(&m.acked, "_other"), 51);
    snprintf(label, sizeof(label), "t%d", METRICS_MAX_LABELS + 10);
    ck_assert_uint_eq(metrics_get(&m.acked, label), 0);
}
END_TEST

START_TEST(test_label_escaping)
{
    metrics_count(&m.failed,
                  "a\"b\\c\nd\x01"
                  "e\xc3\xa9",
                  1);
    const char *t = render(0);
    ck_line(t, "outboxd_events_failed_total{reason=\"a\\\"b\\\\c\\nd?e??\"} 1");
}
END_TEST

START_TEST(test_every_family_announced)
{
    const char *t = render(0);
    static const char *const families[][2] = {
        {"outboxd_build_info", "gauge"},
        {"outboxd_start_time_seconds", "gauge"},
        {"outboxd_events_produced_total", "counter"},
        {"outboxd_events_acked_total", "counter"},
        {"outboxd_events_failed_total", "counter"},
        {"outboxd_events_dead_lettered_total", "counter"},
        {"outboxd_produced_bytes_total", "counter"},
        {"outboxd_inflight_events", "gauge"},
        {"outboxd_inflight_transactions", "gauge"},
        {"outboxd_kafka_queue_messages", "gauge"},
        {"outboxd_received_lsn", "gauge"},
        {"outboxd_acked_lsn", "gauge"},
        {"outboxd_confirmed_lsn", "gauge"},
        {"outboxd_offset_writes_total", "counter"},
        {"outboxd_slot_lag_bytes", "gauge"},
        {"outboxd_slot_wal_status", "gauge"},
        {"outboxd_slot_failover", "gauge"},
        {"outboxd_monitor_errors_total", "counter"},
        {"outboxd_kafka_unreachable_total", "counter"},
        {"outboxd_replication_lag_seconds", "gauge"},
        {"outboxd_commit_to_ack_seconds", "histogram"},
        {"outboxd_stage_latency_seconds", "histogram"},
        {"outboxd_reconnects_total", "counter"},
        {"outboxd_heartbeats_sent_total", "counter"},
        {"outboxd_heartbeats_received_total", "counter"},
        {"outboxd_messages_ignored_total", "counter"},
        {"outboxd_streaming", "gauge"},
        {"outboxd_role", "gauge"},
        {"outboxd_ready", "gauge"},
    };
    char line[128];
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        snprintf(line, sizeof(line), "# TYPE %s %s", families[i][0], families[i][1]);
        ck_line(t, line);
    }
    /* Every line is a comment or a sample of an outboxd_ family. */
    for (const char *p = t; *p; p = strchr(p, '\n') + 1)
        ck_assert_msg(p[0] == '#' || strncmp(p, "outboxd_", 8) == 0, "stray line at %.40s",
                      p);
    ck_assert_int_eq(t[tb.len - 1], '\n');
}
END_TEST

START_TEST(test_info_and_gauges)
{
    m.inflight_events = 7;
    m.inflight_txns = 2;
    m.kafka_queue = 9;
    m.kafka_brokers_up = 3;
    m.received_lsn = UINT64_C(0x16B374D848);
    m.acked_lsn = UINT64_C(0x100000000);
    m.confirmed_lsn = 5;
    m.produced_bytes = 1234;
    m.streaming = true;
    m.ready = false;
    const char *t = render(0);
    ck_line(t, "outboxd_build_info{version=\"9.9.9\",plugin=\"pgoutput\",slot=\"s\"} 1");
    ck_line(t, "outboxd_start_time_seconds 1700000000.250000");
    ck_line(t, "outboxd_inflight_events 7");
    ck_line(t, "outboxd_inflight_transactions 2");
    ck_line(t, "outboxd_kafka_queue_messages 9");
    ck_line(t, "outboxd_kafka_brokers_up 3");
    ck_line(t, "outboxd_received_lsn 97500059720");
    ck_line(t, "outboxd_acked_lsn 4294967296");
    ck_line(t, "outboxd_confirmed_lsn 5");
    ck_line(t, "outboxd_produced_bytes_total 1234");
    ck_line(t, "outboxd_streaming 1");
    ck_line(t, "outboxd_ready 0");
}
END_TEST

/* outboxd_role: every role has a series, 1 for the current one only. */
START_TEST(test_role)
{
    const char *t = render(0); /* zeroed: connecting */
    ck_line(t, "outboxd_role{role=\"connecting\"} 1");
    ck_line(t, "outboxd_role{role=\"active\"} 0");
    ck_line(t, "outboxd_role{role=\"standby\"} 0");
    m.role = ROLE_STANDBY;
    t = render(0);
    ck_line(t, "outboxd_role{role=\"connecting\"} 0");
    ck_line(t, "outboxd_role{role=\"active\"} 0");
    ck_line(t, "outboxd_role{role=\"standby\"} 1");
    m.role = ROLE_ACTIVE;
    t = render(0);
    ck_line(t, "outboxd_role{role=\"active\"} 1");
    ck_line(t, "outboxd_role{role=\"standby\"} 0");
    ck_assert_str_eq(metrics_role_name(ROLE__COUNT), "?");
}
END_TEST

START_TEST(test_unknown_values_absent)
{
    /* Before librdkafka's first statistics, before the first slot answer,
     * before the first ACKed transaction: no sample (HELP/TYPE only). */
    const char *t = render(INT64_C(1700000000000000));
    ck_assert_ptr_null(strstr(t, "outboxd_kafka_brokers_up"));
    ck_assert_ptr_null(strstr(t, "\noutboxd_slot_lag_bytes "));
    ck_assert_ptr_null(strstr(t, "\noutboxd_slot_wal_status{"));
    ck_assert_ptr_null(strstr(t, "\noutboxd_slot_failover "));
    ck_assert_ptr_null(strstr(t, "\noutboxd_replication_lag_seconds "));
    ck_line(t, "# TYPE outboxd_slot_lag_bytes gauge");
}
END_TEST

START_TEST(test_slot_and_lag)
{
    m.slot_seen = true;
    m.slot_lag_bytes = 123456;
    m.slot_wal_status = metrics_wal_status_parse("extended");
    m.acked_commit_time_us = INT64_C(1700000000000000);
    const char *t = render(INT64_C(1700000002500001));
    ck_line(t, "outboxd_slot_lag_bytes 123456");
    ck_line(t, "outboxd_slot_wal_status{status=\"reserved\"} 0");
    ck_line(t, "outboxd_slot_wal_status{status=\"extended\"} 1");
    ck_line(t, "outboxd_slot_wal_status{status=\"unreserved\"} 0");
    ck_line(t, "outboxd_slot_wal_status{status=\"lost\"} 0");
    ck_line(t, "outboxd_slot_failover 0");
    ck_line(t, "outboxd_replication_lag_seconds 2.500001");
    m.slot_failover = true;
    ck_line(render(INT64_C(1700000002500001)), "outboxd_slot_failover 1");
    /* a clock behind the commit time: a negative lag, not garbage */
    t = render(INT64_C(1699999999000000));
    ck_line(t, "outboxd_replication_lag_seconds -1.000000");
}
END_TEST

START_TEST(test_wal_status_parse)
{
    ck_assert_int_eq(metrics_wal_status_parse("reserved"), WAL_STATUS_RESERVED);
    ck_assert_int_eq(metrics_wal_status_parse("extended"), WAL_STATUS_EXTENDED);
    ck_assert_int_eq(metrics_wal_status_parse("unreserved"), WAL_STATUS_UNRESERVED);
    ck_assert_int_eq(metrics_wal_status_parse("lost"), WAL_STATUS_LOST);
    ck_assert_int_eq(metrics_wal_status_parse(""), WAL_STATUS_UNKNOWN);
    ck_assert_int_eq(metrics_wal_status_parse(NULL), WAL_STATUS_UNKNOWN);
    ck_assert_int_eq(metrics_wal_status_parse("Reserved"), WAL_STATUS_UNKNOWN);
    /* an unknown status renders no wal_status sample */
    m.slot_seen = true;
    m.slot_wal_status = WAL_STATUS_UNKNOWN;
    ck_assert_ptr_null(strstr(render(0), "\noutboxd_slot_wal_status{"));
}
END_TEST

START_TEST(test_render_appends_and_grows)
{
    /* Many labels force the buffer to grow several times. */
    char label[64];
    for (int i = 0; i < 150; i++) {
        snprintf(label, sizeof(label), "outbox.event.a-rather-long-aggregate-type-%03d", i);
        metrics_count(&m.produced, label, (uint64_t)i + 1);
    }
    const char *t = render(0);
    ck_line(t, "outboxd_events_produced_total{topic=\"outbox.event.a-rather-long-aggregate-"
               "type-149\"} 150");
    size_t first = tb.len;
    /* metrics_render appends: rendering again without a reset doubles it */
    ck_assert_int_eq(metrics_render(&m, 0, &tb), 0);
    ck_assert_uint_eq(tb.len, 2 * first);
}
END_TEST

START_TEST(test_histogram)
{
    static struct latency_hist ev, hb; /* ~21 KB each: not on the stack */
    memset(&ev, 0, sizeof(ev));
    memset(&hb, 0, sizeof(hb));
    const int64_t samples[] = {500, 3000, 3000, 2000000, 400000000};
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++)
        latency_record(&ev, samples[i]);
    latency_record(&hb, 7000);
    /* without histograms: the family is announced, no series */
    const char *t = render(0);
    ck_line(t, "# TYPE outboxd_commit_to_ack_seconds histogram");
    ck_assert_ptr_null(strstr(t, "outboxd_commit_to_ack_seconds_bucket"));
    m.commit_to_ack = &ev;
    t = render(0);
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"event\",le=\"0.001\"} 1");
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"event\",le=\"0.0025\"} 1");
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"event\",le=\"0.005\"} 3");
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"event\",le=\"1\"} 3");
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"event\",le=\"2.5\"} 4");
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"event\",le=\"300\"} 4");
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"event\",le=\"+Inf\"} 5");
    ck_line(t, "outboxd_commit_to_ack_seconds_sum{source=\"event\"} 402.006500");
    ck_line(t, "outboxd_commit_to_ack_seconds_count{source=\"event\"} 5");
    ck_assert_ptr_null(strstr(t, "_count{source=\"heartbeat\""));
    /* bucket counts never decrease */
    uint64_t prev = 0;
    int buckets = 0;
    for (const char *p = strstr(t, "_bucket{source=\"event\""); p;
         p = strstr(p + 1, "_bucket{source=\"event\"")) {
        uint64_t v = strtoull(strchr(p, '}') + 2, NULL, 10);
        ck_assert_uint_ge(v, prev);
        prev = v;
        buckets++;
    }
    ck_assert_int_eq(buckets, METRICS_LATENCY_BOUNDS + 1);
    m.heartbeat_rtt = &hb;
    t = render(0);
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"heartbeat\",le=\"0.005\"} 0");
    ck_line(t, "outboxd_commit_to_ack_seconds_bucket{source=\"heartbeat\",le=\"0.01\"} 1");
    ck_line(t, "outboxd_commit_to_ack_seconds_count{source=\"heartbeat\"} 1");
}
END_TEST

/* The stages: one family, a series per stage given, labelled stage. */
START_TEST(test_stage_histograms)
{
    static struct latency_hist recv, confirm;
    memset(&recv, 0, sizeof(recv));
    memset(&confirm, 0, sizeof(confirm));
    latency_record(&recv, 800);
    latency_record(&recv, 4000);
    latency_record(&confirm, 30000);
    const char *t = render(0);
    ck_line(t, "# TYPE outboxd_stage_latency_seconds histogram");
    ck_assert_ptr_null(strstr(t, "outboxd_stage_latency_seconds_bucket"));
    m.stages[STAGE_COMMIT_TO_RECEIVE] = &recv;
    m.stages[STAGE_ACK_TO_CONFIRM] = &confirm;
    t = render(0);
    ck_line(t, "outboxd_stage_latency_seconds_bucket{stage=\"commit-to-receive\",le=\"0.001\"} 1");
    ck_line(t, "outboxd_stage_latency_seconds_bucket{stage=\"commit-to-receive\",le=\"0.005\"} 2");
    ck_line(t, "outboxd_stage_latency_seconds_sum{stage=\"commit-to-receive\"} 0.004800");
    ck_line(t, "outboxd_stage_latency_seconds_count{stage=\"commit-to-receive\"} 2");
    ck_line(t, "outboxd_stage_latency_seconds_bucket{stage=\"ack-to-confirm\",le=\"0.025\"} 0");
    ck_line(t, "outboxd_stage_latency_seconds_bucket{stage=\"ack-to-confirm\",le=\"0.05\"} 1");
    ck_line(t, "outboxd_stage_latency_seconds_count{stage=\"ack-to-confirm\"} 1");
    ck_assert_ptr_null(strstr(t, "stage=\"produce-to-ack\""));
    ck_assert_str_eq(metrics_stage_name(STAGE_RECEIVE_TO_PRODUCE), "receive-to-produce");
    ck_assert_str_eq(metrics_stage_name(STAGE_PRODUCE_TO_ACK), "produce-to-ack");
}
END_TEST

/* A seeded label is a sample at 0 before anything is counted, and
 * counting adds to it (one series, not two). */
START_TEST(test_seed_at_zero)
{
    ck_assert_int_eq(metrics_seed(&m.dead_lettered, "BAD_TOPIC"), 0);
    ck_assert_int_eq(metrics_seed(&m.dead_lettered, "BAD_TOPIC"), 0);
    const char *t = render(0);
    ck_line(t, "outboxd_events_dead_lettered_total{reason=\"BAD_TOPIC\"} 0");
    metrics_count(&m.dead_lettered, "BAD_TOPIC", 1);
    ck_assert_uint_eq(m.dead_lettered.n, 1);
    t = render(0);
    ck_line(t, "outboxd_events_dead_lettered_total{reason=\"BAD_TOPIC\"} 1");
    /* Seeding a counted label leaves its count. */
    metrics_seed(&m.dead_lettered, "BAD_TOPIC");
    ck_assert_uint_eq(metrics_get(&m.dead_lettered, "BAD_TOPIC"), 1);
}
END_TEST

/* Polling mode: the backlog gauges by status once the query answered,
 * none before (the families announced). */
START_TEST(test_polling_backlog)
{
    m.mode = METRICS_POLLING;
    const char *t = render(0);
    ck_line(t, "# TYPE outboxd_polling_backlog_rows gauge");
    ck_line(t, "# TYPE outboxd_polling_backlog_oldest_age_seconds gauge");
    ck_line(t, "# TYPE outboxd_polling_backlog_max_attempts gauge");
    ck_line(t, "# TYPE outboxd_polling_table_bytes gauge");
    ck_assert_ptr_null(strstr(t, "outboxd_polling_backlog_rows{"));
    ck_assert_ptr_null(strstr(t, "\noutboxd_polling_table_bytes "));
    m.backlog = (struct polling_backlog){.seen = true,
                                         .rows = {4, 1, 2},
                                         .oldest_ms = {3600500, 1800000, 0},
                                         .max_attempts = {4, 1, 5},
                                         .table_bytes = 98304};
    t = render(0);
    ck_line(t, "outboxd_polling_backlog_rows{status=\"pending\"} 4");
    ck_line(t, "outboxd_polling_backlog_rows{status=\"claimed\"} 1");
    ck_line(t, "outboxd_polling_backlog_rows{status=\"quarantined\"} 2");
    ck_line(t, "outboxd_polling_backlog_oldest_age_seconds{status=\"pending\"} 3600.500000");
    ck_line(t, "outboxd_polling_backlog_oldest_age_seconds{status=\"quarantined\"} 0.000000");
    ck_line(t, "outboxd_polling_backlog_max_attempts{status=\"quarantined\"} 5");
    ck_line(t, "outboxd_polling_table_bytes 98304");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_counters_by_label);
    tcase_add_test(tc, test_label_cap);
    tcase_add_test(tc, test_label_escaping);
    tcase_add_test(tc, test_every_family_announced);
    tcase_add_test(tc, test_info_and_gauges);
    tcase_add_test(tc, test_role);
    tcase_add_test(tc, test_unknown_values_absent);
    tcase_add_test(tc, test_slot_and_lag);
    tcase_add_test(tc, test_wal_status_parse);
    tcase_add_test(tc, test_render_appends_and_grows);
    tcase_add_test(tc, test_histogram);
    tcase_add_test(tc, test_stage_histograms);
    tcase_add_test(tc, test_seed_at_zero);
    tcase_add_test(tc, test_polling_backlog);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
