/*
 * check.c - `outboxd check` and the daemon's start-up checks: everything
 * outboxd needs from its configuration, Postgres and Kafka, verified
 * before streaming, one line per finding (see check.h for the order).
 *
 * This file holds the run (which checks, in which order, for each scope)
 * and the configuration check. The checks themselves are in check_pg.c
 * (the ordinary Postgres connection and the catalog), check_repl.c (the
 * plugin, the offset file and the slot, over a replication connection) and
 * check_kafka.c (the [kafka] properties, the broker and the topics); the
 * lines they print come from check_report.c; check_int.h is what they
 * share. Nothing is created that outlives the check: the temporary
 * slot goes with its session, and metadata for all topics never
 * auto-creates one.
 */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_int.h"
#include "config_outbox.h"
#include "exitcode.h"
#include "log.h"

/* ---- pure helpers -------------------------------------------------------- */

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

/* ---- the outbox section the per-table checks look at ---- */

/* Frees what the per-table checks found for the section before. */
static void ck_unselect(struct ck *k)
{
    ck_free_cols(k);
    for (int i = 0; i < k->ntcols; i++)
        free(k->tcols[i]);
    k->ntcols = 0;
    if (k->map_ok) outbox_map_free(&k->map);
    k->map_ok = false;
    k->table_exists = k->can_select = k->table_ok = false;
    k->relkind = 0;
    k->oid[0] = '\0';
    k->label = NULL;
}

/* Makes outbox section i (config_outbox_at()) the one the per-table
 * checks look at: its map and topic template columns. Returns false when
 * its map does not build (the per-table checks then skip); err says why. */
static bool ck_select(struct ck *k, size_t i, char *err, size_t errlen)
{
    if (k->spec && k->sel == i) { /* still selected: keep what its checks found */
        k->label = k->spec->name ? k->labelbuf : NULL;
        return k->map_ok;
    }
    ck_unselect(k);
    k->sel = i;
    k->spec = config_outbox_at(k->cfg, i);
    if (k->spec->name) k->label = config_outbox_label(k->spec, k->labelbuf, sizeof(k->labelbuf));
    k->map_ok = config_outbox_map(k->spec, &k->map, err, errlen) == 0;
    if (!k->map_ok) return false;
    if (k->found && (k->found[i] & 4)) { /* checked: for the checks after the table's */
        ck_reload_table(k);
        k->table_ok = k->found[i] & 1;
        k->can_select = k->found[i] & 2;
    }
    k->ntcols = check_template_columns(k->spec->topic, k->tcols, MAX_TEMPLATE_COLUMNS);
    if (k->ntcols >= 0) return true;
    k->ntcols = 0;
    snprintf(err, errlen, "%s topic uses more than %d columns",
             config_outbox_label(k->spec, (char[160]){0}, 160), MAX_TEMPLATE_COLUMNS);
    return true;
}

/* Runs check on every outbox section in turn. */
static void for_each_outbox(struct ck *k, void (*check)(struct ck *))
{
    char err[1024];
    for (size_t i = 0; i < config_outbox_count(k->cfg); i++) {
        ck_select(k, i, err, sizeof(err));
        check(k);
        if (k->found) k->found[i] = (unsigned char)(k->table_ok | k->can_select << 1 | 4);
    }
    k->label = NULL;
}

/* ---- 1. configuration ---- */

static void check_config(struct ck *k)
{
    const char *what = "configuration";
    const struct config *c = k->cfg;
    char err[1024];
    int mark = ck_begin(k);

    for (size_t i = 0; i < config_outbox_count(c); i++) {
        err[0] = '\0';
        k->spec = NULL; /* build each map again, for its error */
        bool built = ck_select(k, i, err, sizeof(err));
        k->label = NULL;
        if (!built)
            ck_report(k, CHECK_FAIL, what, "correct the table (schema.table) or topic", "%s",
                      err);
        else if (*err)
            ck_report(k, CHECK_FAIL, what, "use fewer ${column} references", "%s", err);
    }

    check_kafka_config(k, what);

    if (c->errors_policy == ERRORS_DLQ && c->errors_dlq_topic &&
        !outbox_topic_valid(c->errors_dlq_topic, err, sizeof(err)))
        ck_report(k, CHECK_FAIL, what, "correct [errors] dlq_topic",
                  "[errors] dlq_topic: %s", err);

    k->config_ok = ck_silent_since(k, mark);
    if (k->config_ok) ck_report(k, CHECK_OK, what, NULL, NULL);
}

/* ---- the run ------------------------------------------------------------- */

/* Every check after the configuration's, in order, by the name of its
 * line (a skip line names it so), and whether it is one of logical
 * replication (not used in polling mode). */
static const struct {
    const char *what;
    bool replication;
} later_checks[] = {
    {"postgres connection", false},
    {"wal_level = logical", true},
    {"free replication slot and WAL sender", true},
    {"role", false},
    {"outbox table", false},
    {"publication", true},
    {"plugin allowed", true},
    {"replication connection", true},
    {"plugin installed", true},
    {"offset file", true},
    {"slot", true},
    {"slot not invalidated", true},
    {"gap repair", true},
    {"failover slot", true},
    {"synchronized_standby_slots", true},
    {"standbys", true},
    {"kafka broker", false},
    {"topics", false},
};
#define NLATER (sizeof(later_checks) / sizeof(later_checks[0]))

/* The checks of logical replication, skipped in polling mode. */
static void skip_replication_checks(struct ck *k)
{
    for (size_t i = 0; i < NLATER; i++)
        if (later_checks[i].replication)
            ck_skip(k, later_checks[i].what, "not used in [source] mode = polling");
}

static void ck_free(struct ck *k)
{
    check_kafka_free(k);
    PQfinish(k->pg);
    ck_unselect(k);
    free(k->found);
}

/* The per-table checks of each mode: the role's rights on the table, the
 * table, and its publication and messages (logical) or its polling
 * columns. */
static void check_logical_outbox(struct ck *k)
{
    check_role(k);
    check_table(k);
    check_publication(k);
    check_messages(k);
}

static void check_polling_outbox(struct ck *k)
{
    check_role(k);
    check_table(k);
    check_polling_table(k);
}

/* The daemon's start-up checks: it validated its configuration and built
 * its producer; only what is fatal anyway at start is asked. */
static void run_startup(struct ck *k)
{
    const struct config *cfg = k->cfg;
    check_connection(k);
    if (!k->pg_ok) return;
    if (cfg->source_mode != SOURCE_POLLING) check_wal_level(k);
    for_each_outbox(k, cfg->source_mode == SOURCE_POLLING ? check_polling_outbox
                                                          : check_logical_outbox);
}

/* `outboxd check` in polling mode ([source] mode = polling). */
static void run_polling(struct ck *k)
{
    check_config(k);
    check_connection(k);
    for_each_outbox(k, check_polling_outbox);
    check_polling_backlog(k);
    skip_replication_checks(k);
    check_kafka_token(k);
    check_broker(k);
    check_topics(k);
    check_registry(k);
}

/* `outboxd check` for logical replication: every check, in check.h's order. */
static void run_logical(struct ck *k)
{
    check_config(k);
    check_connection(k);
    check_wal_level(k);
    check_standby(k);
    check_capacity(k);
    for_each_outbox(k, check_logical_outbox);
    check_plugin_allowed(k);
    PGconn *repl = check_replication_connection(k);
    check_plugin_installed(k, repl);
    check_offset_file(k, repl);
    PQfinish(repl);
    check_slot(k);
    for_each_outbox(k, check_repairable);
    check_failover(k);
    check_kafka_token(k);
    check_broker(k);
    for_each_outbox(k, check_topics);
    for_each_outbox(k, check_registry);
    check_progress_topic(k);
}

int check_run(const struct config *cfg, bool quiet_ok, enum check_scope scope)
{
    struct ck k = {.cfg = cfg, .quiet = quiet_ok, .scope = scope,
                   .found = calloc(config_outbox_count(cfg), 1)};
    if (scope == CHECK_SCOPE_STARTUP)
        run_startup(&k);
    else if (scope == CHECK_SCOPE_CONFIG)
        check_config(&k);
    else if (cfg->source_mode == SOURCE_POLLING)
        run_polling(&k);
    else
        run_logical(&k);
    int failed = k.nfail;
    /* A configuration error is exit 2 in every subcommand (README, Exit
     * codes); other failed checks are "check found problems", 1. At the
     * daemon's start a FAIL only a configuration change resolves is 2 too
     * (k.usage_fail: systemd does not restart it). */
    bool config_failed = scope != CHECK_SCOPE_STARTUP ? !k.config_ok : k.usage_fail;
    ck_free(&k);
    if (failed && quiet_ok)
        log_error("%d start-up check%s failed (outboxd check -c FILE runs all checks)",
                  failed, failed == 1 ? "" : "s");
    return config_failed ? EXIT_USAGE : failed ? 1 : 0;
}

int check_config_failed(const char *err)
{
    char line[4096];
    puts(check_format_line(line, sizeof(line), CHECK_FAIL, "configuration", err,
                           strstr(err, "did you mean")
                               ? NULL
                               : "correct it in the configuration "
                                 "file, the OUTBOXD_* environment or "
                                 "--set"));
    for (size_t i = 0; i < NLATER; i++)
        puts(check_format_line(line, sizeof(line), CHECK_SKIP, later_checks[i].what,
                               "the configuration could not be loaded", NULL));
    fflush(stdout);
    return EXIT_USAGE;
}
