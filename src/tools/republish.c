/*
 * republish.c - `outboxd republish` (see republish.h): looks up the table,
 * reads the selection in one snapshot, publishes it (rowpub.h), waits for
 * the ACKs and says what was sent.
 */
#include "republish.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_outbox.h"
#include "deadletter.h"
#include "exitcode.h"
#include "log.h"
#include "outbox.h"
#include "pgconn.h"
#include "pgsql.h"
#include "producer.h"
#include "repairplan.h"
#include "rowpub.h"
#include "str.h"

/* The longest wait for the last ACKs after the last row was produced,
 * beyond librdkafka's message.timeout.ms (which fails what cannot be
 * delivered in time: reported, not waited for). */
#define REPUBLISH_ACK_WAIT_MS (10 * 60 * 1000)

/* Events ACKed per topic. */
struct topic_count {
    char *topic; /* owned */
    uint64_t n;
};

struct republish {
    const struct config *c;
    const struct outbox_spec *spec; /* the outbox section (--outbox) */
    struct config plain; /* c, but at_least_once: the producer's (exactly_once) */
    const struct repub_options *o;
    struct outbox_map map;
    char *table;         /* "schema"."table", owned */
    PGconn *db;
    struct repub_table t;
    char *id_type;       /* owned: t.id_type */
    char oid[16];
    struct repub_sql q;
    struct deadletter dlq; /* its configuration only: the dead letters' form */
    struct producer *prod;
    struct rowpub pub;
    uint64_t selected;
    char missing[1024];  /* ids asked for and not found, ", "-separated */
    size_t nmissing;
    struct topic_count *topics; /* owned */
    size_t ntopics;
    bool oom;
    char what[1024];     /* the selection, for messages */
};

/* ---- statements ---- */

/* Runs sql with params (pgsql_exec()); the result when its status is
 * expect, else NULL after logging what failed, with *code set: EXIT_USAGE
 * for a value PostgreSQL cannot read (SQLSTATE class 22: a timestamp, an
 * event id) or a missing table, column or privilege (class 42), else
 * EXIT_FATAL. The caller PQclears. */
static PGresult *db_exec(struct republish *r, const char *what, const char *sql, int n,
                         const char *const *params, ExecStatusType expect, int *code)
{
    struct pgsql_error e;
    PGresult *res = pgsql_exec(r->db, r->c->pg_conninfo, what, sql, n, params, expect, &e);
    if (res) return res;
    bool usage = !strncmp(e.sqlstate, "22", 2) || !strncmp(e.sqlstate, "42", 2);
    *code = usage ? EXIT_USAGE : EXIT_FATAL;
    log_error("republish: %s: %s", what, e.msg);
    return NULL;
}

/* Runs a statement that returns nothing. 0, or an exit code logged. */
static int db_command(struct republish *r, const char *what, const char *sql, int n,
                      const char *const *params)
{
    int code = EXIT_FATAL;
    PGresult *res = db_exec(r, what, sql, n, params, PGRES_COMMAND_OK, &code);
    PQclear(res);
    return res ? 0 : code;
}

/* ---- 1. the table ---- */

/* Connects. 0, or EXIT_FATAL logged. */
static int connect_db(struct republish *r)
{
    char err[1024];
    struct pgconn_opts po = {.conninfo = r->c->pg_conninfo, .app_name = "outboxd-republish",
                             .timeout_s = 10};
    r->db = pgconn_connect(&po);
    if (r->db && PQstatus(r->db) == CONNECTION_OK) return 0;
    pgconn_message(r->db, NULL, r->c->pg_conninfo, "republish: connecting", err, sizeof(err));
    log_error("%s", err);
    return EXIT_FATAL;
}

/* Whether name is the column called col (NULL or "": none). */
static bool is_col(const char *name, const char *col) { return col && *col && !strcmp(name, col); }

/* The table has no [outbox] order_column (repairplan.h, "The order within
 * one time"): refused when the key was set, else said with what it risks.
 * 0, or EXIT_USAGE logged. */
static int check_order_column(struct republish *r)
{
    const char *col = r->spec->order_column;
    char label[160];
    if (r->t.order_column) return 0;
    config_outbox_label(r->spec, label, sizeof(label));
    if (col && *col && config_outbox_key_set(r->spec, "order_column")) {
        log_error("republish: %s order_column = %s: the table %s has no such column (add "
                  "it: sql/outbox_order_column.sql, or unset order_column)",
                  label, col, r->table);
        return EXIT_USAGE;
    }
    log_warn("republish: the table %s has no order column (%s order_column%s%s): %s; %s",
             r->table, label, col && *col ? " = " : " is not set", col && *col ? col : "",
             REPAIR_NO_ORDER_RISK, REPAIR_NO_ORDER_FIX);
    return 0;
}

/* The table's oid and columns, and track_commit_timestamp, into r->t. 0,
 * or an exit code logged. */
static int look_up_table(struct republish *r)
{
    int code = EXIT_FATAL;
    const char *p[1] = {r->table};
    PGresult *res = db_exec(r, "looking up the outbox table ([outbox] table)",
                            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), "
                            "a.attrelid::text, current_setting('track_commit_timestamp') "
                            "FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1::regclass "
                            "AND a.attnum > 0 AND NOT a.attisdropped",
                            1, p, PGRES_TUPLES_OK, &code);
    if (!res) return code;
    for (int i = 0; i < PQntuples(res); i++) {
        const char *name = PQgetvalue(res, i, 0);
        snprintf(r->oid, sizeof(r->oid), "%s", PQgetvalue(res, i, 2));
        r->t.commit_ts = !strcmp(PQgetvalue(res, i, 3), "on");
        if (is_col(name, r->map.columns[OC_EVENT_ID]) && !r->id_type)
            r->id_type = strdup(PQgetvalue(res, i, 1));
        r->t.has_time_column |= is_col(name, r->spec->repair_column);
        r->t.has_version |= is_col(name, r->map.columns[OC_AGGREGATE_VERSION]);
        if (is_col(name, r->spec->order_column)) r->t.order_column = r->spec->order_column;
    }
    PQclear(res);
    if (!r->id_type) {
        log_error("republish: the outbox table %s has no column \"%s\" ([outbox] "
                  "column.event_id)",
                  r->table, r->map.columns[OC_EVENT_ID]);
        return EXIT_USAGE;
    }
    r->t.id_type = r->id_type;
    return check_order_column(r);
}

/* ---- 2. the selection, in one snapshot ---- */

/* Opens the snapshot, counts the selection and finds the ids asked for
 * that it lacks. 0, or an exit code logged. */
static int count_selection(struct republish *r)
{
    int code = EXIT_FATAL;
    if ((code = db_command(r, "BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0,
                           NULL)))
        return code;
    PGresult *res = db_exec(r, "counting the selected rows", r->q.count, r->q.nparams,
                            r->q.params, PGRES_TUPLES_OK, &code);
    if (!res) return code;
    r->selected = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (!r->q.missing) return 0;
    if (!(res = db_exec(r, "looking for the event ids", r->q.missing, r->q.nparams,
                        r->q.params, PGRES_TUPLES_OK, &code)))
        return code;
    size_t n = 0;
    for (int i = 0; i < PQntuples(res); i++, r->nmissing++)
        if (n < sizeof(r->missing))
            n += (size_t)snprintf(r->missing + n, sizeof(r->missing) - n, "%s%s", i ? ", " : "",
                                  PQgetvalue(res, i, 0));
    PQclear(res);
    return 0;
}

/* Nothing (or not everything asked for) was found: says why. When the
 * table's rows are deleted after insert, that is the reason. */
static void explain_empty(struct republish *r)
{
    const char *p[1] = {r->oid};
    int code;
    long long ins = 0, del = 0, live = -1;
    PGresult *res = db_exec(r, "reading the table's statistics", REPAIR_ROW_COUNTS_SQL, 1, p,
                            PGRES_TUPLES_OK, &code);
    bool known = res && PQntuples(res) == 1;
    if (known) {
        ins = atoll(PQgetvalue(res, 0, 0));
        del = atoll(PQgetvalue(res, 0, 1));
        live = atoll(PQgetvalue(res, 0, 2));
    }
    PQclear(res);
    if (r->nmissing)
        log_error("republish: %zu of the event ids asked for are not in %s%s: %s", r->nmissing,
                  r->table, r->o->agg_type || r->o->since ? " (with the rest of the selection)"
                                                        : "",
                  r->missing);
    if (known && repair_rows_gone(ins, del, live)) {
        log_error("republish: the rows are gone: %lld of the %lld rows inserted into %s since "
                  "the statistics were reset were deleted, %lld are live: the application "
                  "deletes outbox rows after insert (or keeps them briefly), so they cannot "
                  "be republished. To republish later, keep the rows and delete them with a "
                  "retention job instead (e.g. rows older than 7 days, by [outbox] "
                  "repair_column)",
                  del, ins, r->table, live);
        return;
    }
    if (!r->selected)
        log_error("republish: nothing matched the selection (%s) in %s: nothing sent",
                  r->what, r->table);
}

/* ---- 3. publishing ---- */

/* Counts an ACKed event under its topic. */
static void count_topic(void *ctx, const struct delivery_report *dr)
{
    struct republish *r = ctx;
    const char *topic = dr->topic ? dr->topic : "?";
    for (size_t i = 0; i < r->ntopics; i++)
        if (!strcmp(r->topics[i].topic, topic)) {
            r->topics[i].n++;
            return;
        }
    struct topic_count *t = realloc(r->topics, (r->ntopics + 1) * sizeof(*t));
    char *name = strdup(topic);
    if (!t || !name) {
        free(name);
        if (t) r->topics = t;
        r->oom = true;
        return;
    }
    r->topics = t;
    r->topics[r->ntopics++] = (struct topic_count){name, 1};
}

/* Declares the cursor, produces every row, waits for the reports. 0
 * when everything was ACKed; else EXIT_FATAL (logged by the caller). */
static int publish(struct republish *r)
{
    char *decl = str_printf("DECLARE outboxd_republish NO SCROLL CURSOR FOR %s", r->q.select);
    int code = decl ? db_command(r, "selecting the rows", decl, r->q.nparams, r->q.params)
                    : EXIT_FATAL;
    free(decl);
    if (code) return code;
    if (rowpub_cursor(&r->pub, r->db, r->c->pg_conninfo, "outboxd_republish") != 0) {
        rowpub_await(&r->pub, REPUBLISH_ACK_WAIT_MS); /* what was sent: said truthfully */
        return EXIT_FATAL;
    }
    return rowpub_await(&r->pub, REPUBLISH_ACK_WAIT_MS) == 0 ? 0 : EXIT_FATAL;
}

/* "t1 3, t2 5" into out. */
static const char *topics_text(const struct republish *r, char *out, size_t outlen)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->ntopics && n < outlen; i++)
        n += (size_t)snprintf(out + n, outlen - n, "%s%s %" PRIu64, i ? ", " : "",
                              r->topics[i].topic, r->topics[i].n);
    return out;
}

/* What was sent: stdout on success, the log otherwise. */
static void report(const struct republish *r, int code)
{
    const struct rowpub *p = &r->pub;
    char per[2048], dl[160] = "";
    if (p->dead_lettered)
        snprintf(dl, sizeof(dl), " (%" PRIu64 " of them dead letters to %s: events that cannot "
                 "be published)", p->dead_lettered, r->c->errors_dlq_topic);
    if (code == 0 && r->o->dry_run) {
        printf("republish: dry run: would send %" PRIu64 " events%s of %s (%s): first event "
               "%s, last event %s; nothing sent\n",
               rowpub_sent(p), dl, r->table, r->what, p->first_id, p->last_id);
        return;
    }
    if (code == 0) {
        printf("republish: sent %" PRIu64 " events%s of %s (%s), all ACKed by Kafka: first "
               "event %s, last event %s; per topic: %s\n",
               rowpub_sent(p), dl, r->table, r->what, p->first_id, p->last_id,
               topics_text(r, per, sizeof(per)));
        return;
    }
    log_error("republish: NOT complete: %" PRIu64 " of %" PRIu64 " selected events were "
              "ACKed by Kafka%s%s%s%s%s; run the same republish again once that is fixed "
              "(consumers de-duplicate by event_id)",
              p->acked_n, r->selected, p->acked_n ? " (per topic: " : "",
              p->acked_n ? topics_text(r, per, sizeof(per)) : "", p->acked_n ? ")" : "",
              p->failed ? "; first failure: " : p->stopped_at[0] ? "; stopped: " : "",
              p->failed ? p->failure : p->stopped_at[0] ? p->stopped_at : "");
}

/* ---- the run ---- */

/* Sets up the map, the table name and the producer's configuration. 0, or
 * EXIT_USAGE logged. */
static int prepare(struct republish *r)
{
    char err[1024];
    int i = config_outbox_find(r->c, r->o->outbox, err, sizeof(err));
    if (i < 0) {
        log_error("republish: --outbox: %s", err);
        return EXIT_USAGE;
    }
    r->spec = config_outbox_at(r->c, (size_t)i);
    if (config_outbox_map(r->spec, &r->map, err, sizeof(err)) != 0) {
        log_error("republish: %s", err);
        return EXIT_USAGE;
    }
    r->table = pgsql_quote_qualified(r->map.schema, r->map.table);
    if (!r->table) {
        log_error("republish: out of memory");
        return EXIT_FATAL;
    }
    repub_describe(r->o, r->spec->repair_column, r->what, sizeof(r->what));
    if (r->map.timestamp_commit)
        log_info("republish: [outbox] timestamp = commit: the copies carry the time they are "
                 "sent, as a row read from the table has no commit time");
    /* exactly_once: outside transactions (republish.h) */
    r->plain = *r->c;
    r->plain.delivery_mode = DELIVERY_AT_LEAST_ONCE;
    if (r->c->delivery_mode == DELIVERY_EXACTLY_ONCE)
        log_info("republish: [delivery] mode = exactly_once: the copies are produced outside "
                 "Kafka transactions (idempotent producer); read_committed consumers see "
                 "them: they de-duplicate by event_id");
    deadletter_init(&r->dlq, r->c, NULL, (struct sink){0});
    r->pub = (struct rowpub){.map = &r->map,
                             .who = "republish",
                             .dlq = r->c->errors_policy == ERRORS_DLQ ? &r->dlq : NULL,
                             .dry_run = r->o->dry_run,
                             .acked = count_topic,
                             .ctx = r};
    return 0;
}

static int run(struct republish *r)
{
    char err[1024];
    int code;
    if ((code = prepare(r)) || (code = connect_db(r)) || (code = look_up_table(r)))
        return code;
    if (repub_sql_build(&r->map, r->o, r->spec->repair_column, &r->t, &r->q, err,
                        sizeof(err)) != 0) {
        log_error("republish: %s", err);
        return EXIT_USAGE;
    }
    if ((code = count_selection(r))) return code;
    if (r->selected == 0 || r->nmissing) explain_empty(r);
    if (r->selected == 0) return EXIT_FATAL;
    log_info("republish: %" PRIu64 " rows of %s selected (%s)%s", r->selected, r->table,
             r->what, r->o->dry_run ? ": dry run, nothing is sent" : "");
    if (!r->o->dry_run) {
        if (!(r->prod = producer_new(&r->plain, rowpub_on_delivery, &r->pub, err,
                                     sizeof(err)))) {
            log_error("republish: kafka: %s", err);
            return EXIT_USAGE;
        }
        r->pub.prod = r->prod;
    }
    code = publish(r);
    if (code == 0 && r->pub.rows != r->selected) {
        snprintf(r->pub.stopped_at, sizeof(r->pub.stopped_at),
                 "%" PRIu64 " rows were counted but %" PRIu64 " read", r->selected, r->pub.rows);
        code = EXIT_FATAL;
    }
    if (code == 0 && r->oom) code = EXIT_FATAL;
    report(r, code);
    PQclear(PQexec(r->db, "COMMIT"));
    if (code == 0 && r->nmissing) return EXIT_FATAL; /* said by explain_empty() */
    return code;
}

int republish_run(const struct config *cfg, const struct repub_options *o)
{
    struct republish r = {.c = cfg, .o = o};
    int code = run(&r);
    if (r.prod) {
        producer_flush(r.prod, 1000);
        producer_free(r.prod);
    }
    if (r.db) PQfinish(r.db);
    for (size_t i = 0; i < r.ntopics; i++) free(r.topics[i].topic);
    free(r.topics);
    repub_sql_free(&r.q);
    rowpub_free(&r.pub); /* after the producer: its last reports may add copies */
    deadletter_free(&r.dlq);
    outbox_map_free(&r.map);
    free(r.table);
    free(r.id_type);
    return code;
}
