/*
 * tracker.c - the ACK/LSN tracker: which LSN may be confirmed to Postgres.
 *
 * Transactions live in a ring buffer in the order they were received, which
 * is commit order (pgoutput without streaming sends whole transactions at
 * commit). Sequence numbers are dense, so the transaction seq sits at
 * ring[(head + seq - head_seq) % cap]. Completed transactions are popped
 * from the front; the flush position is the end LSN of the last one popped.
 * The ring grows on demand; its size is bounded by the transactions whose
 * events are in flight, which the producer's queue limit bounds in turn.
 */
#include "tracker.h"

#include <stdlib.h>
#include <string.h>

struct txn {
    lsn_t end_lsn;
    int64_t commit_time; /* server's commit timestamp, 0 if unknown */
    uint64_t pending;
    bool committed;
    bool failed;
    bool aborted; /* dropped mid-stream; its late reports are ignored */
};

struct tracker {
    struct txn *ring;
    size_t cap;
    size_t head;       /* index of the oldest transaction */
    size_t count;      /* transactions in the ring */
    uint64_t head_seq; /* seq of ring[head]; next seq when count == 0 */
    uint64_t open_seq; /* 0 when no transaction is open */
    uint64_t pending_events;
    lsn_t flush_lsn;
    lsn_t last_end_lsn; /* newest commit end seen, to reject going back */
    size_t aborted;     /* aborted transactions still in the ring */
    lsn_t keepalive_lsn; /* newest keepalive walEnd, applied when idle */
    int64_t flushed_commit_time; /* of the newest transaction popped */
    bool failed;
};

struct tracker *tracker_new(lsn_t start_lsn)
{
    struct tracker *t = calloc(1, sizeof(*t));
    if (!t) return NULL;
    t->cap = 64;
    t->ring = calloc(t->cap, sizeof(*t->ring));
    if (!t->ring) {
        free(t);
        return NULL;
    }
    t->head_seq = 1;
    t->flush_lsn = start_lsn;
    t->last_end_lsn = start_lsn;
    return t;
}

void tracker_free(struct tracker *t)
{
    if (!t) return;
    free(t->ring);
    free(t);
}

/* Returns the slot of seq, or NULL if seq is not in the ring. */
static struct txn *slot_of(const struct tracker *t, uint64_t seq)
{
    if (seq < t->head_seq || seq - t->head_seq >= t->count) return NULL;
    return &t->ring[(t->head + (size_t)(seq - t->head_seq)) % t->cap];
}

static int grow(struct tracker *t)
{
    size_t ncap = t->cap * 2;
    struct txn *n = malloc(ncap * sizeof(*n));
    if (!n) return -1;
    for (size_t i = 0; i < t->count; i++) n[i] = t->ring[(t->head + i) % t->cap];
    free(t->ring);
    t->ring = n;
    t->cap = ncap;
    t->head = 0;
    return 0;
}

/* Everything up to the newest keepalive's walEnd was received before it; once
 * all of that is ACKed and no transaction is open, it may be confirmed. */
static void apply_keepalive(struct tracker *t)
{
    if (!t->failed && tracker_idle(t) && t->keepalive_lsn > t->flush_lsn)
        t->flush_lsn = t->keepalive_lsn;
}

/* Pops every completed transaction from the front and advances flush_lsn. */
static void advance(struct tracker *t)
{
    /* A failed transaction stops the walk: what precedes it is still
     * confirmed, nothing after it ever is. */
    while (t->count > 0) {
        struct txn *x = &t->ring[t->head];
        if (!x->committed || x->pending > 0 || x->failed) break;
        if (x->aborted) t->aborted--;
        if (x->end_lsn > t->flush_lsn) t->flush_lsn = x->end_lsn;
        if (!x->aborted && x->commit_time != 0) t->flushed_commit_time = x->commit_time;
        t->head = (t->head + 1) % t->cap;
        t->count--;
        t->head_seq++;
    }
    apply_keepalive(t);
}

uint64_t tracker_begin(struct tracker *t, lsn_t final_lsn)
{
    (void)final_lsn;
    if (t->open_seq != 0) return 0;
    if (t->count == t->cap && grow(t) != 0) return 0;
    uint64_t seq = t->head_seq + t->count;
    struct txn *x = &t->ring[(t->head + t->count) % t->cap];
    memset(x, 0, sizeof(*x));
    t->count++;
    t->open_seq = seq;
    return seq;
}

int tracker_event_sent(struct tracker *t, uint64_t seq)
{
    if (seq == 0 || seq != t->open_seq) return -1;
    slot_of(t, seq)->pending++;
    t->pending_events++;
    return 0;
}

int tracker_commit(struct tracker *t, uint64_t seq, lsn_t end_lsn)
{
    if (seq == 0 || seq != t->open_seq) return -1;
    if (end_lsn < t->last_end_lsn) return -1;
    struct txn *x = slot_of(t, seq);
    x->end_lsn = end_lsn;
    x->committed = true;
    t->last_end_lsn = end_lsn;
    t->open_seq = 0;
    advance(t);
    return 0;
}

void tracker_abort_open(struct tracker *t)
{
    if (t->open_seq == 0) return;
    /* Keep the slot, so its seq is never reused by the next transaction
     * (late delivery reports of the dropped events must not count for a
     * new one), but make it contribute nothing: no pending events and no
     * LSN. It is popped like a completed transaction. */
    struct txn *x = slot_of(t, t->open_seq);
    t->pending_events -= x->pending;
    x->pending = 0;
    x->aborted = true;
    x->committed = true;
    x->end_lsn = 0;
    t->aborted++;
    /* A keepalive seen while the dropped transaction streamed may point past
     * its commit: it must never be confirmed now. */
    t->keepalive_lsn = 0;
    t->open_seq = 0;
    advance(t);
}

int tracker_ack(struct tracker *t, uint64_t seq)
{
    struct txn *x = slot_of(t, seq);
    if (!x || x->aborted) return 1;
    if (x->pending == 0) return -1;
    x->pending--;
    t->pending_events--;
    if (x->pending == 0 && seq == t->head_seq) advance(t);
    return 0;
}

void tracker_fail(struct tracker *t, uint64_t seq)
{
    struct txn *x = slot_of(t, seq);
    if (x && !x->aborted) {
        x->failed = true;
        if (x->pending > 0) {
            x->pending--;
            t->pending_events--;
        }
    }
    t->failed = true;
}

void tracker_keepalive(struct tracker *t, lsn_t wal_end)
{
    if (wal_end > t->keepalive_lsn) t->keepalive_lsn = wal_end;
    apply_keepalive(t);
}

lsn_t tracker_flush_lsn(const struct tracker *t) { return t->flush_lsn; }

void tracker_set_commit_time(struct tracker *t, uint64_t seq, int64_t commit_time)
{
    struct txn *x = slot_of(t, seq);
    if (x) x->commit_time = commit_time;
}

int64_t tracker_commit_time(const struct tracker *t, uint64_t seq)
{
    const struct txn *x = slot_of(t, seq);
    return x && !x->aborted ? x->commit_time : 0;
}

int64_t tracker_flushed_commit_time(const struct tracker *t) { return t->flushed_commit_time; }

bool tracker_idle(const struct tracker *t)
{
    return t->open_seq == 0 && t->count == 0 && t->pending_events == 0;
}

bool tracker_failed(const struct tracker *t) { return t->failed; }

uint64_t tracker_pending_events(const struct tracker *t) { return t->pending_events; }

size_t tracker_pending_txns(const struct tracker *t) { return t->count - t->aborted; }
