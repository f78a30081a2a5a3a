/*
 * repubsel.c - the selection of `outboxd republish` (see repubsel.h): its
 * options and its statements. No I/O.
 */
#include "repubsel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgsql.h"
#include "repairplan.h"
#include "str.h"

/* ---- options ---- */

/* Appends each comma-separated id of list (spaces around trimmed). 0, or
 * -1 with err (an empty id, out of memory). */
static int add_ids(struct repub_options *o, const char *list, char *err, size_t errlen)
{
    const char *p = list;
    while (*p || p == list) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        while (n && (*p == ' ' || *p == '\t')) p++, n--;
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
        if (n == 0) {
            snprintf(err, errlen, "--event-id \"%s\": an empty event id", list);
            return -1;
        }
        if (o->nids == o->capids) {
            size_t cap = o->capids ? o->capids * 2 : 8;
            char **ids = realloc(o->ids, cap * sizeof(*ids));
            if (!ids) goto oom;
            o->ids = ids;
            o->capids = cap;
        }
        if (!(o->ids[o->nids] = strndup(p, n))) goto oom;
        o->nids++;
        if (!comma) break;
        p = comma + 1;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* Sets *slot to v once. 0, or -1 with err naming opt. */
static int set_once(const char **slot, const char *opt, const char *v, char *err,
                    size_t errlen)
{
    if (*slot) {
        snprintf(err, errlen, "%s given twice", opt);
        return -1;
    }
    if (!*v) {
        snprintf(err, errlen, "%s needs a value", opt);
        return -1;
    }
    *slot = v;
    return 0;
}

/* --aggregate TYPE:ID. 0, or -1 with err. */
static int set_aggregate(struct repub_options *o, const char *v, char *err, size_t errlen)
{
    const char *colon = strchr(v, ':');
    if (!colon || colon == v || !colon[1]) {
        snprintf(err, errlen,
                 "--aggregate \"%s\": give TYPE:ID (or --aggregate-type TYPE --aggregate-id "
                 "ID when the type holds a ':')",
                 v);
        return -1;
    }
    if (o->agg_type || o->agg_id) {
        snprintf(err, errlen, "one aggregate only: --aggregate given twice");
        return -1;
    }
    if (!(o->agg_buf = strdup(v))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    o->agg_buf[colon - v] = '\0';
    o->agg_type = o->agg_buf;
    o->agg_id = o->agg_buf + (colon - v) + 1;
    return 0;
}

int repub_option(struct repub_options *o, int argc, char **argv, int *i, char *err,
                 size_t errlen)
{
    const char *opt = argv[*i];
    if (!strcmp(opt, "--dry-run")) {
        o->dry_run = true;
        return 1;
    }
    static const char *const valued[] = {"--event-id", "--aggregate", "--aggregate-type",
                                         "--aggregate-id", "--since", "--until", "--outbox"};
    size_t k = 0;
    while (k < sizeof(valued) / sizeof(valued[0]) && strcmp(opt, valued[k])) k++;
    if (k == sizeof(valued) / sizeof(valued[0])) return 0;
    if (*i + 1 >= argc) {
        snprintf(err, errlen, "%s needs a value", opt);
        return -1;
    }
    const char *v = argv[++*i];
    int rc;
    switch (k) {
    case 0: rc = add_ids(o, v, err, errlen); break;
    case 1: rc = set_aggregate(o, v, err, errlen); break;
    case 2: rc = set_once(&o->agg_type, opt, v, err, errlen); break;
    case 3: rc = set_once(&o->agg_id, opt, v, err, errlen); break;
    case 4: rc = set_once(&o->since, opt, v, err, errlen); break;
    case 5: rc = set_once(&o->until, opt, v, err, errlen); break;
    default: rc = set_once(&o->outbox, opt, v, err, errlen); break;
    }
    return rc == 0 ? 1 : -1;
}

int repub_options_check(const struct repub_options *o, char *err, size_t errlen)
{
    if (!o->agg_type != !o->agg_id) {
        snprintf(err, errlen, "an aggregate needs both its type and its id (--aggregate "
                              "TYPE:ID, or --aggregate-type with --aggregate-id)");
        return -1;
    }
    if (o->until && !o->since) {
        snprintf(err, errlen, "--until needs --since (the range is --since TS [--until TS])");
        return -1;
    }
    if (!o->nids && !o->agg_type && !o->since) {
        snprintf(err, errlen, "nothing selected: give --event-id, --aggregate or --since "
                              "(combined, they select the rows that match all)");
        return -1;
    }
    return 0;
}

void repub_options_free(struct repub_options *o)
{
    for (size_t i = 0; i < o->nids; i++) free(o->ids[i]);
    free(o->ids);
    free(o->agg_buf);
    memset(o, 0, sizeof(*o));
}

const char *repub_describe(const struct repub_options *o, const char *time_column, char *out,
                           size_t outlen)
{
    size_t n = 0;
    out[0] = '\0';
#define ADD(...)                                                                           \
    do {                                                                                   \
        if (n < outlen) n += (size_t)snprintf(out + n, outlen - n, __VA_ARGS__);          \
    } while (0)
    if (o->nids) {
        ADD("event_id in (");
        for (size_t i = 0; i < o->nids; i++) ADD("%s%s", i ? ", " : "", o->ids[i]);
        ADD(")");
    }
    if (o->agg_type) ADD("%saggregate %s:%s", n ? " and " : "", o->agg_type, o->agg_id);
    const char *tc = time_column ? time_column : "";
    if (o->since) ADD("%s%s >= '%s'", n ? " and " : "", tc, o->since);
    if (o->until) ADD(" and %s < '%s'", tc, o->until);
#undef ADD
    return out;
}

/* ---- statements ---- */

/* The quoted name of m's column c (malloc'd), or NULL. */
static char *col(const struct outbox_map *m, enum outbox_col c)
{
    return pgsql_quote_ident(m->columns[c] ? m->columns[c] : "");
}

/* time_column quoted (malloc'd; "" when none is set), or NULL. */
static char *time_col(const char *time_column)
{
    return pgsql_quote_ident(time_column ? time_column : "");
}

/* The WHERE condition of o, its parameters into q. malloc'd, or NULL. */
static char *where_of(const struct outbox_map *m, const struct repub_options *o,
                      const char *time_column, const struct repub_table *t, struct repub_sql *q)
{
    char *w = strdup("true"), *eid = col(m, OC_EVENT_ID), *at = col(m, OC_AGGREGATE_TYPE),
         *ai = col(m, OC_AGGREGATE_ID), *tc = time_col(time_column), *next = NULL;
    if (!w || !eid || !at || !ai || !tc) goto fail;
    if (o->nids) {
        struct pgsql_array a = {0};
        for (size_t i = 0; i < o->nids; i++) pgsql_array_add(&a, o->ids[i]);
        const char *text = pgsql_array_text(&a);
        q->ids_param = text ? strdup(text) : NULL;
        pgsql_array_free(&a);
        if (!q->ids_param) goto fail;
        q->params[q->nparams++] = q->ids_param;
        next = str_printf("%s AND %s = ANY($%d::%s[])", w, eid, q->nparams, t->id_type);
        free(w);
        if (!(w = next)) goto fail;
    }
    if (o->agg_type) {
        q->params[q->nparams++] = o->agg_type;
        q->params[q->nparams++] = o->agg_id;
        next = str_printf("%s AND %s = $%d AND %s = $%d", w, at, q->nparams - 1, ai,
                          q->nparams);
        free(w);
        if (!(w = next)) goto fail;
    }
    if (o->since) {
        q->params[q->nparams++] = o->since;
        next = str_printf("%s AND %s >= $%d::timestamptz", w, tc, q->nparams);
        free(w);
        if (!(w = next)) goto fail;
    }
    if (o->until) {
        q->params[q->nparams++] = o->until;
        next = str_printf("%s AND %s < $%d::timestamptz", w, tc, q->nparams);
        free(w);
        if (!(w = next)) goto fail;
    }
    goto out;
fail:
    free(w);
    w = NULL;
out:
    free(eid);
    free(at);
    free(ai);
    free(tc);
    return w;
}

/* The ORDER BY list (repubsel.h, "Order"). malloc'd, or NULL. */
static char *order_of(const struct outbox_map *m, const struct repub_options *o,
                      const char *time_column, const struct repub_table *t)
{
    char *eid = col(m, OC_EVENT_ID), *ver = col(m, OC_AGGREGATE_VERSION),
         *tc = time_col(time_column), *txn = repair_txn_order_sql(t->order_column),
         *oc = pgsql_quote_ident(t->order_column ? t->order_column : ""), *ord = NULL;
    if (eid && ver && tc && txn && oc) {
        const char *ocs = t->order_column ? oc : "",
                   *ocn = t->order_column ? " NULLS FIRST, " : "";
        char *rest =
            t->commit_ts
                ? str_printf("pg_catalog.pg_xact_commit_timestamp(xmin) NULLS FIRST, %s", txn)
            : t->has_time_column ? str_printf("%s NULLS FIRST, %s%s%s", tc, ocs, ocn, eid)
                                 : str_printf("%s%s%s", ocs, ocn, eid);
        if (rest && o->agg_type && t->has_version)
            ord = str_printf("%s NULLS FIRST, %s", ver, rest);
        else
            ord = rest, rest = NULL;
        free(rest);
    }
    free(eid);
    free(ver);
    free(tc);
    free(txn);
    free(oc);
    return ord;
}

int repub_sql_build(const struct outbox_map *m, const struct repub_options *o,
                    const char *time_column, const struct repub_table *t, struct repub_sql *q,
                    char *err, size_t errlen)
{
    memset(q, 0, sizeof(*q));
    if (o->since && !t->has_time_column) {
        snprintf(err, errlen,
                 "--since: the outbox table %s.%s has no column \"%s\" ([outbox] "
                 "repair_column): set it to the table's insert-time column",
                 m->schema, m->table, time_column ? time_column : "");
        return -1;
    }
    char *eid = col(m, OC_EVENT_ID);
    char *table = pgsql_quote_qualified(m->schema, m->table);
    char *where = where_of(m, o, time_column, t, q);
    char *order = order_of(m, o, time_column, t);
    if (table && where && order && eid) {
        q->select = str_printf("SELECT * FROM %s WHERE %s ORDER BY %s", table, where, order);
        q->count = str_printf("SELECT count(*) FROM %s WHERE %s", table, where);
        /* $1 is the ids' array when ids are given */
        if (o->nids)
            q->missing = str_printf("SELECT u::text FROM unnest($1::%s[]) u WHERE u NOT IN "
                                    "(SELECT %s FROM %s WHERE %s)",
                                    t->id_type, eid, table, where);
    }
    free(eid);
    free(table);
    free(where);
    free(order);
    if (!q->select || !q->count || (o->nids && !q->missing)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void repub_sql_free(struct repub_sql *q)
{
    free(q->select);
    free(q->count);
    free(q->missing);
    free(q->ids_param);
    memset(q, 0, sizeof(*q));
}
