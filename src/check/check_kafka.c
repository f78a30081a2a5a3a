/*
 * check_kafka.c - the Kafka checks of `outboxd check`: every [kafka]
 * property judged by librdkafka through a producer built exactly as the
 * daemon's (kafkaconf.h), the broker (one metadata request) and the topics
 * the template renders for the distinct values in the outbox (up to
 * CHECK_TOPIC_ROWS). Nothing is created: metadata for all topics never
 * auto-creates one. librdkafka's types stay in this file.
 */
#include "check_int.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "kafkaconf.h"
#include "log.h"
#include "pgsql.h"
#include "progress.h"

/* The Kafka side of one run. */
struct ck_kafka {
    rd_kafka_t *rk;
    const struct rd_kafka_metadata *md; /* NULL until the broker answered */
    bool broker_ok;
    struct kafka_refusal refusal; /* seen by check_kafka_error */
};

/* The error callback of check's handle: logs, and keeps a refusal
 * (kafka_err_is_refusal) for the broker check to name. */
static void check_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    kafka_log_error(err, reason);
    kafka_refusal_note(opaque, err, reason);
}

/* ---- the [kafka] properties (part of the configuration check) ---- */

/* kafka_conf_producer()'s refusals, one FAIL line each. */
static void config_refused(void *ctx, const char *msg)
{
    ck_report(ctx, CHECK_FAIL, "configuration",
              "correct or remove it ([kafka] takes librdkafka's properties as they are)",
              "%s", msg);
}

void check_kafka_config(struct ck *k, const char *what)
{
    char err[1024], reason[512];
    /* --config-only contacts nothing: without bootstrap.servers the handle
     * validates the properties but resolves no broker. */
    rd_kafka_conf_t *conf = kafka_conf_producer(k->cfg, k->scope == CHECK_SCOPE_CONFIG,
                                                config_refused, k, err, sizeof(err));
    if (!conf) return;
    struct ck_kafka *kc = calloc(1, sizeof(*kc));
    if (!kc) {
        rd_kafka_conf_destroy(conf);
        ck_report(k, CHECK_FAIL, what, NULL, "out of memory");
        return;
    }
    rd_kafka_conf_set_opaque(conf, &kc->refusal);
    kafka_conf_route_logs(conf);
    rd_kafka_conf_set_error_cb(conf, check_kafka_error);
    kc->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof(reason));
    if (!kc->rk) {
        rd_kafka_conf_destroy(conf);
        free(kc);
        ck_report(k, CHECK_FAIL, what, "correct the [kafka] properties", "[kafka]: %s",
                  reason);
        return;
    }
    kafka_conf_started(kc->rk);
    k->kafka = kc; /* conf is kc->rk's now */
}

void check_kafka_free(struct ck *k)
{
    if (!k->kafka) return;
    if (k->kafka->md) rd_kafka_metadata_destroy(k->kafka->md);
    rd_kafka_destroy(k->kafka->rk);
    free(k->kafka);
    k->kafka = NULL;
}

/* ---- 11. broker ---- */

void check_broker(struct ck *k)
{
    const char *what = "kafka broker";
    if (!k->kafka) return ck_skip(k, what, "the [kafka] configuration is not valid");
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e =
        rd_kafka_metadata(k->kafka->rk, 1, NULL, &md, CHECK_BROKER_TIMEOUT_MS);
    const char *servers = config_kafka_get(k->cfg, "bootstrap.servers");
    rd_kafka_poll(k->kafka->rk, 0); /* serves the error callback: a refusal? */
    if (e && k->kafka->refusal.err) {
        ck_report(k, CHECK_FAIL, what,
                  kafka_refusal_fix(k->kafka->refusal.err, k->kafka->refusal.reason,
                                    rd_kafka_version()),
                  "%s refused the connection: %s: %s", servers ? servers : "(none)",
                  rd_kafka_err2name(k->kafka->refusal.err), k->kafka->refusal.reason);
        return;
    }
    if (e) {
        ck_report(
            k, CHECK_FAIL, what,
            "check [kafka] bootstrap.servers, that the broker is up and reachable from "
            "here, and the security settings (security.protocol, sasl.*, ssl.*)",
            "no metadata from %s within %d ms: %s", servers ? servers : "(none)",
            CHECK_BROKER_TIMEOUT_MS, rd_kafka_err2str(e));
        return;
    }
    k->kafka->md = md;
    k->kafka->broker_ok = true;
    ck_report(k, CHECK_OK, what, NULL, "%d broker%s, %d topic%s", md->broker_cnt,
              md->broker_cnt == 1 ? "" : "s", md->topic_cnt, md->topic_cnt == 1 ? "" : "s");
}

/* ---- 12. topics ---- */

int topics_add(struct topic_list *l, const char *t)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], t) == 0) return 0;
    if (grow_array((void **)&l->names, &l->cap, l->n + 1, sizeof(*l->names), 16) != 0)
        return -1;
    return (l->names[l->n] = strdup(t)) ? (int)++l->n : -1;
}

void topics_free(struct topic_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
}

static bool topic_exists(const struct rd_kafka_metadata *md, const char *t)
{
    for (int i = 0; i < md->topic_cnt; i++)
        if (strcmp(md->topics[i].topic, t) == 0 &&
            md->topics[i].err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
            return true;
    return false;
}

/* How long check waits for the broker's configuration (DescribeConfigs). */
#define CHECK_DESCRIBE_TIMEOUT_MS 5000

/* DescribeConfigs of the n resources res: their results (NULL, with
 * *nres 0, when the broker refused the request or did not answer in
 * time), valid until rd_kafka_event_destroy(*ev) (*ev may be NULL). */
static const rd_kafka_ConfigResource_t **describe_configs(struct ck *k,
                                                          rd_kafka_ConfigResource_t **res,
                                                          size_t n, rd_kafka_event_t **ev,
                                                          size_t *nres)
{
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->kafka->rk);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(k->kafka->rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_AdminOptions_set_request_timeout(o, CHECK_DESCRIBE_TIMEOUT_MS, NULL, 0);
    rd_kafka_DescribeConfigs(k->kafka->rk, res, n, o, q);
    *ev = rd_kafka_queue_poll(q, CHECK_DESCRIBE_TIMEOUT_MS + 1000);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
    const rd_kafka_DescribeConfigs_result_t *r =
        *ev && !rd_kafka_event_error(*ev) ? rd_kafka_event_DescribeConfigs_result(*ev) : NULL;
    *nres = 0;
    return r ? rd_kafka_DescribeConfigs_result_resources(r, nres) : NULL;
}

/* The broker's auto.create.topics.enable, asked of the first broker of the
 * metadata with DescribeConfigs: 1 true, 0 false, -1 unknown (refused, as
 * it needs DESCRIBE_CONFIGS on the cluster, unsupported, or no answer). */
static int broker_auto_creates(struct ck *k)
{
    char id[16];
    if (!k->kafka->md || k->kafka->md->broker_cnt < 1) return -1;
    snprintf(id, sizeof(id), "%d", (int)k->kafka->md->brokers[0].id);
    rd_kafka_ConfigResource_t *res =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id);
    rd_kafka_event_t *ev;
    int v = -1;
    size_t nres, nent = 0;
    const rd_kafka_ConfigResource_t **rs = describe_configs(k, &res, 1, &ev, &nres);
    const rd_kafka_ConfigEntry_t **es = nres == 1 && !rd_kafka_ConfigResource_error(rs[0])
                                            ? rd_kafka_ConfigResource_configs(rs[0], &nent)
                                            : NULL;
    for (size_t i = 0; es && i < nent; i++) {
        const char *val = rd_kafka_ConfigEntry_value(es[i]);
        if (!strcmp(rd_kafka_ConfigEntry_name(es[i]), "auto.create.topics.enable") && val)
            v = !strcmp(val, "true");
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_ConfigResource_destroy(res);
    return v;
}

/* "a, b, c and 4 more" of up to 5 names of l whose index i passes keep. */
static void list_names(char **names, size_t n, char *out, size_t outlen)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && i < 5; i++)
        len += (size_t)snprintf(out + len, len < outlen ? outlen - len : 0, "%s%s",
                                i ? ", " : "", names[i]);
    if (n > 5 && len < outlen) snprintf(out + len, outlen - len, " and %zu more", n - 5);
}

int render_topics(struct ck *k, struct topic_list *l, int *nulls, bool *truncated, char *err,
                  size_t errlen)
{
    char sql[8192], topic[OUTBOX_TOPIC_MAX], why[512];
    struct relation rel = {.nspname = k->map.schema, .relname = k->map.table};
    struct rel_column cols[MAX_TEMPLATE_COLUMNS];
    struct col_value vals[MAX_TEMPLATE_COLUMNS] = {{0}};
    *nulls = 0;
    *truncated = false;
    if (k->ntcols == 0) {
        if (topic_template_render(k->map.topic, &rel, vals, 0, topic, sizeof(topic), err,
                                  errlen) < 0)
            return -1;
        return topics_add(l, topic) < 0 ? -1 : 0;
    }
    size_t n = (size_t)snprintf(sql, sizeof(sql), "SELECT DISTINCT ");
    for (int i = 0; i < k->ntcols; i++) {
        char *q = pgsql_quote_ident(k->tcols[i]);
        if (!q) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        n += (size_t)snprintf(sql + n, n < sizeof(sql) ? sizeof(sql) - n : 0, "%s%s::text",
                              i ? ", " : "", q);
        free(q);
        cols[i] = (struct rel_column){.name = k->tcols[i]};
    }
    char *table = pgsql_quote_qualified(k->map.schema, k->map.table);
    if (!table) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (n < sizeof(sql))
        snprintf(sql + n, sizeof(sql) - n, " FROM %s LIMIT %d", table, CHECK_TOPIC_ROWS + 1);
    free(table);
    PGresult *r = ck_query(k, sql, 0, NULL, err, errlen);
    if (!r) return -1;
    rel.ncols = k->ntcols;
    rel.cols = cols;
    int rows = PQntuples(r);
    if (rows > CHECK_TOPIC_ROWS) {
        rows = CHECK_TOPIC_ROWS;
        *truncated = true;
    }
    for (int i = 0; i < rows; i++) {
        for (int c = 0; c < k->ntcols; c++) {
            bool null = PQgetisnull(r, i, c);
            vals[c] = (struct col_value){null ? CV_NULL : CV_TEXT,
                                         null ? 0 : (uint32_t)PQgetlength(r, i, c),
                                         null ? NULL : PQgetvalue(r, i, c)};
        }
        if (topic_template_render(k->map.topic, &rel, vals, k->ntcols, topic, sizeof(topic),
                                  why, sizeof(why)) < 0) {
            (*nulls)++;
            continue;
        }
        if (topics_add(l, topic) < 0) {
            PQclear(r);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    PQclear(r);
    return rows;
}

/* The rendered topics sorted: not valid names (why: the first one's
 * reason), missing on the broker, present. The arrays borrow the names of
 * the topic_list; topic_sort_free() frees the arrays. */
struct topic_sort {
    char **bad, **missing, **present;
    size_t nbad, nmissing, npresent;
    char why[512];
};

static int topic_sort(const struct ck *k, const struct topic_list *l, struct topic_sort *s)
{
    *s = (struct topic_sort){.bad = calloc(l->n + 1, sizeof(char *)),
                             .missing = calloc(l->n + 1, sizeof(char *)),
                             .present = calloc(l->n + 1, sizeof(char *))};
    if (!s->bad || !s->missing || !s->present) return -1;
    for (size_t i = 0; i < l->n; i++) {
        char w[512];
        if (!outbox_topic_valid(l->names[i], w, sizeof(w))) {
            if (!s->nbad) snprintf(s->why, sizeof(s->why), "%s", w);
            s->bad[s->nbad++] = l->names[i];
        } else if (topic_exists(k->kafka->md, l->names[i])) {
            s->present[s->npresent++] = l->names[i];
        } else {
            s->missing[s->nmissing++] = l->names[i];
        }
    }
    return 0;
}

static void topic_sort_free(struct topic_sort *s)
{
    free(s->bad);
    free(s->missing);
    free(s->present);
}

/* Rows that cannot be routed stop the daemon under policy = halt; under
 * dlq they are dead-lettered, so only a warning. Returns the status and
 * sets *fix. */
static enum check_status unroutable(const struct ck *k, const char **fix)
{
    bool dlq = k->cfg->errors_policy == ERRORS_DLQ;
    *fix = dlq ? "such rows go to the dead-letter topic; correct the values (or [outbox] "
                 "topic) if they are new"
               : "such rows stop outboxd ([errors] policy = halt): correct the values in "
                 "the outbox or [outbox] topic, or set [errors] policy = dlq";
    return dlq ? CHECK_WARN : CHECK_FAIL;
}

static void report_bad_topics(struct ck *k, const struct topic_sort *s)
{
    char names[1400];
    const char *fix;
    enum check_status st = unroutable(k, &fix);
    if (s->nbad == 1) {
        ck_report(k, st, "topics", fix, "a rendered topic is not valid: %s", s->why);
    } else if (s->nbad > 1) {
        list_names(s->bad, s->nbad, names, sizeof(names));
        ck_report(k, st, "topics", fix, "%zu rendered topics are not valid (%s; all: %s)",
                  s->nbad, s->why, names);
    }
}

/* A broker that does not create topics fails every event for a missing
 * one (outboxd halts on the first, under either policy). */
static void report_missing_topics(struct ck *k, const struct topic_sort *s, size_t total)
{
    char names[1400];
    if (!s->nmissing) return;
    int autocreate = broker_auto_creates(k);
    list_names(s->missing, s->nmissing, names, sizeof(names));
    const char *fix =
        autocreate == 0
            ? "create them: the broker does not create topics "
              "(auto.create.topics.enable = false), and outboxd stops at the first "
              "event for a missing topic under either [errors] policy"
            : "they will be auto-created if the broker allows it "
              "(auto.create.topics.enable); otherwise create them";
    ck_report(k, autocreate == 0 ? CHECK_FAIL : CHECK_WARN, "topics", fix,
              "%zu of %zu topic%s do%s not exist%s: %s", s->nmissing, total,
              total == 1 ? "" : "s", s->nmissing == 1 ? "es" : "",
              autocreate == 0 ? "" : " yet", names);
}

static void report_null_values(struct ck *k, int nulls)
{
    const char *fix;
    enum check_status st = unroutable(k, &fix);
    if (nulls)
        ck_report(k, st, "topics", fix,
                  "%d distinct value%s of the template's columns %s NULL, so no topic can "
                  "be rendered for %s",
                  nulls, nulls == 1 ? "" : "s", nulls == 1 ? "is" : "are",
                  nulls == 1 ? "it" : "them");
}

static void report_topics_ok(struct ck *k, const struct topic_sort *s, size_t total,
                             bool truncated)
{
    char names[1400];
    list_names(s->present, s->npresent, names, sizeof(names));
    if (total == 0)
        ck_report(k, CHECK_OK, "topics", NULL,
                  "the outbox table is empty: nothing to render yet");
    else
        ck_report(k, CHECK_OK, "topics", NULL, "%zu topic%s exist%s%s: %s", total,
                  total == 1 ? "" : "s", total == 1 ? "s" : "",
                  truncated ? " (of the first 1000 distinct values)" : "", names);
}

/* The producer's own value of a numeric property (its default when
 * [kafka] does not set it); -1 when it cannot be read. */
static long producer_conf_long(const struct ck *k, const char *name)
{
    char buf[64];
    size_t n = sizeof(buf);
    if (rd_kafka_conf_get(rd_kafka_conf(k->kafka->rk), name, buf, &n) != RD_KAFKA_CONF_OK)
        return -1;
    return strtol(buf, NULL, 10);
}

/* Each present topic's max.message.bytes, asked with one DescribeConfigs
 * (up to CHECK_LIMIT_TOPICS topics) into limits (-1: not reported). 0, or
 * -1 when the broker did not answer it (refused: DESCRIBE_CONFIGS on the
 * topics is needed; or unsupported). */
#define CHECK_LIMIT_TOPICS 100
static int topic_limits(struct ck *k, char **names, size_t n, long *limits)
{
    rd_kafka_ConfigResource_t *res[CHECK_LIMIT_TOPICS];
    for (size_t i = 0; i < n; i++) {
        res[i] = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, names[i]);
        limits[i] = -1;
    }
    rd_kafka_event_t *ev;
    size_t nres;
    const rd_kafka_ConfigResource_t **rs = describe_configs(k, res, n, &ev, &nres);
    for (size_t j = 0; j < nres; j++) {
        size_t nent = 0;
        const rd_kafka_ConfigEntry_t **es =
            rd_kafka_ConfigResource_error(rs[j]) ? NULL
                                                 : rd_kafka_ConfigResource_configs(rs[j], &nent);
        for (size_t e = 0; es && e < nent; e++) {
            const char *val = rd_kafka_ConfigEntry_value(es[e]);
            if (strcmp(rd_kafka_ConfigEntry_name(es[e]), "max.message.bytes") || !val) continue;
            for (size_t i = 0; i < n; i++)
                if (!strcmp(names[i], rd_kafka_ConfigResource_name(rs[j])))
                    limits[i] = strtol(val, NULL, 10);
        }
    }
    if (ev) rd_kafka_event_destroy(ev);
    for (size_t i = 0; i < n; i++) rd_kafka_ConfigResource_destroy(res[i]);
    return rs ? 0 : -1;
}

/* A topic's max.message.bytes bounds a record batch: the broker refuses a
 * whole batch larger than it, the small events in it too. When it is
 * below the producer's batch bound (batch.size, and message.max.bytes
 * over it), an event too large for the topic takes the events batched
 * with it along (deploy/faults.md, "Poison events"): a warning naming the
 * smallest such topic and the batch.size that avoids it. */
static void report_topic_limits(struct ck *k, const struct topic_sort *s)
{
    size_t n = s->npresent < CHECK_LIMIT_TOPICS ? s->npresent : CHECK_LIMIT_TOPICS;
    long limits[CHECK_LIMIT_TOPICS], batch = producer_conf_long(k, "batch.size");
    long mmb = producer_conf_long(k, "message.max.bytes");
    if (n == 0 || batch < 0 || mmb < 0) return;
    if (mmb < batch) batch = mmb;
    if (topic_limits(k, s->present, n, limits) != 0) {
        log_debug("check: the topics' max.message.bytes could not be described");
        return;
    }
    size_t below = 0, min = 0, described = 0;
    for (size_t i = 0; i < n; i++) {
        described += limits[i] >= 0;
        if (limits[i] < 0 || limits[i] >= batch) continue;
        if (below++ == 0 || limits[i] < limits[min]) min = i;
    }
    if (below == 0) {
        if (described)
            ck_report(k, CHECK_OK, "topic limits", NULL,
                      "every topic described (%zu of %zu) takes record batches of the "
                      "producer's %ld bytes (max.message.bytes)",
                      described, n, batch);
        return;
    }
    char fix[160];
    snprintf(fix, sizeof(fix), "set [kafka] batch.size = %ld (or raise the topic%s "
             "max.message.bytes)", limits[min], below == 1 ? "'s" : "s'");
    ck_report(k, CHECK_WARN, "topic limits", fix,
              "%zu topic%s take%s smaller record batches than the producer builds (%ld "
              "bytes): %s takes %ld (max.message.bytes); the broker refuses a whole batch "
              "larger than that, so an event too large for it takes the events batched "
              "with it to the dead-letter topic ([errors] policy = dlq) or stops outboxd "
              "(halt)",
              below, below == 1 ? "" : "s", below == 1 ? "s" : "", batch, s->present[min],
              limits[min]);
}

void check_topics(struct ck *k)
{
    const char *what = "topics";
    char err[1024];
    if (!k->map_ok) return ck_skip(k, what, "[outbox] topic is not valid");
    if (!k->pg_ok) return ck_skip(k, what, "no connection to postgres");
    if (!k->table_ok) return ck_skip(k, what, "the outbox table is missing or incomplete");
    if (!k->can_select)
        return ck_skip(k, what, "the role may not SELECT from the outbox table");
    if (!k->kafka) return ck_skip(k, what, "the [kafka] configuration is not valid");
    if (!k->kafka->broker_ok) return ck_skip(k, what, "the broker did not answer");

    struct topic_list l = {0};
    int nulls;
    bool truncated;
    if (render_topics(k, &l, &nulls, &truncated, err, sizeof(err)) < 0) {
        topics_free(&l);
        ck_report(k, CHECK_WARN, what,
                  "run outboxd check again when the table is less busy",
                  "the template's values could not be read from the outbox table: %s", err);
        return;
    }
    if (k->cfg->errors_policy == ERRORS_DLQ && k->cfg->errors_dlq_topic)
        topics_add(&l, k->cfg->errors_dlq_topic);

    int mark = ck_begin(k);
    struct topic_sort s;
    if (topic_sort(k, &l, &s) == 0) {
        report_bad_topics(k, &s);
        report_missing_topics(k, &s, l.n);
        report_null_values(k, nulls);
        if (ck_silent_since(k, mark)) report_topics_ok(k, &s, l.n, truncated);
        report_topic_limits(k, &s);
    }
    topic_sort_free(&s);
    topics_free(&l);
}

/* ---- exactly_once: the progress topic ---- */

/* The progress topic exists and is compacted, or the broker would create
 * it. The transactional id's permission is not asked: only
 * init_transactions proves it, and that would fence a running outboxd. */
void check_progress_topic(struct ck *k)
{
    const char *what = "progress topic";
    const struct config *c = k->cfg;
    const char *t = c->delivery_progress_topic;
    char err[1024];
    struct progress_topic_info info;
    if (c->delivery_mode != DELIVERY_EXACTLY_ONCE) return;
    if (!k->kafka) return ck_skip(k, what, "the [kafka] configuration is not valid");
    if (!k->kafka->broker_ok) return ck_skip(k, what, "the broker did not answer");
    if (progress_topic_describe(c, t, CHECK_DESCRIBE_TIMEOUT_MS, &info, err, sizeof(err)) != 0)
        return ck_report(k, CHECK_FAIL, what,
                         "let the principal describe the topic's configuration "
                         "(DESCRIBE_CONFIGS on the topic)",
                         "%s", err);
    if (info.exists && !info.compacted)
        return ck_report(k, CHECK_FAIL, what,
                         "set cleanup.policy=compact on it (kafka-configs.sh --alter "
                         "--entity-type topics --add-config cleanup.policy=compact)",
                         "%s has cleanup.policy=%s: retention would delete the newest "
                         "committed position of an idle relay",
                         t, info.policy[0] ? info.policy : "(not reported)");
    if (!info.exists && !info.can_create)
        return ck_report(k, CHECK_FAIL, what,
                         "create it (1 partition, cleanup.policy=compact) or grant CREATE",
                         "%s does not exist and the broker would not create it: %s", t,
                         info.create_err);
    ck_report(k, CHECK_OK, what, NULL,
              "%s %s; the transactional id's WRITE permission is proven when outboxd "
              "starts (init_transactions here would fence a running instance)",
              t, info.exists ? "exists, compacted" : "does not exist yet and will be created");
}
