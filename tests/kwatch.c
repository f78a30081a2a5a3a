/*
 * outboxd-kwatch - the consumer end of the benchmark's commit-to-consumer
 * latency (tests/bench/run.sh): it reads one topic as it is written and
 * prints, for every message, the event id and the moment the message came
 * out of the consumer, one line each:
 *
 *   EVENT_ID RECEIVE_UNIX_US
 *
 * EVENT_ID is the value of the message's event_id header (the header
 * outboxd gives every event, README "The message"; --header names another);
 * RECEIVE_UNIX_US is the wall clock (clock_unix_us(), the clock outboxd's
 * own commit-to-ACK latency reads) in microseconds since the epoch, read
 * once per message, right after rd_kafka_consumer_poll() returned it. The
 * script subtracts the row's commit timestamp from it.
 *
 * Usage: outboxd-kwatch -b BOOTSTRAP -t TOPIC [--ready-file FILE]
 *            [--count N] [--offset PARTITION:OFFSET ...] [--header NAME]
 *            [--timeout-ms MS] [-X prop=value ...]
 *
 * Every partition of TOPIC is assigned directly (no consumer group) at its
 * high watermark, queried first (or at --offset's OFFSET for that
 * partition): an absolute offset, so no event produced after the start is
 * missed, whenever the fetcher begins. Once assigned it writes "ready" to
 * --ready-file (temp file + rename): everything produced from then on is
 * seen. The consumer fetches with fetch.wait.max.ms=1 and
 * fetch.min.bytes=1, so a message waits at most ~1 ms in the broker; -X
 * sets any other consumer property (after these). --timeout-ms (30000)
 * bounds the start (metadata, watermarks), not the watch.
 *
 * It stops on SIGTERM/SIGINT, or after --count N messages, and exits 0;
 * stdout is flushed whenever the consumer is idle, so the lines so far can
 * be counted while it runs. Exit 1 on any consumer error, a message without
 * the header, or an id that is not printable ASCII without spaces and
 * backslashes (the script COPYs the lines into PostgreSQL); 2 on bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "clock.h"

#define MAX_OFFSETS 256

struct opts {
    const char *bootstrap, *topic, *ready_file, *header;
    long long count; /* 0: until a signal */
    long timeout_ms;
    int noffsets;
    int32_t off_part[MAX_OFFSETS];
    int64_t off_value[MAX_OFFSETS];
    int nprops;
    char **props; /* "name=value", borrowed from argv */
};

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *out) {
    fprintf(out, "usage: outboxd-kwatch -b BOOTSTRAP -t TOPIC [--ready-file FILE] "
                 "[--count N] [--offset PARTITION:OFFSET ...] [--header NAME] "
                 "[--timeout-ms MS] [-X prop=value ...]\n");
}

static bool parse_ll(const char *s, long long min, long long *out) {
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min) return false;
    *out = v;
    return true;
}

/* "P:O" into o's offset table; false when malformed or full. */
static bool add_offset(struct opts *o, const char *arg) {
    const char *colon = strchr(arg, ':');
    char part[32];
    long long p, off;

    if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(part) ||
        o->noffsets == MAX_OFFSETS)
        return false;
    memcpy(part, arg, (size_t)(colon - arg));
    part[colon - arg] = '\0';
    if (!parse_ll(part, 0, &p) || p > INT32_MAX || !parse_ll(colon + 1, 0, &off)) return false;
    o->off_part[o->noffsets] = (int32_t)p;
    o->off_value[o->noffsets++] = off;
    return true;
}

/* Fills o from argv; returns 0, or 2 (usage) after saying why. o->props
 * points into an array the caller frees. */
static int parse_args(int argc, char **argv, struct opts *o) {
    static const struct option longopts[] = {
        {"bootstrap", required_argument, NULL, 'b'}, {"topic", required_argument, NULL, 't'},
        {"ready-file", required_argument, NULL, 'r'}, {"count", required_argument, NULL, 'n'},
        {"offset", required_argument, NULL, 'o'},     {"header", required_argument, NULL, 'H'},
        {"timeout-ms", required_argument, NULL, 'T'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long long v;
    int opt;

    while ((opt = getopt_long(argc, argv, "b:t:X:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'b': o->bootstrap = optarg; break;
        case 't': o->topic = optarg; break;
        case 'r': o->ready_file = optarg; break;
        case 'H': o->header = optarg; break;
        case 'n':
            if (!parse_ll(optarg, 1, &o->count)) goto bad;
            break;
        case 'T':
            if (!parse_ll(optarg, 1, &v) || v > 86400000) goto bad;
            o->timeout_ms = (long)v;
            break;
        case 'o':
            if (!add_offset(o, optarg)) goto bad;
            break;
        case 'X':
            if (!strchr(optarg, '=')) goto bad;
            o->props[o->nprops++] = optarg;
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (!o->bootstrap || !o->topic || optind != argc) {
        usage(stderr);
        return 2;
    }
    return 0;
bad:
    for (v = 0; longopts[v].name && longopts[v].val != opt; v++) continue;
    if (longopts[v].name)
        fprintf(stderr, "kwatch: bad value '%s' for --%s\n", optarg, longopts[v].name);
    else
        fprintf(stderr, "kwatch: bad value '%s' for -%c\n", optarg, opt);
    usage(stderr);
    return 2;
}

static int conf_set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char errstr[512];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) == RD_KAFKA_CONF_OK) return 0;
    fprintf(stderr, "kwatch: %s=%s: %s\n", k, v, errstr);
    return -1;
}

/* The consumer, with the low-latency fetch settings, then -X's; NULL after
 * saying why. The caller destroys it. */
static rd_kafka_t *consumer_new(const struct opts *o) {
    static const char *const defaults[][2] = {
        {"group.id", "outboxd-kwatch"},    {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"}, {"enable.partition.eof", "false"},
        {"fetch.wait.max.ms", "1"},        {"fetch.min.bytes", "1"},
        {"log_level", "4"},
    };
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[512];
    rd_kafka_t *rk;
    size_t i;
    int p;

    if (conf_set(conf, "bootstrap.servers", o->bootstrap)) goto fail;
    for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
        if (conf_set(conf, defaults[i][0], defaults[i][1])) goto fail;
    for (p = 0; p < o->nprops; p++) {
        char *eq = strchr(o->props[p], '=');

        *eq = '\0';
        if (conf_set(conf, o->props[p], eq + 1)) goto fail;
    }
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) fprintf(stderr, "kwatch: rd_kafka_new: %s\n", errstr);
    return rk;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

static int remaining_ms(int64_t deadline) {
    int64_t r = deadline - clock_mono_ms();

    if (r <= 0) return 0;
    return r > 5000 ? 5000 : (int)r;
}

/* topic's partition count in md: n > 0, or 0 with *err set. */
static int count_in(const struct rd_kafka_metadata *md, const char *topic,
                    rd_kafka_resp_err_t *err) {
    int i;

    *err = RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
    for (i = 0; i < md->topic_cnt; i++) {
        if (strcmp(md->topics[i].topic, topic) != 0) continue;
        *err = md->topics[i].err;
        if (!*err && md->topics[i].partition_cnt == 0) *err = RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE;
        return *err ? 0 : md->topics[i].partition_cnt;
    }
    return 0;
}

/* The partition count of topic, waiting out a topic that is not there or
 * has no leaders yet until the deadline; -1 after saying why. */
static int partition_count(rd_kafka_t *rk, const char *topic, int64_t deadline) {
    const struct rd_kafka_metadata *md;
    rd_kafka_resp_err_t err;
    int n = 0;

    for (;;) {
        /* All topics: asking for this one could have it auto-created. */
        err = rd_kafka_metadata(rk, 1, NULL, &md, remaining_ms(deadline) + 1);
        if (!err) {
            n = count_in(md, topic, &err);
            rd_kafka_metadata_destroy(md);
        }
        if (n > 0) return n;
        if (remaining_ms(deadline) == 0) {
            fprintf(stderr, "kwatch: topic %s: %s (gave up)\n", topic, rd_kafka_err2str(err));
            return -1;
        }
        clock_sleep_ms(200);
    }
}

/* Where partition p starts: --offset's, else its high watermark now; -1
 * after saying why. */
static int64_t start_offset(rd_kafka_t *rk, const struct opts *o, int32_t p, int64_t deadline) {
    rd_kafka_resp_err_t err;
    int64_t lo, hi;
    int i;

    for (i = 0; i < o->noffsets; i++)
        if (o->off_part[i] == p) return o->off_value[i];
    for (;;) {
        err = rd_kafka_query_watermark_offsets(rk, o->topic, p, &lo, &hi,
                                               remaining_ms(deadline) + 1);
        if (!err) return hi;
        if (remaining_ms(deadline) == 0) {
            fprintf(stderr, "kwatch: watermarks of %s [%" PRId32 "]: %s (gave up)\n", o->topic,
                    p, rd_kafka_err2str(err));
            return -1;
        }
        clock_sleep_ms(200);
    }
}

/* Assigns every partition of the topic at its start offset; 0 or -1. */
static int assign_all(rd_kafka_t *rk, const struct opts *o) {
    int64_t deadline = clock_mono_ms() + o->timeout_ms, off;
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_resp_err_t err;
    int n = partition_count(rk, o->topic, deadline), p;

    if (n < 0) return -1;
    list = rd_kafka_topic_partition_list_new(n);
    for (p = 0; p < n; p++) {
        if ((off = start_offset(rk, o, p, deadline)) < 0) {
            rd_kafka_topic_partition_list_destroy(list);
            return -1;
        }
        rd_kafka_topic_partition_list_add(list, o->topic, p)->offset = off;
        fprintf(stderr, "kwatch: %s [%d] from offset %" PRId64 "\n", o->topic, p, off);
    }
    err = rd_kafka_assign(rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    if (err) fprintf(stderr, "kwatch: assign: %s\n", rd_kafka_err2str(err));
    return err ? -1 : 0;
}

/* Writes "ready" to path through a temp file, so a reader that sees the
 * file sees it whole; 0 or -1. */
static int write_ready(const char *path) {
    char tmp[4096];
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) return -1;
    f = fopen(tmp, "w");
    if (!f) goto fail;
    if (fputs("ready\n", f) == EOF || fclose(f) != 0 || rename(tmp, path) != 0) goto fail;
    return 0;
fail:
    fprintf(stderr, "kwatch: writing %s: %s\n", path, strerror(errno));
    return -1;
}

/* An id the script's COPY (text format, space-delimited) reads back as it
 * is: printable ASCII, no space, no backslash. */
static bool id_printable(const unsigned char *s, size_t len) {
    size_t i;

    if (len == 0) return false;
    for (i = 0; i < len; i++)
        if (s[i] <= ' ' || s[i] >= 0x7f || s[i] == '\\') return false;
    return true;
}

/* Prints m's line; 0, or -1 after saying why. */
static int print_event(const rd_kafka_message_t *m, const char *header, int64_t at_us) {
    rd_kafka_headers_t *hdrs = NULL;
    const void *val = NULL;
    size_t len = 0;

    if (m->err) {
        fprintf(stderr, "kwatch: consumer error on %s [%" PRId32 "]: %s\n",
                m->rkt ? rd_kafka_topic_name(m->rkt) : "-", m->partition,
                rd_kafka_message_errstr(m));
        return -1;
    }
    if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(hdrs, header, &val, &len) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        !val || !id_printable(val, len)) {
        fprintf(stderr,
                "kwatch: %s [%" PRId32 "] offset %" PRId64 ": no printable '%s' header "
                "(not an outboxd event?)\n",
                rd_kafka_topic_name(m->rkt), m->partition, m->offset, header);
        return -1;
    }
    printf("%.*s %" PRId64 "\n", (int)len, (const char *)val, at_us);
    return 0;
}

/* Polls until a signal, --count messages or an error; 0 or -1. */
static int watch(rd_kafka_t *rk, const struct opts *o, long long *seen) {
    rd_kafka_message_t *m;
    int rc = 0;

    while (!g_stop && rc == 0 && (o->count == 0 || *seen < o->count)) {
        m = rd_kafka_consumer_poll(rk, 100);
        if (!m) {
            fflush(stdout); /* idle: let the script count the lines so far */
            continue;
        }
        rc = print_event(m, o->header, clock_unix_us());
        if (rc == 0) (*seen)++;
        rd_kafka_message_destroy(m);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("kwatch: stdout");
        rc = -1;
    }
    return rc;
}

int main(int argc, char **argv) {
    struct opts o = {.header = "event_id", .timeout_ms = 30000};
    struct sigaction sa;
    long long seen = 0;
    rd_kafka_t *rk;
    int rc;

    o.props = calloc((size_t)argc, sizeof(*o.props));
    if (!o.props) {
        fprintf(stderr, "kwatch: out of memory\n");
        return 1;
    }
    if ((rc = parse_args(argc, argv, &o)) != 0) {
        free(o.props);
        return rc;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    rk = consumer_new(&o);
    free(o.props);
    if (!rk) return 1;
    /* Client-level errors (all brokers down, ...) come out of the consumer
     * poll too, and fail the watch like a fetch error. */
    rd_kafka_poll_set_consumer(rk);
    rc = assign_all(rk, &o) == 0 && (!o.ready_file || write_ready(o.ready_file) == 0) &&
                 watch(rk, &o, &seen) == 0
             ? 0
             : 1;
    fprintf(stderr, "kwatch: %lld messages%s\n", seen, rc ? " (stopped on an error)" : "");
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}
