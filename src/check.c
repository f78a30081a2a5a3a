/*
 * check.c - `outboxd check` and the daemon's start-up checks: everything
 * outboxd needs from its configuration, Postgres and Kafka, verified
 * before streaming, one line per finding (see check.h for the order).
 *
 * Postgres is asked through an ordinary connection (the catalog queries
 * need the extended protocol for parameters) and, for the plugin, a
 * replication connection that creates and drops a TEMPORARY slot. Kafka is
 * asked through a producer built exactly as the daemon's (so librdkafka
 * judges every [kafka] property) and one metadata request. Nothing is
 * created that outlives the check: the temporary slot goes with its
 * session, and metadata for all topics never auto-creates one.
 *
 * The conninfo is never printed; libpq's messages have the password masked
 * and, for parse errors (which quote the offending text), every quoted part
 * removed.
 */
#include "check.h"

#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "connerr.h"
#include "decoder.h"
#include "kafkaconf.h"
#include "log.h"
#include "lsn.h"
#include "offset.h"
#include "polling.h"
#include "redact.h"
#include "exitcode.h"
#include "resume.h"
#include "stream.h"
#include "str.h"

/* ---- pure helpers -------------------------------------------------------- */

char *check_format_line(char *out, size_t outlen, enum check_status st, const char *what,
                        const char *problem, const char *fix)
{
    static const char *const prefix[] = {"ok  ", "warn", "FAIL", "skip"};
    bool has_problem = problem && *problem,
         has_fix = fix && *fix && st != CHECK_OK && st != CHECK_SKIP;
    snprintf(out, outlen, "%s %s%s%s%s%s", prefix[st], what, has_problem ? ": " : "",
             has_problem ? problem : "", has_fix ? "; " : "", has_fix ? fix : "");
    return out;
}

static bool name_in(const char *name, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(name, *list) == 0) return true;
    return false;
}

enum check_type_fit check_type_fit(enum outbox_col col, const char *typname, char typtype)
{
    static const char *const textlike[] = {"text",   "varchar", "bpchar", "name",
                                           "citext", "uuid",    NULL};
    static const char *const integers[] = {"int2", "int4", "int8", NULL};
    static const char *const json[] = {"json", "jsonb", "text", NULL};
    static const char *const loose_text[] = {"varchar", "bpchar", "citext", "xml", NULL};
    switch (col) {
    case OC_AGGREGATE_VERSION:
        if (name_in(typname, integers)) return TYPE_FITS;
        return strcmp(typname, "numeric") == 0 ? TYPE_ODD : TYPE_BAD;
    case OC_PAYLOAD:
        if (name_in(typname, json)) return TYPE_FITS;
        return name_in(typname, loose_text) ? TYPE_ODD : TYPE_BAD;
    default: /* event_id, aggregate_type, aggregate_id, event_type */
        if (typtype == 'e' || name_in(typname, textlike)) return TYPE_FITS;
        if (name_in(typname, integers) || strcmp(typname, "numeric") == 0) return TYPE_ODD;
        return TYPE_BAD;
    }
}

const char *check_type_expected(enum outbox_col col)
{
    switch (col) {
    case OC_AGGREGATE_VERSION:
        return "an integer type";
    case OC_PAYLOAD:
        return "json, jsonb or text";
    default:
        return "text-like or uuid";
    }
}

int check_template_columns(const char *tmpl, char **names, int max)
{
    int n = 0;
    const char *p = tmpl;
    while ((p = strstr(p, "${")) != NULL) {
        const char *close = strchr(p + 2, '}');
        if (!close || close == p + 2) goto bad;
        size_t len = (size_t)(close - p - 2);
        bool dup = false;
        for (int i = 0; i < n && !dup; i++)
            dup = strlen(names[i]) == len && strncmp(names[i], p + 2, len) == 0;
        if (!dup) {
            if (n == max || !(names[n] = strndup(p + 2, len))) goto bad;
            n++;
        }
        p = close + 1;
    }
    return n;
bad:
    for (int i = 0; i < n; i++)
        free(names[i]);
    return -1;
}

/* ---- the run ------------------------------------------------------------- */

#define MAX_TEMPLATE_COLUMNS 32

struct colinfo {
    char *name;
    char *typname; /* base type for a domain */
    char typtype;
    char *typedesc; /* format_type() */
};

struct ck {
    const struct config *cfg;
    bool quiet;
    enum check_scope scope;
    int nfail;
    int said; /* FAIL and warn lines so far */

    /* configuration */
    bool config_ok;
    struct outbox_map map;
    bool map_ok;
    char *tcols[MAX_TEMPLATE_COLUMNS];
    int ntcols;
    rd_kafka_t *rk;

    /* postgres */
    PGconn *pg;
    char *password;
    char sqlstate[6];
    int server_version;
    char role[128];
    char dbname[128];
    bool pg_ok, wal_ok, slot_free, sender_free, repl_role, superuser;

    /* the outbox table */
    bool table_exists, can_select, table_ok;
    char relkind;
    char oid[16];
    struct colinfo *cols;
    int ncols;

    bool allowed_ok, replconn_ok;
    bool have_offset;
    struct offset_state offset;
    lsn_t slot_confirmed;
    bool resumed; /* the file was compared with the server: resume below */
    struct resume_decision resume;
    bool slot_exists;
    char slot_wal_status[32];
    bool broker_ok;
    const struct rd_kafka_metadata *md;
    struct kafka_refusal refusal; /* seen by check_kafka_error */
};

static void emit(struct ck *k, enum check_status st, const char *what, const char *problem,
                 const char *fix)
{
    char line[4096];
    if (st == CHECK_FAIL) k->nfail++;
    if (st == CHECK_FAIL || st == CHECK_WARN) k->said++;
    if (k->quiet) {
        if (st == CHECK_FAIL || st == CHECK_WARN)
            log_msg(st == CHECK_FAIL ? LOG_ERROR : LOG_WARN, "%s: %s%s%s", what,
                    problem ? problem : "", fix && *fix ? "; " : "", fix ? fix : "");
        return;
    }
    puts(check_format_line(line, sizeof(line), st, what, problem, fix));
    fflush(stdout);
}

/* report(k, status, what, fix, fmt, ...): one line; fmt (may be NULL)
 * gives the problem, or the detail of an ok line. */
static void report(struct ck *k, enum check_status st, const char *what, const char *fix,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void report(struct ck *k, enum check_status st, const char *what, const char *fix,
                   const char *fmt, ...)
{
    char problem[2048] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(problem, sizeof(problem), fmt, ap);
        va_end(ap);
    }
    emit(k, st, what, fmt ? problem : NULL, fix);
}

/* Starts a check: remembers how many FAIL/warn lines came before, so an ok
 * line is printed only when the check itself said nothing else. */
static int begin(const struct ck *k)
{
    return k->said;
}
static bool silent_since(const struct ck *k, int mark)
{
    return k->said == mark;
}

static void skip(struct ck *k, const char *what, const char *why)
{
    emit(k, CHECK_SKIP, what, why, NULL);
}

/* A quoted SQL identifier only when it needs quoting. */
static const char *ident(const char *name, char *buf, size_t len)
{
    bool plain = *name && (islower((unsigned char)*name) || *name == '_');
    for (const char *p = name; *p && plain; p++)
        plain = islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_';
    if (plain) {
        snprintf(buf, len, "%s", name);
        return buf;
    }
    size_t n = 0;
    if (len < 3) return "";
    buf[n++] = '"';
    for (const char *p = name; *p && n + 3 < len; p++) {
        if (*p == '"') buf[n++] = '"';
        buf[n++] = *p;
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

/* schema.table as SQL (quoted where needed). */
static const char *table_sql(const struct ck *k, char *buf, size_t len)
{
    char s[200], t[200];
    snprintf(buf, len, "%s.%s", ident(k->map.schema, s, sizeof(s)),
             ident(k->map.table, t, sizeof(t)));
    return buf;
}

/* libpq's message for conn, masked, on one line. */
static void pg_message(const struct ck *k, const char *msg, char *out, size_t outlen)
{
    redact_mask(msg ? msg : "out of memory", k->password, out, outlen);
}

/* The server's message for a failed statement (without libpq's "ERROR:  "
 * prefix), else libpq's. */
static void result_message(const struct ck *k, const PGresult *r, PGconn *conn, char *out,
                           size_t outlen)
{
    const char *m = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    pg_message(k, m ? m : PQerrorMessage(conn), out, outlen);
}

/* Runs sql with text parameters on the check connection. Returns the
 * result (caller PQclears) when it succeeded, else NULL with the server's
 * message in err and its SQLSTATE in k->sqlstate. */
static PGresult *query(struct ck *k, const char *sql, int nparams,
                       const char *const *params, char *err, size_t errlen)
{
    PGresult *r = PQexecParams(k->pg, sql, nparams, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    k->sqlstate[0] = '\0';
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return r;
    const char *ss = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (ss) snprintf(k->sqlstate, sizeof(k->sqlstate), "%s", ss);
    result_message(k, r, k->pg, err, errlen);
    PQclear(r);
    return NULL;
}

/* Reports a failed catalog query as a FAIL of what. */
static void query_failed(struct ck *k, const char *what, const char *err)
{
    report(k, CHECK_FAIL, what,
           "see the server's log; a role needs no special privilege "
           "for these catalog queries",
           "query failed: %s", err);
}

/* The error callback of check's handle: logs, and keeps a refusal
 * (kafka_err_is_refusal) for the broker check to name. */
static void check_kafka_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    kafka_log_error(err, reason);
    kafka_refusal_note(opaque, err, reason);
}

/* ---- 1. configuration ---- */

static void check_config(struct ck *k)
{
    const char *what = "configuration";
    const struct config *c = k->cfg;
    char err[1024];
    int mark = begin(k);

    if (outbox_map_init(&k->map, c->outbox_table, (const char *const *)c->outbox_columns,
                        c->outbox_topic, err, sizeof(err)) == 0) {
        k->map_ok = true;
        k->ntcols = check_template_columns(c->outbox_topic, k->tcols, MAX_TEMPLATE_COLUMNS);
        if (k->ntcols < 0) {
            k->ntcols = 0;
            report(k, CHECK_FAIL, what, "use fewer ${column} references",
                   "[outbox] topic uses more than %d columns", MAX_TEMPLATE_COLUMNS);
        }
    } else {
        report(k, CHECK_FAIL, what, "correct [outbox] table (schema.table) or topic", "%s",
               err);
    }

    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_opaque(conf, &k->refusal);
    bool kafka_ok = true;
    /* The daemon's own defaults first, validated with [kafka] as it uses them. */
    kafka_conf_producer_defaults(conf, c, err, sizeof(err));
    for (size_t i = 0; i < c->nkafka; i++) {
        /* --config-only contacts nothing: without bootstrap.servers the
         * handle below validates the properties but resolves no broker. */
        if (k->scope == CHECK_SCOPE_CONFIG && !strcmp(c->kafka[i].key, "bootstrap.servers"))
            continue;
        if (kafka_conf_set(conf, c->kafka[i].key, c->kafka[i].value, err, sizeof(err)) !=
            0) {
            kafka_ok = false;
            report(
                k, CHECK_FAIL, what,
                "correct or remove it ([kafka] takes librdkafka's properties as they are)",
                "%s", err);
        }
    }
    if (kafka_ok) {
        char reason[512];
        kafka_conf_route_logs(conf);
        rd_kafka_conf_set_error_cb(conf, check_kafka_error);
        k->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, reason, sizeof(reason));
        if (!k->rk) {
            kafka_ok = false;
            report(k, CHECK_FAIL, what, "correct the [kafka] properties", "[kafka]: %s",
                   reason);
        }
    }
    if (!k->rk) rd_kafka_conf_destroy(conf);

    if (c->errors_policy == ERRORS_DLQ && c->errors_dlq_topic &&
        !outbox_topic_valid(c->errors_dlq_topic, err, sizeof(err)))
        report(k, CHECK_FAIL, what, "correct [errors] dlq_topic", "[errors] dlq_topic: %s",
               err);

    k->config_ok = silent_since(k, mark);
    if (k->config_ok) report(k, CHECK_OK, what, NULL, NULL);
}

/* ---- 2. postgres connection ---- */

static bool looks_like_conninfo(const char *s)
{
    return strchr(s, '=') || strncmp(s, "postgres://", 11) == 0 ||
           strncmp(s, "postgresql://", 13) == 0;
}

/* The fix for a connection error message. */
static const char *connect_fix(const char *msg)
{
    const char *fix = connerr_fix(msg); /* the daemon exits 2 with the same fix */
    if (fix) return fix;
    return "check host and port in [postgres] conninfo, that the server is running and "
           "accepts TCP connections there (listen_addresses, firewall)";
}

static void check_connection(struct ck *k)
{
    const char *what = "postgres connection";
    const char *conninfo = k->cfg->pg_conninfo ? k->cfg->pg_conninfo : "";
    char msg[1024], stripped[1024];

    if (looks_like_conninfo(conninfo)) {
        char *perr = NULL;
        PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
        if (!opts) {
            redact_strip_quoted(perr ? perr : "out of memory", stripped, sizeof(stripped));
            redact_mask(stripped, NULL, msg, sizeof(msg));
            PQfreemem(perr);
            if (!k->quiet)
                report(k, CHECK_FAIL, what,
                       "correct its syntax: key=value pairs or a postgres:// URI (special "
                       "characters in a URI password must be percent-encoded)",
                       "[postgres] conninfo cannot be parsed (not shown: it may hold a "
                       "password): %s",
                       msg);
            return;
        }
        for (PQconninfoOption *o = opts; o->keyword; o++)
            if (strcmp(o->keyword, "password") == 0 && o->val && *o->val)
                k->password = strdup(o->val);
        PQconninfoFree(opts);
    }

    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", CHECK_CONNECT_TIMEOUT_S);
    /* connect_timeout first: the conninfo, expanded in place of dbname,
     * overrides it when it sets its own. */
    const char *keys[] = {"connect_timeout", "dbname", "fallback_application_name", NULL};
    const char *vals[] = {timeout, conninfo, "outboxd-check", NULL};
    k->pg = PQconnectdbParams(keys, vals, 1);
    if (!k->pg || PQstatus(k->pg) != CONNECTION_OK) {
        pg_message(k, k->pg ? PQerrorMessage(k->pg) : NULL, msg, sizeof(msg));
        /* The daemon retries what is transient and reports the rest itself. */
        if (!k->quiet) report(k, CHECK_FAIL, what, connect_fix(msg), "%s", msg);
        PQfinish(k->pg);
        k->pg = NULL;
        return;
    }
    k->server_version = PQserverVersion(k->pg);
    char sto[64];
    snprintf(sto, sizeof(sto), "SET statement_timeout = %d", CHECK_STATEMENT_TIMEOUT_MS);
    PGresult *r = query(k, sto, 0, NULL, msg, sizeof(msg));
    PQclear(r);
    r = query(k,
              "SELECT current_user, current_database(), current_setting('server_version')",
              0, NULL, msg, sizeof(msg));
    if (!r) {
        query_failed(k, what, msg);
        return;
    }
    snprintf(k->role, sizeof(k->role), "%s", PQgetvalue(r, 0, 0));
    snprintf(k->dbname, sizeof(k->dbname), "%s", PQgetvalue(r, 0, 1));
    report(k, CHECK_OK, what, NULL, "PostgreSQL %s, database \"%s\", role \"%s\"",
           PQgetvalue(r, 0, 2), k->dbname, k->role);
    PQclear(r);
    k->pg_ok = true;
}

/* ---- 3. wal_level ---- */

static void check_wal_level(struct ck *k)
{
    const char *what = "wal_level = logical";
    char err[1024];
    if (!k->pg_ok) return skip(k, what, "no connection to postgres");
    PGresult *r = query(k, "SHOW wal_level", 0, NULL, err, sizeof(err));
    if (!r) return query_failed(k, what, err);
    const char *v = PQgetvalue(r, 0, 0);
    if (strcmp(v, "logical") == 0) {
        k->wal_ok = true;
        report(k, CHECK_OK, what, NULL, NULL);
    } else {
        report(
            k, CHECK_FAIL, what,
            "set wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = "
            "logical) and restart the server",
            "wal_level is \"%s\"", v);
    }
    PQclear(r);
}

/* ---- 4. replication slots and WAL senders ---- */

static void check_capacity(struct ck *k)
{
    const char *what = "free replication slot and WAL sender";
    char err[1024];
    if (!k->pg_ok) return skip(k, what, "no connection to postgres");
    const char *params[] = {k->cfg->pg_slot};
    PGresult *r =
        query(k,
              "SELECT current_setting('max_replication_slots')::int, "
              "(SELECT count(*) FROM pg_catalog.pg_replication_slots)::int, "
              "current_setting('max_wal_senders')::int, "
              "(SELECT count(*) FROM pg_catalog.pg_stat_replication)::int, "
              "EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1)",
              1, params, err, sizeof(err));
    if (!r) return query_failed(k, what, err);
    int max_slots = atoi(PQgetvalue(r, 0, 0)), slots = atoi(PQgetvalue(r, 0, 1));
    int max_senders = atoi(PQgetvalue(r, 0, 2)), senders = atoi(PQgetvalue(r, 0, 3));
    bool exists = PQgetvalue(r, 0, 4)[0] == 't';
    PQclear(r);
    int mark = begin(k);
    k->slot_free = slots < max_slots;
    k->sender_free = senders < max_senders;
    if (!k->slot_free && !exists)
        report(k, CHECK_FAIL, what,
               max_slots == 0
                   ? "set max_replication_slots = 10 (at least 1) and restart the "
                     "server"
                   : "drop slots nobody uses (SELECT slot_name, active FROM "
                     "pg_replication_slots) or raise max_replication_slots and "
                     "restart the server",
               "all %d replication slots are in use (max_replication_slots = %d) and slot "
               "\"%s\" does not exist yet",
               slots, max_slots, k->cfg->pg_slot);
    if (!k->sender_free)
        report(k, CHECK_FAIL, what,
               max_senders == 0 ? "set max_wal_senders = 10 (at least 1) and restart the "
                                  "server"
                                : "raise max_wal_senders and restart the server, or stop a "
                                  "replication client",
               "all %d WAL senders are busy (max_wal_senders = %d)", senders, max_senders);
    if (silent_since(k, mark))
        report(k, CHECK_OK, what, NULL, "%d of %d slots and %d of %d WAL senders in use",
               slots, max_slots, senders, max_senders);
}

/* ---- 5. role ---- */

/* Finds the outbox table and what the role may do with it. */
static int lookup_table(struct ck *k, char *err, size_t errlen)
{
    const char *params[] = {k->map.schema, k->map.table};
    PGresult *r = query(k,
                        "SELECT c.oid, c.relkind, has_schema_privilege(n.oid, 'USAGE'), "
                        "has_table_privilege(c.oid, 'SELECT') "
                        "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
                        "ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
                        2, params, err, errlen);
    if (!r) return -1;
    if (PQntuples(r) == 1) {
        k->table_exists = true;
        snprintf(k->oid, sizeof(k->oid), "%s", PQgetvalue(r, 0, 0));
        k->relkind = PQgetvalue(r, 0, 1)[0];
        k->can_select = PQgetvalue(r, 0, 2)[0] == 't' && PQgetvalue(r, 0, 3)[0] == 't';
    }
    PQclear(r);
    return 0;
}

/* [postgres] heartbeat_interval_ms calls pg_logical_emit_message(): the
 * role must be allowed to EXECUTE it (PUBLIC may by default; a hardened
 * server may have revoked that). Returns false after reporting a failed
 * query. */
static bool check_heartbeat_allowed(struct ck *k, const char *what, const char *rid)
{
    char err[1024], fix[512];
    PGresult *r = query(k,
                        "SELECT has_function_privilege('pg_catalog.pg_logical_emit_message("
                        "boolean, text, text)', 'EXECUTE')",
                        0, NULL, err, sizeof(err));
    if (!r) {
        query_failed(k, what, err);
        return false;
    }
    bool allowed = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!allowed) {
        snprintf(fix, sizeof(fix),
                 "run GRANT EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(boolean, "
                 "text, text) TO %s (see sql/role.sql), or set [postgres] "
                 "heartbeat_interval_ms = 0",
                 rid);
        report(k, CHECK_FAIL, what, fix,
               "[postgres] heartbeat_interval_ms is set, but the role may not EXECUTE "
               "pg_logical_emit_message");
    }
    return true;
}

static void check_role(struct ck *k)
{
    char what[200], err[1024], fix[2048], rid[160], tsql[420], sid[200];
    snprintf(what, sizeof(what), "role \"%s\"", k->pg_ok ? k->role : "?");
    if (!k->pg_ok) return skip(k, "role", "no connection to postgres");
    if (!k->map_ok) return skip(k, what, "[outbox] table is not valid");
    if (lookup_table(k, err, sizeof(err)) != 0) return query_failed(k, what, err);
    PGresult *r = query(k,
                        "SELECT rolsuper, rolreplication FROM pg_catalog.pg_roles "
                        "WHERE rolname = current_user",
                        0, NULL, err, sizeof(err));
    if (!r) return query_failed(k, what, err);
    k->superuser = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    k->repl_role = k->superuser || (PQntuples(r) == 1 && PQgetvalue(r, 0, 1)[0] == 't');
    PQclear(r);
    ident(k->role, rid, sizeof(rid));
    table_sql(k, tsql, sizeof(tsql));
    int mark = begin(k);
    if (!k->repl_role && k->cfg->source_mode != SOURCE_POLLING) {
        snprintf(fix, sizeof(fix), "run ALTER ROLE %s REPLICATION (see sql/role.sql)", rid);
        report(k, CHECK_FAIL, what, fix,
               "the role has neither REPLICATION nor SUPERUSER, which a replication "
               "connection needs");
    }
    if (k->superuser) k->can_select = k->table_exists;
    if (k->table_exists && !k->can_select) {
        snprintf(fix, sizeof(fix),
                 "run GRANT USAGE ON SCHEMA %s TO %s; GRANT SELECT ON %s TO %s (see "
                 "sql/role.sql)",
                 ident(k->map.schema, sid, sizeof(sid)), rid, tsql, rid);
        report(k, CHECK_FAIL, what, fix, "the role may not SELECT from %s.%s",
               k->map.schema, k->map.table);
    }
    bool heartbeat = k->cfg->pg_heartbeat_interval_ms > 0;
    if (heartbeat && !k->superuser && !check_heartbeat_allowed(k, what, rid)) return;
    if (silent_since(k, mark))
        report(k, CHECK_OK, what, NULL, "%s, %s %s.%s%s",
               k->superuser ? "superuser"
               : k->repl_role ? "REPLICATION"
                              : "no REPLICATION (not needed in polling mode)",
               k->table_exists ? "SELECT on" : "SELECT not checked: no table",
               k->map.schema, k->map.table,
               heartbeat ? ", EXECUTE on pg_logical_emit_message (heartbeat)" : "");
}

/* ---- 6. the outbox table ---- */

static void free_cols(struct ck *k)
{
    for (int i = 0; i < k->ncols; i++) {
        free(k->cols[i].name);
        free(k->cols[i].typname);
        free(k->cols[i].typedesc);
    }
    free(k->cols);
    k->cols = NULL;
    k->ncols = 0;
}

static const struct colinfo *find_col(const struct ck *k, const char *name)
{
    for (int i = 0; i < k->ncols; i++)
        if (strcmp(k->cols[i].name, name) == 0) return &k->cols[i];
    return NULL;
}

static int load_columns(struct ck *k, char *err, size_t errlen)
{
    const char *params[] = {k->oid};
    PGresult *r = query(
        k,
        "SELECT a.attname, CASE WHEN t.typtype = 'd' THEN bt.typname ELSE t.typname END, "
        "CASE WHEN t.typtype = 'd' THEN bt.typtype ELSE t.typtype END, "
        "format_type(a.atttypid, a.atttypmod) "
        "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
        "LEFT JOIN pg_catalog.pg_type bt ON bt.oid = t.typbasetype "
        "WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY "
        "a.attnum",
        1, params, err, errlen);
    if (!r) return -1;
    int n = PQntuples(r);
    k->cols = calloc((size_t)n + 1, sizeof(*k->cols));
    if (!k->cols) {
        PQclear(r);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct colinfo *c = &k->cols[k->ncols++];
        c->name = strdup(PQgetvalue(r, i, 0));
        c->typname = strdup(PQgetvalue(r, i, 1));
        c->typtype = PQgetvalue(r, i, 2)[0];
        c->typedesc = strdup(PQgetvalue(r, i, 3));
        if (!c->name || !c->typname || !c->typedesc) {
            PQclear(r);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    PQclear(r);
    return 0;
}

/* "; did you mean \"x\"?" for name among the table's columns, or "". */
static const char *column_hint(const struct ck *k, const char *name, char *buf, size_t len)
{
    const char **names = calloc((size_t)k->ncols + 1, sizeof(*names));
    const char *s = NULL;
    if (names) {
        for (int i = 0; i < k->ncols; i++)
            names[i] = k->cols[i].name;
        s = str_suggest(name, names, (size_t)k->ncols);
    }
    if (s)
        snprintf(buf, len, " (did you mean \"%s\"?)", s);
    else
        buf[0] = '\0';
    free(names);
    return buf;
}

static void check_table(struct ck *k)
{
    char what[600], err[1024], fix[2048], hint[200];
    snprintf(what, sizeof(what), "outbox table %s.%s", k->map_ok ? k->map.schema : "?",
             k->map_ok ? k->map.table : "?");
    if (!k->pg_ok) return skip(k, "outbox table", "no connection to postgres");
    if (!k->map_ok) return skip(k, "outbox table", "[outbox] table is not valid");
    if (!k->table_exists) {
        snprintf(fix, sizeof(fix),
                 "create it (sql/outbox.sql) or set [outbox] table to the schema.table the "
                 "application inserts into");
        report(k, CHECK_FAIL, what, fix, "the table does not exist in database \"%s\"",
               k->dbname);
        return;
    }
    if (k->relkind != 'r' && k->relkind != 'p') {
        const char *kind = k->relkind == 'v'   ? "view"
                           : k->relkind == 'm' ? "materialized view"
                           : k->relkind == 'f' ? "foreign table"
                                               : "relation that is not a table";
        report(k, CHECK_FAIL, what,
               "point [outbox] table at the table the application inserts into (logical "
               "decoding sees only tables)",
               "%s.%s is a %s", k->map.schema, k->map.table, kind);
        return;
    }
    if (load_columns(k, err, sizeof(err)) != 0) return query_failed(k, what, err);

    int mark = begin(k);
    bool has_version = true;
    for (int c = 0; c < OC__COUNT; c++) {
        const char *name = k->map.columns[c];
        const struct colinfo *ci = find_col(k, name);
        if (!ci) {
            if (c == OC_AGGREGATE_VERSION) {
                has_version = false;
                continue;
            }
            snprintf(fix, sizeof(fix),
                     "add the column, or set [outbox] column.%s to the name of the table's "
                     "%s column%s",
                     outbox_col_name(c), outbox_col_name(c),
                     column_hint(k, name, hint, sizeof(hint)));
            report(k, CHECK_FAIL, what, fix,
                   "column \"%s\" ([outbox] column.%s) is missing", name,
                   outbox_col_name(c));
            continue;
        }
        enum check_type_fit fit = check_type_fit(c, ci->typname, ci->typtype);
        if (fit == TYPE_ODD) {
            report(k, CHECK_WARN, what, "fine if intended: its text form is used as it is",
                   "column \"%s\" (%s) is %s, not %s", name, outbox_col_name(c),
                   ci->typedesc, check_type_expected(c));
        } else if (fit == TYPE_BAD) {
            snprintf(fix, sizeof(fix),
                     "point [outbox] column.%s at the right column, or change its type",
                     outbox_col_name(c));
            /* The daemon would relay its text form: a warning there. */
            report(k, k->scope == CHECK_SCOPE_STARTUP ? CHECK_WARN : CHECK_FAIL, what, fix,
                   "column \"%s\" (%s) is %s, not %s", name, outbox_col_name(c),
                   ci->typedesc, check_type_expected(c));
        }
    }
    for (int i = 0; i < k->ntcols; i++) {
        if (find_col(k, k->tcols[i])) continue;
        snprintf(fix, sizeof(fix), "use columns of the table in [outbox] topic%s",
                 column_hint(k, k->tcols[i], hint, sizeof(hint)));
        report(k, CHECK_FAIL, what, fix,
               "[outbox] topic \"%s\" uses ${%s}, which is not a column of the table",
               k->cfg->outbox_topic, k->tcols[i]);
    }
    /* Missing columns stop the topics check; type problems do not. */
    k->table_ok = true;
    for (int c = 0; c < OC__COUNT; c++)
        if (c != OC_AGGREGATE_VERSION && !find_col(k, k->map.columns[c]))
            k->table_ok = false;
    for (int i = 0; i < k->ntcols; i++)
        if (!find_col(k, k->tcols[i])) k->table_ok = false;
    if (silent_since(k, mark))
        report(k, CHECK_OK, what, NULL, "the configured columns exist with fitting types%s",
               has_version ? ""
                           : " (no aggregate_version column: that header is not sent)");
}

/* ---- 6b. the polling table ([source] mode = polling) ---- */

/* One number about the polling table: sql gets its oid as $1 and, when
 * nparams is 2, the notify channel as $2. */
static long count_of(struct ck *k, const char *sql, int nparams, char *err, size_t errlen)
{
    const char *params[] = {k->oid, k->cfg->poll_notify_channel};
    PGresult *r = query(k, sql, nparams, params, err, errlen);
    if (!r) return -1;
    long n = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static void check_polling_table(struct ck *k)
{
    char what[600], err[1024], fix[2048];
    snprintf(what, sizeof(what), "polling table %s.%s", k->map_ok ? k->map.schema : "?",
             k->map_ok ? k->map.table : "?");
    if (!k->pg_ok) return skip(k, "polling table", "no connection to postgres");
    if (!k->table_exists || !k->cols)
        return skip(k, what, "the outbox table is missing or could not be read");
    int mark = begin(k);
    char missing[512] = "";
    for (const char *const *c = polling_state_columns; *c; c++)
        if (!find_col(k, *c))
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
                     missing[0] ? ", " : "", *c);
    if (missing[0]) {
        report(k, CHECK_FAIL, what,
               "create the table from sql/outbox_polling.sql (or add its state columns "
               "and index)",
               "polling mode needs the state columns, and %s are missing", missing);
        k->table_ok = false;
    }
    const char *privs = k->cfg->poll_retention_ms > 0
                            ? "SELECT 2 - has_table_privilege($1::oid, 'UPDATE')::int - "
                              "has_table_privilege($1::oid, 'DELETE')::int"
                            : "SELECT 1 - has_table_privilege($1::oid, 'UPDATE')::int";
    long n = count_of(k, privs, 1, err, sizeof(err));
    if (n < 0) return query_failed(k, what, err);
    if (n != 0 && !k->superuser) {
        char tsql[420];
        snprintf(fix, sizeof(fix), "run GRANT SELECT, UPDATE%s ON %s TO the role",
                 k->cfg->poll_retention_ms > 0 ? ", DELETE" : "",
                 table_sql(k, tsql, sizeof(tsql)));
        report(k, CHECK_FAIL, what, fix, "the role may not UPDATE%s the table",
               k->cfg->poll_retention_ms > 0 ? " or DELETE from" : "");
    }
    if (!missing[0]) {
        n = count_of(k,
                     "SELECT count(*) FROM pg_catalog.pg_index i WHERE i.indrelid = $1::oid "
                     "AND i.indpred IS NOT NULL AND pg_catalog.pg_get_indexdef(i.indexrelid) "
                     "LIKE '%next_attempt_at%'",
                     1, err, sizeof(err));
        if (n < 0) return query_failed(k, what, err);
        if (n == 0)
            report(k, CHECK_WARN, what,
                   "create the partial index of sql/outbox_polling.sql",
                   "no partial index on next_attempt_at: finding due rows scans the table");
        n = count_of(k,
                     "SELECT count(*) FROM pg_catalog.pg_trigger t WHERE t.tgrelid = $1::oid "
                     "AND NOT t.tgisinternal AND t.tgenabled <> 'D' "
                     "AND pg_catalog.pg_get_functiondef(t.tgfoid) ILIKE '%notify%' "
                     "AND pg_catalog.pg_get_functiondef(t.tgfoid) LIKE '%' || $2 || '%'",
                     2, err, sizeof(err));
        if (n < 0) return query_failed(k, what, err);
        if (n == 0) {
            snprintf(fix, sizeof(fix),
                     "create the insert trigger of sql/outbox_polling.sql (NOTIFY %s)",
                     k->cfg->poll_notify_channel);
            report(k, CHECK_WARN, what, fix,
                   "no enabled trigger NOTIFYs channel \"%s\": new events wait up to "
                   "[polling] poll_interval_ms (%d ms)",
                   k->cfg->poll_notify_channel, k->cfg->poll_interval_ms);
        }
    }
    if (silent_since(k, mark))
        report(k, CHECK_OK, what, NULL,
               "state columns, due-row index and NOTIFY trigger (channel %s) present",
               k->cfg->poll_notify_channel);
}

/* What is not delivered yet, in one line (polling.h: the backlog query the
 * relay's metrics run). Informational: it fails only when the query does. */
static void check_polling_backlog(struct ck *k)
{
    static const char what[] = "polling backlog";
    char err[1024], line[512];
    if (!k->pg_ok) return skip(k, what, "no connection to postgres");
    if (!k->table_ok) return skip(k, what, "the polling table is missing or incomplete");
    if (!find_col(k, "created_at"))
        return skip(k, what, "the table has no created_at column (sql/outbox_polling.sql)");
    char *sql = polling_backlog_sql(&k->map);
    if (!sql) return query_failed(k, what, "out of memory");
    PGresult *r = query(k, sql, 0, NULL, err, sizeof(err));
    free(sql);
    if (!r) return query_failed(k, what, err);
    struct polling_backlog b = {.seen = true};
    int rc = PQntuples(r) == PS__COUNT && PQnfields(r) == 5 ? 0 : -1;
    if (rc != 0)
        snprintf(err, sizeof(err), "%d rows of %d columns", PQntuples(r), PQnfields(r));
    for (int i = 0; rc == 0 && i < PS__COUNT; i++) {
        const char *vals[5];
        for (int c = 0; c < 5; c++) vals[c] = PQgetvalue(r, i, c);
        rc = polling_backlog_row(&b, vals, err, sizeof(err));
    }
    PQclear(r);
    if (rc != 0) return query_failed(k, what, err);
    report(k, CHECK_OK, what, NULL, "%s", polling_backlog_line(&b, line, sizeof(line)));
}

/* The checks of logical replication, skipped in polling mode. */
static void skip_replication_checks(struct ck *k)
{
    static const char *const names[] = {
        "wal_level = logical", "free replication slot and WAL sender", "publication",
        "plugin allowed",      "replication connection",               "plugin installed",
        "offset file",         "slot",                                 "slot not invalidated",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        skip(k, names[i], "not used in [source] mode = polling");
}

/* ---- 7. publication ---- */

static void check_publication(struct ck *k)
{
    const struct config *c = k->cfg;
    char what[300], err[1024], fix[2048], tsql[420], pid[200];
    snprintf(what, sizeof(what), "publication \"%s\"", c->pg_publication);
    if (plugin_parse(c->pg_plugin) != PLUGIN_PGOUTPUT) {
        report(k, CHECK_OK, "publication", NULL, "not used with plugin %s", c->pg_plugin);
        return;
    }
    if (!k->pg_ok) return skip(k, what, "no connection to postgres");
    ident(c->pg_publication, pid, sizeof(pid));
    if (k->map_ok)
        table_sql(k, tsql, sizeof(tsql));
    else
        snprintf(tsql, sizeof(tsql), "%s", c->outbox_table);
    const char *p1[] = {c->pg_publication};
    PGresult *r = query(k,
                        "SELECT pubinsert, pubupdate, pubdelete, pubtruncate, puballtables "
                        "FROM pg_catalog.pg_publication WHERE pubname = $1",
                        1, p1, err, sizeof(err));
    if (!r) return query_failed(k, what, err);
    if (PQntuples(r) == 0) {
        PQclear(r);
        snprintf(fix, sizeof(fix),
                 "create it with CREATE PUBLICATION %s FOR TABLE %s WITH (publish = "
                 "'insert') (see sql/outbox.sql)",
                 pid, tsql);
        report(k, CHECK_FAIL, what, fix,
               "publication \"%s\" does not exist in this database", c->pg_publication);
        return;
    }
    bool ins = PQgetvalue(r, 0, 0)[0] == 't';
    char publish[64] = "";
    const char *ops[] = {"insert", "update", "delete", "truncate"};
    for (int i = 0; i < 4; i++)
        if (PQgetvalue(r, 0, i)[0] == 't')
            snprintf(publish + strlen(publish), sizeof(publish) - strlen(publish), "%s%s",
                     *publish ? ", " : "", ops[i]);
    PQclear(r);

    int mark = begin(k);
    if (!ins) {
        snprintf(fix, sizeof(fix), "run ALTER PUBLICATION %s SET (publish = 'insert')",
                 pid);
        report(k, CHECK_FAIL, what, fix,
               "publication \"%s\" does not publish inserts (publish = '%s')",
               c->pg_publication, publish);
    }
    if (k->map_ok && k->table_exists) {
        const char *p3[] = {c->pg_publication, k->map.schema, k->map.table};
        bool pg15 = k->server_version >= 150000;
        r = query(k,
                  pg15 ? "SELECT rowfilter FROM pg_catalog.pg_publication_tables "
                         "WHERE pubname = $1 AND schemaname = $2 AND tablename = $3"
                       : "SELECT NULL FROM pg_catalog.pg_publication_tables "
                         "WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
                  3, p3, err, sizeof(err));
        if (!r) return query_failed(k, what, err);
        bool included = PQntuples(r) > 0;
        if (!included) {
            snprintf(fix, sizeof(fix), "run ALTER PUBLICATION %s ADD TABLE %s", pid, tsql);
            report(k, CHECK_FAIL, what, fix, "publication \"%s\" does not include %s.%s",
                   c->pg_publication, k->map.schema, k->map.table);
        } else if (!PQgetisnull(r, 0, 0)) {
            snprintf(
                fix, sizeof(fix),
                "events of rows outside it are never relayed: ALTER PUBLICATION %s SET "
                "TABLE %s (without WHERE) unless that is intended",
                pid, tsql);
            report(k, CHECK_WARN, what, fix,
                   "publication \"%s\" has a row filter on %s.%s: %s", c->pg_publication,
                   k->map.schema, k->map.table, PQgetvalue(r, 0, 0));
        }
        PQclear(r);
        if (included && pg15) {
            /* A column list that leaves out a configured column makes every
             * event fail to build. */
            r = query(k,
                      "SELECT a FROM pg_catalog.pg_publication_tables, unnest(attnames) a "
                      "WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
                      3, p3, err, sizeof(err));
            if (!r) return query_failed(k, what, err);
            for (int col = 0; col < OC__COUNT; col++) {
                const char *name = k->map.columns[col];
                bool in_table = false, listed = false;
                for (int i = 0; i < k->ncols && !in_table; i++)
                    in_table = strcmp(k->cols[i].name, name) == 0;
                for (int i = 0; i < PQntuples(r) && !listed; i++)
                    listed = strcmp(PQgetvalue(r, i, 0), name) == 0;
                if (in_table && !listed) {
                    /* Without aggregate_version events still build, without
                     * that header. */
                    snprintf(
                        fix, sizeof(fix),
                        "%srun ALTER PUBLICATION %s SET TABLE %s (without a column list)",
                        col == OC_AGGREGATE_VERSION ? "no event gets an aggregate_version "
                                                      "header: "
                                                    : "",
                        pid, tsql);
                    report(k, col == OC_AGGREGATE_VERSION ? CHECK_WARN : CHECK_FAIL, what,
                           fix,
                           "publication \"%s\" has a column list on %s.%s without \"%s\"",
                           c->pg_publication, k->map.schema, k->map.table, name);
                }
            }
            PQclear(r);
        }
    }
    if (silent_since(k, mark))
        report(k, CHECK_OK, what, NULL, "publishes inserts%s%s.%s",
               k->table_exists ? " of " : " (table not checked: missing) ",
               k->map_ok ? k->map.schema : "?", k->map_ok ? k->map.table : "?");
}

/* ---- 8. plugin allowed, replication connection, plugin installed ---- */

static void check_plugin_allowed(struct ck *k)
{
    const char *plugin = k->cfg->pg_plugin;
    char what[128], err[1024], fix[2048];
    snprintf(what, sizeof(what), "plugin %s allowed", plugin);
    if (!k->pg_ok) return skip(k, what, "no connection to postgres");
    PGresult *r = query(k, "SHOW output_plugin_libraries", 0, NULL, err, sizeof(err));
    if (!r) {
        if (strcmp(k->sqlstate, "42704") == 0) { /* no such setting: anything goes */
            k->allowed_ok = true;
            report(k, CHECK_OK, what, NULL,
                   "the server has no output_plugin_libraries "
                   "setting");
        } else if (strcmp(k->sqlstate, "42501") == 0) {
            snprintf(fix, sizeof(fix),
                     "run GRANT pg_read_all_settings TO %s (outboxd reads this setting "
                     "before streaming)",
                     k->role);
            report(k, CHECK_FAIL, what, fix, "SHOW output_plugin_libraries: %s", err);
        } else {
            query_failed(k, what, err);
        }
        return;
    }
    const char *list = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "";
    if (plugin_listed(list, plugin)) {
        k->allowed_ok = true;
        report(k, CHECK_OK, what, NULL, "output_plugin_libraries = %s", list);
    } else {
        report(k, CHECK_FAIL, what,
               "run ALTER SYSTEM SET output_plugin_libraries = pgoutput, wal2json (an "
               "unquoted list), then reload the configuration",
               "the server's output_plugin_libraries (\"%s\") does not list %s", list,
               plugin);
    }
    PQclear(r);
}

static PGconn *repl_connect(struct ck *k, char *err, size_t errlen)
{
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", CHECK_CONNECT_TIMEOUT_S);
    const char *keys[] = {"connect_timeout", "dbname", "replication",
                          "fallback_application_name", NULL};
    const char *vals[] = {timeout, k->cfg->pg_conninfo, "database", "outboxd-check", NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (c && PQstatus(c) == CONNECTION_OK) return c;
    pg_message(k, c ? PQerrorMessage(c) : NULL, err, errlen);
    PQfinish(c);
    return NULL;
}

static PGconn *check_replication_connection(struct ck *k)
{
    const char *what = "replication connection";
    char err[1024];
    if (!k->pg_ok) return skip(k, what, "no connection to postgres"), NULL;
    if (!k->repl_role) return skip(k, what, "the role lacks REPLICATION"), NULL;
    if (!k->sender_free) return skip(k, what, "no free WAL sender"), NULL;
    PGconn *c = repl_connect(k, err, sizeof(err));
    if (!c) {
        report(k, CHECK_FAIL, what,
               strstr(err, "no pg_hba.conf entry")
                   ? "add a pg_hba.conf line for replication connections (its database "
                     "field must be \"replication\"; \"all\" does not match them) and "
                     "reload the server"
                   : "see the server's log",
               "%s", err);
        return NULL;
    }
    k->replconn_ok = true;
    report(k, CHECK_OK, what, NULL, NULL);
    return c;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs sql on c, waiting at most ms; cancels it then. Returns the first
 * result (caller PQclears), NULL on timeout (*timed_out) or failure. */
static PGresult *exec_bounded(PGconn *c, const char *sql, int ms, bool *timed_out)
{
    *timed_out = false;
    if (!PQsendQuery(c, sql)) return NULL;
    int64_t deadline = mono_ms() + ms;
    while (PQisBusy(c)) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            char buf[256];
            PGcancel *cn = PQgetCancel(c);
            if (cn) {
                PQcancel(cn, buf, sizeof(buf));
                PQfreeCancel(cn);
            }
            *timed_out = true;
            break;
        }
        struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
        if (poll(&pfd, 1, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR) break;
        if (!PQconsumeInput(c)) break;
    }
    PGresult *first = NULL, *r;
    while ((r = PQgetResult(c)) != NULL) {
        if (!first)
            first = r;
        else
            PQclear(r);
    }
    if (*timed_out) {
        PQclear(first);
        return NULL;
    }
    return first;
}

static void check_plugin_installed(struct ck *k, PGconn *repl)
{
    const char *plugin = k->cfg->pg_plugin;
    char what[128], msg[1024], fix[512], sql[256];
    snprintf(what, sizeof(what), "plugin %s installed", plugin);
    if (!repl) return skip(k, what, "no replication connection");
    if (!k->wal_ok) return skip(k, what, "wal_level is not logical");
    if (!k->allowed_ok) return skip(k, what, "the plugin is not allowed");
    if (!k->slot_free)
        return skip(k, what, "no free replication slot for a temporary test slot");
    snprintf(
        sql, sizeof(sql),
        "CREATE_REPLICATION_SLOT outboxd_check_%d TEMPORARY LOGICAL %s NOEXPORT_SNAPSHOT",
        (int)getpid(), plugin_parse(plugin) == PLUGIN_WAL2JSON ? "wal2json" : "pgoutput");
    bool timed_out;
    PGresult *r = exec_bounded(repl, sql, CHECK_SLOT_TIMEOUT_MS, &timed_out);
    if (timed_out) {
        report(k, CHECK_WARN, what,
               "creating a slot waits for running transactions to end: look for long ones "
               "in pg_stat_activity",
               "a temporary slot with the plugin was not created within %d ms",
               CHECK_SLOT_TIMEOUT_MS);
        return;
    }
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        PQclear(r);
        snprintf(sql, sizeof(sql), "DROP_REPLICATION_SLOT outboxd_check_%d", (int)getpid());
        PQclear(PQexec(repl, sql)); /* temporary: it also goes with the session */
        report(k, CHECK_OK, what, NULL, "a temporary slot was created with it and dropped");
        return;
    }
    const char *ss = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    result_message(k, r, repl, msg, sizeof(msg));
    if (ss && strcmp(ss, "58P01") == 0) { /* undefined_file: no such library */
        snprintf(fix, sizeof(fix),
                 "install it on the database server (Debian: apt-get "
                 "install postgresql-%d-%s)",
                 k->server_version / 10000, plugin);
        report(k, CHECK_FAIL, what, fix,
               "the output plugin %s is not installed on the "
               "server (%s)",
               plugin, msg);
    } else {
        report(k, CHECK_FAIL, what, "see the server's log",
               "creating a temporary slot with the plugin failed: %s", msg);
    }
    PQclear(r);
}

/* ---- offset file ---- */

/* Compares the offset file with the server (IDENTIFY_SYSTEM on repl) and
 * the slot, as the daemon does at start (resume.h). Returns 0 with
 * k->resume filled, or -1 with why not in err. */
static int compare_offset(struct ck *k, PGconn *repl, char *err, size_t errlen)
{
    const struct config *c = k->cfg;
    struct server_ident id;
    if (!repl) return snprintf(err, errlen, "no replication connection"), -1;
    if (stream_identify_conn(repl, &id, err, errlen) != 0) return -1;
    const char *params[] = {c->pg_slot};
    PGresult *r = query(k,
                        "SELECT coalesce(confirmed_flush_lsn::text, '0/0'), "
                        "coalesce(plugin, '') FROM pg_catalog.pg_replication_slots "
                        "WHERE slot_name = $1",
                        1, params, err, errlen);
    if (!r) return -1;
    struct resume_server srv;
    resume_server_init(&srv, id.system, id.timeline, id.xlogpos, id.dbname, c->pg_slot,
                       c->pg_plugin);
    srv.slot_exists = PQntuples(r) == 1;
    if (srv.slot_exists) lsn_parse(PQgetvalue(r, 0, 0), &srv.slot_confirmed);
    k->slot_confirmed = srv.slot_confirmed;
    if (srv.slot_exists && strcmp(PQgetvalue(r, 0, 1), c->pg_plugin) != 0) {
        /* the slot's check says that; the daemon stops on it first, too */
        snprintf(err, errlen, "the slot uses plugin %s (see below)", PQgetvalue(r, 0, 1));
        PQclear(r);
        return -1;
    }
    PQclear(r);
    resume_decide(k->have_offset ? &k->offset : NULL, &srv, c->offsets_file, c->path,
                  &k->resume);
    k->resumed = true;
    return 0;
}

/* The detail of an ok offset-file line: the file against the slot. */
static void offset_detail(const struct ck *k, char *out, size_t outlen)
{
    char f[512], a[LSN_STRLEN], size[32];
    const struct resume_decision *d = &k->resume;
    if (!k->have_offset) {
        if (d->verdict == RESUME_FROM_SLOT)
            snprintf(out, outlen,
                     "not there yet (written at the first confirm); outboxd will start "
                     "from the slot's confirmed position %s",
                     lsn_format(d->start, a));
        else
            snprintf(out, outlen, "not there yet (written at the first confirm)");
        return;
    }
    offset_describe(&k->offset, f, sizeof(f));
    if (d->verdict == RESUME_SLOT_LOST) {
        snprintf(out, outlen, "%s; the slot does not exist (see below)", f);
        return;
    }
    lsn_t slot = k->slot_confirmed, file = k->offset.lsn;
    int n = snprintf(out, outlen, "%s; slot confirmed %s (%s)", f, lsn_format(slot, a),
                     file == slot ? "the same"
                                  : "file ahead by ");
    if (file != slot && n > 0 && (size_t)n < outlen) {
        out[n - 1] = '\0';
        snprintf(out + n - 1, outlen - (size_t)n + 1, "%s: normal after a crash)",
                 resume_bytes(file - slot, size, sizeof(size)));
    }
    if (d->note[0] && strlen(out) + 4 < outlen)
        snprintf(out + strlen(out), outlen - strlen(out), "; %s", d->note);
}

static void check_offset_file(struct ck *k, PGconn *repl)
{
    const char *path = k->cfg->offsets_file;
    char what[600], err[1024], fix[2048], detail[2048];
    snprintf(what, sizeof(what), "offset file %s", path);
    int rc = offset_read(path, &k->offset, err, sizeof(err));
    if (rc < 0) {
        /* err says how to get out of it */
        report(k, CHECK_FAIL, what, NULL, "%s", err);
        return;
    }
    k->have_offset = rc == 1;
    char *copy = strdup(path);
    const char *dir = copy ? dirname(copy) : ".";
    int probe = offset_probe_dir(path, err, sizeof(err));
    if (probe != 0) {
        snprintf(fix, sizeof(fix),
                 "free space on that file system, or create the directory %s and let the "
                 "user outboxd runs as write to it, or set [offsets] file",
                 dir);
        report(k, CHECK_FAIL, what, fix, "its directory %s does not take a write: %s", dir,
               err);
        free(copy);
        return;
    }
    free(copy);
    if (compare_offset(k, repl, err, sizeof(err)) != 0) {
        char f[512];
        if (k->have_offset) offset_describe(&k->offset, f, sizeof(f));
        report(k, CHECK_OK, what, NULL, "%s; not compared with the server and the slot: %s",
               k->have_offset ? f : "not there yet", err);
        return;
    }
    const struct resume_decision *d = &k->resume;
    if (d->refused && d->verdict != RESUME_SLOT_LOST) {
        report(k, CHECK_FAIL, what, NULL, "%s", d->message);
        return;
    }
    offset_detail(k, detail, sizeof(detail));
    report(k, CHECK_OK, what, NULL, "%s", detail);
}

/* ---- 9, 10. the slot ---- */

static void check_slot(struct ck *k)
{
    const struct config *c = k->cfg;
    char what[300], vwhat[320], err[1024], fix[2048], a[LSN_STRLEN];
    snprintf(what, sizeof(what), "slot \"%s\"", c->pg_slot);
    snprintf(vwhat, sizeof(vwhat), "slot \"%s\" not invalidated", c->pg_slot);
    if (!k->pg_ok) {
        skip(k, what, "no connection to postgres");
        return skip(k, vwhat, "no connection to postgres");
    }
    const char *params[] = {c->pg_slot};
    PGresult *r =
        query(k,
              k->server_version >= 130000
                  ? "SELECT slot_type, coalesce(plugin, ''), coalesce(database, ''), "
                    "active, coalesce(active_pid, 0), coalesce(wal_status, '') "
                    "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1"
                  : "SELECT slot_type, coalesce(plugin, ''), coalesce(database, ''), "
                    "active, coalesce(active_pid, 0), '' "
                    "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
              1, params, err, sizeof(err));
    if (!r) {
        query_failed(k, what, err);
        return skip(k, vwhat, "pg_replication_slots could not be read");
    }
    if (PQntuples(r) == 0) {
        PQclear(r);
        if (k->have_offset && k->resumed && k->resume.verdict == RESUME_SLOT_LOST) {
            report(k, CHECK_FAIL, what, NULL, "%s", k->resume.message);
        } else if (k->have_offset) {
            snprintf(
                fix, sizeof(fix),
                "fix [postgres] slot or conninfo; or check with outboxd verify, then move "
                "the offset file %s away to start afresh from now",
                c->offsets_file);
            report(k, CHECK_FAIL, what, fix,
                   "the slot does not exist on this server, but the offset file says "
                   "outboxd streamed it up to %s: a failover, a mistyped slot name or a "
                   "dropped slot; events committed since may be lost to it (outboxd "
                   "refuses to re-create it)",
                   lsn_format(k->offset.lsn, a));
        } else if (!c->pg_create_slot) {
            snprintf(
                fix, sizeof(fix),
                "create it with SELECT pg_create_logical_replication_slot('%s', '%s'), "
                "or set [postgres] create_slot = true",
                c->pg_slot, c->pg_plugin);
            report(k, CHECK_FAIL, what, fix,
                   "the slot does not exist and [postgres] create_slot is false");
        } else if (!k->slot_free) {
            report(k, CHECK_FAIL, what, "free a replication slot (see above)",
                   "the slot does not exist and no replication slot is free to create it");
        } else if (!k->repl_role) {
            report(k, CHECK_FAIL, what, "give the role REPLICATION (see above)",
                   "the slot does not exist and the role may not create it");
        } else {
            report(k, CHECK_OK, what, NULL,
                   "will be created at start (create_slot = true)");
        }
        report(k, CHECK_OK, vwhat, NULL, "the slot does not exist yet");
        return;
    }
    k->slot_exists = true;
    const char *type = PQgetvalue(r, 0, 0), *plugin = PQgetvalue(r, 0, 1),
               *db = PQgetvalue(r, 0, 2), *wal = PQgetvalue(r, 0, 5);
    bool active = PQgetvalue(r, 0, 3)[0] == 't';
    int pid = atoi(PQgetvalue(r, 0, 4));
    if (strcmp(type, "logical") != 0) {
        report(k, CHECK_FAIL, what, "set [postgres] slot to another name",
               "\"%s\" is a %s slot, not a logical one", c->pg_slot, type);
    } else if (strcmp(db, k->dbname) != 0) {
        report(k, CHECK_FAIL, what,
               "set [postgres] slot to another name, or connect to that database",
               "the slot belongs to database \"%s\", not \"%s\"", db, k->dbname);
    } else if (strcmp(plugin, c->pg_plugin) != 0) {
        snprintf(fix, sizeof(fix), "set plugin = %s or use another slot", plugin);
        report(k, CHECK_FAIL, what, fix,
               "replication slot \"%s\" uses plugin %s, but [postgres] plugin is %s",
               c->pg_slot, plugin, c->pg_plugin);
    } else if (active) {
        report(
            k, CHECK_WARN, what,
            "fine if that is the running outboxd; another instance waits until it is free",
            "the slot is in use by another process (pid %d)", pid);
    } else {
        report(k, CHECK_OK, what, NULL, "exists (plugin %s)", plugin);
    }
    snprintf(k->slot_wal_status, sizeof(k->slot_wal_status), "%s", wal);
    PQclear(r);

    if (strcmp(k->slot_wal_status, "lost") == 0) {
        snprintf(
            fix, sizeof(fix),
            "drop it with SELECT pg_drop_replication_slot('%s'), remove the offset file "
            "%s and start outboxd to re-create it; events committed since may need a "
            "re-sync: check with outboxd verify",
            c->pg_slot, c->offsets_file);
        report(
            k, CHECK_FAIL, vwhat, fix,
            "the slot is invalidated (wal_status = lost): the server removed WAL it still "
            "needed (max_slot_wal_keep_size)");
    } else if (strcmp(k->slot_wal_status, "unreserved") == 0) {
        report(
            k, CHECK_WARN, vwhat,
            "let outboxd catch up now, or raise max_slot_wal_keep_size",
            "the slot is about to be invalidated (wal_status = unreserved: it holds more "
            "WAL than max_slot_wal_keep_size)");
    } else {
        report(k, CHECK_OK, vwhat, NULL, "wal_status = %s",
               *k->slot_wal_status ? k->slot_wal_status : "unknown");
    }
}

/* ---- 11. broker ---- */

static void check_broker(struct ck *k)
{
    const char *what = "kafka broker";
    if (!k->rk) return skip(k, what, "the [kafka] configuration is not valid");
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(k->rk, 1, NULL, &md, CHECK_BROKER_TIMEOUT_MS);
    const char *servers = config_kafka_get(k->cfg, "bootstrap.servers");
    rd_kafka_poll(k->rk, 0); /* serves the error callback: a refusal? */
    if (e && k->refusal.err) {
        report(k, CHECK_FAIL, what, kafka_refusal_fix(k->refusal.err),
               "%s refused the connection: %s: %s", servers ? servers : "(none)",
               rd_kafka_err2name(k->refusal.err), k->refusal.reason);
        return;
    }
    if (e) {
        report(k, CHECK_FAIL, what,
               "check [kafka] bootstrap.servers, that the broker is up and reachable from "
               "here, and the security settings (security.protocol, sasl.*, ssl.*)",
               "no metadata from %s within %d ms: %s", servers ? servers : "(none)",
               CHECK_BROKER_TIMEOUT_MS, rd_kafka_err2str(e));
        return;
    }
    k->md = md;
    k->broker_ok = true;
    report(k, CHECK_OK, what, NULL, "%d broker%s, %d topic%s", md->broker_cnt,
           md->broker_cnt == 1 ? "" : "s", md->topic_cnt, md->topic_cnt == 1 ? "" : "s");
}

/* ---- 12. topics ---- */

struct topic_list {
    char **names;
    size_t n, cap;
};

static int topics_add(struct topic_list *l, const char *t)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], t) == 0) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **n = realloc(l->names, cap * sizeof(*n));
        if (!n) return -1;
        l->names = n;
        l->cap = cap;
    }
    return (l->names[l->n] = strdup(t)) ? (int)++l->n : -1;
}

static void topics_free(struct topic_list *l)
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

/* The broker's auto.create.topics.enable, asked of the first broker of the
 * metadata with DescribeConfigs: 1 true, 0 false, -1 unknown (refused, as
 * it needs DESCRIBE_CONFIGS on the cluster, unsupported, or no answer). */
static int broker_auto_creates(struct ck *k)
{
    char id[16];
    if (!k->md || k->md->broker_cnt < 1) return -1;
    snprintf(id, sizeof(id), "%d", (int)k->md->brokers[0].id);
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id);
    rd_kafka_queue_t *q = rd_kafka_queue_new(k->rk);
    rd_kafka_AdminOptions_t *o =
        rd_kafka_AdminOptions_new(k->rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_AdminOptions_set_request_timeout(o, CHECK_DESCRIBE_TIMEOUT_MS, NULL, 0);
    rd_kafka_DescribeConfigs(k->rk, &res, 1, o, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, CHECK_DESCRIBE_TIMEOUT_MS + 1000);
    int v = -1;
    const rd_kafka_DescribeConfigs_result_t *r =
        ev && !rd_kafka_event_error(ev) ? rd_kafka_event_DescribeConfigs_result(ev) : NULL;
    size_t nres = 0, nent = 0;
    const rd_kafka_ConfigResource_t **rs =
        r ? rd_kafka_DescribeConfigs_result_resources(r, &nres) : NULL;
    const rd_kafka_ConfigEntry_t **es =
        nres == 1 && !rd_kafka_ConfigResource_error(rs[0])
            ? rd_kafka_ConfigResource_configs(rs[0], &nent)
            : NULL;
    for (size_t i = 0; es && i < nent; i++) {
        const char *val = rd_kafka_ConfigEntry_value(es[i]);
        if (!strcmp(rd_kafka_ConfigEntry_name(es[i]), "auto.create.topics.enable") && val)
            v = !strcmp(val, "true");
    }
    if (ev) rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_queue_destroy(q);
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

/* Renders the template for the distinct values of its columns in the
 * table into l. Returns the number of rows read, -1 on error (err). */
static int render_topics(struct ck *k, struct topic_list *l, int *nulls, bool *truncated,
                         char *err, size_t errlen)
{
    char tsql[420], sql[8192], topic[OUTBOX_TOPIC_MAX], why[512];
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
        char *q = PQescapeIdentifier(k->pg, k->tcols[i], strlen(k->tcols[i]));
        if (!q) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        n += (size_t)snprintf(sql + n, n < sizeof(sql) ? sizeof(sql) - n : 0, "%s%s::text",
                              i ? ", " : "", q);
        PQfreemem(q);
        cols[i] = (struct rel_column){.name = k->tcols[i]};
    }
    char *sq = PQescapeIdentifier(k->pg, k->map.schema, strlen(k->map.schema));
    char *tq = PQescapeIdentifier(k->pg, k->map.table, strlen(k->map.table));
    snprintf(tsql, sizeof(tsql), "%s.%s", sq ? sq : "", tq ? tq : "");
    PQfreemem(sq);
    PQfreemem(tq);
    if (n < sizeof(sql))
        snprintf(sql + n, sizeof(sql) - n, " FROM %s LIMIT %d", tsql, CHECK_TOPIC_ROWS + 1);
    PGresult *r = query(k, sql, 0, NULL, err, errlen);
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

static void check_topics(struct ck *k)
{
    const char *what = "topics";
    char err[1024], names[1400], fix[1600];
    if (!k->map_ok) return skip(k, what, "[outbox] topic is not valid");
    if (!k->pg_ok) return skip(k, what, "no connection to postgres");
    if (!k->table_ok) return skip(k, what, "the outbox table is missing or incomplete");
    if (!k->can_select)
        return skip(k, what, "the role may not SELECT from the outbox table");
    if (!k->rk) return skip(k, what, "the [kafka] configuration is not valid");
    if (!k->broker_ok) return skip(k, what, "the broker did not answer");

    struct topic_list l = {0};
    int nulls;
    bool truncated;
    int rows = render_topics(k, &l, &nulls, &truncated, err, sizeof(err));
    if (rows < 0) {
        topics_free(&l);
        report(k, CHECK_WARN, what, "run outboxd check again when the table is less busy",
               "the template's values could not be read from the outbox table: %s", err);
        return;
    }
    if (k->cfg->errors_policy == ERRORS_DLQ && k->cfg->errors_dlq_topic)
        topics_add(&l, k->cfg->errors_dlq_topic);

    int mark = begin(k);
    char **bad = calloc(l.n + 1, sizeof(*bad)),
         **missing = calloc(l.n + 1, sizeof(*missing)),
         **present = calloc(l.n + 1, sizeof(*present));
    size_t nbad = 0, nmissing = 0, npresent = 0;
    char why[512] = "";
    for (size_t i = 0; bad && missing && present && i < l.n; i++) {
        char w[512];
        if (!outbox_topic_valid(l.names[i], w, sizeof(w))) {
            if (!nbad) snprintf(why, sizeof(why), "%s", w);
            bad[nbad++] = l.names[i];
        } else if (topic_exists(k->md, l.names[i])) {
            present[npresent++] = l.names[i];
        } else {
            missing[nmissing++] = l.names[i];
        }
    }
    /* Rows that cannot be routed stop the daemon under policy = halt; under
     * dlq they are dead-lettered, so only a warning. */
    bool dlq = k->cfg->errors_policy == ERRORS_DLQ;
    enum check_status unroutable = dlq ? CHECK_WARN : CHECK_FAIL;
    const char *unroutable_fix =
        dlq ? "such rows go to the dead-letter topic; correct the values (or [outbox] "
              "topic) "
              "if they are new"
            : "such rows stop outboxd ([errors] policy = halt): correct the values in the "
              "outbox or [outbox] topic, or set [errors] policy = dlq";
    if (nbad == 1) {
        report(k, unroutable, what, unroutable_fix, "a rendered topic is not valid: %s",
               why);
    } else if (nbad > 1) {
        list_names(bad, nbad, names, sizeof(names));
        report(k, unroutable, what, unroutable_fix,
               "%zu rendered topics are not valid (%s; all: %s)", nbad, why, names);
    }
    if (nmissing) {
        /* A broker that does not create topics fails every event for them
         * (outboxd halts on the first, under either policy). */
        int autocreate = broker_auto_creates(k);
        list_names(missing, nmissing, names, sizeof(names));
        snprintf(fix, sizeof(fix), "%s",
                 autocreate == 0
                     ? "create them: the broker does not create topics "
                       "(auto.create.topics.enable = false), and outboxd stops at the first "
                       "event for a missing topic under either [errors] policy"
                     : "they will be auto-created if the broker allows it "
                       "(auto.create.topics.enable); otherwise create them");
        report(k, autocreate == 0 ? CHECK_FAIL : CHECK_WARN, what, fix,
               "%zu of %zu topic%s do%s not exist%s: %s", nmissing, l.n, l.n == 1 ? "" : "s",
               nmissing == 1 ? "es" : "", autocreate == 0 ? "" : " yet", names);
    }
    if (nulls)
        report(k, unroutable, what, unroutable_fix,
               "%d distinct value%s of the template's columns %s NULL, so no topic can be "
               "rendered for %s",
               nulls, nulls == 1 ? "" : "s", nulls == 1 ? "is" : "are",
               nulls == 1 ? "it" : "them");
    if (silent_since(k, mark)) {
        list_names(present, npresent, names, sizeof(names));
        if (l.n == 0)
            report(k, CHECK_OK, what, NULL,
                   "the outbox table is empty: nothing to render yet");
        else
            report(k, CHECK_OK, what, NULL, "%zu topic%s exist%s%s: %s", l.n,
                   l.n == 1 ? "" : "s", l.n == 1 ? "s" : "",
                   truncated ? " (of the first "
                               "1000 distinct values)"
                             : "",
                   names);
    }
    free(bad);
    free(missing);
    free(present);
    topics_free(&l);
}

/* ---- the run ------------------------------------------------------------- */

static void ck_free(struct ck *k)
{
    if (k->md) rd_kafka_metadata_destroy(k->md);
    if (k->rk) rd_kafka_destroy(k->rk);
    PQfinish(k->pg);
    free(k->password);
    free_cols(k);
    for (int i = 0; i < k->ntcols; i++)
        free(k->tcols[i]);
    if (k->map_ok) outbox_map_free(&k->map);
}

int check_run(const struct config *cfg, bool quiet_ok, enum check_scope scope)
{
    struct ck k = {.cfg = cfg, .quiet = quiet_ok, .scope = scope};
    if (scope == CHECK_SCOPE_STARTUP) {
        /* The daemon validated its configuration and built its producer. */
        char err[1024];
        k.map_ok = outbox_map_init(&k.map, cfg->outbox_table,
                                   (const char *const *)cfg->outbox_columns,
                                   cfg->outbox_topic, err, sizeof(err)) == 0;
        if (k.map_ok) {
            k.ntcols =
                check_template_columns(cfg->outbox_topic, k.tcols, MAX_TEMPLATE_COLUMNS);
            if (k.ntcols < 0) k.ntcols = 0;
        }
        check_connection(&k);
        if (k.pg_ok && cfg->source_mode == SOURCE_POLLING) {
            check_role(&k);
            check_table(&k);
            check_polling_table(&k);
        } else if (k.pg_ok) {
            check_wal_level(&k);
            check_role(&k);
            check_table(&k);
            check_publication(&k);
        }
    } else if (scope == CHECK_SCOPE_CONFIG) {
        check_config(&k);
    } else if (cfg->source_mode == SOURCE_POLLING) {
        check_config(&k);
        check_connection(&k);
        check_role(&k);
        check_table(&k);
        check_polling_table(&k);
        check_polling_backlog(&k);
        skip_replication_checks(&k);
        check_broker(&k);
        check_topics(&k);
    } else {
        check_config(&k);
        check_connection(&k);
        check_wal_level(&k);
        check_capacity(&k);
        check_role(&k);
        check_table(&k);
        check_publication(&k);
        check_plugin_allowed(&k);
        PGconn *repl = check_replication_connection(&k);
        check_plugin_installed(&k, repl);
        check_offset_file(&k, repl);
        PQfinish(repl);
        check_slot(&k);
        check_broker(&k);
        check_topics(&k);
    }
    int failed = k.nfail;
    /* A configuration error is exit 2 in every subcommand (README, Exit
     * codes); other failed checks are "check found problems", 1. */
    bool config_failed = scope != CHECK_SCOPE_STARTUP && !k.config_ok;
    ck_free(&k);
    if (failed && quiet_ok)
        log_error("%d start-up check%s failed (outboxd check -c FILE runs all checks)",
                  failed, failed == 1 ? "" : "s");
    return config_failed ? EXIT_USAGE : failed ? 1 : 0;
}

int check_config_failed(const char *err)
{
    static const char *const rest[] = {
        "postgres connection",
        "wal_level = logical",
        "free replication slot and WAL sender",
        "role",
        "outbox table",
        "publication",
        "plugin allowed",
        "replication connection",
        "plugin installed",
        "offset file",
        "slot",
        "slot not invalidated",
        "kafka broker",
        "topics",
    };
    char line[4096];
    puts(check_format_line(line, sizeof(line), CHECK_FAIL, "configuration", err,
                           strstr(err, "did you mean")
                               ? NULL
                               : "correct it in the configuration "
                                 "file, the OUTBOXD_* environment or "
                                 "--set"));
    for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++)
        puts(check_format_line(line, sizeof(line), CHECK_SKIP, rest[i],
                               "the configuration could not be loaded", NULL));
    fflush(stdout);
    return EXIT_USAGE;
}
