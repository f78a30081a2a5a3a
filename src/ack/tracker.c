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
 *
 * A popped transaction with events leaves (end LSN, when it became
 * confirmable) in a second, linear queue until a status confirms it
 * (runs[run_head, run_head + nruns)); consecutive ones of the same time
 * share an entry, and the queue is bounded (TRACKER_MAX_RUNS).
 */
#include "tracker.h"

#include <stdlib.h>
#include <string.h>

#include "ackset.h"
#include "grow.h"

struct txn {
    lsn_t final_lsn; /* Begin's: the commit record's LSN, its identity */
    lsn_t end_lsn;
    int64_t commit_time; /* server's commit timestamp, 0 if unknown */
    int64_t produce_us;  /* events last handed to the producer, 0 if unknown */
    int64_t ack_us;      /* its latest ACK, 0 if unknown */
    uint64_t pending;
    uint64_t events;     /* ordinals handed out (sent or skipped) */
    struct ackset acks;  /* which of them are ACKed (or skipped) */
    bool committed;
    bool failed;
    bool aborted; /* dropped mid-stream; its late reports are ignored */
    bool has_events;
};

/* Confirmable transactions ending at or before end_lsn that became so at
 * at_us, waiting for a status. */
struct confirm_run {
    lsn_t end_lsn;
    int64_t at_us;
    uint64_t txns;
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
    struct confirm_run *runs; /* waiting for a status, oldest first */
    size_t runs_cap, run_head, nruns;
    uint64_t unconfirmed;     /* transactions in them */
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
    for (size_t i = 0; i < t->count; i++) ackset_clear(&t->ring[(t->head + i) % t->cap].acks);
    free(t->ring);
    free(t->runs);
    free(t);
}

/* Returns the slot of seq, or NULL if seq is not in the ring. */
static struct txn *slot_of(const struct tracker *t, uint64_t seq)
{
    if (seq < t->head_seq || seq - t->head_seq >= t->count) return NULL;
    return &t->ring[(t->head + (size_t)(seq - t->head_seq)) % t->cap];
}

/* The slot of the transaction tag names, or NULL. Its low 32 bits of seq
 * are counted from head_seq's, modulo 2^32: a popped one lands far past
 * count. */
static struct txn *slot_of_tag(const struct tracker *t, uint64_t tag)
{
    uint32_t off = tracker_tag_txn(tag) - (uint32_t)t->head_seq;
    if (off >= t->count) return NULL;
    return &t->ring[(t->head + off) % t->cap];
}

uint64_t tracker_txn_tag(uint64_t seq)
{
    return (uint64_t)(uint32_t)seq << 32 | TRACKER_ORDINAL_UNKNOWN;
}

uint32_t tracker_tag_txn(uint64_t tag) { return (uint32_t)(tag >> 32); }

/* The ordinal in tag, or -1 when it is unknown. */
static int64_t tag_ordinal(uint64_t tag)
{
    uint32_t low = (uint32_t)tag;
    return low == TRACKER_ORDINAL_UNKNOWN ? -1 : (int64_t)low - 1;
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

/* The newest run, or NULL. */
static struct confirm_run *last_run(struct tracker *t)
{
    return t->nruns ? &t->runs[t->run_head + t->nruns - 1] : NULL;
}

/* Room for one more run at the end: the confirmed ones at the front are
 * reclaimed first, then the array grows up to TRACKER_MAX_RUNS. */
static bool run_room(struct tracker *t)
{
    if (t->run_head + t->nruns < t->runs_cap) return true;
    if (t->run_head > 0) {
        memmove(t->runs, t->runs + t->run_head, t->nruns * sizeof(*t->runs));
        t->run_head = 0;
        return true;
    }
    if (t->nruns >= TRACKER_MAX_RUNS) return false;
    void *arr = t->runs;
    if (grow_array(&arr, &t->runs_cap, t->nruns + 1, sizeof(*t->runs), 16) != 0) return false;
    t->runs = arr;
    return true;
}

/* A transaction ending at end_lsn became confirmable at at_us (0: unknown,
 * not recorded). Out of room (or memory), it joins the newest run. */
static void note_confirmable(struct tracker *t, lsn_t end_lsn, int64_t at_us)
{
    if (at_us == 0) return;
    struct confirm_run *last = last_run(t);
    if (!(last && last->at_us == at_us) && run_room(t)) {
        t->runs[t->run_head + t->nruns++] = (struct confirm_run){end_lsn, at_us, 0};
        last = last_run(t);
    }
    if (!last) return; /* no run at all and no memory for one */
    last->end_lsn = end_lsn;
    last->txns++;
    t->unconfirmed++;
}

/* Pops every completed transaction from the front and advances flush_lsn.
 * ack_us: the ACK that completed them (0: a Commit, a keepalive...). */
static void advance(struct tracker *t, int64_t ack_us)
{
    /* A failed transaction stops the walk: what precedes it is still
     * confirmed, nothing after it ever is. */
    while (t->count > 0) {
        struct txn *x = &t->ring[t->head];
        if (!x->committed || x->pending > 0 || x->failed) break;
        if (x->aborted) t->aborted--;
        if (x->end_lsn > t->flush_lsn) t->flush_lsn = x->end_lsn;
        if (!x->aborted && x->commit_time != 0) t->flushed_commit_time = x->commit_time;
        if (!x->aborted && x->has_events)
            note_confirmable(t, x->end_lsn, ack_us ? ack_us : x->ack_us);
        ackset_clear(&x->acks);
        t->head = (t->head + 1) % t->cap;
        t->count--;
        t->head_seq++;
    }
    apply_keepalive(t);
}

uint64_t tracker_begin(struct tracker *t, lsn_t final_lsn)
{
    if (t->open_seq != 0) return 0;
    if (t->count == t->cap && grow(t) != 0) return 0;
    uint64_t seq = t->head_seq + t->count;
    struct txn *x = &t->ring[(t->head + t->count) % t->cap];
    memset(x, 0, sizeof(*x));
    x->final_lsn = final_lsn;
    t->count++;
    t->open_seq = seq;
    return seq;
}

/* The tag of the next ordinal of x, the transaction seq. */
static uint64_t next_tag(struct txn *x, uint64_t seq)
{
    uint64_t ord = x->events++;
    uint32_t low = ord < TRACKER_ORDINAL_UNKNOWN - 1 ? (uint32_t)(ord + 1) : TRACKER_ORDINAL_UNKNOWN;
    return (uint64_t)(uint32_t)seq << 32 | low;
}

int tracker_event_sent(struct tracker *t, uint64_t seq, uint64_t *tag)
{
    if (seq == 0 || seq != t->open_seq) return -1;
    struct txn *x = slot_of(t, seq);
    *tag = next_tag(x, seq);
    x->pending++;
    x->has_events = true;
    t->pending_events++;
    return 0;
}

int tracker_event_skipped(struct tracker *t, uint64_t seq)
{
    if (seq == 0 || seq != t->open_seq) return -1;
    struct txn *x = slot_of(t, seq);
    int64_t ord = tag_ordinal(next_tag(x, seq));
    /* Out of memory only leaves the prefix short: a later restart skips
     * fewer events, never more. */
    if (ord >= 0) (void)ackset_add(&x->acks, (uint64_t)ord);
    return 0;
}

bool tracker_progress(const struct tracker *t, struct tracker_progress *out)
{
    const struct txn *x = t->count ? &t->ring[t->head] : NULL;
    if (!x || x->aborted || x->acks.prefix == 0) return false;
    *out = (struct tracker_progress){x->final_lsn, x->acks.prefix};
    return true;
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
    advance(t, 0);
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
    ackset_clear(&x->acks);
    x->aborted = true;
    x->committed = true;
    x->end_lsn = 0;
    t->aborted++;
    /* A keepalive seen while the dropped transaction streamed may point past
     * its commit: it must never be confirmed now. */
    t->keepalive_lsn = 0;
    t->open_seq = 0;
    advance(t, 0);
}

int tracker_ack(struct tracker *t, uint64_t tag) { return tracker_ack_at(t, tag, 0); }

int tracker_ack_at(struct tracker *t, uint64_t tag, int64_t ack_us)
{
    struct txn *x = slot_of_tag(t, tag);
    if (!x || x->aborted) return 1;
    if (x->pending == 0) return -1;
    int64_t ord = tag_ordinal(tag);
    /* Out of memory (-1) only leaves the prefix short, as above. */
    if (ord >= 0 && ackset_add(&x->acks, (uint64_t)ord) == 1) return -1;
    x->pending--;
    x->ack_us = ack_us;
    t->pending_events--;
    if (x->pending == 0 && x == &t->ring[t->head]) advance(t, ack_us);
    return 0;
}

void tracker_fail(struct tracker *t, uint64_t tag)
{
    struct txn *x = slot_of_tag(t, tag);
    if (x && !x->aborted) {
        x->failed = true;
        if (x->pending > 0) {
            x->pending--;
            t->pending_events--;
        }
    }
    t->failed = true;
}

bool tracker_confirm_due(const struct tracker *t, lsn_t lsn)
{
    return t->nruns > 0 && t->runs[t->run_head].end_lsn <= lsn;
}

void tracker_confirmed(struct tracker *t, lsn_t lsn, int64_t now_us, struct latency_hist *h)
{
    while (tracker_confirm_due(t, lsn)) {
        const struct confirm_run *r = &t->runs[t->run_head];
        latency_record_n(h, now_us - r->at_us, r->txns);
        t->unconfirmed -= r->txns;
        t->run_head++;
        t->nruns--;
    }
    if (t->nruns == 0) t->run_head = 0;
}

uint64_t tracker_unconfirmed_txns(const struct tracker *t) { return t->unconfirmed; }

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

void tracker_set_produce_time(struct tracker *t, uint64_t seq, int64_t unix_us)
{
    struct txn *x = slot_of(t, seq);
    if (x) x->produce_us = unix_us;
}

bool tracker_times(const struct tracker *t, uint64_t tag, struct tracker_times *out)
{
    const struct txn *x = slot_of_tag(t, tag);
    if (!x || x->aborted) {
        *out = (struct tracker_times){0, 0};
        return false;
    }
    *out = (struct tracker_times){x->commit_time, x->produce_us};
    return true;
}

int64_t tracker_flushed_commit_time(const struct tracker *t) { return t->flushed_commit_time; }

bool tracker_idle(const struct tracker *t)
{
    return t->open_seq == 0 && t->count == 0 && t->pending_events == 0;
}

bool tracker_failed(const struct tracker *t) { return t->failed; }

uint64_t tracker_pending_events(const struct tracker *t) { return t->pending_events; }

size_t tracker_pending_txns(const struct tracker *t) { return t->count - t->aborted; }
