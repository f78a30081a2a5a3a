/*
 * repairplan.c - the decisions of `outboxd repair` (see repairplan.h):
 * pure, so each refusal and each boundary is unit-tested without a server.
 */
#include "repairplan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgsql.h"
#include "str.h"

/* Fills out as a refusal or a no-op with the formatted message. */
static void conclude(struct repair_plan *out, enum repair_action a, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void conclude(struct repair_plan *out, enum repair_action a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof(out->message), fmt, ap);
    va_end(ap);
    out->action = a;
}

/* The slot: usable (nothing to repair), in use, invalidated (drop it
 * first) or missing. False when that already concluded the plan. */
static bool judge_slot(const struct repair_facts *f, struct repair_plan *out)
{
    if (!f->slot_exists && !f->file && f->at_start && !f->since_us) {
        conclude(out, REPAIR_NOT_NEEDED,
                 "replication slot \"%s\" does not exist and there is no offset file: "
                 "nothing was streamed yet, so nothing can be missing; outboxd creates the "
                 "slot",
                 f->slot);
        return false;
    }
    if (!f->slot_exists) return true;
    if (f->slot_active && f->at_start) {
        conclude(out, REPAIR_NOT_NEEDED,
                 "replication slot \"%s\" is in use by process %d: nothing to repair; "
                 "outboxd waits for the slot",
                 f->slot, f->slot_active_pid);
        return false;
    }
    if (f->slot_active) {
        conclude(out, REPAIR_REFUSED,
                 "replication slot \"%s\" is in use by process %d: stop the outboxd (or other "
                 "client) streaming it; repair runs only while nothing streams the slot",
                 f->slot, f->slot_active_pid);
        return false;
    }
    if (strcmp(f->slot_wal_status, "lost") == 0) {
        out->drop_slot = true; /* it can never stream again */
        return true;
    }
    conclude(out, REPAIR_NOT_NEEDED,
             "replication slot \"%s\" exists and is usable (wal_status %s): nothing to "
             "repair; outboxd streams it from its position",
             f->slot, *f->slot_wal_status ? f->slot_wal_status : "unknown");
    return false;
}

/* The offset file is of this database, slot and plugin. False when not
 * (concluded). */
static bool judge_file(const struct repair_facts *f, struct repair_plan *out)
{
    const struct offset_state *o = f->file;
    if (!o || !o->has_identity) return true; /* --since decides, below */
    if (strcmp(o->slot, f->slot) == 0 && strcmp(o->database, f->database) == 0 &&
        strcmp(o->plugin, f->plugin) == 0)
        return true;
    conclude(out, REPAIR_REFUSED,
             "the offset file %s is of database %s, slot %s, plugin %s, but the configuration "
             "streams database %s, slot %s, plugin %s: it does not say where this stream "
             "was. Use the right file, or give --since TIMESTAMP",
             f->offsets_path, o->database, o->slot, o->plugin, f->database, f->slot, f->plugin);
    return false;
}

/* What the boundary is compared with. False when nothing can (concluded). */
static bool choose_source(const struct repair_facts *f, struct repair_plan *out)
{
    if (f->track_commit_timestamp) {
        out->by = REPAIR_BY_COMMIT_TS;
        return true;
    }
    if (f->time_column && *f->time_column) {
        out->by = REPAIR_BY_COLUMN;
        return true;
    }
    conclude(out, REPAIR_REFUSED,
             "repair cannot tell which rows were committed after the last ACKed transaction: "
             "track_commit_timestamp is off on the server and [outbox] repair_column is not "
             "set. Set repair_column to a column holding each row's insert time (e.g. "
             "created_at, with repair_margin longer than your longest transaction), or turn "
             "track_commit_timestamp on (ALTER SYSTEM SET track_commit_timestamp = on; "
             "restart: it covers transactions committed after that only)");
    return false;
}

/* Where the re-published range starts. False when unknown (concluded). */
static bool choose_boundary(const struct repair_facts *f, struct repair_plan *out)
{
    if (f->since_us > 0) {
        out->boundary_us = f->since_us;
        out->from_since = true;
    } else if (f->file && f->file->commit_time_us > 0) {
        out->boundary_us = f->file->commit_time_us;
    } else {
        conclude(out, REPAIR_REFUSED,
                 "%s%s holds no commit time (%s): repair does not know where delivery "
                 "stopped. Give --since TIMESTAMP: a time at or before the commit of the last "
                 "event you know was delivered (rows from then on are sent again)",
                 f->file ? "the offset file " : "there is no offset file",
                 f->file ? f->offsets_path : "",
                 !f->file ? "nothing was ever stored"
                 : f->file->format < 4 ? "it was written by an older outboxd"
                                       : "no transaction had been ACKed");
        return false;
    }
    out->from_us = out->boundary_us - f->margin_us;
    return true;
}

void repair_plan_decide(const struct repair_facts *f, struct repair_plan *out)
{
    memset(out, 0, sizeof(*out));
    if (!judge_slot(f, out) || !judge_file(f, out) || !choose_source(f, out) ||
        !choose_boundary(f, out))
        return;
    out->action = REPAIR_RUN;
}

/* The expression a row's time is read from, quoted; malloc'd. */
static char *time_expr(const struct repair_plan *p, const char *time_column)
{
    if (p->by == REPAIR_BY_COMMIT_TS) return strdup("pg_catalog.pg_xact_commit_timestamp(xmin)");
    return pgsql_quote_ident(time_column);
}

void repair_order_terms(const char *order_column, struct repair_order *out)
{
    out->n = 0;
    out->term[out->n++] = RT_TIME;
    if (order_column && *order_column) out->term[out->n++] = RT_ORDER;
    out->term[out->n++] = RT_XID;
    out->term[out->n++] = RT_CTID;
}

/* -1, 0, 1 as a is less than, equal to or greater than b. */
#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b) ? 1 : 0)

int repair_row_cmp(const struct repair_order *o, const struct repair_rowpos *a,
                   const struct repair_rowpos *b)
{
    for (size_t i = 0; i < o->n; i++) {
        int c = 0;
        switch (o->term[i]) {
        case RT_TIME: c = CMP(a->time_us, b->time_us); break;
        case RT_ORDER: /* NULLS FIRST */
            c = a->has_order != b->has_order ? (a->has_order ? 1 : -1)
                                             : CMP(a->order, b->order);
            break;
        case RT_XID: c = CMP(a->xid, b->xid); break;
        case RT_CTID:
            c = a->block != b->block ? CMP(a->block, b->block) : CMP(a->line, b->line);
        }
        if (c) return c;
    }
    return 0;
}

/* The terms of o from the first one on, as ORDER BY items (te: the time
 * expression). malloc'd, or NULL. */
static char *order_sql(const struct repair_order *o, size_t first, const char *te,
                       const char *order_column)
{
    char *sql = strdup(""), *q = NULL;
    for (size_t i = first; sql && i < o->n; i++) {
        char *next = NULL;
        const char *sep = i > first ? ", " : "";
        switch (o->term[i]) {
        case RT_TIME: next = str_printf("%s%s%s", sql, sep, te); break;
        case RT_ORDER:
            if ((q = pgsql_quote_ident(order_column)))
                next = str_printf("%s%s%s NULLS FIRST", sql, sep, q);
            free(q);
            q = NULL;
            break;
        /* xmin as a number: the text cast, as xid has no ordering operator */
        case RT_XID: next = str_printf("%s%sxmin::text::bigint", sql, sep); break;
        case RT_CTID: next = str_printf("%s%sctid", sql, sep); break;
        }
        free(sql);
        sql = next;
    }
    return sql;
}

char *repair_txn_order_sql(const char *order_column)
{
    struct repair_order o;
    repair_order_terms(order_column, &o);
    return order_sql(&o, 1, "", order_column); /* term 0 is the time */
}

char *repair_select_sql(const struct outbox_map *m, const struct repair_plan *p,
                        const char *time_column, const char *order_column)
{
    char *te = time_expr(p, time_column), *qt = pgsql_quote_qualified(m->schema, m->table);
    struct repair_order o;
    repair_order_terms(order_column, &o);
    char *order = te ? order_sql(&o, 0, te, order_column) : NULL;
    char *sql = NULL;
    /* In commit order: by time; within one time (one transaction, but for
     * ties), in insert order (repairplan.h, "The order within one time"). */
    if (te && qt && order)
        sql = str_printf("SELECT (extract(epoch FROM %s) * 1000000)::bigint AS "
                         REPAIR_COL_US ", xmin::text::bigint AS " REPAIR_COL_XID ", * FROM %s "
                         "WHERE %s >= $1::timestamptz ORDER BY %s",
                         te, qt, te, order);
    free(te);
    free(qt);
    free(order);
    return sql;
}

char *repair_stats_sql(const struct outbox_map *m, const struct repair_plan *p,
                       const char *time_column)
{
    char *te = time_expr(p, time_column), *qt = pgsql_quote_qualified(m->schema, m->table);
    char *sql = te && qt ? str_printf("SELECT count(*), min(%s)::text, max(%s)::text FROM %s "
                                      "WHERE %s >= $1::timestamptz",
                                      te, te, qt, te)
                         : NULL;
    free(te);
    free(qt);
    return sql;
}

char *repair_count_untimed_sql(const struct outbox_map *m, const struct repair_plan *p,
                               const char *time_column)
{
    char *te = time_expr(p, time_column), *qt = pgsql_quote_qualified(m->schema, m->table);
    char *sql = te && qt ? str_printf("SELECT count(*) FROM %s WHERE %s IS NULL", qt, te) : NULL;
    free(te);
    free(qt);
    return sql;
}

bool repair_rows_gone(long long inserted, long long deleted, long long live)
{
    if (deleted > 0 && deleted * 2 > inserted) return true;
    return inserted > 0 && live == 0;
}
