/*
 * resume.h - where a restart may resume: the offset file checked against
 * the server (IDENTIFY_SYSTEM), the configuration and the slot, and the
 * flush position outboxd may send. Pure: no I/O (tests/unit/test_resume.c).
 * The daemon (relay.c), `outboxd check` and `outboxd accept-slot` all
 * decide and explain with these functions, so they say the same thing.
 *
 * The invariant behind it: outboxd writes the offset file before it
 * confirms a position, and never confirms past the file. So, for the same
 * stream, the slot's confirmed position is never ahead of the file (the
 * file may be ahead: a crash between the write and the confirm), and
 * neither is ever beyond the server's WAL.
 */
#ifndef OUTBOXD_RESUME_H
#define OUTBOXD_RESUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"
#include "offset.h"
#include "tracker.h"

/* The server's side: IDENTIFY_SYSTEM, the configuration and the slot. */
struct resume_server {
    char system[24];   /* systemid */
    uint32_t timeline; /* current timeline */
    lsn_t wal_end;     /* xlogpos: the server's current WAL position */
    char database[OFFSET_NAME_MAX];
    const char *slot;   /* [postgres] slot */
    const char *plugin; /* [postgres] plugin */
    bool slot_exists;
    lsn_t slot_confirmed; /* confirmed_flush_lsn (when it exists) */
    /* [postgres] hot_standby: other outboxd instances share the slot, each
     * with an offset file of its own. They too confirm only what Kafka
     * ACKed, so a slot confirmed ahead of this instance's file was moved
     * by them, not past unsent events: the start takes it over. */
    bool shared;
    /* The offset file is of an older timeline than the server's (a promoted
     * standby): where that timeline ended in this server's history
     * (TIMELINE_HISTORY, resume_timeline_end()); 0 when unknown or the
     * timelines are the same. */
    lsn_t file_timeline_end;
};

/* Fills srv from what IDENTIFY_SYSTEM said (system, timeline, WAL position,
 * database) and the configuration (slot, plugin; borrowed). The slot's
 * state (slot_exists, slot_confirmed) starts unknown: false and 0. */
void resume_server_init(struct resume_server *srv, const char *system, uint32_t timeline,
                        lsn_t wal_end, const char *database, const char *slot,
                        const char *plugin);

enum resume_verdict {
    RESUME_FROM_FILE,   /* the file is this stream's: start at its LSN */
    RESUME_FROM_SLOT,   /* no file: start at the slot's position */
    RESUME_TAKE_OVER,   /* shared slot, confirmed ahead of the file by another
                         * instance: start at the slot's position */
    RESUME_NO_SLOT,     /* no file and no slot: create it (if allowed) */
    RESUME_OTHER_STREAM, /* refuse: the file is of another system/db/slot/plugin */
    RESUME_BEYOND_WAL,  /* refuse: the file is ahead of the server's WAL */
    RESUME_SLOT_AHEAD,  /* refuse: someone else moved the slot past the file
                         * (and the slot is not shared) */
    RESUME_SLOT_LOST,   /* refuse: the file says we streamed a slot that is gone */
    RESUME_OLD_TIMELINE, /* refuse: the server is on an older timeline than the
                          * file: an old primary that came back after a failover */
};

struct resume_decision {
    enum resume_verdict verdict;
    lsn_t start;       /* RESUME_FROM_FILE/SLOT, RESUME_TAKE_OVER: where to start */
    bool refused;      /* one of the refusing verdicts: exit 2 */
    char message[1536]; /* refused: the problem, both sides and the way out */
    char note[1024];   /* accepted: worth an info line ("" if none): a format
                        * 1 file to be rewritten, a new timeline, a take-over */
    bool note_is_warning; /* the new timeline: worth a warning */
    bool forked;       /* the file's position is past where its timeline ended
                        * on this server: start is that end, not the file's
                        * position (what lay between is not on this server) */
};

/* Decides for file (NULL when there is none). config_path names the
 * configuration in the suggested commands. */
void resume_decide(const struct offset_state *file, const struct resume_server *srv,
                   const char *offsets_path, const char *config_path,
                   struct resume_decision *out);

/* From the content of a timeline history file (TIMELINE_HISTORY: lines
 * "parent_tli<TAB>switchpoint<TAB>reason"): where timeline tli ended in
 * that history. Returns true with *end, false when tli is not one of its
 * ancestors (or the text is not a history). */
bool resume_timeline_end(const char *history, uint32_t tli, lsn_t *end);

/* The state to write for lsn on srv's stream. */
void resume_identity(const struct resume_server *srv, lsn_t lsn, struct offset_state *out);

/* What a stream takes from the resume decision and the offset file (or,
 * in exactly_once, the stored position), decided by resume_plan() for the
 * daemon (slotsetup.c) and the simulator (tests/sim) alike. */
struct resume_plan {
    lsn_t start;             /* the decision's start (the slot's confirmed
                              * position, or where a fork or creation put it) */
    bool have_offset;        /* a file was read: stored_lsn is its */
    lsn_t stored_lsn;        /* what the file holds (past a fork: the fork) */
    lsn_t stored_acked;      /* the file's acked, when it is this stream's and
                              * ahead of start; else 0 */
    bool rewrite_offset;     /* write the file at the first status (absent,
                              * format 1, another timeline, a take-over) */
    int64_t commit_time_us;  /* the file's commit time, kept (0: none) */
    bool resume_inside;      /* skip the first progress.acked events of the
                              * transaction committed at progress.txn_lsn */
    struct tracker_progress progress;
    bool progress_refused;   /* the file had progress, but counted other events
                              * (resume_progress_usable()): nothing is skipped */
};

/* The plan for a stream of a server on timeline, from the file (NULL:
 * none) and the decision d, accepted. streamed: a stream ran before in
 * this process (the tracker exists: its progress, not the file's, counts).
 * events_now: outbox_set_fingerprint() of the configuration now. */
void resume_plan(const struct offset_state *file, const struct resume_decision *d,
                 uint32_t timeline, bool streamed, uint64_t events_now,
                 struct resume_plan *out);

/* Where the stream starts: the plan's start, or what is all ACKed when
 * that is ahead (the server skips every transaction committed before the
 * position asked for, which these are): acked_lsn, what this process
 * ACKed when streamed, or the file's acked. */
lsn_t resume_stream_from(const struct resume_plan *p, bool streamed, lsn_t acked_lsn);

/* Whether the stored progress inside a transaction (stored->has_progress:
 * its first txn_acked events were ACKed) may be skipped by, when the relay
 * now numbers the events whose fingerprint is events_now
 * (outbox_set_fingerprint()): stored with the same fingerprint, or with
 * none (formats 3 to 5, written before it was kept: taken as they are).
 * When not, the count numbers other events (a section added or removed, a
 * message prefix renamed, while stopped inside the transaction) and
 * nothing of that transaction may be skipped: its events are produced
 * again, up to txn_acked copies, and none is lost. */
bool resume_progress_usable(const struct offset_state *stored, uint64_t events_now);

/* The flush position to send to the server: what is in the offset file
 * (stored), but never beyond what the server has sent (received wal_end,
 * or the validated start position before anything arrived). */
lsn_t resume_clamp_flush(lsn_t stored, lsn_t received, lsn_t start);

/* Whether a flush position that moved past the file (flush > stored) is
 * written now: at once when events were ACKed since the last write
 * (event_driven), or when forced (stop, reconnect); a keepalive-only
 * advance at most once per interval_ms since the last write. */
bool resume_write_due(lsn_t flush, lsn_t stored, bool event_driven, bool force,
                      int64_t now_ms, int64_t last_write_ms, int64_t interval_ms);

/* Human size of a byte difference: "1 kB", "312 bytes", "3 MB". */
char *resume_bytes(uint64_t n, char *out, size_t outlen);

#endif
