/*
 * verify.c - `outboxd verify` (see verify.h): the I/O around the audit.
 *
 *   1. Postgres (a normal connection): every row of the outbox table, or
 *      those with created_at >= --since, in single-row mode; each row's
 *      topic is rendered with the configured template from all its columns.
 *   2. Kafka (a consumer without group commits): every partition of the
 *      rows' topics and of the dead-letter topic ([errors] dlq_topic, when
 *      it exists) is assigned directly and read from the beginning (with
 *      --since: from the offset of that time) up to the high watermark it
 *      had when verify started, within opt->timeout_ms (--timeout).
 *   3. The audit module compares; the event_ids of messages it calls
 *      unknown (and of dead-letter records of no row) are looked up once
 *      more in the whole table (rows older than --since, or inserted after
 *      step 1, are not unknown) and it runs again.
 *   4. The report: a summary on stdout, or one JSON object with --json.
 *
 * Exit codes: VERIFY_CLEAN, VERIFY_PROBLEMS (missing or out of order), and
 * VERIFY_COULD_NOT_RUN for every failure before the report, so a script
 * can tell "the audit found something" from "there is no audit". Inside,
 * functions return 0 or non-zero (an EXIT_* code, mapped at the end).
 *
 * Brokers that cannot look offsets up by time (librdkafka's mock cluster
 * answers -1 for every time) are read from the beginning instead, skipping
 * each partition's messages up to the first one stamped at or after
 * --since: the same start a real broker would have given.
 */
#include "verify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include "audit.h"
#include "clock.h"
#include "config_outbox.h"
#include "duration.h"
#include "exitcode.h"
#include "kafkaconf.h"
#include "log.h"
#include "outbox.h"
#include "pgconn.h"
#include "str.h"

/* Unknown event_ids looked up in the table per query. */
#define RECHECK_BATCH 10000
/* Rows whose topic cannot be rendered that get a warning of their own. */
#define RENDER_WARNINGS 10
/* The longest single wait on the broker (metadata, watermarks, poll). */
#define KAFKA_STEP_MS 5000

struct part {
    const char *topic; /* borrowed from the audit */
    int32_t partition;
    int64_t lo, hi; /* watermarks when verify started */
    int64_t next;   /* next offset wanted */
    bool by_time;   /* skipping messages stamped before --since */
    bool done;
    bool dlq;       /* of the dead-letter topic */
};

struct verify {
    const struct config *cfg;
    const struct verify_options *opt;
    struct outbox_set set; /* owned: every outbox table */
    const struct outbox_map *map; /* the table being read (one of set's) */
    char *tables;          /* owned: "schema.table, ..." of set */
    struct audit *audit;   /* owned */
    PGconn *conn;          /* owned */
    char *qtable;          /* owned: "schema"."table" */
    char *qevent_id;       /* owned: the quoted event_id column */
    int64_t since_ms;
    /* Column layout of the query result, set from its first result. */
    struct relation rel;      /* owned names */
    struct col_value *values; /* owned, rel.ncols entries */
    int col[OC__COUNT];       /* index in rel, -1 absent */
    size_t render_failures;
    /* Kafka */
    rd_kafka_t *rk;     /* owned */
    const char *dlq_topic; /* borrowed from cfg; NULL: none, or a rows' topic */
    struct part *parts; /* owned array, sorted by topic, partition */
    size_t nparts, ndone;
    int64_t deadline; /* monotonic ms */
};

/* ---- small helpers ------------------------------------------------------- */

static int remaining_ms(const struct verify *v)
{
    int64_t r = v->deadline - clock_mono_ms();
    return r <= 0 ? 0 : r > KAFKA_STEP_MS ? KAFKA_STEP_MS : (int)r;
}

static const char hexdigits[] = "0123456789abcdef";

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* ---- Postgres ------------------------------------------------------------ */

static int pg_connect(struct verify *v, char *err, size_t errlen)
{
    /* --timeout bounds the connect too (a connect_timeout in the conninfo
     * wins: pgconn.h). */
    v->conn = pgconn_connect(&(struct pgconn_opts){.conninfo = v->cfg->pg_conninfo,
                                                    .app_name = "outboxd-verify",
                                                    .timeout_s = (v->opt->timeout_ms + 999) / 1000});
    if (!v->conn) {
        snprintf(err, errlen, "postgres: out of memory");
        return EXIT_FATAL;
    }
    if (PQstatus(v->conn) != CONNECTION_OK) {
        pgconn_message(v->conn, NULL, v->cfg->pg_conninfo, "postgres: connecting", err, errlen);
        return EXIT_FATAL;
    }
    return 0;
}

/* Quoted "schema"."table" and event_id column. */
static int pg_quote_names(struct verify *v, char *err, size_t errlen)
{
    const char *names[] = {v->map->schema, v->map->table, v->map->columns[OC_EVENT_ID]};
    char *q[3] = {NULL, NULL, NULL};
    free(v->qtable);
    free(v->qevent_id);
    v->qtable = v->qevent_id = NULL;
    for (int i = 0; i < 3; i++)
        q[i] = PQescapeIdentifier(v->conn, names[i], strlen(names[i]));
    if (q[0] && q[1] && q[2]) {
        v->qtable = str_printf("%s.%s", q[0], q[1]);
        v->qevent_id = strdup(q[2]);
    }
    for (int i = 0; i < 3; i++)
        PQfreemem(q[i]);
    if (v->qtable && v->qevent_id) return 0;
    pgconn_message(v->conn, NULL, NULL, "postgres: quoting names", err, errlen);
    return EXIT_FATAL;
}

/* One-value query; *res is the result on success (the caller clears it). */
static int pg_query1(struct verify *v, const char *sql, const char *param, PGresult **res,
                     const char *what, char *err, size_t errlen)
{
    *res = PQexecParams(v->conn, sql, 1, NULL, &param, NULL, NULL, 0);
    if (PQresultStatus(*res) == PGRES_TUPLES_OK && PQntuples(*res) == 1) return 0;
    const char *state = PQresultErrorField(*res, PG_DIAG_SQLSTATE);
    pgconn_message(v->conn, *res, NULL, what, err, errlen);
    /* Class 22 (data exception): the value given was bad. */
    int rc = state && !strncmp(state, "22", 2) ? EXIT_USAGE : EXIT_FATAL;
    PQclear(*res);
    *res = NULL;
    return rc;
}

/* --since needs created_at; converts the time to epoch milliseconds. */
static int pg_since(struct verify *v, char *err, size_t errlen)
{
    PGresult *res;
    int rc =
        pg_query1(v,
                  "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass"
                  " AND attname = 'created_at' AND attnum > 0 AND NOT attisdropped)",
                  v->qtable, &res, "postgres: reading the outbox columns", err, errlen);
    if (rc) return EXIT_FATAL;
    bool has = PQgetvalue(res, 0, 0)[0] == 't';
    PQclear(res);
    if (!has) {
        snprintf(err, errlen,
                 "--since compares created_at, and %s.%s has no created_at column",
                 v->map->schema, v->map->table);
        return EXIT_USAGE;
    }
    char what[256];
    snprintf(what, sizeof(what), "--since \"%.200s\"", v->opt->since);
    rc = pg_query1(v, "SELECT (extract(epoch FROM $1::timestamptz) * 1000)::bigint",
                   v->opt->since, &res, what, err, errlen);
    if (rc) return rc;
    v->since_ms = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return 0;
}

static int find_column(const struct relation *rel, const char *name)
{
    for (int i = 0; i < rel->ncols; i++)
        if (!strcmp(rel->cols[i].name, name)) return i;
    return -1;
}

/* The relation (all column names) of the query result, once. */
static int set_layout(struct verify *v, const PGresult *res, char *err, size_t errlen)
{
    int n = PQnfields(res);
    v->rel.nspname = v->map->schema;
    v->rel.relname = v->map->table;
    v->rel.cols = calloc((size_t)n + 1, sizeof(*v->rel.cols));
    v->values = calloc((size_t)n + 1, sizeof(*v->values));
    if (!v->rel.cols || !v->values) goto oom;
    for (; v->rel.ncols < n; v->rel.ncols++)
        if (!(v->rel.cols[v->rel.ncols].name = strdup(PQfname(res, v->rel.ncols))))
            goto oom;
    for (int c = 0; c < OC__COUNT; c++)
        v->col[c] = find_column(&v->rel, v->map->columns[c]);
    const enum outbox_col required[] = {OC_EVENT_ID, OC_AGGREGATE_ID};
    for (size_t i = 0; i < 2; i++) {
        if (v->col[required[i]] >= 0) continue;
        snprintf(err, errlen, "column \"%s\" (%s) is missing from %s.%s",
                 v->map->columns[required[i]], outbox_col_name(required[i]), v->map->schema,
                 v->map->table);
        return EXIT_FATAL;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return EXIT_FATAL;
}

/* Column c of the current row as a slice, data NULL for SQL NULL. */
static struct slice value_of(const struct verify *v, int c)
{
    if (c < 0 || v->values[c].kind != CV_TEXT) return (struct slice){NULL, 0};
    return (struct slice){v->values[c].data, v->values[c].len};
}

/* Topic of the current row into buf; NULL (after a warning) if it cannot be
 * rendered or is no valid topic name: outboxd stops at such a row, or
 * dead-letters it, so it was never sent to a topic of its own. */
static const char *row_topic(struct verify *v, char *buf, size_t len)
{
    char why[512];
    if (topic_template_render(v->map->topic, &v->rel, v->values, v->rel.ncols, buf, len, why,
                              sizeof(why)) >= 0 &&
        outbox_topic_valid(buf, why, sizeof(why)))
        return buf;
    if (v->render_failures++ < RENDER_WARNINGS) {
        struct slice id = value_of(v, v->col[OC_EVENT_ID]);
        log_warn("event %.*s: %s (it cannot be in a topic: dead-lettered or missing)",
                 id.data ? (int)id.len : 6, id.data ? id.data : "(null)", why);
    }
    return NULL;
}

static int add_row(struct verify *v, const PGresult *res, char *err, size_t errlen)
{
    char topic[OUTBOX_TOPIC_MAX];
    for (int c = 0; c < v->rel.ncols; c++) {
        bool null = PQgetisnull(res, 0, c);
        v->values[c] = (struct col_value){null ? CV_NULL : CV_TEXT,
                                          null ? 0 : (uint32_t)PQgetlength(res, 0, c),
                                          null ? NULL : PQgetvalue(res, 0, c)};
    }
    struct audit_row row = {.event_id = value_of(v, v->col[OC_EVENT_ID]),
                            .key = value_of(v, v->col[OC_AGGREGATE_ID]),
                            .topic = row_topic(v, topic, sizeof(topic)),
                            .in_scope = true};
    struct slice ver = value_of(v, v->col[OC_AGGREGATE_VERSION]);
    row.has_version = ver.data && audit_parse_version(ver.data, ver.len, &row.version);
    if (audit_add_row(v->audit, &row) == 0) return 0;
    snprintf(err, errlen, "out of memory");
    return EXIT_FATAL;
}

/* Handles one result of the row query; rc keeps the first error. */
static void on_rows_result(struct verify *v, PGresult *res, int *rc, char *err,
                           size_t errlen)
{
    ExecStatusType st = PQresultStatus(res);
    if (*rc) return;
    if (st != PGRES_SINGLE_TUPLE && st != PGRES_TUPLES_OK) {
        char what[300];
        snprintf(what, sizeof(what), "postgres: reading %s.%s", v->map->schema,
                 v->map->table);
        pgconn_message(v->conn, res, NULL, what, err, errlen);
        *rc = EXIT_FATAL;
        return;
    }
    if (!v->rel.cols) *rc = set_layout(v, res, err, errlen);
    if (!*rc && st == PGRES_SINGLE_TUPLE) *rc = add_row(v, res, err, errlen);
    if (*rc) { /* stop the server sending the rest */
        PGcancel *c = PQgetCancel(v->conn);
        char buf[256];
        if (c) PQcancel(c, buf, sizeof(buf));
        PQfreeCancel(c);
    }
}

/* Every (in-scope) row into the audit, one row in memory at a time. */
static int pg_read_rows(struct verify *v, char *err, size_t errlen)
{
    char *sql = str_printf("SELECT * FROM %s%s", v->qtable,
                           v->opt->since ? " WHERE created_at >= $1::timestamptz" : "");
    int rc = 0;
    if (!sql) {
        snprintf(err, errlen, "out of memory");
        return EXIT_FATAL;
    }
    if (!PQsendQueryParams(v->conn, sql, v->opt->since ? 1 : 0, NULL, &v->opt->since, NULL,
                           NULL, 0) ||
        !PQsetSingleRowMode(v->conn)) {
        pgconn_message(v->conn, NULL, NULL, "postgres: query", err, errlen);
        free(sql);
        return EXIT_FATAL;
    }
    free(sql);
    PGresult *res;
    while ((res = PQgetResult(v->conn))) {
        on_rows_result(v, res, &rc, err, errlen);
        PQclear(res);
    }
    return rc;
}

/* Forgets the column layout of the last table read. */
static void free_layout(struct verify *v)
{
    for (int i = 0; i < v->rel.ncols; i++)
        free(v->rel.cols[i].name);
    free(v->rel.cols);
    free(v->values);
    v->rel.cols = NULL;
    v->rel.ncols = 0;
    v->values = NULL;
}

/* Makes table i of the set the one read and looked up. */
static int pg_use_table(struct verify *v, size_t i, char *err, size_t errlen)
{
    free_layout(v);
    v->map = &v->set.maps[i];
    return pg_quote_names(v, err, errlen);
}

/* Every (in-scope) row of table i into the audit. */
static int pg_read_table(struct verify *v, size_t i, char *err, size_t errlen)
{
    int rc = pg_use_table(v, i, err, errlen);
    if (!rc && v->opt->since) rc = pg_since(v, err, errlen);
    if (!rc) rc = pg_read_rows(v, err, errlen);
    if (!rc) log_info("read the outbox table %s.%s", v->map->schema, v->map->table);
    return rc;
}

/* The "{hex,hex,...}" array literal of ids (the caller frees), NULL on OOM. */
static char *hex_array(const struct slice *ids, size_t n)
{
    size_t len = 3;
    for (size_t i = 0; i < n; i++)
        len += ids[i].len * 2 + 1;
    char *arr = malloc(len), *p = arr;
    if (!arr) return NULL;
    *p++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i) *p++ = ',';
        for (size_t j = 0; j < ids[i].len; j++) {
            *p++ = hexdigits[(unsigned char)ids[i].data[j] >> 4];
            *p++ = hexdigits[(unsigned char)ids[i].data[j] & 15];
        }
    }
    *p++ = '}';
    *p = '\0';
    return arr;
}

/* Adds the rows of one re-check result: (hex event_id, in scope). */
static int add_rechecked(struct verify *v, const PGresult *res, char *err, size_t errlen)
{
    for (int i = 0; i < PQntuples(res); i++) {
        const char *h = PQgetvalue(res, i, 0);
        size_t n = strlen(h) / 2;
        char *id = malloc(n + 1);
        if (!id) goto oom;
        for (size_t j = 0; j < n; j++)
            id[j] = (char)(hexval(h[2 * j]) << 4 | hexval(h[2 * j + 1]));
        struct audit_row row = {.event_id = {id, n},
                                .in_scope = PQgetvalue(res, i, 1)[0] == 't'};
        int rc = audit_add_row(v->audit, &row);
        free(id);
        if (rc) goto oom;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return EXIT_FATAL;
}

/* One query of the unknown-id re-check: those of ids[0..n) present in the
 * table (compared as bytes, in hex) become rows, in scope when created at
 * or after --since. */
static int recheck_batch(struct verify *v, const struct slice *ids, size_t n, char *err,
                         size_t errlen)
{
    char *arr = hex_array(ids, n);
    char *sql =
        str_printf("SELECT u.h, coalesce(bool_or(%s), false) FROM unnest($1::text[]) "
                   "AS u(h) JOIN %s t ON encode(convert_to(t.%s::text, "
                   "pg_client_encoding()), 'hex') = u.h GROUP BY u.h",
                   v->opt->since ? "t.created_at >= $2::timestamptz" : "true", v->qtable,
                   v->qevent_id);
    int rc = EXIT_FATAL;
    if (!arr || !sql) {
        snprintf(err, errlen, "out of memory");
    } else {
        const char *params[2] = {arr, v->opt->since};
        PGresult *res =
            PQexecParams(v->conn, sql, v->opt->since ? 2 : 1, NULL, params, NULL, NULL, 0);
        if (PQresultStatus(res) == PGRES_TUPLES_OK)
            rc = add_rechecked(v, res, err, errlen);
        else
            pgconn_message(v->conn, res, NULL, "postgres: looking up unknown event_ids", err,
                           errlen);
        PQclear(res);
    }
    free(arr);
    free(sql);
    return rc;
}

/* Looks the unknown event_ids of the last audit_run() up in the whole
 * table: rows older than --since, or inserted after the rows were read.
 * Returns 0 or an exit code. */
static int pg_recheck_unknown(struct verify *v, char *err, size_t errlen)
{
    size_t n;
    const struct slice *ids = audit_unknown_ids(v->audit, &n);
    for (size_t t = 0; t < v->set.n; t++) {
        int rc = v->set.n > 1 ? pg_use_table(v, t, err, errlen) : 0;
        for (size_t i = 0; !rc && i < n; i += RECHECK_BATCH)
            rc = recheck_batch(v, ids + i, n - i < RECHECK_BATCH ? n - i : RECHECK_BATCH, err,
                               errlen);
        if (rc) return rc;
    }
    return 0;
}

/* ---- Kafka: the consumer ------------------------------------------------- */

/* The consumer's configuration: [kafka] (kafkaconf.h), then what verify
 * needs. Returns NULL with err on a key librdkafka refuses. */
static rd_kafka_conf_t *kafka_conf(const struct verify *v, char *err, size_t errlen)
{
    const char *const own[][2] = {
        {"group.id", "outboxd-verify"},        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"}, {"enable.partition.eof", "true"},
        {"auto.offset.reset", "earliest"},     {"isolation.level", v->opt->isolation},
    };
    return kafka_conf_consumer(v->cfg, own, sizeof(own) / sizeof(own[0]), err, errlen);
}

static int kafka_open(struct verify *v, char *err, size_t errlen)
{
    char reason[512];
    rd_kafka_conf_t *conf = kafka_conf(v, err, errlen);
    if (!conf) return EXIT_USAGE;
    v->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, reason, sizeof(reason));
    if (!v->rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, errlen, "kafka consumer: %s", reason);
        return EXIT_USAGE;
    }
    kafka_conf_started(v->rk);
    rd_kafka_poll_set_consumer(v->rk); /* callbacks served by consumer_poll */
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_part(const void *pa, const void *pb)
{
    const struct part *x = pa, *y = pb;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

/* Cluster metadata, retried while a wanted topic has no leader yet. */
static int kafka_metadata(struct verify *v, const char **want, size_t nwant,
                          const struct rd_kafka_metadata **md, char *err, size_t errlen)
{
    for (;;) {
        int t = remaining_ms(v);
        rd_kafka_resp_err_t e = rd_kafka_metadata(v->rk, 1, NULL, md, t ? t : 1);
        bool transient = false;
        for (int i = 0; !e && i < (*md)->topic_cnt; i++) {
            const struct rd_kafka_metadata_topic *mt = &(*md)->topics[i];
            if (bsearch(&mt->topic, want, nwant, sizeof(*want), cmp_str) &&
                (mt->err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                 mt->partition_cnt == 0))
                transient = true;
        }
        if (!e && !transient) return 0;
        if (!e) rd_kafka_metadata_destroy(*md);
        *md = NULL;
        if (!remaining_ms(v)) {
            snprintf(err, errlen, "kafka: metadata: %s (within %d ms)",
                     e ? rd_kafka_err2str(e) : "leader not available", v->opt->timeout_ms);
            return EXIT_FATAL;
        }
        clock_sleep_ms(200);
    }
}

/* Adds every partition of the wanted topics in md to v->parts. */
static int collect_parts(struct verify *v, const char **want, size_t nwant,
                         const struct rd_kafka_metadata *md, char *err, size_t errlen)
{
    size_t cap = 0;
    for (int i = 0; i < md->topic_cnt; i++)
        cap += (size_t)md->topics[i].partition_cnt;
    v->parts = calloc(cap + 1, sizeof(*v->parts));
    if (!v->parts) {
        snprintf(err, errlen, "out of memory");
        return EXIT_FATAL;
    }
    for (int i = 0; i < md->topic_cnt; i++) {
        const struct rd_kafka_metadata_topic *mt = &md->topics[i];
        const char **w = bsearch(&mt->topic, want, nwant, sizeof(*want), cmp_str);
        if (!w || mt->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) continue;
        if (mt->err) {
            snprintf(err, errlen, "kafka: topic %s: %s", mt->topic,
                     rd_kafka_err2str(mt->err));
            return EXIT_FATAL;
        }
        for (int j = 0; j < mt->partition_cnt; j++)
            v->parts[v->nparts++] =
                (struct part){.topic = *w,
                              .partition = mt->partitions[j].id,
                              .dlq = v->dlq_topic && !strcmp(*w, v->dlq_topic)};
    }
    qsort(v->parts, v->nparts, sizeof(*v->parts), cmp_part);
    return 0;
}

/* Warns about the wanted topics the cluster does not have. */
static void warn_absent_topics(const struct verify *v, const char **want, size_t nwant)
{
    for (size_t i = 0; i < nwant; i++) {
        bool found = false;
        for (size_t j = 0; j < v->nparts && !found; j++)
            found = v->parts[j].topic == want[i];
        if (found) continue;
        if (v->dlq_topic && !strcmp(want[i], v->dlq_topic))
            log_info("the dead-letter topic %s does not exist: nothing was dead-lettered "
                     "there",
                     want[i]);
        else
            log_warn("topic %s does not exist: its events count as missing", want[i]);
    }
}

/* The rows' topics (from the audit) and the dead-letter topic, unless it is
 * one of them, into *want (the caller frees the array). Sets v->dlq_topic. */
static int wanted_topics(struct verify *v, const char ***want, size_t *nwant, char *err,
                         size_t errlen)
{
    const char **rows;
    size_t n;
    const char *dlq = v->cfg->errors_dlq_topic;
    if (audit_topics(v->audit, &rows, &n) != 0 ||
        !(*want = realloc(rows, (n + 1) * sizeof(*rows)))) {
        free(rows);
        snprintf(err, errlen, "out of memory");
        return EXIT_FATAL;
    }
    v->dlq_topic = dlq && dlq[0] ? dlq : NULL;
    for (size_t i = 0; v->dlq_topic && i < n; i++)
        if (!strcmp((*want)[i], dlq)) v->dlq_topic = NULL; /* read as a rows' topic */
    if (v->dlq_topic) (*want)[n++] = v->dlq_topic;
    *nwant = n;
    return 0;
}

/* v->parts: every partition of the rows' topics and the dead-letter topic. */
static int kafka_partitions(struct verify *v, char *err, size_t errlen)
{
    const char **want;
    size_t nwant;
    const struct rd_kafka_metadata *md = NULL;
    if (wanted_topics(v, &want, &nwant, err, errlen) != 0) return EXIT_FATAL;
    if (nwant) qsort(want, nwant, sizeof(*want), cmp_str);
    int rc = nwant ? kafka_metadata(v, want, nwant, &md, err, errlen) : 0;
    if (!rc && md) rc = collect_parts(v, want, nwant, md, err, errlen);
    if (!rc) warn_absent_topics(v, want, nwant);
    if (md) rd_kafka_metadata_destroy(md);
    free(want);
    return rc;
}

static int kafka_watermarks(struct verify *v, struct part *pt, char *err, size_t errlen)
{
    for (;;) {
        int t = remaining_ms(v);
        rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
            v->rk, pt->topic, pt->partition, &pt->lo, &pt->hi, t ? t : 1);
        if (!e) break;
        if (!remaining_ms(v)) {
            snprintf(err, errlen, "kafka: watermarks of %s [%" PRId32 "]: %s", pt->topic,
                     pt->partition, rd_kafka_err2str(e));
            return EXIT_FATAL;
        }
        clock_sleep_ms(200);
    }
    if (pt->lo > 0 && !v->opt->since)
        log_warn("%s [%" PRId32 "] starts at offset %" PRId64
                 ": older messages were deleted by the broker (retention); their events "
                 "count as missing",
                 pt->topic, pt->partition, pt->lo);
    pt->next = pt->lo;
    return 0;
}

/* offsets_for_times(ts) for the partitions that have messages and, if
 * only_unset, whose start is still unknown (next < 0). */
static int offsets_for_time(struct verify *v, int64_t ts, bool only_unset,
                            rd_kafka_topic_partition_list_t **out, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new((int)v->nparts + 1);
    for (size_t i = 0; i < v->nparts; i++) {
        const struct part *pt = &v->parts[i];
        if (pt->hi > pt->lo && (!only_unset || pt->next < 0))
            rd_kafka_topic_partition_list_add(l, pt->topic, pt->partition)->offset = ts;
    }
    int t = remaining_ms(v);
    rd_kafka_resp_err_t e = l->cnt ? rd_kafka_offsets_for_times(v->rk, l, t ? t : 1) : 0;
    for (int i = 0; !e && i < l->cnt; i++)
        e = l->elems[i].err;
    if (e) {
        snprintf(err, errlen, "kafka: offsets for --since: %s", rd_kafka_err2str(e));
        rd_kafka_topic_partition_list_destroy(l);
        return EXIT_FATAL;
    }
    *out = l;
    return 0;
}

static struct part *find_part(struct verify *v, const char *topic, int32_t partition)
{
    struct part key = {.topic = topic, .partition = partition};
    return bsearch(&key, v->parts, v->nparts, sizeof(*v->parts), cmp_part);
}

/* Sets next from offsets_for_times results (-1: none at or after ts).
 * Returns the number of partitions to read and skip by time. */
static size_t apply_offsets(struct verify *v, const rd_kafka_topic_partition_list_t *l,
                            bool probe)
{
    size_t by_time = 0;
    for (int i = 0; i < l->cnt; i++) {
        struct part *pt = find_part(v, l->elems[i].topic, l->elems[i].partition);
        int64_t off = l->elems[i].offset;
        if (!pt) continue;
        if (!probe)
            pt->next = off >= 0 ? (off > pt->lo ? off : pt->lo) : -1;
        else if (off >= 0) /* the broker does lookups: nothing at or after --since */
            pt->next = pt->hi;
        else { /* no lookups by time: read and skip */
            pt->next = pt->lo;
            pt->by_time = true;
            by_time++;
        }
    }
    return by_time;
}

/* Start offsets for --since. A partition the broker answers -1 for is
 * probed with time 0: a broker that can look up times answers its first
 * offset, one that cannot answers -1 again and is read from the start. */
static int kafka_seek_since(struct verify *v, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l;
    int rc = offsets_for_time(v, v->since_ms, false, &l, err, errlen);
    if (rc) return rc;
    apply_offsets(v, l, false);
    rd_kafka_topic_partition_list_destroy(l);
    if ((rc = offsets_for_time(v, 0, true, &l, err, errlen))) return rc;
    if (apply_offsets(v, l, true))
        log_info("the broker does not look offsets up by time: reading from the start of "
                 "each partition, skipping messages stamped before --since");
    rd_kafka_topic_partition_list_destroy(l);
    return 0;
}

static int kafka_assign(struct verify *v, char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new((int)v->nparts + 1);
    for (size_t i = 0; i < v->nparts; i++) {
        struct part *pt = &v->parts[i];
        if (pt->next < pt->lo) pt->next = pt->lo;
        if ((pt->done = pt->next >= pt->hi))
            v->ndone++;
        else
            rd_kafka_topic_partition_list_add(l, pt->topic, pt->partition)->offset =
                pt->next;
    }
    rd_kafka_resp_err_t e = l->cnt ? rd_kafka_assign(v->rk, l) : 0;
    rd_kafka_topic_partition_list_destroy(l);
    if (!e) return 0;
    snprintf(err, errlen, "kafka: assign: %s", rd_kafka_err2str(e));
    return EXIT_FATAL;
}

/* One consumed message (or dead-letter record) into the audit. */
static int record_message(struct verify *v, const struct part *pt, const rd_kafka_message_t *m,
                          char *err, size_t errlen)
{
    rd_kafka_headers_t *hdrs = NULL;
    const void *val;
    size_t len;
    struct audit_msg am = {.topic = rd_kafka_topic_name(m->rkt),
                           .partition = m->partition,
                           .offset = m->offset,
                           .key = {m->key, m->key_len}};
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        /* The first section whose event_id header the message has (the
         * sections may name their headers differently). */
        for (size_t i = 0; i < v->set.n && !am.event_id.data; i++) {
            const char *id = outbox_header_name(&v->set.maps[i], OC_EVENT_ID);
            const char *version = outbox_header_name(&v->set.maps[i], OC_AGGREGATE_VERSION);
            if (rd_kafka_header_get_last(hdrs, id, &val, &len) || !val) continue;
            am.event_id = (struct slice){val, len};
            if (version && !rd_kafka_header_get_last(hdrs, version, &val, &len) && val)
                am.has_version = audit_parse_version(val, len, &am.version);
        }
        if (pt->dlq && !rd_kafka_header_get_last(hdrs, "dlq_error", &val, &len) && val)
            am.dlq_error = (struct slice){val, len};
    }
    if ((pt->dlq ? audit_add_dead_letter : audit_add_message)(v->audit, &am) == 0) return 0;
    snprintf(err, errlen, "out of memory");
    return EXIT_FATAL;
}

static void part_advance(struct verify *v, struct part *pt, int64_t offset)
{
    pt->next = offset + 1;
    if (pt->next >= pt->hi && !pt->done) {
        pt->done = true;
        v->ndone++;
    }
}

static int on_message(struct verify *v, const rd_kafka_message_t *m, char *err,
                      size_t errlen)
{
    struct part *pt =
        m->rkt ? find_part(v, rd_kafka_topic_name(m->rkt), m->partition) : NULL;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        if (pt && !pt->done && m->offset >= pt->hi) part_advance(v, pt, pt->hi - 1);
        return 0;
    }
    if (m->err) {
        snprintf(err, errlen, "kafka: %s [%" PRId32 "]: %s",
                 m->rkt ? rd_kafka_topic_name(m->rkt) : "-", m->partition,
                 rd_kafka_message_errstr(m));
        if (m->err == RD_KAFKA_RESP_ERR__FATAL ||
            m->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
            m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION)
            return EXIT_FATAL;
        log_warn("%s", err);
        return 0;
    }
    if (!pt || pt->done || m->offset < pt->next) return 0; /* refetched */
    if (pt->by_time && rd_kafka_message_timestamp(m, NULL) >= v->since_ms)
        pt->by_time = false;
    int rc = m->offset < pt->hi && !pt->by_time ? record_message(v, pt, m, err, errlen) : 0;
    part_advance(v, pt, m->offset);
    return rc;
}

/* Reads every assigned partition up to its high watermark. */
static int kafka_consume(struct verify *v, char *err, size_t errlen)
{
    while (v->ndone < v->nparts) {
        int t = remaining_ms(v);
        if (!t) {
            size_t i = 0;
            while (v->parts[i].done)
                i++;
            snprintf(err, errlen,
                     "kafka: %s [%" PRId32 "]: at offset %" PRId64 ", end %" PRId64
                     " not reached within %d ms (%zu partitions unfinished)",
                     v->parts[i].topic, v->parts[i].partition, v->parts[i].next,
                     v->parts[i].hi, v->opt->timeout_ms, v->nparts - v->ndone);
            return EXIT_FATAL;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(v->rk, t < 500 ? t : 500);
        if (!m) continue;
        int rc = on_message(v, m, err, errlen);
        rd_kafka_message_destroy(m);
        if (rc) return rc;
    }
    return 0;
}

static int kafka_read(struct verify *v, char *err, size_t errlen)
{
    v->deadline = clock_mono_ms() + v->opt->timeout_ms;
    int rc = kafka_open(v, err, errlen);
    if (!rc) rc = kafka_partitions(v, err, errlen);
    for (size_t i = 0; !rc && i < v->nparts; i++)
        rc = kafka_watermarks(v, &v->parts[i], err, errlen);
    if (!rc && v->opt->since) rc = kafka_seek_since(v, err, errlen);
    if (!rc) rc = kafka_assign(v, err, errlen);
    if (!rc) rc = kafka_consume(v, err, errlen);
    if (!rc)
        log_info("read %zu partitions of the outbox topics%s", v->nparts,
                 v->dlq_topic ? " and the dead-letter topic" : "");
    return rc;
}

/* ---- the report ---------------------------------------------------------- */

/* Bytes as text: printable ASCII and UTF-8 as is, others as \xNN. */
static void print_bytes(FILE *f, struct slice s)
{
    if (!s.data) {
        fputs("(none)", f);
        return;
    }
    for (size_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.data[i];
        if (c < 0x20 || c == 0x7f || c == '\\')
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

static void print_example(FILE *f, enum audit_kind k, const struct audit_example *e)
{
    fputs("    event_id=", f);
    print_bytes(f, e->event_id);
    fprintf(f, " topic=%s key=", e->topic ? e->topic : "(none)");
    print_bytes(f, e->key);
    if (e->partition >= 0)
        fprintf(f, " partition=%" PRId32 " offset=%" PRId64, e->partition, e->offset);
    if (k == AK_DUPLICATE) fprintf(f, " (%zu copies)", e->copies);
    if (k == AK_DEAD_LETTERED) {
        fputs(" dlq_error=", f);
        print_bytes(f, e->dlq_error);
    }
    if (k == AK_ORDER && e->split)
        fprintf(f, ": key also on partition %" PRId32, e->first_partition);
    else if (k == AK_ORDER)
        fprintf(f, ": aggregate_version %" PRId64 " after %" PRId64, e->version,
                e->prev_version);
    fputc('\n', f);
}

static void print_examples(FILE *f, const struct audit_report *r, enum audit_kind k)
{
    for (size_t i = 0; i < r->nexamples[k]; i++)
        print_example(f, k, &r->examples[k][i]);
}

/* Per section with [outbox] message_prefix: its message events have no
 * row, so verify cannot tell them from another producer's or find the
 * missing ones. */
static void print_message_note(const struct verify *v, FILE *f)
{
    char label[160];
    for (size_t i = 0; i < v->set.n; i++) {
        if (!v->set.maps[i].message_prefix) continue;
        fprintf(f,
                "  (with %s message_prefix = %s: events of outbox_emit() messages have "
                "no row, so those in the rows' topics count here, indistinguishable from "
                "another producer's; topics only messages go to are not read; missing "
                "messages cannot be found)\n",
                config_outbox_label(config_outbox_at(v->cfg, i), label, sizeof(label)),
                v->set.maps[i].message_prefix);
    }
}

/* {"[outbox.NAME]": prefix, ...} of the sections with message_prefix (an
 * empty object: none). NULL on out of memory. */
static json_t *json_message_prefixes(const struct verify *v)
{
    json_t *o = json_object();
    char label[160];
    for (size_t i = 0; o && i < v->set.n; i++) {
        if (!v->set.maps[i].message_prefix) continue;
        config_outbox_label(config_outbox_at(v->cfg, i), label, sizeof(label));
        if (json_object_set_new(o, label, json_string(v->set.maps[i].message_prefix)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* Whether the report is clean for the configured [delivery] mode. */
static bool report_ok(const struct verify *v, const struct audit_report *r)
{
    return audit_report_ok(r, v->cfg->delivery_mode == DELIVERY_EXACTLY_ONCE);
}

static void print_human(const struct verify *v, const struct audit_report *r)
{
    FILE *f = stdout;
    fprintf(f, "outboxd verify: %zu rows of %s", r->rows, v->tables);
    if (v->opt->since) fprintf(f, " created at or after %s", v->opt->since);
    fprintf(f, ", %zu messages in %zu topics (%zu partitions)\n", r->messages, r->topics,
            v->nparts);
    fprintf(f, "missing:          %zu\n", r->missing);
    print_examples(f, r, AK_MISSING);
    fprintf(f, "dead-lettered:    %zu", r->dead_lettered);
    if (v->dlq_topic)
        fprintf(f, " (in %s, not in their topic; partition and offset there)", v->dlq_topic);
    fputc('\n', f);
    print_examples(f, r, AK_DEAD_LETTERED);
    if (r->dead_letters_unmatched)
        fprintf(f, "dead-letter records of no row: %zu of %zu (no event_id, or not in the "
                   "table)\n",
                r->dead_letters_unmatched, r->dead_letters);
    fprintf(f, "duplicates:       %zu extra copies of %zu events\n", r->duplicates,
            r->duplicate_events);
    print_examples(f, r, AK_DUPLICATE);
    fprintf(f, "unknown:          %zu\n", r->unknown);
    print_message_note(v, f);
    print_examples(f, r, AK_UNKNOWN);
    fprintf(f,
            "order violations: %zu (%zu aggregate_version going backwards, %zu keys on "
            "more than one partition)\n",
            r->order_violations, r->version_regressions, r->split_keys);
    print_examples(f, r, AK_ORDER);
    if (!report_ok(v, r))
        fprintf(f, "result: FAILED (%s)\n",
                v->cfg->delivery_mode == DELIVERY_EXACTLY_ONCE
                    ? "missing, out of order, or duplicates in exactly_once mode"
                    : "missing or out of order");
    else if (r->dead_lettered)
        fprintf(f, "result: OK (%zu dead-lettered)\n", r->dead_lettered);
    else
        fprintf(f, "result: OK\n");
}

/* A JSON string of s, or null (NULL slice, or not valid UTF-8). */
static json_t *json_slice(struct slice s)
{
    json_t *j = s.data ? json_stringn(s.data, s.len) : NULL;
    return j ? j : json_null();
}

/* o[key] = val, stealing val; false when val is NULL (OOM) or on OOM. */
static bool jset(json_t *o, const char *key, json_t *val)
{
    return val && json_object_set_new(o, key, val) == 0;
}

static bool jint(json_t *o, const char *key, int64_t n)
{
    return jset(o, key, json_integer((json_int_t)n));
}

/* Fields of one example; which ones depends on its kind. */
static json_t *json_example(enum audit_kind k, const struct audit_example *e)
{
    json_t *o = json_object();
    bool ok = o && jset(o, "event_id", json_slice(e->event_id)) &&
              jset(o, "topic", e->topic ? json_string(e->topic) : json_null()) &&
              jset(o, "key", json_slice(e->key));
    if (ok && e->partition >= 0)
        ok = jint(o, "partition", e->partition) && jint(o, "offset", e->offset);
    if (ok && e->has_version) ok = jint(o, "aggregate_version", e->version);
    if (ok && k == AK_DEAD_LETTERED) ok = jset(o, "dlq_error", json_slice(e->dlq_error));
    if (ok && k == AK_DUPLICATE) ok = jint(o, "copies", (int64_t)e->copies);
    if (ok && k == AK_ORDER && e->split)
        ok = jset(o, "kind", json_string("split")) &&
             jint(o, "first_partition", e->first_partition);
    else if (ok && k == AK_ORDER)
        ok = jset(o, "kind", json_string("version")) &&
             jint(o, "previous_version", e->prev_version);
    if (ok) return o;
    json_decref(o);
    return NULL;
}

static json_t *json_examples(const struct audit_report *r, enum audit_kind k)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < r->nexamples[k]; i++) {
        json_t *e = json_example(k, &r->examples[k][i]);
        if (!e || json_array_append_new(a, e) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The whole report as one object (the caller decrefs), NULL on OOM. */
static json_t *json_report(const struct verify *v, const struct audit_report *r)
{
    json_t *o = json_object();
    bool ok =
        o && jset(o, "table", json_string(v->tables)) &&
        jset(o, "since", v->opt->since ? json_string(v->opt->since) : json_null()) &&
        jint(o, "rows", (int64_t)r->rows) && jint(o, "messages", (int64_t)r->messages) &&
        jint(o, "topics", (int64_t)r->topics) && jint(o, "missing", (int64_t)r->missing) &&
        jset(o, "missing_examples", json_examples(r, AK_MISSING)) &&
        jset(o, "dlq_topic", v->dlq_topic ? json_string(v->dlq_topic) : json_null()) &&
        jint(o, "dead_lettered", (int64_t)r->dead_lettered) &&
        jset(o, "dead_lettered_examples", json_examples(r, AK_DEAD_LETTERED)) &&
        jint(o, "dead_letters", (int64_t)r->dead_letters) &&
        jint(o, "dead_letters_unmatched", (int64_t)r->dead_letters_unmatched) &&
        jint(o, "duplicates", (int64_t)r->duplicates) &&
        jint(o, "duplicate_events", (int64_t)r->duplicate_events) &&
        jset(o, "duplicate_examples", json_examples(r, AK_DUPLICATE)) &&
        jint(o, "unknown", (int64_t)r->unknown) &&
        jset(o, "message_prefixes", json_message_prefixes(v)) &&
        jset(o, "unknown_examples", json_examples(r, AK_UNKNOWN)) &&
        jint(o, "order_violations", (int64_t)r->order_violations) &&
        jint(o, "version_regressions", (int64_t)r->version_regressions) &&
        jint(o, "split_keys", (int64_t)r->split_keys) &&
        jset(o, "order_examples", json_examples(r, AK_ORDER)) &&
        jset(o, "ok", json_boolean(report_ok(v, r)));
    if (ok) return o;
    json_decref(o);
    return NULL;
}

/* One line of JSON on stdout. Returns 0, -1 on OOM or a write error. */
static int print_json(const struct verify *v, const struct audit_report *r)
{
    json_t *o = json_report(v, r);
    int rc = -1;
    if (o && json_dumpf(o, stdout, JSON_COMPACT) == 0 && fputc('\n', stdout) != EOF &&
        fflush(stdout) == 0)
        rc = 0;
    json_decref(o);
    return rc;
}

/* ---- options ------------------------------------------------------------- */

void verify_options_init(struct verify_options *opt)
{
    *opt = (struct verify_options){.timeout_ms = VERIFY_DEFAULT_TIMEOUT_MS,
                                   .isolation = "read_committed"};
}

bool verify_option_takes_value(const char *arg)
{
    return !strcmp(arg, "--since") || !strcmp(arg, "--timeout") ||
           !strcmp(arg, "--isolation");
}

int verify_option(struct verify_options *opt, int argc, char **argv, int *i, char *err,
                  size_t errlen)
{
    const char *a = argv[*i];
    if (!strcmp(a, "--json")) {
        opt->json = true;
        return 1;
    }
    if (!verify_option_takes_value(a)) return 0;
    if (*i + 1 >= argc) {
        snprintf(err, errlen, "%s needs a value", a);
        return -1;
    }
    const char *val = argv[++*i];
    if (!strcmp(a, "--since")) {
        opt->since = val;
        return 1;
    }
    if (!strcmp(a, "--isolation")) {
        if (strcmp(val, "read_committed") != 0 && strcmp(val, "read_uncommitted") != 0) {
            snprintf(err, errlen,
                     "--isolation \"%s\": expected read_committed or read_uncommitted", val);
            return -1;
        }
        opt->isolation = val;
        return 1;
    }
    int64_t ms = 0;
    char why[128];
    bool parsed = duration_parse(val, 0, &ms, why, sizeof(why)) == 0;
    if (!parsed || ms <= 0 || ms > INT32_MAX) {
        snprintf(err, errlen, "--timeout \"%s\": %s", val,
                 !parsed     ? why
                 : ms <= 0   ? "must be positive (250ms, 10s, 2m)"
                             : "too long");
        return -1;
    }
    opt->timeout_ms = (int)ms;
    return 1;
}

void verify_options_usage(FILE *out)
{
    fprintf(out,
            "      --since TIME    only rows created at or after TIME (created_at), and\n"
            "                      the messages from that time on\n"
            "      --timeout DUR   how long to wait for the broker (metadata, offsets,\n"
            "                      reading up to the end of every partition) and for the\n"
            "                      Postgres connection: 250ms, 10s, 2m (default 60s)\n"
            "      --isolation LVL read_committed (default: what a consumer of\n"
            "                      [delivery] mode = exactly_once sees; aborted copies are\n"
            "                      left out) or read_uncommitted (every copy written)\n"
            "      --json          one JSON object on stdout instead of the summary\n");
}

/* ---- the run ------------------------------------------------------------- */

/* audit_run, then once more after looking the unknown event_ids up. */
static int run_audit(struct verify *v, struct audit_report *r, char *err, size_t errlen)
{
    size_t nunknown;
    if (audit_run(v->audit, r) != 0) goto oom;
    audit_unknown_ids(v->audit, &nunknown);
    if (!nunknown) return 0;
    int rc = pg_recheck_unknown(v, err, errlen);
    if (rc) return rc;
    if (audit_run(v->audit, r) != 0) goto oom;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return EXIT_FATAL;
}

static int prepare(struct verify *v, char *err, size_t errlen)
{
    if (v->opt->timeout_ms <= 0) {
        snprintf(err, errlen, "timeout %d ms: must be positive", v->opt->timeout_ms);
        return EXIT_USAGE;
    }
    if (config_outbox_set(v->cfg, &v->set, err, errlen) != 0) return EXIT_USAGE;
    for (size_t i = 0; i < v->set.n; i++)
        if (!outbox_header_name(&v->set.maps[i], OC_EVENT_ID)) {
            const struct outbox_spec *s = config_outbox_at(v->cfg, i);
            char label[160];
            snprintf(err, errlen,
                     "%s headers = %s carries no event_id: verify matches messages to rows "
                     "by it (add event_id, or event_id:NAME)",
                     config_outbox_label(s, label, sizeof(label)), s->headers);
            return EXIT_USAGE;
        }
    v->map = &v->set.maps[0];
    if (!(v->tables = outbox_set_tables(&v->set))) {
        snprintf(err, errlen, "out of memory");
        return EXIT_FATAL;
    }
    if (!(v->audit = audit_new())) {
        snprintf(err, errlen, "out of memory");
        return EXIT_FATAL;
    }
    return 0;
}

static void cleanup(struct verify *v)
{
    if (v->rk) {
        rd_kafka_consumer_close(v->rk);
        rd_kafka_destroy(v->rk);
    }
    free(v->parts);
    free_layout(v);
    free(v->qtable);
    free(v->qevent_id);
    if (v->conn) PQfinish(v->conn);
    audit_free(v->audit);
    outbox_set_free(&v->set);
    free(v->tables);
}

int verify_run(const struct config *cfg, const struct verify_options *opt)
{
    struct verify v = {.cfg = cfg, .opt = opt};
    struct audit_report r;
    char err[1024] = "";
    int rc = prepare(&v, err, sizeof(err));
    if (!rc) rc = pg_connect(&v, err, sizeof(err));
    for (size_t i = 0; !rc && i < v.set.n; i++) rc = pg_read_table(&v, i, err, sizeof(err));
    if (!rc) rc = kafka_read(&v, err, sizeof(err));
    if (!rc) rc = run_audit(&v, &r, err, sizeof(err));
    if (!rc && opt->json && print_json(&v, &r) != 0) {
        snprintf(err, sizeof(err), "writing the JSON report failed");
        rc = EXIT_FATAL;
    }
    if (!rc && !opt->json) print_human(&v, &r);
    if (rc) log_error("verify: could not run: %s", err);
    cleanup(&v);
    return rc ? VERIFY_COULD_NOT_RUN : report_ok(&v, &r) ? VERIFY_CLEAN : VERIFY_PROBLEMS;
}
