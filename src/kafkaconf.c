/*
 * kafkaconf.c - librdkafka configuration shared by the producer, check and
 * verify (see kafkaconf.h).
 */
#include "kafkaconf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

int kafka_conf_set(rd_kafka_conf_t *conf, const char *k, const char *v, char *err,
                   size_t errlen)
{
    char reason[512];
    if (rd_kafka_conf_set(conf, k, v, reason, sizeof(reason)) != RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "[kafka] %s: %s", k, reason);
        return -1;
    }
    return 0;
}

void kafka_log_error(int err, const char *reason)
{
    /* Transport errors while a broker is down are routine: librdkafka
     * reconnects and retries by itself. */
    if (err == RD_KAFKA_RESP_ERR__FATAL)
        log_error("kafka: fatal: %s", reason);
    else
        log_warn("kafka: %s: %s", rd_kafka_err2name(err), reason);
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    (void)opaque;
    kafka_log_error(err, reason);
}

bool kafka_err_is_refusal(int err, const char *reason)
{
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION) return true;
    return err == RD_KAFKA_RESP_ERR__SSL && reason &&
           strstr(reason, "certificate verify failed") != NULL;
}

const char *kafka_refusal_fix(int err)
{
    return err == RD_KAFKA_RESP_ERR__AUTHENTICATION
               ? "correct [kafka] sasl.username, sasl.password and sasl.mechanism (the "
                 "broker's SCRAM credentials for this user)"
               : "set [kafka] ssl.ca.location to the CA that signed the broker's "
                 "certificate, and name the broker in bootstrap.servers as its "
                 "certificate does";
}

void kafka_refusal_note(struct kafka_refusal *r, int err, const char *reason)
{
    if (r->err || !kafka_err_is_refusal(err, reason)) return;
    r->err = err;
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
}

/* Called from librdkafka's threads: log_msg() writes one line per call. */
static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    /* syslog levels: 0-3 error, 4 warning, 5-7 (notice, info, debug) debug */
    enum log_level l = level <= 3 ? LOG_ERROR : level == 4 ? LOG_WARN : LOG_DEBUG;
    log_msg(l, "kafka: %s: %s", fac, buf);
}

void kafka_conf_route_logs(rd_kafka_conf_t *conf)
{
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_log_cb(conf, on_log);
}

/* outboxd's defaults beyond config.c's; the [kafka] section may override
 * them. The queue bound keeps memory bounded however large the backlog;
 * no delivery timeout, because a broker that is down for minutes must
 * delay events, not fail them (nothing is confirmed while they wait). */
static const char *const producer_defaults[][3] = {
    /* In messages: librdkafka counts only key and value bytes, while a
     * queued event costs about three times that (the message, its six
     * headers). 5,000 events is 25-50 ms of a drain, plenty to keep a
     * broker busy (a drain was no faster with 10,000), and keeps peak RSS
     * near 22 MB even for a 500,000-event transaction: with 10,000 it
     * reached 28.6 MB once the daemon allocated through jemalloc, with
     * 64 MB of queue it passed 30 MB. */
    {"queue.buffering.max.messages", "5000", "events queued for the broker at most (bounds memory)"},
    /* In bytes, for large payloads. */
    {"queue.buffering.max.kbytes", "16384", "kilobytes queued for the broker at most (bounds memory)"},
    {"message.timeout.ms", "0",
     "0: a broker outage delays events, never fails them (polling mode: half the lease)"},
    /* librdkafka waits linger.ms (default 5) to fill a batch; 2 ms halves
     * the steady-state commit-to-ACK latency (benchmark p50 6 -> 3 ms, p99
     * 18 -> 10 ms at 5,000 events/s) for no measurable CPU in a drain, where
     * batches fill by themselves. */
    {"linger.ms", "2", "how long librdkafka waits to fill a batch (latency)"},
    /* Statistics say which brokers are connected (/readyz, metrics). */
    {"statistics.interval.ms", "1000", "statistics period: connected brokers for /readyz and metrics"},
};

bool kafka_conf_producer_default(size_t i, const char **key, const char **value,
                                 const char **meaning)
{
    if (i >= sizeof(producer_defaults) / sizeof(producer_defaults[0])) return false;
    *key = producer_defaults[i][0];
    *value = producer_defaults[i][1];
    *meaning = producer_defaults[i][2];
    return true;
}

/* Sets k=v on conf; a refusal goes to refused (when set) and, the first,
 * to err. Returns 0 or -1. */
static int set_noting(rd_kafka_conf_t *conf, const char *k, const char *v,
                      kafka_conf_refused_fn refused, void *ctx, bool *failed, char *err,
                      size_t errlen)
{
    char why[1024];
    if (kafka_conf_set(conf, k, v, why, sizeof(why)) == 0) return 0;
    if (!*failed) snprintf(err, errlen, "%s", why);
    *failed = true;
    if (refused) refused(ctx, why);
    return -1;
}

rd_kafka_conf_t *kafka_conf_producer(const struct config *c, bool without_brokers,
                                     kafka_conf_refused_fn refused, void *ctx, char *err,
                                     size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bool failed = false;
    for (size_t i = 0; i < sizeof(producer_defaults) / sizeof(producer_defaults[0]); i++)
        if (!config_kafka_get(c, producer_defaults[i][0]) &&
            set_noting(conf, producer_defaults[i][0], producer_defaults[i][1], refused, ctx,
                       &failed, err, errlen) != 0 &&
            !refused)
            goto fail;
    for (size_t i = 0; i < c->nkafka; i++) {
        if (without_brokers && !strcmp(c->kafka[i].key, "bootstrap.servers")) continue;
        if (set_noting(conf, c->kafka[i].key, c->kafka[i].value, refused, ctx, &failed, err,
                       errlen) != 0 &&
            !refused)
            goto fail;
    }
    if (!failed) return conf;
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

/* librdkafka 2.0.2's own default (CONFIGURATION.md). */
#define RDKAFKA_DEFAULT_MESSAGE_MAX_BYTES 1000000LL
#define RDKAFKA_DEFAULT_QUEUE_MAX_KBYTES 1048576LL

/* The value of a [kafka] property as the producer runs it: [kafka], else
 * outboxd's default, else dflt. -1 when it is not a whole number
 * (librdkafka itself then refuses it, with its own message). */
static long long producer_property(const struct config *c, const char *key, long long dflt)
{
    const char *v = config_kafka_get(c, key);
    for (size_t i = 0; !v && i < sizeof(producer_defaults) / sizeof(producer_defaults[0]); i++)
        if (strcmp(producer_defaults[i][0], key) == 0) v = producer_defaults[i][1];
    if (!v) return dflt;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    return errno || end == v || *end || n < 0 ? -1 : n;
}

long long kafka_queue_max_bytes(const struct config *c)
{
    long long kb =
        producer_property(c, "queue.buffering.max.kbytes", RDKAFKA_DEFAULT_QUEUE_MAX_KBYTES);
    return kb < 0 ? -1 : kb * 1024;
}

bool kafka_value_fits_queue(size_t value_len, long long queue_max_bytes)
{
    return queue_max_bytes < 0 ||
           (unsigned long long)value_len <= (unsigned long long)queue_max_bytes;
}

int kafka_conf_check_queue_fit(const struct config *c, char *err, size_t errlen)
{
    long long kb =
        producer_property(c, "queue.buffering.max.kbytes", RDKAFKA_DEFAULT_QUEUE_MAX_KBYTES);
    long long mmb =
        producer_property(c, "message.max.bytes", RDKAFKA_DEFAULT_MESSAGE_MAX_BYTES);
    if (kb < 0 || mmb < 0 || mmb <= kb * 1024) return 0;
    snprintf(err, errlen,
             "[kafka] message.max.bytes = %lld is larger than queue.buffering.max.kbytes = "
             "%lld (%lld bytes): an event between the two would pass the size check and "
             "then never fit the producer's queue; raise queue.buffering.max.kbytes to at "
             "least %lld or lower message.max.bytes",
             mmb, kb, kb * 1024, (mmb + 1023) / 1024);
    return -1;
}

int kafka_conf_check_in_flight(const struct config *c, char *err, size_t errlen)
{
    long long n = producer_property(c, "max.in.flight.requests.per.connection", 1);
    if (n <= 1) return 0; /* 1, or not a number: librdkafka's own message */
    snprintf(err, errlen,
             "[kafka] max.in.flight.requests.per.connection = %lld: outboxd needs 1. With more "
             "than one produce request in flight, librdkafka 2.0.2 reports events as "
             "delivered that the broker refused (a request refused with NOT_ENOUGH_REPLICAS "
             "while the one behind it is stored, as on a restart during an ISR shrink: "
             "seen on a real 3-broker Kafka, README \"Faults it rides out\"); remove the "
             "key or set it to 1",
             n);
    return -1;
}
