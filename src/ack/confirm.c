/*
 * confirm.c - confirmation (see confirm.h): the positions the relay keeps,
 * the pure decisions on them, and the one step that writes the offset file
 * and sends the status in that order.
 */
#include "confirm.h"

#include "log.h"
#include "resume.h"

lsn_t confirm_position(lsn_t acked, bool capped, lsn_t proven, lsn_t floor)
{
    lsn_t pos = capped && proven < acked ? proven : acked;
    return pos < floor ? floor : pos;
}

void confirmer_init(struct confirmer *c, const char *offsets_file, int64_t interval_ms,
                    bool pub_capped, struct confirm_io io)
{
    *c = (struct confirmer){.offsets_file = offsets_file,
                            .interval_ms = interval_ms,
                            .io = io,
                            .pub_capped = pub_capped};
}

void confirmer_stream_started(struct confirmer *c, lsn_t start, int64_t now_ms)
{
    if (start > c->stored_lsn) c->stored_lsn = start;
    c->start_lsn = start;
    c->sent_lsn = start;
    c->received_lsn = 0;
    c->next_status_ms = now_ms + c->interval_ms;
}

void confirmer_received(struct confirmer *c, lsn_t wal_end)
{
    if (wal_end > c->received_lsn) c->received_lsn = wal_end;
}

void confirmer_proven(struct confirmer *c, lsn_t lsn)
{
    if (lsn > c->proven_lsn) c->proven_lsn = lsn;
}

void confirmer_commit_time(struct confirmer *c, int64_t commit_time_us)
{
    if (commit_time_us > 0) c->identity.commit_time_us = commit_time_us;
}

lsn_t confirmer_confirmable(const struct confirmer *c, const struct confirm_view *v)
{
    return confirm_position(v->acked, c->pub_capped, c->proven_lsn, c->sent_lsn);
}

/* Whether v's progress differs from the stored one. */
static bool progress_moved(const struct confirmer *c, const struct confirm_view *v)
{
    if (!v->has_progress) return false; /* the stored one stays true */
    return !c->stored_has_progress || v->progress.txn_lsn != c->stored_progress.txn_lsn ||
           v->progress.acked != c->stored_progress.acked;
}

lsn_t confirmer_acked_to_store(const struct confirmer *c, const struct confirm_view *v)
{
    return v->acked > c->stored_acked ? v->acked : c->stored_acked;
}

/* What the file holds as all ACKed: its acked, or its lsn. */
static lsn_t stored_all_acked(const struct confirmer *c)
{
    return c->stored_acked > c->stored_lsn ? c->stored_acked : c->stored_lsn;
}

/* Whether ACKed events wait to be written: they moved acked past the file,
 * or the progress inside a transaction after it. */
static bool acked_unwritten(const struct confirmer *c, const struct confirm_view *v)
{
    if (v->events_acked == c->acked_at_store) return false;
    if (v->acked > stored_all_acked(c)) return true;
    return progress_moved(c, v) && v->progress.txn_lsn >= stored_all_acked(c);
}

int64_t confirmer_acked_write_gap(const struct confirmer *c)
{
    int64_t by_cost = ACKED_WRITE_COST_FACTOR * c->write_cost_ms;
    return by_cost > ACKED_WRITE_MS ? by_cost : ACKED_WRITE_MS;
}

void confirmer_write_took(struct confirmer *c, int64_t ms)
{
    c->write_cost_ms = ms > 0 ? ms : 0;
}

bool confirmer_acked_write_due(const struct confirmer *c, const struct confirm_view *v)
{
    return acked_unwritten(c, v) && v->now_ms - c->last_write_ms >= confirmer_acked_write_gap(c);
}

bool confirmer_progress_to_store(const struct confirmer *c, const struct confirm_view *v,
                                 lsn_t lsn, struct tracker_progress *out)
{
    /* At lsn too: see offset.c, parse_progress(). */
    if (v->has_progress && v->progress.txn_lsn >= lsn) {
        *out = v->progress;
        return true;
    }
    if (c->stored_has_progress && c->stored_progress.txn_lsn >= lsn) {
        *out = c->stored_progress;
        return true;
    }
    return false;
}

bool confirmer_write_due(const struct confirmer *c, const struct confirm_view *v,
                         bool force)
{
    lsn_t flush = confirmer_confirmable(c, v);
    if (c->rewrite_offset && flush >= c->stored_lsn) return true;
    if (confirmer_acked_write_due(c, v)) return true;
    if (progress_moved(c, v) && v->progress.txn_lsn >= c->stored_lsn &&
        (force || v->events_acked != c->acked_at_write))
        return true;
    return resume_write_due(flush, c->stored_lsn, v->events_acked != c->acked_at_write,
                            force, v->now_ms, c->last_write_ms, c->interval_ms);
}

void confirmer_status_lsns(const struct confirmer *c, lsn_t *written, lsn_t *flushed)
{
    *flushed = resume_clamp_flush(c->stored_lsn, c->received_lsn, c->start_lsn);
    *written = c->received_lsn > *flushed ? c->received_lsn : *flushed;
}

int64_t confirmer_status_deadline(const struct confirmer *c, const struct confirm_view *v)
{
    if (v->idle && confirmer_confirmable(c, v) != c->sent_lsn &&
        v->events_acked != c->acked_at_write &&
        c->last_status_ms + STATUS_CAUGHT_UP_GAP_MS < c->next_status_ms)
        return c->last_status_ms + STATUS_CAUGHT_UP_GAP_MS;
    return c->next_status_ms;
}

int64_t confirmer_deadline(const struct confirmer *c, const struct confirm_view *v)
{
    int64_t status = confirmer_status_deadline(c, v);
    if (!acked_unwritten(c, v) || c->offset_failed) return status;
    int64_t write = c->last_write_ms + confirmer_acked_write_gap(c);
    return write < status ? write : status;
}

/* Writes lsn to the offset file with the stream's identity; status: a
 * status follows (else a write between statuses). Returns 0, or -1 after
 * logging the failure (once: offset_failed stops every later status before
 * it gets here). */
static int store_offset(struct confirmer *c, const struct confirm_view *v, lsn_t lsn,
                        bool status)
{
    char err[512];
    /* The commit time stored belongs to a transaction at or before lsn: the
     * newest ACKed one when lsn reaches acked, else the one stored before. */
    if (v->acked_commit_time_us > 0 && lsn >= v->acked)
        c->identity.commit_time_us = v->acked_commit_time_us;
    struct offset_state st = c->identity;
    struct tracker_progress p;
    lsn_t acked = confirmer_acked_to_store(c, v);
    st.lsn = lsn;
    st.has_acked = acked > lsn;
    st.acked_lsn = st.has_acked ? acked : 0;
    /* Progress of a transaction before acked is over: it is all ACKed. */
    st.has_progress = confirmer_progress_to_store(c, v, st.has_acked ? acked : lsn, &p);
    if (st.has_progress) {
        st.txn_lsn = p.txn_lsn;
        st.txn_acked = p.acked;
    }
    if (c->io.write_offset(c->io.ctx, c->offsets_file, &st, err, sizeof(err)) != 0) {
        log_error("%s; stopping without confirming past %s", err,
                  lsn_format(c->stored_lsn, (char[LSN_STRLEN]){0}));
        c->offset_failed = true;
        return -1;
    }
    c->stored_lsn = lsn;
    c->stored_acked = acked;
    c->stored_has_progress = st.has_progress;
    if (st.has_progress) c->stored_progress = p;
    c->rewrite_offset = false;
    c->last_write_ms = v->now_ms;
    if (status) c->acked_at_write = v->events_acked;
    c->acked_at_store = v->events_acked;
    c->offset_writes++;
    return 0;
}

/* The position a write stores: what may be confirmed, never going back. */
static lsn_t position_to_store(const struct confirmer *c, const struct confirm_view *v)
{
    lsn_t flush = confirmer_confirmable(c, v);
    return flush > c->stored_lsn ? flush : c->stored_lsn;
}

int confirmer_store(struct confirmer *c, const struct confirm_view *v)
{
    if (c->offset_failed) return CONFIRM_FAILED;
    if (confirmer_acked_write_due(c, v) &&
        store_offset(c, v, position_to_store(c, v), false) != 0)
        return CONFIRM_FAILED;
    return CONFIRM_OK;
}

int confirmer_status(struct confirmer *c, const struct confirm_view *v, bool reply,
                     bool force)
{
    char err[512], a[LSN_STRLEN];
    if (c->offset_failed) return CONFIRM_FAILED;
    if (confirmer_write_due(c, v, force) &&
        store_offset(c, v, position_to_store(c, v), true) != 0)
        return CONFIRM_FAILED;
    if (!v->connected) return CONFIRM_OK; /* between connections: the file is enough */
    lsn_t written, confirm;
    confirmer_status_lsns(c, &written, &confirm);
    if (c->io.send_status(c->io.ctx, written, confirm, reply, err, sizeof(err)) != 0) {
        log_warn("%s", err);
        return CONFIRM_BROKEN;
    }
    if (confirm != c->sent_lsn && log_get_level() >= LOG_DEBUG)
        log_kv(LOG_DEBUG, LOG_FIELDS({"lsn", lsn_format(confirm, a)}),
               "confirmed %s (pending: %llu events in %zu transactions)", a,
               (unsigned long long)v->pending_events, v->pending_txns);
    c->sent_lsn = confirm;
    c->statuses_sent++;
    c->last_status_ms = v->now_ms;
    c->next_status_ms = v->now_ms + c->interval_ms;
    return CONFIRM_OK;
}
