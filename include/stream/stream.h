/*
 * stream.h - the replication connection: a libpq connection in
 * replication=database mode, the slot, START_REPLICATION and the CopyBoth
 * stream (frames in, standby status updates out).
 */
#ifndef OUTBOXD_STREAM_H
#define OUTBOXD_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"
#include "slotcmd.h" /* struct slot_create_opts */

struct stream;

/* Connects with conninfo (string or URI) plus replication=database.
 * NULL with the server's message in err. Close with stream_close(). */
struct stream *stream_connect(const char *conninfo, char *err, size_t errlen);
void stream_close(struct stream *s);

struct slot_info {
    bool exists;
    char plugin[64];
    char database[64];
    lsn_t confirmed_flush;
    bool active;
    int active_pid;
    char wal_status[16]; /* reserved, extended, unreserved, lost; "" if unknown */
    bool has_failover_flag; /* the server has pg_replication_slots.failover (17+) */
    bool failover;          /* the slot is synchronised to standbys */
    bool synced;            /* a standby's copy made by slot synchronisation
                             * (stays true after that standby's promotion) */
    char invalidation_reason[32]; /* 17+: why it is invalidated ("" if not, or
                                   * before 17; slotcmd_lost_cause()) */
    char inactive_since[40];      /* 17+: since when nothing reads it ("" if
                                   * read now, or unknown) */
};

/* Reads pg_replication_slots for slot. Returns 0 or -1 with err. */
int stream_slot_info(struct stream *s, const char *slot, struct slot_info *out,
                     char *err, size_t errlen);

/* IDENTIFY_SYSTEM: which server and database the connection reached. */
struct server_ident {
    char system[24];   /* systemid, decimal */
    uint32_t timeline; /* current timeline */
    lsn_t xlogpos;     /* current WAL flush position */
    char dbname[64];
};

/* Runs IDENTIFY_SYSTEM. Returns 0 or -1 with err. */
int stream_identify(struct stream *s, struct server_ident *out, char *err, size_t errlen);

/* The same on a plain libpq replication connection (a PGconn, as `outboxd
 * check` has one). */
struct pg_conn;
int stream_identify_conn(struct pg_conn *conn, struct server_ident *out, char *err,
                         size_t errlen);

/* How a slot is created. */
/* What CREATE_REPLICATION_SLOT answered. */
struct slot_created {
    lsn_t consistent_point; /* streaming from here misses no commit after the
                             * snapshot */
    char snapshot[64];      /* the exported snapshot's name ("" if none) */
};

/* TIMELINE_HISTORY tli: the content of the server's history file of
 * timeline tli (which timelines led to it and where each ended), as text.
 * Returns it (the caller frees it), or NULL with err (timeline 1 has no
 * history file). */
char *stream_timeline_history(struct stream *s, uint32_t tli, char *err, size_t errlen);
char *stream_timeline_history_conn(struct pg_conn *conn, uint32_t tli, char *err,
                                   size_t errlen);

/* CREATE_REPLICATION_SLOT slot LOGICAL plugin (options o; NULL: no snapshot,
 * no failover). out (may be NULL) gets the answer. Returns 0 or -1 with err. */
int stream_create_slot(struct stream *s, const char *slot, const char *plugin,
                       const struct slot_create_opts *o, struct slot_created *out, char *err,
                       size_t errlen);

/* ALTER_REPLICATION_SLOT slot (FAILOVER failover), PostgreSQL 17+ (below:
 * -1 with err naming the version). Returns 0 or -1 with err. */
int stream_alter_slot_failover(struct stream *s, const char *slot, bool failover,
                               char *err, size_t errlen);

/* DROP_REPLICATION_SLOT slot (it must not be active). Returns 0 or -1 with err. */
int stream_drop_slot(struct stream *s, const char *slot, char *err, size_t errlen);

/* Whether schema.table is a partitioned table (relkind 'p'): 1 yes, 0 no
 * (or no such table), -1 with err. */
int stream_table_partitioned(struct stream *s, const char *schema, const char *table,
                             char *err, size_t errlen);

/* Returns 1 if publication exists in the connected database, 0 if not,
 * -1 on error. */
int stream_publication_exists(struct stream *s, const char *publication, char *err,
                              size_t errlen);

/* Whether schema.table has a bytea column: 1 yes, 0 no (or no such
 * table), -1 with err. */
int stream_table_has_bytea(struct stream *s, const char *schema, const char *table,
                           char *err, size_t errlen);

/* What to stream: the slot and the plugin's options, as the slot's set-up
 * built them (slotsetup.c: the stream knows neither the plugin's options
 * nor the outbox). */
struct stream_target {
    const char *slot;
    const char *options;     /* START_REPLICATION's option list, quoted */
    const char *publication; /* pgoutput: the publication streamed (its
                              * notice, pubnotice.h); NULL otherwise */
    bool direct_read; /* read the socket itself unless encrypted (stream.c) */
};

/* SET bytea_output = hex, then START_REPLICATION SLOT slot LOGICAL start
 * (options). After this the connection is in CopyBoth mode and non-blocking.
 * Returns 0 or -1 with err. */
int stream_start(struct stream *s, const struct stream_target *t, lsn_t start, char *err,
                 size_t errlen);

/* Whether the server lets a walsender load plugin: servers that have an
 * output_plugin_libraries setting must list it. Returns 1 allowed (or no
 * such setting), 0 not allowed (err names the fix), -1 on error. */
int stream_plugin_allowed(struct stream *s, const char *plugin, char *err, size_t errlen);

/* SHOW name (a setting outboxd names, not user input) into out. Returns 0
 * or -1 with err (the SQLSTATE in stream_sqlstate(): 42704, no such
 * setting). */
/* Whether the server has a standby to fail over to: a physical slot, or a
 * walsender streaming to one (pg_stat_replication). 0, or -1 with err. */
int stream_has_standby(struct stream *s, bool *has, char *err, size_t errlen);

int stream_show(struct stream *s, const char *name, char *out, size_t outlen, char *err,
                size_t errlen);

/* Whether the server is a standby (in recovery; logical decoding there from
 * PostgreSQL 16 on). Returns 0, or -1 with err. */
int stream_in_recovery(struct stream *s, bool *standby, char *err, size_t errlen);

/* The walsender's wal_sender_timeout in ms (0: off; -1: not found), read
 * on this connection before START_REPLICATION. Returns 0 or -1 with err. */
int stream_sender_timeout(struct stream *s, int64_t *ms, char *err, size_t errlen);

/* SQLSTATE of the last failed statement ("" if none), e.g. "55006" when
 * the slot is active for another process. */
const char *stream_sqlstate(const struct stream *s);

/* True when the connection itself failed (the server went away), as
 * opposed to a statement the server refused. */
bool stream_broken(const struct stream *s);


/* True when the stream is read from the socket directly (see stream.c),
 * false when through libpq. */
bool stream_direct(const struct stream *s);
/* True when a complete message is already buffered (direct reader), so
 * waiting for the socket to become readable would wait for the next one:
 * a burst of small frames can fill the buffer with more than one turn of
 * the loop reads. */
bool stream_pending(const struct stream *s);
/* "host:port" of the server the connection reached (of a multi-host
 * conninfo, the one libpq chose; a Unix socket's directory as host).
 * Returns out. */
char *stream_server_label(const struct stream *s, char *out, size_t outlen);
/* Socket to wait on for readability. */
int stream_fd(const struct stream *s);
/* The server's major version (15 for 15.x), 0 when not connected. */
int stream_server_major(const struct stream *s);

/*
 * Returns the next CopyData payload without blocking: 1 with *buf and *len set
 * (the stream owns *buf; it stays valid until the next stream_read() or
 * stream_close()), 0 when nothing complete has arrived, -1 when the stream
 * ended or failed (err says why).
 */
int stream_read(struct stream *s, char **buf, int *len, char *err, size_t errlen);

/* Sends a standby status update and flushes it. Returns 0 or -1 with err. */
int stream_send_status(struct stream *s, lsn_t written, lsn_t flushed, bool reply,
                       char *err, size_t errlen);

/* Ends the copy stream cleanly (CopyDone) and drains the server's reply. */
void stream_finish(struct stream *s);

#endif
