/*
 * relayconfirm.c - the logical relay's confirmation (see relayconfirm.h):
 * what the confirmer (confirm.h) reads of the relay, the status it sends,
 * the offset file's writes it times and counts, and the I/O it does them
 * with (confirm_io_stream()).
 */
#include "relayconfirm.h"

#include "clock.h"
#include "offset.h"
#include "relaytxn.h"
#include "replproto.h"
#include "stream.h"

/* What the confirmer reads now: the tracker, the ACK count, the stream,
 * the clock. */
static struct confirm_view relay_confirm_view(const struct relay *r)
{
    struct tracker_progress p = {0, 0};
    bool has_progress = changes_progress(&r->chg, &p);
    int64_t ct = r->trk ? tracker_flushed_commit_time(r->trk) : 0;
    struct confirm_view v = {.acked = tracker_flush_lsn(r->trk),
                                 .acked_commit_time_us = ct ? ct + PG_EPOCH_OFFSET_US : 0,
                                 .idle = tracker_idle(r->trk),
                                 .has_progress = has_progress,
                                 .progress = p,
                                 .events_acked = r->events_acked,
                                 .pending_events = tracker_pending_events(r->trk),
                                 .pending_txns = tracker_pending_txns(r->trk),
                                 .connected = r->st != NULL,
                                 .now_ms = clock_mono_ms()};
    relaytxn_cap(r, &v); /* exactly_once: only what committed */
    return v;
}

/* A status went out confirming r->confirm.sent_lsn: the ack-to-confirm
 * stage of the transactions it confirmed (one clock read, only then). */
static void note_confirmed(struct relay *r)
{
    lsn_t lsn = r->confirm.sent_lsn;
    if (r->trk && tracker_confirm_due(r->trk, lsn))
        tracker_confirmed(r->trk, lsn, clock_unix_us(), &r->chg.stages[STAGE_ACK_TO_CONFIRM]);
}

/* After a step of c that may have written the offset file (writes before
 * it): how long it took, and the count in m (/metrics). */
static void note_writes(struct confirmer *c, struct metrics *m, uint64_t writes, int64_t t0)
{
    if (c->offset_writes == writes) return;
    confirmer_write_took(c, clock_mono_ms() - t0);
    m->offset_writes = c->offset_writes;
}

/* Writes the offset file when due, then confirms it to the server
 * (confirmer_status()). force: store the position now (stop, reconnect,
 * fatal error). Returns a STEP_* code. */
int relay_send_status_ex(struct relay *r, bool reply, bool force)
{
    struct confirm_view v = relay_confirm_view(r);
    uint64_t sent = r->confirm.statuses_sent, writes = r->confirm.offset_writes;
    int rc = confirmer_status(&r->confirm, &v, reply, force);
    note_writes(&r->confirm, &r->met, writes, v.now_ms);
    if (r->confirm.statuses_sent != sent) note_confirmed(r);
    r->met.events_skipped = r->chg.events_skipped;
    return rc == CONFIRM_OK ? STEP_OK : rc == CONFIRM_BROKEN ? STEP_BROKEN : STEP_FATAL;
}

int relay_send_status(struct relay *r, bool reply)
{
    return relay_send_status_ex(r, reply, false);
}

/* When the next status is due (monotonic ms; confirmer_deadline()). */
int64_t relay_status_deadline(const struct relay *r)
{
    struct confirm_view v = relay_confirm_view(r);
    return confirmer_deadline(&r->confirm, &v);
}

/* A status when due; between statuses, the offset file when ACKed events
 * wait to be written (confirmer_acked_write_due()). */
int relay_status_if_due(struct relay *r)
{
    struct confirm_view v = relay_confirm_view(r);
    if (v.now_ms >= confirmer_status_deadline(&r->confirm, &v))
        return relay_send_status(r, false);
    if (!confirmer_acked_write_due(&r->confirm, &v)) return STEP_OK;
    uint64_t writes = r->confirm.offset_writes;
    int rc = confirmer_store(&r->confirm, &v);
    note_writes(&r->confirm, &r->met, writes, v.now_ms);
    return rc == CONFIRM_OK ? STEP_OK : STEP_FATAL;
}

void confirm_from_plan(struct confirmer *c, const struct offset_state *identity,
                       const struct resume_plan *p)
{
    c->identity = *identity;
    c->rewrite_offset = p->rewrite_offset;
    if (p->have_offset) c->stored_lsn = p->stored_lsn;
    c->stored_acked = p->stored_acked;
    if (p->resume_inside) {
        c->stored_has_progress = true;
        c->stored_progress = p->progress;
    }
}

/* ---- the daemon's confirm_io ---- */

static int write_offset_file(void *ctx, const char *path, const struct offset_state *st,
                             char *err, size_t errlen)
{
    (void)ctx;
    return offset_write(path, st, err, errlen);
}

static int send_on_stream(void *ctx, lsn_t written, lsn_t flushed, bool reply, char *err,
                          size_t errlen)
{
    struct stream **st = ctx;
    return stream_send_status(*st, written, flushed, reply, err, errlen);
}

struct confirm_io confirm_io_stream(struct stream **st)
{
    return (struct confirm_io){
        .write_offset = write_offset_file, .send_status = send_on_stream, .ctx = st};
}
