/*
 * check_repair.c - whether `outboxd repair` (repair.h) could close the gap
 * if the slot were lost: it needs a way to tell which rows were committed
 * after the last ACKed transaction (track_commit_timestamp, or [outbox]
 * repair_column), and the rows themselves (an outbox whose rows are
 * deleted right after insert keeps nothing to re-publish); and whether it
 * and `outboxd republish` can put a transaction's rows in insert order
 * (the table's [outbox] order_column).
 */
#include "check_int.h"
#include "config_outbox.h"
#include "repairplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows inserted into, deleted from and live in the outbox table since the
 * statistics were reset (pg_stat_user_tables). False when unknown. */
static bool row_counts(struct ck *k, long long *inserted, long long *deleted, long long *live)
{
    char err[1024];
    const char *params[] = {k->oid};
    PGresult *r = ck_query(k, REPAIR_ROW_COUNTS_SQL, 1, params, err, sizeof(err));
    bool ok = r && PQntuples(r) == 1;
    if (ok) {
        *inserted = atoll(PQgetvalue(r, 0, 0));
        *deleted = atoll(PQgetvalue(r, 0, 1));
        *live = atoll(PQgetvalue(r, 0, 2));
    }
    PQclear(r);
    return ok;
}

/* Whether [outbox] repair_column was set (file, environment, --set), not
 * left at its default. */
static bool column_set_explicitly(const struct outbox_spec *s)
{
    for (size_t i = 0; i < config_key_count(); i++) {
        const struct config_key *k = config_key_at(i);
        if (!strcmp(k->section, "outbox") && !strcmp(k->key, "repair_column"))
            return s->source[i] != CONFIG_SRC_DEFAULT && s->source[i] != CONFIG_SRC_PRESET;
    }
    return false;
}

/* The time source: track_commit_timestamp, else the column. Returns a
 * description (static or in buf), or NULL after reporting a FAIL/warn. A
 * default column the table does not have is no source (a FAIL only when
 * it was set). */
static const char *time_source(struct ck *k, const char *what, char *buf, size_t len)
{
    const struct outbox_spec *c = k->spec;
    char err[1024];
    PGresult *r = ck_query(k, "SHOW track_commit_timestamp", 0, NULL, err, sizeof(err));
    bool on = r && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "on") == 0;
    PQclear(r);
    if (on) return "track_commit_timestamp = on (rows by their commit time)";
    const char *col = c->repair_column;
    if (col && *col && k->table_ok && !ck_find_col(k, col) && !column_set_explicitly(c))
        col = NULL;
    if (col && *col) {
        if (k->table_ok && !ck_find_col(k, col)) {
            ck_report(k, CHECK_FAIL, what, "set [outbox] repair_column to a column of the table",
                      "[outbox] repair_column = %s: the outbox table has no such column",
                      c->repair_column);
            return NULL;
        }
        snprintf(buf, len, "repair_column = %s, margin %lld s", col,
                 (long long)(c->repair_margin_ms / 1000));
        return buf;
    }
    ck_report(k, CHECK_WARN, what,
              "ALTER SYSTEM SET track_commit_timestamp = on (takes a restart), or set [outbox] "
              "repair_column to an insert-time column such as created_at",
              "if the slot were lost, outboxd repair could not tell which rows to send "
              "again: track_commit_timestamp is off and [outbox] repair_column is not set");
    return NULL;
}

/* What repair cannot do when events also come from messages. */
static const char *no_message_repair(const struct ck *k)
{
    return k->map_ok && k->map.message_prefix
               ? "; events of outbox_emit() messages (this section's message_prefix) have no "
                 "row: repair cannot send them again"
               : "";
}

/* Whether the outbox table's column col is an identity column or has a
 * nextval() default. False when not, or not known. */
static bool from_sequence(struct ck *k, const char *col)
{
    char err[1024];
    const char *params[] = {k->oid, col};
    PGresult *r = ck_query(k,
                           "SELECT a.attidentity <> '' OR coalesce(pg_catalog.pg_get_expr("
                           "d.adbin, d.adrelid) LIKE 'nextval(%', false) FROM "
                           "pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_attrdef d ON "
                           "d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attrelid = "
                           "$1::oid AND a.attname = $2",
                           2, params, err, sizeof(err));
    bool yes = r && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return yes;
}

/* Whether repair and republish can put a transaction's rows in insert
 * order: the table has [outbox] order_column (repairplan.h, "The order
 * within one time"). A table without it is warned of with what it risks;
 * a column set explicitly that the table lacks fails, as repair and
 * republish refuse it. */
static void order_key(struct ck *k)
{
    const struct outbox_spec *s = k->spec;
    const char *what = "repair order", *col = s->order_column;
    if (!k->table_ok) return ck_skip(k, what, "the outbox table was not checked");
    if (col && *col && ck_find_col(k, col)) {
        ck_report(k, CHECK_OK, what, NULL,
                  "repair and republish put a transaction's rows in the order of %s (%s)", col,
                  from_sequence(k, col)
                      ? "filled from a sequence: insert order"
                      : "not filled from a sequence here: it must grow in insert order, at "
                        "least within each aggregate_id, as aggregate_version does");
        return;
    }
    bool set = col && *col && config_outbox_key_set(s, "order_column");
    ck_report(k, set ? CHECK_FAIL : CHECK_WARN, what, REPAIR_NO_ORDER_FIX,
              "the outbox table has no order column (%s%s%s): if repair or republish had "
              "to send rows again, %s",
              col && *col ? "[outbox] order_column = " : "[outbox] order_column is not set",
              col && *col ? col : "", col && *col ? ", no such column" : "",
              REPAIR_NO_ORDER_RISK);
}

/* The gap repair line: the time source and whether the rows are kept. */
static void gap_repair(struct ck *k)
{
    const struct config *c = k->cfg;
    const char *what = "gap repair";
    char src[256];
    if (!k->pg_ok) return ck_skip(k, what, "no connection to postgres");
    if (c->delivery_mode == DELIVERY_EXACTLY_ONCE) {
        /* Nothing to fix in the set-up: said, not warned (a warning on every
         * check of a supported configuration would teach people to skip
         * warnings). */
        ck_report(k, CHECK_OK, what, NULL,
                  "not available with [delivery] mode = exactly_once (README, Gap repair): "
                  "after a slot loss outboxd halts, and outboxd verify lists what is missing");
        return;
    }
    const char *how = time_source(k, what, src, sizeof(src));
    if (!how) return;
    /* Most inserted rows gone (repair_rows_gone()): the application deletes
     * after insert (or keeps rows only briefly), and a lost slot's events
     * are gone with them. */
    long long ins = 0, del = 0, live = -1;
    bool known = k->table_ok && row_counts(k, &ins, &del, &live);
    if (known && repair_rows_gone(ins, del, live)) {
        ck_report(k, CHECK_WARN, what,
                  "keep outbox rows longer than a slot loss may take to notice and repair "
                  "(delete only rows older than a retention period, e.g. a day)",
                  "most rows are deleted from the outbox table (%lld of %lld inserted since "
                  "the statistics were reset, %lld live): outboxd repair can re-publish "
                  "only rows still there; %s; on_slot_loss = %s%s",
                  del, ins, live, how, slot_loss_name(c->pg_on_slot_loss),
                  no_message_repair(k));
        return;
    }
    char kept[96] = " (deletes not known)";
    if (known) snprintf(kept, sizeof(kept), " (%lld of %lld inserted deleted)", del, ins);
    ck_report(k, CHECK_OK, what, NULL, "rows are kept%s; %s; on_slot_loss = %s%s", kept, how,
              slot_loss_name(c->pg_on_slot_loss), no_message_repair(k));
}

void check_repairable(struct ck *k)
{
    gap_repair(k);
    if (k->pg_ok) order_key(k);
}
