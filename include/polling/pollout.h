/*
 * pollout.h - the outcomes the polling relay has yet to write back to its
 * table (pollrelay.c), with no I/O: the queue, the array parameters
 * (pgsql.h) of the two outcome statements (polling.h: sent, fail) and what
 * their answer means. Unit-tested without a server.
 *
 * An outcome is recorded only when its row was still CLAIMED by this relay
 * at the claim's generation; the statement returns the event_ids it
 * changed, and every other outcome of the group is stale (its lease was
 * lost: another relay decides), dropped and never retried.
 */
#ifndef OUTBOXD_POLLOUT_H
#define OUTBOXD_POLLOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pgsql.h"

/* Kinds of outcome written back to a row. */
enum pollout_kind { OUT_SENT, OUT_RETRY, OUT_QUARANTINE, OUT_RELEASE, OUT__COUNT };

struct pollout_entry {
    enum pollout_kind kind;
    char *event_id; /* owned */
    int64_t gen;    /* lease_generation of the claim */
    int64_t delay_ms; /* OUT_RETRY: the backoff */
    char *error;      /* owned; NULL: keep last_error */
};

struct pollout {
    struct pollout_entry *e; /* owned */
    size_t n, cap;
    uint64_t recorded[OUT__COUNT]; /* outcomes written, by kind */
    uint64_t stale;                /* outcomes dropped: the lease was lost */
};

/* "SENT", "retry", "QUARANTINED", "release" (for messages). */
const char *pollout_kind_name(enum pollout_kind k);

/* Queues an outcome; takes ownership of event_id and error. Returns 0, or
 * -1 on out of memory (both freed). */
int pollout_add(struct pollout *o, enum pollout_kind kind, char *event_id, int64_t gen,
                int64_t delay_ms, char *error);

/* Whether an outcome for event id is queued. */
bool pollout_has(const struct pollout *o, const char *id);

/* How many queued outcomes are of kind k. */
size_t pollout_count(const struct pollout *o, enum pollout_kind k);

/* The parameters of one group's statement: the SENT outcomes (sent: ids,
 * gens) or all others (fail: also the new status, the delay, the error and
 * the attempt increment, 0 for a release). */
struct pollout_params {
    struct pgsql_array ids, gens, sts, delays, errs, bumps;
};

/* Fills p (zero-initialised) for group sent. Returns how many outcomes it
 * holds, -1 on out of memory. Free with pollout_params_free() either way. */
int pollout_params(const struct pollout *o, bool sent, struct pollout_params *p);
void pollout_params_free(struct pollout_params *p);

/* Called for each stale outcome before it is dropped; nth counts them from
 * 1 within one pollout_done(). */
typedef void (*pollout_stale_fn)(void *ctx, const struct pollout_entry *e, size_t nth);

/* The group's statement changed the rows of the nchanged event_ids
 * changed (reordered here): drops the group's outcomes, counting those it
 * recorded and passing the others to stale (may be NULL). The other
 * group's outcomes stay, in order. Returns the number of stale ones. */
size_t pollout_done(struct pollout *o, bool sent, const char **changed, size_t nchanged,
                    pollout_stale_fn stale, void *ctx);

/* Frees every queued outcome. */
void pollout_free(struct pollout *o);

#endif
