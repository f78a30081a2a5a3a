/*
 * slotsetup.c - from the offset file to START_REPLICATION (see
 * slotsetup.h). Each step logs its own failure once and says whether
 * waiting can heal it (STEP_BROKEN) or not.
 */
#include "slotsetup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connerr.h"
#include "fixit.h"
#include "log.h"
#include "pgsql.h"
#include "resume.h"
#include "settings.h"
#include "slotcmd.h"
#include "str.h"
#include "wal2json.h" /* wal2json_add_table() */

/* Logs a server error about loading the output plugin, adding the fix when
 * the plugin's library is missing on the server (SQLSTATE 58P01,
 * undefined_file: "could not access file "wal2json""). */
static void log_plugin_error(const struct slot_setup *s, const char *err)
{
    char how[128];
    if (strcmp(stream_sqlstate(s->st), "58P01") == 0)
        log_error("%s: the output plugin %s is not installed on the server (%s)", err,
                  plugin_name(s->cfg->pg_plugin),
                  fixit_install_plugin(how, sizeof(how), plugin_name(s->cfg->pg_plugin),
                                       stream_server_major(s->st)));
    else
        log_error("%s", err);
}

bool slot_says_publication_missing(const char *err, const char *publication)
{
    char what[300];
    snprintf(what, sizeof(what), "publication \"%s\" does not exist", publication);
    return strstr(err, what) != NULL;
}

/* The stream failed with "publication does not exist". pgoutput looks the
 * publication up in the catalog as of the change it decodes (the historic
 * snapshot), so a publication dropped after the slot's position fails
 * every change between the drop and its re-creation, on every reconnect:
 * waiting cannot heal it. exists_now: a normal query sees it today. */
static void log_publication_gap(const struct slot_setup *s, bool exists_now)
{
    const struct config *c = s->cfg;
    char a[LSN_STRLEN];
    lsn_format(s->confirmed_lsn, a);
    log_kv(LOG_ERROR, LOG_FIELDS({"lsn", a}),
           "the replication stream fails with: publication \"%s\" does not exist, %s: it "
           "was dropped%s after the slot's position %s. pgoutput reads the publication as "
           "of each change it decodes, so slot \"%s\" can never see it for the changes "
           "in between, and every reconnect fails at the same change. Fix: %smove the slot "
           "past them with SELECT pg_replication_slot_advance('%s', "
           "pg_current_wal_lsn()) while outboxd is stopped (or drop and re-create the "
           "slot), then start outboxd (outboxd accept-slot -c FILE accepts the slot's "
           "position over the offset file). The events committed after %s are skipped "
           "by that: list them with outboxd verify and insert them again",
           c->pg_publication,
           exists_now ? "while the database has it now" : "and the database has none now",
           exists_now ? " and created again" : "", a, c->pg_slot,
           exists_now ? "" : "create the publication (see sql/outbox.sql), ", c->pg_slot, a);
}

/* Connects. STEP_USAGE when waiting cannot heal the failure (connerr.h). */
static enum step connect_server(struct slot_setup *s)
{
    char err[1024];
    if (!(s->st = stream_connect(s->cfg->pg_conninfo, err, sizeof(err)))) {
        const char *fix = connerr_fix(err);
        if (fix && s->streamed &&
            connerr_heals_once_streamed(err, s->cfg->pg_auth == PG_AUTH_AWS_RDS_IAM)) {
            /* Retried and folded like any outage, with the fix in its cause. */
            snprintf(s->retry_err, sizeof(s->retry_err), "%.300s (if it lasts: %.180s)", err,
                     fix);
            s->retry_cause = "connect_failed";
            return STEP_BROKEN;
        }
        if (fix) {
            /* Waiting cannot heal it: an operator must (exit 2, not restarted). */
            log_error("%s; not retrying: %s", err, fix);
            return STEP_USAGE;
        }
        /* The relay says it, folded with the next attempts' (outage.h). */
        log_debug("%s", err);
        snprintf(s->retry_err, sizeof(s->retry_err), "%.500s", err);
        s->retry_cause = "connect_failed";
        return STEP_BROKEN;
    }
    s->retry_cause = "connection_lost"; /* unless said otherwise later */
    return STEP_OK;
}

/* wal2json: no outbox table is partitioned. wal2json names and filters each
 * change by the partition it went to, so add-tables with a partitioned
 * table drops every insert on the server, and the keepalives would confirm
 * the slot past them (check_pg.c says the same in outboxd check). Asked
 * before every START_REPLICATION, not only by the start-up checks: those
 * are skipped when the server is not reachable at start, and a table can
 * be replaced by a partitioned one between two connections. */
static enum step check_not_partitioned(struct slot_setup *s)
{
    const struct config *c = s->cfg;
    char err[1024];
    if (c->pg_plugin != PLUGIN_WAL2JSON) return STEP_OK;
    for (size_t i = 0; i < s->outboxes->n; i++) {
        const struct outbox_map *m = &s->outboxes->maps[i];
        int rc = stream_table_partitioned(s->st, m->schema, m->table, err, sizeof(err));
        if (rc < 0) {
            log_warn("%s", err);
            return stream_broken(s->st) ? STEP_BROKEN : STEP_FATAL;
        }
        if (rc == 0) continue;
        log_error("%s.%s is a partitioned table, and wal2json names and filters each "
                  "change by the partition it went to, never by %s: no event would be "
                  "relayed, and the slot would be confirmed past them. Not streaming; "
                  "fix: set [postgres] plugin = pgoutput with a publication that "
                  "publishes via the root (ALTER PUBLICATION %s SET "
                  "(publish_via_partition_root = true)), or point [outbox] table at a "
                  "table that is not partitioned",
                  m->schema, m->table, m->table, c->pg_publication);
        return STEP_USAGE;
    }
    return STEP_OK;
}

/* pgoutput: the publication exists (wal2json filters by table name); the
 * plugin is one the server allows. */
static enum step check_publication_and_plugin(struct slot_setup *s)
{
    const struct config *c = s->cfg;
    char err[1024], fix[512];
    int rc = c->pg_plugin == PLUGIN_PGOUTPUT
                 ? stream_publication_exists(s->st, c->pg_publication, err, sizeof(err))
                 : 1;
    if (rc < 0 && stream_broken(s->st)) {
        log_warn("%s", err);
        return STEP_BROKEN;
    }
    if (rc >= 0 && s->pub_missing_on_stream) {
        log_publication_gap(s, rc == 1);
        return STEP_FATAL;
    }
    if (rc <= 0) {
        char *tables = outbox_set_tables(s->outboxes);
        if (rc < 0)
            log_error("%s", err);
        else
            log_error("publication \"%s\" does not exist in this database: %s",
                      c->pg_publication,
                      fixit_create_publication(fix, sizeof(fix), c->pg_publication,
                                               tables ? tables : "?"));
        free(tables);
        return STEP_FATAL;
    }
    rc = stream_plugin_allowed(s->st, plugin_name(c->pg_plugin), err, sizeof(err));
    if (rc > 0) return STEP_OK;
    if (rc < 0 && stream_broken(s->st)) {
        log_warn("%s", err);
        return STEP_BROKEN;
    }
    log_error("%s", err);
    return STEP_FATAL;
}

/* IDENTIFY_SYSTEM and the slot, into srv and si. */
static enum step read_server(struct slot_setup *s, struct server_ident *id,
                             struct slot_info *si, struct resume_server *srv)
{
    const struct config *c = s->cfg;
    char err[1024];
    if (stream_identify(s->st, id, err, sizeof(err)) != 0 ||
        stream_slot_info(s->st, c->pg_slot, si, err, sizeof(err)) != 0) {
        log_warn("%s", err);
        return stream_broken(s->st) ? STEP_BROKEN : STEP_FATAL;
    }
    resume_server_init(srv, id->system, id->timeline, id->xlogpos, id->dbname, c->pg_slot,
                       plugin_name(c->pg_plugin));
    srv->slot_exists = si->exists;
    srv->slot_confirmed = si->confirmed_flush;
    srv->shared = c->pg_hot_standby;
    if (si->exists && strcmp(si->plugin, plugin_name(c->pg_plugin)) != 0) {
        log_error("replication slot \"%s\" uses plugin %s, but [postgres] plugin is %s: "
                  "set plugin = %s or use another slot",
                  c->pg_slot, si->plugin, plugin_name(c->pg_plugin), si->plugin);
        return STEP_USAGE;
    }
    if (si->exists && strcmp(si->wal_status, "lost") == 0 && !si->active) {
        char a[LSN_STRLEN], since[80] = "";
        struct slotcmd_lost why = slotcmd_lost_cause(si->invalidation_reason);
        if (si->inactive_since[0])
            snprintf(since, sizeof(since), ", not read since %s", si->inactive_since);
        log_kv(LOG_ERROR, LOG_FIELDS({"reason", why.label}),
               "replication slot \"%s\" is invalidated (wal_status = lost, reason %s%s): %s. "
               "It can never stream again, and the events committed after its position %s "
               "that outboxd had not sent cannot be decoded any more. Not retrying. Fix: stop "
               "outboxd and run outboxd repair -c %s (re-publishes them from the outbox table "
               "and creates the slot again), or set [postgres] on_slot_loss = repair (README "
               "\"Gap repair\")%s%s",
               c->pg_slot, why.label, since, why.cause, lsn_format(si->confirmed_flush, a),
               c->path ? c->path : "FILE", why.prevent ? "; so that it does not happen again: " : "",
               why.prevent ? why.prevent : "");
        snprintf(s->lost_reason, sizeof(s->lost_reason), "%s", why.label);
        s->slot_lost = true;
        return STEP_USAGE;
    }
    if (si->exists && si->active) {
        /* Not logged here: the relay says it once when it starts standing by
         * and checks again every standby_check_ms() (standby.h). */
        s->holder_pid = si->active_pid;
        s->retry_cause = "slot_in_use";
        return STEP_BROKEN;
    }
    return STEP_OK;
}

/* The walsender's wal_sender_timeout, for the fence (standby.h); unknown
 * (-1, logged) unless the connection itself failed. */
static enum step read_sender_timeout(struct slot_setup *s)
{
    char err[1024];
    s->sender_timeout_ms = -1;
    if (stream_sender_timeout(s->st, &s->sender_timeout_ms, err, sizeof(err)) == 0)
        return STEP_OK;
    log_warn("%s: a stall of this process longer than the server's wal_sender_timeout "
             "is not fenced on this stream (README \"Hot standby\")",
             err);
    return stream_broken(s->st) ? STEP_BROKEN : STEP_OK;
}

/* A failover slot, but the primary's synchronized_standby_slots is empty:
 * the walsender may send outboxd changes no standby has yet, so a promoted
 * standby can lack events already in Kafka. Said once per process (every
 * reconnect asks again, quietly), and only when the server has a standby
 * (a physical slot or a streaming walsender); outboxd check says it too. */
static void warn_standby_slots(struct slot_setup *s)
{
    static bool warned;
    char v[512], err[512];
    bool standby = false;
    /* A primary with no standby has nothing to fail over to: no warning on
     * every start of a standalone server under failover = auto. */
    if (warned || stream_show(s->st, "synchronized_standby_slots", v, sizeof(v), err,
                              sizeof(err)) != 0 || v[0] ||
        stream_has_standby(s->st, &standby, err, sizeof(err)) != 0 || !standby)
        return;
    warned = true;
    log_warn("replication slot \"%s\" is a failover slot, but this primary's "
             "synchronized_standby_slots is empty: outboxd may publish events a standby "
             "has not received yet, which a promoted standby then lacks. Name the "
             "standbys' physical slots in it (ALTER SYSTEM SET synchronized_standby_slots "
             "= '...'; SELECT pg_reload_conf(); README, Failover slots)",
             s->cfg->pg_slot);
}

/* [postgres] failover against this server (slotcmd.h): *want says whether
 * the slot should be a failover slot; failover = on below PostgreSQL 17 is
 * STEP_USAGE. An existing slot that should be one and is not is made one
 * (ALTER_REPLICATION_SLOT, 17+), and the log says so: a slot created
 * before failover was configured, or by hand, would otherwise be missing
 * from the standbys without anyone noticing until the failover. */
static enum step settle_failover(struct slot_setup *s, const struct slot_info *si, bool *want)
{
    const struct config *c = s->cfg;
    char err[1024];
    int major = stream_server_major(s->st);
    enum failover_mode mode = c->pg_failover;
    int w = slotcmd_failover_wanted(mode, major, err, sizeof(err));
    if (w < 0) {
        log_error("%s", err);
        return STEP_USAGE;
    }
    *want = w == 1;
    bool standby = false;
    if (*want && stream_in_recovery(s->st, &standby, err, sizeof(err)) != 0) {
        log_warn("%s", err);
        return stream_broken(s->st) ? STEP_BROKEN : STEP_FATAL;
    }
    if (standby) {
        /* Decoding on a standby: its slot is its own; a failover slot is a
         * primary's copied to standbys, and the server refuses one here. */
        if (mode == FAILOVER_ON)
            log_warn("[postgres] failover = on, but this server is a standby: its slot "
                     "cannot be a failover slot (it stays on this standby; promoting it "
                     "keeps the slot, promoting another node loses it)");
        *want = slotcmd_failover_at_create(w, standby);
        return STEP_OK;
    }
    if (*want) warn_standby_slots(s);
    if (!si->exists) return STEP_OK;
    switch (slotcmd_failover_action(*want, si->failover, major)) {
    case SLOT_FAILOVER_KEEP:
        if (si->synced)
            log_info("replication slot \"%s\" was synchronised from the previous primary "
                     "(a failover slot): streaming continues from its confirmed position",
                     c->pg_slot);
        return STEP_OK;
    case SLOT_FAILOVER_LEFT_ON:
        log_info("replication slot \"%s\" is a failover slot although [postgres] failover "
                 "= off: left as it is (ALTER_REPLICATION_SLOT %s (FAILOVER false) turns it "
                 "off)",
                 c->pg_slot, c->pg_slot);
        return STEP_OK;
    case SLOT_FAILOVER_ENABLE:
        break;
    }
    if (stream_alter_slot_failover(s->st, c->pg_slot, true, err, sizeof(err)) != 0) {
        if (stream_broken(s->st)) {
            log_warn("%s", err);
            return STEP_BROKEN;
        }
        if (mode == FAILOVER_ON) {
            log_error("%s: [postgres] failover = on, but replication slot \"%s\" could not "
                      "be made a failover slot",
                      err, c->pg_slot);
            return STEP_FATAL;
        }
        log_warn("%s: replication slot \"%s\" stays without failover, so a promoted standby "
                 "will not have it ([postgres] failover = auto)",
                 err, c->pg_slot);
        return STEP_OK;
    }
    log_info("replication slot \"%s\" was not a failover slot: made it one "
             "(ALTER_REPLICATION_SLOT ... (FAILOVER true); [postgres] failover = %s), so "
             "standbys with sync_replication_slots = on keep a copy of it",
             c->pg_slot, failover_name(mode));
    return STEP_OK;
}

/* The offset file is of an older timeline than the server (a promoted
 * standby): where that timeline ended in this server's history, into
 * srv->file_timeline_end, so that resume_decide() can tell a position past
 * the fork. Unknown (0, the decision as before) when the history cannot be
 * read, unless the connection failed. */
static enum step read_fork(struct slot_setup *s, const struct offset_state *file,
                           const struct server_ident *id, struct resume_server *srv)
{
    char err[1024];
    if (!file->has_identity || file->timeline >= id->timeline) return STEP_OK;
    char *history = stream_timeline_history(s->st, id->timeline, err, sizeof(err));
    if (!history) {
        log_warn("%s: where timeline %u ended on this server is unknown, so the offset "
                 "file's position is taken as it is",
                 err, (unsigned)file->timeline);
        return stream_broken(s->st) ? STEP_BROKEN : STEP_OK;
    }
    if (!resume_timeline_end(history, file->timeline, &srv->file_timeline_end))
        log_warn("timeline %u (the offset file's) is not in the history of this server's "
                 "timeline %u",
                 (unsigned)file->timeline, (unsigned)id->timeline);
    free(history);
    return STEP_OK;
}

/* The slot does not exist: creates it when allowed (a failover slot when
 * failover); *start = its position. */
static enum step create_slot(struct slot_setup *s, struct slot_info *si, lsn_t *start,
                             bool failover)
{
    const struct config *c = s->cfg;
    char err[1024];
    if (!c->pg_create_slot) {
        char fix[256];
        log_error("replication slot \"%s\" does not exist and [postgres] create_slot "
                  "is false: %s",
                  c->pg_slot,
                  fixit_create_slot(fix, sizeof(fix), c->pg_slot, plugin_name(c->pg_plugin)));
        return STEP_FATAL;
    }
    struct slot_create_opts o = {.failover = failover};
    if (stream_create_slot(s->st, c->pg_slot, plugin_name(c->pg_plugin), &o, NULL, err,
                           sizeof(err)) != 0) {
        log_plugin_error(s, err);
        return STEP_FATAL;
    }
    log_info("created replication slot \"%s\" (plugin %s%s)", c->pg_slot,
             plugin_name(c->pg_plugin),
             failover ? ", failover: synchronised to standbys with sync_replication_slots = on"
                      : "");
    if (stream_slot_info(s->st, c->pg_slot, si, err, sizeof(err)) != 0) {
        log_error("%s", err);
        return STEP_FATAL;
    }
    *start = si->confirmed_flush;
    return STEP_OK;
}

/* What the stream takes from the resume decision d and the offset file
 * (NULL: none), as resume_plan() decides: the identity's commit time,
 * whether to rewrite the file, the stored positions, where to start, the
 * progress to skip. */
static void take_decision(struct slot_setup *s, const struct offset_state *file,
                          const struct resume_decision *d, uint32_t timeline)
{
    char a[LSN_STRLEN];
    struct resume_plan *p = &s->plan;
    resume_plan(file, d, timeline, s->streamed, s->identity.txn_events, p);
    if (p->commit_time_us) s->identity.commit_time_us = p->commit_time_us;
    s->prepared = true;
    if (p->progress_refused) {
        log_kv(LOG_WARN, LOG_FIELDS({"lsn", lsn_format(file->txn_lsn, a)}),
               "the %s says the first %llu events of transaction %s were %s, but it "
               "counted the events of other outbox tables or message prefixes than are "
               "configured now (a section was added, removed or renamed while stopped "
               "inside it): which of its events were delivered cannot be told, so none is "
               "skipped and the whole transaction is produced again (up to %llu copies%s)",
               s->position ? "stored position" : "offset file",
               (unsigned long long)file->txn_acked, a,
               s->position ? "committed to Kafka" : "ACKed",
               (unsigned long long)file->txn_acked,
               s->position ? ", visible to read_committed consumers too" : "");
        return;
    }
    if (!p->resume_inside) return;
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(file->txn_lsn, a)}),
           "resuming inside transaction %s: the %s says its first %llu events "
           "were %s, so they are skipped, not produced again",
           a, s->position ? "stored position" : "offset file",
           (unsigned long long)file->txn_acked,
           s->position ? "committed to Kafka" : "ACKed");
}

enum step slot_decide(struct slot_setup *s, struct offset_state *file, int *have,
                      const struct resume_server *srv, struct resume_decision *d)
{
    const struct config *c = s->cfg;
    char a[LSN_STRLEN];
    if (!*have && s->streamed && !srv->slot_exists) {
        /* Streaming, but nothing stored yet: what was streamed is the file. */
        resume_identity(srv, s->acked_lsn, file);
        *have = 1;
    }
    resume_decide(*have ? file : NULL, srv, c->offsets_file, c->path, d);
    if (d->refused) {
        log_error("%s", d->message);
        s->slot_lost = d->verdict == RESUME_SLOT_LOST;
        if (s->slot_lost) snprintf(s->lost_reason, sizeof(s->lost_reason), "dropped");
        return STEP_USAGE;
    }
    if (d->note[0]) log_msg(d->note_is_warning ? LOG_WARN : LOG_INFO, "%s", d->note);
    if (d->forked && s->streamed && s->acked_lsn > d->start) {
        /* This process counted ACKs up to acked_lsn on the old timeline; the
         * new one reuses those positions, so its tracker cannot go on. Nothing
         * is confirmed to this server: a fresh start streams from the fork. */
        log_error("this process has ACKed up to %s on the old timeline, past the fork at "
                  "%s: it exits (1, restarted by systemd) so that a fresh start streams "
                  "from the fork",
                  lsn_format(s->acked_lsn, a), lsn_format(d->start, (char[LSN_STRLEN]){0}));
        return STEP_FATAL;
    }
    return STEP_OK;
}

void slot_take(struct slot_setup *s, const struct offset_state *file,
               const struct resume_server *srv, const struct resume_decision *d,
               uint32_t timeline)
{
    resume_identity(srv, d->start, &s->identity);
    s->identity.txn_events = outbox_set_fingerprint(s->outboxes);
    take_decision(s, file, d, timeline);
}

/* Connects, checks publication and slot, creates the slot if allowed.
 * Fills s->plan with where to stream from, and the offset file's state
 * (or, in exactly_once, the progress topic's: s->position). */
static enum step prepare_stream(struct slot_setup *s)
{
    const struct config *c = s->cfg;
    char err[1024], a[LSN_STRLEN];
    struct offset_state file;
    int have_offset = s->position ? 0 : offset_read(c->offsets_file, &file, err, sizeof(err));
    if (have_offset < 0) {
        log_error("%s", err); /* only an operator can repair it */
        return STEP_USAGE;
    }
    struct server_ident id;
    struct slot_info si;
    struct resume_server srv;
    enum step rc = connect_server(s);
    if (rc == STEP_OK) rc = check_not_partitioned(s);
    if (rc == STEP_OK) rc = check_publication_and_plugin(s);
    bool failover = false;
    if (rc == STEP_OK) rc = read_server(s, &id, &si, &srv);
    if (rc == STEP_OK) rc = settle_failover(s, &si, &failover);
    if (rc == STEP_OK) rc = read_sender_timeout(s);
    if (rc == STEP_OK && s->position)
        rc = s->position(s->position_ctx, id.system, &file, &have_offset);
    if (rc == STEP_OK && have_offset) rc = read_fork(s, &file, &id, &srv);
    struct resume_decision d;
    if (rc == STEP_OK) rc = slot_decide(s, &file, &have_offset, &srv, &d);
    if (rc != STEP_OK) return rc;
    if (d.verdict == RESUME_NO_SLOT && (rc = create_slot(s, &si, &d.start, failover)) != STEP_OK)
        return rc;
    slot_take(s, have_offset ? &file : NULL, &srv, &d, id.timeline);
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(d.start, a)}),
           "streaming slot \"%s\" from %s on %s (%s %s, slot confirmed %s, server at %s, "
           "system %s, timeline %u)",
           c->pg_slot, a, stream_server_label(s->st, (char[300]){0}, 300),
           s->position ? "stored position" : "offset file",
           have_offset ? "present" : "absent",
           lsn_format(si.confirmed_flush, (char[LSN_STRLEN]){0}),
           lsn_format(id.xlogpos, (char[LSN_STRLEN]){0}), id.system, (unsigned)id.timeline);
    return STEP_OK;
}

/* Where the stream starts: the slot's confirmed position (start), or what
 * is all ACKed when that is ahead. With pgoutput the confirmed position
 * trails the ACKs until a publication proof passes them (confirm.h); the
 * server skips every transaction committed before the position asked for,
 * which these are: after a reconnect the tracker has counted them, after a
 * restart the offset file's acked says so. */
lsn_t slot_stream_from(const struct slot_setup *s)
{
    char a[LSN_STRLEN], b[LSN_STRLEN];
    lsn_t from = resume_stream_from(&s->plan, s->streamed, s->acked_lsn);
    if (from == s->plan.start) return from;
    log_kv(LOG_INFO, LOG_FIELDS({"lsn", lsn_format(from, a)}),
           "streaming from %s: %s says every transaction committed before it was ACKed "
           "(the slot is confirmed to %s, and further once the publication is proven)",
           a, s->streamed ? "this process" : "the offset file",
           lsn_format(s->plan.start, b));
    return from;
}

/* wal2json's add-tables for every outbox table (wal2json_add_table():
 * malloc'd, the caller frees it; NULL on out of memory). */
static char *wal2json_tables_filter(const struct outbox_set *o)
{
    char *filter = NULL;
    for (size_t i = 0; i < o->n; i++)
        if (!(filter = wal2json_add_table(filter, o->maps[i].schema, o->maps[i].table)))
            return NULL;
    return filter;
}

/*
 * wal2json: the columns' type OIDs ("include-type-oids") when an outbox
 * table has a bytea column, so that its decoder knows which values are
 * bytea (outbox.h: a bytea column's value is its bytes; stream.c sets
 * bytea_output = hex). Only then: they make each line ~20 % longer (590
 * instead of 490 bytes per row of sql/outbox.sql's table, measured with
 * pg_logical_slot_peek_changes). A column made bytea while outboxd
 * streams is read as bytea from the next start of the stream.
 * Sets *type_oids. 0, or -1 with err.
 */
static int wal2json_type_oids(struct slot_setup *s, bool *type_oids, char *err,
                              size_t errlen)
{
    *type_oids = false;
    for (size_t i = 0; i < s->outboxes->n && !*type_oids; i++) {
        const struct outbox_map *m = &s->outboxes->maps[i];
        int has = stream_table_has_bytea(s->st, m->schema, m->table, err, errlen);
        if (has < 0) return -1;
        *type_oids = has == 1;
    }
    return 0;
}

/* Builds the option list of START_REPLICATION into *out (malloc'd, the
 * caller frees it): pgoutput: proto_version 1, the publication, messages
 * when asked; wal2json: format-version 2, transaction records, LSNs,
 * timestamps, only the outbox tables, only inserts (type_oids:
 * include-type-oids). Returns 0, or -1 on out of memory. */
static int plugin_options(const struct slot_setup *s, bool type_oids, char **out)
{
    const struct config *c = s->cfg;
    /* An option's value is a string literal of the replication command's
     * own grammar (repl_scanner.l): quotes doubled, a backslash an ordinary
     * character, and no E'...' form, which PQescapeLiteral() writes for a
     * value with a backslash (a syntax error there): pgsql_quote_literal(). */
    if (c->pg_plugin == PLUGIN_PGOUTPUT) {
        bool messages = c->pg_heartbeat_interval_ms > 0 || outbox_set_has_prefix(s->outboxes);
        /* publication_names is a comma-separated list of identifiers inside
         * a string literal: quote the name as an identifier, then as a
         * literal. */
        char *pubid = pgsql_quote_ident(c->pg_publication);
        char *publit = pubid ? pgsql_quote_literal(pubid) : NULL;
        if (publit)
            *out = str_printf("proto_version '1', publication_names %s%s", publit,
                              messages ? ", messages 'true'" : "");
        free(pubid);
        free(publit);
        return *out ? 0 : -1;
    }
    char *filter = wal2json_tables_filter(s->outboxes);
    char *lit = filter ? pgsql_quote_literal(filter) : NULL;
    free(filter);
    if (!lit) return -1;
    /* include-types 'false': outboxd maps columns by name, and a type name
     * on every column of every row ("timestamp with time zone") made up
     * 13 % of the benchmark's lines, for the walsender to print and outboxd
     * to parse. */
    *out = str_printf("\"format-version\" '2', \"include-transaction\" 'true', "
                      "\"include-lsn\" 'true', \"include-timestamp\" 'true', "
                      "\"include-types\" 'false', \"add-tables\" %s, \"actions\" 'insert'%s",
                      lit, type_oids ? ", \"include-type-oids\" 'true'" : "");
    free(lit);
    return *out ? 0 : -1;
}

/* START_REPLICATION with the plugin's options (plugin_options()). 0, or -1
 * with err. */
static int start_stream(struct slot_setup *s, lsn_t from, char *err, size_t errlen)
{
    const struct config *c = s->cfg;
    bool type_oids = false;
    if (c->pg_plugin == PLUGIN_WAL2JSON && wal2json_type_oids(s, &type_oids, err, errlen) != 0)
        return -1;
    char *options = NULL;
    if (plugin_options(s, type_oids, &options) != 0) {
        snprintf(err, errlen, "START_REPLICATION: out of memory");
        return -1;
    }
    struct stream_target t = {
        .slot = c->pg_slot,
        .options = options,
        .publication = c->pg_plugin == PLUGIN_PGOUTPUT ? c->pg_publication : NULL,
        .direct_read = c->pg_direct_read,
    };
    int rc = stream_start(s->st, &t, from, err, errlen);
    free(options);
    return rc;
}

enum step slot_open_stream(struct slot_setup *s)
{
    char err[1024];
    enum step rc = prepare_stream(s);
    if (rc != STEP_OK) return rc;
    const struct config *c = s->cfg;
    lsn_t from = slot_stream_from(s);
    if (start_stream(s, from, err, sizeof(err)) != 0) {
        bool in_use = strcmp(stream_sqlstate(s->st), "55006") == 0;
        if (in_use) { /* taken since read_server() looked: the relay says so */
            log_debug("%s", err);
            s->holder_pid = 0;
            s->retry_cause = "slot_in_use";
            return STEP_BROKEN;
        }
        if (stream_broken(s->st)) {
            log_warn("%s", err);
            return STEP_BROKEN;
        }
        if (s->pub_capped && slot_says_publication_missing(err, c->pg_publication))
            log_publication_gap(s, true); /* prepare_stream() just found it */
        else
            log_plugin_error(s, err);
        return STEP_FATAL;
    }
    log_info("reading the replication stream %s",
             stream_direct(s->st) ? "from the socket directly"
             : c->pg_direct_read ? "through libpq (the connection is encrypted)"
                                 : "through libpq ([postgres] direct_read = false)");
    return STEP_OK;
}
