/*
 * decode_bench.c - time the wal2json decoder on the benchmark's lines.
 *
 * tests/bench/run.sh measures the whole relay; this isolates the decoder so
 * a parser change can be measured in seconds, without Postgres or Kafka.
 * It decodes a begin, an insert of the benchmark's outbox row (uuid, text,
 * a ~330-byte jsonb payload, timestamptz) and a commit, N times, and prints
 * the CPU time per line and per insert. The lines follow what wal2json 2.5
 * prints with the options outboxd sends (src/stream/stream.c: no column types).
 *
 * Usage: outboxd-decodebench [N]   (default 1,000,000 transactions)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wal2json.h"

static const char begin_line[] =
    "{\"action\":\"B\",\"timestamp\":\"2026-11-30 09:38:20.123456+00\","
    "\"lsn\":\"0/1571240\",\"nextlsn\":\"0/1571270\"}";
static const char insert_line[] =
    "{\"action\":\"I\",\"timestamp\":\"2026-11-30 09:38:20.123456+00\","
    "\"lsn\":\"0/1570EA0\",\"schema\":\"public\",\"table\":\"outbox_events\","
    "\"columns\":[{\"name\":\"event_id\","
    "\"value\":\"f8cc1b4e-3a5c-4f1e-9c1d-2b7e8a9f0c11\"},"
    "{\"name\":\"aggregate_type\",\"value\":\"Order\"},"
    "{\"name\":\"aggregate_id\",\"value\":\"order-123\"},"
    "{\"name\":\"aggregate_version\",\"value\":null},"
    "{\"name\":\"event_type\",\"value\":\"OrderPlaced\"},"
    "{\"name\":\"payload\",\"value\":\"{\\\"sku\\\": "
    "\\\"C4CA4238A0B9\\\", \\\"note\\\": \\\"c81e728d9d4c2f636f067f89cc14862"
    "ceccbc87e4b5ce2fe28308fd9f2a7baf3\\\", \\\"currency\\\": \\\"EUR\\\", "
    "\\\"customer\\\": \\\"e10adc3949ba59abbe56e057f20f883e\\\", "
    "\\\"order_id\\\": 123456, \\\"quantity\\\": 4, \\\"shipping\\\": "
    "{\\\"zip\\\": \\\"23456\\\", \\\"city\\\": \\\"a87ff679a2\\\", "
    "\\\"street\\\": \\\"e4da3b7fbbce2345d7772b0674a318d5\\\"}, "
    "\\\"unit_price_cents\\\": 12345}\"},"
    "{\"name\":\"created_at\","
    "\"value\":\"2026-11-30 09:38:20.123456+00\"}]}";
static const char commit_line[] =
    "{\"action\":\"C\",\"timestamp\":\"2026-11-30 09:38:20.123456+00\","
    "\"lsn\":\"0/1571240\",\"nextlsn\":\"0/1571270\"}";

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Decodes line once; exits with the decoder's error on failure (the lines
 * above must stay valid, or the timing would measure the error path). */
static void decode(struct wal2json_decoder *d, lsn_t start, const char *line, size_t len,
                   enum repl_msg_kind want)
{
    struct repl_msg m;
    char err[256];

    if (wal2json_decode(d, start, line, len, &m, err, sizeof(err)) < 0 || m.kind != want) {
        fprintf(stderr, "decodebench: %s\n", err);
        exit(1);
    }
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    struct wal2json_decoder *d = wal2json_decoder_new();
    size_t bl = strlen(begin_line), il = strlen(insert_line), cl = strlen(commit_line);
    double t0, t1, t2;

    if (!d || n <= 0) return 2;
    t0 = cpu_seconds();
    for (long i = 0; i < n; i++) {
        decode(d, 0x1571240, begin_line, bl, RM_BEGIN);
        decode(d, 0x1571240, insert_line, il, RM_INSERT);
        decode(d, 0x1571270, commit_line, cl, RM_COMMIT);
    }
    t1 = cpu_seconds();
    for (long i = 0; i < n; i++)
        decode(d, 0x1571240, insert_line, il, RM_INSERT);
    t2 = cpu_seconds();
    printf("wal2json: %.0f ns per B+I+C transaction, %.0f ns per %zu-byte insert line "
           "(%.0f MB/s)\n",
           (t1 - t0) * 1e9 / (double)n, (t2 - t1) * 1e9 / (double)n, il,
           (double)il * (double)n / (t2 - t1) / 1e6);
    wal2json_decoder_free(d);
    return 0;
}
