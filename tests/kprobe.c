/*
 * outboxd-kprobe - the floor under the benchmark's commit-to-ACK latency
 * (tests/bench/run.sh --probe): what a bare librdkafka producer, configured
 * exactly as outboxd's (kafka_conf_producer() over outboxd's defaults:
 * acks=all, idempotence, one request in flight per broker, linger.ms 2),
 * gets from the same cluster on the same host, with no PostgreSQL, no
 * stream and no relay in the way. outboxd's own latency is then read
 * against it, in the same run: whatever the probe cannot reach, no relay
 * on librdkafka can.
 *
 *   outboxd-kprobe -b BOOTSTRAP -t TOPIC [--rate N] [--seconds S]
 *                  [--keys K] [--bytes B] [--header NAME] [--txn-mix]
 *                  [-X prop=value ...]
 *
 * It produces messages of B bytes (default 200) keyed over K keys
 * (default 1000, "k0".."k999", so they spread over the partitions the way
 * aggregate ids do) at N per second (default 5000) for S seconds (default
 * 20): each loop turn produces every message that is due by then (a
 * turn every millisecond at most), the way the relay produces what one
 * turn read. --rate 0 sends one message at a
 * time and waits for its delivery report (the round trip alone). -X sets
 * a [kafka] property over outboxd's defaults. --header NAME gives every
 * message a header NAME = "kprobe-<n>", unique per message, so a consumer
 * that reads outboxd's event_id header (tests/kwatch.c) can read the
 * probe's messages too. --txn-mix produces in the benchmark writer's
 * pattern instead of evenly: transactions arrive at random (exponential
 * gaps, as pgbench -R schedules them), ten in eleven carry one message and
 * one in eleven ten, produced together (the rate stays N messages/s).
 *
 * The latency of a message is from just before rd_kafka_producev() to its
 * delivery report (CLOCK_MONOTONIC). At the end it prints one line:
 *
 *   kprobe sent N acked N failed F seconds S rate R p50_us A p99_us B
 *   max_us C cpu_us_per_msg D
 *
 * cpu is the process's user + system time over the messages sent.
 * Exit 0; 1 if any message failed or the cluster cannot be reached; 2 on
 * bad usage.
 */
#include <getopt.h>
#include <math.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <librdkafka/rdkafka.h>

#include "clock.h"
#include "config.h"
#include "kafkaconf.h"
#include "latency.h"

struct probe {
    struct latency_hist lat; /* produce-to-report */
    uint64_t acked, failed;
    int64_t in_flight;
    char first_error[256];
};

struct opts {
    const char *bootstrap, *topic;
    const char *header; /* NULL: no header */
    int txn_mix;        /* --txn-mix */
    long rate, seconds, keys, bytes;
    int nprops;
    char **props; /* "name=value", borrowed from argv */
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: outboxd-kprobe -b BOOTSTRAP -t TOPIC [--rate N] [--seconds S] "
                    "[--keys K] [--bytes B] [--header NAME] [--txn-mix] [-X prop=value ...]\n");
    exit(2);
}

static long parse_long(const char *s, const char *what, long min)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min) {
        fprintf(stderr, "outboxd-kprobe: %s: %s is not a whole number >= %ld\n", what, s, min);
        exit(2);
    }
    return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option longs[] = {
        {"rate", required_argument, NULL, 'r'},  {"seconds", required_argument, NULL, 's'},
        {"keys", required_argument, NULL, 'k'},  {"bytes", required_argument, NULL, 'n'},
        {"header", required_argument, NULL, 'H'}, {"txn-mix", no_argument, NULL, 'M'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct opts){.rate = 5000, .seconds = 20, .keys = 1000, .bytes = 200};
    o->props = calloc((size_t)argc, sizeof(*o->props));
    if (!o->props) exit(1);
    int ch;
    while ((ch = getopt_long(argc, argv, "b:t:X:", longs, NULL)) != -1) {
        switch (ch) {
        case 'b': o->bootstrap = optarg; break;
        case 't': o->topic = optarg; break;
        case 'X': o->props[o->nprops++] = optarg; break;
        case 'r': o->rate = parse_long(optarg, "--rate", 0); break;
        case 's': o->seconds = parse_long(optarg, "--seconds", 1); break;
        case 'k': o->keys = parse_long(optarg, "--keys", 1); break;
        case 'n': o->bytes = parse_long(optarg, "--bytes", 1); break;
        case 'H': o->header = optarg; break;
        case 'M': o->txn_mix = 1; break;
        default: usage();
        }
    }
    if (!o->bootstrap || !o->topic || optind != argc) usage();
}

/* The delivery report: the opaque is the message's send time. */
static void on_report(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    struct probe *p = opaque;
    int64_t sent_us = (int64_t)(intptr_t)m->_private;
    p->in_flight--;
    if (m->err) {
        if (p->failed++ == 0)
            snprintf(p->first_error, sizeof(p->first_error), "%s", rd_kafka_err2str(m->err));
        return;
    }
    p->acked++;
    latency_record(&p->lat, clock_mono_us() - sent_us);
}

/* The producer as outboxd builds it, with bootstrap and -X over it. The
 * caller owns the handle (rd_kafka_destroy). Exits 1 on refusal. */
static rd_kafka_t *probe_producer(const struct opts *o, struct probe *p)
{
    struct config c;
    char err[512];
    if (config_init(&c) != 0) exit(1);
    int rc = config_set(&c, "kafka", "bootstrap.servers", o->bootstrap, err, sizeof(err));
    for (int i = 0; rc == 0 && i < o->nprops; i++) {
        char *eq = strchr(o->props[i], '=');
        if (!eq) {
            fprintf(stderr, "outboxd-kprobe: -X %s: expected prop=value\n", o->props[i]);
            exit(2);
        }
        *eq = '\0';
        rc = config_set(&c, "kafka", o->props[i], eq + 1, err, sizeof(err));
        *eq = '=';
    }
    rd_kafka_conf_t *conf = rc == 0 ? kafka_conf_producer(&c, false, NULL, NULL, err, sizeof(err))
                                    : NULL;
    config_free(&c);
    if (!conf) {
        fprintf(stderr, "outboxd-kprobe: %s\n", err);
        exit(1);
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_report);
    rd_kafka_conf_set_opaque(conf, p);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        fprintf(stderr, "outboxd-kprobe: rd_kafka_new: %s\n", err);
        exit(1);
    }
    return rk;
}

/* Produces message i (key "k<i % keys>"). Returns 0, or -1 when librdkafka
 * refuses it (reason on stderr). */
static int produce_one(rd_kafka_t *rk, const struct opts *o, struct probe *p, long long i,
                       const char *value)
{
    char key[32], id[40];
    int klen = snprintf(key, sizeof(key), "k%lld", i % o->keys);
    rd_kafka_headers_t *hdrs = NULL; /* librdkafka's once produced */
    if (o->header) {
        int idlen = snprintf(id, sizeof(id), "kprobe-%lld", i);
        hdrs = rd_kafka_headers_new(1);
        rd_kafka_header_add(hdrs, o->header, -1, id, idlen);
    }
    int64_t now = clock_mono_us();
    rd_kafka_resp_err_t e = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_KEY(key, (size_t)klen),
        RD_KAFKA_V_VALUE((void *)value, (size_t)o->bytes), RD_KAFKA_V_HEADERS(hdrs),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE((void *)(intptr_t)now),
        RD_KAFKA_V_END);
    if (e && hdrs) rd_kafka_headers_destroy(hdrs);
    if (e) {
        fprintf(stderr, "outboxd-kprobe: produce: %s\n", rd_kafka_err2str(e));
        return -1;
    }
    p->in_flight++;
    return 0;
}

static double cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

/* Waits (polling for reports) until nothing is in flight or deadline_us. */
static void drain_reports(rd_kafka_t *rk, struct probe *p, int64_t deadline_us)
{
    while (p->in_flight > 0 && clock_mono_us() < deadline_us) rd_kafka_poll(rk, 100);
}

/* One message ahead of the cluster's metadata: the first message's
 * latency would include the connection set-up, not the floor. */
static int warm_up(rd_kafka_t *rk, const struct opts *o, struct probe *p, const char *value)
{
    if (produce_one(rk, o, p, 0, value) != 0) return -1;
    drain_reports(rk, p, clock_mono_us() + 30 * 1000000LL);
    if (p->in_flight > 0 || p->failed) {
        fprintf(stderr, "outboxd-kprobe: no delivery report within 30 s: %s\n",
                p->failed ? p->first_error : "cluster unreachable?");
        return -1;
    }
    p->lat = (struct latency_hist){0};
    p->acked = 0;
    return 0;
}

/* Serves delivery reports until next_us (monotonic), for at least 1 ms:
 * rd_kafka_poll() counts in milliseconds, and at 5,000/s the next message
 * is due in 200 us, so a shorter wait would spin this thread. */
static void poll_until(rd_kafka_t *rk, int64_t next_us)
{
    int wait_ms = (int)((next_us - clock_mono_us() + 999) / 1000);
    rd_kafka_poll(rk, wait_ms > 1 ? wait_ms : 1);
}

/* Sends at o->rate for o->seconds; returns the messages sent. */
static long long run_paced(rd_kafka_t *rk, const struct opts *o, struct probe *p,
                           const char *value)
{
    int64_t start = clock_mono_us(), end = start + o->seconds * 1000000LL;
    long long sent = 0;
    while (!stop_requested) {
        int64_t now = clock_mono_us();
        if (now >= end) break;
        long long due = (long long)((now - start) * (double)o->rate / 1e6) + 1;
        while (sent < due)
            if (produce_one(rk, o, p, sent + 1, value) == 0) sent++;
            else return sent;
        poll_until(rk, start + (int64_t)(sent * 1e6 / (double)o->rate));
    }
    return sent;
}

/* The writer's pattern (--txn-mix): a transaction is due at exponential
 * gaps whose mean keeps o->rate messages/s (20 messages per 11
 * transactions); each brings 1 message, or 10 in one case of 11. Returns
 * the messages sent. drand48's fixed default seed: every run the same. */
static long long run_txn_mix(rd_kafka_t *rk, const struct opts *o, struct probe *p,
                             const char *value)
{
    const double mean_gap_us = 1e6 * 20.0 / 11.0 / (double)o->rate;
    int64_t start = clock_mono_us(), end = start + o->seconds * 1000000LL;
    double due_us = (double)start;
    long long sent = 0;
    while (!stop_requested) {
        int64_t now = clock_mono_us();
        if (now >= end) break;
        while (due_us <= (double)now) {
            int n = drand48() < 1.0 / 11.0 ? 10 : 1;
            for (int i = 0; i < n; i++) {
                if (produce_one(rk, o, p, sent + 1, value) != 0) return sent;
                sent++;
            }
            due_us += -mean_gap_us * log(1.0 - drand48());
        }
        poll_until(rk, (int64_t)due_us);
    }
    return sent;
}

/* One message at a time: the round trip alone. */
static long long run_ping_pong(rd_kafka_t *rk, const struct opts *o, struct probe *p,
                               const char *value)
{
    int64_t end = clock_mono_us() + o->seconds * 1000000LL;
    long long sent = 0;
    while (!stop_requested && clock_mono_us() < end) {
        if (produce_one(rk, o, p, sent + 1, value) != 0) break;
        sent++;
        drain_reports(rk, p, end + 30 * 1000000LL);
    }
    return sent;
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_opts(argc, argv, &o);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    static struct probe p; /* the histogram is ~21 KB */
    char *value = malloc((size_t)o.bytes);
    if (!value) return 1;
    memset(value, 'x', (size_t)o.bytes);

    rd_kafka_t *rk = probe_producer(&o, &p);
    if (warm_up(rk, &o, &p, value) != 0) return 1;
    double cpu0 = cpu_us();
    int64_t t0 = clock_mono_us();
    long long sent = o.rate == 0  ? run_ping_pong(rk, &o, &p, value)
                     : o.txn_mix ? run_txn_mix(rk, &o, &p, value)
                                 : run_paced(rk, &o, &p, value);
    double secs = (clock_mono_us() - t0) / 1e6;
    drain_reports(rk, &p, clock_mono_us() + 60 * 1000000LL);
    double cpu = cpu_us() - cpu0;
    rd_kafka_destroy(rk);

    printf("kprobe sent %lld acked %" PRIu64 " failed %" PRIu64 " seconds %.1f rate %.0f "
           "p50_us %" PRId64 " p99_us %" PRId64 " max_us %" PRId64 " cpu_us_per_msg %.1f\n",
           sent, p.acked, p.failed, secs, sent / secs, latency_quantile(&p.lat, 0.50),
           latency_quantile(&p.lat, 0.99), p.lat.max_us, sent ? cpu / (double)sent : 0.0);
    if (p.failed) fprintf(stderr, "outboxd-kprobe: %" PRIu64 " failed: %s\n", p.failed, p.first_error);
    free(value);
    free(o.props);
    return p.failed || p.acked != (uint64_t)sent ? 1 : 0;
}
