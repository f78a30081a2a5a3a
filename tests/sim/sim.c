/*
 * sim.c - the deterministic simulator of the logical relay's core
 * (issue 54): one seed drives a random schedule against the daemon's own
 * decoding, change handling, tracker, confirmation, offset file format
 * and restart decision, with PostgreSQL and Kafka replaced by models, and
 * a model of what was committed judges every run. A failing seed prints
 * the one command that replays it.
 *
 *   outboxd-sim [--seed S] [--seeds N] [--events E] [-v]
 *
 * runs seeds S .. S+N-1 (default 1, 1), each until about E events were
 * committed (default 3000), and exits 1 at the first failing seed; -v
 * prints the schedule and outboxd's log.
 *
 * What runs for real (the relay's code, linked from outboxd_core):
 * wal2json's decoder on the lines a server prints, changes.c (skips,
 * dead letters, backpressure), the tracker, relayconfirm.c's statuses and
 * offset writes through confirm.c, offset_format()/offset_parse() for
 * the file kept across crashes, resume_decide()/resume_plan() and
 * relay_take_plan() at every start, relay_on_frame() for every frame.
 *
 * The models:
 *  - PostgreSQL: transactions committed in LSN order, of rows into two
 *    outbox tables (sections a and b), transactional messages of a's
 *    prefix and of another prefix, and rows that cannot be decoded (a
 *    SQL_ASCII database's Latin-1 bytes), empty and aborted transactions;
 *    the slot's confirmed position (it only moves forward); a stream sends
 *    every transaction committed at or after max(the position asked for,
 *    the slot's), whole, in commit order, wal2json filtering tables by
 *    add-tables (only the configured sections' tables reach outboxd);
 *    keepalives whose position may be the commit position of a
 *    transaction not yet sent (the race of b5052cd), some asking for a
 *    reply.
 *  - Kafka: a partition per key hash (and one for the dead-letter topic);
 *    the producer's queue has a random capacity (a full queue holds the
 *    stream); ACKs come in any order across partitions, in order within
 *    one; a delivery fails now and then with a permanent error (the event
 *    is dead-lettered); outages serve no ACK for a while.
 *  - The process: kill -9 at any step (everything in memory lost; of each
 *    partition's in-flight messages a prefix was written; the offset file
 *    as last written), graceful stops (the drain, then a forced status),
 *    broken streams (the tracker kept), and at a restart section b added or
 *    removed (the count inside a transaction must then not be used).
 *
 * The judges:
 *  - no loss: every committed event of section a (rows and messages) is in
 *    its topic or, dead-lettered, in the dead-letter topic, and every
 *    undecodable record in the dead-letter topic;
 *  - per-key order: in each partition the first deliveries of one key's
 *    events come in commit order;
 *  - confirmation: no status confirms a position past a transaction with
 *    an event of section a not yet in Kafka (checked at every status);
 *  - copies: a seed without kill -9 delivers every event exactly once.
 *
 * Not modelled yet (tests/README.md, "The simulator"): exactly_once's
 * Kafka transactions, pgoutput's binary messages, the publication proof,
 * hot standby, and gap repair's planner.
 */
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
#include "config_outbox.h"
#include "log.h"
#include "offset.h"
#include "outboxset.h"
#include "relayconfirm.h"
#include "relaystate.h"
#include "repairplan.h"
#include "resume.h"

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

/* ---- the model Kafka ------------------------------------------------------------ */

#define PARTS 6       /* the outbox topics' partitions ... */
#define DLQ_PART PARTS /* ... and the dead-letter topic's */
#define NPART (PARTS + 1)

struct msg {
    uint64_t tag;
    uint64_t id;
    uint32_t key;
    bool dlq;
    char event_id[32];
};

struct part {
    struct msg *inflight; /* handed to the producer, not yet reported */
    size_t nin, capin;
    uint64_t *log; /* ids written, in order (what consumers read) */
    size_t nlog, caplog;
};

struct kafka {
    struct part p[NPART];
    size_t queue_cap;    /* the producer's queue: full beyond it */
    uint32_t fail_pm;    /* per mille of deliveries failing for good */
    int outage;          /* steps left without any ACK */
    bool closing;        /* a drain: no outage, no more failures */
};

static struct kafka kafka;

static size_t inflight_total(void)
{
    size_t n = 0;
    for (int i = 0; i < NPART; i++) n += kafka.p[i].nin;
    return n;
}

static void log_append(struct part *p, uint64_t id)
{
    if (p->nlog == p->caplog) {
        p->caplog = p->caplog ? p->caplog * 2 : 1024;
        p->log = realloc(p->log, p->caplog * sizeof(*p->log));
        if (!p->log) abort();
    }
    p->log[p->nlog++] = id;
    if (id < db.ev_cap) db.ev_in_kafka[id] = 1;
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

static const char *dlq_topic;

/* The sink (sink.h): the producer's side of the model. */
static int sim_send(void *ctx, const struct outbox_event *ev, uint64_t tag, int *kafka_err,
                    char *err, size_t errlen)
{
    (void)ctx;
    (void)kafka_err;
    (void)err;
    (void)errlen;
    if (inflight_total() >= kafka.queue_cap) return PRODUCER_QUEUE_FULL;
    bool dlq = strcmp(ev->topic, dlq_topic) == 0;
    uint32_t key = dlq ? UINT32_MAX : key_of(&ev->key);
    struct part *p = &kafka.p[dlq ? DLQ_PART : key % PARTS];
    if (p->nin == p->capin) {
        p->capin = p->capin ? p->capin * 2 : 64;
        p->inflight = realloc(p->inflight, p->capin * sizeof(*p->inflight));
        if (!p->inflight) abort();
    }
    if (trace_id && id_of(ev) == trace_id)
        printf("sim: trace: event %llu handed to the producer (tag %llx, %s, %zu in flight "
               "there)\n",
               (unsigned long long)trace_id, (unsigned long long)tag, dlq ? "dlq" : "topic",
               p->nin);
    struct msg *m = &p->inflight[p->nin++];
    *m = (struct msg){.tag = tag, .id = id_of(ev), .key = key, .dlq = dlq};
    snprintf(m->event_id, sizeof(m->event_id), "%llu", (unsigned long long)m->id);
    return PRODUCER_OK;
}

static void kafka_free(void)
{
    for (int i = 0; i < NPART; i++) {
        free(kafka.p[i].inflight);
        free(kafka.p[i].log);
    }
    memset(&kafka, 0, sizeof(kafka));
}

/* ---- the process: one outboxd --------------------------------------------------- */

static int64_t now_us;        /* the simulated clock (clock_simulate()) */
static char offset_text[OFFSET_FILE_MAX]; /* the offset file, as last written */
static size_t offset_len;
static bool with_b;           /* section b is configured in this process */
static volatile sig_atomic_t stop_flag;

struct proc {
    bool up;
    struct config cfg;
    struct relay r;
    size_t cursor;     /* the next transaction the server sends */
    int rec_pos;       /* -1: its Begin; nrec: its Commit */
    lsn_t stream_start;
};

static struct proc pr;
static uint64_t kills, stops, breaks;

/* The offset file's I/O: the text kept across crashes. */
static int sim_write_offset(void *ctx, const char *path, const struct offset_state *st,
                            char *err, size_t errlen)
{
    (void)ctx;
    (void)path;
    size_t n = offset_format(st, offset_text, sizeof(offset_text));
    if (n == 0) {
        snprintf(err, errlen, "offset_format failed");
        return -1;
    }
    offset_len = n;
    return 0;
}

/* Judges a position about to be confirmed: every transaction committed
 * before it has each of its section-a events in Kafka. */
static void judge_confirm(lsn_t flushed)
{
    for (; db.judged_txn < db.n && db.txns[db.judged_txn].final_lsn < flushed;
         db.judged_txn++) {
        const struct txn *t = &db.txns[db.judged_txn];
        for (int i = 0; i < t->nrec; i++) {
            const struct rec *rc = &t->recs[i];
            if (rc->kind == R_B || rc->kind == R_MSG_X || db.ev_in_kafka[rc->id]) continue;
            judge_fail("confirmed %X/%X past event %llu (%s, record %d of the transaction "
                       "committed at %X/%X), which is not in Kafka",
                       (unsigned)(flushed >> 32), (unsigned)flushed,
                       (unsigned long long)rc->id, kind_name(rc->kind), i,
                       (unsigned)(t->final_lsn >> 32), (unsigned)t->final_lsn);
        }
    }
}

static lsn_t judged_upto;

static int sim_send_status(void *ctx, lsn_t written, lsn_t flushed, bool reply, char *err,
                           size_t errlen)
{
    (void)ctx;
    (void)written;
    (void)reply;
    (void)err;
    (void)errlen;
    if (flushed > judged_upto) {
        judge_confirm(flushed);
        judged_upto = flushed;
    }
    if (flushed > db.slot_confirmed) db.slot_confirmed = flushed;
    return 0;
}

static void on_report(struct msg *m, int err)
{
    struct delivery_report dr = {.tag = m->tag, .err = err};
    dr.topic = m->dlq ? dlq_topic : "events";
    dr.reason = err ? "simulated: refused for good" : NULL;
    char key[16];
    snprintf(key, sizeof(key), "k%u", m->key);
    dr.key = (struct slice){key, m->key == UINT32_MAX ? 0 : strlen(key)};
    dr.event_id = (struct slice){m->event_id, strlen(m->event_id)};
    if (changes_on_delivery(&pr.r.chg, &dr)) pr.r.events_acked++;
}

/* A refusal for good belongs to the event (too large, say): every copy of
 * it is refused, whenever it is sent. */
static bool refused(const struct msg *m)
{
    return !m->dlq && (m->id * 0x9e3779b97f4a7c15ULL >> 40) % 1000 < kafka.fail_pm;
}

/* The broker answers the head of partition i: written and ACKed, or (not
 * the dead-letter topic's) refused for good. */
static void ack_head(int i)
{
    struct part *p = &kafka.p[i];
    struct msg m = p->inflight[0];
    memmove(p->inflight, p->inflight + 1, (p->nin - 1) * sizeof(*p->inflight));
    p->nin--;
    bool refuse = refused(&m);
    if (!refuse) log_append(p, m.id);
    if (trace_id && m.id == trace_id)
        printf("sim: trace: event %llu %s\n", (unsigned long long)m.id,
               refuse ? "refused" : "written and ACKed");
    if (pr.up) on_report(&m, refuse ? RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE : 0);
}

/* One poll's reports: a few heads of random partitions. */
static void kafka_poll(void)
{
    if (kafka.outage > 0 && !kafka.closing) {
        kafka.outage--;
        return;
    }
    for (int n = 1 + (int)below(8); n > 0 && inflight_total() > 0; n--) {
        int i = (int)below(NPART);
        while (kafka.p[i].nin == 0) i = (i + 1) % NPART;
        ack_head(i);
    }
}

static void proc_free(void)
{
    if (!pr.up) return;
    changes_free(&pr.r.chg);
    tracker_free(pr.r.trk);
    decoder_free(pr.r.dec);
    metrics_free(&pr.r.met);
    outbox_set_free(&pr.r.outboxes);
    config_free(&pr.cfg);
    memset(&pr, 0, sizeof(pr));
}

static void set(const char *section, const char *key, const char *value)
{
    char err[512];
    if (config_set(&pr.cfg, section, key, value, err, sizeof(err)) != 0) {
        fprintf(stderr, "sim: config %s.%s: %s\n", section, key, err);
        exit(2);
    }
}

/* A stream starts: the daemon's restart decision on the offset file and
 * the slot, then the server's cursor at the first transaction it sends. */
static void proc_connect(bool streamed)
{
    char err[512];
    struct offset_state file;
    int have = offset_len > 0;
    if (have && offset_parse(offset_text, offset_len, &file, err, sizeof(err)) != 0) {
        judge_fail("the offset file does not parse: %s", err);
        return;
    }
    struct resume_server srv;
    resume_server_init(&srv, "7300000000000000001", 1, db.insert, "app", "outboxd",
                       "wal2json");
    srv.slot_exists = true;
    srv.slot_confirmed = db.slot_confirmed;
    struct resume_decision d;
    resume_decide(have ? &file : NULL, &srv, "sim.offset", "sim.ini", &d);
    if (d.refused) {
        judge_fail("the restart was refused: %s", d.message);
        return;
    }
    struct offset_state identity;
    resume_identity(&srv, d.start, &identity);
    identity.txn_events = outbox_set_fingerprint(&pr.r.outboxes);
    struct resume_plan plan;
    resume_plan(have ? &file : NULL, &d, 1, streamed, identity.txn_events, &plan);
    relay_take_plan(&pr.r, &identity, &plan, streamed);
    if (!pr.r.trk && !(pr.r.trk = tracker_new(plan.start))) abort();
    changes_start(&pr.r.chg, pr.r.trk, pr.r.dec);
    confirmer_stream_started(&pr.r.confirm, plan.start, clock_mono_ms());
    lsn_t from = resume_stream_from(&plan, streamed, tracker_flush_lsn(pr.r.trk));
    pr.stream_start = from > db.slot_confirmed ? from : db.slot_confirmed;
    pr.cursor = 0;
    while (pr.cursor < db.n && db.txns[pr.cursor].final_lsn < pr.stream_start) pr.cursor++;
    pr.rec_pos = -1;
    /* The confirmer sends statuses only on a stream (relay_confirm_view()'s
     * connected); the sim's I/O never reads it, so any address will do. */
    pr.r.st = (struct stream *)&pr;
    note("stream from %llX (slot %llX, plan %llX, resume_inside %d acked %llu) at txn %zu",
         (unsigned long long)pr.stream_start, (unsigned long long)db.slot_confirmed,
         (unsigned long long)plan.start, plan.resume_inside,
         (unsigned long long)plan.progress.acked, pr.cursor);
}

/* A process starts: its configuration (section b or not), then connects. */
static void proc_start(void)
{
    char err[512];
    memset(&pr, 0, sizeof(pr));
    if (config_init(&pr.cfg) != 0) abort();
    set("postgres", "plugin", "wal2json");
    set("errors", "policy", "dlq");
    set("outbox.a", "table", "public.a");
    set("outbox.a", "topic", "events");
    set("outbox.a", "message_prefix", "a");
    if (with_b) {
        set("outbox.b", "table", "public.b");
        set("outbox.b", "topic", "events");
    }
    dlq_topic = pr.cfg.errors_dlq_topic;
    struct relay *r = &pr.r;
    r->cfg = &pr.cfg;
    r->stop = &stop_flag;
    metrics_init(&r->met);
    if (config_outbox_set(&pr.cfg, &r->outboxes, err, sizeof(err)) != 0) {
        fprintf(stderr, "sim: %s\n", err);
        exit(2);
    }
    if (!(r->dec = decoder_new(PLUGIN_WAL2JSON))) abort();
    changes_init(&r->chg, &pr.cfg, &r->outboxes, &r->met, (struct sink){sim_send, NULL});
    confirmer_init(&r->confirm, "sim.offset", pr.cfg.pg_status_interval_ms, false,
                   (struct confirm_io){sim_write_offset, sim_send_status, NULL});
    pr.up = true;
    proc_connect(false);
}

/* ---- the server's frames ---------------------------------------------------------- */

/* The wal2json line of record rc of the transaction at final_lsn. */
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

/* Whether the server sends record rc (wal2json's add-tables: only the
 * configured sections' tables; messages always). */
static bool sent(const struct rec *rc) { return rc->kind != R_B || with_b; }

/* The stream's buffer: like the daemon's, it holds the last frame read
 * until the next read, and a held event (or dead letter) borrows it. */
static char line[1024];

/* The server sends one frame. Returns the relay's answer. */
static enum step server_frame(void)
{
    struct txn *t = &db.txns[pr.cursor];
    struct repl_frame f = {.kind = RF_XLOGDATA, .data = line, .wal_end = t->end_lsn};
    if (pr.rec_pos < 0) {
        f.len = (size_t)snprintf(line, sizeof(line),
                                 "{\"action\":\"B\",\"lsn\":\"%X/%X\",\"nextlsn\":\"%X/%X\"}",
                                 (unsigned)(t->final_lsn >> 32), (unsigned)t->final_lsn,
                                 (unsigned)(t->end_lsn >> 32), (unsigned)t->end_lsn);
        f.data_start = t->final_lsn - 0x40 - (lsn_t)t->nrec * 0x80;
        pr.rec_pos = 0;
    } else if (pr.rec_pos < t->nrec) {
        const struct rec *rc = &t->recs[pr.rec_pos];
        f.data_start = t->final_lsn - (lsn_t)(t->nrec - pr.rec_pos) * 0x80;
        pr.rec_pos++;
        if (!sent(rc)) return STEP_OK;
        f.len = (size_t)rec_line(line, sizeof(line), rc);
    } else {
        f.len = (size_t)snprintf(line, sizeof(line),
                                 "{\"action\":\"C\",\"lsn\":\"%X/%X\",\"nextlsn\":\"%X/%X\"}",
                                 (unsigned)(t->final_lsn >> 32), (unsigned)t->final_lsn,
                                 (unsigned)(t->end_lsn >> 32), (unsigned)t->end_lsn);
        f.data_start = t->end_lsn;
        pr.cursor++;
        pr.rec_pos = -1;
    }
    return relay_on_frame(&pr.r, &f);
}

/* A keepalive: the position the walsender has read to, which may be the
 * commit record of the next transaction, not yet sent. */
static enum step server_keepalive(void)
{
    lsn_t pos = pr.cursor < db.n ? (pr.rec_pos < 0 && chance(500)
                                        ? db.txns[pr.cursor].final_lsn
                                        : (pr.cursor ? db.txns[pr.cursor - 1].end_lsn
                                                     : pr.stream_start))
                                 : db.insert;
    if (pos < pr.stream_start) pos = pr.stream_start;
    if (pr.rec_pos >= 0) return STEP_OK; /* inside a transaction: none */
    struct repl_frame f = {.kind = RF_KEEPALIVE, .wal_end = pos, .reply_requested = chance(300)};
    return relay_on_frame(&pr.r, &f);
}

/* ---- the schedule ----------------------------------------------------------------- */

/* kill -9: the process's memory is gone; of each partition's in-flight
 * messages a prefix reached the broker's log. */
static void kill9(void)
{
    for (int i = 0; i < NPART; i++) {
        struct part *p = &kafka.p[i];
        size_t written = below((uint32_t)p->nin + 1);
        for (size_t j = 0; trace_id && j < p->nin; j++)
            if (p->inflight[j].id == trace_id)
                printf("sim: trace: event %llu in flight at kill -9: %s\n",
                       (unsigned long long)trace_id, j < written ? "written" : "lost");
        for (size_t j = 0; j < written; j++)
            if (!refused(&p->inflight[j])) log_append(p, p->inflight[j].id);
        p->nin = 0;
    }
    proc_free();
    kills++;
    note("kill -9");
}

/* Serves reports until nothing is in flight (the drain, a recovery). */
static void drain_reports(void)
{
    bool closing = kafka.closing;
    kafka.closing = true;
    for (int guard = 0; guard < 100000; guard++) {
        if (changes_held(&pr.r.chg) && changes_resume(&pr.r.chg) == STEP_FATAL) break;
        if (changes_flush_dead_letters(&pr.r.chg) == STEP_FATAL) break;
        if (inflight_total() == 0 && !changes_held(&pr.r.chg) &&
            !deadletter_busy(&pr.r.chg.dlq))
            break;
        kafka_poll();
    }
    kafka.closing = closing;
}

/* A graceful stop: the drain, a forced status, exit. */
static void graceful_stop(void)
{
    drain_reports();
    relay_send_status_ex(&pr.r, false, true);
    proc_free();
    stops++;
    note("graceful stop");
}

/* The stream breaks: the open transaction is dropped, every produced
 * event reported, and a new stream starts (the tracker kept). */
static void stream_break(void)
{
    changes_abort_open(&pr.r.chg);
    decoder_free(pr.r.dec);
    if (!(pr.r.dec = decoder_new(PLUGIN_WAL2JSON))) abort();
    drain_reports();
    relay_send_status_ex(&pr.r, false, true);
    breaks++;
    note("stream broken");
    proc_connect(true);
}

/* One turn of the relay: the held event, frames while not held, reports,
 * dead letters, the status when due. */
static void relay_turn(void)
{
    enum step rc = STEP_OK;
    if (changes_held(&pr.r.chg)) rc = changes_resume(&pr.r.chg);
    for (int n = (int)below(40); rc == STEP_OK && n > 0; n--) {
        if (pr.cursor >= db.n) {
            rc = server_keepalive();
            break;
        }
        rc = chance(50) ? server_keepalive() : server_frame();
    }
    kafka_poll();
    if (rc == STEP_OK) rc = changes_flush_dead_letters(&pr.r.chg);
    if ((rc == STEP_OK || rc == STEP_HELD) && tracker_failed(pr.r.trk)) rc = STEP_FATAL;
    if (rc == STEP_OK || rc == STEP_HELD) rc = relay_status_if_due(&pr.r) == STEP_OK ? rc
                                                                              : STEP_FATAL;
    if (rc == STEP_FATAL || rc == STEP_BROKEN || rc == STEP_USAGE) {
        /* what a fatal error does (finish_failed()), then systemd's restart */
        note("the relay stopped (step %d)", rc);
        relay_send_status_ex(&pr.r, false, true);
        drain_reports();
        proc_free();
    }
}

/* ---- the judges at the end ---------------------------------------------------------- */

static uint32_t *first_seen; /* per event id: 1 + position of first delivery, 0: none */

static void judge_end(bool no_crash, bool b_toggled)
{
    size_t nids = db.next_id + 1;
    uint32_t *copies = calloc(nids, sizeof(*copies));
    first_seen = calloc(nids, sizeof(*first_seen));
    if (!copies || !first_seen) abort();
    for (int p = 0; p < NPART; p++)
        for (size_t j = 0; j < kafka.p[p].nlog; j++) {
            uint64_t id = kafka.p[p].log[j];
            if (id == 0 || id >= nids) {
                judge_fail("partition %d holds a message of no committed event (%llu)", p,
                           (unsigned long long)id);
                continue;
            }
            copies[id]++;
        }
    for (uint64_t id = 1; id < nids; id++) {
        enum rec_kind k = db.ev_kind[id];
        if (k == R_B || k == R_MSG_X) continue;
        if (copies[id] == 0)
            judge_fail("event %llu (transaction %u, record %u, %s) never reached Kafka",
                       (unsigned long long)id, db.ev_txn[id], db.ev_rec[id], kind_name(k));
        else if (no_crash && copies[id] > 1 && !failed)
            judge_fail("event %llu reached Kafka %u times without a kill -9, a broken "
                       "stream or a change of sections",
                       (unsigned long long)id, copies[id]);
    }
    /* per-key order of first deliveries, partition by partition, the
     * dead-letter topic's too (one aggregate's dead letters in order) */
    for (int p = 0; p < NPART; p++) {
        uint64_t last_pos[KEYS];
        memset(last_pos, 0, sizeof(last_pos));
        memset(first_seen, 0, nids * sizeof(*first_seen));
        for (size_t j = 0; j < kafka.p[p].nlog; j++) {
            uint64_t id = kafka.p[p].log[j];
            if (id == 0 || id >= nids || first_seen[id]) continue;
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
                    printf(" %llu", (unsigned long long)kafka.p[p].log[q]);
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
 * deploy/README.md says.) With no order column (the terms of a table
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

static uint64_t events_total;
static uint64_t old_repair_violations; /* seeds whose plan without an order column
                                        * broke a key's order */

static int run_seed(uint64_t seed, uint64_t target)
{
    rng_state = seed * 0x2545F4914F6CDD1DULL + 1;
    failed = 0;
    failure[0] = '\0';
    memset(&db, 0, sizeof(db));
    db.insert = 0x1000000;
    db.slot_confirmed = db.insert;
    memset(&kafka, 0, sizeof(kafka));
    kafka.queue_cap = 1 + below(chance(300) ? 8 : 400);
    kafka.fail_pm = chance(500) ? below(30) : 0;
    offset_len = 0;
    judged_upto = 0;
    with_b = chance(500);
    bool b_toggles = chance(500), b_toggled = false;
    uint32_t kill_pm = chance(400) ? 0 : 1 + below(6);
    uint32_t stop_pm = 1 + below(5), break_pm = below(4);
    bool bad_records = chance(600);
    uint64_t kills0 = kills, breaks0 = breaks;
    now_us = 1000000;
    proc_start();
    note("seed %llu: queue %zu, fail %u/1000, kill %u/1000, b %d (toggles %d), bad %d",
         (unsigned long long)seed, kafka.queue_cap, kafka.fail_pm, kill_pm, with_b,
         b_toggles, bad_records);
    while (!failed && db.next_id < target) {
        now_us += below(20000);
        uint32_t p = below(1000);
        if (p < 250) {
            db_commit(chance(100) ? 0 : 1 + (int)below(chance(50) ? 300 : 12), true,
                      bad_records);
        } else if (p < 270) {
            db_wal_only();
        } else if (p < 275) {
            kafka.outage = (int)below(50);
        } else if (!pr.up) {
            if (b_toggles && chance(500)) {
                with_b = !with_b;
                b_toggled = true;
            }
            proc_start();
        } else if (p < 275 + kill_pm) {
            kill9();
        } else if (p < 275 + kill_pm + stop_pm) {
            graceful_stop();
        } else if (p < 275 + kill_pm + stop_pm + break_pm) {
            stream_break();
        } else {
            relay_turn();
        }
    }
    /* The end: every section configured as at the start of the run's
     * judgement (a), caught up, stopped gracefully. */
    for (int guard = 0; !failed && guard < 1000000; guard++) {
        now_us += below(20000);
        if (!pr.up) {
            proc_start();
            continue;
        }
        if (pr.cursor >= db.n && inflight_total() == 0 && !changes_held(&pr.r.chg) &&
            tracker_idle(pr.r.trk))
            break;
        relay_turn();
    }
    if (pr.up) graceful_stop();
    /* copies are allowed after a kill -9, a broken stream, and a count
     * refused for a changed configuration (the warning says so) */
    if (!failed) judge_end(kills == kills0 && breaks == breaks0 && !b_toggled, b_toggled);
    /* gap repair's plan over a model table of this seed's own */
    if (!failed) repair_seed(seed, "seq", true);
    old_repair_violations += failed ? 0 : repair_seed(seed, NULL, false) > 0;
    events_total += db.next_id;
    int rc = failed;
    if (failed) {
        printf("sim: seed %llu FAILED: %s\n", (unsigned long long)seed, failure);
        printf("sim: replay: outboxd-sim --seed %llu --events %llu -v\n",
               (unsigned long long)seed, (unsigned long long)target);
    }
    proc_free();
    kafka_free();
    db_free();
    return rc;
}

int main(int argc, char **argv)
{
    uint64_t seed = 1, nseeds = 1, target = 3000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--seeds") && i + 1 < argc)
            nseeds = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--events") && i + 1 < argc)
            target = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-v"))
            verbose = true;
        else {
            fprintf(stderr, "usage: outboxd-sim [--seed S] [--seeds N] [--events E] [-v]\n");
            return 2;
        }
    }
    if (getenv("SIM_TRACE")) trace_id = strtoull(getenv("SIM_TRACE"), NULL, 10);
    clock_simulate(&now_us);
    log_set_level(verbose ? LOG_INFO : LOG_ERROR);
    if (!verbose && !freopen("/dev/null", "w", stderr)) return 2;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint64_t s = seed; s < seed + nseeds; s++) {
        if (run_seed(s, target)) return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("sim: %llu seeds (%llu..%llu), %llu events committed, %llu kill -9, %llu graceful "
           "stops, %llu broken streams, in %.1f s: every judge passed\n",
           (unsigned long long)nseeds, (unsigned long long)seed,
           (unsigned long long)(seed + nseeds - 1), (unsigned long long)events_total,
           (unsigned long long)kills, (unsigned long long)stops, (unsigned long long)breaks,
           secs);
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
