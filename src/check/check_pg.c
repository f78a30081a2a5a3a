/*
 * check_pg.c - the Postgres checks of `outboxd check` over an ordinary
 * connection (the catalog queries need the extended protocol for
 * parameters): the connection, wal_level, free slots and WAL senders, the
 * role, the outbox (or polling) table and the publication; and the query
 * helpers the other parts use (check_int.h).
 *
 * The conninfo is never printed; libpq's messages have the password masked
 * and, for parse errors (which quote the offending text), every quoted part
 * removed (redact.h).
 */
#include "check_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connerr.h"
#include "fixit.h"
#include "pgconn.h"
#include "pghosts.h"
#include "polling.h"
#include "redact.h"
#include "settings.h"
#include "str.h"

/* ---- column types (pure, check.h) ---- */

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
    /* bytea: its bytes (outbox.h) */
    static const char *const payloads[] = {"json", "jsonb", "text", "bytea", NULL};
    static const char *const loose_text[] = {"varchar", "bpchar", "citext", "xml", NULL};
    switch (col) {
    case OC_AGGREGATE_VERSION:
        if (name_in(typname, integers)) return TYPE_FITS;
        return strcmp(typname, "numeric") == 0 ? TYPE_ODD : TYPE_BAD;
    case OC_PAYLOAD:
        if (name_in(typname, payloads)) return TYPE_FITS;
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
        return "json, jsonb, text or bytea";
    default:
        return "text-like or uuid";
    }
}

/* ---- query helpers ---- */

/* A quoted SQL identifier only when it needs quoting. */
const char *ck_ident(const char *name, char *buf, size_t len)
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
const char *ck_table_sql(const struct ck *k, char *buf, size_t len)
{
    char s[200], t[200];
    snprintf(buf, len, "%s.%s", ck_ident(k->map.schema, s, sizeof(s)),
             ck_ident(k->map.table, t, sizeof(t)));
    return buf;
}

/* libpq's text msg on one line with the conninfo's password masked
 * (pgconn_clean). Line breaks fold into one space each first, as check has
 * always printed them. A conninfo that is a bare database name was never
 * parsed (k->mask_conninfo false): it holds no password. */
static void pg_message(const struct ck *k, const char *msg, char *out, size_t outlen)
{
    char folded[1024];
    redact_mask(msg ? msg : "out of memory", NULL, folded, sizeof(folded));
    pgconn_clean(folded, k->mask_conninfo ? k->cfg->pg_conninfo : NULL, NULL, out, outlen);
}

/* The server's message for a failed statement (without libpq's "ERROR:  "
 * prefix), else libpq's. */
void ck_result_message(const struct ck *k, const PGresult *r, PGconn *conn, char *out,
                       size_t outlen)
{
    const char *m = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    pg_message(k, m ? m : pgconn_error(conn), out, outlen);
}

PGconn *ck_connect(struct ck *k, bool replication, char *err, size_t errlen)
{
    struct pgconn_opts o = {
        .conninfo = k->cfg->pg_conninfo ? k->cfg->pg_conninfo : "",
        .app_name = "outboxd-check",
        .timeout_s = CHECK_CONNECT_TIMEOUT_S, /* first: one in the conninfo wins */
        .replication = replication,
    };
    PGconn *c = pgconn_connect(&o);
    if (c && PQstatus(c) == CONNECTION_OK) return c;
    pg_message(k, pgconn_error(c), err, errlen);
    PQfinish(c);
    return NULL;
}

/* Runs sql with text parameters on the check connection. Returns the
 * result (caller PQclears) when it succeeded, else NULL with the server's
 * message in err and its SQLSTATE in k->sqlstate. */
PGresult *ck_query(struct ck *k, const char *sql, int nparams, const char *const *params,
                   char *err, size_t errlen)
{
    PGresult *r = PQexecParams(k->pg, sql, nparams, NULL, params, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(r);
    k->sqlstate[0] = '\0';
    if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return r;
    const char *ss = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (ss) snprintf(k->sqlstate, sizeof(k->sqlstate), "%s", ss);
    ck_result_message(k, r, k->pg, err, errlen);
    PQclear(r);
    return NULL;
}

/* Reports a failed catalog query as a FAIL of what. */
void ck_query_failed(struct ck *k, const char *what, const char *err)
{
    ck_report(k, CHECK_FAIL, what,
              "see the server's log; a role needs no special privilege "
              "for these catalog queries",
              "query failed: %s", err);
}

/* ---- 2. postgres connection ---- */

static bool looks_like_conninfo(const char *s)
{
    return strchr(s, '=') || strncmp(s, "postgres://", 11) == 0 ||
           strncmp(s, "postgresql://", 13) == 0;
}

/* How pgconn.c's own reasons for not connecting begin (no credentials, no
 * region), and their fix. */
#define AUTH_PREFIX "[postgres] auth = aws_rds_iam: "
#define NO_TOKEN_FIX                                                                       \
    "give outboxd AWS credentials of the standard chain (environment, [aws] profile, a "  \
    "web identity token file, the container or instance role)"

/* The fix for a connection error message. */
static const char *connect_fix(const char *msg)
{
    if (strstr(msg, AUTH_PREFIX)) return NO_TOKEN_FIX;
    const char *fix = connerr_fix(msg); /* the daemon exits 2 with the same fix */
    if (fix) return fix;
    return "check host and port in [postgres] conninfo, that the server is running and "
           "accepts TCP connections there (listen_addresses, firewall)";
}

/*
 * Whether the connection authenticates the server. libpq's default sslmode
 * is prefer: TLS when the server offers it, but its certificate is never
 * checked, and plain text when it does not offer it; require encrypts but
 * checks nothing either. Only verify-ca and verify-full keep a machine in
 * the network path from posing as the server (and reading the events and
 * the role's password exchange). The effective mode is the connection's
 * own (PQconninfo: the conninfo's, else PGSSLMODE or a service file's,
 * else prefer).
 *
 * check_connection() warns (and the daemon logs that WARN at start) when a
 * server of the conninfo is on another machine. A server on this machine
 * (a Unix socket, localhost, a loopback address: pghost_is_local()) gets
 * no warning, only a note on the ok line: its traffic never leaves the
 * machine, whoever could pose as the server there already runs code on
 * it, and a certificate for "localhost" is rare, so a warning on every
 * such set-up would teach people to ignore the warning. Every host of a
 * multi-host conninfo counts (a standby may be promoted and connected to).
 */
struct tls_seen {
    bool known;        /* libpq reported its options */
    bool verifies;     /* sslmode verify-ca or verify-full */
    char mode[32];     /* the effective sslmode */
    char remote[300];  /* the first server not on this host, "" if none */
};

/* What the connection k->pg uses, into t (t->known false when libpq
 * cannot report its options). */
static void tls_seen(const struct ck *k, struct tls_seen *t)
{
    PQconninfoOption *opts = PQconninfo(k->pg);
    memset(t, 0, sizeof(*t));
    if (!opts) return;
    const char *mode = "prefer", *host = NULL, *hostaddr = NULL, *port = NULL;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val) continue;
        if (strcmp(o->keyword, "sslmode") == 0 && *o->val) mode = o->val;
        if (strcmp(o->keyword, "host") == 0) host = o->val;
        if (strcmp(o->keyword, "hostaddr") == 0) hostaddr = o->val;
        if (strcmp(o->keyword, "port") == 0) port = o->val;
    }
    struct pghost hosts[PGHOSTS_MAX];
    char err[256], label[300];
    int n = pghosts_split(host, hostaddr, port, hosts, PGHOSTS_MAX, err, sizeof(err));
    for (int i = 0; i < n && !t->remote[0]; i++)
        if (!pghost_is_local(&hosts[i]))
            snprintf(t->remote, sizeof(t->remote), "%s",
                     pghost_label(&hosts[i], label, sizeof(label)));
    if (n < 0) snprintf(t->remote, sizeof(t->remote), "the servers listed");
    snprintf(t->mode, sizeof(t->mode), "%s", mode);
    t->verifies = pghosts_sslmode_verifies(mode);
    t->known = true;
    PQconninfoFree(opts);
}

/* [postgres] auth = aws_rds_iam: the line saying where the credentials
 * came from, that a token was made, and whether the server took it (msg:
 * NULL when the connection succeeded, else why it failed). pgconn.c made
 * the token; the line is said before the connection's own. */
static void check_rds_iam(struct ck *k, const char *msg)
{
    const char *what = "postgres auth";
    const char *said = pgconn_auth_said();
    if (!msg) {
        ck_report(k, CHECK_OK, what, NULL,
                  "aws_rds_iam: %s; the connection with it succeeded", said);
        return;
    }
    if (k->quiet) return; /* the daemon logs the connection's failure itself */
    const char *own = strstr(msg, AUTH_PREFIX);
    if (!said[0] || own)
        ck_report(k, CHECK_FAIL, what, NO_TOKEN_FIX, "aws_rds_iam: no token was made: %s",
                  own ? own + strlen(AUTH_PREFIX) : msg);
    else
        ck_report(k, CHECK_FAIL, what,
                  "the database role needs GRANT rds_iam TO the role, and the IAM "
                  "identity of these credentials an IAM policy allowing rds-db:connect on "
                  "arn:aws:rds-db:REGION:ACCOUNT:dbuser:DB-RESOURCE-ID/USER (deploy/"
                  "security.md, \"AWS IAM database authentication\")",
                  "aws_rds_iam: %s; the connection with it failed: %s", said, msg);
}

void check_connection(struct ck *k)
{
    const char *what = "postgres connection";
    const char *conninfo = k->cfg->pg_conninfo ? k->cfg->pg_conninfo : "";
    char msg[1024];

    if (looks_like_conninfo(conninfo)) {
        char *perr = NULL;
        PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
        if (!opts) {
            redact_conn_error(conninfo, perr ? perr : "out of memory", msg, sizeof(msg));
            PQfreemem(perr);
            if (!k->quiet)
                ck_report(
                    k, CHECK_FAIL, what,
                    "correct its syntax: key=value pairs or a postgres:// URI (special "
                    "characters in a URI password must be percent-encoded)",
                    "[postgres] conninfo cannot be parsed (not shown: it may hold a "
                    "password): %s",
                    msg);
            return;
        }
        PQconninfoFree(opts);
        k->mask_conninfo = true;
    }

    k->pg = ck_connect(k, false, msg, sizeof(msg));
    if (k->cfg->pg_auth == PG_AUTH_AWS_RDS_IAM) check_rds_iam(k, k->pg ? NULL : msg);
    if (!k->pg) {
        /* The daemon retries what is transient and reports the rest itself. */
        if (!k->quiet) ck_report(k, CHECK_FAIL, what, connect_fix(msg), "%s", msg);
        return;
    }
    k->server_version = PQserverVersion(k->pg);
    char sto[64];
    snprintf(sto, sizeof(sto), "SET statement_timeout = %d", CHECK_STATEMENT_TIMEOUT_MS);
    PGresult *r = ck_query(k, sto, 0, NULL, msg, sizeof(msg));
    PQclear(r);
    r = ck_query(
        k, "SELECT current_user, current_database(), current_setting('server_version')", 0,
        NULL, msg, sizeof(msg));
    if (!r) {
        ck_query_failed(k, what, msg);
        return;
    }
    snprintf(k->role, sizeof(k->role), "%s", PQgetvalue(r, 0, 0));
    snprintf(k->dbname, sizeof(k->dbname), "%s", PQgetvalue(r, 0, 1));
    /* A conninfo listing several servers: which one libpq took. */
    const char *host = PQhost(k->pg), *port = PQport(k->pg);
    bool multi = strchr(conninfo, ',') != NULL;
    struct tls_seen tls;
    tls_seen(k, &tls);
    char note[128] = "";
    if (tls.known && !tls.verifies && !tls.remote[0])
        snprintf(note, sizeof(note), ", sslmode %s (the server is on this host)", tls.mode);
    ck_report(k, CHECK_OK, what, NULL,
              "PostgreSQL %s, database \"%s\", role \"%s\"%s%s%s%s%s",
              PQgetvalue(r, 0, 2), k->dbname, k->role, multi ? ", at " : "",
              multi && host ? host : "", multi ? ":" : "", multi && port ? port : "", note);
    if (tls.known && !tls.verifies && tls.remote[0])
        ck_report(k, CHECK_WARN, what,
                  "set sslmode=verify-full and sslrootcert=FILE (the CA that signed the "
                  "server's certificate) in [postgres] conninfo; verify-ca if the "
                  "certificate does not name the host",
                  "sslmode is %s%s, which does not authenticate the server %s: a "
                  "machine in the network path can pose as it (this connection is %s)",
                  tls.mode, strcmp(tls.mode, "prefer") == 0 ? " (libpq's default)" : "",
                  tls.remote,
                  PQsslInUse(k->pg) ? "encrypted, to a server whose certificate was not "
                                      "checked"
                                    : "not encrypted");
    PQclear(r);
    k->pg_ok = true;
}

/* ---- 3. wal_level ---- */

void check_wal_level(struct ck *k)
{
    const char *what = "wal_level = logical";
    char err[1024];
    if (!k->pg_ok) return ck_skip(k, what, "no connection to postgres");
    PGresult *r = ck_query(k, "SHOW wal_level", 0, NULL, err, sizeof(err));
    if (!r) return ck_query_failed(k, what, err);
    const char *v = PQgetvalue(r, 0, 0);
    if (strcmp(v, "logical") == 0) {
        k->wal_ok = true;
        ck_report(k, CHECK_OK, what, NULL, NULL);
    } else {
        ck_report(
            k, CHECK_FAIL, what,
            "set wal_level = logical in postgresql.conf (or ALTER SYSTEM SET wal_level = "
            "logical) and restart the server",
            "wal_level is \"%s\"", v);
    }
    PQclear(r);
}

/* The server in recovery (a hot standby): outboxd can decode there from
 * PostgreSQL 16 on (deploy/standby-failover.md), if the slot's rows and
 * WAL are kept on the primary: hot_standby_feedback (else the primary
 * vacuums rows the slot needs: invalidated, rows_removed) and a physical
 * slot (primary_slot_name; else the primary may remove WAL the standby has
 * not received). Said as one line; nothing on a primary. */
void check_standby(struct ck *k)
{
    const char *what = "hot standby";
    char err[1024], fix[512];
    if (!k->pg_ok) return;
    PGresult *r = ck_query(k,
                           "SELECT pg_catalog.pg_is_in_recovery(), "
                           "current_setting('hot_standby_feedback'), "
                           "current_setting('primary_slot_name', true)",
                           0, NULL, err, sizeof(err));
    if (!r) return ck_query_failed(k, what, err);
    bool standby = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    bool feedback = standby && strcmp(PQgetvalue(r, 0, 1), "on") == 0;
    bool phys = standby && !PQgetisnull(r, 0, 2) && *PQgetvalue(r, 0, 2);
    PQclear(r);
    if (!standby) return;
    if (k->server_version < 160000) {
        ck_report(k, CHECK_FAIL, what,
                  "point [postgres] conninfo at the primary, or upgrade to PostgreSQL 16+",
                  "the server is a standby, and PostgreSQL %d cannot decode on a standby",
                  k->server_version / 10000);
        return;
    }
    if (!feedback || !phys) {
        snprintf(fix, sizeof(fix), "on the standby: %s%s%s; SELECT pg_reload_conf()",
                 feedback ? "" : "ALTER SYSTEM SET hot_standby_feedback = on",
                 !feedback && !phys ? "; " : "",
                 phys ? "" : "ALTER SYSTEM SET primary_slot_name = 'NAME' (a physical slot "
                             "made on the primary with pg_create_physical_replication_slot)");
        ck_report(k, CHECK_WARN, what, fix,
                  "decoding on a standby%s%s",
                  feedback ? "" : ": hot_standby_feedback is off, so the primary may vacuum "
                                  "rows the slot needs (the slot is then invalidated, "
                                  "rows_removed)",
                  phys ? "" : ": no primary_slot_name, so the primary may remove WAL this "
                              "standby has not received");
        return;
    }
    ck_report(k, CHECK_OK, what, NULL,
              "decoding on a standby (hot_standby_feedback on, primary_slot_name set); "
              "creating the slot waits for a running-transactions record from the primary, "
              "at most 15 s on a busy one: on an idle primary run SELECT "
              "pg_log_standby_snapshot() there");
}

/* ---- 4. replication slots and WAL senders ---- */

void check_capacity(struct ck *k)
{
    const char *what = "free replication slot and WAL sender";
    char err[1024];
    if (!k->pg_ok) return ck_skip(k, what, "no connection to postgres");
    const char *params[] = {k->cfg->pg_slot};
    PGresult *r = ck_query(
        k,
        "SELECT current_setting('max_replication_slots')::int, "
        "(SELECT count(*) FROM pg_catalog.pg_replication_slots)::int, "
        "current_setting('max_wal_senders')::int, "
        "(SELECT count(*) FROM pg_catalog.pg_stat_replication)::int, "
        "EXISTS (SELECT 1 FROM pg_catalog.pg_replication_slots WHERE slot_name = $1)",
        1, params, err, sizeof(err));
    if (!r) return ck_query_failed(k, what, err);
    int max_slots = atoi(PQgetvalue(r, 0, 0)), slots = atoi(PQgetvalue(r, 0, 1));
    int max_senders = atoi(PQgetvalue(r, 0, 2)), senders = atoi(PQgetvalue(r, 0, 3));
    bool exists = PQgetvalue(r, 0, 4)[0] == 't';
    PQclear(r);
    int mark = ck_begin(k);
    k->slot_free = slots < max_slots;
    k->sender_free = senders < max_senders;
    if (!k->slot_free && !exists)
        ck_report(
            k, CHECK_FAIL, what,
            max_slots == 0 ? "set max_replication_slots = 10 (at least 1) and restart the "
                             "server"
                           : "drop slots nobody uses (SELECT slot_name, active FROM "
                             "pg_replication_slots) or raise max_replication_slots and "
                             "restart the server",
            "all %d replication slots are in use (max_replication_slots = %d) and slot "
            "\"%s\" does not exist yet",
            slots, max_slots, k->cfg->pg_slot);
    if (!k->sender_free)
        ck_report(
            k, CHECK_FAIL, what,
            max_senders == 0 ? "set max_wal_senders = 10 (at least 1) and restart the "
                               "server"
                             : "raise max_wal_senders and restart the server, or stop a "
                               "replication client",
            "all %d WAL senders are busy (max_wal_senders = %d)", senders, max_senders);
    if (ck_silent_since(k, mark))
        ck_report(k, CHECK_OK, what, NULL, "%d of %d slots and %d of %d WAL senders in use",
                  slots, max_slots, senders, max_senders);
}

/* ---- 5. role ---- */

/* Finds the outbox table and what the role may do with it. */
static int lookup_table(struct ck *k, char *err, size_t errlen)
{
    const char *params[] = {k->map.schema, k->map.table};
    PGresult *r =
        ck_query(k,
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
    char err[1024], fix[512], sql[200];
    /* PostgreSQL 17 added a fourth argument (flush, default false): the
     * three-argument signature no longer exists there, and naming it is
     * an error, not a "no". */
    const char *sig = k->server_version >= 170000 ? "boolean, text, text, boolean"
                                                  : "boolean, text, text";
    snprintf(sql, sizeof(sql),
             "SELECT has_function_privilege('pg_catalog.pg_logical_emit_message(%s)', "
             "'EXECUTE')",
             sig);
    PGresult *r = ck_query(k, sql, 0, NULL, err, sizeof(err));
    if (!r) {
        ck_query_failed(k, what, err);
        return false;
    }
    bool allowed = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!allowed) {
        snprintf(
            fix, sizeof(fix),
            "run GRANT EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(%s) TO %s "
            "(see sql/role.sql), or set [postgres] heartbeat_interval_ms = 0",
            sig, rid);
        ck_report(k, CHECK_FAIL, what, fix,
                  "[postgres] heartbeat_interval_ms is set, but the role may not EXECUTE "
                  "pg_logical_emit_message");
    }
    return true;
}

void check_role(struct ck *k)
{
    char what[200], err[1024], fix[2048], rid[160], tsql[420], sid[200];
    snprintf(what, sizeof(what), "role \"%s\"", k->pg_ok ? k->role : "?");
    if (!k->pg_ok) return ck_skip(k, "role", "no connection to postgres");
    if (!k->map_ok) return ck_skip(k, what, "[outbox] table is not valid");
    if (lookup_table(k, err, sizeof(err)) != 0) return ck_query_failed(k, what, err);
    /* Amazon RDS and Aurora give replication through membership in their
     * rds_replication role, not the REPLICATION attribute (deploy/security.md). */
    PGresult *r = ck_query(k,
                           "SELECT rolsuper, rolreplication, "
                           "coalesce((SELECT pg_has_role(current_user, oid, 'MEMBER') "
                           "FROM pg_catalog.pg_roles WHERE rolname = 'rds_replication'), "
                           "false) "
                           "FROM pg_catalog.pg_roles WHERE rolname = current_user",
                           0, NULL, err, sizeof(err));
    if (!r) return ck_query_failed(k, what, err);
    k->superuser = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    bool rds = PQntuples(r) == 1 && PQgetvalue(r, 0, 2)[0] == 't';
    k->repl_role = k->superuser || rds || (PQntuples(r) == 1 && PQgetvalue(r, 0, 1)[0] == 't');
    PQclear(r);
    ck_ident(k->role, rid, sizeof(rid));
    ck_table_sql(k, tsql, sizeof(tsql));
    int mark = ck_begin(k);
    if (!k->repl_role && k->cfg->source_mode != SOURCE_POLLING) {
        snprintf(fix, sizeof(fix),
                 "run ALTER ROLE %s REPLICATION (see sql/role.sql; on Amazon RDS and Aurora: "
                 "GRANT rds_replication TO %s)",
                 rid, rid);
        ck_report(k, CHECK_FAIL, what, fix,
                  "the role has neither REPLICATION nor SUPERUSER, which a replication "
                  "connection needs");
    }
    if (k->superuser) k->can_select = k->table_exists;
    if (k->table_exists && !k->can_select) {
        snprintf(fix, sizeof(fix),
                 "run GRANT USAGE ON SCHEMA %s TO %s; GRANT SELECT ON %s TO %s (see "
                 "sql/role.sql)",
                 ck_ident(k->map.schema, sid, sizeof(sid)), rid, tsql, rid);
        ck_report(k, CHECK_FAIL, what, fix, "the role may not SELECT from %s.%s",
                  k->map.schema, k->map.table);
    }
    bool heartbeat = k->cfg->pg_heartbeat_interval_ms > 0;
    if (heartbeat && !k->superuser && !check_heartbeat_allowed(k, what, rid)) return;
    if (ck_silent_since(k, mark))
        ck_report(k, CHECK_OK, what, NULL, "%s, %s %s.%s%s",
                  k->superuser   ? "superuser"
                  : rds && k->repl_role ? "REPLICATION (member of rds_replication)"
                  : k->repl_role ? "REPLICATION"
                                 : "no REPLICATION (not needed in polling mode)",
                  k->table_exists ? "SELECT on" : "SELECT not checked: no table",
                  k->map.schema, k->map.table,
                  heartbeat ? ", EXECUTE on pg_logical_emit_message (heartbeat)" : "");
}

/* ---- 6. the outbox table ---- */

void ck_free_cols(struct ck *k)
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

const struct colinfo *ck_find_col(const struct ck *k, const char *name)
{
    for (int i = 0; i < k->ncols; i++)
        if (strcmp(k->cols[i].name, name) == 0) return &k->cols[i];
    return NULL;
}

static int load_columns(struct ck *k, char *err, size_t errlen)
{
    const char *params[] = {k->oid};
    PGresult *r = ck_query(
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

/* The outbox table is a table (logical decoding sees only tables), not a
 * view or foreign table; reports and returns false otherwise. */
static bool table_is_table(struct ck *k, const char *what)
{
    if (k->relkind == 'r' || k->relkind == 'p') return true;
    const char *kind = k->relkind == 'v'   ? "view"
                       : k->relkind == 'm' ? "materialized view"
                       : k->relkind == 'f' ? "foreign table"
                                           : "relation that is not a table";
    ck_report(k, CHECK_FAIL, what,
              "point [outbox] table at the table the application inserts into (logical "
              "decoding sees only tables)",
              "%s.%s is a %s", k->map.schema, k->map.table, kind);
    return false;
}

/* wal2json names each change by the table it went to, which for a
 * partitioned table is one of its partitions (relkind 'p' holds no rows),
 * and filters by that name too: add-tables with the partitioned table
 * drops every insert on the server, keepalives move the slot on, and
 * nothing says so. wal2json 2.5 cannot name the root instead, and a list
 * of today's partitions would miss the next one attached; so the
 * combination is refused (the daemon exits 2, as slotsetup.c also does
 * before every START_REPLICATION). Reports and returns false when it is
 * that combination. */
static bool table_fits_plugin(struct ck *k, const char *what)
{
    const struct config *c = k->cfg;
    if (k->relkind != 'p' || c->source_mode == SOURCE_POLLING ||
        c->pg_plugin != PLUGIN_WAL2JSON)
        return true;
    char fix[1024], pid[200];
    snprintf(fix, sizeof(fix),
             "set [postgres] plugin = pgoutput with a publication that publishes via "
             "the root (ALTER PUBLICATION %s SET (publish_via_partition_root = "
             "true)), or point [outbox] table at a table that is not partitioned",
             ck_ident(c->pg_publication, pid, sizeof(pid)));
    ck_report(k, CHECK_FAIL, what, fix,
              "%s.%s is a partitioned table, and wal2json names and filters each "
              "change by the partition it went to, never by %s: no event would be "
              "relayed, and the slot would be confirmed past them",
              k->map.schema, k->map.table, k->map.table);
    k->usage_fail = true;
    return false;
}

/* Configured column c against the table's column ci: missing (NULL), or
 * of an odd or a wrong type. */
static void check_column(struct ck *k, const char *what, enum outbox_col c,
                         const struct colinfo *ci)
{
    char fix[2048], hint[200];
    const char *name = k->map.columns[c], *key = outbox_col_name(c);
    if (!ci) {
        snprintf(fix, sizeof(fix),
                 "add the column, or set [outbox] column.%s to the name of the table's "
                 "%s column%s",
                 key, key, column_hint(k, name, hint, sizeof(hint)));
        ck_report(k, CHECK_FAIL, what, fix, "column \"%s\" ([outbox] column.%s) is missing",
                  name, key);
        return;
    }
    enum check_type_fit fit = check_type_fit(c, ci->typname, ci->typtype);
    if (fit == TYPE_ODD) {
        ck_report(k, CHECK_WARN, what, "fine if intended: its text form is used as it is",
                  "column \"%s\" (%s) is %s, not %s", name, key, ci->typedesc,
                  check_type_expected(c));
    } else if (fit == TYPE_BAD) {
        snprintf(fix, sizeof(fix),
                 "point [outbox] column.%s at the right column, or change its type", key);
        /* The daemon would relay its text form: a warning there. */
        ck_report(k, k->scope == CHECK_SCOPE_STARTUP ? CHECK_WARN : CHECK_FAIL, what, fix,
                  "column \"%s\" (%s) is %s, not %s", name, key, ci->typedesc,
                  check_type_expected(c));
    }
}

/* The columns the topic template uses exist in the table. */
static void check_template_in_table(struct ck *k, const char *what)
{
    char fix[2048], hint[200];
    for (int i = 0; i < k->ntcols; i++) {
        if (ck_find_col(k, k->tcols[i])) continue;
        snprintf(fix, sizeof(fix), "use columns of the table in [outbox] topic%s",
                 column_hint(k, k->tcols[i], hint, sizeof(hint)));
        ck_report(k, CHECK_FAIL, what, fix,
                  "[outbox] topic \"%s\" uses ${%s}, which is not a column of the table",
                  k->spec->topic, k->tcols[i]);
    }
}

/* Missing columns stop the topics check; type problems do not. */
static bool table_complete(const struct ck *k)
{
    for (int c = 0; c < OC__COUNT; c++)
        if (c != OC_AGGREGATE_VERSION && !ck_find_col(k, k->map.columns[c])) return false;
    for (int i = 0; i < k->ntcols; i++)
        if (!ck_find_col(k, k->tcols[i])) return false;
    return true;
}

void ck_reload_table(struct ck *k)
{
    char err[1024];
    if (!k->pg_ok || !k->map_ok || lookup_table(k, err, sizeof(err)) != 0) return;
    if (k->table_exists && load_columns(k, err, sizeof(err)) != 0) ck_free_cols(k);
}

void check_table(struct ck *k)
{
    char what[600], err[1024];
    snprintf(what, sizeof(what), "outbox table %s.%s", k->map_ok ? k->map.schema : "?",
             k->map_ok ? k->map.table : "?");
    if (!k->pg_ok) return ck_skip(k, "outbox table", "no connection to postgres");
    if (!k->map_ok) return ck_skip(k, "outbox table", "[outbox] table is not valid");
    if (!k->table_exists) {
        ck_report(
            k, CHECK_FAIL, what,
            "create it (sql/outbox.sql) or set [outbox] table to the schema.table the "
            "application inserts into",
            "the table does not exist in database \"%s\"", k->dbname);
        return;
    }
    if (!table_is_table(k, what) || !table_fits_plugin(k, what)) return;
    if (load_columns(k, err, sizeof(err)) != 0) return ck_query_failed(k, what, err);

    int mark = ck_begin(k);
    bool has_version = ck_find_col(k, k->map.columns[OC_AGGREGATE_VERSION]) != NULL;
    for (int c = 0; c < OC__COUNT; c++) {
        const struct colinfo *ci = ck_find_col(k, k->map.columns[c]);
        if (ci || c != OC_AGGREGATE_VERSION) check_column(k, what, c, ci);
    }
    check_template_in_table(k, what);
    k->table_ok = table_complete(k);
    if (ck_silent_since(k, mark))
        ck_report(
            k, CHECK_OK, what, NULL, "the configured columns exist with fitting types%s",
            has_version ? "" : " (no aggregate_version column: that header is not sent)");
}

/* ---- 6b. the polling table ([source] mode = polling) ---- */

/* One number about the polling table: sql gets its oid as $1 and, when
 * nparams is 2, the notify channel as $2. */
static long count_of(struct ck *k, const char *sql, int nparams, char *err, size_t errlen)
{
    const char *params[] = {k->oid, k->cfg->poll_notify_channel};
    PGresult *r = ck_query(k, sql, nparams, params, err, errlen);
    if (!r) return -1;
    long n = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

void check_polling_table(struct ck *k)
{
    char what[600], err[1024], fix[2048];
    snprintf(what, sizeof(what), "polling table %s.%s", k->map_ok ? k->map.schema : "?",
             k->map_ok ? k->map.table : "?");
    if (!k->pg_ok) return ck_skip(k, "polling table", "no connection to postgres");
    if (!k->table_exists || !k->cols)
        return ck_skip(k, what, "the outbox table is missing or could not be read");
    int mark = ck_begin(k);
    char missing[512] = "";
    for (const char *const *c = polling_state_columns; *c; c++)
        if (!ck_find_col(k, *c))
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",
                     missing[0] ? ", " : "", *c);
    if (missing[0]) {
        ck_report(k, CHECK_FAIL, what,
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
    if (n < 0) return ck_query_failed(k, what, err);
    if (n != 0 && !k->superuser) {
        char tsql[420];
        snprintf(fix, sizeof(fix), "run GRANT SELECT, UPDATE%s ON %s TO the role",
                 k->cfg->poll_retention_ms > 0 ? ", DELETE" : "",
                 ck_table_sql(k, tsql, sizeof(tsql)));
        ck_report(k, CHECK_FAIL, what, fix, "the role may not UPDATE%s the table",
                  k->cfg->poll_retention_ms > 0 ? " or DELETE from" : "");
    }
    if (!missing[0]) {
        n = count_of(
            k,
            "SELECT count(*) FROM pg_catalog.pg_index i WHERE i.indrelid = $1::oid "
            "AND i.indpred IS NOT NULL AND pg_catalog.pg_get_indexdef(i.indexrelid) "
            "LIKE '%next_attempt_at%'",
            1, err, sizeof(err));
        if (n < 0) return ck_query_failed(k, what, err);
        if (n == 0)
            ck_report(
                k, CHECK_WARN, what, "create the partial index of sql/outbox_polling.sql",
                "no partial index on next_attempt_at: finding due rows scans the table");
        n = count_of(
            k,
            "SELECT count(*) FROM pg_catalog.pg_trigger t WHERE t.tgrelid = $1::oid "
            "AND NOT t.tgisinternal AND t.tgenabled <> 'D' "
            "AND pg_catalog.pg_get_functiondef(t.tgfoid) ILIKE '%notify%' "
            "AND pg_catalog.pg_get_functiondef(t.tgfoid) LIKE '%' || $2 || '%'",
            2, err, sizeof(err));
        if (n < 0) return ck_query_failed(k, what, err);
        if (n == 0) {
            snprintf(fix, sizeof(fix),
                     "create the insert trigger of sql/outbox_polling.sql (NOTIFY %s)",
                     k->cfg->poll_notify_channel);
            ck_report(k, CHECK_WARN, what, fix,
                      "no enabled trigger NOTIFYs channel \"%s\": new events wait up to "
                      "[polling] poll_interval_ms (%d ms)",
                      k->cfg->poll_notify_channel, k->cfg->poll_interval_ms);
        }
    }
    if (ck_silent_since(k, mark))
        ck_report(k, CHECK_OK, what, NULL,
                  "state columns, due-row index and NOTIFY trigger (channel %s) present",
                  k->cfg->poll_notify_channel);
}

/* What is not delivered yet, in one line (polling.h: the backlog query the
 * relay's metrics run). Informational: it fails only when the query does. */
void check_polling_backlog(struct ck *k)
{
    static const char what[] = "polling backlog";
    char err[1024], line[512];
    if (!k->pg_ok) return ck_skip(k, what, "no connection to postgres");
    if (!k->table_ok) return ck_skip(k, what, "the polling table is missing or incomplete");
    if (!ck_find_col(k, "created_at"))
        return ck_skip(k, what,
                       "the table has no created_at column (sql/outbox_polling.sql)");
    char *sql = polling_backlog_sql(&k->map);
    if (!sql) return ck_query_failed(k, what, "out of memory");
    PGresult *r = ck_query(k, sql, 0, NULL, err, sizeof(err));
    free(sql);
    if (!r) return ck_query_failed(k, what, err);
    struct polling_backlog b = {.seen = true};
    int rc = PQntuples(r) == PS__COUNT && PQnfields(r) == 5 ? 0 : -1;
    if (rc != 0)
        snprintf(err, sizeof(err), "%d rows of %d columns", PQntuples(r), PQnfields(r));
    for (int i = 0; rc == 0 && i < PS__COUNT; i++) {
        const char *vals[5];
        for (int c = 0; c < 5; c++)
            vals[c] = PQgetvalue(r, i, c);
        rc = polling_backlog_row(&b, vals, err, sizeof(err));
    }
    PQclear(r);
    if (rc != 0) return ck_query_failed(k, what, err);
    ck_report(k, CHECK_OK, what, NULL, "%s", polling_backlog_line(&b, line, sizeof(line)));
}

/* ---- 7. publication ---- */

/* The names a publication line shows: the check's title, the publication
 * and the outbox table as SQL. */
struct pub_names {
    char what[300], pid[200], tsql[420];
};

/* Whether the publication exists and publishes inserts. Returns 1 when it
 * exists (its FAIL said if it does not publish inserts), 0 when it does
 * not (reported), -1 when the query failed (reported). */
static int publication_publishes(struct ck *k, const struct pub_names *n)
{
    const char *pub = k->cfg->pg_publication;
    char err[1024], fix[2048], stmt[512];
    const char *p1[] = {pub};
    PGresult *r =
        ck_query(k,
                 "SELECT pubinsert, pubupdate, pubdelete, pubtruncate, puballtables "
                 "FROM pg_catalog.pg_publication WHERE pubname = $1",
                 1, p1, err, sizeof(err));
    if (!r) return ck_query_failed(k, n->what, err), -1;
    if (PQntuples(r) == 0) {
        PQclear(r);
        ck_report(k, CHECK_FAIL, n->what,
                  fixit_create_publication(fix, sizeof(fix), n->pid, n->tsql),
                  "publication \"%s\" does not exist in this database", pub);
        return 0;
    }
    bool ins = PQgetvalue(r, 0, 0)[0] == 't';
    char publish[64] = "";
    const char *ops[] = {"insert", "update", "delete", "truncate"};
    for (int i = 0; i < 4; i++)
        if (PQgetvalue(r, 0, i)[0] == 't')
            snprintf(publish + strlen(publish), sizeof(publish) - strlen(publish), "%s%s",
                     *publish ? ", " : "", ops[i]);
    PQclear(r);
    if (!ins) {
        snprintf(fix, sizeof(fix), "run %s",
                 fixit_publish_inserts(stmt, sizeof(stmt), n->pid));
        ck_report(k, CHECK_FAIL, n->what, fix,
                  "publication \"%s\" does not publish inserts (publish = '%s')", pub,
                  publish);
    }
    return 1;
}

/* A partitioned outbox table, not listed by the publication as itself:
 * when the publication has publish_via_partition_root = false, pgoutput
 * sends each insert as the partition's (its Relation message names the
 * partition), which is no outbox table, and pg_publication_tables lists
 * the partitions, not the table: "does not include" with ADD TABLE would
 * name neither the cause nor the fix. Reports and returns true in that
 * case (also when the query fails), false when the publication does
 * publish via the root (it then lacks the table itself). */
static bool partitions_not_via_root(struct ck *k, const struct pub_names *n)
{
    const char *pub = k->cfg->pg_publication;
    char err[1024], fix[2048], add[1024];
    const char *p2[] = {pub, k->oid};
    PGresult *r = ck_query(
        k,
        "SELECT p.pubviaroot, EXISTS (SELECT 1 "
        "FROM pg_catalog.pg_partition_tree($2::oid) pt "
        "JOIN pg_catalog.pg_class c ON c.oid = pt.relid "
        "JOIN pg_catalog.pg_namespace ns ON ns.oid = c.relnamespace "
        "JOIN pg_catalog.pg_publication_tables t ON t.pubname = p.pubname "
        "AND t.schemaname = ns.nspname AND t.tablename = c.relname) "
        "FROM pg_catalog.pg_publication p WHERE p.pubname = $1",
        2, p2, err, sizeof(err));
    if (!r) return ck_query_failed(k, n->what, err), true;
    bool via_root = PQntuples(r) != 1 || PQgetvalue(r, 0, 0)[0] == 't';
    bool partitions = PQntuples(r) == 1 && PQgetvalue(r, 0, 1)[0] == 't';
    PQclear(r);
    if (via_root) return false;
    snprintf(fix, sizeof(fix),
             "run %s%sALTER PUBLICATION %s SET (publish_via_partition_root = true)",
             partitions ? "" : fixit_add_table(add, sizeof(add), n->pid, n->tsql),
             partitions ? "" : "; ", n->pid);
    ck_report(k, CHECK_FAIL, n->what, fix,
              "%s.%s is a partitioned table and publication \"%s\" has "
              "publish_via_partition_root = false, so pgoutput would send each insert as "
              "its partition's, never as %s's%s",
              k->map.schema, k->map.table, pub, k->map.table,
              partitions ? "" : " (and the publication does not include it)");
    return true;
}

/* Whether the publication includes the outbox table, and without a row
 * filter (a warning). Returns 1 included, 0 not (reported), -1 when the
 * query failed (reported). */
static int publication_includes(struct ck *k, const struct pub_names *n)
{
    const char *pub = k->cfg->pg_publication;
    char err[1024], fix[2048], stmt[1024];
    const char *p3[] = {pub, k->map.schema, k->map.table};
    PGresult *r =
        ck_query(k,
                 k->server_version >= 150000
                     ? "SELECT rowfilter FROM pg_catalog.pg_publication_tables "
                       "WHERE pubname = $1 AND schemaname = $2 AND tablename = $3"
                     : "SELECT NULL FROM pg_catalog.pg_publication_tables "
                       "WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
                 3, p3, err, sizeof(err));
    if (!r) return ck_query_failed(k, n->what, err), -1;
    bool included = PQntuples(r) > 0;
    if (!included && k->relkind == 'p' && k->server_version >= 130000 &&
        partitions_not_via_root(k, n)) {
        PQclear(r);
        return 0;
    }
    if (!included) {
        snprintf(fix, sizeof(fix), "run %s",
                 fixit_add_table(stmt, sizeof(stmt), n->pid, n->tsql));
        ck_report(k, CHECK_FAIL, n->what, fix, "publication \"%s\" does not include %s.%s",
                  pub, k->map.schema, k->map.table);
    } else if (!PQgetisnull(r, 0, 0)) {
        snprintf(fix, sizeof(fix),
                 "events of rows outside it are never relayed: ALTER PUBLICATION %s SET "
                 "TABLE %s (without WHERE) unless that is intended",
                 n->pid, n->tsql);
        ck_report(k, CHECK_WARN, n->what, fix,
                  "publication \"%s\" has a row filter on %s.%s: %s", pub, k->map.schema,
                  k->map.table, PQgetvalue(r, 0, 0));
    }
    PQclear(r);
    return included;
}

/* A column list (PostgreSQL 15) that leaves out a configured column makes
 * every event fail to build; without aggregate_version events still build,
 * without that header (a warning). */
static void publication_columns(struct ck *k, const struct pub_names *n)
{
    const char *pub = k->cfg->pg_publication;
    char err[1024], fix[2048];
    const char *p3[] = {pub, k->map.schema, k->map.table};
    PGresult *r =
        ck_query(k,
                 "SELECT a FROM pg_catalog.pg_publication_tables, unnest(attnames) a "
                 "WHERE pubname = $1 AND schemaname = $2 AND tablename = $3",
                 3, p3, err, sizeof(err));
    if (!r) return ck_query_failed(k, n->what, err);
    for (int col = 0; col < OC__COUNT; col++) {
        const char *name = k->map.columns[col];
        bool listed = false;
        for (int i = 0; i < PQntuples(r) && !listed; i++)
            listed = strcmp(PQgetvalue(r, i, 0), name) == 0;
        if (!ck_find_col(k, name) || listed) continue;
        bool version = col == OC_AGGREGATE_VERSION;
        snprintf(fix, sizeof(fix),
                 "%srun ALTER PUBLICATION %s SET TABLE %s (without a column list)",
                 version ? "no event gets an aggregate_version header: " : "", n->pid,
                 n->tsql);
        ck_report(k, version ? CHECK_WARN : CHECK_FAIL, n->what, fix,
                  "publication \"%s\" has a column list on %s.%s without \"%s\"", pub,
                  k->map.schema, k->map.table, name);
    }
    PQclear(r);
}

void check_publication(struct ck *k)
{
    const struct config *c = k->cfg;
    struct pub_names n;
    snprintf(n.what, sizeof(n.what), "publication \"%s\"", c->pg_publication);
    if (c->pg_plugin != PLUGIN_PGOUTPUT) {
        ck_report(k, CHECK_OK, "publication", NULL, "not used with plugin %s",
                  plugin_name(c->pg_plugin));
        return;
    }
    if (!k->pg_ok) return ck_skip(k, n.what, "no connection to postgres");
    ck_ident(c->pg_publication, n.pid, sizeof(n.pid));
    if (k->map_ok)
        ck_table_sql(k, n.tsql, sizeof(n.tsql));
    else
        snprintf(n.tsql, sizeof(n.tsql), "%s", k->spec->table);
    int mark = ck_begin(k);
    if (publication_publishes(k, &n) <= 0) return;
    if (k->map_ok && k->table_exists) {
        int included = publication_includes(k, &n);
        if (included < 0) return;
        if (included && k->server_version >= 150000) publication_columns(k, &n);
    }
    if (ck_silent_since(k, mark))
        ck_report(k, CHECK_OK, n.what, NULL, "publishes inserts%s%s.%s",
                  k->table_exists ? " of " : " (table not checked: missing) ",
                  k->map_ok ? k->map.schema : "?", k->map_ok ? k->map.table : "?");
}
