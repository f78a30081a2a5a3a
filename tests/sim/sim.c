/*
 * sim.c - the deterministic simulator of the logical relay (issue 54): one
 * seed drives a random schedule against the daemon's own relay, with
 * PostgreSQL, Kafka and the process's death replaced by models, and a model
 * of what was committed judges every run. A failing seed prints the one
 * command that replays it.
 *
 *   outboxd-sim [--seed S] [--seeds N] [--events E]
 *               [--mode exactly_once|at_least_once] [--plugin pgoutput|wal2json] [-v]
 *
 * runs seeds S .. S+N-1 (default 1, 1), each until about E events were
 * committed (default 3000), and exits 1 at the first failing seed; each
 * seed picks its plugin and delivery mode unless --plugin and --mode say;
 * -v prints the schedule and outboxd's log; SIM_TRACE=ID follows one
 * event.
 *
 * What runs for real: the relay as the daemon runs it, relay_init(), then
 * relay_turn() (relay_tick() and relay_step(): connect, stream, recover,
 * backoff, drain; the fence after a stall; backpressure; exactly_once's
 * Kafka transactions, relaytxn.c) and relay_free(), with everything below:
 * slot setup's decision (slot_decide(), slot_take(): the offset file or
 * the progress topic against the slot, resume_decide(), resume_plan()),
 * replproto.c's parser, both decoders, changes.c (skips, dead letters,
 * backpressure), the tracker, the confirmation with pgoutput's publication
 * proofs and the offset file's format. Only the I/O is the models': the
 * simulator is linked with --wrap for the producer, the progress topic,
 * the offset file's read and write, the stream's read, status and close,
 * the connection (slot_open_stream()), the monitor and rand()
 * (tests/CMakeLists.txt lists them; "the seams" below).
 *
 * The models:
 *  - PostgreSQL: transactions committed in LSN order, of rows into two
 *    outbox tables (sections a and b), transactional messages of a's
 *    prefix and of another prefix, and rows that cannot be decoded (a
 *    SQL_ASCII database's Latin-1 bytes), empty and aborted transactions;
 *    the slot's confirmed position (it only moves forward); a stream sends
 *    every transaction committed at or after max(the position asked for,
 *    the slot's), whole, in commit order, as XLogData frames (wal2json's
 *    lines filtered by add-tables, or pgoutput's messages for the
 *    publication's tables); keepalives whose position may be the commit of
 *    a transaction not yet sent (the race of b5052cd), some asking for a
 *    reply; connections refused for a while. With pgoutput the monitor's
 *    publication checks, which fail now and then, and table a leaving the
 *    publication in some seeds (its inserts are skipped from then on).
 *  - Kafka: a partition per key hash (and one for the dead-letter topic);
 *    the producer's queue has a random capacity (a full queue holds the
 *    stream); ACKs come in any order across partitions, in order within
 *    one; an event now and then is refused for good (too large: dead-
 *    lettered, or in exactly_once the process stops and its operator fixes
 *    the cause); outages serve no ACK and fail every transactional call for
 *    a while. exactly_once: one transactional client; init_transactions
 *    aborts what an older client left open; a commit during an outage fails
 *    but sometimes completed at the broker unseen (then librdkafka refuses
 *    the abort); aborted and discarded transactions' messages may be in the
 *    log, invisible to read_committed consumers; the progress topic keeps
 *    the newest committed record.
 *  - The process: kill -9 at any step (everything in memory lost; of each
 *    partition's in-flight messages a prefix was written; the offset file
 *    as last written), graceful stops (SIGTERM: the daemon's drain),
 *    broken connections, stalls of 50 s (past the fence), and at a restart
 *    section b added or removed (the count inside a transaction must then
 *    not be used). In a fifth of the seeds a hot standby pair: two
 *    processes, each with its own offset file and Kafka client, sharing the
 *    slot (and in exactly_once the transactional.id); the server ends a
 *    stalled holder's connection after wal_sender_timeout, the other takes
 *    over, its init_transactions fencing the stalled one's client.
 *
 * The judges (a failure ends the seed):
 *  - no loss: every committed event of section a (rows and messages) is in
 *    its topic or, dead-lettered, in the dead-letter topic, and every
 *    undecodable record in the dead-letter topic, for read_committed
 *    consumers;
 *  - per-key order: in each partition the first deliveries of one key's
 *    events come in commit order;
 *  - confirmation: no status confirms a position past a transaction with
 *    an event of section a not yet in Kafka (in exactly_once: not yet in a
 *    committed transaction), checked at every status;
 *  - copies: in exactly_once every event once; otherwise once in a seed
 *    without kill -9, broken or fenced streams, fatal exits or drains that
 *    timed out;
 *  - exits: outboxd never exits 2, nor 1 unless a refused event stopped
 *    exactly_once, a fatal client error at_least_once, or the publication
 *    was lost (which it must notice within 5 s of catching up);
 *  - gap repair: the planner (repairplan.h) against a model table whose
 *    physical order differs from insert order (below).
 *
 * Not modelled (tests/simulator.md): heartbeats, hot_standby_yield, the
 * start-up checks.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "changes.h"
#include "clock.h"
#include "config.h"
#include "exitcode.h"
#include "log.h"
#include "monitor.h"
#include "offset.h"
#include "producer.h"
#include "progress.h"
#include "relay_int.h"
#include "repairplan.h"
#include "replproto.h"
#include "resume.h"
#include "slotsetup.h"
#include "stream.h"

/* ---- the seed's randomness: splitmix64 ------------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t below(uint32_t n) { return n ? (uint32_t)(rnd() % n) : 0; }
static bool chance(uint32_t per_mille) { return below(1000) < per_mille; }

/* ---- the run's verbosity and failure ------------------------------------------ */

static int64_t now_us; /* the simulated clock (clock_simulate()) */
static bool verbose;
static uint64_t trace_id; /* SIM_TRACE=ID: every step of that event */
static int failed;
static char failure[512];

static void note(const char *fmt, ...)
{
    if (!verbose) return;
    va_list ap;
    va_start(ap, fmt);
    printf("sim: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* The first failure of the seed is kept (later ones follow from it). */
static void judge_fail(const char *fmt, ...)
{
    if (failed) return;
    failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure, sizeof(failure), fmt, ap);
    va_end(ap);
}

/* ---- the model database ----------------------------------------------------- */

enum rec_kind { R_A, R_B, R_MSG_A, R_MSG_X, R_BAD };

struct rec {
    enum rec_kind kind;
    uint32_t key;
    uint64_t id; /* the event's number, unique in the seed (ids start at 1) */
};

struct txn {
    lsn_t final_lsn; /* the commit record's LSN (Begin's final_lsn) */
    lsn_t end_lsn;   /* the commit's end */
    int nrec;
    struct rec *recs;
};

#define KEYS 24

struct db {
    struct txn *txns;
    size_t n, cap;
    lsn_t insert; /* WAL written so far (aborted and open transactions too) */
    lsn_t slot_confirmed;
    uint64_t next_id;
    /* where each event is (for the judges): txn index and record index */
    uint32_t *ev_txn, *ev_rec;
    enum rec_kind *ev_kind;
    uint8_t *ev_in_kafka; /* written to a partition's log at least once */
    size_t ev_cap;
    size_t judged_txn; /* transactions before it passed judge_confirm() */
};

static struct db db;

static const char *kind_name(enum rec_kind k)
{
    return k == R_A ? "a row" : k == R_B ? "b row" : k == R_MSG_A ? "a message"
         : k == R_MSG_X ? "another prefix's message" : "undecodable row";
}

static void db_note_event(uint64_t id, uint32_t t, uint32_t r, enum rec_kind k)
{
    if (id >= db.ev_cap) {
        size_t cap = db.ev_cap ? db.ev_cap * 2 : 4096;
        while (cap <= id) cap *= 2;
        db.ev_txn = realloc(db.ev_txn, cap * sizeof(*db.ev_txn));
        db.ev_rec = realloc(db.ev_rec, cap * sizeof(*db.ev_rec));
        db.ev_kind = realloc(db.ev_kind, cap * sizeof(*db.ev_kind));
        db.ev_in_kafka = realloc(db.ev_in_kafka, cap);
        if (!db.ev_txn || !db.ev_rec || !db.ev_kind || !db.ev_in_kafka) abort();
        memset(db.ev_in_kafka + db.ev_cap, 0, cap - db.ev_cap);
        db.ev_cap = cap;
    }
    db.ev_txn[id] = t;
    db.ev_rec[id] = r;
    db.ev_kind[id] = k;
}

/* An application transaction commits: nrec records of random kinds. */
static void db_commit(int nrec, bool with_b, bool with_bad)
{
    if (db.n == db.cap) {
        db.cap = db.cap ? db.cap * 2 : 256;
        db.txns = realloc(db.txns, db.cap * sizeof(*db.txns));
        if (!db.txns) abort();
    }
    struct txn *t = &db.txns[db.n];
    t->nrec = nrec;
    t->recs = calloc((size_t)(nrec ? nrec : 1), sizeof(*t->recs));
    if (!t->recs) abort();
    for (int i = 0; i < nrec; i++) {
        uint32_t p = below(100);
        enum rec_kind k = p < 60 ? R_A : p < 75 ? R_MSG_A : p < 85 ? R_MSG_X : R_B;
        if (!with_b && k == R_B) k = R_A;
        if (with_bad && chance(15)) k = R_BAD;
        t->recs[i] = (struct rec){k, below(KEYS), ++db.next_id};
        db_note_event(t->recs[i].id, (uint32_t)db.n, (uint32_t)i, k);
    }
    db.insert += 0x40 + (lsn_t)nrec * 0x80;
    t->final_lsn = db.insert;
    db.insert += 0x30;
    t->end_lsn = db.insert;
    db.n++;
}

/* An aborted (or not yet committed) transaction's WAL. */
static void db_wal_only(void) { db.insert += 0x40 + (lsn_t)below(8) * 0x80; }

static void db_free(void)
{
    for (size_t i = 0; i < db.n; i++) free(db.txns[i].recs);
    free(db.txns);
    free(db.ev_txn);
    free(db.ev_rec);
    free(db.ev_kind);
    free(db.ev_in_kafka);
    memset(&db, 0, sizeof(db));
}

/* ---- the processes: one outboxd, or a hot standby pair ------------------------- */

#define NPROC 2 /* at most two instances sharing the slot ([postgres] hot_standby) */

/* One outboxd process on its own machine: what it keeps across its own
 * crashes is its offset file. */
struct proc {
    int id;
    bool up;
    struct config cfg;
    struct relay r;
    volatile sig_atomic_t stop;
    char offset_text[OFFSET_FILE_MAX]; /* its offset file, as last written */
    size_t offset_len;
    int64_t paused_until; /* stalled (stopped, starved): no turn before it */
};

static struct proc procs[NPROC];
static int nprocs;           /* 1, or 2 for a hot standby pair */
static struct proc *P = procs; /* the process whose code runs now (the seams ask) */

/* ---- the model Kafka ------------------------------------------------------------ */

#define PARTS 6       /* the outbox topics' partitions ... */
#define DLQ_PART PARTS /* ... and the dead-letter topic's */
#define NPART (PARTS + 1)

struct msg {
    uint64_t tag;
    uint64_t id;
    uint32_t key;
    uint32_t txn; /* the Kafka transaction it was produced in (0: none) */
    bool dlq;
    char event_id[32];
};

/* A message in a partition's log: what consumers read, read_committed ones
 * only when txn is 0 or a committed transaction. */
struct entry {
    uint64_t id;
    uint32_t txn;
};

struct part {
    struct entry *log;
    size_t nlog, caplog;
};

struct queue {
    struct msg *m;
    size_t n, cap;
};

/* One process's producer: what it has in flight, in order per partition
 * (each client has its own connections: the broker takes its requests
 * apart from another client's), its delivery callback and, in
 * exactly_once, its transactional client. */
struct kclient {
    struct queue q[NPART];
    size_t inflight;
    producer_delivery_fn cb; /* the relay's (producer_new()) */
    void *ctx;
    bool live;           /* its process runs: reports are handed over */
    bool ready;          /* the transactional client exists (init_transactions done) */
    uint32_t open;       /* its open transaction (0: none) */
    bool commit_unseen;  /* its commit completed at the broker after the client
                          * gave up on it: librdkafka refuses the abort */
    bool fenced;         /* a newer client with the same transactional.id ran
                          * init_transactions: every call fails for good */
    bool refused_eos;    /* an event was refused in a transaction (the process
                          * must stop; its operator then fixes the cause) */
    bool fatal;          /* it hits a fatal error at the next check (librdkafka's:
                          * the idempotent producer lost its state,
                          * INVALID_TXN_STATE) */
    bool fatal_fired;    /* ... and reported it: the process may exit 1 */
};

enum kt_state { KT_OPEN = 1, KT_COMMITTED, KT_ABORTED };

/* A Kafka transaction: its state at the broker and the events written in it
 * (made visible when it commits). */
struct ktx {
    uint8_t state;
    uint64_t *ids;
    size_t n, cap;
};

struct kafka {
    struct part p[NPART];
    struct kclient c[NPROC];
    size_t queue_cap;    /* a producer's queue: full beyond it */
    uint32_t fail_pm;    /* per mille of events the broker refuses for good */
    int outage;          /* polls left without any ACK (and no transactional call) */
    bool closing;        /* the end of the run: no more outages */
    bool eos;            /* exactly_once */
    struct ktx *txns;    /* by number; 0 unused */
    size_t ntxns, captxns;
    char progress[OFFSET_FILE_MAX]; /* the progress topic's newest committed record */
    size_t progress_len;
    uint64_t commits, aborts, unseen, fences;
};

static struct kafka kafka;

static struct kclient *client_of(const struct producer *p) { return (struct kclient *)p; }
static int client_id(const struct kclient *c) { return (int)(c - kafka.c); }

static size_t inflight_total(void)
{
    size_t n = 0;
    for (int i = 0; i < NPROC; i++) n += kafka.c[i].inflight;
    return n;
}

static void push_id(uint64_t **v, size_t *n, size_t *cap, uint64_t id)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *v = realloc(*v, *cap * sizeof(**v));
        if (!*v) abort();
    }
    (*v)[(*n)++] = id;
}

static void mark_visible(uint64_t id)
{
    if (id < db.ev_cap) db.ev_in_kafka[id] = 1;
}

static bool visible(const struct entry *e)
{
    return e->txn == 0 || kafka.txns[e->txn].state == KT_COMMITTED;
}

static void log_append(struct part *p, uint64_t id, uint32_t txn)
{
    if (p->nlog == p->caplog) {
        p->caplog = p->caplog ? p->caplog * 2 : 1024;
        p->log = realloc(p->log, p->caplog * sizeof(*p->log));
        if (!p->log) abort();
    }
    p->log[p->nlog++] = (struct entry){id, txn};
    if (txn == 0)
        mark_visible(id);
    else {
        struct ktx *t = &kafka.txns[txn];
        push_id(&t->ids, &t->n, &t->cap, id);
        if (t->state == KT_COMMITTED) mark_visible(id);
    }
}

static uint32_t txn_begin(void)
{
    if (kafka.ntxns >= kafka.captxns) {
        kafka.captxns = kafka.captxns ? kafka.captxns * 2 : 256;
        kafka.txns = realloc(kafka.txns, kafka.captxns * sizeof(*kafka.txns));
        if (!kafka.txns) abort();
        memset(kafka.txns + kafka.ntxns, 0, (kafka.captxns - kafka.ntxns) * sizeof(*kafka.txns));
    }
    if (kafka.ntxns == 0) kafka.ntxns = 1; /* 0: none (zeroed above) */
    kafka.txns[kafka.ntxns] = (struct ktx){.state = KT_OPEN};
    return (uint32_t)kafka.ntxns++;
}

/* The broker commits transaction t with the progress record value. */
static void txn_commit_at_broker(uint32_t t, const char *value)
{
    struct ktx *x = &kafka.txns[t];
    x->state = KT_COMMITTED;
    for (size_t i = 0; i < x->n; i++) mark_visible(x->ids[i]);
    size_t n = strlen(value);
    if (n >= sizeof(kafka.progress)) abort();
    memcpy(kafka.progress, value, n + 1);
    kafka.progress_len = n;
    kafka.commits++;
}

static uint32_t key_of(const struct slice *k)
{
    /* keys are "k<number>" */
    if (k->len < 2 || k->data[0] != 'k') return UINT32_MAX;
    return (uint32_t)strtoul(k->data + 1, NULL, 10);
}

/* The event number of a message: its event_id ("<id>"), or for an
 * undecodable record's dead letter the "#<id>#" mark in its bytes. */
static uint64_t id_of(const struct outbox_event *ev)
{
    if (ev->event_id.len > 0 && ev->event_id.len < 30) {
        char buf[32];
        memcpy(buf, ev->event_id.data, ev->event_id.len);
        buf[ev->event_id.len] = '\0';
        return strtoull(buf, NULL, 10);
    }
    for (size_t i = 0; ev->value.data && i + 2 < ev->value.len; i++)
        if (ev->value.data[i] == '#' && ev->value.data[i + 1] >= '0' && ev->value.data[i + 1] <= '9')
            return strtoull(ev->value.data + i + 1, NULL, 10);
    return 0;
}

static char dlq_topic[256]; /* [errors] dlq_topic, the same in every process */

/* Hands c's process the report of m (with P its process meanwhile, as
 * the callback runs the relay's code). */
static void report(struct kclient *c, const struct msg *m, int err, const char *reason)
{
    if (!c->live || !c->cb) return;
    struct delivery_report dr = {.tag = m->tag, .err = err};
    dr.topic = m->dlq ? dlq_topic : "events";
    dr.reason = reason;
    char key[16];
    snprintf(key, sizeof(key), "k%u", m->key);
    dr.key = (struct slice){key, m->key == UINT32_MAX ? 0 : strlen(key)};
    dr.event_id = (struct slice){m->event_id, strlen(m->event_id)};
    struct proc *saved = P;
    P = &procs[client_id(c)];
    c->cb(c->ctx, &dr);
    P = saved;
}

/* A refusal for good belongs to the event (too large, say): every copy of
 * it is refused, whenever it is sent. */
static bool refused(const struct msg *m)
{
    return !m->dlq && (m->id * 0x9e3779b97f4a7c15ULL >> 40) % 1000 < kafka.fail_pm;
}

static struct msg queue_pop(struct kclient *c, int i)
{
    struct queue *q = &c->q[i];
    struct msg m = q->m[0];
    memmove(q->m, q->m + 1, (q->n - 1) * sizeof(*q->m));
    q->n--;
    c->inflight--;
    return m;
}

/* The broker answers the head of c's queue for partition i: written and
 * ACKed, refused for good (not the dead-letter topic's), or, from a
 * client fenced in a transaction the fence aborted, refused as fenced. */
static void ack_head(struct kclient *c, int i)
{
    struct msg m = queue_pop(c, i);
    if (m.txn && c->fenced && kafka.txns[m.txn].state == KT_ABORTED) {
        report(c, &m, RD_KAFKA_RESP_ERR_PRODUCER_FENCED, "simulated: fenced");
        return;
    }
    bool refuse = refused(&m);
    if (!refuse) log_append(&kafka.p[i], m.id, m.txn);
    if (refuse && kafka.eos) c->refused_eos = true;
    if (trace_id && m.id == trace_id)
        printf("sim: trace: event %llu %s (client %d, transaction %u)\n",
               (unsigned long long)m.id, refuse ? "refused" : "written and ACKed",
               client_id(c), m.txn);
    report(c, &m, refuse ? RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE : 0,
           refuse ? "simulated: refused for good" : NULL);
}

/* One poll of client c: a few heads of its random partitions. */
static void kafka_poll(struct kclient *c)
{
    if (kafka.outage > 0 && !kafka.closing) {
        kafka.outage--;
        return;
    }
    for (int n = 1 + (int)below(8); n > 0 && c->inflight > 0; n--) {
        int i = (int)below(NPART);
        while (c->q[i].n == 0) i = (i + 1) % NPART;
        ack_head(c, i);
    }
}

/* What c has in flight ends without an ACK (the client is destroyed, a
 * transaction aborted, the process killed): of each partition's messages a
 * prefix reached the broker's log; each is reported purged when purged
 * (librdkafka reports what it purges; a dead process reports nothing). */
static void purge_inflight(struct kclient *c, bool purged)
{
    for (int i = 0; i < NPART; i++) {
        struct queue *q = &c->q[i];
        size_t written = below((uint32_t)q->n + 1);
        for (size_t j = 0; j < q->n; j++) {
            struct msg *m = &q->m[j];
            if (trace_id && m->id == trace_id)
                printf("sim: trace: event %llu in flight when client %d ended: %s\n",
                       (unsigned long long)trace_id, client_id(c), j < written ? "written" : "lost");
            if (j < written && !refused(m)) log_append(&kafka.p[i], m->id, m->txn);
        }
        size_t n = q->n;
        q->n = 0;
        c->inflight -= n;
        for (size_t j = 0; purged && j < n; j++)
            report(c, &q->m[j], RD_KAFKA_RESP_ERR__PURGE_QUEUE, "simulated: purged");
    }
}

static void kafka_free(void)
{
    for (int i = 0; i < NPART; i++) free(kafka.p[i].log);
    for (int c = 0; c < NPROC; c++)
        for (int i = 0; i < NPART; i++) free(kafka.c[c].q[i].m);
    for (size_t t = 0; t < kafka.ntxns; t++) free(kafka.txns[t].ids);
    free(kafka.txns);
    memset(&kafka, 0, sizeof(kafka));
}

/* ---- the seams: the daemon's I/O, answered by the models ------------------------------
 *
 * The simulator is linked with --wrap for each of these (tests/CMakeLists.txt):
 * every call the relay's files make to them comes here instead. Nothing else
 * of the relay is replaced: relay_init(), relay_turn() (its states, the
 * confirmation, exactly_once's transactions) and relay_free() run as in the
 * daemon. */

#define WRAP(name) __wrap_##name
#define REAL(name) __real_##name

/* The producer (producer.h): the process's client of the model Kafka. */
struct producer *WRAP(producer_new)(const struct config *c, producer_delivery_fn fn, void *ctx,
                                    char *err, size_t errlen);
struct producer *WRAP(producer_new)(const struct config *c, producer_delivery_fn fn, void *ctx,
                                    char *err, size_t errlen)
{
    (void)c;
    (void)err;
    (void)errlen;
    struct kclient *k = &kafka.c[P->id];
    k->cb = fn;
    k->ctx = ctx;
    k->live = true;
    return (struct producer *)k;
}

/* The process ends: its client is destroyed with whatever is in flight. */
void WRAP(producer_free)(struct producer *p);
void WRAP(producer_free)(struct producer *p)
{
    if (!p) return;
    struct kclient *c = client_of(p);
    c->live = false;
    purge_inflight(c, false);
    c->ready = false;
    c->open = 0; /* left open at the broker: the next init_transactions aborts it */
    c->commit_unseen = c->fenced = false;
}

int WRAP(producer_send)(struct producer *p, const struct outbox_event *ev, uint64_t tag,
                        int *kafka_err, char *err, size_t errlen);
int WRAP(producer_send)(struct producer *p, const struct outbox_event *ev, uint64_t tag,
                        int *kafka_err, char *err, size_t errlen)
{
    (void)kafka_err;
    struct kclient *c = client_of(p);
    if (c->inflight >= kafka.queue_cap) return PRODUCER_QUEUE_FULL;
    if (c->fenced) return PRODUCER_QUEUE_FULL; /* its fatal error says why (producer_fatal()) */
    if (kafka.eos && !c->ready) {
        judge_fail("a message was produced before the transactional client was made");
        snprintf(err, errlen, "simulated: no transactional client");
        return PRODUCER_ERROR;
    }
    if (kafka.eos && !c->open) c->open = txn_begin();
    bool dlq = strcmp(ev->topic, dlq_topic) == 0;
    uint32_t key = dlq ? UINT32_MAX : key_of(&ev->key);
    int part = dlq ? DLQ_PART : (int)(key % PARTS);
    struct queue *q = &c->q[part];
    if (q->n == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 64;
        q->m = realloc(q->m, q->cap * sizeof(*q->m));
        if (!q->m) abort();
    }
    if (trace_id && id_of(ev) == trace_id)
        printf("sim: trace: event %llu handed to client %d (tag %llx, %s, transaction %u, "
               "%zu in flight there)\n",
               (unsigned long long)trace_id, client_id(c), (unsigned long long)tag,
               dlq ? "dlq" : "topic", c->open, q->n);
    struct msg *m = &q->m[q->n++];
    c->inflight++;
    *m = (struct msg){.tag = tag, .id = id_of(ev), .key = key, .txn = c->open, .dlq = dlq};
    snprintf(m->event_id, sizeof(m->event_id), "%llu", (unsigned long long)m->id);
    return PRODUCER_OK;
}

int WRAP(producer_poll)(struct producer *p, int timeout_ms);
int WRAP(producer_poll)(struct producer *p, int timeout_ms)
{
    (void)timeout_ms;
    kafka_poll(client_of(p));
    return 0;
}

int WRAP(producer_outq_len)(const struct producer *p);
int WRAP(producer_outq_len)(const struct producer *p)
{
    return (int)client_of(p)->inflight;
}

int WRAP(producer_brokers_up)(const struct producer *p);
int WRAP(producer_brokers_up)(const struct producer *p)
{
    (void)p;
    return kafka.outage > 0 ? 0 : 1;
}

int WRAP(producer_fatal)(struct producer *p, char *err, size_t errlen);
int WRAP(producer_fatal)(struct producer *p, char *err, size_t errlen)
{
    struct kclient *c = client_of(p);
    if (c->fenced) {
        snprintf(err, errlen, "simulated: PRODUCER_FENCED: fenced by a newer instance with "
                              "the same transactional.id");
        return 1;
    }
    if (!c->fatal || (kafka.eos && !c->ready)) return 0;
    c->fatal = false;
    c->fatal_fired = true;
    snprintf(err, errlen, "simulated: a fatal error of the client (INVALID_TXN_STATE)");
    return 1;
}

int WRAP(producer_refused)(const struct producer *p, char *err, size_t errlen);
int WRAP(producer_refused)(const struct producer *p, char *err, size_t errlen)
{
    (void)p;
    (void)err;
    (void)errlen;
    return 0;
}

int WRAP(producer_txn_init)(struct producer *p, const char *txn_id, int timeout_ms, char *err,
                            size_t errlen);
int WRAP(producer_txn_init)(struct producer *p, const char *txn_id, int timeout_ms, char *err,
                            size_t errlen)
{
    (void)txn_id;
    (void)timeout_ms;
    struct kclient *c = client_of(p);
    if (c->ready) return PRODUCER_TXN_OK;
    if (kafka.outage > 0) {
        snprintf(err, errlen, "init_transactions: timed out (simulated outage)");
        return PRODUCER_TXN_ABORT;
    }
    /* the coordinator ends what an older client with this id left open, and
     * fences the other instance's client (one transactional.id: the pair's) */
    for (size_t t = 1; t < kafka.ntxns; t++)
        if (kafka.txns[t].state == KT_OPEN) {
            kafka.txns[t].state = KT_ABORTED;
            kafka.aborts++;
        }
    for (int i = 0; i < NPROC; i++)
        if (&kafka.c[i] != c && kafka.c[i].ready && !kafka.c[i].fenced) {
            kafka.c[i].fenced = true;
            kafka.fences++;
        }
    c->ready = true;
    c->open = 0;
    c->commit_unseen = c->fenced = false;
    c->fatal_fired = false; /* a new client: the old one's error is gone */
    return PRODUCER_TXN_OK;
}

bool WRAP(producer_txn_open)(const struct producer *p);
bool WRAP(producer_txn_open)(const struct producer *p)
{
    return client_of(p)->open != 0;
}

bool WRAP(producer_txn_ready)(const struct producer *p);
bool WRAP(producer_txn_ready)(const struct producer *p)
{
    return client_of(p)->ready;
}

bool WRAP(producer_txn_failed)(const struct producer *p);
bool WRAP(producer_txn_failed)(const struct producer *p)
{
    (void)p;
    return false;
}

bool WRAP(producer_txn_must_stop)(struct producer *p);
bool WRAP(producer_txn_must_stop)(struct producer *p)
{
    return client_of(p)->fenced;
}

bool WRAP(producer_txn_fenced)(struct producer *p);
bool WRAP(producer_txn_fenced)(struct producer *p)
{
    return client_of(p)->fenced;
}

void WRAP(producer_txn_discard)(struct producer *p);
void WRAP(producer_txn_discard)(struct producer *p)
{
    struct kclient *c = client_of(p);
    purge_inflight(c, true);
    c->ready = false;
    c->open = 0;
    c->commit_unseen = c->fenced = false;
}

int WRAP(producer_txn_commit)(struct producer *p, const char *topic, const char *key,
                              const char *value, int timeout_ms, char *err, size_t errlen);
int WRAP(producer_txn_commit)(struct producer *p, const char *topic, const char *key,
                              const char *value, int timeout_ms, char *err, size_t errlen)
{
    (void)topic;
    (void)key;
    (void)timeout_ms;
    struct kclient *c = client_of(p);
    if (c->inflight > 0)
        judge_fail("a Kafka transaction was committed with %zu messages not reported",
                   c->inflight);
    if (c->fenced) {
        snprintf(err, errlen, "commit_transaction: PRODUCER_FENCED (simulated)");
        return PRODUCER_TXN_FATAL;
    }
    if (!c->open) c->open = txn_begin(); /* a progress-only transaction */
    if (kafka.outage > 0) {
        /* the client gives up; the broker may have committed all the same */
        if (chance(300)) {
            txn_commit_at_broker(c->open, value);
            c->commit_unseen = true;
            kafka.unseen++;
        }
        snprintf(err, errlen, "commit_transaction: timed out (simulated outage)");
        return PRODUCER_TXN_ABORT;
    }
    txn_commit_at_broker(c->open, value);
    c->open = 0;
    return PRODUCER_TXN_OK;
}

int WRAP(producer_txn_abort)(struct producer *p, int timeout_ms, char *err, size_t errlen);
int WRAP(producer_txn_abort)(struct producer *p, int timeout_ms, char *err, size_t errlen)
{
    (void)timeout_ms;
    struct kclient *c = client_of(p);
    if (!c->open) return PRODUCER_TXN_OK;
    if (c->fenced) {
        snprintf(err, errlen, "abort_transaction: PRODUCER_FENCED (simulated)");
        return PRODUCER_TXN_FATAL;
    }
    if (c->commit_unseen) {
        snprintf(err, errlen, "abort_transaction: _CONFLICT: the commit is still in "
                              "progress (simulated)");
        return PRODUCER_TXN_ABORT;
    }
    if (kafka.outage > 0 && chance(500)) {
        snprintf(err, errlen, "abort_transaction: timed out (simulated outage)");
        return PRODUCER_TXN_ABORT;
    }
    purge_inflight(c, true);
    if (kafka.txns[c->open].state == KT_OPEN) {
        kafka.txns[c->open].state = KT_ABORTED;
        kafka.aborts++;
    }
    c->open = 0;
    return PRODUCER_TXN_OK;
}

/* The progress topic (progress.h): its newest committed record. */
int WRAP(progress_topic_ensure)(const struct config *c, const char *topic, int timeout_ms,
                                char *err, size_t errlen);
int WRAP(progress_topic_ensure)(const struct config *c, const char *topic, int timeout_ms,
                                char *err, size_t errlen)
{
    (void)c;
    (void)topic;
    (void)timeout_ms;
    if (kafka.outage <= 0) return 0;
    snprintf(err, errlen, "the progress topic: timed out (simulated outage)");
    return -1;
}

int WRAP(progress_read)(const struct config *c, const char *topic, const char *key,
                        int timeout_ms, struct offset_state *out, char *err, size_t errlen);
int WRAP(progress_read)(const struct config *c, const char *topic, const char *key,
                        int timeout_ms, struct offset_state *out, char *err, size_t errlen)
{
    (void)c;
    (void)topic;
    (void)key;
    (void)timeout_ms;
    if (kafka.outage > 0) {
        snprintf(err, errlen, "reading the progress topic: timed out (simulated outage)");
        return -1;
    }
    if (kafka.progress_len == 0) return 0;
    if (offset_parse(kafka.progress, kafka.progress_len, out, err, errlen) != 0) {
        judge_fail("the progress record does not parse: %s", err);
        return -1;
    }
    return 1;
}

/* The offset file: the running process's, kept across its crashes as last
 * written. */
int WRAP(offset_read)(const char *path, struct offset_state *out, char *err, size_t errlen);
int WRAP(offset_read)(const char *path, struct offset_state *out, char *err, size_t errlen)
{
    (void)path;
    if (P->offset_len == 0) return 0;
    if (offset_parse(P->offset_text, P->offset_len, out, err, errlen) != 0) {
        judge_fail("the offset file does not parse: %s", err);
        return -1;
    }
    return 1;
}

int WRAP(offset_write)(const char *path, const struct offset_state *st, char *err,
                       size_t errlen);
int WRAP(offset_write)(const char *path, const struct offset_state *st, char *err,
                       size_t errlen)
{
    (void)path;
    size_t n = offset_format(st, P->offset_text, sizeof(P->offset_text));
    if (n == 0) {
        snprintf(err, errlen, "offset_format failed");
        return -1;
    }
    P->offset_len = n;
    return 0;
}

/* ---- the model server: the slot and its stream ------------------------------------ */

struct server {
    int holder;        /* the process whose walsender streams the slot (-1: none) */
    int64_t heard_us;  /* when the server last heard from it (a status, its start) */
    size_t cursor;     /* the next transaction it sends */
    int rec_pos;       /* -1: its Begin; nrec: its Commit */
    lsn_t start;       /* where it started */
    int budget;        /* frames it sends before the relay's next turn */
    bool broken;       /* the connection breaks at the next read */
    int down;          /* connection attempts refused from now */
    bool pgoutput;     /* the slot's plugin: pgoutput (else wal2json) */
    bool rel_sent[2];  /* pgoutput: Relation of table a, b sent in this session */
    lsn_t pub_lost_at; /* pgoutput: table a left the publication here (0: never);
                        * its inserts committed after it are not sent */
};

static struct server srv;
static int stream_of[NPROC] = {0, 1}; /* a process's connection: &stream_of[its id] */

/* Whether connection s is the one streaming the slot (a connection the
 * server cut is not). */
static bool holds(const struct stream *s)
{
    return s && srv.holder == *(const int *)s;
}

/* The walsender's wal_sender_timeout (60 s): it ends a connection that sent
 * no status for that long, and the slot is free for another process. */
static void server_timeouts(void)
{
    if (srv.holder >= 0 && now_us - srv.heard_us > 60000000) {
        note("the server ends process %d's connection: no status for 60 s", srv.holder);
        srv.holder = -1;
    }
}
static bool with_b; /* section b is configured in this process */

/* Judges a position about to be confirmed: every transaction committed
 * before it has each of its section-a events visible in Kafka. */
static void judge_confirm(lsn_t flushed)
{
    for (; db.judged_txn < db.n && db.txns[db.judged_txn].final_lsn < flushed;
         db.judged_txn++) {
        const struct txn *t = &db.txns[db.judged_txn];
        for (int i = 0; i < t->nrec; i++) {
            const struct rec *rc = &t->recs[i];
            if (rc->kind == R_B || rc->kind == R_MSG_X || db.ev_in_kafka[rc->id]) continue;
            judge_fail("confirmed %X/%X past event %llu (%s, record %d of the transaction "
                       "committed at %X/%X), which is not %s in Kafka",
                       (unsigned)(flushed >> 32), (unsigned)flushed,
                       (unsigned long long)rc->id, kind_name(rc->kind), i,
                       (unsigned)(t->final_lsn >> 32), (unsigned)t->final_lsn,
                       kafka.eos ? "committed" : "written");
        }
    }
}

static lsn_t judged_upto;

int WRAP(stream_send_status)(struct stream *s, lsn_t written, lsn_t flushed, bool reply,
                             char *err, size_t errlen);
int WRAP(stream_send_status)(struct stream *s, lsn_t written, lsn_t flushed, bool reply,
                             char *err, size_t errlen)
{
    (void)written;
    (void)reply;
    if (!holds(s)) {
        snprintf(err, errlen, "simulated: server closed the connection unexpectedly");
        return -1;
    }
    srv.heard_us = now_us;
    if (flushed > judged_upto) {
        judge_confirm(flushed);
        judged_upto = flushed;
    }
    if (flushed > db.slot_confirmed) db.slot_confirmed = flushed;
    return 0;
}

void WRAP(stream_close)(struct stream *s);
void WRAP(stream_close)(struct stream *s)
{
    if (holds(s)) srv.holder = -1;
}

void WRAP(stream_finish)(struct stream *s);
void WRAP(stream_finish)(struct stream *s)
{
    (void)s;
}

/* A connection and START_REPLICATION: the daemon's own decision
 * (slot_decide(), slot_take(), slot_stream_from()) on the offset file or
 * the progress topic and this slot, then the server's cursor at the first
 * transaction it sends: every one committed at or after max(the position
 * asked for, the slot's). */
enum step WRAP(slot_open_stream)(struct slot_setup *s);
enum step WRAP(slot_open_stream)(struct slot_setup *s)
{
    char err[512];
    s->st = (struct stream *)&stream_of[P->id];
    if (srv.down > 0) {
        srv.down--;
        s->retry_cause = "connect_failed";
        return STEP_BROKEN;
    }
    if (srv.holder >= 0 && srv.holder != P->id) { /* another walsender holds the slot */
        s->retry_cause = "slot_in_use";
        s->holder_pid = 1000 + srv.holder;
        return STEP_BROKEN;
    }
    struct offset_state file;
    int have = s->position ? 0 : offset_read(s->cfg->offsets_file, &file, err, sizeof(err));
    if (have < 0) return STEP_USAGE;
    struct resume_server rs;
    resume_server_init(&rs, "7300000000000000001", 1, db.insert, "app", "outboxd",
                       srv.pgoutput ? "pgoutput" : "wal2json");
    rs.slot_exists = true;
    rs.slot_confirmed = db.slot_confirmed;
    rs.shared = s->cfg->pg_hot_standby;
    s->sender_timeout_ms = 60000;
    enum step rc = STEP_OK;
    if (s->position) rc = s->position(s->position_ctx, "7300000000000000001", &file, &have);
    struct resume_decision d;
    if (rc == STEP_OK) rc = slot_decide(s, &file, &have, &rs, &d);
    if (rc != STEP_OK) return rc;
    slot_take(s, have ? &file : NULL, &rs, &d, 1);
    lsn_t from = slot_stream_from(s);
    srv.holder = P->id;
    srv.heard_us = now_us;
    srv.broken = false;
    srv.rel_sent[0] = srv.rel_sent[1] = false; /* a new session: Relations again */
    srv.start = from > db.slot_confirmed ? from : db.slot_confirmed;
    srv.cursor = 0;
    while (srv.cursor < db.n && db.txns[srv.cursor].final_lsn < srv.start) srv.cursor++;
    srv.rec_pos = -1;
    note("stream from %llX (slot %llX, plan %llX, resume_inside %d acked %llu) at txn %zu",
         (unsigned long long)srv.start, (unsigned long long)db.slot_confirmed,
         (unsigned long long)s->plan.start, s->plan.resume_inside,
         (unsigned long long)s->plan.progress.acked, srv.cursor);
    return STEP_OK;
}

/* The wal2json line of record rc. */
static int rec_line(char *out, size_t outlen, const struct rec *rc)
{
    unsigned long long id = (unsigned long long)rc->id;
    switch (rc->kind) {
    case R_MSG_A:
    case R_MSG_X:
        return snprintf(out, outlen,
                        "{\"action\":\"M\",\"transactional\":true,\"prefix\":\"%s\","
                        "\"content\":\"{\\\"v\\\":1,\\\"event_id\\\":\\\"%llu\\\","
                        "\\\"aggregate_type\\\":\\\"T\\\",\\\"aggregate_id\\\":\\\"k%u\\\","
                        "\\\"event_type\\\":\\\"E\\\",\\\"payload\\\":\\\"{}\\\"}\"}",
                        rc->kind == R_MSG_A ? "a" : "x", id, rc->key);
    default:
        return snprintf(out, outlen,
                        "{\"action\":\"I\",\"schema\":\"public\",\"table\":\"%s\",\"columns\":["
                        "{\"name\":\"event_id\",\"type\":\"text\",\"value\":\"%llu\"},"
                        "{\"name\":\"aggregate_type\",\"type\":\"text\",\"value\":\"T\"},"
                        "{\"name\":\"aggregate_id\",\"type\":\"text\",\"value\":\"k%u\"},"
                        "{\"name\":\"aggregate_version\",\"type\":\"bigint\",\"value\":%llu},"
                        "{\"name\":\"event_type\",\"type\":\"text\",\"value\":\"E\"},"
                        "{\"name\":\"payload\",\"type\":\"text\",\"value\":\"%s#%llu#\"}]}",
                        rc->kind == R_B ? "b" : "a", id, rc->key, id,
                        rc->kind == R_BAD ? "caf\xe9" : "ok", id);
    }
}

/* Whether the server sends record rc of transaction t: only the configured
 * sections' tables (wal2json's add-tables; pgoutput's publication, which
 * lists them), and with pgoutput not table a's after it left the
 * publication; messages always. */
static bool sent(const struct txn *t, const struct rec *rc)
{
    if (rc->kind == R_B) return with_b;
    if (rc->kind == R_A && srv.pub_lost_at && t->final_lsn > srv.pub_lost_at) return false;
    return true;
}

/* pgoutput's messages (protocol version 1, text values; pgoutput.c has
 * each format above its parser), written as the server writes them. */
static int put(unsigned char *d, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) d[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    return bytes;
}

static int put_str(unsigned char *d, const char *str)
{
    size_t n = strlen(str) + 1;
    memcpy(d, str, n);
    return (int)n;
}

static const char *const pg_cols[6] = {"event_id",   "aggregate_type", "aggregate_id",
                                       "aggregate_version", "event_type", "payload"};

/* Begin: Byte1('B') Int64 final_lsn Int64 commit_time Int32 xid */
static int pg_begin(char *out, const struct txn *t)
{
    unsigned char *d = (unsigned char *)out;
    int n = put(d, 'B', 1);
    n += put(d + n, t->final_lsn, 8);
    n += put(d + n, (uint64_t)now_us, 8);
    n += put(d + n, 1000 + (uint64_t)(t - db.txns), 4);
    return n;
}

/* Commit: Byte1('C') Int8 flags Int64 commit_lsn Int64 end_lsn Int64 commit_time */
static int pg_commit(char *out, const struct txn *t)
{
    unsigned char *d = (unsigned char *)out;
    int n = put(d, 'C', 1);
    n += put(d + n, 0, 1);
    n += put(d + n, t->final_lsn, 8);
    n += put(d + n, t->end_lsn, 8);
    n += put(d + n, (uint64_t)now_us, 8);
    return n;
}

/* Relation: Byte1('R') Int32 relid String namespace String relname Int8
 * replident Int16 ncols, per column Int8 flags String name Int32 type oid
 * Int32 typmod; table a is relid 16384, b 16385. */
static int pg_relation(char *out, int rel)
{
    unsigned char *d = (unsigned char *)out;
    int n = put(d, 'R', 1);
    n += put(d + n, 16384u + (unsigned)rel, 4);
    n += put_str(d + n, "public");
    n += put_str(d + n, rel ? "b" : "a");
    n += put(d + n, 'd', 1);
    n += put(d + n, 6, 2);
    for (int i = 0; i < 6; i++) {
        n += put(d + n, i == 0, 1);
        n += put_str(d + n, pg_cols[i]);
        n += put(d + n, i == 3 ? 20 : 25, 4); /* bigint, text */
        n += put(d + n, 0xffffffffu, 4);
    }
    return n;
}

/* Insert: Byte1('I') Int32 relid Byte1('N') TupleData (Int16 ncols, per
 * column Byte1('t') Int32 len Byte(len)); Message: Byte1('M') Int8 flags
 * Int64 lsn String prefix Int32 length Byte(length). */
static int pg_change(char *out, const struct rec *rc, lsn_t at)
{
    unsigned char *d = (unsigned char *)out;
    unsigned long long id = (unsigned long long)rc->id;
    char v[6][48];
    int n;
    if (rc->kind == R_MSG_A || rc->kind == R_MSG_X) {
        char content[256];
        int len = snprintf(content, sizeof(content),
                           "{\"v\":1,\"event_id\":\"%llu\",\"aggregate_type\":\"T\","
                           "\"aggregate_id\":\"k%u\",\"event_type\":\"E\",\"payload\":\"{}\"}",
                           id, rc->key);
        n = put(d, 'M', 1);
        n += put(d + n, 1, 1); /* transactional */
        n += put(d + n, at, 8);
        n += put_str(d + n, rc->kind == R_MSG_A ? "a" : "x");
        n += put(d + n, (uint64_t)len, 4);
        memcpy(d + n, content, (size_t)len);
        return n + len;
    }
    snprintf(v[0], sizeof(v[0]), "%llu", id);
    snprintf(v[1], sizeof(v[1]), "T");
    snprintf(v[2], sizeof(v[2]), "k%u", rc->key);
    snprintf(v[3], sizeof(v[3]), "%llu", id);
    snprintf(v[4], sizeof(v[4]), "E");
    snprintf(v[5], sizeof(v[5]), "ok#%llu#", id);
    n = put(d, 'I', 1);
    n += put(d + n, 16384u + (rc->kind == R_B), 4);
    n += put(d + n, 'N', 1);
    n += put(d + n, 6, 2);
    for (int i = 0; i < 6; i++) {
        size_t len = strlen(v[i]);
        n += put(d + n, 't', 1);
        n += put(d + n, len, 4);
        memcpy(d + n, v[i], len);
        n += (int)len;
    }
    return n;
}

/* The frame the server sends, as CopyData: like the daemon's stream, the
 * buffer stays valid until the next read. */
#define FRAME_MAX 1100
static unsigned char frames[NPROC][FRAME_MAX]; /* each process's connection's */
static unsigned char *frame;                   /* the one being written */

static int xlogdata(lsn_t data_start, lsn_t wal_end, int n)
{
    frame[0] = 'w';
    repl_put_u64(frame + 1, data_start);
    repl_put_u64(frame + 9, wal_end);
    repl_put_u64(frame + 17, (uint64_t)now_us);
    return 25 + n;
}

/* A keepalive: the position the walsender has read to, which may be the
 * commit record of the next transaction, not yet sent (the race of
 * b5052cd); now and then it asks for a reply. */
static int keepalive(void)
{
    lsn_t pos = srv.cursor < db.n ? (chance(500) ? db.txns[srv.cursor].final_lsn
                                                 : (srv.cursor ? db.txns[srv.cursor - 1].end_lsn
                                                               : srv.start))
                                  : db.insert;
    if (pos < srv.start) pos = srv.start;
    frame[0] = 'k';
    repl_put_u64(frame + 1, pos);
    repl_put_u64(frame + 9, (uint64_t)now_us);
    frame[17] = chance(300);
    return 18;
}

/* The next frame of the stream into frame; its length. */
static int next_frame(void)
{
    char *data = (char *)frame + 25;
    size_t room = FRAME_MAX - 25;
    for (;;) {
        if (srv.cursor >= db.n || (srv.rec_pos < 0 && chance(50))) {
            srv.budget = srv.cursor >= db.n ? 0 : srv.budget; /* idle: one keepalive */
            return keepalive();
        }
        struct txn *t = &db.txns[srv.cursor];
        if (srv.rec_pos < 0) {
            srv.rec_pos = 0;
            if (srv.pgoutput)
                return xlogdata(t->final_lsn - 0x40 - (lsn_t)t->nrec * 0x80, t->end_lsn,
                                pg_begin(data, t));
            int n = snprintf(data, room, "{\"action\":\"B\",\"lsn\":\"%X/%X\",\"nextlsn\":\"%X/%X\"}",
                             (unsigned)(t->final_lsn >> 32), (unsigned)t->final_lsn,
                             (unsigned)(t->end_lsn >> 32), (unsigned)t->end_lsn);
            return xlogdata(t->final_lsn - 0x40 - (lsn_t)t->nrec * 0x80, t->end_lsn, n);
        }
        if (srv.rec_pos < t->nrec) {
            const struct rec *rc = &t->recs[srv.rec_pos];
            lsn_t at = t->final_lsn - (lsn_t)(t->nrec - srv.rec_pos) * 0x80;
            srv.rec_pos++;
            if (!sent(t, rc)) continue;
            if (srv.pgoutput) {
                int rel = rc->kind == R_B;
                if ((rc->kind == R_A || rc->kind == R_B) && !srv.rel_sent[rel]) {
                    srv.rel_sent[rel] = true;
                    srv.rec_pos--; /* the Relation first, then the change */
                    return xlogdata(at, t->end_lsn, pg_relation(data, rel));
                }
                return xlogdata(at, t->end_lsn, pg_change(data, rc, at));
            }
            return xlogdata(at, t->end_lsn, rec_line(data, room, rc));
        }
        if (srv.pgoutput) {
            srv.cursor++;
            srv.rec_pos = -1;
            return xlogdata(t->end_lsn, t->end_lsn, pg_commit(data, t));
        }
        int n = snprintf(data, room, "{\"action\":\"C\",\"lsn\":\"%X/%X\",\"nextlsn\":\"%X/%X\"}",
                         (unsigned)(t->final_lsn >> 32), (unsigned)t->final_lsn,
                         (unsigned)(t->end_lsn >> 32), (unsigned)t->end_lsn);
        srv.cursor++;
        srv.rec_pos = -1;
        return xlogdata(t->end_lsn, t->end_lsn, n);
    }
}

int WRAP(stream_read)(struct stream *s, char **buf, int *len, char *err, size_t errlen);
int WRAP(stream_read)(struct stream *s, char **buf, int *len, char *err, size_t errlen)
{
    if (!holds(s) || srv.broken) {
        if (holds(s)) srv.broken = false;
        snprintf(err, errlen, "simulated: server closed the connection unexpectedly");
        return -1;
    }
    if (srv.budget <= 0) return 0;
    srv.budget--;
    frame = frames[*(const int *)s];
    *len = next_frame();
    *buf = (char *)frame;
    return 1;
}

/* The monitor (monitor.h), with pgoutput: the publication check proves
 * membership up to the WAL position when it runs, every MONITOR_PUB_MS or
 * at once when asked (a graceful stop); until table a left the
 * publication, then it says so. It fails now and then (its connection
 * lost: nothing proven meanwhile). No slot queries, no heartbeats. */
struct monitor_model {
    bool pub;
    bool now;
    int64_t next_ms;
    int down; /* steps that fail */
};

static struct monitor_model mon;

struct monitor *WRAP(monitor_new)(const struct monitor_config *c);
struct monitor *WRAP(monitor_new)(const struct monitor_config *c)
{
    mon = (struct monitor_model){.pub = c->publication != NULL};
    return (struct monitor *)&mon;
}

void WRAP(monitor_free)(struct monitor *m);
void WRAP(monitor_free)(struct monitor *m) { (void)m; }

void WRAP(monitor_check_publication_now)(struct monitor *m);
void WRAP(monitor_check_publication_now)(struct monitor *m)
{
    (void)m;
    mon.now = true;
}

void WRAP(monitor_step)(struct monitor *m, int64_t now_ms, int64_t now_unix_us,
                        struct monitor_report *out);
void WRAP(monitor_step)(struct monitor *m, int64_t now_ms, int64_t now_unix_us,
                        struct monitor_report *out)
{
    (void)m;
    (void)now_unix_us;
    memset(out, 0, sizeof(*out));
    if (!mon.pub || (!mon.now && now_ms < mon.next_ms)) return;
    if (mon.down > 0) {
        mon.down--;
        out->failed = true;
        mon.next_ms = now_ms + MONITOR_PUB_MS;
        return;
    }
    out->pub_answer = out->pub_found = out->pub_insert = true;
    out->pub_member = srv.pub_lost_at == 0;
    out->pub_lsn = db.insert;
    mon.now = false;
    mon.next_ms = now_ms + MONITOR_PUB_MS;
}

/* backoff.c's jitter: the seed's randomness, so that a seed replays. */
int WRAP(rand)(void);
int WRAP(rand)(void) { return (int)(rnd() & 0x7fffffff); }

/* ---- a process's life ------------------------------------------------------------ */

static uint64_t kills, stops, breaks, stalls, fatal_exits, pairs;
static uint64_t kafka_commits, kafka_unseen, kafka_aborts, kafka_fences; /* over every seed */
static bool pub_stopped; /* pgoutput: stopped on the lost publication (the seed ends) */
static uint64_t unclean; /* what allows copies outside exactly_once: kill -9, a broken
                          * or fenced stream, a drain that timed out, a fatal exit, a pair */

static void set(const char *section, const char *key, const char *value)
{
    char err[512];
    if (config_set(&P->cfg, section, key, value, err, sizeof(err)) != 0) {
        fprintf(stderr, "sim: config %s.%s: %s\n", section, key, err);
        exit(2);
    }
}

/* Process i starts as the daemon's does (relay_init()): its configuration
 * (section b or not; the delivery mode of the seed; a pair's hot_standby). */
static void proc_start(int i)
{
    P = &procs[i];
    struct proc keep = *P; /* its offset file survives */
    memset(P, 0, sizeof(*P));
    P->id = i;
    memcpy(P->offset_text, keep.offset_text, sizeof(P->offset_text));
    P->offset_len = keep.offset_len;
    if (config_init(&P->cfg) != 0) abort();
    set("postgres", "plugin", srv.pgoutput ? "pgoutput" : "wal2json");
    set("http", "listen", ""); /* no HTTP server (the monitor: pgoutput's proof) */
    set("errors", "policy", "dlq");
    set("outbox.a", "table", "public.a");
    set("outbox.a", "topic", "events");
    set("outbox.a", "message_prefix", "a");
    if (with_b) {
        set("outbox.b", "table", "public.b");
        set("outbox.b", "topic", "events");
    }
    if (kafka.eos) set("delivery", "mode", "exactly_once");
    if (nprocs > 1) {
        set("postgres", "hot_standby", "true");
        set("postgres", "hot_standby_yield", "0"); /* not modelled */
    }
    snprintf(dlq_topic, sizeof(dlq_topic), "%s", P->cfg.errors_dlq_topic);
    if (relay_init(&P->r, &P->cfg, &P->stop) != 0) {
        fprintf(stderr, "sim: relay_init failed\n");
        exit(2);
    }
    P->up = true;
}

/* Process i ends (its exit, or kill -9: the same to the models, which keep
 * its offset file, the slot and Kafka; relay_free() only frees memory, and
 * destroys its client with what is in flight). */
static void proc_end(int i)
{
    P = &procs[i];
    if (!P->up) return;
    if (kafka.c[i].inflight > 0) unclean++;
    relay_free(&P->r);
    config_free(&P->cfg);
    memset(&P->cfg, 0, sizeof(P->cfg));
    memset(&P->r, 0, sizeof(P->r));
    P->up = false;
    if (srv.holder == i) srv.holder = -1; /* its connection closes */
}

static void kill9(int i)
{
    kills++;
    unclean++;
    note("kill -9 of process %d", i);
    proc_end(i);
}

/* After relay_turn() of process i: when it finished it exits; what it
 * exited with must be what the run allows. */
static void after_turn(int i)
{
    struct proc *pr = &procs[i];
    struct kclient *k = &kafka.c[i];
    if (!pr->up || pr->r.state != RS_DONE) return;
    int code = pr->r.exit_code;
    note("process %d exited %d", i, code);
    if (srv.pub_lost_at && pr->r.obs.pub_lost && code != EXIT_USAGE) {
        /* what it must do: stop (exit 1; 0 when a graceful stop's last
         * proof found it), confirmed at most to the last proof. Only an
         * operator goes on from here (deploy/guarantees.md), so the seed ends:
         * its statuses were judged as they came */
        pub_stopped = true;
        unclean++;
        proc_end(i);
        return;
    }
    if (code == EXIT_USAGE)
        judge_fail("process %d exited 2 (only an operator could go on); the replay's -v "
                   "shows its log",
                   i);
    else if (code == EXIT_FATAL && !(kafka.eos && k->refused_eos) && !k->fatal_fired)
        judge_fail("process %d exited 1 with nothing in the schedule that should stop it; "
                   "the replay's -v shows its log",
                   i);
    if (code == EXIT_FATAL) {
        fatal_exits++;
        unclean++;
    }
    if (code == EXIT_FATAL && k->refused_eos) {
        /* exactly_once cannot dead-letter a refused event: its operator
         * fixes the cause (message.max.bytes) before the restart. (Not in
         * at_least_once: an event once dead-lettered and then accepted
         * would land in its topic after its key's later events.) */
        kafka.fail_pm = 0;
        k->refused_eos = false;
    }
    k->fatal_fired = false;
    proc_end(i);
}

/* One turn of process i's loop; its wait is the simulated clock's: a
 * backoff (or standing by) may be slept through. */
static void turn(int i)
{
    P = &procs[i];
    if (!P->up || now_us < P->paused_until) return;
    server_timeouts();
    srv.budget = srv.holder == i ? (int)below(40) : 0;
    bool wait = relay_turn(&P->r);
    if (wait && P->r.state == RS_BACKOFF && chance(500) && P->r.state_until_ms * 1000 > now_us)
        now_us = P->r.state_until_ms * 1000;
    after_turn(i);
}

/* A graceful stop of process i: SIGTERM, then the daemon's own drain and
 * last status (the other process does not run meanwhile). */
static void graceful_stop(int i)
{
    procs[i].stop = 1;
    procs[i].paused_until = 0;
    for (int guard = 0; procs[i].up && guard < 100000; guard++) {
        now_us += below(20000);
        turn(i);
    }
    if (procs[i].up) {
        judge_fail("a graceful stop of process %d did not end", i);
        proc_end(i);
    }
    stops++;
    note("graceful stop of process %d", i);
}

/* ---- the judges at the end ---------------------------------------------------------- */

static uint32_t *first_seen; /* per event id: whether a delivery was seen already */

/* exactly: every event must be visible exactly once (exactly_once, or a
 * run without anything that allows copies). */
static void judge_end(bool exactly, bool b_toggled)
{
    size_t nids = db.next_id + 1;
    uint32_t *copies = calloc(nids, sizeof(*copies));
    first_seen = calloc(nids, sizeof(*first_seen));
    if (!copies || !first_seen) abort();
    for (int p = 0; p < NPART; p++)
        for (size_t j = 0; j < kafka.p[p].nlog; j++) {
            const struct entry *e = &kafka.p[p].log[j];
            if (!visible(e)) continue;
            if (e->id == 0 || e->id >= nids) {
                judge_fail("partition %d holds a message of no committed event (%llu)", p,
                           (unsigned long long)e->id);
                continue;
            }
            copies[e->id]++;
        }
    for (uint64_t id = 1; id < nids; id++) {
        enum rec_kind k = db.ev_kind[id];
        if (k == R_B || k == R_MSG_X) continue;
        if (copies[id] == 0 && !pub_stopped)
            judge_fail("event %llu (transaction %u, record %u, %s) never reached Kafka%s",
                       (unsigned long long)id, db.ev_txn[id], db.ev_rec[id], kind_name(k),
                       kafka.eos ? " in a committed transaction" : "");
        else if (exactly && copies[id] > 1 && !failed)
            judge_fail("event %llu is %u times in Kafka%s", (unsigned long long)id, copies[id],
                       kafka.eos ? " for read_committed consumers (exactly_once)"
                                 : " without a kill -9, a broken stream, a fatal exit or a "
                                   "change of sections");
    }
    /* per-key order of first deliveries, partition by partition, the
     * dead-letter topic's too (one aggregate's dead letters in order) */
    for (int p = 0; p < NPART; p++) {
        uint64_t last_pos[KEYS];
        memset(last_pos, 0, sizeof(last_pos));
        memset(first_seen, 0, nids * sizeof(*first_seen));
        for (size_t j = 0; j < kafka.p[p].nlog; j++) {
            const struct entry *e = &kafka.p[p].log[j];
            uint64_t id = e->id;
            if (!visible(e) || id == 0 || id >= nids || first_seen[id]) continue;
            first_seen[id] = 1;
            /* section b's events are judged only when it was configured
             * throughout (or never): a process without it does not send
             * them at all */
            if (b_toggled && db.ev_kind[id] == R_B) continue;
            if (db.ev_kind[id] == R_BAD) continue; /* no key: no order */
            const struct rec *rc = &db.txns[db.ev_txn[id]].recs[db.ev_rec[id]];
            uint64_t pos = ((uint64_t)db.ev_txn[id] << 20) | db.ev_rec[id];
            if (pos < last_pos[rc->key] && verbose && !failed) {
                printf("sim: partition %d around position %zu:", p, j);
                for (size_t q = j > 60 ? j - 60 : 0; q < kafka.p[p].nlog && q < j + 5; q++)
                    printf(" %llu", (unsigned long long)kafka.p[p].log[q].id);
                printf("\n");
            }
            if (pos < last_pos[rc->key])
                judge_fail("partition %d: event %llu of key k%u (transaction %u, record %u) "
                           "first came after one committed later (transaction %u, record "
                           "%u): commit order broken",
                           p, (unsigned long long)id, rc->key, db.ev_txn[id], db.ev_rec[id],
                           (unsigned)(last_pos[rc->key] >> 20),
                           (unsigned)(last_pos[rc->key] & 0xfffff));
            last_pos[rc->key] = pos;
        }
    }
    free(copies);
    free(first_seen);
}

/* ---- gap repair's order (repairplan.h) ---------------------------------------------
 *
 * A model of the outbox table as repair reads it after the slot was lost:
 * writers in concurrent transactions (top-level xids in BEGIN order, a
 * savepoint's subtransaction taking a later xid when it first writes), a
 * sequence filling the order column at insert, some transactions rolled
 * back, a retention job deleting old rows and VACUUM handing their slots to
 * later inserts (the free-space map gives the earliest page first), and
 * commit times in commit order. repair_row_cmp() with the terms
 * repair_order_terms() gives sorts every row; the judge: one key's rows in
 * commit order, then insert order. (Two commits in the same microsecond are
 * not modelled: their rows are merged by the order column, as
 * deploy/guarantees.md says.) With no order column (the terms of a table
 * without it, what repair used before issue 53) the same model must show
 * violations in some seeds, or the model proves nothing: main() counts
 * them. */

#define HEAP_LINES 8

struct mrow {
    struct repair_rowpos pos;
    uint32_t key;
    uint64_t txn_rank; /* commit order of its transaction (0: not committed) */
    uint32_t nth;      /* insert order inside its transaction */
    uint32_t txn;      /* the model transaction */
    bool live;
};

struct mtxn {
    uint64_t xid;   /* its top-level xid */
    uint32_t model; /* its number in the model */
    bool open;
    uint32_t nrows;
};

static struct mrow *mrows;
static size_t nmrows, capmrows;
static uint32_t *free_slots; /* block << 16 | line, reusable (vacuumed) */
static size_t nfree, capfree;
static uint32_t next_block, next_line;

static uint32_t heap_slot(void)
{
    if (nfree > 0) { /* the earliest free slot first */
        size_t best = 0;
        for (size_t i = 1; i < nfree; i++)
            if (free_slots[i] < free_slots[best]) best = i;
        uint32_t s = free_slots[best];
        free_slots[best] = free_slots[--nfree];
        return s;
    }
    uint32_t s = next_block << 16 | next_line;
    if (++next_line == HEAP_LINES) {
        next_line = 0;
        next_block++;
    }
    return s;
}

static void heap_free(uint32_t s)
{
    if (nfree == capfree) {
        capfree = capfree ? capfree * 2 : 256;
        free_slots = realloc(free_slots, capfree * sizeof(*free_slots));
        if (!free_slots) abort();
    }
    free_slots[nfree++] = s;
}

static const struct repair_order *sort_order;

static int by_plan(const void *a, const void *b)
{
    const struct mrow *x = a, *y = b;
    return repair_row_cmp(sort_order, &x->pos, &y->pos);
}

/* One seed of the repair model; returns the per-key order violations of
 * the plan with order_column (NULL: the terms without one). */
static uint64_t repair_seed(uint64_t seed, const char *order_column, bool report)
{
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 7;
    nmrows = nfree = 0;
    next_block = next_line = 0;
    struct mtxn tx[4] = {{0}};
    uint64_t xid = 1000, seq = 0, rank = 0, t_us = 1000000;
    uint32_t ntxn = 0;
    for (int step = 0; step < 6000; step++) {
        struct mtxn *w = &tx[below(4)];
        uint32_t p = below(100);
        if (!w->open) {
            *w = (struct mtxn){.xid = ++xid, .model = ntxn++, .open = true};
            continue;
        }
        uint32_t txn = w->model;
        if (p < 70 && w->nrows < 200) { /* an insert, now and then in a savepoint */
            if (nmrows == capmrows) {
                capmrows = capmrows ? capmrows * 2 : 4096;
                mrows = realloc(mrows, capmrows * sizeof(*mrows));
                if (!mrows) abort();
            }
            uint32_t s = heap_slot();
            uint64_t x = w->xid;
            if (w->nrows == 0 && chance(250)) x = ++xid; /* first event in a savepoint */
            mrows[nmrows++] = (struct mrow){
                .pos = {.has_order = order_column != NULL, .order = (int64_t)++seq,
                        .xid = x, .block = s >> 16, .line = (uint16_t)(s & 0xffff)},
                .key = below(6), .nth = w->nrows++, .txn = txn, .live = true};
        } else if (p < 78) { /* rolled back */
            for (size_t i = 0; i < nmrows; i++)
                if (mrows[i].txn == txn && mrows[i].live && !mrows[i].txn_rank) {
                    mrows[i].live = false;
                    heap_free((uint32_t)mrows[i].pos.block << 16 | mrows[i].pos.line);
                }
            w->open = false;
        } else if (p < 95) { /* committed */
            t_us += 1 + below(50);
            ++rank;
            for (size_t i = 0; i < nmrows; i++)
                if (mrows[i].txn == txn && mrows[i].live && !mrows[i].txn_rank) {
                    mrows[i].txn_rank = rank;
                    mrows[i].pos.time_us = (int64_t)t_us;
                }
            w->open = false;
        } else { /* retention: the oldest committed rows deleted, then VACUUM */
            size_t n = below(40);
            for (size_t i = 0; i < nmrows && n > 0; i++)
                if (mrows[i].live && mrows[i].txn_rank && mrows[i].txn_rank + 20 < rank) {
                    mrows[i].live = false;
                    heap_free((uint32_t)mrows[i].pos.block << 16 | mrows[i].pos.line);
                    n--;
                }
        }
    }
    /* The rows repair reads: committed and still there. */
    size_t n = 0;
    for (size_t i = 0; i < nmrows; i++)
        if (mrows[i].live && mrows[i].txn_rank) mrows[n++] = mrows[i];
    struct repair_order o;
    repair_order_terms(order_column, &o);
    sort_order = &o;
    qsort(mrows, n, sizeof(*mrows), by_plan);
    uint64_t last[6] = {0}, violations = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t at = mrows[i].txn_rank << 20 | mrows[i].nth;
        if (at < last[mrows[i].key]) {
            violations++;
            if (report && violations == 1)
                judge_fail("repair order: a row of key %u (transaction committed %lluth, its "
                           "row %u) planned after a later one of the same key",
                           mrows[i].key, (unsigned long long)mrows[i].txn_rank, mrows[i].nth);
        }
        if (at > last[mrows[i].key]) last[mrows[i].key] = at;
    }
    return violations;
}

/* ---- one seed ----------------------------------------------------------------------- */

static uint64_t events_total, eos_seeds, eos_events, pgo_seeds, pgo_events, pub_losses;
static uint64_t old_repair_violations; /* seeds whose plan without an order column
                                        * broke a key's order */

/* Whether the run has caught up: the process holding the slot has been
 * sent every transaction and has every event reported, nothing held, its
 * tracker idle (in exactly_once the last transaction may still be open:
 * the graceful stop commits it), and no other process has anything in
 * flight. */
static bool caught_up(void)
{
    if (srv.holder < 0 || inflight_total() > 0 || srv.cursor < db.n) return false;
    struct proc *h = &procs[srv.holder];
    return h->up && h->r.state == RS_STREAM && !changes_held(&h->r.chg) && h->r.trk &&
           tracker_idle(h->r.trk);
}

/* The process a step acts on: the only one, or one of the pair. */
static int pick(void) { return nprocs > 1 ? (int)below((uint32_t)nprocs) : 0; }

/* Whether any process is up. */
static bool any_up(void)
{
    for (int i = 0; i < nprocs; i++)
        if (procs[i].up) return true;
    return false;
}

static int run_seed(uint64_t seed, uint64_t target, int mode, int plugin, int instances)
{
    rng_state = seed * 0x2545F4914F6CDD1DULL + 1;
    failed = 0;
    failure[0] = '\0';
    memset(&db, 0, sizeof(db));
    db.insert = 0x1000000;
    db.slot_confirmed = db.insert;
    memset(&kafka, 0, sizeof(kafka));
    memset(&srv, 0, sizeof(srv));
    memset(procs, 0, sizeof(procs));
    srv.holder = -1;
    /* a pair in a fifth of the seeds, chosen apart from the schedule's
     * randomness (a single instance's seed plays as it did before pairs) */
    nprocs = instances ? instances : ((seed * 0x9E3779B97F4A7C15ULL) >> 40) % 100 < 20 ? 2 : 1;
    kafka.eos = mode == 1 || (mode < 0 && chance(350));
    srv.pgoutput = plugin == 1 || (plugin < 0 && chance(500));
    pub_stopped = false;
    memset(&mon, 0, sizeof(mon));
    bool pub_loss = srv.pgoutput && chance(150);
    kafka.queue_cap = 1 + below(chance(300) ? 8 : 400);
    kafka.fail_pm = chance(500) ? below(30) : 0;
    judged_upto = 0;
    with_b = chance(500);
    bool b_toggles = !srv.pgoutput && chance(500), b_toggled = false;
    uint32_t kill_pm = chance(400) ? 0 : 1 + below(6);
    uint32_t stop_pm = 1 + below(5), break_pm = below(4), stall_pm = below(2);
    uint32_t down_pm = below(3);
    bool bad_records = !srv.pgoutput && chance(600); /* a SQL_ASCII database's bytes:
                                                      * wal2json's JSON refuses them */
    uint64_t unclean0 = unclean;
    if (nprocs > 1) {
        pairs++;
        unclean++; /* a stalled instance's messages may land after the other's */
    }
    now_us = 1000000;
    for (int i = 0; i < nprocs; i++) proc_start(i);
    note("seed %llu: %s, %s, %d instance%s, queue %zu, refuse %u/1000, kill %u/1000, b %d "
         "(toggles %d), bad %d",
         (unsigned long long)seed, srv.pgoutput ? "pgoutput" : "wal2json",
         kafka.eos ? "exactly_once" : "at_least_once", nprocs, nprocs > 1 ? "s" : "",
         kafka.queue_cap, kafka.fail_pm, kill_pm, with_b, b_toggles, bad_records);
    while (!failed && !pub_stopped && db.next_id < target) {
        now_us += below(20000);
        uint32_t p = below(1000), at = 275;
        int i = pick();
        if (p < 250) {
            db_commit(chance(100) ? 0 : 1 + (int)below(chance(50) ? 300 : 12), true,
                      bad_records);
        } else if (p < 270) {
            db_wal_only();
        } else if (p < 275) {
            kafka.outage = (int)below(50);
        } else if (p < 276 && chance(300)) {
            kafka.c[i].fatal = true; /* in exactly_once the client is replaced; else exit 1 */
        } else if (p < 277 && chance(300)) {
            mon.down = 1 + (int)below(5); /* the monitor's connection fails a while */
        } else if (p < 278 && pub_loss && !srv.pub_lost_at) {
            srv.pub_lost_at = db.insert; /* ALTER PUBLICATION ... DROP TABLE a */
            note("table a leaves the publication at %llX", (unsigned long long)db.insert);
        } else if (!procs[i].up) {
            if (b_toggles && chance(500) && !any_up()) {
                with_b = !with_b;
                b_toggled = true;
            }
            proc_start(i);
        } else if (p < (at += kill_pm)) {
            kill9(i);
        } else if (p < (at += stop_pm)) {
            graceful_stop(i);
        } else if (p < (at += break_pm)) {
            if (srv.holder >= 0) {
                srv.broken = true; /* the connection drops */
                breaks++;
                unclean++;
            }
        } else if (p < (at += stall_pm)) {
            /* the process does not run for 50 s or more (stopped, starved):
             * past the fence its stream must end before it sends anything;
             * a pair's other instance takes the slot over once the server
             * ends the stalled one's connection (60 s) */
            if (nprocs > 1)
                procs[i].paused_until = now_us + 50000000 + (int64_t)below(30000000);
            else
                now_us += 50000000;
            stalls++;
            unclean++;
        } else if (p < (at += down_pm)) {
            srv.down = 1 + (int)below(4); /* PostgreSQL refuses connections */
            if (srv.holder >= 0) {
                srv.broken = true;
                unclean++;
            }
        } else {
            turn(i);
        }
    }
    /* The end: caught up, stopped gracefully. */
    kafka.closing = true;
    kafka.outage = 0;
    for (int i = 0; i < NPROC; i++) kafka.c[i].fatal = false;
    srv.down = 0;
    for (int i = 0; i < nprocs; i++) procs[i].paused_until = 0;
    for (int guard = 0; !failed && !pub_stopped && guard < 1000000 && !caught_up(); guard++) {
        now_us += below(20000);
        int i = pick();
        if (!procs[i].up)
            proc_start(i);
        else
            turn(i);
    }
    if (!failed && !pub_stopped && !caught_up())
        judge_fail("the relay never caught up at the end of the run");
    /* a lost publication is found by the next check, within about a second */
    for (int64_t until = now_us + 5000000;
         !failed && srv.pub_lost_at && !pub_stopped && any_up() && now_us < until;) {
        now_us += below(20000);
        turn(pick());
    }
    if (!failed && srv.pub_lost_at && !pub_stopped)
        judge_fail("table a left the publication at %X/%X and outboxd had not stopped 5 s "
                   "after it caught up",
                   (unsigned)(srv.pub_lost_at >> 32), (unsigned)srv.pub_lost_at);
    /* the standby first, then the one holding the slot */
    for (int i = 0; i < nprocs; i++)
        if (procs[i].up && srv.holder != i) graceful_stop(i);
    for (int i = 0; i < nprocs; i++)
        if (procs[i].up) graceful_stop(i);
    /* copies are allowed outside exactly_once after whatever unclean counts,
     * and in both modes after a count refused for a changed configuration
     * (the warning says so) */
    if (!failed) judge_end(!b_toggled && (kafka.eos || unclean == unclean0), b_toggled);
    /* gap repair's plan over a model table of this seed's own */
    if (!failed) repair_seed(seed, "seq", true);
    old_repair_violations += failed ? 0 : repair_seed(seed, NULL, false) > 0;
    events_total += db.next_id;
    if (kafka.eos) {
        eos_seeds++;
        eos_events += db.next_id;
    }
    if (srv.pgoutput) {
        pgo_seeds++;
        pgo_events += db.next_id;
    }
    pub_losses += pub_stopped;
    int rc = failed;
    if (failed) {
        printf("sim: seed %llu (%s, %s, %d instance%s) FAILED: %s\n", (unsigned long long)seed,
               srv.pgoutput ? "pgoutput" : "wal2json",
               kafka.eos ? "exactly_once" : "at_least_once", nprocs, nprocs > 1 ? "s" : "",
               failure);
        printf("sim: replay: outboxd-sim --seed %llu --events %llu%s%s%s -v\n",
               (unsigned long long)seed, (unsigned long long)target,
               mode == 1 ? " --mode exactly_once" : mode == 0 ? " --mode at_least_once" : "",
               plugin == 1 ? " --plugin pgoutput" : plugin == 0 ? " --plugin wal2json" : "",
               instances == 2 ? " --instances 2" : instances == 1 ? " --instances 1" : "");
    }
    for (int i = 0; i < NPROC; i++) proc_end(i);
    kafka_commits += kafka.commits;
    kafka_unseen += kafka.unseen;
    kafka_aborts += kafka.aborts;
    kafka_fences += kafka.fences;
    kafka_free();
    db_free();
    return rc;
}

int main(int argc, char **argv)
{
    uint64_t seed = 1, nseeds = 1, target = 3000;
    int mode = -1; /* -1: the seed chooses; 0: at_least_once; 1: exactly_once */
    int plugin = -1; /* -1: the seed chooses; 0: wal2json; 1: pgoutput */
    int instances = 0; /* 0: the seed chooses; 1; 2: a hot standby pair */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            nseeds = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--events") && i + 1 < argc)
            target = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--mode") && i + 1 < argc) {
            i++;
            mode = !strcmp(argv[i], "exactly_once") ? 1 : !strcmp(argv[i], "at_least_once") ? 0 : -2;
            if (mode == -2) {
                fprintf(stderr, "outboxd-sim: --mode is exactly_once or at_least_once\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--plugin") && i + 1 < argc) {
            i++;
            plugin = !strcmp(argv[i], "pgoutput") ? 1 : !strcmp(argv[i], "wal2json") ? 0 : -2;
            if (plugin == -2) {
                fprintf(stderr, "outboxd-sim: --plugin is pgoutput or wal2json\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--instances") && i + 1 < argc) {
            instances = atoi(argv[++i]);
            if (instances < 1 || instances > NPROC) {
                fprintf(stderr, "outboxd-sim: --instances is 1 or 2\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "-v"))
            verbose = true;
        else {
            fprintf(stderr, "usage: outboxd-sim [--seed S] [--seeds N] [--events E] "
                            "[--mode exactly_once|at_least_once] [--plugin pgoutput|wal2json] "
                            "[--instances 1|2] [-v]\n");
            return 2;
        }
    }
    if (getenv("SIM_TRACE")) trace_id = strtoull(getenv("SIM_TRACE"), NULL, 10);
    clock_simulate(&now_us);
    log_set_level(verbose ? LOG_INFO : LOG_ERROR);
    if (!verbose && !freopen("/dev/null", "w", stderr)) return 2;
    if (verbose) setvbuf(stdout, NULL, _IOLBF, 0); /* in step with outboxd's log */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t s = seed; s < seed + nseeds; s++) {
        if (run_seed(s, target, mode, plugin, instances)) return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("sim: %llu seeds (%llu..%llu; %llu in exactly_once, %llu with pgoutput), %llu "
           "events committed (%llu in exactly_once, %llu with pgoutput), %llu stopped on a lost "
           "publication, %llu hot standby pairs (%llu clients fenced), %llu kill -9, %llu graceful stops, %llu broken streams, "
           "%llu stalls, %llu fatal exits; Kafka transactions: %llu committed (%llu unseen by "
           "the client), %llu aborted; in %.1f s: every judge passed\n",
           (unsigned long long)nseeds, (unsigned long long)seed,
           (unsigned long long)(seed + nseeds - 1), (unsigned long long)eos_seeds,
           (unsigned long long)pgo_seeds, (unsigned long long)events_total,
           (unsigned long long)eos_events, (unsigned long long)pgo_events,
           (unsigned long long)pub_losses, (unsigned long long)pairs,
           (unsigned long long)kafka_fences,
           (unsigned long long)kills, (unsigned long long)stops, (unsigned long long)breaks,
           (unsigned long long)stalls, (unsigned long long)fatal_exits,
           (unsigned long long)kafka_commits, (unsigned long long)kafka_unseen,
           (unsigned long long)kafka_aborts, secs);
    printf("sim: gap repair's plan kept every key in commit order in every seed; without an "
           "order column (the terms before issue 53) %llu of the %llu seeds' plans broke one\n",
           (unsigned long long)old_repair_violations, (unsigned long long)nseeds);
    if (nseeds >= 100 && old_repair_violations == 0) {
        printf("sim: the repair model never broke the old order: it cannot tell right from "
               "wrong\n");
        return 1;
    }
    free(mrows);
    free(free_slots);
    return 0;
}
