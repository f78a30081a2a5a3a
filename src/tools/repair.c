/*
 * repair.c - `outboxd repair` (see repair.h): the slot's loss repaired
 * from the outbox tables, in an exported snapshot, before streaming on.
 * The decisions are repairplan.c's; this file does the I/O in order:
 * read the state, decide, (drop,) create, re-publish, wait for the ACKs,
 * write the offset file.
 */
#include "repair.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_outbox.h"
#include "exitcode.h"
#include "log.h"
#include "offset.h"
#include "outbox.h"
#include "pgconn.h"
#include "pgsql.h"
#include "producer.h"
#include "repairplan.h"
#include "resume.h"
#include "rowpub.h"
#include "slotcmd.h"
#include "str.h"
#include "stream.h"

/* Rows fetched from the cursor at a time. */
#define REPAIR_FETCH 1000

/* The longest wait for the last ACKs after the last row was produced,
 * beyond librdkafka's own message.timeout.ms (which fails a message that
 * cannot be delivered in time: that is reported, not waited for). */
#define REPAIR_ACK_WAIT_MS (10 * 60 * 1000)

/* One outbox table's cursor over the rows to re-publish, in commit order
 * (repair_select_sql()); several are merged on time and transaction. */
struct rcursor {
    char name[48];          /* outboxd_repair_<i> */
    PGresult *res;          /* the batch fetched last; NULL before the first */
    int row, n;             /* the next row of res, and its rows */
    bool last_batch;        /* res was the cursor's last (fewer than REPAIR_FETCH) */
    struct relation rel;    /* res's columns (names borrowed from res) */
    struct col_value *vals; /* rel.ncols of them; owned */
};

struct repair {
    const struct config *c;
    const struct repair_options *o;
    struct outbox_set set; /* every outbox table */
    char *tables;          /* "schema.table, ..." of them */
    struct rcursor *cur;   /* set.n of them; owned */
    const char **order;    /* set.n: each section's order_column, NULL where the
                            * table lacks it (then xmin, ctid); owned array */
    struct stream *st;  /* the replication connection: creates the slot and
                         * holds its exported snapshot */
    PGconn *db;         /* a normal connection: reads in the snapshot */
    struct producer *prod;
    struct offset_state file;
    int have_file;
    struct server_ident id;
    struct slot_info si;
    struct repair_plan plan;
    bool slot_created;  /* by this run: dropped again on failure */
    struct slot_created created;
    int64_t created_at_us; /* server clock just before the slot was created */
    /* the re-published rows */
    struct rowpub pub;
    uint64_t selected;
    int64_t untimed;
    char first_time[64], last_time[64]; /* of the rows selected, "" if none */
};

/* ---- statements on the normal connection ---- */

/* Runs sql with params (pgsql_exec()); the result when its status is
 * expect, else NULL after logging what failed (the caller PQclears). */
static PGresult *db_exec(struct repair *r, const char *what, const char *sql, int n,
                         const char *const *params, ExecStatusType expect)
{
    struct pgsql_error e;
    PGresult *res = pgsql_exec(r->db, r->c->pg_conninfo, what, sql, n, params, expect, &e);
    if (!res) log_error("repair: %s: %s", what, e.msg);
    return res;
}

/* One value of a one-row query into out (NULL: ""). 0, or -1 logged. */
static int db_value(struct repair *r, const char *what, const char *sql, int n,
                    const char *const *params, char *out, size_t outlen)
{
    PGresult *res = db_exec(r, what, sql, n, params, PGRES_TUPLES_OK);
    if (!res) return -1;
    snprintf(out, outlen, "%s", PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "");
    PQclear(res);
    return 0;
}

/* The server's clock, Unix epoch microseconds, or -1 logged. */
static int64_t server_now_us(struct repair *r)
{
    char v[32];
    if (db_value(r, "reading the server's clock",
                 "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint", 0, NULL, v,
                 sizeof(v)) != 0)
        return -1;
    return strtoll(v, NULL, 10);
}

/* ---- 1. the state and the decision ---- */

/* Connects both ways and reads the offset file, the server, the slot and
 * track_commit_timestamp; --since as microseconds. 0, or an exit code. */
static int read_state(struct repair *r, struct repair_facts *f)
{
    const struct config *c = r->c;
    char err[1024], v[64];
    if ((r->have_file = offset_read(c->offsets_file, &r->file, err, sizeof(err))) < 0) {
        log_error("repair: %s", err);
        return EXIT_USAGE;
    }
    if (!(r->st = stream_connect(c->pg_conninfo, err, sizeof(err))) ||
        stream_identify(r->st, &r->id, err, sizeof(err)) != 0 ||
        stream_slot_info(r->st, c->pg_slot, &r->si, err, sizeof(err)) != 0) {
        log_error("repair: %s", err);
        return EXIT_FATAL;
    }
    struct pgconn_opts po = {.conninfo = c->pg_conninfo, .app_name = "outboxd-repair",
                             .timeout_s = 10};
    r->db = pgconn_connect(&po);
    if (!r->db || PQstatus(r->db) != CONNECTION_OK) {
        pgconn_message(r->db, NULL, c->pg_conninfo, "repair: connecting", err, sizeof(err));
        log_error("%s", err);
        return EXIT_FATAL;
    }
    if (db_value(r, "SHOW track_commit_timestamp", "SHOW track_commit_timestamp", 0, NULL, v,
                 sizeof(v)) != 0)
        return EXIT_FATAL;
    *f = (struct repair_facts){.file = r->have_file ? &r->file : NULL,
                               .offsets_path = c->offsets_file,
                               .slot = c->pg_slot,
                               .plugin = plugin_name(c->pg_plugin),
                               .database = r->id.dbname,
                               .slot_exists = r->si.exists,
                               .slot_active = r->si.active,
                               .slot_active_pid = r->si.active_pid,
                               .slot_wal_status = r->si.wal_status,
                               .track_commit_timestamp = strcmp(v, "on") == 0,
                               .time_column = config_outbox_at(c, 0)->repair_column,
                               .margin_us = config_outbox_at(c, 0)->repair_margin_ms * 1000,
                               .at_start = r->o->at_start};
    if (r->o->since) {
        char us[32];
        const char *p[1] = {r->o->since};
        if (db_value(r, "--since (a timestamp PostgreSQL reads, e.g. '2026-12-03 16:00+00')",
                     "SELECT (extract(epoch FROM $1::timestamptz) * 1000000)::bigint", 1, p,
                     us, sizeof(us)) != 0)
            return EXIT_USAGE;
        f->since_us = strtoll(us, NULL, 10);
        if (f->since_us <= 0) {
            log_error("repair: --since %s is not after 1970", r->o->since);
            return EXIT_USAGE;
        }
    }
    return 0;
}

/* What state the slot was found in, for the report. */
static const char *slot_state(const struct repair *r)
{
    if (!r->si.exists) return "missing";
    return strcmp(r->si.wal_status, "lost") == 0 ? "invalidated (wal_status = lost)" : "present";
}

/* ---- 2. the new slot ---- */

/* Drops an invalidated slot, then creates it with an exported snapshot
 * (a failover slot when [postgres] failover asks for one). 0, or
 * EXIT_USAGE / EXIT_FATAL logged. */
static int make_slot(struct repair *r)
{
    const struct config *c = r->c;
    char err[1024];
    /* A failover slot when the daemon would create one ([postgres] failover);
     * decided before anything is dropped. */
    int failover = slotcmd_failover_wanted(c->pg_failover,
                                           stream_server_major(r->st), err, sizeof(err));
    if (failover < 0) {
        log_error("repair: %s", err);
        return EXIT_USAGE;
    }
    /* On a standby (decoding there, PostgreSQL 16+) the slot is the
     * standby's own and cannot be a failover slot: asking for one fails the
     * repair with the server's refusal. */
    bool standby = false;
    if (failover == 1 && stream_in_recovery(r->st, &standby, err, sizeof(err)) != 0) {
        log_error("repair: %s", err);
        return EXIT_FATAL;
    }
    if (standby && c->pg_failover == FAILOVER_ON)
        log_warn("repair: [postgres] failover = on, but this server is a standby: its slot "
                 "cannot be a failover slot (it stays on this standby)");
    if (r->plan.drop_slot) {
        if (stream_drop_slot(r->st, c->pg_slot, err, sizeof(err)) != 0) {
            log_error("repair: %s", err);
            return EXIT_FATAL;
        }
        log_info("repair: dropped replication slot \"%s\": it was invalidated "
                 "(wal_status = lost) and can never stream again",
                 c->pg_slot);
    }
    if ((r->created_at_us = server_now_us(r)) < 0) return EXIT_FATAL;
    struct slot_create_opts so = {
        .export_snapshot = true, .failover = slotcmd_failover_at_create(failover, standby)};
    if (stream_create_slot(r->st, c->pg_slot, plugin_name(c->pg_plugin), &so, &r->created,
                           err, sizeof(err)) != 0) {
        log_error("repair: %s", err);
        return EXIT_FATAL;
    }
    r->slot_created = true;
    if (!r->created.snapshot[0]) {
        log_error("repair: the server created slot \"%s\" but exported no snapshot",
                  c->pg_slot);
        return EXIT_FATAL;
    }
    char a[LSN_STRLEN];
    log_info("repair: created replication slot \"%s\" (plugin %s%s), consistent point %s, "
             "snapshot %s",
             c->pg_slot, plugin_name(c->pg_plugin), so.failover ? ", failover" : "",
             lsn_format(r->created.consistent_point, a), r->created.snapshot);
    return 0;
}

/* ---- 3. the rows, in the snapshot ---- */

/* Runs a statement that returns nothing. 0, or -1 logged. */
static int db_command(struct repair *r, const char *what, const char *sql, int n,
                      const char *const *params)
{
    PGresult *res = db_exec(r, what, sql, n, params, PGRES_COMMAND_OK);
    PQclear(res);
    return res ? 0 : -1;
}

/* The first (least) or last (greatest) of two timestamptz texts, into
 * a (empty: none). 0, or -1 logged. */
static int pick_time(struct repair *r, char *a, size_t alen, const char *b, bool least)
{
    if (!*b) return 0;
    if (!*a) {
        snprintf(a, alen, "%s", b);
        return 0;
    }
    const char *p[2] = {a, b};
    char v[64];
    if (db_value(r, "comparing times",
                 least ? "SELECT least($1::timestamptz, $2::timestamptz)::text"
                       : "SELECT greatest($1::timestamptz, $2::timestamptz)::text",
                 2, p, v, sizeof(v)) != 0)
        return -1;
    snprintf(a, alen, "%s", v);
    return 0;
}

/* Counts what table i will send (its rows without a time, its rows at or
 * after from, their first and last time) and declares its cursor. 0, or
 * -1 logged. */
static int open_table(struct repair *r, size_t i, const char *from)
{
    const struct outbox_map *m = &r->set.maps[i];
    const char *col = config_outbox_at(r->c, i)->repair_column;
    char *untimed = repair_count_untimed_sql(m, &r->plan, col);
    char *stats = repair_stats_sql(m, &r->plan, col);
    char *sel = repair_select_sql(m, &r->plan, col, r->order[i]);
    snprintf(r->cur[i].name, sizeof(r->cur[i].name), "outboxd_repair_%zu", i);
    char *decl = sel ? str_printf("DECLARE %s NO SCROLL CURSOR FOR %s", r->cur[i].name, sel)
                     : NULL;
    const char *p[1] = {from};
    char v[64];
    PGresult *res = NULL;
    int rc = -1;
    if (!untimed || !stats || !decl) {
        log_error("repair: out of memory");
        goto out;
    }
    if (db_value(r, "counting rows without a time", untimed, 0, NULL, v, sizeof(v)))
        goto out;
    r->untimed += strtoll(v, NULL, 10);
    if (!(res = db_exec(r, "counting the rows to re-publish", stats, 1, p, PGRES_TUPLES_OK)))
        goto out;
    r->selected += strtoull(PQgetvalue(res, 0, 0), NULL, 10);
    if (pick_time(r, r->first_time, sizeof(r->first_time), PQgetvalue(res, 0, 1), true) ||
        pick_time(r, r->last_time, sizeof(r->last_time), PQgetvalue(res, 0, 2), false))
        goto out;
    if (db_command(r, "selecting the rows to re-publish", decl, 1, p) == 0) rc = 0;
out:
    PQclear(res);
    free(untimed);
    free(stats);
    free(sel);
    free(decl);
    return rc;
}

/* Each table's order column (repairplan.h, "The order within one time")
 * into r->order: the section's [outbox] order_column when the table has
 * it. A table without it is repaired in the old order (xmin, ctid) with a
 * warning that says what that risks; an order_column set explicitly that
 * the table lacks is refused. 0, or an exit code logged. */
static int find_order_columns(struct repair *r)
{
    if (!(r->order = calloc(r->set.n, sizeof(*r->order)))) {
        log_error("repair: out of memory");
        return EXIT_FATAL;
    }
    for (size_t i = 0; i < r->set.n; i++) {
        const struct outbox_spec *s = config_outbox_at(r->c, i);
        const struct outbox_map *m = &r->set.maps[i];
        char *qt = pgsql_quote_qualified(m->schema, m->table), v[32], label[160];
        const char *col = s->order_column && *s->order_column ? s->order_column : NULL;
        const char *p[2] = {qt, col};
        if (!qt) {
            log_error("repair: out of memory");
            return EXIT_FATAL;
        }
        int rc = col ? db_value(r, "looking up [outbox] order_column",
                                "SELECT count(*) FROM pg_catalog.pg_attribute WHERE "
                                "attrelid = $1::regclass AND attname = $2 AND attnum > 0 "
                                "AND NOT attisdropped",
                                2, p, v, sizeof(v))
                     : 0;
        free(qt);
        if (rc != 0) return EXIT_FATAL;
        if (col && strcmp(v, "1") == 0) {
            r->order[i] = col;
            continue;
        }
        config_outbox_label(s, label, sizeof(label));
        if (col && config_outbox_key_set(s, "order_column")) {
            log_error("repair: %s order_column = %s: the table %s.%s has no such column "
                      "(add it: sql/outbox_order_column.sql, or unset order_column)",
                      label, col, m->schema, m->table);
            return EXIT_USAGE;
        }
        log_warn("repair: the table %s.%s has no order column (%s order_column%s%s): %s; "
                 "%s",
                 m->schema, m->table, label, col ? " = " : " is not set", col ? col : "",
                 REPAIR_NO_ORDER_RISK, REPAIR_NO_ORDER_FIX);
    }
    return 0;
}

/* Opens a transaction in the slot's exported snapshot, counts what it
 * will send and declares a cursor over each table. from: the start, as
 * text. 0, or EXIT_FATAL logged. */
static int open_snapshot(struct repair *r, const char *from)
{
    char *snap = PQescapeLiteral(r->db, r->created.snapshot, strlen(r->created.snapshot));
    char *set = snap ? str_printf("SET TRANSACTION SNAPSHOT %s", snap) : NULL;
    int rc = EXIT_FATAL;
    if (!set || !(r->cur = calloc(r->set.n, sizeof(*r->cur)))) {
        log_error("repair: out of memory");
        goto out;
    }
    if (db_command(r, "BEGIN", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL) ||
        db_command(r, "using the new slot's exported snapshot", set, 0, NULL))
        goto out;
    for (size_t i = 0; i < r->set.n; i++)
        if (open_table(r, i, from) != 0) goto out;
    rc = 0;
out:
    free(set);
    PQfreemem(snap);
    return rc;
}

/* Maps and produces the next row of table i's cursor (rowpub.h). 0, or
 * -1 logged: a row that cannot be published stops the repair (it would
 * have stopped the relay too, or gone to the dead-letter topic then: see
 * the README). */
static int publish_row(struct repair *r, size_t i)
{
    struct rcursor *k = &r->cur[i];
    return rowpub_row(&r->pub, &r->set.maps[i], k->res, k->row++, &k->rel, k->vals);
}

/* Fetches table i's next batch when its last one is used up. 0, or -1
 * logged. */
static int cursor_fill(struct repair *r, size_t i)
{
    struct rcursor *k = &r->cur[i];
    if (k->row < k->n || k->last_batch) return 0;
    char fetch[96];
    snprintf(fetch, sizeof(fetch), "FETCH FORWARD %d FROM %s", REPAIR_FETCH, k->name);
    PQclear(k->res);
    if (!(k->res = db_exec(r, "fetching rows", fetch, 0, NULL, PGRES_TUPLES_OK))) return -1;
    k->n = PQntuples(k->res);
    k->row = 0;
    k->last_batch = k->n < REPAIR_FETCH;
    int ncols = PQnfields(k->res);
    if (!k->vals) {
        k->rel = (struct relation){.nspname = r->set.maps[i].schema,
                                   .relname = r->set.maps[i].table, .ncols = ncols};
        k->rel.cols = calloc((size_t)ncols + 1, sizeof(*k->rel.cols));
        k->vals = calloc((size_t)ncols + 1, sizeof(*k->vals));
        if (!k->rel.cols || !k->vals) {
            log_error("repair: out of memory");
            return -1;
        }
    }
    for (int c = 0; c < ncols; c++) {
        k->rel.cols[c].name = PQfname(k->res, c);
        k->rel.cols[c].typid = (uint32_t)PQftype(k->res, c); /* bytea: decoded (outbox.h) */
    }
    return 0;
}

/* The table whose next row comes first in commit order (time, then
 * transaction; between tables at one time and transaction, the first
 * section's), or -1 when every cursor is done; -2 on a failed fetch. */
static int next_table(struct repair *r)
{
    int best = -1;
    long long bt = 0, bx = 0;
    for (size_t i = 0; i < r->set.n; i++) {
        struct rcursor *k = &r->cur[i];
        if (cursor_fill(r, i) != 0) return -2;
        if (k->row >= k->n) continue;
        long long t = strtoll(PQgetvalue(k->res, k->row, 0), NULL, 10);
        long long x = strtoll(PQgetvalue(k->res, k->row, 1), NULL, 10);
        if (best < 0 || t < bt || (t == bt && x < bx)) best = (int)i, bt = t, bx = x;
    }
    return best;
}

/* Produces every row of the cursors, merged in commit order. 0, or
 * EXIT_FATAL logged. */
static int publish_rows(struct repair *r)
{
    uint64_t n = 0;
    int i;
    while ((i = next_table(r)) >= 0) {
        if (publish_row(r, (size_t)i) != 0) return EXIT_FATAL;
        if (++n % REPAIR_FETCH == 0) producer_poll(r->prod, 0);
    }
    producer_poll(r->prod, 0);
    return i == -1 ? 0 : EXIT_FATAL;
}

/* Frees the cursors' batches and buffers. */
static void free_cursors(struct repair *r)
{
    for (size_t i = 0; r->cur && i < r->set.n; i++) {
        PQclear(r->cur[i].res);
        free(r->cur[i].rel.cols);
        free(r->cur[i].vals);
    }
    free(r->cur);
    r->cur = NULL;
}

/* Waits until every produced event is reported. 0 when all were ACKed,
 * else EXIT_FATAL logged. */
static int await_acks(struct repair *r)
{
    if (rowpub_await(&r->pub, REPAIR_ACK_WAIT_MS) == 0) return 0;
    log_error("repair: %" PRIu64 " of %" PRIu64 " events were not ACKed by Kafka (%s): "
              "nothing written; run repair again once Kafka takes them (they are sent again)",
              r->pub.produced - r->pub.acked_n, r->pub.produced,
              r->pub.failed ? r->pub.failure : "no report within the wait");
    return EXIT_FATAL;
}

/* ---- 4. the offset file ---- */

/* The new slot's position and the time before it was created: every
 * transaction that commits after the consistent point commits after it. */
static int write_offset(struct repair *r)
{
    char err[1024];
    struct resume_server srv;
    struct offset_state next;
    resume_server_init(&srv, r->id.system, r->id.timeline, r->id.xlogpos, r->id.dbname,
                       r->c->pg_slot, plugin_name(r->c->pg_plugin));
    resume_identity(&srv, r->created.consistent_point, &next);
    next.commit_time_us = r->created_at_us;
    if (offset_write(r->c->offsets_file, &next, err, sizeof(err)) != 0) {
        log_error("repair: %s", err);
        return EXIT_FATAL;
    }
    return 0;
}

/* ---- the run ---- */

/* "a, b": the sections' message prefixes (outbox_emit() events have no
 * row to re-publish); "" when none has one. */
static void message_prefixes(const struct repair *r, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->set.n && used < outlen; i++)
        if (r->set.maps[i].message_prefix)
            used += (size_t)snprintf(out + used, outlen - used, "%s%s", used ? ", " : "",
                                     r->set.maps[i].message_prefix);
}

/* What was done, one paragraph: stdout for the command, the log at start. */
static void report(const struct repair *r, const char *from)
{
    char a[LSN_STRLEN], b[64], text[2048], prefixes[256];
    message_prefixes(r, prefixes, sizeof(prefixes));
    snprintf(text, sizeof(text),
             "repair: slot \"%s\" was %s; re-published %" PRIu64 " events (rows %s at or after "
             "%s: the %s %s less repair_margin %" PRId64 " s), committed from %s to %s, all "
             "ACKed; %" PRId64 " rows have no %s and were not re-published%s; new slot at "
             "consistent point %s; offset file %s written: outboxd streams on from there%s%s%s",
             r->c->pg_slot, slot_state(r), r->pub.produced,
             r->plan.by == REPAIR_BY_COMMIT_TS ? "committed" : "stamped", from,
             r->plan.from_since ? "--since time" : "last ACKed commit time",
             offset_commit_time_text(r->plan.boundary_us, b, sizeof(b)),
             config_outbox_at(r->c, 0)->repair_margin_ms / 1000,
             r->first_time[0] ? r->first_time : "-",
             r->last_time[0] ? r->last_time : "-", r->untimed,
             r->plan.by == REPAIR_BY_COMMIT_TS ? "commit timestamp" : "time in the column",
             r->untimed ? " (committed before track_commit_timestamp was on, or frozen: check "
                          "them with outboxd verify)"
                        : "",
             lsn_format(r->created.consistent_point, a), r->c->offsets_file,
             *prefixes ? "; events of outbox_emit() messages (message_prefix " : "", prefixes,
             *prefixes ? ") committed in the gap have no row and were NOT sent again: they "
                         "are lost with the slot"
                       : "");
    if (r->o->at_start)
        log_info("%s", text);
    else
        printf("%s\n", text);
}

/* Decides and, when it is to run, repairs. An exit code. */
static int run(struct repair *r)
{
    char err[1024], from[64];
    struct repair_facts f;
    int rc = read_state(r, &f);
    if (rc) return rc;
    repair_plan_decide(&f, &r->plan);
    if (r->plan.action == REPAIR_NOT_NEEDED) {
        if (r->o->at_start)
            log_info("repair: %s", r->plan.message);
        else
            printf("repair: %s\n", r->plan.message);
        return EXIT_OK;
    }
    if (r->plan.action == REPAIR_REFUSED) {
        log_error("repair: %s", r->plan.message);
        return EXIT_USAGE;
    }
    for (size_t i = 0; r->plan.by == REPAIR_BY_COLUMN && i < r->set.n; i++) {
        const struct outbox_spec *s = config_outbox_at(r->c, i);
        char label[160];
        if (s->repair_column && *s->repair_column) continue;
        log_error("repair: track_commit_timestamp is off and %s repair_column is not set: "
                  "repair cannot tell which rows of %s.%s were committed after the last ACKed "
                  "transaction (set it to the table's insert-time column, or turn "
                  "track_commit_timestamp on)",
                  config_outbox_label(s, label, sizeof(label)), r->set.maps[i].schema,
                  r->set.maps[i].table);
        return EXIT_USAGE;
    }
    if ((rc = find_order_columns(r))) return rc;
    offset_commit_time_text(r->plan.from_us, from, sizeof(from));
    log_info("repair: slot \"%s\" is %s; re-publishing the rows of %s %s at or after %s",
             r->c->pg_slot, slot_state(r), r->tables,
             r->plan.by == REPAIR_BY_COMMIT_TS ? "committed" : "stamped", from);
    r->pub = (struct rowpub){.who = "repair"};
    if (!(r->prod = producer_new(r->c, rowpub_on_delivery, &r->pub, err, sizeof(err)))) {
        log_error("repair: kafka: %s", err);
        return EXIT_FATAL;
    }
    r->pub.prod = r->prod;
    if ((rc = make_slot(r)) || (rc = open_snapshot(r, from)) || (rc = publish_rows(r)) ||
        (rc = await_acks(r)))
        return rc;
    if (db_command(r, "COMMIT", "COMMIT", 0, NULL) != 0) return EXIT_FATAL;
    if (r->pub.produced != r->selected) {
        log_error("repair: %" PRIu64 " rows were selected but %" PRIu64 " produced: nothing "
                  "written",
                  r->selected, r->pub.produced);
        return EXIT_FATAL;
    }
    if ((rc = write_offset(r))) return rc;
    r->slot_created = false; /* it is the stream's now */
    report(r, from);
    return EXIT_OK;
}

/* A failed run: the new slot dropped (once the snapshot's transaction is
 * over: a command on the replication connection ends the export). */
static void undo(struct repair *r)
{
    char err[1024];
    if (!r->slot_created) return;
    if (r->db) PQclear(PQexec(r->db, "ROLLBACK"));
    if (stream_drop_slot(r->st, r->c->pg_slot, err, sizeof(err)) == 0)
        log_info("repair: dropped the new slot \"%s\" again; the offset file is unchanged",
                 r->c->pg_slot);
    else
        log_error("repair: %s: drop slot \"%s\" by hand before running repair again", err,
                  r->c->pg_slot);
}

int repair_run(const struct config *cfg, const struct repair_options *o)
{
    struct repair r = {.c = cfg, .o = o};
    char err[1024];
    int rc;
    if (cfg->delivery_mode == DELIVERY_EXACTLY_ONCE) {
        log_error("repair: not supported with [delivery] mode = exactly_once yet: the "
                  "position lives in the progress topic, which repair does not write "
                  "(README \"Gap repair\")");
        return EXIT_USAGE;
    }
    if (config_outbox_set(cfg, &r.set, err, sizeof(err)) != 0) {
        log_error("repair: %s", err);
        return EXIT_USAGE;
    }
    if (!(r.tables = outbox_set_tables(&r.set))) {
        log_error("repair: out of memory");
        outbox_set_free(&r.set);
        return EXIT_FATAL;
    }
    for (size_t i = 0; i < r.set.n; i++)
        if (r.set.maps[i].timestamp_commit) {
            log_info("repair: [outbox] timestamp = commit: the rows it re-publishes carry the "
                     "time they are sent, as a row read from the table has no commit time");
            break;
        }
    rc = run(&r);
    if (rc != EXIT_OK) undo(&r);
    if (r.prod) {
        producer_flush(r.prod, 1000);
        producer_free(r.prod);
    }
    if (r.db) PQfinish(r.db);
    if (r.st) stream_close(r.st);
    rowpub_free(&r.pub);
    free_cursors(&r);
    free(r.order);
    outbox_set_free(&r.set);
    free(r.tables);
    return rc;
}
