/*
 * check_repl.c - the checks of logical replication itself: the plugin
 * allowed (output_plugin_libraries) and installed (a TEMPORARY slot is
 * created with it on a replication connection and dropped), the offset file
 * against the server and the slot (as the daemon compares them at start,
 * resume.h), and the slot (exists with the configured plugin, or can be
 * created; not invalidated).
 */
#include "check_int.h"

#include <errno.h>
#include <libgen.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "decoder.h"
#include "duration.h"
#include "fixit.h"
#include "slotcmd.h"
#include "stream.h"

/* ---- 8. plugin allowed, replication connection, plugin installed ---- */

void check_plugin_allowed(struct ck *k)
{
    const char *plugin = plugin_name(k->cfg->pg_plugin);
    char what[128], err[1024], fix[2048];
    snprintf(what, sizeof(what), "plugin %s allowed", plugin);
    if (!k->pg_ok) return ck_skip(k, what, "no connection to postgres");
    PGresult *r = ck_query(k, "SHOW output_plugin_libraries", 0, NULL, err, sizeof(err));
    if (!r) {
        if (strcmp(k->sqlstate, "42704") == 0) { /* no such setting: anything goes */
            k->allowed_ok = true;
            ck_report(k, CHECK_OK, what, NULL,
                      "the server has no output_plugin_libraries "
                      "setting");
        } else if (strcmp(k->sqlstate, "42501") == 0) {
            snprintf(fix, sizeof(fix),
                     "run GRANT pg_read_all_settings TO %s (outboxd reads this setting "
                     "before streaming)",
                     k->role);
            ck_report(k, CHECK_FAIL, what, fix, "SHOW output_plugin_libraries: %s", err);
        } else {
            ck_query_failed(k, what, err);
        }
        return;
    }
    const char *list = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "";
    if (plugin_listed(list, plugin)) {
        k->allowed_ok = true;
        ck_report(k, CHECK_OK, what, NULL, "output_plugin_libraries = %s", list);
    } else {
        ck_report(k, CHECK_FAIL, what, fixit_allow_plugin(),
                  "the server's output_plugin_libraries (\"%s\") does not list %s", list,
                  plugin);
    }
    PQclear(r);
}

PGconn *check_replication_connection(struct ck *k)
{
    const char *what = "replication connection";
    char err[1024];
    if (!k->pg_ok) return ck_skip(k, what, "no connection to postgres"), NULL;
    if (!k->repl_role) return ck_skip(k, what, "the role lacks REPLICATION"), NULL;
    if (!k->sender_free) return ck_skip(k, what, "no free WAL sender"), NULL;
    PGconn *c = ck_connect(k, true, err, sizeof(err));
    if (!c) {
        ck_report(k, CHECK_FAIL, what,
                  strstr(err, "no pg_hba.conf entry")
                      ? "add a pg_hba.conf line for replication connections (its database "
                        "field must be \"replication\"; \"all\" does not match them) and "
                        "reload the server"
                      : "see the server's log",
                  "%s", err);
        return NULL;
    }
    k->replconn_ok = true;
    ck_report(k, CHECK_OK, what, NULL, NULL);
    return c;
}

/* Runs sql on c, waiting at most ms; cancels it then. Returns the first
 * result (caller PQclears), NULL on timeout (*timed_out) or failure. */
static PGresult *exec_bounded(PGconn *c, const char *sql, int ms, bool *timed_out)
{
    *timed_out = false;
    if (!PQsendQuery(c, sql)) return NULL;
    int64_t deadline = clock_mono_ms() + ms;
    while (PQisBusy(c)) {
        int64_t left = deadline - clock_mono_ms();
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

void check_plugin_installed(struct ck *k, PGconn *repl)
{
    const char *plugin = plugin_name(k->cfg->pg_plugin);
    char what[128], msg[1024], fix[512], sql[256];
    snprintf(what, sizeof(what), "plugin %s installed", plugin);
    if (!repl) return ck_skip(k, what, "no replication connection");
    if (!k->wal_ok) return ck_skip(k, what, "wal_level is not logical");
    if (!k->allowed_ok) return ck_skip(k, what, "the plugin is not allowed");
    if (!k->slot_free)
        return ck_skip(k, what, "no free replication slot for a temporary test slot");
    /* plugin is one of settings.c's names, never the configured text */
    snprintf(
        sql, sizeof(sql),
        "CREATE_REPLICATION_SLOT outboxd_check_%d TEMPORARY LOGICAL %s NOEXPORT_SNAPSHOT",
        (int)getpid(), plugin);
    bool timed_out;
    PGresult *r = exec_bounded(repl, sql, CHECK_SLOT_TIMEOUT_MS, &timed_out);
    if (timed_out) {
        ck_report(
            k, CHECK_WARN, what,
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
        ck_report(k, CHECK_OK, what, NULL,
                  "a temporary slot was created with it and dropped");
        return;
    }
    const char *ss = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    ck_result_message(k, r, repl, msg, sizeof(msg));
    if (ss && strcmp(ss, "58P01") == 0) { /* undefined_file: no such library */
        char how[256];
        snprintf(fix, sizeof(fix), "install it on the database server (%s)",
                 fixit_install_plugin(how, sizeof(how), plugin, k->server_version / 10000));
        ck_report(k, CHECK_FAIL, what, fix,
                  "the output plugin %s is not installed on the "
                  "server (%s)",
                  plugin, msg);
    } else {
        ck_report(k, CHECK_FAIL, what, "see the server's log",
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
    PGresult *r = ck_query(k,
                           "SELECT coalesce(confirmed_flush_lsn::text, '0/0'), "
                           "coalesce(plugin, '') FROM pg_catalog.pg_replication_slots "
                           "WHERE slot_name = $1",
                           1, params, err, errlen);
    if (!r) return -1;
    struct resume_server srv;
    resume_server_init(&srv, id.system, id.timeline, id.xlogpos, id.dbname, c->pg_slot,
                       plugin_name(c->pg_plugin));
    if (k->have_offset && k->offset.has_identity && k->offset.timeline < id.timeline) {
        /* A promoted server: where the file's timeline ended here (resume.h). */
        char herr[256];
        char *history = stream_timeline_history_conn(repl, id.timeline, herr, sizeof(herr));
        if (history)
            resume_timeline_end(history, k->offset.timeline, &srv.file_timeline_end);
        free(history);
    }
    srv.slot_exists = PQntuples(r) == 1;
    srv.shared = c->pg_hot_standby;
    if (srv.slot_exists) lsn_parse(PQgetvalue(r, 0, 0), &srv.slot_confirmed);
    k->slot_confirmed = srv.slot_confirmed;
    if (srv.slot_exists && strcmp(PQgetvalue(r, 0, 1), plugin_name(c->pg_plugin)) != 0) {
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
    if (d->verdict == RESUME_TAKE_OVER) { /* hot_standby: the note says it all */
        snprintf(out, outlen, "%s; %s", f, d->note);
        return;
    }
    int n = snprintf(out, outlen, "%s; slot confirmed %s (%s)", f, lsn_format(slot, a),
                     file == slot ? "the same" : "file ahead by ");
    if (file != slot && n > 0 && (size_t)n < outlen) {
        out[n - 1] = '\0';
        snprintf(out + n - 1, outlen - (size_t)n + 1, "%s: normal after a crash)",
                 resume_bytes(file - slot, size, sizeof(size)));
    }
    if (d->note[0] && strlen(out) + 4 < outlen)
        snprintf(out + strlen(out), outlen - strlen(out), "; %s", d->note);
}

void check_offset_file(struct ck *k, PGconn *repl)
{
    const char *path = k->cfg->offsets_file;
    char what[600], err[1024], fix[2048], detail[2048];
    snprintf(what, sizeof(what), "offset file %s", path);
    int rc = offset_read(path, &k->offset, err, sizeof(err));
    if (rc < 0) {
        /* err says how to get out of it */
        ck_report(k, CHECK_FAIL, what, NULL, "%s", err);
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
        ck_report(k, CHECK_FAIL, what, fix, "its directory %s does not take a write: %s",
                  dir, err);
        free(copy);
        return;
    }
    free(copy);
    if (compare_offset(k, repl, err, sizeof(err)) != 0) {
        char f[512];
        if (k->have_offset) offset_describe(&k->offset, f, sizeof(f));
        ck_report(k, CHECK_OK, what, NULL,
                  "%s; not compared with the server and the slot: %s",
                  k->have_offset ? f : "not there yet", err);
        return;
    }
    const struct resume_decision *d = &k->resume;
    if (d->refused && d->verdict != RESUME_SLOT_LOST) {
        ck_report(k, CHECK_FAIL, what, NULL, "%s", d->message);
        return;
    }
    offset_detail(k, detail, sizeof(detail));
    ck_report(k, CHECK_OK, what, NULL, "%s", detail);
}

/* ---- 9, 10. the slot ---- */

/* The slot does not exist: whether outboxd will create it, or why not. */
static void slot_missing(struct ck *k, const char *what)
{
    const struct config *c = k->cfg;
    char fix[2048], stmt[512], a[LSN_STRLEN];
    if (k->have_offset && k->resumed && k->resume.verdict == RESUME_SLOT_LOST) {
        ck_report(k, CHECK_FAIL, what, NULL, "%s", k->resume.message);
    } else if (k->have_offset) {
        snprintf(fix, sizeof(fix),
                 "fix [postgres] slot or conninfo; or check with outboxd verify, then move "
                 "the offset file %s away to start afresh from now",
                 c->offsets_file);
        ck_report(k, CHECK_FAIL, what, fix,
                  "the slot does not exist on this server, but the offset file says "
                  "outboxd streamed it up to %s: a failover, a mistyped slot name or a "
                  "dropped slot; events committed since may be lost to it (outboxd "
                  "refuses to re-create it)",
                  lsn_format(k->offset.lsn, a));
    } else if (!c->pg_create_slot) {
        snprintf(fix, sizeof(fix), "%s, or set [postgres] create_slot = true",
                 fixit_create_slot(stmt, sizeof(stmt), c->pg_slot,
                                   plugin_name(c->pg_plugin)));
        ck_report(k, CHECK_FAIL, what, fix,
                  "the slot does not exist and [postgres] create_slot is false");
    } else if (!k->slot_free) {
        ck_report(k, CHECK_FAIL, what, "free a replication slot (see above)",
                  "the slot does not exist and no replication slot is free to create it");
    } else if (!k->repl_role) {
        ck_report(k, CHECK_FAIL, what, "give the role REPLICATION (see above)",
                  "the slot does not exist and the role may not create it");
    } else {
        ck_report(k, CHECK_OK, what, NULL, "will be created at start (create_slot = true)");
    }
}

/* The slot exists (the row of pg_replication_slots in r): whether outboxd
 * can stream it. */
static void slot_usable(struct ck *k, const char *what, const PGresult *r)
{
    const struct config *c = k->cfg;
    char fix[256];
    const char *type = PQgetvalue(r, 0, 0), *plugin = PQgetvalue(r, 0, 1),
               *db = PQgetvalue(r, 0, 2);
    bool active = PQgetvalue(r, 0, 3)[0] == 't';
    int pid = atoi(PQgetvalue(r, 0, 4));
    if (strcmp(type, "logical") != 0) {
        ck_report(k, CHECK_FAIL, what, "set [postgres] slot to another name",
                  "\"%s\" is a %s slot, not a logical one", c->pg_slot, type);
    } else if (strcmp(db, k->dbname) != 0) {
        ck_report(k, CHECK_FAIL, what,
                  "set [postgres] slot to another name, or connect to that database",
                  "the slot belongs to database \"%s\", not \"%s\"", db, k->dbname);
    } else if (strcmp(plugin, plugin_name(c->pg_plugin)) != 0) {
        snprintf(fix, sizeof(fix), "set plugin = %s or use another slot", plugin);
        ck_report(k, CHECK_FAIL, what, fix,
                  "replication slot \"%s\" uses plugin %s, but [postgres] plugin is %s",
                  c->pg_slot, plugin, plugin_name(c->pg_plugin));
    } else if (active && c->pg_hot_standby) {
        ck_report(k, CHECK_OK, what, NULL,
                  "in use by another process (pid %d): with hot_standby = true this instance "
                  "stands by and takes the slot over when it is free",
                  pid);
    } else if (active) {
        ck_report(
            k, CHECK_WARN, what,
            "fine if that is the running outboxd; another instance waits until it is free",
            "the slot is in use by another process (pid %d)", pid);
    } else {
        ck_report(k, CHECK_OK, what, NULL, "exists (plugin %s)", plugin);
    }
}

/* The slot's wal_status (k->slot_wal_status): lost or about to be. */
static void slot_not_invalidated(struct ck *k, const char *vwhat)
{
    const struct config *c = k->cfg;
    char fix[2048];
    if (strcmp(k->slot_wal_status, "lost") == 0) {
        struct slotcmd_lost why = slotcmd_lost_cause(k->slot_invalidation_reason);
        snprintf(
            fix, sizeof(fix),
            "stop outboxd and run outboxd repair -c %s: it re-publishes the rows "
            "committed since the last ACKed transaction and creates slot \"%s\" again "
            "(README \"Gap repair\")%s%s",
            c->path ? c->path : "FILE", c->pg_slot,
            why.prevent ? "; so that it does not happen again: " : "",
            why.prevent ? why.prevent : "");
        ck_report(k, CHECK_FAIL, vwhat, fix,
                  "the slot is invalidated (wal_status = lost, reason %s): %s", why.label,
                  why.cause);
    } else if (strcmp(k->slot_wal_status, "unreserved") == 0) {
        ck_report(k, CHECK_WARN, vwhat,
                  "let outboxd catch up now, or raise max_slot_wal_keep_size",
                  "the slot is about to be invalidated (wal_status = unreserved: it holds "
                  "more WAL than max_slot_wal_keep_size)");
    } else {
        ck_report(k, CHECK_OK, vwhat, NULL, "wal_status = %s",
                  *k->slot_wal_status ? k->slot_wal_status : "unknown");
    }
}

/* One setting of the server as a number (its unit's), or -1 when it cannot
 * be read (older server, no such setting). */
static int64_t setting_number(struct ck *k, const char *name)
{
    char err[512];
    const char *params[] = {name};
    PGresult *r = ck_query(k, "SELECT setting FROM pg_catalog.pg_settings WHERE name = $1", 1,
                           params, err, sizeof(err));
    int64_t v = r && PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    return v;
}

/* Whether the slot outlives a stop of outboxd as long as [postgres]
 * planned_downtime. Two settings invalidate a slot nothing reads:
 * idle_replication_slot_timeout (18+) after that long, and
 * max_slot_wal_keep_size once it holds that much WAL, which at the rate
 * the server wrote WAL since its statistics were reset (pg_stat_wal, 14+)
 * takes size / rate. Either shorter than the planned stop: WARN (a stop
 * that long needs gap repair). */
static void slot_outlives_downtime(struct ck *k)
{
    const struct config *c = k->cfg;
    char what[] = "slot outlives planned_downtime", plan[32], t[32], fix[512], err[512];
    duration_format(c->pg_planned_downtime_ms, plan, sizeof(plan));
    int64_t idle_s = k->server_version >= 180000
                         ? setting_number(k, "idle_replication_slot_timeout")
                         : 0;
    if (idle_s > 0 && idle_s * 1000 < c->pg_planned_downtime_ms) {
        snprintf(fix, sizeof(fix),
                 "ALTER SYSTEM SET idle_replication_slot_timeout = '%llds' (or 0); SELECT "
                 "pg_reload_conf(); or lower [postgres] planned_downtime if stops are shorter",
                 (long long)(c->pg_planned_downtime_ms / 1000) * 2);
        ck_report(k, CHECK_WARN, what, fix,
                  "idle_replication_slot_timeout = %s: the server invalidates the slot after "
                  "that long unread, less than [postgres] planned_downtime = %s; a stop that "
                  "long loses the slot (gap repair, on_slot_loss = repair)",
                  duration_format(idle_s * 1000, t, sizeof(t)), plan);
        return;
    }
    int64_t keep_mb = setting_number(k, "max_slot_wal_keep_size"); /* MB, -1: unlimited */
    if (keep_mb > 0 && k->server_version >= 140000) {
        PGresult *r = ck_query(
            k,
            "SELECT wal_bytes / greatest(extract(epoch FROM now() - stats_reset), 1) "
            "FROM pg_catalog.pg_stat_wal",
            0, NULL, err, sizeof(err));
        double rate = r && PQntuples(r) == 1 ? strtod(PQgetvalue(r, 0, 0), NULL) : 0;
        PQclear(r);
        double lasts_ms = rate > 0 ? (double)keep_mb * 1048576.0 / rate * 1000.0 : 0;
        if (rate > 0 && lasts_ms < (double)c->pg_planned_downtime_ms) {
            ck_report(k, CHECK_WARN, what,
                      "raise max_slot_wal_keep_size (or set it to -1) to cover the WAL of "
                      "the longest stop, or lower [postgres] planned_downtime",
                      "max_slot_wal_keep_size = %lld MB lasts about %s at this server's "
                      "average WAL rate (%.0f kB/s since its statistics were reset), less "
                      "than [postgres] planned_downtime = %s: a stop that long loses the slot",
                      (long long)keep_mb, duration_format((int64_t)lasts_ms, t, sizeof(t)),
                      rate / 1024.0, plan);
            return;
        }
    }
    ck_report(k, CHECK_OK, what, NULL,
              "a stop of %s keeps the slot (idle_replication_slot_timeout %s, "
              "max_slot_wal_keep_size %s)",
              plan,
              idle_s > 0 ? duration_format(idle_s * 1000, t, sizeof(t))
              : idle_s == 0 ? "off" : "not on this server",
              keep_mb < 0 ? "unlimited" : "covers it at the average WAL rate");
}

void check_slot(struct ck *k)
{
    const struct config *c = k->cfg;
    char what[300], vwhat[320], err[1024];
    snprintf(what, sizeof(what), "slot \"%s\"", c->pg_slot);
    snprintf(vwhat, sizeof(vwhat), "slot \"%s\" not invalidated", c->pg_slot);
    if (!k->pg_ok) {
        ck_skip(k, what, "no connection to postgres");
        return ck_skip(k, vwhat, "no connection to postgres");
    }
    const char *params[] = {c->pg_slot};
    PGresult *r =
        ck_query(k,
                 k->server_version >= 170000
                     ? "SELECT slot_type, coalesce(plugin, ''), coalesce(database, ''), "
                       "active, coalesce(active_pid, 0), coalesce(wal_status, ''), "
                       "coalesce(invalidation_reason, '') "
                       "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1"
                 : k->server_version >= 130000
                     ? "SELECT slot_type, coalesce(plugin, ''), coalesce(database, ''), "
                       "active, coalesce(active_pid, 0), coalesce(wal_status, ''), '' "
                       "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1"
                     : "SELECT slot_type, coalesce(plugin, ''), coalesce(database, ''), "
                       "active, coalesce(active_pid, 0), '', '' "
                       "FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
                 1, params, err, sizeof(err));
    if (!r) {
        ck_query_failed(k, what, err);
        return ck_skip(k, vwhat, "pg_replication_slots could not be read");
    }
    if (PQntuples(r) == 0) {
        PQclear(r);
        slot_missing(k, what);
        ck_report(k, CHECK_OK, vwhat, NULL, "the slot does not exist yet");
        return;
    }
    k->slot_exists = true;
    slot_usable(k, what, r);
    snprintf(k->slot_wal_status, sizeof(k->slot_wal_status), "%s", PQgetvalue(r, 0, 5));
    snprintf(k->slot_invalidation_reason, sizeof(k->slot_invalidation_reason), "%s",
             PQgetvalue(r, 0, 6));
    PQclear(r);
    slot_not_invalidated(k, vwhat);
    slot_outlives_downtime(k);
}
