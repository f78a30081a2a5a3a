/*
 * wal2json.c - decoder for the wal2json output plugin, format-version 2:
 * one JSON object per XLogData payload, turned into one struct repl_msg
 * (decode.h). See wal2json.h for the options outboxd starts the stream with.
 *
 * The wire format, as far as the decoder reads it (wal2json.h has examples):
 *
 *   line    = ws value ws            (the value must be an object)
 *   B       = {"action":"B", ["xid":n,] "timestamp":s, "lsn":s, ...}
 *   C       = {"action":"C", ["xid":n,] "timestamp":s, "lsn":s, "nextlsn":s}
 *   I/U/D   = {"action":..., "schema":s, "table":s,
 *              "columns"|"identity": [{"name":s, ["type":s,] ["typeoid":n,]
 *                                      "value":scalar}, ...]}
 *   T       = {"action":"T", "schema":s, "table":s}
 *   M       = {"action":"M", "transactional":bool, "prefix":s, "content":s,
 *              ["lsn":s,] ...}
 *
 * Unknown fields may appear anywhere and hold any JSON; they are checked
 * and ignored.
 *
 * A line goes through two steps:
 *
 *   1. the JSON scanner (jsonscan.h) checks the whole line in one pass,
 *      as strictly as the jansson parse it replaced (json_loadb with
 *      JSON_REJECT_DUPLICATES), and turns it into tokens and unescaped
 *      text that it reuses from line to line, so a line costs no malloc.
 *      Numbers stay their exact source text: a numeric column must reach
 *      Kafka as exactly the text Postgres printed. The keys the readers
 *      use are interned as they are scanned (enum key, key_id()).
 *   2. one reader per action looks up the fields it needs in the object;
 *      unknown fields are ignored, missing or mistyped ones are errors.
 *      wal2json objects have a handful of keys, so a lookup is a short
 *      linear scan comparing key ids (json_get).
 *
 * Column values and strings in the repl_msg point into the scanner's text,
 * which is kept until the next call (or the free); never into the caller's
 * buffer. The decoder also owns a relation cache (relcache.h) keyed by
 * schema and table: wal2json sends no Relation messages, so the layout is
 * read off each row (column names and types, in order). A row whose layout
 * differs from the cached one - ALTER TABLE, or an UPDATE that leaves out
 * unchanged TOASTed columns - gets a new relation with the next relid,
 * which replaces the old one. wal2json sends no replica identity
 * (replident is 0) and no typmod (-1); typid comes from "typeoid" when
 * present, else from the "type" name for common built-in types, else 0
 * (outboxd's own stream asks for type OIDs only when the outbox table has a
 * bytea column, see stream.c; else its typids are 0). A bytea value, which
 * wal2json sends as hex digits without the "\x", is handed on as its
 * bytes (CV_BINARY, decode_bytea()).
 *
 * Errors are -1 with one line in err: "wal2json <Action>: <reason>", where
 * the reason names the field (and the column, 1-based, inside a row); a
 * line that is no JSON gets "wal2json: " and the scanner's reason
 * ("not valid JSON (<n>-byte line): <what> at offset <k>", jsonscan.h).
 * Control bytes from the input never reach err. Nothing here logs (log.h:
 * the relay decides, and logs).
 */
#include "wal2json.h"
#include "jsonscan.h"
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytea.h"
#include "clock.h"
#include "grow.h"
#include "relcache.h"

/* Microseconds per second / day, and days from 1970-01-01 to 2000-01-01
 * (10957: PostgreSQL's epoch, clock.h). */
#define USECS_PER_SEC INT64_C(1000000)
#define SECS_PER_DAY INT64_C(86400)
#define PG_EPOCH_DAYS (PG_EPOCH_OFFSET_US / USECS_PER_SEC / SECS_PER_DAY)

/*
 * The object keys the readers look up, interned while parsing: a key token
 * gets its id (K_OTHER, the scanner's 0, for any other key), so a lookup
 * compares an integer and the duplicate check of a known key is one bit
 * in its object's mask (at most JSON_MAX_KEY_ID keys).
 */
enum key {
    K_OTHER,
    K_ACTION,
    K_TIMESTAMP,
    K_LSN,
    K_NEXTLSN,
    K_XID,
    K_SCHEMA,
    K_TABLE,
    K_COLUMNS,
    K_IDENTITY,
    K_NAME,
    K_TYPE,
    K_TYPEOID,
    K_VALUE,
    K_TRANSACTIONAL,
    K_PREFIX,
    K_CONTENT,
};

static const char *const key_names[] = {
    [K_OTHER] = "",
    [K_ACTION] = "action",
    [K_TIMESTAMP] = "timestamp",
    [K_LSN] = "lsn",
    [K_NEXTLSN] = "nextlsn",
    [K_XID] = "xid",
    [K_SCHEMA] = "schema",
    [K_TABLE] = "table",
    [K_COLUMNS] = "columns",
    [K_IDENTITY] = "identity",
    [K_NAME] = "name",
    [K_TYPE] = "type",
    [K_TYPEOID] = "typeoid",
    [K_VALUE] = "value",
    [K_TRANSACTIONAL] = "transactional",
    [K_PREFIX] = "prefix",
    [K_CONTENT] = "content",
};

struct wal2json_decoder {
    struct json_scanner *js;     /* tokens and text of the line; owned */
    struct relcache *rels;       /* layouts by relid; owns the relations */
    const struct relation *last; /* the layout the previous row used */
    uint32_t next_relid;         /* relid of the next new layout */
    struct col_value *values;    /* scratch for tuple values; owned */
    size_t values_cap;
    char *bytes;                 /* the row's bytea values, decoded; owned */
    size_t bytes_cap;
};

/* What a parser needs besides the decoder: where to write errors. */
struct ctx {
    const char *action; /* e.g. "Insert"; NULL until the action is known */
    int col;            /* 1-based column being read, 0 outside a row */
    char *err;
    size_t errlen;
};

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

/* Writes "wal2json <action>: <formatted>" into c->err, control bytes
 * replaced by '?' so the reason stays one line; always returns -1. */
static int fail(const struct ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(const struct ctx *c, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!c->err || c->errlen == 0) return -1;
    if (c->action)
        n = snprintf(c->err, c->errlen, "wal2json %s: ", c->action);
    else
        n = snprintf(c->err, c->errlen, "wal2json: ");
    if (n < 0 || (size_t)n >= c->errlen) return -1;
    if (c->col > 0) {
        int m = snprintf(c->err + n, c->errlen - (size_t)n, "column %d: ", c->col);
        if (m < 0 || (size_t)(n + m) >= c->errlen) return -1;
        n += m;
    }
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    log_one_line(c->err);
    return -1;
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* ---------------------------------------------------------------------- */
/* Keys the readers look up (interned by the scanner)                    */
/* ---------------------------------------------------------------------- */

/* The interned id of key s[0..n): the scanner's key function. */
static int key_id(const char *s, size_t n)
{
#define IS(lit) json_same_bytes(s, lit, sizeof(lit) - 1)
    switch (n) {
    case 3:
        return IS("lsn") ? K_LSN : IS("xid") ? K_XID : K_OTHER;
    case 4:
        return IS("name") ? K_NAME : IS("type") ? K_TYPE : K_OTHER;
    case 5:
        return IS("table") ? K_TABLE : IS("value") ? K_VALUE : K_OTHER;
    case 6:
        return IS("action")   ? K_ACTION
               : IS("schema") ? K_SCHEMA
               : IS("prefix") ? K_PREFIX
                              : K_OTHER;
    case 7:
        return IS("columns")   ? K_COLUMNS
               : IS("nextlsn") ? K_NEXTLSN
               : IS("typeoid") ? K_TYPEOID
               : IS("content") ? K_CONTENT
                               : K_OTHER;
    case 8:
        return IS("identity") ? K_IDENTITY : K_OTHER;
    case 9:
        return IS("timestamp") ? K_TIMESTAMP : K_OTHER;
    case 13:
        return IS("transactional") ? K_TRANSACTIONAL : K_OTHER;
    default:
        return K_OTHER;
    }
#undef IS
}

/* ---------------------------------------------------------------------- */
/* Typed field access                                                      */
/* ---------------------------------------------------------------------- */

/* Reads string field key of obj into *out (NUL-terminated, borrowed) and
 * its length into *len (if not NULL). Missing or null is an error when
 * required, else leaves *out = NULL. */
static int get_textn(const struct ctx *c, const struct json_tok *obj, enum key key,
                     bool required, const char **out, size_t *len)
{
    const struct json_tok *v = json_get(obj, key);

    *out = NULL;
    if ((!v || v->type == JSON_NULL) && !required) return 0;
    if (!v) return fail(c, "missing \"%s\"", key_names[key]);
    if (v->type != JSON_STRING)
        return fail(c, "\"%s\" is %s, not a string", key_names[key], json_type_name(v));
    *out = v->s;
    if (len) *len = v->len;
    return 0;
}

static int get_text(const struct ctx *c, const struct json_tok *obj, enum key key,
                    bool required, const char **out)
{
    return get_textn(c, obj, key, required, out, NULL);
}

/* Reads field key as an LSN ("%X/%X"). Missing or null is an error when
 * required, else *present = false. */
static int get_lsn(const struct ctx *c, const struct json_tok *obj, enum key key, bool required,
                   lsn_t *out, bool *present)
{
    const char *s;

    *present = false;
    if (get_text(c, obj, key, required, &s) < 0) return -1;
    if (!s) return 0;
    if (!lsn_parse(s, out))
        return fail(c, "\"%s\" is \"%.40s\", not an LSN", key_names[key], s);
    *present = true;
    return 0;
}

/* Parses the text of an unsigned decimal number up to max (no sign,
 * fraction or exponent). */
static bool parse_uint(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0) return false;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i])) return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > max) return false;
    }
    *out = v;
    return true;
}

/* Reads field key as a JSON number in 0..UINT32_MAX; missing or null
 * leaves *out = 0. */
static int get_u32(const struct ctx *c, const struct json_tok *obj, enum key key, uint32_t *out)
{
    const struct json_tok *v = json_get(obj, key);
    uint64_t n;

    *out = 0;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_NUMBER)
        return fail(c, "\"%s\" is %s, not a number", key_names[key], json_type_name(v));
    if (!parse_uint(v->s, v->len, UINT32_MAX, &n))
        return fail(c, "\"%s\" is %.40s, not a 32-bit unsigned integer", key_names[key],
                    v->s);
    *out = (uint32_t)n;
    return 0;
}

/* Reads a required boolean field. */
static int get_bool(const struct ctx *c, const struct json_tok *obj, enum key key, bool *out)
{
    const struct json_tok *v = json_get(obj, key);

    if (!v) return fail(c, "missing \"%s\"", key_names[key]);
    if (v->type != JSON_TRUE && v->type != JSON_FALSE)
        return fail(c, "\"%s\" is %s, not a boolean", key_names[key], json_type_name(v));
    *out = v->type == JSON_TRUE;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Timestamps                                                              */
/* ---------------------------------------------------------------------- */

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return m == 2 && leap ? 29 : days[m - 1];
}

/* Reads exactly n digits at *p into *out and advances *p. */
static bool digits(const char **p, const char *end, int n, int *out)
{
    int v = 0;

    if (end - *p < n) return false;
    for (int i = 0; i < n; i++) {
        if (!is_digit((*p)[i])) return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

/* Consumes the character ch at *p. */
static bool lit(const char **p, const char *end, char ch)
{
    if (*p >= end || **p != ch) return false;
    (*p)++;
    return true;
}

/*
 * Parses Postgres' ISO output of a timestamptz,
 *   YYYY-MM-DD HH:MM:SS[.f{1,6}](+|-)HH[:MM[:SS]]
 * e.g. "2026-11-30 00:58:39.245662+00" or "...39.2-08" or "...+05:30",
 * into microseconds since 2000-01-01 00:00:00 UTC.
 */
static bool parse_timestamp(const char *s, size_t len, int64_t *out)
{
    const char *p = s, *end = s + len;
    int y, mo, d, h, mi, sec, tzh, tzm = 0, tzs = 0, usec = 0, sign;
    int64_t secs;

    if (!digits(&p, end, 4, &y) || !lit(&p, end, '-') || !digits(&p, end, 2, &mo) ||
        !lit(&p, end, '-') || !digits(&p, end, 2, &d) || !lit(&p, end, ' ') ||
        !digits(&p, end, 2, &h) || !lit(&p, end, ':') || !digits(&p, end, 2, &mi) ||
        !lit(&p, end, ':') || !digits(&p, end, 2, &sec))
        return false;
    if (lit(&p, end, '.')) {
        int n = 0;
        for (; n < 6 && p < end && is_digit(*p); n++, p++)
            usec = usec * 10 + (*p - '0');
        if (n == 0) return false;
        for (; n < 6; n++)
            usec *= 10;
    }
    if (p >= end || (*p != '+' && *p != '-')) return false;
    sign = *p++ == '-' ? -1 : 1;
    if (!digits(&p, end, 2, &tzh)) return false;
    if (lit(&p, end, ':')) {
        if (!digits(&p, end, 2, &tzm)) return false;
        if (lit(&p, end, ':') && !digits(&p, end, 2, &tzs)) return false;
    }
    if (p != end || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 ||
        mi > 59 || sec > 59 || tzh > 15 || tzm > 59 || tzs > 59)
        return false;
    secs = (days_from_civil(y, mo, d) - PG_EPOCH_DAYS) * SECS_PER_DAY + h * 3600 + mi * 60 +
           sec - sign * (tzh * 3600 + tzm * 60 + tzs);
    *out = secs * USECS_PER_SEC + usec;
    return true;
}
/* Reads "timestamp" into *out; missing or null (a non-transactional
 * message) leaves 0. */
static int get_timestamp(const struct ctx *c, const struct json_tok *obj, int64_t *out)
{
    const char *s;
    size_t len = 0;

    *out = 0;
    if (get_textn(c, obj, K_TIMESTAMP, false, &s, &len) < 0) return -1;
    if (!s) return 0;
    if (!parse_timestamp(s, len, out))
        return fail(c,
                    "\"timestamp\" is \"%.40s\", not YYYY-MM-DD "
                    "HH:MM:SS[.ffffff]+TZ",
                    s);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Rows and their relations                                                */
/* ---------------------------------------------------------------------- */

/* Type OIDs of common built-in types by the name format_type() prints. */
#define TYPE(name, oid) {name, sizeof(name) - 1, oid}
static const struct {
    const char *name;
    size_t len;
    uint32_t oid;
} type_oids[] = {
    TYPE("boolean", 16),
    TYPE("bytea", 17),
    TYPE("\"char\"", 18),
    TYPE("name", 19),
    TYPE("bigint", 20),
    TYPE("smallint", 21),
    TYPE("integer", 23),
    TYPE("text", 25),
    TYPE("oid", 26),
    TYPE("json", 114),
    TYPE("xml", 142),
    TYPE("real", 700),
    TYPE("double precision", 701),
    TYPE("money", 790),
    TYPE("inet", 869),
    TYPE("character", 1042),
    TYPE("character varying", 1043),
    TYPE("date", 1082),
    TYPE("time without time zone", 1083),
    TYPE("timestamp without time zone", 1114),
    TYPE("timestamp with time zone", 1184),
    TYPE("interval", 1186),
    TYPE("time with time zone", 1266),
    TYPE("numeric", 1700),
    TYPE("uuid", 2950),
    TYPE("jsonb", 3802),
};
#undef TYPE

/* OID of the type named name[0..n) in type_oids, 0 if not there. */
static uint32_t type_oid_of(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof(type_oids) / sizeof(type_oids[0]); i++)
        if (type_oids[i].len == n && type_oids[i].name[0] == name[0] &&
            memcmp(name, type_oids[i].name, n) == 0)
            return type_oids[i].oid;
    return 0;
}

/* OID for a type name as wal2json prints it, ignoring a typmod such as
 * "(20)" or "(10,2)" wherever it stands; 0 for arrays and unknown types. */
static uint32_t type_oid(const char *type, size_t len)
{
    char base[64];
    size_t n = 0;
    bool in_mod = false;

    if (!memchr(type, '(', len)) /* the common case: no typmod to drop */
        return type_oid_of(type, len);
    for (const char *p = type; *p; p++) {
        if (*p == '(')
            in_mod = true;
        else if (*p == ')')
            in_mod = false;
        else if (!in_mod) {
            if (n + 1 >= sizeof(base)) return 0;
            base[n++] = *p;
        }
    }
    return type_oid_of(base, n);
}

/* Reads the name and type OID of one element of "columns"/"identity". */
static int read_column_head(const struct ctx *c, const struct json_tok *col, const char **name,
                            size_t *name_len, uint32_t *typid)
{
    const char *type;
    size_t type_len = 0;

    if (col->type != JSON_OBJECT) return fail(c, "is %s, not an object", json_type_name(col));
    if (get_textn(c, col, K_NAME, true, name, name_len) < 0 ||
        get_textn(c, col, K_TYPE, false, &type, &type_len) < 0 ||
        get_u32(c, col, K_TYPEOID, typid) < 0)
        return -1;
    if (**name == '\0') return fail(c, "empty \"name\"");
    if (*typid == 0 && type) *typid = type_oid(type, type_len);
    return 0;
}

/* Reads the value of one column into v; it borrows the scanner's text. */
static int read_value(const struct ctx *c, const struct json_tok *col, struct col_value *v)
{
    const struct json_tok *j = json_get(col, K_VALUE);

    v->kind = CV_TEXT;
    v->data = NULL;
    v->len = 0;
    if (!j) return fail(c, "missing \"value\"");
    switch (j->type) {
    case JSON_NULL:
        v->kind = CV_NULL;
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        v->data = j->type == JSON_TRUE ? "t" : "f";
        v->len = 1;
        return 0;
    case JSON_STRING:
    case JSON_NUMBER:
        if (j->len > UINT32_MAX) return fail(c, "value too long");
        v->data = j->s;
        v->len = (uint32_t)j->len;
        return 0;
    default:
        return fail(c, "\"value\" is %s, not a scalar", json_type_name(j));
    }
}

/* True when column i of rel (if it has one) is name[0..len) with type
 * typid. (name holds no NUL: \u0000 is refused; so when all len bytes
 * match, the cached name is at least len long and [len] can be read.) */
static bool same_column(const struct relation *rel, size_t i, const char *name, size_t len,
                        uint32_t typid)
{
    return i < (size_t)rel->ncols && rel->cols[i].typid == typid &&
           json_same_bytes(rel->cols[i].name, name, len) && rel->cols[i].name[len] == '\0';
}

/* Caches a new layout for nsp.table built from the (already validated)
 * heads of cols, replacing the old layout if any, and points *out at it. */
static int new_layout(struct wal2json_decoder *d, struct ctx *c, const char *nsp,
                      const char *table, const struct json_tok *cols,
                      const struct relation *old, const struct relation **out)
{
    int ncols = (int)cols->len;
    const struct json_tok *head = cols + 1;
    struct relation *rel;

    /* Relids wrap after 2^32 layouts; never reuse one still cached. */
    while (d->next_relid == 0 || relcache_get(d->rels, d->next_relid))
        d->next_relid++;
    rel = relation_new(d->next_relid, nsp, table, 0, ncols);
    if (!rel) return fail(c, "out of memory for relation %s.%s", nsp, table);
    for (int i = 0; i < ncols; i++) {
        struct rel_column *col = &rel->cols[i];
        const char *name;
        size_t name_len;

        c->col = i + 1;
        if (read_column_head(c, head, &name, &name_len, &col->typid) < 0) goto fail;
        head += head->size;
        for (int j = 0; j < i; j++)
            if (strcmp(rel->cols[j].name, name) == 0) {
                fail(c, "duplicate column name \"%.64s\"", name);
                goto fail;
            }
        col->typmod = -1;
        col->name = strdup(name);
        if (!col->name) {
            fail(c, "out of memory copying a column name");
            goto fail;
        }
    }
    c->col = 0;
    if (relcache_put(d->rels, rel) < 0) {
        fail(c, "out of memory caching relation %s.%s", nsp, table);
        goto fail;
    }
    d->next_relid++;
    if (old) relcache_remove(d->rels, old->relid);
    d->last = rel;
    *out = rel;
    return 0;
fail:
    relation_free(rel);
    return -1;
}

/* wal2json sends a bytea value as a string of its hex digits, without
 * the hex format's "\x" (its escape-format text loses bytes the same way:
 * stream.c sets bytea_output = hex). Such values of the row in d->values
 * (those of a column whose type OID is bytea's: "typeoid", or "type") are
 * decoded into d->bytes and handed on as their bytes (CV_BINARY, bytea's
 * binary form). 0, or -1 with err. */
static int decode_bytea(struct wal2json_decoder *d, struct ctx *c,
                        const struct relation *rel)
{
    size_t need = 0, used = 0;
    for (int i = 0; i < rel->ncols; i++)
        if (rel->cols[i].typid == BYTEA_OID && d->values[i].kind == CV_TEXT)
            need += d->values[i].len / 2 + 1;
    if (need == 0) return 0;
    void *p = d->bytes;
    if (grow_array(&p, &d->bytes_cap, need, 1, 256) != 0)
        return fail(c, "out of memory for %zu bytes of bytea values", need);
    d->bytes = p;
    for (int i = 0; i < rel->ncols; i++) {
        struct col_value *v = &d->values[i];
        if (rel->cols[i].typid != BYTEA_OID || v->kind != CV_TEXT) continue;
        char why[128];
        long n = bytea_hex_decode(v->data, v->len, d->bytes + used, why, sizeof(why));
        if (n < 0) {
            c->col = i + 1;
            return fail(c, "bytea \"value\": %s", why);
        }
        *v = (struct col_value){CV_BINARY, (uint32_t)n, d->bytes + used};
        used += (size_t)n;
    }
    return 0;
}

/*
 * A row: "schema" and "table" strings and, under key ("columns" for I/U,
 * "identity" for D), an array of
 *   {"name": string, ["type": string,] ["typeoid": number,] "value": scalar}
 * Values land in the scratch array; names and types are compared with the
 * cached layout of schema.table on the way, and a new layout is cached
 * when they differ.
 */
static int parse_row(struct wal2json_decoder *d, struct ctx *c, const struct json_tok *obj,
                     enum key key, enum repl_msg_kind kind, struct repl_msg *out)
{
    const char *nsp, *table, *name;
    size_t name_len;
    const struct json_tok *cols, *col;
    const struct relation *rel;
    uint32_t typid;
    bool same;
    size_t n;

    if (get_text(c, obj, K_SCHEMA, true, &nsp) < 0 ||
        get_text(c, obj, K_TABLE, true, &table) < 0)
        return -1;
    cols = json_get(obj, key);
    if (!cols) return fail(c, "missing \"%s\"", key_names[key]);
    if (cols->type != JSON_ARRAY)
        return fail(c, "\"%s\" is %s, not an array", key_names[key], json_type_name(cols));
    n = cols->len;
    if (n > REL_MAX_COLS)
        return fail(c, "%zu columns in \"%s\" (max %d)", n, key_names[key], REL_MAX_COLS);
    if (col_values_reserve(&d->values, &d->values_cap, n) < 0)
        return fail(c, "out of memory for %zu column values", n);
    rel = d->last;
    if (!rel || strcmp(rel->relname, table) != 0 || strcmp(rel->nspname, nsp) != 0)
        rel = relcache_find(d->rels, nsp, table);
    same = rel && (size_t)rel->ncols == n;
    col = cols + 1;
    for (size_t i = 0; i < n; i++, col += col->size) {
        c->col = (int)i + 1;
        if (read_column_head(c, col, &name, &name_len, &typid) < 0 ||
            read_value(c, col, &d->values[i]) < 0)
            return -1;
        same = same && same_column(rel, i, name, name_len, typid);
    }
    c->col = 0;
    if (same)
        d->last = rel;
    else if (new_layout(d, c, nsp, table, cols, rel, &rel) < 0)
        return -1;
    if (decode_bytea(d, c, rel) < 0) return -1;
    out->kind = kind;
    out->u.tuple.rel = rel;
    out->u.tuple.nvalues = (int)n;
    out->u.tuple.values = d->values;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Step 2: one reader per action                                           */
/* ---------------------------------------------------------------------- */

/* B: {"action":"B", ["xid":number,] "timestamp":string, "lsn":LSN, ...}
 *    final_lsn = lsn (the commit record's LSN). */
static int parse_begin(struct wal2json_decoder *d, struct ctx *c, const struct json_tok *obj,
                       lsn_t data_start, struct repl_msg *out)
{
    bool present;

    (void)d;
    (void)data_start;
    out->kind = RM_BEGIN;
    if (get_lsn(c, obj, K_LSN, true, &out->u.begin.final_lsn, &present) < 0 ||
        get_timestamp(c, obj, &out->u.begin.commit_time) < 0 ||
        get_u32(c, obj, K_XID, &out->u.begin.xid) < 0)
        return -1;
    return 0;
}

/* C: {"action":"C", ["xid":number,] "timestamp":string, "lsn":LSN,
 *     "nextlsn":LSN}. commit_lsn = lsn; end_lsn = the frame's dataStart,
 *     which nextlsn (the end of the commit record) must equal. */
static int parse_commit(struct wal2json_decoder *d, struct ctx *c, const struct json_tok *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    char a[LSN_STRLEN], b[LSN_STRLEN];
    lsn_t next = 0;
    bool present;

    (void)d;
    out->kind = RM_COMMIT;
    out->u.commit.flags = 0;
    out->u.commit.end_lsn = data_start;
    if (get_lsn(c, obj, K_LSN, true, &out->u.commit.commit_lsn, &present) < 0 ||
        get_timestamp(c, obj, &out->u.commit.commit_time) < 0 ||
        get_lsn(c, obj, K_NEXTLSN, false, &next, &present) < 0)
        return -1;
    if (present && next != data_start)
        return fail(c, "\"nextlsn\" %s differs from the frame's dataStart %s",
                    lsn_format(next, a), lsn_format(data_start, b));
    return 0;
}

/* I: {"action":"I", ..., "schema", "table", "columns":[...]} (new row) */
static int parse_insert(struct wal2json_decoder *d, struct ctx *c, const struct json_tok *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, K_COLUMNS, RM_INSERT, out);
}

/* U: {"action":"U", ..., "schema", "table", "columns":[...] (new row, less
 *     unchanged TOASTed columns), ["identity":[...] (old key)]} */
static int parse_update(struct wal2json_decoder *d, struct ctx *c, const struct json_tok *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, K_COLUMNS, RM_UPDATE, out);
}

/* D: {"action":"D", ..., "schema", "table", "identity":[...] (old key)} */
static int parse_delete(struct wal2json_decoder *d, struct ctx *c, const struct json_tok *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, K_IDENTITY, RM_DELETE, out);
}

/* T: {"action":"T", ..., "schema", "table"}, one line per table. */
static int parse_truncate(struct wal2json_decoder *d, struct ctx *c, const struct json_tok *obj,
                          lsn_t data_start, struct repl_msg *out)
{
    const char *nsp, *table;

    (void)d;
    (void)data_start;
    if (get_text(c, obj, K_SCHEMA, true, &nsp) < 0 ||
        get_text(c, obj, K_TABLE, true, &table) < 0)
        return -1;
    out->kind = RM_TRUNCATE;
    out->u.truncate.nrelids = 1;
    out->u.truncate.options = 0;
    return 0;
}

/* M: {"action":"M", ["xid",] "timestamp":string|null, ["lsn":LSN,]
 *     "transactional":bool, "prefix":string, "content":string} */
static int parse_message(struct wal2json_decoder *d, struct ctx *c, const struct json_tok *obj,
                         lsn_t data_start, struct repl_msg *out)
{
    const struct json_tok *content = json_get(obj, K_CONTENT);
    bool transactional = false, present;

    (void)d;
    (void)data_start;
    out->kind = RM_MESSAGE;
    if (get_bool(c, obj, K_TRANSACTIONAL, &transactional) < 0 ||
        get_text(c, obj, K_PREFIX, true, &out->u.message.prefix) < 0 ||
        get_lsn(c, obj, K_LSN, false, &out->u.message.lsn, &present) < 0)
        return -1;
    if (!content) return fail(c, "missing \"content\"");
    if (content->type != JSON_STRING)
        return fail(c, "\"content\" is %s, not a string", json_type_name(content));
    if (content->len > UINT32_MAX) return fail(c, "content too long");
    out->u.message.flags = transactional ? 1 : 0;
    out->u.message.content = content->s;
    out->u.message.len = (uint32_t)content->len;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Decoder lifetime and dispatch                                           */
/* ---------------------------------------------------------------------- */

struct wal2json_decoder *wal2json_decoder_new(void)
{
    struct wal2json_decoder *d = calloc(1, sizeof(*d));

    if (!d) return NULL;
    d->next_relid = 1;
    d->rels = relcache_new();
    d->js = json_scanner_new(key_id);
    if (!d->rels || !d->js) {
        wal2json_decoder_free(d);
        return NULL;
    }
    return d;
}

void wal2json_decoder_free(struct wal2json_decoder *d)
{
    if (!d) return;
    relcache_free(d->rels);
    json_scanner_free(d->js);
    free(d->values);
    free(d->bytes);
    free(d);
}

typedef int (*parse_fn)(struct wal2json_decoder *, struct ctx *, const struct json_tok *, lsn_t,
                        struct repl_msg *);

static const struct {
    char action;
    const char *name;
    parse_fn parse;
} parsers[] = {
    {'B', "Begin", parse_begin},     {'C', "Commit", parse_commit},
    {'I', "Insert", parse_insert},   {'U', "Update", parse_update},
    {'D', "Delete", parse_delete},   {'T', "Truncate", parse_truncate},
    {'M', "Message", parse_message},
};

int wal2json_decode(struct wal2json_decoder *d, lsn_t data_start, const char *buf,
                    size_t len, struct repl_msg *out, char *err, size_t errlen)
{
    struct ctx c = {NULL, 0, err, errlen};
    const struct json_tok *root;
    const char *action;
    struct repl_msg msg;
    char why[JSON_ERRLEN];

    if (len == 0) return fail(&c, "empty line");
    if (json_scan(d->js, buf, len, &root, why, sizeof(why)) < 0) return fail(&c, "%s", why);
    if (root->type != JSON_OBJECT)
        return fail(&c, "line is %s, not a JSON object", json_type_name(root));
    if (get_text(&c, root, K_ACTION, true, &action) < 0) return -1;
    for (size_t i = 0; i < sizeof(parsers) / sizeof(parsers[0]); i++) {
        if (action[0] != parsers[i].action || action[1] != '\0') continue;
        c.action = parsers[i].name;
        memset(&msg, 0, sizeof(msg));
        if (parsers[i].parse(d, &c, root, data_start, &msg) < 0) return -1;
        *out = msg;
        return 0;
    }
    return fail(&c, "unknown action \"%.16s\"", action);
}

/* {"action":"<letter>" at the start of the line: see wal2json.h. */
char wal2json_line_action(const char *buf, size_t len)
{
    static const char key[] = "\"action\"";
    size_t i = json_skip_ws(buf, len, 0);
    char action;

    if (i >= len || buf[i] != '{') return '\0';
    i = json_skip_ws(buf, len, i + 1);
    if (len - i < sizeof(key) - 1 || memcmp(buf + i, key, sizeof(key) - 1) != 0)
        return '\0';
    i = json_skip_ws(buf, len, i + sizeof(key) - 1);
    if (i >= len || buf[i] != ':') return '\0';
    i = json_skip_ws(buf, len, i + 1);
    if (len - i < 3 || buf[i] != '"' || buf[i + 2] != '"') return '\0';
    action = buf[i + 1];
    return action >= 'A' && action <= 'Z' ? action : '\0';
}

/* Appends name to out (at *n), each ASCII byte that is not a letter, digit
 * or '_' escaped with a backslash (wal2json.h). */
static void add_table_escaped(char *out, size_t *n, const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || *p == '_' || *p >= 0x80;
        if (!plain) out[(*n)++] = '\\';
        out[(*n)++] = (char)*p;
    }
}

char *wal2json_add_table(char *list, const char *schema, const char *table)
{
    size_t used = list ? strlen(list) : 0;
    /* each byte escaped at most, a comma, the period and the NUL */
    size_t need = used + 2 * (strlen(schema) + strlen(table)) + 3;
    char *grown = realloc(list, need);
    if (!grown) {
        free(list);
        return NULL;
    }
    if (used) grown[used++] = ',';
    add_table_escaped(grown, &used, schema);
    grown[used++] = '.';
    add_table_escaped(grown, &used, table);
    grown[used] = '\0';
    return grown;
}
