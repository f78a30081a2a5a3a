/*
 * check_int.h - what the parts of `outboxd check` share (internal to
 * check.c, check_report.c, check_pg.c, check_repl.c, check_repair.c,
 * check_failover.c, check_kafka.c and check_oidc.c; the public face is
 * check.h): the state of one run, the report lines, the catalog queries on the check's connection, and each
 * part's checks in the order check_run() calls them.
 */
#ifndef OUTBOXD_CHECK_INT_H
#define OUTBOXD_CHECK_INT_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

#include "check.h"
#include "config.h"
#include "lsn.h"
#include "offset.h"
#include "outbox.h"
#include "resume.h"

#define MAX_TEMPLATE_COLUMNS 32

/* A column of the outbox table, as the catalog describes it. */
struct colinfo {
    char *name;
    char *typname; /* base type for a domain */
    char typtype;
    char *typedesc; /* format_type() */
};

struct ck_kafka;

/* One run of the checks: what each check found, for the checks after it. */
struct ck {
    const struct config *cfg;
    bool quiet;
    enum check_scope scope;
    int nfail;
    int said; /* FAIL and warn lines so far */
    bool usage_fail; /* a FAIL only a change of the configuration resolves: the
                      * daemon's start-up checks then exit 2 (EXIT_USAGE) */

    /* configuration */
    bool config_ok;
    /* The outbox section the per-table checks look at (ck_select()); label
     * "[outbox.NAME]" is added to their lines when there are named
     * sections, else NULL. */
    const struct outbox_spec *spec;
    size_t sel;       /* its index (config_outbox_at()) */
    /* What the table checks found for each section (1: table_ok, 2:
     * can_select, 4: checked), for the checks after them; owned. */
    unsigned char *found;
    const char *label;
    char labelbuf[160];
    struct outbox_map map;
    bool map_ok;
    char *tcols[MAX_TEMPLATE_COLUMNS];
    int ntcols;
    struct ck_kafka *kafka; /* the Kafka checks' state (check_kafka.c); NULL: no handle */

    /* postgres */
    PGconn *pg;
    bool mask_conninfo; /* the conninfo was parsed: mask its password in messages */
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
    char slot_invalidation_reason[32]; /* 17+: pg_replication_slots.invalidation_reason */
};

/* ---- the report (check_report.c) ---- */

/* ck_report(k, status, what, fix, fmt, ...): one line; fmt (may be NULL)
 * gives the problem, or the detail of an ok line. */
void ck_report(struct ck *k, enum check_status st, const char *what, const char *fix,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A skip line: what was not checked, and why. */
void ck_skip(struct ck *k, const char *what, const char *why);

/* Starts a check: remembers how many FAIL/warn lines came before, so an ok
 * line is printed only when the check itself said nothing else
 * (ck_silent_since). */
int ck_begin(const struct ck *k);
bool ck_silent_since(const struct ck *k, int mark);

/* ---- Postgres helpers (check_pg.c) ---- */

/* name as an SQL identifier, quoted only when it needs quoting, in buf.
 * Returns buf ("" when len is below 3). */
const char *ck_ident(const char *name, char *buf, size_t len);

/* The outbox table as SQL (schema.table, quoted where needed) in buf. */
const char *ck_table_sql(const struct ck *k, char *buf, size_t len);

/* Opens the check's connection (replication: a walsender) the daemon's
 * way (pgconn.h) with connect_timeout CHECK_CONNECT_TIMEOUT_S unless the
 * conninfo sets one. Returns it (the caller PQfinishes it), or NULL with
 * libpq's message, password masked, in err. */
PGconn *ck_connect(struct ck *k, bool replication, char *err, size_t errlen);

/* Runs sql with text parameters on the check connection. Returns the
 * result (caller PQclears) when it succeeded, else NULL with the server's
 * message in err and its SQLSTATE in k->sqlstate. */
PGresult *ck_query(struct ck *k, const char *sql, int nparams, const char *const *params,
                   char *err, size_t errlen);

/* The message of a failed statement on conn (the server's, else libpq's),
 * on one line with the conninfo's password masked. */
void ck_result_message(const struct ck *k, const PGresult *r, PGconn *conn, char *out,
                       size_t outlen);

/* Reports a failed catalog query as a FAIL of what. */
void ck_query_failed(struct ck *k, const char *what, const char *err);

/* The outbox table's column called name, or NULL. */
const struct colinfo *ck_find_col(const struct ck *k, const char *name);

/* Frees k->cols. */
void ck_free_cols(struct ck *k);

/* Finds the selected section's table and its columns again, silently (the
 * role and table checks reported on them before), for the checks after
 * theirs. */
void ck_reload_table(struct ck *k);

/* ---- the topics the outbox table's rows name (check_kafka.c) ---- */

struct topic_list {
    char **names; /* owned */
    size_t n, cap;
};

/* Adds t to l unless it is there. 0, or -1 on out of memory. */
int topics_add(struct topic_list *l, const char *t);
void topics_free(struct topic_list *l);

/* Renders the selected section's topic template for the distinct values
 * of its columns in the table into l (at most CHECK_TOPIC_ROWS; *truncated
 * when there are more; *nulls: rows it cannot render). Returns the number
 * of rows read, -1 on error (err). */
int render_topics(struct ck *k, struct topic_list *l, int *nulls, bool *truncated, char *err,
                  size_t errlen);

/* ---- the checks, in order (check.c calls them) ---- */

/* check_pg.c: the ordinary connection and the catalog. */
void check_connection(struct ck *k);
void check_wal_level(struct ck *k);
void check_standby(struct ck *k);
void check_capacity(struct ck *k);
void check_role(struct ck *k);
void check_table(struct ck *k);
void check_polling_table(struct ck *k);
void check_polling_backlog(struct ck *k);
void check_publication(struct ck *k);

/* check_emit.c: [outbox] message_prefix (no line when unset). */
void check_messages(struct ck *k);

/* check_repl.c: logical replication itself. check_replication_connection()
 * returns the replication connection (the caller PQfinishes it) or NULL. */
void check_plugin_allowed(struct ck *k);
PGconn *check_replication_connection(struct ck *k);
void check_plugin_installed(struct ck *k, PGconn *repl);
void check_offset_file(struct ck *k, PGconn *repl);
void check_slot(struct ck *k);

/* check_repair.c: whether outboxd repair could close a gap after a slot
 * loss (a time source; rows kept). */
void check_repairable(struct ck *k);

/* check_failover.c: failover slots (PostgreSQL 17+) on the primary and on
 * the standbys a multi-host conninfo lists. */
void check_failover(struct ck *k);

/* check_kafka.c: the [kafka] properties judged by librdkafka through a
 * producer handle built as the daemon's (part of the configuration check,
 * what), the broker and the topics. check_kafka_free() releases k->kafka. */
void check_kafka_config(struct ck *k, const char *what);
/* The "kafka token" line (check_oidc.c): only with OAUTHBEARER by OIDC,
 * or with AWS_MSK_IAM (check_mskiam.c's, which it calls). */
void check_kafka_token(struct ck *k);
void check_kafka_msk_token(struct ck *k);
void check_broker(struct ck *k);
void check_topics(struct ck *k);
void check_progress_topic(struct ck *k); /* [delivery] mode = exactly_once only */
void check_kafka_free(struct ck *k);

/* check_registry.c: a section whose value_converter is avro, json_schema
 * or protobuf: the registry answers, and each subject its rows name has a
 * schema of the converter's type (no line for other converters). */
void check_registry(struct ck *k);

#endif
