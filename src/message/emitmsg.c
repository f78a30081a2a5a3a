/*
 * emitmsg.c - the content of an outbox message (pg_logical_emit_message)
 * read into the row an outbox table would have held, and its event built
 * from that row by outbox_event_build(). Pure: no I/O; per message it
 * allocates only when a buffer must grow.
 */
#include "emitmsg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytea.h" /* BYTEA_OID */
#include "grow.h"
#include "jsonscan.h"
#include "relcache.h"

/*
 * The content format, version 1: one JSON object (RFC 8259, UTF-8), e.g.
 *
 *   {"v":1,"event_id":"0b5e9d2c-...","aggregate_type":"order",
 *    "aggregate_id":"42","event_type":"OrderPlaced","aggregate_version":7,
 *    "payload":"{\"total\": 10}","headers":{"tenant":"acme"}}
 *
 *   v                 required: the number 1. Any other value is refused
 *                     (an older outboxd must not guess at a newer format).
 *   event_id          string or null \
 *   aggregate_type    string or null  | the mapped columns: a missing or
 *   aggregate_id      string or null  | null field is a NULL column, with
 *   event_type        string or null /  the same faults as a row's
 *   aggregate_version an integer (no fraction, no exponent), a string, or
 *                     null/missing (no header)
 *   payload           string or null/missing (a null value: a tombstone)
 *   payload_encoding  "text" (the default): payload is the value as it is;
 *                     "base64": payload is the value's bytes in base64
 *                     (RFC 4648 standard alphabet, padded; line breaks are
 *                     skipped, as PostgreSQL's encode() writes them) -
 *                     binary payloads (Protobuf, Avro) must be sent so:
 *                     wal2json prints a message's content as text
 *   headers           an object of string values (null: no such header),
 *                     at most EMITMSG_MAX_HEADERS, names not empty. A name
 *                     that is a column the section places
 *                     (additional_placement, span_context_column) fills
 *                     that column; any other becomes a header of that name
 *                     after outboxd's own; a name one of those already has
 *                     is refused.
 *
 * Any other key is refused, so that a misspelt field cannot pass silently;
 * a later version adds keys. Duplicate keys are refused (jsonscan.h).
 */

enum key {
    K_OTHER = 0,
    K_V,
    K_EVENT_ID,
    K_AGGREGATE_TYPE,
    K_AGGREGATE_ID,
    K_AGGREGATE_VERSION,
    K_EVENT_TYPE,
    K_PAYLOAD,
    K_PAYLOAD_ENCODING,
    K_HEADERS,
};

static const char *const key_names[] = {
    [K_V] = "v",
    [K_EVENT_ID] = "event_id",
    [K_AGGREGATE_TYPE] = "aggregate_type",
    [K_AGGREGATE_ID] = "aggregate_id",
    [K_AGGREGATE_VERSION] = "aggregate_version",
    [K_EVENT_TYPE] = "event_type",
    [K_PAYLOAD] = "payload",
    [K_PAYLOAD_ENCODING] = "payload_encoding",
    [K_HEADERS] = "headers",
};
#define NKEYS ((int)(sizeof(key_names) / sizeof(key_names[0])))

/* The mapped column each field fills. */
static const enum outbox_col key_col[] = {
    [K_EVENT_ID] = OC_EVENT_ID,
    [K_AGGREGATE_TYPE] = OC_AGGREGATE_TYPE,
    [K_AGGREGATE_ID] = OC_AGGREGATE_ID,
    [K_AGGREGATE_VERSION] = OC_AGGREGATE_VERSION,
    [K_EVENT_TYPE] = OC_EVENT_TYPE,
    [K_PAYLOAD] = OC_PAYLOAD,
};

static int key_id(const char *s, size_t n)
{
    for (int k = 1; k < NKEYS; k++)
        if (strlen(key_names[k]) == n && memcmp(key_names[k], s, n) == 0) return k;
    return K_OTHER;
}

#define TEXTOID 25

struct emitmsg {
    struct json_scanner *js;
    struct relation *rel;      /* the pseudo relation; owned */
    struct col_value *values;  /* rel->ncols entries; owned */
    unsigned char *bin;        /* the base64 payload decoded; owned */
    size_t bincap;
    int nextra;                /* content headers that are no column */
    const struct json_tok *extra[EMITMSG_MAX_HEADERS]; /* their key tokens */
};

void emitmsg_free(struct emitmsg *p)
{
    if (!p) return;
    json_scanner_free(p->js);
    relation_free(p->rel);
    free(p->values);
    free(p->bin);
    free(p);
}

/* Whether rel's first n columns hold name. */
static bool has_column(const struct relation *rel, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(rel->cols[i].name, name) == 0) return true;
    return false;
}

/* Adds column name to rel (ncols so far: *n) unless it has it. 0, or -1 on
 * out of memory. */
static int add_column(struct relation *rel, int *n, const char *name)
{
    if (has_column(rel, *n, name)) return 0;
    if (!(rel->cols[*n].name = strdup(name))) return -1;
    rel->cols[*n].typid = TEXTOID;
    rel->cols[*n].typmod = -1;
    (*n)++;
    return 0;
}

struct emitmsg *emitmsg_new(const struct outbox_map *m, const char *prefix)
{
    struct emitmsg *p = calloc(1, sizeof(*p));
    int max = OC__COUNT + m->nhspecs + 1, n = 0;
    if (!p || !(p->js = json_scanner_new(key_id))) goto oom;
    p->rel = relation_new(0, "pg_logical_emit_message", prefix ? prefix : "", 'n', max);
    p->values = calloc((size_t)max, sizeof(*p->values));
    if (!p->rel || !p->values) goto oom;
    /* relation_free() frees ncols names: count them as they are set. */
    p->rel->ncols = 0;
    /* The mapped columns at their enum outbox_col index, even when two
     * share a name (the first one's value wins, as in a table's row). */
    for (int i = 0; i < OC__COUNT; i++, n++) {
        if (!(p->rel->cols[i].name = strdup(m->columns[i]))) goto oom;
        p->rel->cols[i].typid = TEXTOID;
        p->rel->cols[i].typmod = -1;
        p->rel->ncols = n + 1;
    }
    for (int i = 0; i < m->nhspecs; i++)
        if (m->hspecs[i].source == OUTBOX_HS_COLUMN) {
            if (add_column(p->rel, &n, m->hspecs[i].column) != 0) goto oom;
            p->rel->ncols = n;
        }
    if (m->span_column && add_column(p->rel, &n, m->span_column) != 0) goto oom;
    p->rel->ncols = n;
    return p;
oom:
    emitmsg_free(p);
    return NULL;
}

/* ---- base64 ---------------------------------------------------------- */

static int b64_digit(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes base64 s[0..len) into p->bin; *out_len its length. 0, or -1
 * with err (a character outside the alphabet, a length that is not a
 * multiple of 4, padding inside, out of memory). */
static int b64_decode(struct emitmsg *p, const char *s, size_t len, size_t *out_len, char *err,
                      size_t errlen)
{
    if (grow_array((void **)&p->bin, &p->bincap, len / 4 * 3 + 3, 1, 64) != 0) {
        snprintf(err, errlen, "out of memory decoding the base64 payload");
        return -1;
    }
    uint32_t acc = 0;
    size_t n = 0, digits = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n' || c == '\r') continue;
        int d = c == '=' ? 0 : b64_digit(c);
        if (d < 0 || (pad && c != '=')) {
            snprintf(err, errlen,
                     "payload: not base64 (payload_encoding \"base64\"): %s at offset %zu",
                     d < 0 ? "a character outside the alphabet" : "data after the padding", i);
            return -1;
        }
        if (c == '=' && ++pad > 2) break;
        acc = acc << 6 | (uint32_t)d;
        if (++digits % 4 == 0) {
            p->bin[n++] = (unsigned char)(acc >> 16);
            p->bin[n++] = (unsigned char)(acc >> 8);
            p->bin[n++] = (unsigned char)acc;
            acc = 0;
        }
    }
    if (digits % 4 != 0 || pad > 2) {
        snprintf(err, errlen,
                 "payload: not base64 (payload_encoding \"base64\"): %s",
                 pad > 2 ? "more than two '='" : "its length is not a multiple of 4 (padding "
                                                 "with '=' is required)");
        return -1;
    }
    *out_len = n - pad;
    return 0;
}

/* ---- the content ----------------------------------------------------- */

static void set_null(struct col_value *v) { *v = (struct col_value){CV_NULL, 0, NULL}; }

static void set_text(struct col_value *v, const char *s, size_t len)
{
    *v = (struct col_value){CV_TEXT, (uint32_t)len, s};
}

/* "v": 0 when it is EMITMSG_VERSION, else -1 with err. */
static int check_version(const struct json_tok *v, char *err, size_t errlen)
{
    if (!v) {
        snprintf(err, errlen,
                 "no \"v\" (the content format's version): not an outbox message of "
                 "outbox_emit()'s format");
        return -1;
    }
    if (v->type != JSON_NUMBER || strcmp(v->s, "1") != 0) {
        snprintf(err, errlen,
                 "\"v\" is %.20s: this outboxd reads content format version %d only "
                 "(a newer outboxd may read this message)",
                 v->type == JSON_NUMBER ? v->s : json_type_name(v), EMITMSG_VERSION);
        return -1;
    }
    return 0;
}

/* A string-or-null field into *cv. 0, or -1 with err. */
static int take_string(const struct json_tok *v, int k, struct col_value *cv, char *err,
                       size_t errlen)
{
    if (!v || v->type == JSON_NULL) {
        set_null(cv);
        return 0;
    }
    if (v->type != JSON_STRING) {
        snprintf(err, errlen, "\"%s\" is %s, not a string or null", key_names[k],
                 json_type_name(v));
        return -1;
    }
    set_text(cv, v->s, v->len);
    return 0;
}

/* "aggregate_version": an integer, a string or null. */
static int take_version(const struct json_tok *v, struct col_value *cv, char *err,
                        size_t errlen)
{
    if (v && v->type == JSON_NUMBER) {
        if (strpbrk(v->s, ".eE")) {
            snprintf(err, errlen, "\"aggregate_version\" is %.40s, not an integer", v->s);
            return -1;
        }
        set_text(cv, v->s, v->len);
        return 0;
    }
    return take_string(v, K_AGGREGATE_VERSION, cv, err, errlen);
}

/* "payload" and "payload_encoding" into *cv (and the column's type). */
static int take_payload(struct emitmsg *p, const struct json_tok *obj, struct col_value *cv,
                        struct rel_column *col, char *err, size_t errlen)
{
    const struct json_tok *enc = json_get(obj, K_PAYLOAD_ENCODING);
    bool b64 = false;
    col->typid = TEXTOID;
    if (enc && enc->type != JSON_NULL) {
        b64 = enc->type == JSON_STRING && strcmp(enc->s, "base64") == 0;
        if (!b64 && !(enc->type == JSON_STRING && strcmp(enc->s, "text") == 0)) {
            snprintf(err, errlen,
                     "\"payload_encoding\" is %s%.40s%s, not \"text\" or \"base64\"",
                     enc->type == JSON_STRING ? "\"" : json_type_name(enc),
                     enc->type == JSON_STRING ? enc->s : "",
                     enc->type == JSON_STRING ? "\"" : "");
            return -1;
        }
    }
    if (take_string(json_get(obj, K_PAYLOAD), K_PAYLOAD, cv, err, errlen) != 0) return -1;
    if (!b64 || cv->kind == CV_NULL) return 0;
    size_t n;
    if (b64_decode(p, cv->data, cv->len, &n, err, errlen) != 0) return -1;
    *cv = (struct col_value){CV_BINARY, (uint32_t)n, (const char *)p->bin};
    col->typid = BYTEA_OID;
    return 0;
}

/* The index of column name in the pseudo relation past the mapped ones,
 * or -1. */
static int placed_column(const struct emitmsg *p, const char *name)
{
    for (int i = OC__COUNT; i < p->rel->ncols; i++)
        if (strcmp(p->rel->cols[i].name, name) == 0) return i;
    return -1;
}

/* "headers": placed columns filled, the others kept in p->extra. */
static int take_headers(struct emitmsg *p, const struct json_tok *h, char *err, size_t errlen)
{
    p->nextra = 0;
    if (!h || h->type == JSON_NULL) return 0;
    if (h->type != JSON_OBJECT) {
        snprintf(err, errlen, "\"headers\" is %s, not an object of strings",
                 json_type_name(h));
        return -1;
    }
    if (h->len > EMITMSG_MAX_HEADERS) {
        snprintf(err, errlen, "\"headers\" has %zu entries, more than %d", h->len,
                 EMITMSG_MAX_HEADERS);
        return -1;
    }
    const struct json_tok *k = h + 1;
    for (size_t i = 0; i < h->len; i++, k += 1 + k[1].size) {
        const struct json_tok *v = k + 1;
        if (k->len == 0) {
            snprintf(err, errlen, "\"headers\" has an empty name");
            return -1;
        }
        if (v->type != JSON_STRING && v->type != JSON_NULL) {
            snprintf(err, errlen, "header \"%.64s\" is %s, not a string or null", k->s,
                     json_type_name(v));
            return -1;
        }
        int col = placed_column(p, k->s);
        if (col >= 0) {
            if (v->type == JSON_STRING) set_text(&p->values[col], v->s, v->len);
        } else if (v->type == JSON_STRING) {
            p->extra[p->nextra++] = k;
        }
    }
    return 0;
}

/* The first key of obj that is no field of the format, or NULL. */
static const struct json_tok *unknown_key(const struct json_tok *obj)
{
    const struct json_tok *k = obj + 1;
    for (size_t i = 0; i < obj->len; i++, k += 1 + k[1].size)
        if (k->kid == K_OTHER) return k;
    return NULL;
}

int emitmsg_parse(struct emitmsg *p, const char *content, size_t len,
                  const struct relation **rel, const struct col_value **values, int *nvalues,
                  char *err, size_t errlen)
{
    const struct json_tok *t, *bad;
    char why[JSON_ERRLEN];
    p->nextra = 0;
    if (json_scan(p->js, content, len, &t, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "content: %s", why);
        return -1;
    }
    if (t->type != JSON_OBJECT) {
        snprintf(err, errlen, "content is %s, not a JSON object", json_type_name(t));
        return -1;
    }
    if (check_version(json_get(t, K_V), err, errlen) != 0) return -1;
    if ((bad = unknown_key(t))) {
        snprintf(err, errlen,
                 "unknown field \"%.64s\" (version 1 has v, event_id, aggregate_type, "
                 "aggregate_id, event_type, aggregate_version, payload, payload_encoding, "
                 "headers)",
                 bad->s);
        return -1;
    }
    for (int i = 0; i < p->rel->ncols; i++) set_null(&p->values[i]);
    for (int k = K_EVENT_ID; k <= K_EVENT_TYPE; k++) {
        if (k == K_AGGREGATE_VERSION) continue;
        if (take_string(json_get(t, k), k, &p->values[key_col[k]], err, errlen) != 0)
            return -1;
    }
    if (take_version(json_get(t, K_AGGREGATE_VERSION), &p->values[OC_AGGREGATE_VERSION], err,
                     errlen) != 0 ||
        take_payload(p, t, &p->values[OC_PAYLOAD], &p->rel->cols[OC_PAYLOAD], err, errlen) !=
            0 ||
        take_headers(p, json_get(t, K_HEADERS), err, errlen) != 0)
        return -1;
    *rel = p->rel;
    *values = p->values;
    *nvalues = p->rel->ncols;
    return 0;
}

/* ---- the event ------------------------------------------------------- */

/* ev for content that cannot be read: the raw content as the value, the
 * commit LSN header. Returns -1. */
static int unreadable(const struct outbox_map *m, const char *content, size_t len,
                      lsn_t commit_lsn, struct outbox_event *ev)
{
    ev->fault = OF_BAD_MESSAGE;
    ev->topic[0] = '\0';
    snprintf(ev->topic_error, sizeof(ev->topic_error),
             "the message content could not be read");
    ev->key = (struct slice){NULL, 0};
    ev->key_null = true;
    ev->value = (struct slice){content, len};
    ev->value_null = false;
    ev->event_id = (struct slice){NULL, 0};
    ev->span.n = 0;
    ev->nheaders = 0;
    lsn_format(commit_lsn, ev->commit_lsn);
    const char *name = outbox_header_name(m, OUTBOX_HS_COMMIT_LSN);
    if (name)
        ev->headers[ev->nheaders++] =
            (struct outbox_header){name, {ev->commit_lsn, strlen(ev->commit_lsn)}};
    return -1;
}

/* Appends the content's other headers to ev. 0, or -1 with err (a name
 * outboxd's headers have, or more than a dead-letter record keeps). */
static int add_extra_headers(const struct emitmsg *p, struct outbox_event *ev, char *err,
                             size_t errlen)
{
    if (ev->nheaders + p->nextra > OUTBOX_ROW_HEADERS) {
        snprintf(err, errlen, "%d headers in all, more than %d", ev->nheaders + p->nextra,
                 OUTBOX_ROW_HEADERS);
        return -1;
    }
    int own = ev->nheaders;
    for (int i = 0; i < p->nextra; i++) {
        const struct json_tok *k = p->extra[i];
        for (int j = 0; j < own; j++)
            if (strcmp(ev->headers[j].name, k->s) == 0) {
                snprintf(err, errlen,
                         "header \"%.64s\" in \"headers\": outboxd sets a header of that name",
                         k->s);
                return -1;
            }
        ev->headers[ev->nheaders++] = (struct outbox_header){k->s, {k[1].s, k[1].len}};
    }
    return 0;
}

void emitmsg_last_row(const struct emitmsg *p, const struct relation **rel,
                      const struct col_value **values, int *nvalues)
{
    *rel = p->rel;
    *values = p->values;
    *nvalues = p->rel ? p->rel->ncols : 0;
}

int emitmsg_event_build(struct emitmsg *p, const struct outbox_map *m, const char *content,
                        size_t len, lsn_t commit_lsn, struct outbox_event *ev, char *err,
                        size_t errlen)
{
    const struct relation *rel;
    const struct col_value *values;
    int n;
    if (emitmsg_parse(p, content, len, &rel, &values, &n, err, errlen) != 0)
        return unreadable(m, content, len, commit_lsn, ev);
    int rc = outbox_event_build(m, rel, values, n, commit_lsn, ev, err, errlen);
    if (ev->fault == OF_SCHEMA) return rc;
    char why[256];
    if (add_extra_headers(p, ev, why, sizeof(why)) != 0) {
        if (rc == 0) {
            ev->fault = OF_BAD_MESSAGE;
            snprintf(err, errlen, "%s", why);
        }
        return -1;
    }
    return rc;
}
