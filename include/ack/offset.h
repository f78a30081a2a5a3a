/*
 * offset.h - the offset file: the last commit end LSN whose events were all
 * ACKed by the broker, and the stream it belongs to. Written atomically
 * (temp file, fsync, rename, fsync of the directory) before that LSN is
 * confirmed to Postgres, so a crash leaves either the old or the new value,
 * never a torn one.
 *
 * File format 2: key=value lines, '#' comments and blank lines ignored,
 * every key exactly once, no spaces around '=':
 *
 *   # outboxd offset file: ...
 *   format=2
 *   lsn=16/B374D848          last position whose events were all ACKed
 *   system=7312345678901234567   IDENTIFY_SYSTEM systemid of the server
 *   timeline=1               its timeline when the file was written
 *   database=outbox          the database streamed
 *   slot=outboxd             the replication slot
 *   plugin=pgoutput          the slot's output plugin
 *
 * Format 3 (written while a transaction is partly ACKed) adds two keys,
 * both or neither:
 *
 *   txn=16/B3750000          commit LSN (Begin final_lsn) of the oldest
 *                            transaction not yet all ACKed; above lsn
 *   txn_acked=30000          its first 30000 outbox events (in stream
 *                            order) are ACKed: a restart skips them
 *
 * Format 4 (written once the commit time of the transaction at lsn is
 * known: the stream's Begin/commit record carries it) adds, to either:
 *
 *   commit_time=2026-12-03 16:48:11.123456+00
 *                            commit time of the newest transaction whose
 *                            events are all ACKed, at or before lsn (UTC);
 *                            `outboxd repair` re-publishes the rows
 *                            committed from then on (repair.h)
 *
 * Format 5 (written while a position ahead of lsn is all ACKed: with
 * pgoutput lsn waits for the publication proof, monitor.h) adds, to any
 * of the above (commit_time optional there):
 *
 *   acked=16/B3760000        every transaction committed before it had all
 *                            its outbox events ACKed (after lsn): a
 *                            restart streams from here (the server skips
 *                            what commits before), while the slot is
 *                            confirmed only up to lsn; txn, if there, is
 *                            at or after it
 *
 * Format 6 (written while a transaction is partly ACKed) adds, to the
 * progress lines (commit_time and acked optional there):
 *
 *   txn_events=9f0c3a5d21e4b877
 *                            which events txn_acked counts: the
 *                            fingerprint (16 hex digits) of the outbox
 *                            tables and message prefixes configured when
 *                            it was written (outbox_set_fingerprint()). A
 *                            restart configured with others cannot tell
 *                            which of its events were ACKed, so it skips
 *                            none (resume_progress_usable(): copies,
 *                            never a loss). Formats 3 to 5 carry no
 *                            fingerprint: their count is taken as it is.
 *
 * lsn is what may be confirmed to the server (proven); acked is what is
 * safe to resume from (delivered). A crash re-sends only what was ACKed
 * after the last write of acked (written at most ACKED_WRITE_MS apart
 * while events are ACKed, confirm.h), not everything since the last proof.
 *
 * Without progress and commit time outboxd writes format 2, so an older
 * outboxd can still read the file after a downgrade; an older outboxd
 * refuses formats 4 and 5 as "written by a newer outboxd" (never misreads
 * them).
 * A value runs to the end of its line; backslash, CR and LF in it are
 * written as \\, \r and \n (a database name may hold anything).
 * Format 1 (earlier versions): one line, the bare LSN ("16/B374D848\n"); still
 * read (no identity known), and rewritten as format 2 at the next write.
 * A higher format number is refused: a newer outboxd wrote it.
 */
#ifndef OUTBOXD_OFFSET_H
#define OUTBOXD_OFFSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"

#define OFFSET_FORMAT 6 /* the newest format read and written */
#define OFFSET_NAME_MAX 64 /* NAMEDATALEN, with the NUL */
/* Largest file read: format 2 with the longest names fits well within. */
#define OFFSET_FILE_MAX 2048

/* What the offset file says. */
struct offset_state {
    int format;        /* 1 (bare LSN) to 6 (offset_format_of()) */
    lsn_t lsn;
    bool has_identity; /* format 2: the fields below are set */
    char system[24];   /* decimal system identifier */
    uint32_t timeline;
    char database[OFFSET_NAME_MAX];
    char slot[OFFSET_NAME_MAX];
    char plugin[OFFSET_NAME_MAX];
    bool has_progress; /* format 3: a transaction is partly ACKed */
    lsn_t txn_lsn;     /* its commit LSN (> lsn) */
    uint64_t txn_acked; /* its first txn_acked events are ACKed (>= 1) */
    uint64_t txn_events; /* format 6: what txn_acked counts (outbox_set_fingerprint());
                          * 0: not recorded. Written with progress only. */
    int64_t commit_time_us; /* format 4: the commit time (Unix epoch, us) of the
                             * newest all-ACKed transaction at or before lsn;
                             * 0: unknown */
    bool has_acked;    /* format 5: */
    lsn_t acked_lsn;   /* every transaction committed before it is ACKed (> lsn) */
};

/* ---- pure (tests/unit/test_offset.c) ---- */

/* Parses the file's text (len bytes, need not be NUL-terminated) into out.
 * Returns 0, or -1 with the problem in err (without the file's name). */
int offset_parse(const char *text, size_t len, struct offset_state *out, char *err,
                 size_t errlen);

/* Every transaction committed before this position is ACKed: st's acked
 * when it has one, else its lsn. */
lsn_t offset_all_acked(const struct offset_state *st);

/* Formats st (its identity must be set) as offset_format_of() says, into buf. Returns the
 * length, or 0 when buf is too small or a name is too long. */
size_t offset_format(const struct offset_state *st, char *buf, size_t buflen);

/* The format st is written as: 6 with progress and its fingerprint, else
 * 5 with acked, else 4 with a commit time, else 3 with progress, else 2. */
int offset_format_of(const struct offset_state *st);

/* A commit time as the file writes it ("2026-12-03 16:48:11.123456+00",
 * UTC; PostgreSQL reads it as a timestamptz). Returns out. */
char *offset_commit_time_text(int64_t unix_us, char *out, size_t outlen);

/* One line describing st for messages: "0/1A2B3C on system 7312.../database
 * outbox/slot outboxd" or "0/1A2B3C (format 1: no identity recorded)".
 * Returns out. */
char *offset_describe(const struct offset_state *st, char *out, size_t outlen);

/* ---- the file ---- */

/* Returns 1 and fills *out when the file exists and parses, 0 when it does
 * not exist, -1 with a reason in err (naming the file and the way out) when
 * it cannot be read, is corrupt or of an unknown format. */
int offset_read(const char *path, struct offset_state *out, char *err, size_t errlen);

/* Writes st (offset_format()) atomically. Returns 0, or -1 with a reason in err. */
int offset_write(const char *path, const struct offset_state *st, char *err, size_t errlen);

/* Proves that the directory of path takes real bytes: writes, fsyncs and
 * removes a small temporary file next to path (a full or read-only file
 * system fails here, where access() would not). Returns 0, or -1 with
 * the reason in err. */
int offset_probe_dir(const char *path, char *err, size_t errlen);

#endif
