/*
 * slotcmd.h - the replication commands that create and alter a logical
 * slot, worded for the server's version, and the [postgres] failover
 * decision (pure: no I/O; tests/unit/test_slotcmd.c). stream.c sends what
 * these build; every path that creates a slot (the daemon's, gap repair's
 * with an exported snapshot) builds its command here, so the version rules
 * live in one place:
 *   - PostgreSQL 15+ takes options in parentheses: (SNAPSHOT 'nothing'),
 *     (SNAPSHOT 'export'), and from 17 on FAILOVER true;
 *   - 14 and older only know the bare keywords NOEXPORT_SNAPSHOT and
 *     EXPORT_SNAPSHOT (15+ still accept them), and have no failover;
 *   - ALTER_REPLICATION_SLOT slot (FAILOVER b) exists from 17 on.
 */
#ifndef OUTBOXD_SLOTCMD_H
#define OUTBOXD_SLOTCMD_H

#include <stdbool.h>
#include <stddef.h>

#include "settings.h" /* enum failover_mode */

/* The first server major that has failover slots (CREATE_REPLICATION_SLOT
 * ... (FAILOVER), ALTER_REPLICATION_SLOT, pg_replication_slots.failover,
 * slot synchronisation to standbys). */
#define SLOTCMD_FAILOVER_MAJOR 17

/* How a slot is created (stream_create_slot()). */
struct slot_create_opts {
    bool export_snapshot; /* SNAPSHOT 'export': the snapshot of the consistent
                           * point stays usable (SET TRANSACTION SNAPSHOT) until
                           * the next command on this connection (repair.c) */
    bool failover;        /* FAILOVER true (PostgreSQL 17+): synced to standbys */
};

/* The CREATE_REPLICATION_SLOT command for a server of server_major (15 for
 * 15.x) into out. slot and plugin are already quoted identifiers
 * (PQescapeIdentifier); o NULL: no snapshot, no failover. Returns 0, or -1
 * with err when the server cannot do what o asks (failover below 17) or
 * out is too small. */
int slotcmd_create(const char *slot, const char *plugin, const struct slot_create_opts *o,
                   int server_major, char *out, size_t outlen, char *err, size_t errlen);

/* ALTER_REPLICATION_SLOT slot (FAILOVER true|false) into out (slot quoted
 * as above). Returns 0, or -1 with err below 17. */
int slotcmd_alter_failover(const char *slot, bool failover, int server_major, char *out,
                           size_t outlen, char *err, size_t errlen);

/* Whether the slot should be a failover slot on a server of server_major:
 * 1 yes, 0 no, -1 when mode is on and the server is below 17 (err says so,
 * naming the version and the way out). */
int slotcmd_failover_wanted(enum failover_mode mode, int server_major, char *err,
                            size_t errlen);

/* Whether CREATE_REPLICATION_SLOT asks for FAILOVER on this server: want
 * (slotcmd_failover_wanted(): 1 yes), never on a standby (in recovery).
 * A slot made on a standby is its own; the server refuses the flag there
 * ("cannot enable failover for a replication slot created on the
 * standby"). The daemon's start and repair (its own and `outboxd repair`)
 * both create through this. */
bool slotcmd_failover_at_create(int want, bool standby);

/* What to do with an existing slot whose failover flag is has, when want
 * (slotcmd_failover_wanted()) says whether it should be one. A flag that
 * is on while failover = off is left alone: off means outboxd does not ask
 * for failover, not that it undoes what an operator set (the log says so). */
enum slotcmd_failover_action {
    SLOT_FAILOVER_KEEP,   /* already as wanted, or the server has no flag */
    SLOT_FAILOVER_ENABLE, /* ALTER_REPLICATION_SLOT ... (FAILOVER true) */
    SLOT_FAILOVER_LEFT_ON, /* has it though not wanted: kept, said */
};
enum slotcmd_failover_action slotcmd_failover_action(bool want, bool has, int server_major);

/* Why the server invalidated a slot (wal_status = lost), from
 * pg_replication_slots.invalidation_reason (17+; "" before 17): a cause to
 * put after "invalidated: " in a message, and what to change so that it
 * does not happen again (or NULL when nothing on the server does). Every
 * invalidated slot needs gap repair either way. The reasons: wal_removed
 * (max_slot_wal_keep_size), idle_timeout (18's idle_replication_slot_timeout),
 * rows_removed (a standby's slot: rows it needed were vacuumed on the
 * primary), wal_level_insufficient (the primary's wal_level lowered). */
struct slotcmd_lost {
    const char *label;  /* the reason as the server names it; "unknown" before 17 */
    const char *cause;
    const char *prevent;
};
struct slotcmd_lost slotcmd_lost_cause(const char *invalidation_reason);

#endif
