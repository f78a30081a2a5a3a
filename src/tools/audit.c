/*
 * audit.c - outbox rows against Kafka messages (see audit.h). Pure.
 *
 * Everything added is copied into an arena owned by the audit; topics are
 * interned (one copy each, a small open-addressing hash). audit_run()
 * works on sorted arrays of pointers, rebuilt on every run:
 *   by event_id (rows, messages) -> found / duplicates / unknown, and the
 *      first message of each event_id under a topic + key;
 *   by event_id (rows, dead-letter records) -> dead-lettered / unmatched;
 *   by topic, key, partition, offset (messages) -> order violations.
 */
#include "audit.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"

#define ARENA_BLOCK (64 * 1024)

struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    char data[];
};

struct arow {
    struct slice id, key;
    int32_t topic; /* index into topics, -1: none */
    bool has_version, in_scope, found;
    int64_t version;
    const struct amsg *dead_letter; /* a dead-letter record of it, or NULL */
};

struct amsg {
    struct slice id, key;
    int32_t topic;
    int32_t partition;
    int64_t offset;
    bool has_version;
    bool first; /* first message of its event_id under its topic + key */
    int64_t version;
    struct slice dlq_error; /* dead-letter records */
};

struct audit {
    struct arena_block *arena; /* owned chain */
    struct arow *rows;         /* owned */
    size_t nrows, rows_cap;
    struct amsg *msgs; /* owned */
    size_t nmsgs, msgs_cap;
    struct amsg *dlq; /* owned: dead-letter records (topic unused, -1) */
    size_t ndlq, dlq_cap;
    const char **topics; /* owned array; strings in the arena */
    bool *topic_of_rows; /* owned; topic of an in-scope row */
    size_t ntopics, topics_cap;
    uint32_t *slots;       /* owned; topic index + 1, 0 = empty */
    size_t nslots;         /* power of two */
    struct slice *unknown; /* owned array; data in the arena */
    size_t nunknown;
};

/* ---- arena --------------------------------------------------------------- */

/* Copies len bytes plus a NUL into the arena. NULL on out of memory. */
static char *arena_copy(struct audit *a, const char *p, size_t len)
{
    struct arena_block *b = a->arena;
    if (!b || b->cap - b->used < len + 1) {
        size_t cap = len + 1 > ARENA_BLOCK ? len + 1 : ARENA_BLOCK;
        b = malloc(sizeof(*b) + cap);
        if (!b) return NULL;
        b->next = a->arena;
        b->used = 0;
        b->cap = cap;
        a->arena = b;
    }
    char *out = b->data + b->used;
    if (len) memcpy(out, p, len);
    out[len] = '\0';
    b->used += len + 1;
    return out;
}

/* A copy of s in the arena; a NULL slice stays NULL. Returns -1 on OOM. */
static int copy_slice(struct audit *a, struct slice s, struct slice *out)
{
    out->len = s.len;
    out->data = NULL;
    if (!s.data) return 0;
    out->data = arena_copy(a, s.data, s.len);
    return out->data ? 0 : -1;
}

/* ---- topic interning ----------------------------------------------------- */

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static int grow_slots(struct audit *a)
{
    size_t n = a->nslots ? a->nslots * 2 : 64;
    uint32_t *s = calloc(n, sizeof(*s));
    if (!s) return -1;
    for (size_t i = 0; i < a->ntopics; i++) {
        size_t j = hash_str(a->topics[i]) & (n - 1);
        while (s[j])
            j = (j + 1) & (n - 1);
        s[j] = (uint32_t)i + 1;
    }
    free(a->slots);
    a->slots = s;
    a->nslots = n;
    return 0;
}

/* Index of topic t, added when new. Returns -1 on out of memory. */
static int32_t intern_topic(struct audit *a, const char *t)
{
    if ((a->ntopics + 1) * 2 > a->nslots && grow_slots(a) != 0) return -1;
    size_t j = hash_str(t) & (a->nslots - 1);
    for (; a->slots[j]; j = (j + 1) & (a->nslots - 1))
        if (!strcmp(a->topics[a->slots[j] - 1], t)) return (int32_t)a->slots[j] - 1;
    if (a->ntopics == a->topics_cap) {
        size_t cap = a->topics_cap ? a->topics_cap * 2 : 16;
        const char **nt = realloc(a->topics, cap * sizeof(*nt));
        if (!nt) return -1;
        a->topics = nt;
        bool *nr = realloc(a->topic_of_rows, cap * sizeof(*nr));
        if (!nr) return -1;
        a->topic_of_rows = nr;
        a->topics_cap = cap;
    }
    const char *copy = arena_copy(a, t, strlen(t));
    if (!copy) return -1;
    a->topics[a->ntopics] = copy;
    a->topic_of_rows[a->ntopics] = false;
    a->slots[j] = (uint32_t)++a->ntopics;
    return (int32_t)a->ntopics - 1;
}

/* ---- building ------------------------------------------------------------ */

struct audit *audit_new(void)
{
    return calloc(1, sizeof(struct audit));
}

void audit_free(struct audit *a)
{
    if (!a) return;
    while (a->arena) {
        struct arena_block *next = a->arena->next;
        free(a->arena);
        a->arena = next;
    }
    free(a->rows);
    free(a->msgs);
    free(a->dlq);
    free(a->topics);
    free(a->topic_of_rows);
    free(a->slots);
    free(a->unknown);
    free(a);
}

/* Makes room for one more element of size sz in *arr. Returns -1 on OOM. */
static int reserve(void **arr, size_t n, size_t *cap, size_t sz)
{
    return grow_array(arr, cap, n + 1, sz, 256);
}

int audit_add_row(struct audit *a, const struct audit_row *row)
{
    if (reserve((void **)&a->rows, a->nrows, &a->rows_cap, sizeof(*a->rows))) return -1;
    struct arow *r = &a->rows[a->nrows];
    memset(r, 0, sizeof(*r));
    r->topic = -1;
    if (row->in_scope && row->topic) {
        if ((r->topic = intern_topic(a, row->topic)) < 0) return -1;
        a->topic_of_rows[r->topic] = true;
    }
    if (copy_slice(a, row->event_id, &r->id) || copy_slice(a, row->key, &r->key)) return -1;
    r->has_version = row->has_version;
    r->version = row->version;
    r->in_scope = row->in_scope;
    a->nrows++;
    return 0;
}

int audit_add_message(struct audit *a, const struct audit_msg *msg)
{
    if (reserve((void **)&a->msgs, a->nmsgs, &a->msgs_cap, sizeof(*a->msgs))) return -1;
    struct amsg *m = &a->msgs[a->nmsgs];
    memset(m, 0, sizeof(*m));
    if ((m->topic = intern_topic(a, msg->topic)) < 0) return -1;
    if (copy_slice(a, msg->event_id, &m->id) || copy_slice(a, msg->key, &m->key)) return -1;
    m->partition = msg->partition;
    m->offset = msg->offset;
    m->has_version = msg->has_version;
    m->version = msg->version;
    a->nmsgs++;
    return 0;
}

int audit_add_dead_letter(struct audit *a, const struct audit_msg *msg)
{
    if (reserve((void **)&a->dlq, a->ndlq, &a->dlq_cap, sizeof(*a->dlq))) return -1;
    struct amsg *m = &a->dlq[a->ndlq];
    memset(m, 0, sizeof(*m));
    m->topic = -1;
    if (copy_slice(a, msg->event_id, &m->id) || copy_slice(a, msg->key, &m->key) ||
        copy_slice(a, msg->dlq_error, &m->dlq_error))
        return -1;
    m->partition = msg->partition;
    m->offset = msg->offset;
    a->ndlq++;
    return 0;
}

int audit_topics(const struct audit *a, const char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t count = 0;
    for (size_t i = 0; i < a->ntopics; i++)
        count += a->topic_of_rows[i];
    if (!count) return 0;
    if (!(*out = malloc(count * sizeof(**out)))) return -1;
    for (size_t i = 0; i < a->ntopics; i++)
        if (a->topic_of_rows[i]) (*out)[(*n)++] = a->topics[i];
    return 0;
}

const struct slice *audit_unknown_ids(const struct audit *a, size_t *n)
{
    *n = a->nunknown;
    return a->unknown;
}

bool audit_report_ok(const struct audit_report *r, bool exactly_once)
{
    return r->missing == 0 && r->order_violations == 0 &&
           (!exactly_once || r->duplicates == 0);
}

bool audit_parse_version(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    bool neg = len > 0 && s[0] == '-';
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (neg) i++;
    if (i == len) return false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (limit - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* ---- comparison helpers -------------------------------------------------- */

/* NULL sorts before every value. */
static int cmp_slice(struct slice x, struct slice y)
{
    if (!x.data || !y.data) return (x.data != NULL) - (y.data != NULL);
    int c = memcmp(x.data, y.data, x.len < y.len ? x.len : y.len);
    if (c) return c;
    return (x.len > y.len) - (x.len < y.len);
}

#define CMP_NUM(x, y) (((x) > (y)) - ((x) < (y)))

static int cmp_row_id(const void *pa, const void *pb)
{
    const struct arow *x = *(const struct arow *const *)pa,
                      *y = *(const struct arow *const *)pb;
    return cmp_slice(x->id, y->id);
}

/* (topic, key, partition, offset) */
static int cmp_msg_pos(const struct amsg *x, const struct amsg *y)
{
    int c = CMP_NUM(x->topic, y->topic);
    if (!c) c = cmp_slice(x->key, y->key);
    if (!c) c = CMP_NUM(x->partition, y->partition);
    if (!c) c = CMP_NUM(x->offset, y->offset);
    return c;
}

static int cmp_msg_by_key(const void *pa, const void *pb)
{
    return cmp_msg_pos(*(const struct amsg *const *)pa, *(const struct amsg *const *)pb);
}

static int cmp_msg_by_id(const void *pa, const void *pb)
{
    const struct amsg *x = *(const struct amsg *const *)pa,
                      *y = *(const struct amsg *const *)pb;
    int c = cmp_slice(x->id, y->id);
    return c ? c : cmp_msg_pos(x, y);
}

static bool same_topic_key(const struct amsg *x, const struct amsg *y)
{
    return x->topic == y->topic && cmp_slice(x->key, y->key) == 0;
}

static const char *topic_name(const struct audit *a, int32_t t)
{
    return t >= 0 ? a->topics[t] : NULL;
}

/* Appends an example of kind k for message m (if there is room). */
static struct audit_example *add_msg_example(const struct audit *a, struct audit_report *r,
                                             enum audit_kind k, const struct amsg *m)
{
    if (r->nexamples[k] == AUDIT_MAX_EXAMPLES) return NULL;
    struct audit_example *e = &r->examples[k][r->nexamples[k]++];
    *e = (struct audit_example){.event_id = m->id,
                                .topic = topic_name(a, m->topic),
                                .key = m->key,
                                .partition = m->partition,
                                .offset = m->offset,
                                .has_version = m->has_version,
                                .version = m->version,
                                .first_partition = -1};
    return e;
}

/* ---- the passes ---------------------------------------------------------- */

enum found { NOT_FOUND = 0, FOUND_OUT_OF_SCOPE, FOUND_IN_SCOPE };

/* Index of the first row with an event_id >= id in byid[0..n). */
static size_t first_row(struct arow **byid, size_t n, struct slice id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_slice(byid[mid]->id, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Marks the rows with event_id id as found; says whether one is in scope. */
static enum found find_rows(struct arow **byid, size_t n, struct slice id)
{
    size_t lo = first_row(byid, n, id);
    enum found f = NOT_FOUND;
    for (; lo < n && cmp_slice(byid[lo]->id, id) == 0; lo++) {
        byid[lo]->found = true;
        if (f != FOUND_IN_SCOPE)
            f = byid[lo]->in_scope ? FOUND_IN_SCOPE : FOUND_OUT_OF_SCOPE;
    }
    return f;
}

/* One group of n messages sharing an event_id. */
static void check_event(struct audit *a, struct audit_report *r, struct arow **rows,
                        size_t nrows, struct amsg **g, size_t n)
{
    if (n > 1) {
        r->duplicates += n - 1;
        r->duplicate_events++;
        struct audit_example *e = add_msg_example(a, r, AK_DUPLICATE, g[1]);
        if (e) e->copies = n;
    }
    enum found f = find_rows(rows, nrows, g[0]->id);
    /* An event outside the scope (older than --since) first went out before
     * the messages read: the copies seen are re-deliveries, not ordered. */
    for (size_t i = 0; i < n; i++)
        g[i]->first =
            f != FOUND_OUT_OF_SCOPE && (i == 0 || !same_topic_key(g[i - 1], g[i]));
    if (f != NOT_FOUND) return;
    r->unknown += n;
    for (size_t i = 0; i < n; i++)
        add_msg_example(a, r, AK_UNKNOWN, g[i]);
    a->unknown[a->nunknown++] = g[0]->id;
}

/* Found / duplicates / unknown, and the first-occurrence marks. */
static int pass_events(struct audit *a, struct audit_report *r)
{
    int rc = -1;
    size_t nrows = 0, nmsgs = 0;
    struct arow **rows = malloc((a->nrows + 1) * sizeof(*rows));
    struct amsg **msgs = malloc((a->nmsgs + 1) * sizeof(*msgs));
    free(a->unknown);
    a->nunknown = 0;
    a->unknown = malloc((a->nmsgs + a->ndlq + 1) * sizeof(*a->unknown));
    if (!rows || !msgs || !a->unknown) goto out;
    for (size_t i = 0; i < a->nrows; i++) {
        a->rows[i].found = false;
        if (a->rows[i].id.data) rows[nrows++] = &a->rows[i];
    }
    for (size_t i = 0; i < a->nmsgs; i++) {
        a->msgs[i].first = false;
        if (a->msgs[i].id.data) msgs[nmsgs++] = &a->msgs[i];
    }
    qsort(rows, nrows, sizeof(*rows), cmp_row_id);
    qsort(msgs, nmsgs, sizeof(*msgs), cmp_msg_by_id);
    for (size_t i = 0, j; i < nmsgs; i = j) {
        for (j = i + 1; j < nmsgs && cmp_slice(msgs[j]->id, msgs[i]->id) == 0; j++) {
        }
        check_event(a, r, rows, nrows, msgs + i, j - i);
    }
    for (size_t i = 0; i < a->nmsgs; i++) { /* no event_id: unknown */
        if (a->msgs[i].id.data) continue;
        r->unknown++;
        add_msg_example(a, r, AK_UNKNOWN, &a->msgs[i]);
    }
    rc = 0;
out:
    free(rows);
    free(msgs);
    return rc;
}

/* Links each row to a dead-letter record of its event_id; counts the
 * records of no row (their ids join the unknown ones, to be looked up). */
static int pass_dead_letters(struct audit *a, struct audit_report *r)
{
    size_t nrows = 0;
    struct arow **rows = malloc((a->nrows + 1) * sizeof(*rows));
    if (!rows) return -1;
    for (size_t i = 0; i < a->nrows; i++) {
        a->rows[i].dead_letter = NULL;
        if (a->rows[i].id.data) rows[nrows++] = &a->rows[i];
    }
    qsort(rows, nrows, sizeof(*rows), cmp_row_id);
    r->dead_letters = a->ndlq;
    for (size_t i = 0; i < a->ndlq; i++) {
        const struct amsg *m = &a->dlq[i];
        size_t j = m->id.data ? first_row(rows, nrows, m->id) : nrows;
        bool matched = false;
        for (; j < nrows && cmp_slice(rows[j]->id, m->id) == 0; j++) {
            matched = true;
            if (!rows[j]->dead_letter) rows[j]->dead_letter = m;
        }
        if (matched) continue;
        r->dead_letters_unmatched++;
        if (m->id.data) a->unknown[a->nunknown++] = m->id;
    }
    free(rows);
    return 0;
}

/* An example of kind k for row (partition and offset: its dead-letter
 * record's, if any), if there is room. */
static void add_row_example(const struct audit *a, struct audit_report *r, enum audit_kind k,
                            const struct arow *row)
{
    if (r->nexamples[k] == AUDIT_MAX_EXAMPLES) return;
    const struct amsg *d = row->dead_letter;
    r->examples[k][r->nexamples[k]++] =
        (struct audit_example){.event_id = row->id,
                               .topic = topic_name(a, row->topic),
                               .key = row->key,
                               .partition = d ? d->partition : -1,
                               .offset = d ? d->offset : -1,
                               .dlq_error = d ? d->dlq_error : (struct slice){NULL, 0},
                               .has_version = row->has_version,
                               .version = row->version,
                               .first_partition = -1};
}

static void pass_missing(const struct audit *a, struct audit_report *r)
{
    for (size_t i = 0; i < a->nrows; i++) {
        const struct arow *row = &a->rows[i];
        if (!row->in_scope || row->found) continue;
        if (row->dead_letter) {
            r->dead_lettered++;
            add_row_example(a, r, AK_DEAD_LETTERED, row);
            continue;
        }
        r->missing++;
        add_row_example(a, r, AK_MISSING, row);
    }
}

/* One topic + key, messages in (partition, offset) order. */
static void check_key(const struct audit *a, struct audit_report *r, struct amsg **g,
                      size_t n)
{
    bool split = false, have_max = false;
    int64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        const struct amsg *m = g[i];
        if (m->partition != g[0]->partition && !split) {
            split = true;
            r->split_keys++;
            struct audit_example *e = add_msg_example(a, r, AK_ORDER, m);
            if (e) {
                e->split = true;
                e->first_partition = g[0]->partition;
            }
        }
        if (i > 0 && m->partition != g[i - 1]->partition) have_max = false;
        if (!m->first || !m->has_version) continue;
        if (have_max && m->version < max) {
            r->version_regressions++;
            struct audit_example *e = add_msg_example(a, r, AK_ORDER, m);
            if (e) e->prev_version = max;
            continue;
        }
        if (!have_max || m->version > max) max = m->version;
        have_max = true;
    }
}

static int pass_order(const struct audit *a, struct audit_report *r)
{
    size_t n = 0;
    struct amsg **msgs = malloc((a->nmsgs + 1) * sizeof(*msgs));
    if (!msgs) return -1;
    for (size_t i = 0; i < a->nmsgs; i++)
        if (a->msgs[i].key.data) msgs[n++] = &a->msgs[i];
    qsort(msgs, n, sizeof(*msgs), cmp_msg_by_key);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && same_topic_key(msgs[i], msgs[j]); j++) {
        }
        check_key(a, r, msgs + i, j - i);
    }
    free(msgs);
    r->order_violations = r->version_regressions + r->split_keys;
    return 0;
}

int audit_run(struct audit *a, struct audit_report *r)
{
    memset(r, 0, sizeof(*r));
    r->known_rows = a->nrows;
    r->messages = a->nmsgs;
    for (size_t i = 0; i < a->nrows; i++)
        r->rows += a->rows[i].in_scope;
    for (size_t i = 0; i < a->ntopics; i++)
        r->topics += a->topic_of_rows[i];
    if (pass_events(a, r) != 0 || pass_dead_letters(a, r) != 0) return -1;
    pass_missing(a, r);
    return pass_order(a, r);
}
