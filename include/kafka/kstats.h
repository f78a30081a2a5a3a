/*
 * kstats.h - librdkafka's statistics per broker, accumulated over a run:
 * where a produced event waits inside librdkafka and on the wire, broker
 * by broker (logged at stop, relayobs.c). Pure: producer.c feeds it the
 * "brokers" object of each statistics JSON (statistics.interval.ms), no
 * clock, no I/O.
 *
 * Of each broker object (librdkafka STATISTICS.md, rdkafka.c
 * rd_kafka_stats_emit_all), in microseconds where a time:
 *
 *   "name": "host:port/1", "source": "learned" | "configured" | "internal"
 *   | "logical", "tx": requests sent, "txbytes": bytes sent, "req":
 *   {"Produce": requests, ...}, "wakeups": times librdkafka's thread for
 *   the broker woke up (all four cumulative over the client's life; far
 *   more wake-ups than produce requests means the thread spins:
 *   librdkafka 2.0.2 busy-polls while a partition's next batch is due and
 *   5 or more of its messages are in flight, see src/config/config.c at
 *   linger.ms), and three rolling windows reset at every emit, each
 *   {"min", "max", "avg", "sum", "p50", ..., "p99", "cnt", ...}:
 *   "int_latency" (a message's wait in librdkafka's queues until written
 *   into a request: one sample per message), "outbuf_latency" (a
 *   request's wait in the broker's output buffer: one per request), "rtt"
 *   (a request's round trip: one per response).
 *
 * Only real brokers count (source learned or configured), keyed by name.
 * A window with cnt 0 does not count for that figure, nor one with a
 * negative sample: int_latency is meaningless under message.timeout.ms = 0
 * (outboxd's default, see kstats.c), and is then n/a. The cumulative
 * counters are per librdkafka client: kstats_new_client() says a new one
 * started (producer.c's renew()), so its counters add from 0.
 */
#ifndef OUTBOXD_KSTATS_H
#define OUTBOXD_KSTATS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Brokers tracked; later ones are ignored (a cluster has far fewer). */
#define KSTATS_MAX_BROKERS 256

/* One latency window's figure over the run. */
struct kstats_lat {
    uint64_t cnt;      /* samples over the windows */
    double avg_sum;    /* sum over the windows of avg * cnt */
    int64_t p99_max;   /* the highest window p99 (a bound, not the run's p99) */
};

struct kstats_broker {
    char *name; /* owned */
    uint64_t windows; /* statistics emits that listed the broker */
    struct kstats_lat rtt, int_latency, outbuf_latency;
    uint64_t produce_reqs; /* Produce requests sent over the run */
    uint64_t txbytes;      /* bytes sent over the run (every request) */
    uint64_t wakeups;      /* times the broker's thread woke up over the run */
    int64_t last_produce, last_txbytes, last_wakeups; /* the current client's last values */
};

struct kstats {
    struct kstats_broker *b;
    size_t n, cap;
};

/* All-zero is an empty set; kstats_free() releases it. */
void kstats_free(struct kstats *ks);

/* Adds one statistics window: brokers is the JSON object under "brokers".
 * Returns 0, -1 on out of memory (the window is partly counted). */
int kstats_window(struct kstats *ks, const json_t *brokers);

/* A new librdkafka client starts: its cumulative counters start at 0. */
void kstats_new_client(struct kstats *ks);

/* The mean over the run's windows of each window's avg weighted by its
 * cnt; -1 when no window had a sample. */
int64_t kstats_avg(const struct kstats_lat *l);

/* The line logged at stop for broker b, into buf (NUL-terminated, cut to
 * len):
 *   kafka broker NAME over W windows: rtt avg A us p99 B us; int_latency
 *   avg C us p99 D us; outbuf_latency avg E us p99 F us; produce requests
 *   R, bytes per request S; thread wake-ups U
 * (one line) with n/a for a figure without samples (S: without a Produce
 * request). */
void kstats_format(const struct kstats_broker *b, char *buf, size_t len);

#endif
