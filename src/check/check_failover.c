/*
 * check_failover.c - `outboxd check`: is the server side set up so that
 * outboxd's slot survives a failover ([postgres] failover, PostgreSQL 17+
 * failover slots; README "Failover slots (PostgreSQL 17+)")?
 *
 * On the primary (the check's connection): the slot's failover flag, and
 * synchronized_standby_slots (empty: the walsender may send outboxd
 * changes no standby has yet, so a promoted standby can lack events
 * already in Kafka). On each standby: sync_replication_slots,
 * hot_standby_feedback, primary_slot_name, a dbname in primary_conninfo,
 * and whether it holds a synced copy of the slot. The standbys are the
 * other servers of a multi-host conninfo (host=a,b), each reached with an
 * ordinary connection of its own; what cannot be checked (a server not
 * reachable, standbys streaming from the primary but not listed) is said.
 */
#include "check_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgconn.h"
#include "pghosts.h"
#include "slotcmd.h"

/* The line names (check.c lists them for the skip lines). */
#define W_SLOT "failover slot"
#define W_SSS "synchronized_standby_slots"
#define W_STANDBYS "standbys"

/* What the primary said, for the standbys' lines. */
struct fo {
    char sss[512];       /* synchronized_standby_slots ("" when empty) */
    char confirmed[32];  /* the slot's confirmed_flush_lsn there ("" if none) */
    char start_key[128]; /* postmaster start time and port: which listed
                          * server is the primary itself */
    int attached;        /* physical standbys streaming from the primary */
    char attached_names[512];
    int standbys_seen;   /* listed servers found in recovery */
};

/* One row, one column of sql on the check connection into out ("" on NULL);
 * -1 with err. */
static int ck_value(struct ck *k, const char *sql, int nparams, const char *const *params,
                    char *out, size_t outlen, char *err, size_t errlen)
{
    PGresult *r = ck_query(k, sql, nparams, params, err, errlen);
    if (!r) return -1;
    snprintf(out, outlen, "%s", PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    return 0;
}

/* ---- the primary ---- */

/* The slot's failover flag (17+). */
static void failover_slot(struct ck *k, struct fo *f, enum failover_mode mode)
{
    const struct config *c = k->cfg;
    char err[1024];
    const char *params[] = {c->pg_slot};
    PGresult *r = ck_query(k,
                           "SELECT failover, coalesce(confirmed_flush_lsn::text, '') "
                           "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
                           1, params, err, sizeof(err));
    if (!r) return ck_query_failed(k, W_SLOT, err);
    if (PQntuples(r) == 0)
        ck_report(k, CHECK_OK, W_SLOT, NULL,
                  "slot \"%s\" will be created as a failover slot ([postgres] failover = %s)",
                  c->pg_slot, failover_name(mode));
    else if (PQgetvalue(r, 0, 0)[0] == 't')
        ck_report(k, CHECK_OK, W_SLOT, NULL, "slot \"%s\" is a failover slot", c->pg_slot);
    else
        ck_report(k, CHECK_OK, W_SLOT, NULL,
                  "slot \"%s\" is not a failover slot yet: outboxd makes it one at start "
                  "(ALTER_REPLICATION_SLOT ... (FAILOVER true); [postgres] failover = %s)",
                  c->pg_slot, failover_name(mode));
    if (PQntuples(r) > 0) snprintf(f->confirmed, sizeof(f->confirmed), "%s", PQgetvalue(r, 0, 1));
    PQclear(r);
}

/* The physical slots on the primary, "a, b" ("" if none), for the fixes. */
static void physical_slots(struct ck *k, char *out, size_t outlen)
{
    char err[256];
    if (ck_value(k,
                 "SELECT coalesce(string_agg(slot_name, ', ' ORDER BY slot_name), '') FROM "
                 "pg_catalog.pg_replication_slots WHERE slot_type = 'physical'",
                 0, NULL, out, outlen, err, sizeof(err)) != 0)
        out[0] = '\0';
}

/* synchronized_standby_slots: set, and naming physical slots that exist
 * (a missing one makes every logical walsender wait: outboxd stalls). */
static void standby_slots(struct ck *k, struct fo *f)
{
    char err[1024], phys[512], fix[1024];
    if (ck_value(k, "SELECT current_setting('synchronized_standby_slots')", 0, NULL, f->sss,
                 sizeof(f->sss), err, sizeof(err)) != 0)
        return ck_query_failed(k, W_SSS, err);
    physical_slots(k, phys, sizeof(phys));
    if (!f->sss[0]) {
        snprintf(fix, sizeof(fix),
                 "on the primary: ALTER SYSTEM SET synchronized_standby_slots = '%s'; SELECT "
                 "pg_reload_conf() (%s)",
                 phys[0] ? phys : "NAME",
                 phys[0] ? "the physical slots of the standbys that may be promoted"
                         : "NAME: the physical slot of each standby that may be promoted; "
                           "none exists yet");
        ck_report(k, CHECK_WARN, W_SSS, fix,
                  "empty, so the walsender sends outboxd changes before any standby has "
                  "them: after a failover, Kafka can hold events the promoted standby does "
                  "not have");
        return;
    }
    const char *params[] = {f->sss};
    PGresult *r = ck_query(
        k,
        "SELECT s.name, coalesce(r.slot_type, ''), coalesce(r.active, false) "
        "FROM unnest(string_to_array(replace($1, ' ', ''), ',')) AS s(name) "
        "LEFT JOIN pg_catalog.pg_replication_slots r ON r.slot_name = s.name",
        1, params, err, sizeof(err));
    if (!r) return ck_query_failed(k, W_SSS, err);
    int mark = ck_begin(k);
    for (int i = 0; i < PQntuples(r); i++) {
        const char *name = PQgetvalue(r, i, 0), *type = PQgetvalue(r, i, 1);
        if (!type[0])
            ck_report(k, CHECK_FAIL, W_SSS,
                      "create that physical slot for the standby, or remove the name "
                      "(ALTER SYSTEM SET synchronized_standby_slots = ...; SELECT "
                      "pg_reload_conf())",
                      "names slot \"%s\", which does not exist: logical walsenders wait for "
                      "it, so outboxd receives nothing",
                      name);
        else if (strcmp(type, "physical") != 0)
            ck_report(k, CHECK_FAIL, W_SSS, "name the standbys' physical slots only",
                      "names slot \"%s\", a %s slot", name, type);
        else if (PQgetvalue(r, i, 2)[0] != 't')
            ck_report(k, CHECK_WARN, W_SSS,
                      "start that standby, or remove its slot from the list while it is down",
                      "slot \"%s\" is not active (its standby is not streaming): outboxd "
                      "receives nothing until it is",
                      name);
    }
    PQclear(r);
    if (ck_silent_since(k, mark))
        ck_report(k, CHECK_OK, W_SSS, NULL,
                  "'%s': outboxd receives only changes those standbys have flushed", f->sss);
}

/* Which physical standbys stream from the primary (pg_stat_replication, less
 * the walsenders of logical slots), and what identifies the primary. */
static void primary_facts(struct ck *k, struct fo *f)
{
    char err[256];
    PGresult *r = ck_query(
        k,
        "SELECT count(*), coalesce(string_agg(coalesce(nullif(application_name, ''), "
        "'?') || '@' || coalesce(client_addr::text, 'local'), ', '), '') "
        "FROM pg_catalog.pg_stat_replication WHERE state IN ('streaming', 'catchup') "
        "AND pid NOT IN (SELECT active_pid FROM pg_catalog.pg_replication_slots "
        "WHERE slot_type = 'logical' AND active_pid IS NOT NULL)",
        0, NULL, err, sizeof(err));
    if (r) {
        f->attached = atoi(PQgetvalue(r, 0, 0));
        snprintf(f->attached_names, sizeof(f->attached_names), "%s", PQgetvalue(r, 0, 1));
        PQclear(r);
    }
    if (ck_value(k, "SELECT pg_postmaster_start_time()::text || '/' || current_setting('port')",
                 0, NULL, f->start_key, sizeof(f->start_key), err, sizeof(err)) != 0)
        f->start_key[0] = '\0';
}

/* ---- the standbys ---- */

/* Connects to the one server h of the conninfo: every other setting kept,
 * target_session_attrs any (pgconn.h: with its own token under auth =
 * aws_rds_iam). Returns the connection (PQfinish it) or NULL with the
 * message in err. */
static PGconn *connect_one(struct ck *k, const struct pghost *h, char *err, size_t errlen)
{
    PGconn *c = pgconn_connect(&(struct pgconn_opts){.conninfo = k->cfg->pg_conninfo,
                                                     .app_name = "outboxd-check",
                                                     .timeout_s = CHECK_CONNECT_TIMEOUT_S,
                                                     .server = h});
    if (c && PQstatus(c) == CONNECTION_OK) return c;
    ck_result_message(k, NULL, c, err, errlen);
    PQfinish(c);
    return NULL;
}

/* A setting of the standby, "" when unknown or unreadable (*readable false
 * when the role may not see it: primary_conninfo needs pg_read_all_settings). */
static void standby_setting(PGconn *c, const char *name, char *out, size_t outlen,
                            bool *readable)
{
    const char *params[] = {name};
    PGresult *r = PQexecParams(c, "SELECT current_setting($1, true)", 1, NULL, params, NULL,
                               NULL, 0);
    *readable = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    snprintf(out, outlen, "%s", *readable && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
}

/* Whether the conninfo text ci names a database. */
static bool conninfo_has_dbname(const char *ci)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(ci, &perr);
    PQfreemem(perr);
    bool has = false;
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (!strcmp(o->keyword, "dbname") && o->val && *o->val) has = true;
    PQconninfoFree(opts);
    return has;
}

/* Whether name is one of the comma-separated list (spaces ignored). */
static bool listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',') p++;
        size_t n = strcspn(p, ", ");
        if (n == len && strncmp(p, name, n) == 0) return true;
        p += n;
    }
    return false;
}

/* The slot's synced copy on the standby c, into detail. Returns false
 * (with why in detail) when there is none usable yet. */
static bool synced_copy(struct ck *k, PGconn *c, const struct fo *f, char *detail,
                        size_t len)
{
    const char *params[] = {k->cfg->pg_slot};
    PGresult *r = PQexecParams(c,
                               "SELECT synced, temporary, coalesce(confirmed_flush_lsn::text, "
                               "'') FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
                               1, NULL, params, NULL, NULL, 0);
    bool ok = false;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        snprintf(detail, len, "its pg_replication_slots could not be read");
    else if (PQntuples(r) == 0)
        snprintf(detail, len,
                 "it has no copy of slot \"%s\" yet (the sync worker copies a failover slot "
                 "once the standby has replayed past the slot's position)",
                 k->cfg->pg_slot);
    else if (PQgetvalue(r, 0, 0)[0] != 't')
        snprintf(detail, len,
                 "its slot \"%s\" was not made by slot synchronisation (synced = false): "
                 "drop it there, the sync worker then copies the primary's",
                 k->cfg->pg_slot);
    else if (PQgetvalue(r, 0, 1)[0] == 't')
        snprintf(detail, len,
                 "its copy of slot \"%s\" is still temporary, not usable after a "
                 "promotion until the primary's slot moves past what the standby needs (as "
                 "outboxd confirms new changes; meanwhile the standby's log says \"could "
                 "not synchronize replication slot\")",
                 k->cfg->pg_slot);
    else {
        ok = true;
        snprintf(detail, len, "slot \"%s\" synced (confirmed %s; on the primary %s)",
                 k->cfg->pg_slot, PQgetvalue(r, 0, 2), f->confirmed[0] ? f->confirmed : "?");
    }
    PQclear(r);
    return ok;
}

/* The set-up of the standby c (label L): one warn line per problem, else
 * one ok line. */
static void standby_setup(struct ck *k, PGconn *c, const char *label, const struct fo *f)
{
    char what[400], v[1024], slot_name[128], detail[512];
    bool readable;
    snprintf(what, sizeof(what), "standby %s", label);
    int mark = ck_begin(k);
    standby_setting(c, "sync_replication_slots", v, sizeof(v), &readable);
    if (strcmp(v, "on") != 0)
        ck_report(k, CHECK_WARN, what,
                  "on it: ALTER SYSTEM SET sync_replication_slots = on; SELECT "
                  "pg_reload_conf()",
                  "sync_replication_slots is %s: it keeps no copy of the slot, so outboxd "
                  "cannot continue on it after a promotion",
                  v[0] ? v : "unknown");
    standby_setting(c, "hot_standby_feedback", v, sizeof(v), &readable);
    if (strcmp(v, "on") != 0)
        ck_report(k, CHECK_WARN, what,
                  "on it: ALTER SYSTEM SET hot_standby_feedback = on; SELECT pg_reload_conf()",
                  "hot_standby_feedback is %s: slot synchronisation needs it (the primary "
                  "must keep the catalog rows the synced slot decodes with)",
                  v[0] ? v : "unknown");
    standby_setting(c, "primary_slot_name", slot_name, sizeof(slot_name), &readable);
    if (!slot_name[0])
        ck_report(k, CHECK_WARN, what,
                  "on the primary: SELECT pg_create_physical_replication_slot('NAME'); on "
                  "the standby: primary_slot_name = 'NAME' (reload); list NAME in the "
                  "primary's synchronized_standby_slots",
                  "no primary_slot_name: slot synchronisation needs the standby to stream "
                  "on a physical slot");
    else if (f->sss[0] && !listed(f->sss, slot_name))
        ck_report(k, CHECK_WARN, what,
                  "add it to the primary's synchronized_standby_slots if this standby may be "
                  "promoted",
                  "its physical slot \"%s\" is not in the primary's synchronized_standby_slots "
                  "('%s'): outboxd may publish changes this standby does not have yet",
                  slot_name, f->sss);
    standby_setting(c, "primary_conninfo", v, sizeof(v), &readable);
    bool dbname_known = readable && v[0];
    if (dbname_known && !conninfo_has_dbname(v))
        ck_report(k, CHECK_WARN, what,
                  "add dbname=... (any database) to its primary_conninfo, then reload",
                  "its primary_conninfo has no dbname: the slot sync worker connects to a "
                  "database and does not start without one");
    bool synced = synced_copy(k, c, f, detail, sizeof(detail));
    if (!synced)
        ck_report(k, CHECK_WARN, what,
                  "wait a little (it syncs every few seconds); if it stays, read the "
                  "standby's log",
                  "%s", detail);
    if (ck_silent_since(k, mark))
        ck_report(k, CHECK_OK, what, NULL,
                  "sync_replication_slots = on, hot_standby_feedback = on, primary_slot_name "
                  "= '%s'%s; %s",
                  slot_name,
                  dbname_known ? ", dbname in primary_conninfo"
                               : " (primary_conninfo not readable by this role: its dbname "
                                 "not checked; GRANT pg_read_all_settings)",
                  detail);
}

/* Each listed server other than the primary: a standby to check, or
 * unreachable, or a second primary. */
static void listed_servers(struct ck *k, struct fo *f, const struct pghost *hosts, int n)
{
    char label[300], what[320 + 300], err[1024];
    for (int i = 0; i < n; i++) {
        pghost_label(&hosts[i], label, sizeof(label));
        snprintf(what, sizeof(what), "standby %s", label);
        PGconn *c = connect_one(k, &hosts[i], err, sizeof(err));
        if (!c) {
            ck_report(k, CHECK_WARN, what,
                      "start it, or fix its entry in [postgres] conninfo: outboxd cannot "
                      "follow a failover to a server it cannot reach",
                      "not reachable, so not checked: %s", err);
            continue;
        }
        PGresult *r = PQexec(c, "SELECT pg_is_in_recovery(), pg_postmaster_start_time()::text "
                                "|| '/' || current_setting('port')");
        bool ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
        bool recovery = ok && PQgetvalue(r, 0, 0)[0] == 't';
        bool is_primary = ok && !recovery && f->start_key[0] &&
                          strcmp(PQgetvalue(r, 0, 1), f->start_key) == 0;
        PQclear(r);
        if (!ok)
            ck_report(k, CHECK_WARN, what, "see the server's log",
                      "pg_is_in_recovery() failed there: not checked");
        else if (recovery) {
            f->standbys_seen++;
            standby_setup(k, c, label, f);
        } else if (!is_primary)
            ck_report(k, CHECK_FAIL, what,
                      "stop it or make it a standby of the current primary (an old primary "
                      "started again after a failover?), or remove it from [postgres] "
                      "conninfo",
                      "%s is a primary too (not in recovery), besides the one outboxd "
                      "connects to: libpq takes the first read-write server listed",
                      label);
        PQfinish(c);
    }
}

/* Multi-host conninfo and the standbys outside it. */
static void standbys_summary(struct ck *k, const struct fo *f, int nhosts, bool read_write)
{
    if (nhosts == 1) {
        ck_report(k, CHECK_WARN, W_STANDBYS,
                  "list the standbys too: host=primary,standby1 "
                  "target_session_attrs=read-write (or use a name that moves to the new "
                  "primary)",
                  "[postgres] conninfo names one server: the standbys were not checked, and "
                  "outboxd follows a failover only if that name moves to the new primary%s",
                  f->attached ? "" : " (and no standby streams from the primary)");
        return;
    }
    int mark = ck_begin(k);
    if (!read_write)
        ck_report(k, CHECK_FAIL, W_STANDBYS,
                  "add target_session_attrs=read-write (or primary) to [postgres] conninfo",
                  "[postgres] conninfo lists %d servers without target_session_attrs: libpq "
                  "may connect outboxd to a standby",
                  nhosts);
    if (f->attached > f->standbys_seen)
        ck_report(k, CHECK_WARN, W_STANDBYS,
                  "list them in [postgres] conninfo (host=a,b,...), so that check can see "
                  "them and outboxd can follow a failover to them",
                  "%d standby(s) stream from the primary (%s), %d of the servers listed in "
                  "[postgres] conninfo are standbys: the others were not checked",
                  f->attached, f->attached_names, f->standbys_seen);
    else if (f->standbys_seen > 0 && ck_silent_since(k, mark))
        ck_report(k, CHECK_OK, W_STANDBYS, NULL,
                  "%d standby(s) listed in [postgres] conninfo, %d streaming from the primary",
                  f->standbys_seen, f->attached);
}

/* The servers of the conninfo, and whether it asks for a read-write one. */
static int conninfo_hosts(const struct ck *k, struct pghost *hosts, bool *read_write,
                          char *err, size_t errlen)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(k->cfg->pg_conninfo, &perr);
    PQfreemem(perr);
    const char *host = NULL, *addr = NULL, *port = NULL, *tsa = NULL;
    for (PQconninfoOption *o = opts; o && o->keyword; o++) {
        if (!strcmp(o->keyword, "host")) host = o->val;
        if (!strcmp(o->keyword, "hostaddr")) addr = o->val;
        if (!strcmp(o->keyword, "port")) port = o->val;
        if (!strcmp(o->keyword, "target_session_attrs")) tsa = o->val;
    }
    if (!tsa || !*tsa) tsa = getenv("PGTARGETSESSIONATTRS"); /* libpq's default */
    *read_write = tsa && (!strcmp(tsa, "read-write") || !strcmp(tsa, "primary"));
    int n = pghosts_split(host, addr, port, hosts, PGHOSTS_MAX, err, errlen);
    PQconninfoFree(opts);
    return n;
}

void check_failover(struct ck *k)
{
    const struct config *c = k->cfg;
    char err[1024];
    enum failover_mode mode = c->pg_failover;
    const char *why = !k->pg_ok ? "no connection to postgres"
                      : (int)mode < 0 ? "[postgres] failover is not valid"
                                      : NULL;
    if (why) {
        ck_skip(k, W_SLOT, why);
        ck_skip(k, W_SSS, why);
        ck_skip(k, W_STANDBYS, why);
        return;
    }
    int major = k->server_version / 10000;
    int want = slotcmd_failover_wanted(mode, major, err, sizeof(err));
    if (want < 0) {
        ck_report(k, CHECK_FAIL, W_SLOT, NULL, "%s", err);
        ck_skip(k, W_SSS, "failover slots need PostgreSQL 17");
        ck_skip(k, W_STANDBYS, "failover slots need PostgreSQL 17");
        return;
    }
    if (want == 0) { /* nothing to set up: one line that says why */
        if (mode == FAILOVER_OFF)
            ck_report(k, CHECK_OK, W_SLOT, NULL,
                      "not asked for ([postgres] failover = off): a promoted standby will "
                      "not have the slot (README, Gap repair)");
        else
            ck_report(k, CHECK_OK, W_SLOT, NULL,
                      "PostgreSQL %d has none ([postgres] failover = auto: off here): a "
                      "promoted standby will not have the slot (README, Gap repair)",
                      major);
        return;
    }
    char v[8];
    if (ck_value(k, "SELECT pg_is_in_recovery()", 0, NULL, v, sizeof(v), err, sizeof(err)) ==
            0 &&
        v[0] == 't') {
        /* Decoding on a standby (16+, "hot standby" above): its slot is its
         * own; failover slots copy a primary's slot to standbys, not a
         * standby's anywhere (deploy/standby-failover.md). */
        ck_report(k, mode == FAILOVER_ON ? CHECK_WARN : CHECK_OK, W_SLOT,
                  mode == FAILOVER_ON ? "set [postgres] failover = auto (or off)" : NULL,
                  "the slot is on this standby (%s:%s), which decodes itself: a failover "
                  "slot is not made here. Promoting this standby keeps the slot; promoting "
                  "another node loses it (on_slot_loss = repair closes the gap)",
                  PQhost(k->pg), PQport(k->pg));
        ck_skip(k, W_SSS, "connected to a standby");
        ck_skip(k, W_STANDBYS, "connected to a standby");
        return;
    }
    struct fo f = {0};
    struct pghost hosts[PGHOSTS_MAX];
    bool read_write = false;
    int n = conninfo_hosts(k, hosts, &read_write, err, sizeof(err));
    failover_slot(k, &f, mode);
    primary_facts(k, &f);
    if (mode == FAILOVER_AUTO && f.attached == 0 && n == 1) {
        /* No standby anywhere in sight: nothing to warn about under auto. */
        ck_report(k, CHECK_OK, W_STANDBYS, NULL,
                  "none streams from this primary and [postgres] conninfo names one "
                  "server: nothing to synchronise the slot to");
        return;
    }
    standby_slots(k, &f);
    if (n < 0) {
        ck_report(k, CHECK_WARN, W_STANDBYS, "correct host and port in [postgres] conninfo",
                  "the servers of [postgres] conninfo cannot be told apart (%s): the "
                  "standbys were not checked",
                  err);
        return;
    }
    if (n > 1) listed_servers(k, &f, hosts, n);
    standbys_summary(k, &f, n, read_write);
}
