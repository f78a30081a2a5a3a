/*
 * producer.c - librdkafka producer wrapper.
 *
 * Delivery reports go to librdkafka's main queue; outboxd serves them on
 * its own thread in producer_poll(), so the ACK tracker is never touched
 * from librdkafka's threads. The main queue signals a pipe when it becomes
 * non-empty, which lets the event loop sleep in select() on both the
 * replication socket and the broker side.
 */
#define _GNU_SOURCE /* memmem */
#include "producer.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "kafkaconf.h"
#include "kstats.h"
#include "log.h"

/* A topic handle per topic name: producing by handle saves librdkafka a
 * locked lookup per message (its own topic list is searched linearly).
 * Open addressing, linear probing, at most half full.
 *
 * librdkafka keeps every topic it has ever been given, with a partition
 * object per partition, until the rd_kafka_t is destroyed:
 * rd_kafka_topic_destroy() only drops the application's reference
 * (rdkafka_topic.c: a topic's partitions are removed "only during
 * rd_kafka_t termination"), and each topic adds to every statistics JSON
 * and to the one-second topic scan. Hence the bound: once one rd_kafka_t
 * has been given max_topics distinct topics, the next new topic waits
 * until every message is ACKed (producer_send() reports QUEUE_FULL, so the
 * caller keeps serving reports, status updates and signals), then the
 * producer is replaced by a fresh one (see renew()). The table holds
 * exactly the current rd_kafka_t's topics, so it is bounded too. */
struct topic_slot {
    char *name;            /* owned; NULL = empty slot */
    rd_kafka_topic_t *rkt; /* owned (a reference) */
};

struct producer {
    rd_kafka_t *rk;
    const struct config *cfg; /* borrowed: to create the next rd_kafka_t */
    struct topic_slot *topics;
    size_t ntopics, topics_cap;
    size_t max_topics; /* PRODUCER_MAX_TOPICS */
    uint64_t renewals;
    long long queue_max_bytes; /* queue.buffering.max.kbytes * 1024 */
    struct topic_slot *last_topic; /* found last: most events go where the one before went */
    rd_kafka_queue_t *mainq;
    int pipefd[2];
    producer_delivery_fn on_delivery;
    void *ctx;
    int brokers_up; /* -1 until the first statistics */
    struct kafka_refusal refusal; /* from on_error */
    int64_t dr_clock_us; /* delivery_report.served_unix_us */
    int dr_since_clock;  /* reports served with it; >= EVERY: read again */
    bool dr_clock_exact; /* read it for every report (producer_flush waits) */
    struct kstats kstats; /* per broker over the run, across renew() */
    /* exactly_once (producer_txn_init()): */
    char *txn_id;  /* owned; NULL: not transactional */
    bool txn_open; /* begin_transaction() done, not committed or aborted since */
    bool txn_failed; /* a send found the transaction failed: abort it */
};

/* Where the top-level "brokers" object of a statistics JSON starts, or
 * NULL. librdkafka writes it before "topics" (rdkafka.c,
 * rd_kafka_stats_emit_all), and the topics are the bulk of the text: one
 * object per partition of every topic the client knows, ~1 kB each.
 * Parsing the whole document made every statistics interval build a tree
 * of some 75 kB per topic (188 MB peak RSS at 2,000 topics, 35 MB with
 * statistics off); only the brokers are needed. */
static const char *stats_brokers(const char *json, size_t len)
{
    static const char key[] = "\"brokers\":";
    const char *end = json + len, *at = json;
    while ((at = memmem(at, (size_t)(end - at), key, sizeof(key) - 1)) != NULL) {
        const char *b = at;
        while (b > json && (b[-1] == ' ' || b[-1] == '\n')) b--;
        if (b > json && b[-1] == ',') return at + sizeof(key) - 1; /* a key, not in a string */
        at += sizeof(key) - 1;
    }
    return NULL;
}

/* librdkafka's statistics (JSON), served by rd_kafka_poll() on our thread:
 * counts the real brokers (configured or learned, not internal) in state
 * UP, and adds the window to the run's per-broker figures (kstats.h). */
static int on_stats(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)rk;
    struct producer *p = opaque;
    const char *at = stats_brokers(json, len);
    json_t *brokers =
        at ? json_loadb(at, len - (size_t)(at - json), JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    if (json_is_object(brokers)) {
        const char *name;
        json_t *b;
        int up = 0, n[2] = {0, 0}, down[2] = {0, 0}; /* [0] learned, [1] configured */
        json_object_foreach(brokers, name, b)
        {
            const char *source = json_string_value(json_object_get(b, "source"));
            const char *state = json_string_value(json_object_get(b, "state"));
            if (!source || !state) continue;
            int i = strcmp(source, "learned") == 0      ? 0
                    : strcmp(source, "configured") == 0 ? 1
                                                        : -1;
            if (i < 0) continue;
            n[i]++;
            if (strcmp(state, "UP") == 0)
                up++;
            else if (strcmp(state, "INIT") != 0) /* INIT: not needed, never connected */
                down[i]++;
        }
        p->brokers_up = up;
        /* A broker outage's end, or its interval's line (kafkaconf.h), in
         * brokers of the cluster: the bootstrap address counts only until
         * the cluster's brokers are known. */
        int k = n[0] > 0 ? 0 : 1;
        kafka_brokers_seen(up, down[k], n[k]);
        kstats_window(&p->kstats, brokers); /* out of memory: a window less */
    }
    json_decref(brokers);
    return 0; /* librdkafka frees json */
}

/* Every header of a failed message into dr, in order (a dead-letter
 * record keeps them all). */
static void copy_headers(rd_kafka_headers_t *hdrs, struct outbox_header *out,
                         struct delivery_report *dr)
{
    const char *name;
    const void *v;
    size_t len;
    for (size_t i = 0; dr->nheaders < OUTBOX_MAX_HEADERS &&
                       !rd_kafka_header_get_all(hdrs, i, &name, &v, &len);
         i++)
        out[dr->nheaders++] = (struct outbox_header){name, {v, len}};
    dr->headers = out;
}

static void on_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    struct producer *p = opaque;
    if ((uint64_t)(uintptr_t)m->_private == PRODUCER_TAG_PROGRESS)
        return; /* the commit that produced it says how it went */
    if (p->dr_clock_exact || p->dr_since_clock >= PRODUCER_DR_CLOCK_EVERY) {
        p->dr_clock_us = clock_unix_us();
        p->dr_since_clock = 0;
    }
    p->dr_since_clock++;
    struct delivery_report dr = {
        .served_unix_us = p->dr_clock_us,
        .tag = (uint64_t)(uintptr_t)m->_private,
        .err = (int)m->err,
        .reason = m->err ? rd_kafka_err2str(m->err) : NULL,
        .topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "?",
    };
    struct outbox_header hbuf[OUTBOX_MAX_HEADERS]; /* filled on failure only */
    if (m->err) {
        /* The payload and key are still the message's (F_COPY): a failed
         * event can be dead-lettered from them. */
        dr.key = (struct slice){m->key, m->key_len};
        dr.key_null = m->key == NULL;
        dr.value = (struct slice){m->payload, m->len};
        dr.value_null = m->payload == NULL;
        /* Only failures need to say which event they were. */
        rd_kafka_headers_t *hdrs = NULL;
        const void *v;
        if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (!rd_kafka_header_get_last(hdrs, "event_id", &v, &dr.event_id.len))
                dr.event_id.data = v;
            if (!rd_kafka_header_get_last(hdrs, "commit_lsn", &v, &dr.commit_lsn.len))
                dr.commit_lsn.data = v;
            copy_headers(hdrs, hbuf, &dr);
        }
    }
    p->on_delivery(p->ctx, &dr);
}

/* Served by rd_kafka_poll() on the caller's thread. */
static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    struct producer *p = opaque;
    kafka_log_error(err, reason);
    kafka_refusal_note(&p->refusal, err, reason);
}

/* The transactional settings of exactly_once: the transactional.id, and
 * unless [kafka] sets them, a transaction timeout under the walsender's
 * default wal_sender_timeout (60 s: a commit that waits for a broker must
 * end before the server drops the stream) and messages that time out with
 * their transaction (message.timeout.ms = 0 would outlive it). */
static int set_transactional(struct producer *p, rd_kafka_conf_t *conf, char *err,
                             size_t errlen)
{
    const char *tt = config_kafka_get(p->cfg, "transaction.timeout.ms");
    if (kafka_conf_set(conf, "transactional.id", p->txn_id, err, errlen) != 0) return -1;
    if (!tt && kafka_conf_set(conf, "transaction.timeout.ms", PRODUCER_TXN_TIMEOUT_MS, err,
                              errlen) != 0)
        return -1;
    if (!config_kafka_get(p->cfg, "message.timeout.ms") &&
        kafka_conf_set(conf, "message.timeout.ms", tt ? tt : PRODUCER_TXN_TIMEOUT_MS, err,
                       errlen) != 0)
        return -1;
    return 0;
}

/* Creates p->rk from the configuration, with the wake-up pipe on its main
 * queue. Returns 0, or -1 with a reason in err. */
static int open_rk(struct producer *p, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = kafka_conf_producer(p->cfg, false, NULL, NULL, err, errlen);
    if (!conf) return -1;
    if (p->txn_id && set_transactional(p, conf, err, errlen) != 0) goto fail_conf;
    rd_kafka_conf_set_opaque(conf, p);
    rd_kafka_conf_set_dr_msg_cb(conf, on_dr);
    rd_kafka_conf_set_stats_cb(conf, on_stats);
    kafka_conf_route_logs(conf);
    rd_kafka_conf_set_error_cb(conf, on_error);

    char reason[512];
    p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof(reason));
    if (!p->rk) {
        snprintf(err, errlen, "kafka: %s", reason);
        goto fail_conf;
    }
    /* conf is owned by p->rk from here on. */
    kafka_conf_started(p->rk);
    p->mainq = rd_kafka_queue_get_main(p->rk);
    rd_kafka_queue_io_event_enable(p->mainq, p->pipefd[1], "w", 1);
    return 0;

fail_conf:
    rd_kafka_conf_destroy(conf);
    return -1;
}

/* Drops every topic handle (the table keeps its size). */
static void topics_clear(struct producer *p)
{
    for (size_t i = 0; i < p->topics_cap; i++) {
        if (!p->topics[i].name) continue;
        rd_kafka_topic_destroy(p->topics[i].rkt);
        free(p->topics[i].name);
        p->topics[i].name = NULL;
        p->topics[i].rkt = NULL;
    }
    p->ntopics = 0;
    p->last_topic = NULL;
}

/* Destroys p->rk and its handles (nothing waits: callers make sure no
 * message is outstanding, or accept dropping it). */
static void close_rk(struct producer *p)
{
    topics_clear(p);
    if (p->mainq) {
        rd_kafka_queue_io_event_enable(p->mainq, -1, NULL, 0);
        rd_kafka_queue_destroy(p->mainq);
        p->mainq = NULL;
    }
    if (p->rk) rd_kafka_destroy(p->rk);
    p->rk = NULL;
}

struct producer *producer_new(const struct config *c, producer_delivery_fn fn, void *ctx,
                              char *err, size_t errlen)
{
    struct producer *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    p->pipefd[0] = p->pipefd[1] = -1;
    p->cfg = c;
    p->on_delivery = fn;
    p->ctx = ctx;
    p->brokers_up = -1;
    p->dr_since_clock = PRODUCER_DR_CLOCK_EVERY;
    p->max_topics = PRODUCER_MAX_TOPICS;
    p->queue_max_bytes = kafka_queue_max_bytes(c);

    if (pipe(p->pipefd) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto fail;
    }
    for (int i = 0; i < 2; i++)
        fcntl(p->pipefd[i], F_SETFL, fcntl(p->pipefd[i], F_GETFL) | O_NONBLOCK);
    /* exactly_once: the client is made by producer_txn_init(), once the
     * transactional.id is known. Check the configuration now, though. */
    if (c->delivery_mode == DELIVERY_EXACTLY_ONCE) {
        rd_kafka_conf_t *conf = kafka_conf_producer(c, false, NULL, NULL, err, errlen);
        if (!conf) goto fail;
        rd_kafka_conf_destroy(conf);
        return p;
    }
    if (open_rk(p, err, errlen) != 0) goto fail;
    return p;

fail:
    producer_free(p);
    return NULL;
}

void producer_free(struct producer *p)
{
    if (!p) return;
    close_rk(p);
    kstats_free(&p->kstats);
    free(p->topics);
    free(p->txn_id);
    for (int i = 0; i < 2; i++)
        if (p->pipefd[i] >= 0) close(p->pipefd[i]);
    free(p);
}

/* Replaces the rd_kafka_t by a fresh one, which forgets every topic (see
 * struct topic_slot). Only called with nothing outstanding
 * (rd_kafka_outq_len() == 0: every message ACKed or failed and its report
 * served), so no delivery is lost or reordered: the idempotent producer's
 * new id starts from an empty queue. The broker count is kept until the
 * new client's first statistics. Returns 0, or -1 with a reason in err. */
static int renew(struct producer *p, char *err, size_t errlen)
{
    int64_t t0 = clock_unix_us();
    close_rk(p);
    if (open_rk(p, err, errlen) != 0) return -1;
    kstats_new_client(&p->kstats);
    p->renewals++;
    log_info("kafka: producer replaced after %zu distinct topics (bound %zu), in %lld ms "
             "(replacement %llu)",
             p->max_topics, p->max_topics, (long long)((clock_unix_us() - t0) / 1000),
             (unsigned long long)p->renewals);
    return 0;
}

/* ---- exactly_once: the transactional producer --------------------------
 * librdkafka's transactional API (rdkafka.h, "Transactional producer
 * API"): init_transactions once per client (it fences an older client with
 * the same transactional.id and completes its open transaction), then
 * begin, produce, commit or abort. Its calls wait; outboxd calls commit
 * only once every message of the transaction is ACKed (relaytxn.c), so a
 * commit waits for the progress record and EndTxn alone. */

/* What a librdkafka transactional error means to the caller; err gets its
 * text. Takes ownership of (destroys) e. */
static int txn_result(rd_kafka_error_t *e, const char *what, char *err, size_t errlen)
{
    if (!e) return PRODUCER_TXN_OK;
    int rc = rd_kafka_error_is_fatal(e)            ? PRODUCER_TXN_FATAL
             : rd_kafka_error_txn_requires_abort(e) ? PRODUCER_TXN_ABORT
             : rd_kafka_error_is_retriable(e)       ? PRODUCER_TXN_ABORT
                                                    : PRODUCER_TXN_FATAL;
    snprintf(err, errlen, "kafka: %s: %s (%s)", what, rd_kafka_error_string(e),
             rd_kafka_error_name(e));
    rd_kafka_error_destroy(e);
    return rc;
}

static int begin_txn(struct producer *p, int *kafka_err, char *err, size_t errlen)
{
    rd_kafka_error_t *e = rd_kafka_begin_transaction(p->rk);
    if (e) *kafka_err = (int)rd_kafka_error_code(e);
    if (txn_result(e, "begin_transaction", err, errlen) != PRODUCER_TXN_OK) return -1;
    p->txn_open = true;
    return 0;
}

int producer_txn_init(struct producer *p, const char *txn_id, int timeout_ms, char *err,
                      size_t errlen)
{
    if (p->rk) return PRODUCER_TXN_OK; /* done before: the client keeps it */
    free(p->txn_id);
    if (!(p->txn_id = strdup(txn_id))) {
        snprintf(err, errlen, "out of memory");
        return PRODUCER_TXN_FATAL;
    }
    p->max_topics = SIZE_MAX; /* renew() would start a new producer id: never */
    if (open_rk(p, err, errlen) != 0) return PRODUCER_TXN_FATAL;
    int rc = txn_result(rd_kafka_init_transactions(p->rk, timeout_ms), "init_transactions",
                        err, errlen);
    if (rc != PRODUCER_TXN_OK) close_rk(p); /* the next attempt starts afresh */
    return rc;
}

bool producer_txn_open(const struct producer *p)
{
    return p->txn_open;
}

bool producer_txn_failed(const struct producer *p)
{
    return p->txn_failed;
}

bool producer_txn_ready(const struct producer *p)
{
    return p->rk != NULL;
}

bool producer_txn_must_stop(struct producer *p)
{
    if (!p->rk) return false;
    switch (rd_kafka_fatal_error(p->rk, NULL, 0)) {
    case RD_KAFKA_RESP_ERR__FENCED:
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
        return true;
    default:
        return false;
    }
}

bool producer_txn_fenced(struct producer *p)
{
    if (!p->rk) return false;
    rd_kafka_resp_err_t e = rd_kafka_fatal_error(p->rk, NULL, 0);
    return e == RD_KAFKA_RESP_ERR__FENCED || e == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
           e == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

void producer_txn_discard(struct producer *p)
{
    if (p->rk) {
        rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_poll(p->rk, 0); /* the purged messages' reports */
    }
    close_rk(p);
    p->txn_open = p->txn_failed = false;
}

int producer_txn_commit(struct producer *p, const char *topic, const char *key,
                        const char *value, int timeout_ms, char *err, size_t errlen)
{
    int kerr;
    if (!p->txn_open && begin_txn(p, &kerr, err, errlen) != 0)
        return PRODUCER_TXN_ABORT;
    rd_kafka_resp_err_t rc = rd_kafka_producev(
        p->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(0),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, strlen(key)),
        RD_KAFKA_V_VALUE((void *)value, strlen(value)),
        RD_KAFKA_V_OPAQUE((void *)(uintptr_t)PRODUCER_TAG_PROGRESS), RD_KAFKA_V_END);
    if (rc != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "kafka: produce the progress record to %s: %s", topic,
                 rd_kafka_err2str(rc));
        return PRODUCER_TXN_ABORT;
    }
    int r = txn_result(rd_kafka_commit_transaction(p->rk, timeout_ms), "commit_transaction",
                       err, errlen);
    if (r == PRODUCER_TXN_OK) p->txn_open = false;
    return r;
}

int producer_txn_abort(struct producer *p, int timeout_ms, char *err, size_t errlen)
{
    if (!p->rk || !p->txn_open) {
        p->txn_failed = false;
        return PRODUCER_TXN_OK;
    }
    int r = txn_result(rd_kafka_abort_transaction(p->rk, timeout_ms), "abort_transaction",
                       err, errlen);
    if (r == PRODUCER_TXN_OK) p->txn_open = p->txn_failed = false;
    return r;
}

static rd_kafka_headers_t *build_headers(const struct outbox_event *ev)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new((size_t)ev->nheaders);
    for (int i = 0; i < ev->nheaders; i++)
        rd_kafka_header_add(h, ev->headers[i].name, -1, ev->headers[i].value.data,
                            (ssize_t)ev->headers[i].value.len);
    return h;
}

/* FNV-1a: topic names are short. */
static size_t topic_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (size_t)h;
}

static struct topic_slot *topic_find_slot(struct topic_slot *slots, size_t cap, const char *name)
{
    size_t i = topic_hash(name) & (cap - 1);
    while (slots[i].name && strcmp(slots[i].name, name) != 0) i = (i + 1) & (cap - 1);
    return &slots[i];
}

static int topics_grow(struct producer *p)
{
    size_t ncap = p->topics_cap ? p->topics_cap * 2 : 16;
    struct topic_slot *n = calloc(ncap, sizeof(*n));
    if (!n) return -1;
    for (size_t i = 0; i < p->topics_cap; i++)
        if (p->topics[i].name) *topic_find_slot(n, ncap, p->topics[i].name) = p->topics[i];
    free(p->topics);
    p->topics = n;
    p->topics_cap = ncap;
    p->last_topic = NULL;
    return 0;
}

/* No metadata is fetched here. This used to wait up to 500 ms per new topic
 * (rd_kafka_metadata) on the event loop, so that the first events of a
 * topic would not wait for librdkafka's one-second topic scan; with 10,000
 * topics that made minutes of stall (and 500 ms per topic with the broker
 * down). librdkafka 2.0.2 asks for a new topic's leaders by itself as soon
 * as the topic object is made and routes the messages waiting for it when
 * the answer arrives: tests/bench/many_topics.sh measured a new topic's
 * first event ACKed in 2.8 ms (p50, max 8.3 ms) without the wait, 4.1 ms
 * (max 14.4 ms) with it. An explicit asynchronous request per topic
 * (rd_kafka_metadata with timeout 0) made a burst of new topics 4 times
 * slower (one Metadata round trip each, in line with the produce
 * requests), so there is none. */

/* Finds the handle of topic name, creating it on first use. Returns
 * PRODUCER_OK with *out set; PRODUCER_QUEUE_FULL when name is new and the
 * current rd_kafka_t already has max_topics topics while messages are
 * outstanding (call again once they are reported); PRODUCER_ERROR with
 * *kafka_err and err when librdkafka refuses the name. */
static int topic_handle(struct producer *p, const char *name, rd_kafka_topic_t **out,
                        int *kafka_err, char *err, size_t errlen)
{
    if (p->last_topic && strcmp(p->last_topic->name, name) == 0) {
        *out = p->last_topic->rkt;
        return PRODUCER_OK;
    }
    if (p->topics_cap) {
        struct topic_slot *s = topic_find_slot(p->topics, p->topics_cap, name);
        if (s->name) {
            p->last_topic = s;
            *out = s->rkt;
            return PRODUCER_OK;
        }
    }
    if (p->ntopics >= p->max_topics) {
        if (rd_kafka_outq_len(p->rk) > 0) return PRODUCER_QUEUE_FULL;
        if (renew(p, err, errlen) != 0) {
            *kafka_err = RD_KAFKA_RESP_ERR__FAIL;
            return PRODUCER_ERROR;
        }
    }
    if ((p->ntopics + 1) * 2 > p->topics_cap && topics_grow(p) != 0) {
        *kafka_err = RD_KAFKA_RESP_ERR__FAIL;
        snprintf(err, errlen, "produce to %s: out of memory", name);
        return PRODUCER_ERROR;
    }
    char *copy = strdup(name);
    rd_kafka_topic_t *rkt = copy ? rd_kafka_topic_new(p->rk, name, NULL) : NULL;
    if (!rkt) {
        *kafka_err = copy ? (int)rd_kafka_last_error() : RD_KAFKA_RESP_ERR__FAIL;
        snprintf(err, errlen, "produce to %s: %s", name,
                 rd_kafka_err2str((rd_kafka_resp_err_t)*kafka_err));
        free(copy);
        return PRODUCER_ERROR;
    }
    struct topic_slot *s = topic_find_slot(p->topics, p->topics_cap, name);
    s->name = copy;
    s->rkt = rkt;
    p->ntopics++;
    *out = rkt;
    return PRODUCER_OK;
}

int producer_send(struct producer *p, const struct outbox_event *ev, uint64_t tag,
                  int *kafka_err, char *err, size_t errlen)
{
    size_t value_len = ev->value_null ? 0 : ev->value.len;
    if (!kafka_value_fits_queue(value_len, p->queue_max_bytes)) {
        /* Checked before anything waits: librdkafka would answer QUEUE_FULL
         * for ever, even to an empty queue. */
        *kafka_err = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
        snprintf(err, errlen,
                 "produce to %s: a value of %zu bytes can never fit the producer's queue "
                 "(queue.buffering.max.kbytes = %lld, %lld bytes)",
                 ev->topic, value_len, p->queue_max_bytes / 1024, p->queue_max_bytes);
        return PRODUCER_ERROR;
    }
    if (p->txn_id && !p->txn_open && begin_txn(p, kafka_err, err, errlen) != 0) {
        p->txn_failed = true;
        return PRODUCER_ERROR;
    }
    rd_kafka_topic_t *rkt;
    int th = topic_handle(p, ev->topic, &rkt, kafka_err, err, errlen);
    if (th != PRODUCER_OK) return th;
    rd_kafka_headers_t *h = build_headers(ev);
    rd_kafka_resp_err_t rc = rd_kafka_producev(
        p->rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY(ev->key_null ? NULL : ev->key.data, ev->key_null ? 0 : ev->key.len),
        RD_KAFKA_V_VALUE(ev->value_null ? NULL : (void *)ev->value.data, value_len),
        RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE((void *)(uintptr_t)tag),
        RD_KAFKA_V_TIMESTAMP(ev->timestamp_ms), RD_KAFKA_V_END);
    if (rc == RD_KAFKA_RESP_ERR_NO_ERROR) return PRODUCER_OK; /* h now owned by rk */
    rd_kafka_headers_destroy(h);
    if (rc == RD_KAFKA_RESP_ERR__QUEUE_FULL && rd_kafka_outq_len(p->rk) > 0)
        return PRODUCER_QUEUE_FULL;
    if (rc == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        /* Full while empty: waiting cannot help (a bound librdkafka counts
         * differently from kafka_value_fits_queue()). */
        *kafka_err = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
        snprintf(err, errlen,
                 "produce to %s: the producer's queue is empty yet refuses this event "
                 "(%zu bytes of value; queue.buffering.max.kbytes = %lld): it can never fit",
                 ev->topic, value_len, p->queue_max_bytes / 1024);
        return PRODUCER_ERROR;
    }
    *kafka_err = (int)rc;
    /* In a transaction that failed (an abortable error, e.g. after a
     * broker lost its state), every produce is refused with _STATE: the
     * transaction's fault, not the event's. */
    if (p->txn_id && rc == RD_KAFKA_RESP_ERR__STATE) p->txn_failed = true;
    snprintf(err, errlen, "produce to %s: %s", ev->topic, rd_kafka_err2str(rc));
    return PRODUCER_ERROR;
}

static void drain_pipe(struct producer *p)
{
    char buf[64];
    while (read(p->pipefd[0], buf, sizeof(buf)) > 0) {
    }
}

int producer_poll(struct producer *p, int timeout_ms)
{
    if (!p->rk) return 0; /* exactly_once, before producer_txn_init() */
    /* Drain the pipe first: a report that arrives after rd_kafka_poll()
     * returns writes it again, so no wake-up is lost. */
    drain_pipe(p);
    p->dr_since_clock = PRODUCER_DR_CLOCK_EVERY; /* it may have waited: read again */
    int n = rd_kafka_poll(p->rk, timeout_ms);
    int more;
    while ((more = rd_kafka_poll(p->rk, 0)) > 0) n += more;
    return n;
}

int producer_wakeup_fd(const struct producer *p) { return p->pipefd[0]; }

int producer_flush(struct producer *p, int timeout_ms)
{
    if (!p->rk) return 0;
    drain_pipe(p);
    p->dr_clock_exact = true; /* rd_kafka_flush() waits between reports */
    rd_kafka_flush(p->rk, timeout_ms);
    p->dr_clock_exact = false;
    return rd_kafka_outq_len(p->rk);
}

int producer_outq_len(const struct producer *p) { return p->rk ? rd_kafka_outq_len(p->rk) : 0; }

int producer_brokers_up(const struct producer *p)
{
    return p->brokers_up;
}

uint64_t producer_unreachable_total(const struct producer *p)
{
    (void)p;
    return kafka_unreachable_total();
}

const struct kstats *producer_kstats(const struct producer *p) { return &p->kstats; }

int producer_fatal(struct producer *p, char *err, size_t errlen)
{
    if (!p->rk) return 0;
    return rd_kafka_fatal_error(p->rk, err, errlen) != RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* Errors about the message itself or its topic: retrying the same message
 * can never succeed, but other messages can. */
static const rd_kafka_resp_err_t poison_errs[] = {
    RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
    RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE,
    RD_KAFKA_RESP_ERR_INVALID_MSG,
    RD_KAFKA_RESP_ERR_INVALID_RECORD,
    RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION,
    RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
    RD_KAFKA_RESP_ERR_POLICY_VIOLATION,
    RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC,
    RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
    RD_KAFKA_RESP_ERR__INVALID_ARG,
    /* The record's timestamp is out of the topic's bounds
     * (message.timestamp.difference.max.ms, .before.max.ms, .after.max.ms):
     * a commit time ([outbox] timestamp = commit) older than the bound. */
    RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP,
};
#define NPOISON (sizeof(poison_errs) / sizeof(poison_errs[0]))

int producer_refused(const struct producer *p, char *err, size_t errlen)
{
    if (!p->refusal.err) return 0;
    snprintf(err, errlen, "%s: %s: %s; %s", kafka_refusal_who(p->refusal.err, p->refusal.reason),
             rd_kafka_err2name(p->refusal.err), p->refusal.reason,
             kafka_refusal_fix(p->refusal.err, p->refusal.reason, rd_kafka_version()));
    return 1;
}

bool producer_err_is_poison(int err)
{
    for (size_t i = 0; i < NPOISON; i++)
        if ((rd_kafka_resp_err_t)err == poison_errs[i]) return true;
    return false;
}

const char *producer_poison_name(size_t i)
{
    return i < NPOISON ? rd_kafka_err2name(poison_errs[i]) : NULL;
}

bool producer_err_is_missing_topic(int err)
{
    return err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
           err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
}

bool producer_err_is_too_large(int err) { return err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE; }

const char *producer_timed_out_name(void)
{
    return rd_kafka_err2name(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
}

const char *producer_err_name(int err) { return rd_kafka_err2name((rd_kafka_resp_err_t)err); }
