/*
 * ktxn.c - exactly_once's transaction pacing and committed position (see
 * ktxn.h).
 */
#include "ktxn.h"

#include <string.h>

void ktxn_init(struct ktxn *k, uint64_t max_events, int64_t max_ms)
{
    memset(k, 0, sizeof(*k));
    k->max_events = max_events;
    k->max_ms = max_ms;
}

void ktxn_sent(struct ktxn *k, int64_t now_ms)
{
    if (k->events++ == 0) k->first_ms = now_ms;
}

bool ktxn_due(const struct ktxn *k, lsn_t flush, int64_t now_ms)
{
    if (k->events >= k->max_events) return true;
    if (k->events > 0) return now_ms - k->first_ms >= k->max_ms;
    return k->have_committed && flush > offset_all_acked(&k->committed) &&
           now_ms - k->last_commit_ms >= KTXN_IDLE_MS;
}

struct offset_state ktxn_position(const struct offset_state *identity, lsn_t flush,
                                  lsn_t confirmable, bool has_progress,
                                  struct tracker_progress progress)
{
    struct offset_state pos = *identity;
    pos.lsn = confirmable < flush ? confirmable : flush;
    pos.has_acked = flush > pos.lsn;
    pos.acked_lsn = pos.has_acked ? flush : 0;
    pos.has_progress = has_progress && progress.acked > 0 && progress.txn_lsn >= flush;
    pos.txn_lsn = pos.has_progress ? progress.txn_lsn : 0;
    pos.txn_acked = pos.has_progress ? progress.acked : 0;
    pos.format = offset_format_of(&pos);
    return pos;
}

void ktxn_started(struct ktxn *k, const struct offset_state *pos, int64_t now_ms)
{
    k->committed = *pos;
    k->started = true;
    k->have_committed = true;
    k->events = 0;
    k->committing = false;
    k->last_commit_ms = now_ms;
}

void ktxn_committed(struct ktxn *k, const struct offset_state *pos, int64_t now_ms)
{
    ktxn_started(k, pos, now_ms); /* the same state, and one commit more */
    k->commits++;
}

void ktxn_aborted(struct ktxn *k)
{
    k->events = 0;
    k->committing = false;
    k->aborts++;
}
