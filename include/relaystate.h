/*
 * relaystate.h - the logical relay's state, shared by the files of the
 * relay: relay.c (the loop, the wiring), relaystate.c (what each state of
 * the loop does in one turn), relayconfirm.c (the status and the offset
 * file), relayobs.c (metrics and the monitor's findings) and relaytxn.c
 * (exactly_once). relay.c calls relay_step() and the others' functions;
 * relaystate.c calls relayconfirm.c, relayobs.c and relaytxn.c; none of
 * them calls relay.c or relaystate.c. Nothing outside them includes it.
 */
#ifndef OUTBOXD_RELAYSTATE_H
#define OUTBOXD_RELAYSTATE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "backoff.h"
#include "changes.h"
#include "config.h"
#include "confirm.h"
#include "decoder.h"
#include "httpd.h"
#include "ktxn.h"
#include "lsn.h"
#include "metrics.h"
#include "monitor.h"
#include "offset.h"
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

struct relay {
    const struct config *cfg;
    volatile sig_atomic_t *stop;
    struct outbox_set outboxes; /* the outbox tables (config_outbox_set()) */
    char *tables;               /* "schema.table, ..." of them, for messages */
    char *pub_schemas, *pub_tables; /* their text[] literals (monitor.h) */
    struct decoder *dec;
    struct tracker *trk;
    struct producer *prod;
    struct stream *st;
    struct changes chg; /* the data path: decode, map, produce, ACK */

    enum relay_state state;
    int64_t state_until_ms;  /* RS_BACKOFF/RS_DRAIN/RS_PROVE: its deadline */
    int64_t next_log_ms;     /* RS_RECOVER: next progress line */
    uint64_t proofs_before;  /* RS_PROVE: r->proofs when it asked */
    int exit_code;           /* RS_DONE */
    struct confirmer confirm; /* every LSN kept, the offset file, the status */
    int64_t last_wake_us;    /* when wait_turn() last returned while reading */
    size_t wake_bytes;       /* stream bytes read since then */
    uint64_t events_acked;
    bool streaming;                  /* START_REPLICATION done, not broken since */
    struct httpd *http;              /* NULL when [http] listen is empty */
    int64_t next_publish_ms;         /* monotonic deadline of the next snapshot */
    struct metrics met;              /* counted here, rendered for /metrics */
    struct textbuf text;             /* the rendering, reused */
    const char *retry_cause;         /* why slot_open_stream() said STEP_BROKEN */
    struct monitor *mon;             /* slot lag, heartbeats, publication check */
    struct backoff backoff;          /* reconnects, across streams that keep failing */
    int64_t stream_up_ms;            /* when the current stream started */
    uint64_t proofs;                 /* publication checks answered */
    bool pub_lost;                   /* the outbox is no longer published: stop */
    bool slot_lost;                  /* stopped: the slot is invalidated or gone
                                      * (slotsetup.h); relay_run() says so */
    bool pub_missing_on_stream;      /* the stream said the publication is missing */
    bool pub_missing_warned;         /* ... and so did the publication check */
    bool server_stopping;            /* the monitor saw the server shut down */
    char stream_err[512];            /* why the last stream broke */
    /* A hot standby pair (standby.h, README "Hot standby") */
    bool standby;                    /* the slot is held by another process */
    int holder_pid;                  /* ... this one (its walsender; 0: unknown) */
    int64_t standby_since_ms;        /* when this instance began standing by */
    int64_t standby_log_ms;          /* when "still standing by" is logged next */
    int64_t fence_ms;                /* this stream's fence (0: none) */
    int64_t kafka_lost_since_ms;     /* streaming and no broker reachable since
                                      * (0: some are; standby_kafka_lost()) */
    bool fenced;                     /* the stream broke at its fence */
    /* [delivery] mode = exactly_once (relaytxn.h) */
    struct ktxn kt;                  /* the Kafka transactions' pacing and position */
    char txn_id[256];                /* the producer's transactional.id */
    bool txn_discard;                /* aborting: reports are dropped */
    bool txn_broken;                 /* a delivery failed: abort and start over */
    bool txn_refused;                /* the broker refused an event: stop */
};

/* relaystate.c: one turn of the current state. Returns whether the loop
 * should wait (evloop.h) before the next turn; false: go on at once. */
bool relay_step(struct relay *r);

#endif
