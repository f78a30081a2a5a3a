/*
 * relay_int.h - the logical relay's state (private): struct relay and its
 * parts, shared by the files of the relay and by nothing else: relay.c
 * (the loop, the wiring), relaystate.c (what each state of the loop does
 * in one turn: relaystate.h), relayconfirm.c (the status and the offset
 * file), relayobs.c (metrics and the monitor's findings) and relaytxn.c
 * (exactly_once). The calls go one way: relay.c calls relay_step() and
 * the three others; relaystate.c calls relayconfirm.c, relayobs.c and
 * relaytxn.c; relayconfirm.c and relayobs.c call relaytxn.c; relaytxn.c
 * calls none of them.
 */
#ifndef OUTBOXD_RELAY_INT_H
#define OUTBOXD_RELAY_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "backoff.h"
#include "changes.h"
#include "serde.h"
#include "config.h"
#include "confirm.h"
#include "decoder.h"
#include "httpd.h"
#include "ktxn.h"
#include "lsn.h"
#include "metrics.h"
#include "monitor.h"
#include "offset.h"
#include "outage.h"
#include "outbox.h"
#include "producer.h"
#include "step.h"
#include "stream.h"
#include "tracker.h"

/* A replication stream is healthy once it has stayed up this long; until
 * then, after a failure, the relay is not ready and the reconnect backoff
 * keeps growing (a stream that starts and fails at once is a failure,
 * not a recovery). */
#define STREAM_HEALTHY_MS 5000

/* How long a graceful stop waits for a last publication check (pgoutput),
 * so that it can confirm what it ACKed. */
#define FINAL_PROOF_MS 3000

/* Frames handled before the loop serves reports and status again. */
#define READ_BATCH 4096

/* What the loop is doing; each state says what its turn waits for. */
enum relay_state {
    RS_CONNECT, /* open the stream (slotsetup.c) */
    RS_BACKOFF, /* a connection failed: wait until state_until_ms */
    RS_STREAM,  /* read, produce, confirm; while changes_held(), not reading:
                 * backpressure */
    RS_RECOVER, /* the stream broke: wait for the outstanding deliveries */
    RS_DRAIN,   /* stopping: wait for them, PRODUCER_SHUTDOWN_FLUSH_MS at most */
    RS_PROVE,   /* stopping, pgoutput: a last publication check (FINAL_PROOF_MS) */
    RS_HALTED,  /* the slot is lost ([postgres] on_slot_loss = halt): nothing
                 * streams; /readyz and /metrics say why until state_until_ms
                 * ([postgres] halt_linger) or a stop, then exit 2 */
    RS_DONE,    /* exit with exit_code */
};

/* A hot standby pair (standby.h, README "Hot standby"): changed by
 * relaystate.c only (standing by, taking the slot over, the fence, giving
 * the slot up); relayobs.c reads it for readiness and the role. */
struct relay_standby {
    bool held;                   /* the slot is held by another process */
    int holder_pid;              /* ... this one (its walsender; 0: unknown) */
    int64_t since_ms;            /* when this instance began standing by */
    int64_t log_ms;              /* when "still standing by" is logged next */
    int64_t fence_ms;            /* this stream's fence (0: none) */
    int64_t kafka_lost_since_ms; /* streaming and no broker reachable since
                                  * (0: some are; standby_kafka_lost()) */
    bool fenced;                 /* the stream broke at its fence */
};

/* [delivery] mode = exactly_once (relaytxn.h): changed by relaytxn.c only,
 * once relay_init() has set its pacing up (ktxn_init()). */
struct relay_txn {
    struct ktxn kt; /* the Kafka transactions' pacing and position */
    char id[256];   /* the producer's transactional.id */
    bool discard;   /* aborting: reports are dropped */
    bool broken;    /* a delivery failed: abort and start over */
    bool refused;   /* the broker refused an event: stop */
};

/* What the relay shows (relayobs.h): changed by relayobs.c. relay.c makes
 * and frees http and mon; the other files ask for a snapshot at once with
 * relay_publish_soon(), relaystate.c takes the server's shutdown with
 * relay_server_stopping() and asks mon for a last publication check
 * (enter_prove()). */
struct relay_obs {
    struct httpd *http;      /* NULL when [http] listen is empty */
    int64_t next_publish_ms; /* monotonic deadline of the next snapshot */
    struct textbuf text;     /* the rendering, reused */
    struct monitor *mon;     /* slot lag, heartbeats, publication check */
    uint64_t proofs;         /* publication checks answered */
    bool pub_lost;           /* the outbox is no longer published: stop */
    bool pub_missing_warned; /* the publication check said it is missing */
    bool server_stopping;    /* the monitor saw the server shut down */
    /* On a standby: since when its WAL receiver has not streamed (0: it
     * does, or not known), and when to warn next (0: not warned). */
    int64_t receiver_since_ms, receiver_warn_ms;
};

/* The relay. Each part says which file changes it; every file reads what
 * it needs, and gets the whole only where it needs several parts. */
struct relay {
    /* The wiring: made by relay.c's relay_init(), freed by relay_free();
     * relaystate.c opens and closes the stream and the decoder, creates
     * the tracker (relaytxn.c frees it to start over). */
    const struct config *cfg;
    volatile sig_atomic_t *stop;
    struct outbox_set outboxes; /* the outbox tables (config_outbox_set()) */
    char *tables;               /* "schema.table, ..." of them, for messages */
    char *pub_schemas, *pub_tables; /* their text[] literals (monitor.h) */
    struct decoder *dec;
    struct tracker *trk;
    struct producer *prod;
    struct stream *st;
    struct changes chg;         /* the data path: decode, map, produce, ACK */
    struct serde_set serdes;    /* registry converters of the maps (config_serde_set()) */
    uint64_t events_acked;      /* counted by relay.c's on_delivery() */
    struct metrics met;         /* counted by every file of the relay (and
                                 * changes.c), rendered by relayobs.c */

    /* The loop's state: changed by relaystate.c (relaytxn.c says why a
     * stream broke or failed to start: stream_err, retry_cause). */
    enum relay_state state;
    int64_t state_until_ms;  /* RS_BACKOFF/RS_DRAIN/RS_PROVE: its deadline */
    int64_t next_log_ms;     /* RS_RECOVER: next progress line, 0: none said yet */
    int64_t recover_since_ms; /* RS_RECOVER: when the stream broke */
    uint64_t proofs_before;  /* RS_PROVE: obs.proofs when it asked */
    int exit_code;           /* RS_DONE */
    bool streaming;                  /* START_REPLICATION done, not broken since */
    const char *retry_cause;         /* why slot_open_stream() said STEP_BROKEN */
    struct backoff backoff;          /* reconnects, across streams that keep failing */
    struct outage pg_outage;         /* their log lines, folded (outage.h) */
    int64_t stream_up_ms;            /* when the current stream started */
    bool slot_lost;                  /* stopped: the slot is invalidated or gone
                                      * (slotsetup.h); relay_run() says so */
    char slot_lost_reason[32];       /* slot_lost: why (slot_setup's lost_reason) */
    bool pub_missing_on_stream;      /* the stream said the publication is missing */
    char stream_err[512];            /* why the last stream broke */

    /* relay.c's wait (wait_turn()); relaystate.c counts wake_bytes. */
    int64_t last_wake_us;    /* when wait_turn() last returned while reading */
    size_t wake_bytes;       /* stream bytes read since then */

    /* The confirmation: every LSN kept, the offset file, the status;
     * changed through confirm.h, by relayconfirm.c (the status, the offset
     * file, confirm_from_plan()) and where the relay learns a position:
     * relaystate.c (received, stream started), relayobs.c (proven),
     * relaytxn.c (the commit time of what committed). */
    struct confirmer confirm;
    struct relay_standby standby;
    struct relay_txn txn;
    struct relay_obs obs;
};

/* relay.c: relay_init() makes everything the loop uses (nothing is
 * connected yet; on failure it returns the exit code after logging, and
 * relay_free() still frees what was made); relay_turn() is one turn of the
 * loop without its wait (relay_tick(), then relay_step(): whether to wait);
 * relay_free() frees it all. relay_run() is these with the waits between;
 * the simulator (tests/sim) runs the same with its models behind the I/O. */
int relay_init(struct relay *r, const struct config *c, volatile sig_atomic_t *stop);
bool relay_turn(struct relay *r);
void relay_free(struct relay *r);

#endif
