/*
 * monitor.h - a NORMAL (non-replication) libpq connection beside the
 * replication stream, for what the stream cannot tell:
 *
 *   - every [postgres] monitor_interval_ms, the slot's lag as the server
 *     sees it (pg_current_wal_lsn() - confirmed_flush_lsn) and its
 *     wal_status, from pg_replication_slots; on a standby, also the status
 *     of its WAL receiver (standby.h: one that receives nothing decodes
 *     nothing);
 *   - every [postgres] heartbeat_interval_ms (when not 0), a heartbeat:
 *     pg_logical_emit_message(false, 'outboxd.heartbeat', 'slot=S sent_us=T')
 *     (heartbeat.h). The WAL record it writes is in this database, so the
 *     slot's walsender decodes past it and outboxd can confirm past it even
 *     when this database is idle while others in the cluster write (their
 *     WAL is decoded but yields nothing to confirm). Non-transactional:
 *     written at once, no transaction id used. The message comes back on
 *     the stream (pgoutput with messages 'true', wal2json always), which
 *     gives its round trip;
 *   - with pgoutput (publication set), every min(monitor_interval_ms,
 *     MONITOR_PUB_MS), the proof that the outbox table is still published:
 *     pg_current_wal_lsn() in one statement, then, in a later statement
 *     (a fresh snapshot, whatever the isolation level), whether the
 *     publication exists, publishes inserts and lists the table
 *     (pg_publication_tables also lists the tables of FOR ALL TABLES and
 *     FOR TABLES IN SCHEMA). A membership change committed before that
 *     LSN is visible to the second statement, so membership is proven for
 *     every transaction committed before the LSN - barring a commit whose
 *     WAL record is written but which is not yet visible (it waits for a
 *     synchronous standby): such an ALTER PUBLICATION is seen by the next
 *     check instead, and the confirmed position may already be past it.
 *
 * Everything is non-blocking (PQconnectStart/PQconnectPoll, PQsendQuery,
 * PQconsumeInput) and driven by monitor_step() from the relay's event loop,
 * so a slow or unreachable server never stalls the stream. A failure closes
 * the connection; it is opened again at the next interval.
 */
#ifndef OUTBOXD_MONITOR_H
#define OUTBOXD_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"

/* The longest period of the publication check (see above). */
#define MONITOR_PUB_MS 1000

struct monitor_config {
    const char *conninfo; /* borrowed for the monitor's lifetime */
    const char *slot;
    int interval_ms;  /* slot query period (> 0) */
    int heartbeat_ms; /* 0: no heartbeat */
    const char *publication; /* NULL: no publication check (wal2json) */
    /* The outbox tables, for the check: text[] literals of their schemas
     * and names, in the same order (outbox_set_array()). */
    const char *schemas, *tables;
};

/* What one monitor_step() found out. */
struct monitor_report {
    bool slot_answer;    /* a slot query was answered (fields below) */
    bool slot_found;     /* ... and the slot exists */
    int64_t lag_bytes;   /* -1 when the slot has no confirmed position */
    char wal_status[16]; /* "" when NULL */
    bool failover;       /* a failover slot (false below PostgreSQL 17) */
    char receiver[16];   /* on a standby, its WAL receiver's status
                          * (pg_stat_wal_receiver: "streaming", "waiting", ...;
                          * "none": no receiver; "?": not visible to this
                          * role); "" on a primary (standby.h) */
    bool heartbeat_sent; /* a heartbeat was written */
    bool pub_answer;     /* a publication check was answered (fields below) */
    bool pub_found;      /* ... the publication exists */
    bool pub_insert;     /* ... it publishes inserts */
    bool pub_member;     /* ... every outbox table is in it */
    bool pub_leaves;     /* ... an outbox table is partitioned and the publication
                          * has publish_via_partition_root = false: its inserts
                          * come as its partitions', and it is not "in" it */
    lsn_t pub_lsn;       /* ... all of this holds for commits before this LSN */
    bool failed;         /* a connection or query failed (logged) */
    bool server_stopping; /* ... because the server is shutting down */
};

struct monitor;

/* NULL on out of memory. Nothing is connected until the first step. Free
 * with monitor_free(). */
struct monitor *monitor_new(const struct monitor_config *c);
void monitor_free(struct monitor *m);

/* Advances the connection and queries at monotonic now_ms (wall clock
 * now_unix_us for the heartbeat content); never blocks. */
void monitor_step(struct monitor *m, int64_t now_ms, int64_t now_unix_us,
                  struct monitor_report *out);

/* The socket to wait on and in which direction (for select()), -1 when
 * there is nothing to wait for. */
int monitor_wait_fd(const struct monitor *m, bool *want_write);

/* Asks for a publication check as soon as the connection is idle (a
 * graceful stop proves membership up to its last ACKed position). */
void monitor_check_publication_now(struct monitor *m);

/* Milliseconds until monitor_step() has something to do on a timer
 * (0 = now), at monotonic now_ms. */
int64_t monitor_due_in(const struct monitor *m, int64_t now_ms);

#endif
