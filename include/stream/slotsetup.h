/*
 * slotsetup.h - opening the replication stream: the offset file, the
 * connection, the publication and plugin checks, the slot (created when
 * allowed), where to resume (resume.h), START_REPLICATION. Beside
 * stream.c, which it drives; the relay calls it for every (re)connect.
 */
#ifndef OUTBOXD_SLOTSETUP_H
#define OUTBOXD_SLOTSETUP_H

#include <stdbool.h>

#include "config.h"
#include "lsn.h"
#include "offset.h"
#include "resume.h"
#include "outbox.h"
#include "outboxset.h"
#include "step.h"
#include "stream.h"
#include "tracker.h"

struct slot_setup {
    /* In: */
    const struct config *cfg;
    const struct outbox_set *outboxes;
    bool pub_capped;            /* pgoutput: publication membership is proven */
    bool pub_missing_on_stream; /* the last stream failed on a missing publication */
    bool streamed;              /* a stream ran before (the tracker exists) */
    lsn_t acked_lsn;            /* ... and everything up to here is ACKed */
    lsn_t confirmed_lsn;        /* the last position confirmed or stored */
    /* exactly_once: where the stored position comes from instead of the
     * offset file (relaytxn_position()), called once IDENTIFY_SYSTEM has
     * named the system and the slot was found free. Sets *out and *have
     * (0: nothing stored); returns a step code after logging. NULL: the
     * offset file. */
    enum step (*position)(void *ctx, const char *system, struct offset_state *out,
                          int *have);
    void *position_ctx;
    /* Out (filled by slot_open_stream()): */
    struct stream *st;       /* owned by the caller, even on failure */
    const char *retry_cause; /* STEP_BROKEN: the reconnects label */
    char lost_reason[32];    /* slot_lost: slotcmd_lost_cause()'s label, or
                              * "dropped" when the slot is gone */
    char retry_err[512];     /* STEP_BROKEN: the server not reached, why; the
                              * relay logs it, folded (outage.h); "" when
                              * logged already */
    bool slot_lost;          /* STEP_USAGE: the slot is invalidated, or gone
                              * although the offset file says it was
                              * streamed (outboxd repair, repair.h) */
    int holder_pid;          /* retry_cause "slot_in_use": the process holding
                              * the slot (its walsender's pid; 0: not known) */
    int64_t sender_timeout_ms; /* the walsender's wal_sender_timeout (0: off,
                                * -1: not known), read before streaming */
    bool prepared;           /* the fields below are set (the slot and the
                              * offset file were read), even if starting
                              * the stream failed afterwards */
    struct offset_state identity; /* the stream the offset file is written for */
    struct resume_plan plan; /* where the slot is confirmed to (plan.start),
                              * what the file holds, the progress to skip */
};

/* Connects, checks publication and slot, creates the slot if allowed, and
 * starts streaming (from what is all ACKed, if it is ahead: the offset
 * file's acked, or acked_lsn after a reconnect).
 * Returns STEP_OK, STEP_BROKEN (try again after the backoff: server
 * unreachable, slot in use), STEP_FATAL or STEP_USAGE, after logging. */
enum step slot_open_stream(struct slot_setup *s);

/* The decision slot_open_stream() takes once the server was read, without
 * I/O (the simulator, tests/sim, runs it against its model server):
 * slot_decide() decides from the stored position (*file when *have; with
 * none while streaming and no slot, what was streamed, written into *file)
 * and the server's facts srv; it logs and returns STEP_USAGE (refused;
 * s->slot_lost says whether the slot is lost) or STEP_FATAL (the timeline
 * forked past this process's ACKs), else STEP_OK with d set. Then, the slot
 * created if d says none exists (d->start: its position), slot_take() fills
 * s->identity, s->plan and s->prepared; slot_stream_from() is where
 * START_REPLICATION starts (logged when past s->plan.start). */
enum step slot_decide(struct slot_setup *s, struct offset_state *file, int *have,
                      const struct resume_server *srv, struct resume_decision *d);
void slot_take(struct slot_setup *s, const struct offset_state *file,
               const struct resume_server *srv, const struct resume_decision *d,
               uint32_t timeline);
lsn_t slot_stream_from(const struct slot_setup *s);

/* Whether a stream error is pgoutput's "publication "P" does not exist"
 * (SQLSTATE 42704, raised by the walsender while decoding). */
bool slot_says_publication_missing(const char *err, const char *publication);

#endif
