/*
 * outbox.c - from an inserted outbox row to the Kafka message outboxd
 * produces: topic routing through a ${column} template, the key, the value
 * and the headers. Pure: borrows the decoder's values, allocates nothing
 * per event (but to grow the map's scratch: decoded bytea values, the
 * JSON value).
 */
#include "outbox.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytea.h"
#include "clock.h"
#include "grow.h"
#include "heartbeat.h"
#include "jsonvalue.h"
#include "str.h"

static const char *const col_names[OC__COUNT] = {
    "event_id", "aggregate_type", "aggregate_id", "aggregate_version", "event_type",
    "payload",
};

const char *outbox_col_name(enum outbox_col c)
{
    return (c >= 0 && c < OC__COUNT) ? col_names[c] : NULL;
}

/* ---- topic template ------------------------------------------------------
 * A template is a list of segments; each is literal text or a column name.
 * "outbox.${aggregate_type}.v1" -> [lit "outbox."][col aggregate_type][lit ".v1"]
 */
struct segment {
    bool is_column;
    char *text; /* literal text or column name; owned */
    size_t len;
    /* The column's index in the last relation layout rendered (-1 absent):
     * looking a name up per row costs more than the rest of the row. */
    uint64_t layout_id;
    int col;
};

struct topic_template {
    int nsegs;
    struct segment *segs;
};

void topic_template_free(struct topic_template *t)
{
    if (!t) return;
    for (int i = 0; i < t->nsegs; i++) free(t->segs[i].text);
    free(t->segs);
    free(t);
}

static int add_segment(struct topic_template *t, bool is_column, const char *s,
                       size_t len)
{
    struct segment *n = realloc(t->segs, (size_t)(t->nsegs + 1) * sizeof(*n));
    if (!n) return -1;
    t->segs = n;
    char *text = strndup(s, len);
    if (!text) return -1;
    n[t->nsegs++] = (struct segment){is_column, text, len, 0, -1};
    return 0;
}

struct topic_template *topic_template_parse(const char *tmpl, char *err, size_t errlen)
{
    struct topic_template *t = calloc(1, sizeof(*t));
    if (!t) goto oom;
    const char *p = tmpl;
    while (*p) {
        const char *open = strstr(p, "${");
        if (!open) {
            if (add_segment(t, false, p, strlen(p)) != 0) goto oom;
            break;
        }
        if (open > p && add_segment(t, false, p, (size_t)(open - p)) != 0) goto oom;
        const char *close = strchr(open + 2, '}');
        if (!close) {
            snprintf(err, errlen, "topic template \"%s\": unclosed \"${\"", tmpl);
            goto fail;
        }
        if (close == open + 2) {
            snprintf(err, errlen, "topic template \"%s\": empty \"${}\"", tmpl);
            goto fail;
        }
        if (add_segment(t, true, open + 2, (size_t)(close - open - 2)) != 0) goto oom;
        p = close + 1;
    }
    if (t->nsegs == 0) {
        snprintf(err, errlen, "topic template is empty");
        goto fail;
    }
    return t;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    topic_template_free(t);
    return NULL;
}

static int column_index(const struct relation *rel, const char *name)
{
    for (int i = 0; i < rel->ncols; i++)
        if (strcmp(rel->cols[i].name, name) == 0) return i;
    return -1;
}

int topic_template_render(const struct topic_template *t, const struct relation *rel,
                          const struct col_value *values, int nvalues, char *out,
                          size_t outlen, char *err, size_t errlen)
{
    size_t n = 0;
    for (int i = 0; i < t->nsegs; i++) {
        struct segment *s = &t->segs[i];
        const char *data = s->text;
        size_t len = s->len;
        if (s->is_column) {
            if (rel->layout_id == 0 || s->layout_id != rel->layout_id) {
                s->col = column_index(rel, s->text);
                s->layout_id = rel->layout_id;
            }
            int ci = s->col;
            if (ci < 0 || ci >= nvalues) {
                snprintf(err, errlen, "topic template: column \"%s\" is not in %s.%s",
                         s->text, rel->nspname, rel->relname);
                return -1;
            }
            if (values[ci].kind != CV_TEXT && values[ci].kind != CV_BINARY) {
                snprintf(err, errlen, "topic template: column \"%s\" is NULL", s->text);
                return -1;
            }
            data = values[ci].data;
            len = values[ci].len;
        }
        if (n + len >= outlen) {
            snprintf(err, errlen, "topic template: rendered topic longer than %zu bytes",
                     outlen - 1);
            return -1;
        }
        memcpy(out + n, data, len);
        n += len;
    }
    out[n] = '\0';
    return (int)n;
}

/* ---- outbox map -------------------------------------------------------- */

/* What outbox_is_table() and the column lookups found for one relation
 * layout (relation.layout_id; 0 means "not cacheable", e.g. a hand-built
 * relation). A relay sees one outbox layout for millions of rows: finding
 * the columns by name for each row was the largest cost of building an
 * event. Heap memory, so a const map can still fill it. */
struct map_cache {
    uint64_t layout_id;
    bool is_outbox;
    int col[OC__COUNT]; /* index in the relation, -1 when absent */
    int hcol[OUTBOX_SPEC_HEADERS]; /* the same for hspecs[i] of OUTBOX_HS_COLUMN */
    int span_col;                 /* the span-context column's, -1 when absent */
    bool has_bytea;               /* the layout has a bytea column */
    struct jbuf value;            /* the JSON value (value_json); owned */
    /* A row of a layout with a bytea column: its values with each bytea
     * text decoded (decoded_values()), the bytes in `bytes`; owned. */
    struct col_value *vals;
    size_t vals_cap;
    char *bytes;
    size_t bytes_cap;
    /* The last rendered topic that passed outbox_topic_valid(): most
     * events go to the topic the previous one went to, and comparing is
     * cheaper than checking every character again. */
    char valid_topic[OUTBOX_TOPIC_MAX];
    /* The last commit LSN formatted: every event of a transaction carries
     * the same one, and formatting it for each was 150 instructions. */
    lsn_t lsn;
    bool lsn_valid;
    char lsn_text[LSN_STRLEN];
    size_t lsn_len;
};

static const struct map_cache *cache_for(const struct outbox_map *m,
                                         const struct relation *rel)
{
    struct map_cache *c = m->cache;
    if (rel->layout_id != 0 && c->layout_id == rel->layout_id) return c;
    c->layout_id = rel->layout_id;
    c->is_outbox =
        strcmp(rel->relname, m->table) == 0 && strcmp(rel->nspname, m->schema) == 0;
    for (int i = 0; i < OC__COUNT; i++) c->col[i] = column_index(rel, m->columns[i]);
    for (int i = 0; i < m->nhspecs; i++)
        c->hcol[i] = m->hspecs[i].source == OUTBOX_HS_COLUMN
                         ? column_index(rel, m->hspecs[i].column)
                         : -1;
    c->span_col = m->span_column ? column_index(rel, m->span_column) : -1;
    c->has_bytea = false;
    for (int i = 0; i < rel->ncols; i++) c->has_bytea |= rel->cols[i].typid == BYTEA_OID;
    return c;
}

int outbox_map_init(struct outbox_map *m, const char *table,
                    const char *const columns[OC__COUNT], const char *topic, char *err,
                    size_t errlen)
{
    memset(m, 0, sizeof(*m));
    const char *dot = strchr(table, '.');
    if (dot) {
        m->schema = strndup(table, (size_t)(dot - table));
        m->table = strdup(dot + 1);
    } else {
        m->schema = strdup("public");
        m->table = strdup(table);
    }
    if (!m->schema || !m->table) goto oom;
    if (!*m->schema || !*m->table) {
        snprintf(err, errlen, "[outbox] table \"%s\": expected schema.table", table);
        goto fail;
    }
    for (int i = 0; i < OC__COUNT; i++)
        if (!(m->columns[i] = strdup(columns[i]))) goto oom;
    if (!(m->cache = calloc(1, sizeof(*m->cache)))) goto oom;
    if (!(m->topic = topic_template_parse(topic, err, errlen))) goto fail;
    if (outbox_map_set_headers(m, OUTBOX_HEADERS_DEFAULT, NULL, err, errlen) != 0) goto fail;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    outbox_map_free(m);
    return -1;
}

static void hspecs_clear(struct outbox_map *m);

void outbox_map_free(struct outbox_map *m)
{
    free(m->schema);
    free(m->table);
    for (int i = 0; i < OC__COUNT; i++) free(m->columns[i]);
    topic_template_free(m->topic);
    hspecs_clear(m);
    if (m->cache) {
        free(m->cache->value.data);
        free(m->cache->vals);
        free(m->cache->bytes);
    }
    free(m->cache);
    free(m->span_column);
    free(m->message_prefix);
    memset(m, 0, sizeof(*m));
}

/* ---- headers ------------------------------------------------------------ */

static void hspecs_clear(struct outbox_map *m)
{
    for (int i = 0; i < m->nhspecs; i++) {
        free(m->hspecs[i].column);
        free(m->hspecs[i].name);
    }
    m->nhspecs = 0;
    m->nenvelope = 0;
    if (m->cache) m->cache->layout_id = 0; /* the column positions are stale */
}

/* Appends a header spec (column: NULL unless OUTBOX_HS_COLUMN); -1 with
 * err when the list is full or memory runs out. */
static int hspec_add(struct outbox_map *m, int source, const char *column, const char *name,
                     bool envelope, char *err, size_t errlen)
{
    if (m->nhspecs == OUTBOX_SPEC_HEADERS) {
        snprintf(err, errlen, "more than %d headers", OUTBOX_SPEC_HEADERS);
        return -1;
    }
    struct outbox_hspec *h = &m->hspecs[m->nhspecs];
    h->source = source;
    h->envelope = envelope;
    m->nenvelope += envelope;
    h->column = column ? strdup(column) : NULL;
    h->name = strdup(name);
    if (!h->name || (column && !h->column)) {
        free(h->column);
        free(h->name);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->nhspecs++;
    return 0;
}

/* "event_id" ... "payload", "commit_lsn": the source, or -1. */
static int header_field(const char *name)
{
    for (int i = 0; i < OC__COUNT; i++)
        if (strcmp(name, col_names[i]) == 0) return i;
    return strcmp(name, "commit_lsn") == 0 ? OUTBOX_HS_COMMIT_LSN : -1;
}

/* [outbox] headers: FIELD[:NAME], ... or "none". */
static int parse_headers(struct outbox_map *m, const char *list, char *err, size_t errlen)
{
    char item[160];
    int n;
    const char *p = list;
    if (strcmp(list, "none") == 0) return 0;
    while ((n = str_next_item(&p, item, sizeof(item))) != -1) {
        if (n <= 0) {
            snprintf(err, errlen, "[outbox] headers \"%s\": %s item", list,
                     n == 0 ? "an empty" : "an over-long");
            return -1;
        }
        char *name = strchr(item, ':');
        if (name) *name++ = '\0';
        int f = header_field(item);
        if (f < 0 || f == OC_PAYLOAD) {
            snprintf(err, errlen,
                     "[outbox] headers: \"%s\" is not one of event_id, event_type, "
                     "aggregate_type, aggregate_id, aggregate_version, commit_lsn (any other "
                     "column: [outbox] additional_placement = COLUMN:header[:NAME])",
                     item);
            return -1;
        }
        if (name && !*name) {
            snprintf(err, errlen, "[outbox] headers: \"%s:\" has an empty header name", item);
            return -1;
        }
        if (hspec_add(m, f, NULL, name ? name : item, false, err, errlen) != 0) return -1;
    }
    return 0;
}

/* [outbox] additional_placement: COLUMN:header[:NAME], ... (Debezium's
 * table.fields.additional.placement). */
static int parse_placement(struct outbox_map *m, const char *list, char *err, size_t errlen)
{
    char item[200];
    int n;
    const char *p = list;
    while ((n = str_next_item(&p, item, sizeof(item))) != -1) {
        char *where = n > 0 ? strchr(item, ':') : NULL;
        if (!where || where == item) {
            snprintf(err, errlen,
                     "[outbox] additional_placement \"%s\": each item is "
                     "COLUMN:header[:NAME]",
                     list);
            return -1;
        }
        *where++ = '\0';
        char *name = strchr(where, ':');
        if (name) *name++ = '\0';
        if (strcmp(where, "partition") == 0) {
            snprintf(err, errlen,
                     "[outbox] additional_placement %s:partition: the partition placement is "
                     "not supported (the partition follows the key, so that one aggregate's "
                     "events stay in order); place the column in a header (%s:header)",
                     item, item);
            return -1;
        }
        bool envelope = strcmp(where, "envelope") == 0;
        if ((!envelope && strcmp(where, "header") != 0) || (name && !*name)) {
            snprintf(err, errlen,
                     "[outbox] additional_placement %s:%s%s%s: expected "
                     "COLUMN:header[:NAME] or COLUMN:envelope[:NAME]",
                     item, where, name ? ":" : "", name ? name : "");
            return -1;
        }
        if (envelope && !strcmp(name ? name : item, "payload")) {
            snprintf(err, errlen,
                     "[outbox] additional_placement %s:envelope: the envelope's field "
                     "\"payload\" is the payload's; give the column another name "
                     "(%s:envelope:NAME)",
                     item, item);
            return -1;
        }
        if (hspec_add(m, OUTBOX_HS_COLUMN, item, name ? name : item, envelope, err,
                      errlen) != 0)
            return -1;
    }
    return 0;
}

int outbox_map_set_value_json(struct outbox_map *m, bool json, char *err, size_t errlen)
{
    if (!json && m->nenvelope > 0) {
        snprintf(err, errlen,
                 "[outbox] additional_placement has envelope fields, which need [outbox] "
                 "value_converter = json (the envelope is a JSON object; with Debezium's "
                 "StringConverter it would be Java's Struct{...} text)");
        return -1;
    }
    m->value_json = json;
    return 0;
}

int outbox_map_set_span_context(struct outbox_map *m, const char *column, char *err,
                                size_t errlen)
{
    free(m->span_column);
    m->span_column = NULL;
    if (m->cache) m->cache->layout_id = 0;
    if (!column || !*column) return 0;
    if (!(m->span_column = strdup(column))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int outbox_map_set_message_prefix(struct outbox_map *m, const char *prefix, char *err,
                                  size_t errlen)
{
    free(m->message_prefix);
    m->message_prefix = NULL;
    if (!prefix || !*prefix) return 0;
    if (strcmp(prefix, HEARTBEAT_PREFIX) == 0) {
        snprintf(err, errlen,
                 "[outbox] message_prefix \"%s\" is the prefix of outboxd's heartbeats; "
                 "choose another (outbox_emit()'s default is \"outbox\")",
                 prefix);
        return -1;
    }
    if (!(m->message_prefix = strdup(prefix))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

const char *outbox_header_name(const struct outbox_map *m, int source)
{
    for (int i = 0; i < m->nhspecs; i++)
        if (m->hspecs[i].source == source) return m->hspecs[i].name;
    return NULL;
}

int outbox_map_set_headers(struct outbox_map *m, const char *headers, const char *placement,
                           char *err, size_t errlen)
{
    hspecs_clear(m);
    if (parse_headers(m, headers, err, errlen) != 0) return -1;
    if (placement && parse_placement(m, placement, err, errlen) != 0) return -1;
    return 0;
}

bool outbox_is_table(const struct outbox_map *m, const struct relation *rel)
{
    return cache_for(m, rel)->is_outbox;
}

/* ---- event ------------------------------------------------------------- */

static inline void add_header(struct outbox_event *ev, const char *name, const char *data,
                              size_t len)
{
    ev->headers[ev->nheaders++] = (struct outbox_header){name, {data, len}};
}

/* How a column may be absent: */
enum presence {
    REQUIRED, /* must exist and not be NULL */
    NULLABLE, /* must exist, may be NULL (payload: a misspelt column name must
                 not turn every event into a null-valued tombstone) */
    OPTIONAL, /* may be missing from the table or NULL (aggregate_version) */
};

/* A row's value into out: 1 with a value, 0 NULL, -1 an unchanged-TOAST
 * marker (the value is not in the stream). */
static inline int take_value(const struct col_value *v, struct slice *out)
{
    switch (v->kind) {
    case CV_TEXT:
    case CV_BINARY:
        out->data = v->data;
        out->len = v->len;
        return 1;
    case CV_NULL:
        return 0;
    case CV_UNCHANGED:
    default:
        return -1;
    }
}

/* Finds column c of the map in the row: 1 with a value, 0 absent (only
 * OPTIONAL columns may be) or NULL, -1 a schema fault (column missing, an
 * unchanged-TOAST marker) with err set. */
static inline int get_column(const struct outbox_map *m, const struct map_cache *mc,
                      const struct relation *rel, const struct col_value *values,
                      int nvalues, enum outbox_col c, enum presence presence,
                      struct slice *out, char *err, size_t errlen)
{
    int i = mc->col[c], r;
    out->data = NULL;
    out->len = 0;
    if (i < 0 || i >= nvalues) {
        if (presence == OPTIONAL) return 0;
        snprintf(err, errlen, "column \"%s\" (%s) is missing from %s.%s", m->columns[c],
                 col_names[c], rel->nspname, rel->relname);
        return -1;
    }
    if ((r = take_value(&values[i], out)) < 0)
        snprintf(err, errlen, "column \"%s\" (%s) arrived as an unchanged TOAST value",
                 m->columns[c], col_names[c]);
    return r;
}

/* The value of column `name`, index i of the row (a header placement): 1
 * with a value, 0 NULL, -1 a schema fault (missing, unchanged TOAST) with
 * err set. */
static int get_placed(const struct relation *rel, const struct col_value *values, int nvalues,
                      int i, const char *name, struct slice *out, char *err, size_t errlen)
{
    int r;
    out->data = NULL;
    out->len = 0;
    if (i < 0 || i >= nvalues) {
        snprintf(err, errlen,
                 "column \"%s\" ([outbox] additional_placement) is missing from %s.%s", name,
                 rel->nspname, rel->relname);
        return -1;
    }
    if ((r = take_value(&values[i], out)) < 0)
        snprintf(err, errlen,
                 "column \"%s\" ([outbox] additional_placement) arrived as an unchanged "
                 "TOAST value",
                 name);
    return r;
}

const char *outbox_fault_name(enum outbox_fault f)
{
    static const char *const names[] = {
        [OF_NONE] = "NONE",
        [OF_SCHEMA] = "SCHEMA",
        [OF_NULL_EVENT_ID] = "NULL_EVENT_ID",
        [OF_EMPTY_EVENT_ID] = "EMPTY_EVENT_ID",
        [OF_NULL_AGGREGATE_ID] = "NULL_AGGREGATE_ID",
        [OF_EMPTY_AGGREGATE_ID] = "EMPTY_AGGREGATE_ID",
        [OF_NULL_EVENT_TYPE] = "NULL_EVENT_TYPE",
        [OF_BAD_TOPIC] = "BAD_TOPIC",
        [OF_BAD_SPAN_CONTEXT] = "BAD_SPAN_CONTEXT",
        [OF_BAD_MESSAGE] = "BAD_MESSAGE",
    };
    return (size_t)f < sizeof(names) / sizeof(names[0]) && names[f] ? names[f] : "?";
}

bool outbox_topic_valid(const char *topic, char *err, size_t errlen)
{
    size_t n = strlen(topic);
    if (n == 0 || n > 249) {
        snprintf(err, errlen, "topic is %s (%zu characters; Kafka allows 1 to 249): \"%.64s\"",
                 n == 0 ? "empty" : "too long", n, topic);
        return false;
    }
    if (!strcmp(topic, ".") || !strcmp(topic, "..")) {
        snprintf(err, errlen, "topic \"%s\" is not a valid Kafka topic name", topic);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = topic[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            snprintf(err, errlen,
                     "topic has the character 0x%02x at %zu (Kafka allows letters, digits, "
                     "'.', '_' and '-'): \"%.64s\"",
                     (unsigned char)c, i, topic);
            return false;
        }
    }
    return true;
}

/* Sets ev's fault and err for a poison row; returns -1. */
static int poison(struct outbox_event *ev, enum outbox_fault f, char *err, size_t errlen,
                  const char *why)
{
    ev->fault = f;
    if (why) snprintf(err, errlen, "%s", why);
    return -1;
}

/* Renders and checks the row's topic into ev->topic. Returns true, or
 * false with ev->topic "" and the reason in ev->topic_error. */
static bool render_topic(const struct outbox_map *m, const struct relation *rel,
                         const struct col_value *values, int nvalues, struct outbox_event *ev)
{
    char *why = ev->topic_error;
    size_t whylen = sizeof(ev->topic_error);
    if (topic_template_render(m->topic, rel, values, nvalues, ev->topic, sizeof(ev->topic),
                              why, whylen) < 0) {
        ev->topic[0] = '\0';
        return false;
    }
    /* (Never "" from the zeroed cache: an empty topic is checked, and fails.) */
    if (ev->topic[0] == '\0' || strcmp(ev->topic, m->cache->valid_topic) != 0) {
        if (!outbox_topic_valid(ev->topic, why, whylen)) {
            ev->topic[0] = '\0';
            return false;
        }
        memcpy(m->cache->valid_topic, ev->topic, sizeof(ev->topic));
    }
    return true;
}

/* ev's value as JsonConverter writes it (outbox_map_set_value_json()),
 * in the map's buffer: valid until the next event is built. The envelope
 * fields' columns were found by the header loop (hcol). 0, or -1 on out of
 * memory. */
static int json_value(const struct outbox_map *m, const struct relation *rel,
                      const struct col_value *values, struct slice payload, int has_payload,
                      struct outbox_event *ev)
{
    struct map_cache *mc = m->cache;
    struct jbuf *b = &mc->value;
    b->len = 0;
    int pc = mc->col[OC_PAYLOAD];
    enum jv_kind pkind = pc >= 0 && rel->cols[pc].typid == BYTEA_OID ? JV_BYTES : JV_STRING;
    if (m->nenvelope == 0) {
        if (ev->value_null) return 0;
        if (jsonvalue_field(b, pkind, false, payload.data, payload.len) != 0) return -1;
    } else {
        if (jsonvalue_raw(b, "{\"payload\":", 11) != 0 ||
            jsonvalue_field(b, pkind, !has_payload, payload.data, payload.len) != 0)
            return -1;
        for (int i = 0; i < m->nhspecs; i++) {
            const struct outbox_hspec *h = &m->hspecs[i];
            if (!h->envelope) continue;
            const struct col_value *cv = &values[mc->hcol[i]];
            if (jsonvalue_raw(b, ",", 1) != 0 ||
                jsonvalue_string(b, h->name, strlen(h->name)) != 0 ||
                jsonvalue_raw(b, ":", 1) != 0 ||
                jsonvalue_field(b, jsonvalue_kind(rel->cols[mc->hcol[i]].typid),
                                cv->kind == CV_NULL, cv->data, cv->len) != 0)
                return -1;
        }
        if (jsonvalue_raw(b, "}", 1) != 0) return -1;
        ev->value_null = false;
    }
    ev->value = (struct slice){b->data, b->len};
    return 0;
}

/* The span context's entries as headers of ev, when the row has the column
 * and a value. 0, or -1 with the reason in err (a poison row). */
static int add_span_headers(const struct map_cache *mc, const struct col_value *values,
                            int nvalues, struct outbox_event *ev, char *err, size_t errlen)
{
    struct slice v;
    ev->span.n = 0;
    if (mc->span_col < 0 || mc->span_col >= nvalues) return 0;
    int r = take_value(&values[mc->span_col], &v);
    if (r == 0) return 0; /* NULL: no span context */
    if (r < 0) {
        snprintf(err, errlen, "span context: arrived as an unchanged TOAST value");
        return -1;
    }
    if (spanctx_parse(v.data, v.len, &ev->span, err, errlen) != 0) {
        ev->span.n = 0;
        return -1;
    }
    for (int i = 0; i < ev->span.n; i++)
        add_header(ev, ev->span.name[i], ev->span.value[i], ev->span.value_len[i]);
    return 0;
}

/* The row's values with each bytea column's text output decoded to its
 * bytes (bytea.h), in the map's scratch: valid until the next row. values
 * itself when the layout has no bytea column. NULL with the reason in err
 * when a bytea text is in neither format, or on out of memory. */
static const struct col_value *decoded_values(const struct outbox_map *m,
                                              const struct relation *rel,
                                              const struct col_value *values, int nvalues,
                                              char *err, size_t errlen)
{
    struct map_cache *mc = m->cache;
    if (!mc->has_bytea) return values;
    size_t need = 0, used = 0;
    for (int i = 0; i < nvalues && i < rel->ncols; i++)
        if (rel->cols[i].typid == BYTEA_OID && values[i].kind == CV_TEXT)
            need += BYTEA_DECODED_MAX(values[i].len);
    if (grow_array((void **)&mc->vals, &mc->vals_cap, (size_t)nvalues + 1,
                   sizeof(*mc->vals), 16) != 0 ||
        grow_array((void **)&mc->bytes, &mc->bytes_cap, need + 1, 1, 256) != 0) {
        snprintf(err, errlen, "out of memory decoding bytea values");
        return NULL;
    }
    for (int i = 0; i < nvalues; i++) {
        mc->vals[i] = values[i];
        if (i >= rel->ncols || rel->cols[i].typid != BYTEA_OID || values[i].kind != CV_TEXT)
            continue;
        char why[128];
        long n = bytea_text_decode(values[i].data, values[i].len, mc->bytes + used, why,
                                   sizeof(why));
        if (n < 0) {
            snprintf(err, errlen, "column \"%s\" (bytea): %s", rel->cols[i].name, why);
            return NULL;
        }
        mc->vals[i] = (struct col_value){CV_BINARY, (uint32_t)n, mc->bytes + used};
        used += (size_t)n;
    }
    return mc->vals;
}

void outbox_event_set_commit_time(const struct outbox_map *m, struct outbox_event *ev,
                                  int64_t commit_time)
{
    /* Rounded down, before and after 1970 alike. */
    int64_t us = commit_time + PG_EPOCH_OFFSET_US;
    ev->timestamp_ms = 0;
    if (m->timestamp_commit && commit_time != 0)
        ev->timestamp_ms = us >= 0 ? us / 1000 : -((-us + 999) / 1000);
}

/* The columns an event is made of, and each one's header if it has one:
 * the outbox columns, then the commit LSN. */
struct row_fields {
    struct slice v[OUTBOX_HS_COMMIT_LSN + 1];
    bool present[OUTBOX_HS_COMMIT_LSN + 1];
};

/* The outbox columns in the order their faults are reported, each with how
 * it may be absent. */
static const struct {
    enum outbox_col col;
    enum presence presence;
} row_columns[] = {
    {OC_EVENT_ID, REQUIRED},   {OC_AGGREGATE_TYPE, REQUIRED},     {OC_AGGREGATE_ID, REQUIRED},
    {OC_EVENT_TYPE, REQUIRED}, {OC_AGGREGATE_VERSION, OPTIONAL}, {OC_PAYLOAD, NULLABLE},
};

/* Reads the row's outbox columns into f. Returns 0, or -1 on the first
 * schema fault (err set). */
static int read_columns(const struct outbox_map *m, const struct map_cache *mc,
                        const struct relation *rel, const struct col_value *values,
                        int nvalues, struct row_fields *f, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof(row_columns) / sizeof(row_columns[0]); i++) {
        enum outbox_col c = row_columns[i].col;
        int r = get_column(m, mc, rel, values, nvalues, c, row_columns[i].presence, &f->v[c],
                           err, errlen);
        if (r < 0) return -1;
        f->present[c] = r > 0;
    }
    return 0;
}

/* The commit LSN's text into ev (formatted once per transaction, in the
 * map's cache) and into f. */
static void set_commit_lsn(const struct outbox_map *m, lsn_t commit_lsn,
                           struct outbox_event *ev, struct row_fields *f)
{
    struct map_cache *lc = m->cache;
    if (!lc->lsn_valid || lc->lsn != commit_lsn) {
        lc->lsn_len = strlen(lsn_format(commit_lsn, lc->lsn_text));
        lc->lsn = commit_lsn;
        lc->lsn_valid = true;
    }
    memcpy(ev->commit_lsn, lc->lsn_text, lc->lsn_len + 1);
    f->v[OUTBOX_HS_COMMIT_LSN] = (struct slice){ev->commit_lsn, lc->lsn_len};
    f->present[OUTBOX_HS_COMMIT_LSN] = true;
}

/* The headers of [outbox] headers and additional_placement, in their
 * order. Returns 0, or -1 on a schema fault (err set). */
static int add_row_headers(const struct outbox_map *m, const struct map_cache *mc,
                           const struct relation *rel, const struct col_value *values,
                           int nvalues, const struct row_fields *f, struct outbox_event *ev,
                           char *err, size_t errlen)
{
    for (int i = 0; i < m->nhspecs; i++) {
        const struct outbox_hspec *h = &m->hspecs[i];
        struct slice v;
        if (h->source != OUTBOX_HS_COLUMN) {
            if (f->present[h->source])
                add_header(ev, h->name, f->v[h->source].data, f->v[h->source].len);
            continue;
        }
        int r = get_placed(rel, values, nvalues, mc->hcol[i], h->column, &v, err, errlen);
        if (r < 0) return -1;
        if (r > 0 && !h->envelope) add_header(ev, h->name, v.data, v.len);
    }
    return 0;
}

/* The faults of a row whose columns all exist, in the order they are
 * reported (the event is built: a dead-letter record carries it). */
static int poison_if_unusable(struct outbox_event *ev, const struct row_fields *f,
                              bool topic_ok, bool span_ok, const char *span_why, char *err,
                              size_t errlen)
{
    if (!f->present[OC_EVENT_ID])
        return poison(ev, OF_NULL_EVENT_ID, err, errlen, "event_id is NULL");
    /* An empty id is as useless to a consumer that deduplicates on it as
     * none, and a text column allows it. */
    if (f->v[OC_EVENT_ID].len == 0)
        return poison(ev, OF_EMPTY_EVENT_ID, err, errlen, "event_id is empty");
    if (!f->present[OC_AGGREGATE_ID])
        return poison(ev, OF_NULL_AGGREGATE_ID, err, errlen,
                      "aggregate_id is NULL: the event would have no key and no order");
    if (f->v[OC_AGGREGATE_ID].len == 0)
        return poison(ev, OF_EMPTY_AGGREGATE_ID, err, errlen,
                      "aggregate_id is empty: the event would have no key and no order");
    if (!f->present[OC_EVENT_TYPE])
        return poison(ev, OF_NULL_EVENT_TYPE, err, errlen, "event_type is NULL");
    if (!topic_ok) return poison(ev, OF_BAD_TOPIC, err, errlen, ev->topic_error);
    if (!span_ok) return poison(ev, OF_BAD_SPAN_CONTEXT, err, errlen, span_why);
    return 0;
}

int outbox_event_build(const struct outbox_map *m, const struct relation *rel,
                       const struct col_value *values, int nvalues, lsn_t commit_lsn,
                       struct outbox_event *ev, char *err, size_t errlen)
{
    struct row_fields f;
    /* Everything the row has is filled in first, so that a poison row can
     * still be dead-lettered with its key, value and event_id. */
    const struct map_cache *mc = cache_for(m, rel);
    /* Everything but the two text buffers, which are written below. */
    memset(&ev->fault, 0, offsetof(struct outbox_event, headers) -
                              offsetof(struct outbox_event, fault));
    ev->topic[0] = '\0';
    ev->topic_error[0] = '\0';
    set_commit_lsn(m, commit_lsn, ev, &f);
    if (!(values = decoded_values(m, rel, values, nvalues, err, errlen)) ||
        read_columns(m, mc, rel, values, nvalues, &f, err, errlen) != 0)
        return poison(ev, OF_SCHEMA, err, errlen, NULL);
    const struct slice payload = f.v[OC_PAYLOAD];
    bool has_payload = f.present[OC_PAYLOAD];
    ev->key = f.v[OC_AGGREGATE_ID];
    ev->key_null = !f.present[OC_AGGREGATE_ID];
    ev->value_null = !has_payload || (m->tombstone_on_empty && payload.len == 0);
    ev->value = payload;
    ev->event_id = f.v[OC_EVENT_ID];
    ev->nheaders = 0;
    if (add_row_headers(m, mc, rel, values, nvalues, &f, ev, err, errlen) != 0)
        return poison(ev, OF_SCHEMA, err, errlen, NULL);
    if (m->value_json && json_value(m, rel, values, payload, has_payload, ev) != 0)
        return poison(ev, OF_SCHEMA, err, errlen, "out of memory building the JSON value");
    char span_why[200];
    bool span_ok = add_span_headers(mc, values, nvalues, ev, span_why, sizeof(span_why)) == 0;
    /* The topic before the other checks: a poison row's dead-letter record
     * names the topic it would have gone to whatever its fault. */
    bool topic_ok = render_topic(m, rel, values, nvalues, ev);
    return poison_if_unusable(ev, &f, topic_ok, span_ok, span_why, err, errlen);
}

void outbox_dlq_headers(struct outbox_event *ev, const struct outbox_header *orig, int norig,
                        const struct outbox_dlq *d)
{
    ev->nheaders = 0;
    for (int i = 0; i < norig && i < OUTBOX_ROW_HEADERS; i++)
        ev->headers[ev->nheaders++] = orig[i];
    const char *topic = d->topic ? d->topic : "";
    add_header(ev, "dlq_original_topic", topic, strlen(topic));
    if (!topic[0]) {
        const char *why = d->topic_error && d->topic_error[0] ? d->topic_error : "unknown";
        add_header(ev, "dlq_original_topic_error", why, strlen(why));
    }
    add_header(ev, "dlq_reason", d->reason, strlen(d->reason));
    add_header(ev, "dlq_error", d->code, strlen(d->code));
    if (d->record_lsn && d->record_lsn[0])
        add_header(ev, "dlq_record_lsn", d->record_lsn, strlen(d->record_lsn));
    if (d->truncated_from && d->truncated_from[0])
        add_header(ev, "dlq_value_truncated_from", d->truncated_from,
                   strlen(d->truncated_from));
}

void outbox_event_drop_lsn_header(const struct outbox_map *m, struct outbox_event *ev)
{
    const char *name = outbox_header_name(m, OUTBOX_HS_COMMIT_LSN);
    for (int i = 0; name && i < ev->nheaders; i++)
        if (strcmp(ev->headers[i].name, name) == 0) {
            memmove(&ev->headers[i], &ev->headers[i + 1],
                    (size_t)(ev->nheaders - i - 1) * sizeof(ev->headers[0]));
            ev->nheaders--;
            return;
        }
}
