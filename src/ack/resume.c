/*
 * resume.c - the offset file against the server and the slot (resume.h):
 * which position a start may use, and the words for the cases it may not.
 */
#include "resume.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *resume_bytes(uint64_t n, char *out, size_t outlen)
{
    static const char *const units[] = {"bytes", "kB", "MB", "GB", "TB"};
    int u = 0;
    uint64_t v = n;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, outlen, "%llu %s", (unsigned long long)v, units[u]);
    return out;
}

void resume_identity(const struct resume_server *srv, lsn_t lsn, struct offset_state *out)
{
    memset(out, 0, sizeof(*out));
    out->format = 2; /* 3 once progress is set (offset_format()) */
    out->lsn = lsn;
    out->has_identity = true;
    snprintf(out->system, sizeof(out->system), "%s", srv->system);
    out->timeline = srv->timeline;
    snprintf(out->database, sizeof(out->database), "%s", srv->database);
    snprintf(out->slot, sizeof(out->slot), "%s", srv->slot ? srv->slot : "");
    snprintf(out->plugin, sizeof(out->plugin), "%s", srv->plugin ? srv->plugin : "");
}

bool resume_progress_usable(const struct offset_state *stored, uint64_t events_now)
{
    return stored->txn_events == 0 || stored->txn_events == events_now;
}

void resume_plan(const struct offset_state *file, const struct resume_decision *d,
                 uint32_t timeline, bool streamed, uint64_t events_now,
                 struct resume_plan *out)
{
    memset(out, 0, sizeof(*out));
    bool own = file && d->verdict == RESUME_FROM_FILE && !d->forked;
    /* The commit time the file holds stays until a newer one is stored. */
    if (own) out->commit_time_us = file->commit_time_us;
    /* Absent, format 1 or from an older timeline: write it as this stream's
     * at the first status. */
    out->rewrite_offset = !file || !file->has_identity || file->timeline != timeline ||
                          d->verdict == RESUME_TAKE_OVER;
    out->have_offset = file != NULL;
    /* Past a fork the file's position is not this server's: the fork is. */
    out->stored_lsn = !file ? 0 : d->forked ? d->start : file->lsn;
    /* What the file says is delivered beyond the confirmable position
     * (offset.h, format 5): the stream starts there (resume_stream_from()).
     * Only this stream's: not past a fork, nor when the slot was not
     * resumed from the file. */
    out->stored_acked =
        own && file->has_acked && file->acked_lsn > d->start ? file->acked_lsn : 0;
    out->start = d->start;
    /* The progress is the transaction's identity (its commit LSN) and a
     * count: it holds whatever precedes it, but only the first stream
     * takes it from the file (later ones have the tracker), and only when
     * it counted the events counted now. */
    if (streamed || !own || !file->has_progress) return;
    out->progress_refused = !resume_progress_usable(file, events_now);
    out->resume_inside = !out->progress_refused;
    out->progress = (struct tracker_progress){file->txn_lsn, file->txn_acked};
}

lsn_t resume_stream_from(const struct resume_plan *p, bool streamed, lsn_t acked_lsn)
{
    lsn_t acked = streamed && acked_lsn > p->stored_acked ? acked_lsn : p->stored_acked;
    return acked > p->start ? acked : p->start;
}

/* "system S/database D/slot X" of the server side. */
static void describe_server(const struct resume_server *srv, char *out, size_t outlen)
{
    snprintf(out, outlen, "system %s/database %s/slot %s (timeline %u, plugin %s)",
             srv->system, srv->database, srv->slot, (unsigned)srv->timeline, srv->plugin);
}

/* The field of file that differs from srv, or NULL. */
static const char *identity_mismatch(const struct offset_state *f,
                                     const struct resume_server *srv)
{
    if (strcmp(f->system, srv->system) != 0) return "system identifier";
    if (strcmp(f->database, srv->database) != 0) return "database";
    if (strcmp(f->slot, srv->slot) != 0) return "slot";
    if (strcmp(f->plugin, srv->plugin) != 0) return "plugin";
    return NULL;
}

/* Refuses with verdict v; the message says why, both sides and the way out. */
__attribute__((format(printf, 3, 4))) static void refuse(struct resume_decision *out,
                                                         enum resume_verdict v,
                                                         const char *fmt, ...)
{
    va_list ap;
    out->verdict = v;
    out->refused = true;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof(out->message), fmt, ap);
    va_end(ap);
}

/* What the messages of one decision name: the offset file (its path and
 * its contents), the server and the configuration file. */
struct sides {
    const struct offset_state *file;
    const struct resume_server *srv;
    const char *offsets_path, *config_path;
    char fdesc[512], sdesc[512];
};

/* The file says outboxd streamed a slot this server does not have. */
static void refuse_slot_lost(const struct sides *w, struct resume_decision *out)
{
    const struct offset_state *file = w->file;
    const struct resume_server *srv = w->srv;
    char a[LSN_STRLEN];
    bool other = file->has_identity && strcmp(file->system, srv->system) != 0;
    refuse(out, RESUME_SLOT_LOST,
           "replication slot \"%s\" does not exist on this server (system %s, "
           "database %s), but the offset file %s says outboxd streamed up to %s%s%s. "
           "A failover to a server without the slot, or a mistyped [postgres] slot, "
           "are the usual causes; a dropped slot is the other one. outboxd does not "
           "re-create it: that would silently skip every event committed since. "
           "Fix the slot name or the conninfo; or run outboxd repair -c %s to "
           "re-publish from the outbox table what was committed since and create the "
           "slot again (or set [postgres] on_slot_loss = repair; README \"Gap repair\"); "
           "or, to start afresh from now, move %s away",
           srv->slot, srv->system, srv->database, w->offsets_path,
           file->has_identity ? "" : lsn_format(file->lsn, a),
           file->has_identity ? w->fdesc : "", other ? " (another system)" : "",
           w->config_path, w->offsets_path);
}

/* A format 2 file of another system, database, slot or plugin: refuses
 * and returns true. Otherwise notes a new timeline (or, for format 1, the
 * rewrite to come) and returns false. */
static bool refuse_other_stream(const struct sides *w, struct resume_decision *out)
{
    const struct offset_state *file = w->file;
    const struct resume_server *srv = w->srv;
    char a[LSN_STRLEN];
    if (!file->has_identity) {
        snprintf(out->note, sizeof(out->note),
                 "offset file %s has format 1 (a bare LSN: no system, database or slot "
                 "recorded); it is rewritten with them at the next confirm",
                 w->offsets_path);
        return false;
    }
    const char *diff = identity_mismatch(file, srv);
    if (diff) {
        refuse(out, RESUME_OTHER_STREAM,
               "the offset file %s belongs to another stream (the %s differs): the "
               "file says %s; this server and configuration are %s. Its position "
               "means nothing here and is not used. Point [offsets] file at this "
               "stream's offset file, or move %s away to start from the slot's "
               "confirmed position %s",
               w->offsets_path, diff, w->fdesc, w->sdesc, w->offsets_path,
               lsn_format(srv->slot_confirmed, a));
        return true;
    }
    if (file->timeline > srv->timeline) {
        refuse(out, RESUME_OLD_TIMELINE,
               "this server is on timeline %u, but the offset file %s was written on "
               "timeline %u of the same system: outboxd already streamed from a server "
               "promoted after this one, so this is an old primary running again after "
               "a failover (two primaries). Its WAL after the promotion is not the "
               "history outboxd follows; nothing is read from it. Stop it or make it a "
               "standby of the current primary, and point [postgres] conninfo at the "
               "current primary (with several hosts: target_session_attrs=read-write "
               "takes the first writable one listed)",
               (unsigned)srv->timeline, w->offsets_path, (unsigned)file->timeline);
        return true;
    }
    out->note_is_warning = file->timeline != srv->timeline;
    if (file->timeline != srv->timeline)
        snprintf(out->note, sizeof(out->note),
                 "the server's timeline is %u, the offset file's %u: the server was "
                 "promoted (or restored), or as a standby follows a promoted server, since "
                 "the file was written; its position is checked against the server's WAL "
                 "and the slot",
                 (unsigned)srv->timeline, (unsigned)file->timeline);
    return false;
}

/* The file's position against the server's WAL and the slot: refuses and
 * returns true when the file is beyond the WAL or behind the slot. */
static bool refuse_position(const struct sides *w, struct resume_decision *out)
{
    const struct offset_state *file = w->file;
    const struct resume_server *srv = w->srv;
    char a[LSN_STRLEN], b[LSN_STRLEN], size[32];
    if (file->lsn > srv->wal_end) {
        refuse(out, RESUME_BEYOND_WAL,
               "the offset file %s holds %s, beyond this server's current WAL position "
               "%s (%s): it was not written by this server's history (another cluster, "
               "a restored backup or a lagging promoted replica). It is neither used nor "
               "confirmed. Point [offsets] file at the right file, or run outboxd "
               "verify -c %s, then outboxd accept-slot -c %s to continue from the slot's "
               "confirmed position %s",
               w->offsets_path, lsn_format(file->lsn, a), lsn_format(srv->wal_end, b),
               w->sdesc, w->config_path, w->config_path,
               lsn_format(srv->slot_confirmed, (char[LSN_STRLEN]){0}));
        return true;
    }
    /* Confirmed up to the file's acked at most: by this stream (with
     * exactly_once the stored position is only written at a commit, and
     * the slot is confirmed up to what committed in between), nothing lost. */
    if (srv->slot_confirmed <= offset_all_acked(file)) return false;
    if (srv->shared) return false; /* take_over() */
    refuse(out, RESUME_SLOT_AHEAD,
           "replication slot \"%s\" is confirmed up to %s, ahead of the offset file "
           "%s at %s (by %s). outboxd writes the file before it confirms, so someone "
           "else moved the slot (pg_replication_slot_advance, a slot dropped and "
           "re-created under the same name, another client on it): events committed "
           "between %s and %s may never have been sent. Run outboxd verify -c %s to "
           "see what is missing, then outboxd accept-slot -c %s to continue from %s. "
           "If the other client is an outboxd instance sharing the slot (a hot "
           "standby pair), set [postgres] hot_standby = true in both",
           srv->slot, lsn_format(srv->slot_confirmed, a), w->offsets_path,
           lsn_format(file->lsn, b),
           resume_bytes(srv->slot_confirmed - file->lsn, size, sizeof(size)), b, a,
           w->config_path, w->config_path, a);
    return true;
}

/* A shared slot (hot_standby) confirmed ahead of this instance's file:
 * another instance streamed it meanwhile, and it confirmed only what
 * Kafka ACKed, so everything before the slot's position was delivered.
 * The file's position (and its progress inside a transaction) is stale:
 * starting there would send again what the other instance sent. */
static void take_over(const struct sides *w, struct resume_decision *out)
{
    const struct resume_server *srv = w->srv;
    char a[LSN_STRLEN], b[LSN_STRLEN], size[32], earlier[sizeof(out->note)];
    out->verdict = RESUME_TAKE_OVER;
    out->start = srv->slot_confirmed;
    snprintf(earlier, sizeof(earlier), "%s", out->note); /* a new timeline's */
    snprintf(out->note, sizeof(out->note),
             "taking over replication slot \"%s\" at %s: another outboxd instance "
             "sharing it ([postgres] hot_standby = true) confirmed it %s beyond this "
             "instance's offset file %s (%s); the file is rewritten%s%.200s",
             srv->slot, lsn_format(srv->slot_confirmed, a),
             resume_bytes(srv->slot_confirmed - w->file->lsn, size, sizeof(size)),
             w->offsets_path, lsn_format(w->file->lsn, b), earlier[0] ? "; " : "", earlier);
}

void resume_server_init(struct resume_server *srv, const char *system, uint32_t timeline,
                        lsn_t wal_end, const char *database, const char *slot,
                        const char *plugin)
{
    memset(srv, 0, sizeof(*srv));
    snprintf(srv->system, sizeof(srv->system), "%s", system);
    srv->timeline = timeline;
    srv->wal_end = wal_end;
    snprintf(srv->database, sizeof(srv->database), "%s", database);
    srv->slot = slot;
    srv->plugin = plugin;
}

/* Whether the file's position lies past the point where its (older)
 * timeline ended on this server: a standby promoted before it had
 * received what outboxd had already streamed from the old primary.
 * Not when the stream crossed the switch itself: a logical walsender on
 * a standby outlives the standby's promotion and its switch to a promoted
 * server's timeline, so one connection's file names the old timeline with
 * positions on the new one (issue 58: the standby decoded for outboxd
 * followed another, promoted, standby; a restart was refused as "someone
 * else moved the slot"). That this happened, the slot says: confirmed
 * here past where the old timeline ended, which only decoding this
 * server's new timeline does (a synced copy on a promoted standby is never
 * past what it received), with the file within this server's WAL. */
static bool past_fork(const struct offset_state *file, const struct resume_server *srv)
{
    if (!file->has_identity || file->timeline >= srv->timeline ||
        srv->file_timeline_end == 0 || file->lsn <= srv->file_timeline_end)
        return false;
    bool crossed =
        srv->slot_confirmed > srv->file_timeline_end && file->lsn <= srv->wal_end;
    return !crossed;
}

/* The note of a start at the fork (past_fork()). */
static void note_fork(const struct sides *w, struct resume_decision *out)
{
    char a[LSN_STRLEN], b[LSN_STRLEN], size[32];
    const struct offset_state *file = w->file;
    const struct resume_server *srv = w->srv;
    out->forked = true;
    out->note_is_warning = true;
    snprintf(out->note, sizeof(out->note),
             "the offset file %s is at %s on timeline %u, but on this server (promoted: "
             "timeline %u) timeline %u ended at %s: the %s of WAL in between never reached "
             "it. The events outboxd published from there are in Kafka, but their rows "
             "are not in this database (outboxd verify -c %s counts them as unknown); "
             "synchronized_standby_slots on the primary prevents this (README, Failover "
             "slots). Streaming continues from %s, where this server's history goes on",
             w->offsets_path, lsn_format(file->lsn, a), (unsigned)file->timeline,
             (unsigned)srv->timeline, (unsigned)file->timeline,
             lsn_format(srv->file_timeline_end, b),
             resume_bytes(file->lsn - srv->file_timeline_end, size, sizeof(size)),
             w->config_path, b);
}

bool resume_timeline_end(const char *history, uint32_t tli, lsn_t *end)
{
    for (const char *p = history; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[256];
        if (len < sizeof(line)) {
            memcpy(line, p, len);
            line[len] = '\0';
            char *tab = strchr(line, '\t');
            if (tab && line[0] != '#') {
                *tab = '\0';
                char *lsn = tab + 1, *tab2 = strchr(lsn, '\t');
                if (tab2) *tab2 = '\0';
                char *stop;
                unsigned long t = strtoul(line, &stop, 10);
                if (*stop == '\0' && stop != line && t == tli && lsn_parse(lsn, end))
                    return true;
            }
        }
        p = eol ? eol + 1 : NULL;
    }
    return false;
}

void resume_decide(const struct offset_state *file, const struct resume_server *srv,
                   const char *offsets_path, const char *config_path,
                   struct resume_decision *out)
{
    memset(out, 0, sizeof(*out));
    if (!file) {
        out->verdict = srv->slot_exists ? RESUME_FROM_SLOT : RESUME_NO_SLOT;
        out->start = srv->slot_exists ? srv->slot_confirmed : 0;
        return;
    }
    struct sides w = {.file = file,
                      .srv = srv,
                      .offsets_path = offsets_path,
                      .config_path = config_path ? config_path : "FILE"};
    describe_server(srv, w.sdesc, sizeof(w.sdesc));
    offset_describe(file, w.fdesc, sizeof(w.fdesc));
    if (!srv->slot_exists) {
        refuse_slot_lost(&w, out);
        return;
    }
    if (refuse_other_stream(&w, out)) return;
    /* Past the fork: judged (and started) at the fork instead. */
    struct offset_state at = *file;
    if (past_fork(file, srv)) {
        at.lsn = srv->file_timeline_end;
        at.has_acked = false; /* nothing past the fork was ACKed on this history */
        at.acked_lsn = 0;
        note_fork(&w, out);
        w.file = &at;
    }
    if (refuse_position(&w, out)) return;
    /* Up to the file's acked the slot says nothing the file does not: its
     * progress stands, whoever confirmed it. Beyond, only a shared slot
     * gets here (refuse_position() let it pass): the file is stale. (Taking
     * over below acked dropped the progress: with exactly_once, whose
     * position is the pair's progress record, the simulator's seed 60 sent
     * a transaction's committed events again.) */
    if (srv->slot_confirmed > offset_all_acked(&at)) {
        take_over(&w, out);
        return;
    }
    out->verdict = RESUME_FROM_FILE;
    /* the slot may stand between the file's lsn and its acked (above) */
    out->start = srv->slot_confirmed > at.lsn ? srv->slot_confirmed : at.lsn;
}

lsn_t resume_clamp_flush(lsn_t stored, lsn_t received, lsn_t start)
{
    lsn_t limit = received > start ? received : start;
    return stored < limit ? stored : limit;
}

bool resume_write_due(lsn_t flush, lsn_t stored, bool event_driven, bool force,
                      int64_t now_ms, int64_t last_write_ms, int64_t interval_ms)
{
    if (flush <= stored) return false;
    if (force || event_driven) return true;
    return now_ms - last_write_ms >= interval_ms;
}
