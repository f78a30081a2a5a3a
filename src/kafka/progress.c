/*
 * progress.c - creating and reading the progress topic of exactly_once
 * (see progress.h). Both run at start-up, before the stream, and wait on
 * the broker: librdkafka's admin and consumer calls, each bounded.
 */
#include "progress.h"

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "kafkaconf.h"

#define POLL_STEP_MS 200

/* A consumer of [kafka]'s brokers that never commits offsets, with the
 * isolation level given. NULL with a reason in err. Free with
 * rd_kafka_destroy().
 * fetch.wait.max.ms is short because the reader's end is a fetch that
 * finds nothing new (the partition's EOF): with the default (500 ms) the
 * broker holds that last fetch half a second, and a start in exactly_once
 * waited for it. */
static rd_kafka_t *open_reader(const struct config *c, const char *isolation, char *err,
                               size_t errlen)
{
    const char *const own[][2] = {
        {"group.id", "outboxd-progress"},      {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"}, {"enable.partition.eof", "true"},
        {"isolation.level", isolation},        {"fetch.wait.max.ms", "10"},
    };
    char reason[512];
    rd_kafka_conf_t *conf =
        kafka_conf_consumer(c, own, sizeof(own) / sizeof(own[0]), err, errlen);
    if (!conf) return NULL;
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof(reason));
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "kafka consumer: %s", reason);
        return NULL;
    }
    kafka_conf_started(rk);
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

/* The CreateTopics answer for our one topic: 0 (created, or it existed). */
static int create_result(rd_kafka_event_t *ev, const char *topic, char *err, size_t errlen)
{
    if (rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "kafka: create topic %s: %s", topic,
                 rd_kafka_event_error_string(ev));
        return -1;
    }
    size_t n;
    const rd_kafka_topic_result_t **res =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
    for (size_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t e = rd_kafka_topic_result_error(res[i]);
        if (e && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            snprintf(err, errlen, "kafka: create topic %s: %s", topic,
                     rd_kafka_topic_result_error_string(res[i]));
            return -1;
        }
    }
    return 0;
}

/* CreateTopics of topic (1 partition, RF the broker's default,
 * compacted); validate_only asks the broker whether it would. 0, or -1
 * with the broker's reason in err. */
static int create_topic(const struct config *c, const char *topic, int timeout_ms,
                        bool validate_only, char *err, size_t errlen)
{
    char why[512];
    rd_kafka_t *rk = open_reader(c, "read_uncommitted", err, errlen);
    if (!rk) return -1;
    int rc = -1;
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, 1, -1, why, sizeof(why));
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    if (!nt) {
        snprintf(err, errlen, "kafka: create topic %s: %s", topic, why);
        goto out;
    }
    rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
    rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, why, sizeof(why));
    if (validate_only) rd_kafka_AdminOptions_set_validate_only(o, 1, why, sizeof(why));
    rd_kafka_CreateTopics(rk, &nt, 1, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    if (!ev) {
        snprintf(err, errlen, "kafka: create topic %s: no answer within %d ms", topic,
                 timeout_ms);
        goto out;
    }
    rc = create_result(ev, topic, err, errlen);
    rd_kafka_event_destroy(ev);
out:
    rd_kafka_AdminOptions_destroy(o);
    if (nt) rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

/* Whether topic exists, from a metadata request for it alone (DESCRIBE on
 * the topic, a right the producer needs anyway; a consumer's handle never
 * has the broker create it). 1 yes, 0 no, -1 with the reason in err. */
static int topic_exists(const struct config *c, const char *topic, int timeout_ms, char *err,
                        size_t errlen)
{
    rd_kafka_t *rk = open_reader(c, "read_uncommitted", err, errlen);
    if (!rk) return -1;
    int rc = -1;
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t e = rkt ? rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms)
                                : rd_kafka_last_error();
    if (e)
        snprintf(err, errlen, "kafka: metadata of topic %s: %s", topic, rd_kafka_err2str(e));
    else if (md->topic_cnt != 1)
        snprintf(err, errlen, "kafka: metadata of topic %s: %d topics in the answer", topic,
                 md->topic_cnt);
    else if (md->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
        rc = 0;
    else if (md->topics[0].err)
        snprintf(err, errlen, "kafka: metadata of topic %s: %s", topic,
                 rd_kafka_err2str(md->topics[0].err));
    else
        rc = 1;
    if (md) rd_kafka_metadata_destroy(md);
    if (rkt) rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return rc;
}

int progress_topic_ensure(const struct config *c, const char *topic, int timeout_ms,
                          char *err, size_t errlen)
{
    /* Asked first: Kafka checks CREATE before it looks whether a topic
     * exists, so a principal without it (a progress topic its operator
     * made) would have every start refused by CreateTopics. */
    int exists = topic_exists(c, topic, timeout_ms, err, errlen);
    if (exists != 0) return exists > 0 ? 0 : -1;
    return create_topic(c, topic, timeout_ms, false, err, errlen);
}

/* The DescribeConfigs answer for topic: *exists, and its cleanup.policy. */
static int describe_result(rd_kafka_event_t *ev, const char *topic,
                           struct progress_topic_info *out, char *err, size_t errlen)
{
    if (rd_kafka_event_error(ev)) {
        snprintf(err, errlen, "kafka: describe topic %s: %s", topic,
                 rd_kafka_event_error_string(ev));
        return -1;
    }
    size_t n, nconf;
    const rd_kafka_ConfigResource_t **res = rd_kafka_DescribeConfigs_result_resources(
        rd_kafka_event_DescribeConfigs_result(ev), &n);
    if (n != 1) {
        snprintf(err, errlen, "kafka: describe topic %s: %zu resources in the answer", topic,
                 n);
        return -1;
    }
    rd_kafka_resp_err_t e = rd_kafka_ConfigResource_error(res[0]);
    if (e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) return 0;
    if (e) {
        snprintf(err, errlen, "kafka: describe topic %s: %s", topic,
                 rd_kafka_ConfigResource_error_string(res[0]));
        return -1;
    }
    out->exists = true;
    const rd_kafka_ConfigEntry_t **conf = rd_kafka_ConfigResource_configs(res[0], &nconf);
    for (size_t i = 0; i < nconf; i++) {
        const char *v = rd_kafka_ConfigEntry_value(conf[i]);
        if (strcmp(rd_kafka_ConfigEntry_name(conf[i]), "cleanup.policy") != 0 || !v) continue;
        snprintf(out->policy, sizeof(out->policy), "%s", v);
        out->compacted = strstr(v, "compact") != NULL;
    }
    return 0;
}

int progress_topic_describe(const struct config *c, const char *topic, int timeout_ms,
                            struct progress_topic_info *out, char *err, size_t errlen)
{
    char why[512];
    memset(out, 0, sizeof(*out));
    rd_kafka_t *rk = open_reader(c, "read_uncommitted", err, errlen);
    if (!rk) return -1;
    int rc = -1;
    rd_kafka_ConfigResource_t *cr = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_AdminOptions_set_request_timeout(o, timeout_ms, why, sizeof(why));
    rd_kafka_DescribeConfigs(rk, &cr, 1, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    if (!ev) {
        snprintf(err, errlen, "kafka: describe topic %s: no answer within %d ms", topic,
                 timeout_ms);
    } else {
        rc = describe_result(ev, topic, out, err, errlen);
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_ConfigResource_destroy(cr);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    if (rc != 0 || out->exists) return rc;
    out->can_create = create_topic(c, topic, timeout_ms, true, out->create_err,
                                   sizeof(out->create_err)) == 0;
    return 0;
}

/* The first offset (*lo) and the log end offset (*end: every record
 * written, committed or not) of partition 0, retried while the topic's
 * metadata is not there yet. */
static int log_bounds(const struct config *c, const char *topic, int64_t deadline,
                      int64_t *lo, int64_t *end, char *err, size_t errlen)
{
    rd_kafka_t *rk = open_reader(c, "read_uncommitted", err, errlen);
    if (!rk) return -1;
    rd_kafka_resp_err_t e;
    for (;;) {
        int64_t left = deadline - clock_mono_ms();
        e = rd_kafka_query_watermark_offsets(rk, topic, 0, lo, end,
                                             left > 5000 ? 5000 : left > 0 ? (int)left : 1);
        if (!e || clock_mono_ms() >= deadline) break;
        clock_sleep_ms(POLL_STEP_MS);
    }
    rd_kafka_destroy(rk);
    if (e) {
        snprintf(err, errlen, "kafka: the end of %s [0]: %s", topic, rd_kafka_err2str(e));
        return -1;
    }
    return 0;
}

/* One message of the read_committed reader: a record of key (kept in out,
 * *found), the end of the partition (*eof_at), or an error. */
static int take_message(const rd_kafka_message_t *m, const char *key, struct offset_state *out,
                        int *found, int64_t *eof_at, char *err, size_t errlen)
{
    char why[256];
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        *eof_at = m->offset;
        return 0;
    }
    if (m->err) {
        snprintf(err, errlen, "kafka: reading the progress topic: %s",
                 rd_kafka_message_errstr(m));
        return -1;
    }
    if (m->key_len != strlen(key) || memcmp(m->key, key, m->key_len) != 0) return 0;
    if (!m->payload) { /* a tombstone: the position was deleted */
        *found = 0;
        return 0;
    }
    if (offset_parse(m->payload, m->len, out, why, sizeof(why)) != 0) {
        snprintf(err, errlen,
                 "the progress topic's record at offset %lld (key %s) is not a position: %s",
                 (long long)m->offset, key, why);
        return -1;
    }
    *found = 1;
    return 0;
}

int progress_read(const struct config *c, const char *topic, const char *key,
                  int timeout_ms, struct offset_state *out, char *err, size_t errlen)
{
    int64_t deadline = clock_mono_ms() + timeout_ms;
    int64_t lo, end;
    if (log_bounds(c, topic, deadline, &lo, &end, err, errlen) != 0) return -1;
    if (end <= lo) return 0;
    rd_kafka_t *rk = open_reader(c, "read_committed", err, errlen);
    if (!rk) return -1;
    /* From lo itself, not OFFSET_BEGINNING: a logical offset needs a
     * ListOffsets of its own, which a new client sends only at its offset
     * query timer (500 ms) when it has no leader for the partition yet. */
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, topic, 0)->offset = lo;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, tp);
    rd_kafka_topic_partition_list_destroy(tp);
    int found = 0, rc = 0;
    int64_t eof_at = -1;
    if (e) {
        snprintf(err, errlen, "kafka: assign %s [0]: %s", topic, rd_kafka_err2str(e));
        rc = -1;
    }
    while (rc == 0 && eof_at < end) {
        if (clock_mono_ms() >= deadline) {
            snprintf(err, errlen,
                     "kafka: %s [0] has records up to offset %lld, but a read_committed "
                     "reader got only to %lld within %d ms: a transaction of another "
                     "producer is open on it (it ends within its transaction.timeout.ms)",
                     topic, (long long)end, (long long)eof_at, timeout_ms);
            rc = -1;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, POLL_STEP_MS);
        if (!m) continue;
        rc = take_message(m, key, out, &found, &eof_at, err, errlen);
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc < 0 ? -1 : found;
}
