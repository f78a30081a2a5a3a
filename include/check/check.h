/*
 * check.h - `outboxd check`: everything outboxd needs, verified before
 * streaming, one line per check on stdout:
 *
 *   ok   <what>[: detail]
 *   warn <what>: <problem>; <the fix>     (works, but look at it)
 *   FAIL <what>: <problem>; <the fix>
 *   skip <what>: <why: an earlier check failed>
 *
 * In order: configuration (keys and values, [outbox] table and topic
 * template, every [kafka] property through librdkafka), the Postgres
 * connection (reachable, password accepted; the conninfo and password are
 * never printed), wal_level = logical, a free replication slot and WAL
 * sender, the role (REPLICATION or superuser, SELECT on the outbox), the
 * outbox table (exists, configured columns present, sensible types, topic
 * template columns present), the publication (pgoutput: exists, includes
 * the table, publishes inserts), the plugin allowed (output_plugin_libraries
 * where the server has it), a replication connection, the plugin installed
 * (a TEMPORARY slot is created with it and dropped), the offset file (a
 * real write next to it; compared with IDENTIFY_SYSTEM and the slot as the
 * daemon does at start, resume.h), the slot (exists with the configured plugin, or can be created), the slot not
 * invalidated (wal_status lost), failover slots ([postgres] failover on
 * PostgreSQL 17+: the slot's flag, synchronized_standby_slots on the
 * primary, and on each standby a multi-host conninfo lists its slot
 * synchronisation settings and synced copy; check_failover.c), the broker
 * reachable (a metadata request)
 * and the topics the template renders for the distinct values in the
 * outbox (up to CHECK_TOPIC_ROWS): existing, or a warning that they will
 * only exist if the broker auto-creates topics.
 *
 * The daemon runs the cheap checks whose failure is fatal anyway at start
 * (CHECK_SCOPE_STARTUP) and stops with the same messages.
 */
#ifndef OUTBOXD_CHECK_H
#define OUTBOXD_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "outbox.h"

/* Bounds of the checks that wait on something. */
#define CHECK_CONNECT_TIMEOUT_S 10 /* libpq connect_timeout, unless conninfo sets one */
#define CHECK_STATEMENT_TIMEOUT_MS 30000
#define CHECK_SLOT_TIMEOUT_MS 15000 /* creating the temporary slot */
#define CHECK_BROKER_TIMEOUT_MS 10000
#define CHECK_TOPIC_ROWS 1000 /* distinct template values read */

enum check_scope {
    /* `outboxd check`: everything above. */
    CHECK_SCOPE_ALL,
    /* The daemon at start, after its own configuration checks: wal_level,
     * role, outbox table and publication. A connection that fails is left
     * to the daemon (it retries transient failures and reports fatal ones
     * itself), so nothing is reported then; type warnings do not stop it. */
    CHECK_SCOPE_STARTUP,
    /* `outboxd check --config-only`: the configuration line alone (keys,
     * values, [outbox] table and topic, [kafka] properties through
     * librdkafka); no connection is made. For deployment files checked
     * where neither Postgres nor the broker is reachable. */
    CHECK_SCOPE_CONFIG,
};

/*
 * Runs the checks of scope. quiet_ok: print neither ok nor skip lines and
 * send FAIL/warn lines to the log (the daemon); otherwise every line goes
 * to stdout. Returns 0 when nothing failed (warnings allowed), 2 (EXIT_USAGE)
 * when the configuration check failed (in CHECK_SCOPE_STARTUP: when a check
 * failed that only a configuration change resolves, e.g. wal2json with a
 * partitioned outbox table), 1 when another check failed.
 */
int check_run(const struct config *cfg, bool quiet_ok, enum check_scope scope);

/* For `outboxd check` when the configuration could not be loaded: prints
 * the FAIL line for err (config_load_file/env/--set/config_outbox_validate's
 * message) and a skip line for every other check. Returns 2 (EXIT_USAGE:
 * a configuration error, as in every subcommand). */
int check_config_failed(const char *err);

/* ---- pure helpers (tested in tests/unit/test_check.c) ------------------- */

enum check_status { CHECK_OK, CHECK_WARN, CHECK_FAIL, CHECK_SKIP };

/* One output line (no newline) into out: "ok   what[: detail]",
 * "FAIL what: problem; fix" (no "; fix" when fix is NULL or empty),
 * "skip what: problem". problem may be NULL for ok. Returns out. */
char *check_format_line(char *out, size_t outlen, enum check_status st, const char *what,
                        const char *problem, const char *fix);

/* How well a column's type fits its outbox role. typname is the type's
 * name (the base type's for a domain), typtype pg_type.typtype ('e' enum,
 * 'b' base...). */
enum check_type_fit {
    TYPE_FITS, /* text-like or uuid ids, integer version, json/jsonb/text/bytea payload */
    TYPE_ODD,  /* works (its text form is used) but unusual: a warning */
    TYPE_BAD,  /* almost certainly the wrong column */
};
enum check_type_fit check_type_fit(enum outbox_col col, const char *typname, char typtype);

/* The kinds of type check_type_fit() accepts for col, for messages:
 * "text-like or uuid", "an integer type", "json, jsonb, text or bytea". */
const char *check_type_expected(enum outbox_col col);

/* The column names a topic template refers to (${name}), in order of first
 * use, without duplicates: up to max strdup'ed names into names (the caller
 * frees them). Returns the count, or -1 for a template that
 * topic_template_parse() would refuse or more than max names. */
int check_template_columns(const char *tmpl, char **names, int max);

#endif
