/*
 * metrics.h - outboxd's metrics as plain data, and their rendering in the
 * Prometheus text exposition format (version 0.0.4). Pure: no clock, no
 * I/O, no threads. The relay's event loop owns one struct metrics, counts
 * into it as things happen, fills the gauges just before rendering, and
 * hands the rendered text to the HTTP server (httpd.h).
 *
 * Every name has the outboxd_ prefix and its unit in the name; counters
 * end in _total. The list with the meaning of each is in the README
 * ("Observability") and in the HELP lines of metrics.c.
 */
#ifndef OUTBOXD_METRICS_H
#define OUTBOXD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry.h"

#include "latency.h"
#include "pollbacklog.h"

/* Series per labelled family: the first METRICS_MAX_LABELS - 1 label
 * values get their own, later ones are counted under "_other" (topic names
 * come from data; the number of series must stay bounded). */
#define METRICS_MAX_LABELS 200

struct labeled_value {
    char *label; /* owned */
    uint64_t value;
};

/* A counter family with one label: (label value, count) pairs. */
struct labeled_counter {
    size_t n, cap;
    struct labeled_value *items;
    size_t last; /* index of the last label added to (a cache) */
};

/* The slot's wal_status values (pg_replication_slots.wal_status). */
enum slot_wal_status {
    WAL_STATUS_UNKNOWN = 0,
    WAL_STATUS_RESERVED,
    WAL_STATUS_EXTENDED,
    WAL_STATUS_UNRESERVED,
    WAL_STATUS_LOST,
};

/* A logical relay's role on its slot (outboxd_role{role}): streaming from
 * it; standing by while another process holds it (README "Hot standby");
 * anything else (starting, reconnecting, backing off). */
enum metrics_role { ROLE_CONNECTING = 0, ROLE_ACTIVE, ROLE_STANDBY, ROLE__COUNT };

/* "connecting", "active", "standby". */
const char *metrics_role_name(enum metrics_role r);

/* Which relay the metrics describe: the logical one has positions, a slot,
 * heartbeats; the polling one has row outcomes. */
enum metrics_mode { METRICS_LOGICAL = 0, METRICS_POLLING = 1 };

/* Row outcomes of polling mode (outboxd_polling_rows_total{outcome}). */
enum polling_outcome {
    PO_CLAIMED,
    PO_SENT,
    PO_RETRIED,
    PO_QUARANTINED,
    PO_RELEASED,
    PO_STALE,
    PO__COUNT,
};

/* The stages of an event's way through the logical relay (changes.h says
 * what each measures): the series of outboxd_stage_latency_seconds{stage}
 * and the "stage ..." lines logged at stop. */
enum metrics_stage {
    STAGE_COMMIT_TO_RECEIVE,  /* per event */
    STAGE_RECEIVE_TO_PRODUCE, /* per event */
    STAGE_PRODUCE_TO_ACK,     /* per event */
    STAGE_ACK_TO_CONFIRM,     /* per transaction */
    STAGE__COUNT,
};

/* "commit-to-receive", "receive-to-produce", "produce-to-ack",
 * "ack-to-confirm". */
const char *metrics_stage_name(enum metrics_stage s);

struct metrics {
    /* set once */
    enum metrics_mode mode;
    const char *version;   /* borrowed */
    const char *plugin;    /* borrowed */
    const char *slot;      /* borrowed */
    int64_t start_time_us; /* Unix epoch */

    /* the schema registry client's (registry.h); registry_on: there is one */
    bool registry_on;
    struct registry_stats registry;

    /* counters */
    struct labeled_counter produced;      /* by topic */
    struct labeled_counter acked;         /* by topic */
    struct labeled_counter failed;        /* by reason */
    struct labeled_counter dead_lettered; /* by reason */
    struct labeled_counter reconnects;    /* by cause */
    /* outbox messages (emitmsg.h) not published, by reason: non_transactional */
    struct labeled_counter messages_ignored;
    uint64_t produced_bytes;
    uint64_t heartbeats_sent;
    uint64_t heartbeats_seen; /* came back in the stream */
    uint64_t monitor_errors;
    uint64_t offset_writes; /* offset file written (each: write, fsync, rename) */
    uint64_t events_skipped; /* not produced again: ACKed before a restart */

    /* gauges, filled by the relay before each render */
    uint64_t inflight_events;
    uint64_t inflight_txns;
    int64_t kafka_queue;
    int kafka_brokers_up; /* -1 until the first librdkafka statistics */
    uint64_t kafka_unreachable; /* kafka_unreachable_total(): every report, unfolded */
    uint64_t received_lsn;
    uint64_t acked_lsn;
    uint64_t confirmed_lsn;
    bool streaming; /* logical: START_REPLICATION done; polling: connected */
    bool slot_lost; /* logical: halted on a lost slot (README "Gap repair") */
    const char *slot_lost_reason; /* ... why (borrowed): the server's invalidation
                                   * reason (slotcmd_lost_cause()), "dropped" */
    enum metrics_role role; /* logical */
    bool ready;
    uint64_t polling_rows[PO__COUNT]; /* polling mode */
    struct polling_backlog backlog;   /* polling mode: the periodic backlog query */
    /* from the periodic query on a normal connection */
    bool slot_seen; /* false until the first answer */
    int64_t slot_lag_bytes;
    enum slot_wal_status slot_wal_status;
    bool slot_failover; /* a failover slot (PostgreSQL 17+, README "Failover slots") */
    /* commit time (Unix epoch us) of the newest transaction whose events
     * were all ACKed; 0 before the first */
    int64_t acked_commit_time_us;

    /* histograms, borrowed from their owner; NULL: not rendered */
    const struct latency_hist *commit_to_ack; /* per ACKed event */
    const struct latency_hist *heartbeat_rtt; /* emit to seen on the stream */
    const struct latency_hist *stages[STAGE__COUNT]; /* enum metrics_stage */
};

/* The "le" bounds of outboxd_commit_to_ack_seconds, in microseconds
 * (+Inf follows). */
#define METRICS_LATENCY_BOUNDS 16
extern const int64_t metrics_latency_bounds_us[METRICS_LATENCY_BOUNDS];

/* An empty set; version/plugin/slot/start_time filled in by the caller.
 * Free with metrics_free(). */
void metrics_init(struct metrics *m);
void metrics_free(struct metrics *m);

/* Adds n to the counter of label in c. Returns 0, -1 on out of memory
 * (the count is lost, nothing else happens). */
int metrics_count(struct labeled_counter *c, const char *label, uint64_t n);

/* Adds label at 0 unless c has it: a counter's known label sets are
 * exported from the start, so that the first event is a step from 0 that
 * increase() sees (a series that appears at 1 shows no increase). Returns
 * 0, -1 on out of memory. */
int metrics_seed(struct labeled_counter *c, const char *label);

/* Value of label in c (0 when absent). */
uint64_t metrics_get(const struct labeled_counter *c, const char *label);

/* Parses pg_replication_slots.wal_status text; WAL_STATUS_UNKNOWN when
 * unknown or NULL. */
enum slot_wal_status metrics_wal_status_parse(const char *s);

/* A growing text buffer. */
struct textbuf {
    char *data; /* NUL-terminated, owned; free() it */
    size_t len, cap;
    bool oom;
};

/* Appends the exposition text of m to out at Unix time now_us (for the
 * replication lag). Returns 0, -1 on out of memory. */
int metrics_render(const struct metrics *m, int64_t now_us, struct textbuf *out);

#endif
