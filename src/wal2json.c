/*
 * wal2json.c - decoder for the wal2json output plugin, format-version 2:
 * one JSON object per XLogData payload, turned into one struct repl_msg
 * (decode.h). See wal2json.h for the options outboxd starts the stream with.
 *
 * A line goes through three steps:
 *
 *   1. number rewrite. jansson turns JSON numbers into long long or double
 *      and cannot give back their text, but a numeric column must reach
 *      Kafka as exactly the text Postgres printed (1.50, 30 digits, 1e+300).
 *      So a small scanner copies the line into a decoder-owned buffer and
 *      turns every number token outside strings into a string holding a NUL
 *      byte followed by the token's text: 1.50 becomes "\u00001.50". A real
 *      string can never start with NUL, because the scanner rejects the
 *      escape \u0000 in the input (Postgres text cannot hold NUL either), so
 *      a string that starts with NUL was a number. Number tokens are checked
 *      against the JSON grammar on the way; one used as an object key is
 *      still refused (jansson allows no NUL in keys).
 *   2. json_loadb with JSON_ALLOW_NUL (for the markers) and
 *      JSON_REJECT_DUPLICATES. jansson checks the rest: structure, UTF-8,
 *      escapes and surrogate pairs, nesting depth, trailing garbage.
 *   3. one parser per action reads the fields it needs from the object;
 *      unknown fields are ignored, missing or mistyped ones are errors.
 *
 * The parsed document is kept until the next call (or the free): column
 * values and strings in the repl_msg point into it. The decoder also owns
 * a relation cache (relcache.h) keyed by schema and table: wal2json sends
 * no Relation messages, so the layout is read off each row (column names
 * and types, in order). A row whose layout differs from the cached one -
 * ALTER TABLE, or an UPDATE that leaves out unchanged TOASTed columns -
 * gets a new relation with the next relid, which replaces the old one.
 * wal2json sends no replica identity (replident is 0) and no typmod (-1);
 * typid comes from "typeoid" when present, else from the "type" name for
 * common built-in types, else 0.
 *
 * Errors are -1 with one line in err: "wal2json <Action>: <reason>", where
 * the reason names the field (and the column, 1-based, inside a row).
 * Control bytes from the input never reach err.
 */
#include "wal2json.h"
#include "log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relcache.h"

/* The rewrite buffer is kept for the next line only up to this size. */
#define W2J_KEEP_BUF (1u << 20)

/* Microseconds per second / day, and days from 1970-01-01 to 2000-01-01. */
#define USECS_PER_SEC INT64_C(1000000)
#define SECS_PER_DAY INT64_C(86400)
#define PG_EPOCH_DAYS INT64_C(10957)

struct wal2json_decoder {
    struct relcache *rels;       /* layouts by relid; owns the relations */
    const struct relation *last; /* the layout the previous row used */
    uint32_t next_relid;         /* relid of the next new layout */
    json_t *root;                /* document of the previous call, or NULL */
    char *buf;                   /* number-rewrite output; owned */
    size_t buf_len, buf_cap;
    struct col_value *values; /* scratch for tuple values; owned */
    size_t values_cap;
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

/* ---------------------------------------------------------------------- */
/* Step 1: number rewrite                                                  */
/* ---------------------------------------------------------------------- */

/* Appends n bytes to the rewrite buffer, growing it; -1 on out of memory. */
static int buf_put(struct wal2json_decoder *d, const char *p, size_t n)
{
    if (n > d->buf_cap - d->buf_len) {
        size_t ncap = d->buf_cap ? d->buf_cap : 256;
        char *nb;

        while (ncap - d->buf_len < n) {
            if (ncap > SIZE_MAX / 2) return -1;
            ncap *= 2;
        }
        nb = realloc(d->buf, ncap);
        if (!nb) return -1;
        d->buf = nb;
        d->buf_cap = ncap;
    }
    memcpy(d->buf + d->buf_len, p, n);
    d->buf_len += n;
    return 0;
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/*
 * Length of the JSON number at s[0..n), 0 when s does not start with one:
 *   number = [ "-" ] ( "0" | [1-9] [0-9]* ) [ "." [0-9]+ ]
 *            [ ( "e" | "E" ) [ "+" | "-" ] [0-9]+ ]
 * A number glued to more number characters ("01", "1.", "1e") is invalid.
 */
static size_t number_length(const char *s, size_t n)
{
    size_t p = 0;

    if (p < n && s[p] == '-') p++;
    if (p < n && s[p] == '0')
        p++;
    else if (p < n && s[p] >= '1' && s[p] <= '9')
        while (p < n && is_digit(s[p]))
            p++;
    else
        return 0;
    if (p < n && s[p] == '.') {
        if (++p >= n || !is_digit(s[p])) return 0;
        while (p < n && is_digit(s[p]))
            p++;
    }
    if (p < n && (s[p] == 'e' || s[p] == 'E')) {
        if (++p < n && (s[p] == '+' || s[p] == '-')) p++;
        if (p >= n || !is_digit(s[p])) return 0;
        while (p < n && is_digit(s[p]))
            p++;
    }
    if (p < n && s[p] != '\0' && strchr("0123456789.eE+-", s[p])) return 0;
    return p;
}

/* Length of the string token at s[0] == '"' through its closing quote, or
 * all of s when it is unterminated (jansson reports that). Sets *nul when
 * the string holds the escape \u0000. */
static size_t string_length(const char *s, size_t n, bool *nul)
{
    size_t p = 1;

    *nul = false;
    while (p < n && s[p] != '"') {
        if (s[p] == '\\') {
            if (n - p >= 6 && s[p + 1] == 'u' && memcmp(s + p + 2, "0000", 4) == 0)
                *nul = true;
            p++; /* the escaped character is never the closing quote */
        }
        p++;
    }
    return p < n ? p + 1 : n;
}

/* Copies line into d->buf with every number outside strings turned into a
 * NUL-prefixed string (see the top of the file). */
static int rewrite_numbers(struct wal2json_decoder *d, const struct ctx *c,
                           const char *line, size_t len)
{
    static const char open[] = "\"\\u0000";
    size_t i = 0;

    d->buf_len = 0;
    while (i < len) {
        size_t run = i, n;
        bool nul;

        /* Structural characters, whitespace, literals: copied as they are. */
        while (run < len && line[run] != '"' && line[run] != '-' && !is_digit(line[run]))
            run++;
        if (run > i && buf_put(d, line + i, run - i) < 0) goto oom;
        i = run;
        if (i == len) break;
        if (line[i] == '"') {
            n = string_length(line + i, len - i, &nul);
            if (nul)
                return fail(c,
                            "string at offset %zu holds \\u0000, which "
                            "Postgres text cannot",
                            i);
            if (buf_put(d, line + i, n) < 0) goto oom;
        } else {
            n = number_length(line + i, len - i);
            if (n == 0) return fail(c, "invalid number at offset %zu", i);
            if (buf_put(d, open, sizeof(open) - 1) < 0 || buf_put(d, line + i, n) < 0 ||
                buf_put(d, "\"", 1) < 0)
                goto oom;
        }
        i += n;
    }
    return 0;
oom:
    return fail(c, "out of memory copying a %zu-byte line", len);
}

/* ---------------------------------------------------------------------- */
/* Typed field access                                                      */
/* ---------------------------------------------------------------------- */

/* True for a number the rewrite turned into a NUL-prefixed string. */
static bool is_number(const json_t *v)
{
    return json_is_string(v) && json_string_length(v) > 0 &&
           json_string_value(v)[0] == '\0';
}

/* True for a real JSON string (not a rewritten number). */
static bool is_text(const json_t *v)
{
    return json_is_string(v) && !is_number(v);
}

/* Names the JSON type of v for errors. */
static const char *type_name(const json_t *v)
{
    if (!v) return "missing";
    if (is_number(v)) return "a number";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_TRUE:
        return "true";
    case JSON_FALSE:
        return "false";
    case JSON_NULL:
        return "null";
    default:
        return "a number";
    }
}

/* Reads string field key of obj into *out (NUL-terminated, borrowed).
 * Missing or null is an error when required, else leaves *out = NULL. */
static int get_text(const struct ctx *c, const json_t *obj, const char *key, bool required,
                    const char **out)
{
    const json_t *v = json_object_get(obj, key);

    *out = NULL;
    if ((!v || json_is_null(v)) && !required) return 0;
    if (!v) return fail(c, "missing \"%s\"", key);
    if (!is_text(v)) return fail(c, "\"%s\" is %s, not a string", key, type_name(v));
    *out = json_string_value(v);
    return 0;
}

/* Reads field key as an LSN ("%X/%X"). Missing or null is an error when
 * required, else *present = false. */
static int get_lsn(const struct ctx *c, const json_t *obj, const char *key, bool required,
                   lsn_t *out, bool *present)
{
    const char *s;

    *present = false;
    if (get_text(c, obj, key, required, &s) < 0) return -1;
    if (!s) return 0;
    if (!lsn_parse(s, out)) return fail(c, "\"%s\" is \"%.40s\", not an LSN", key, s);
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
static int get_u32(const struct ctx *c, const json_t *obj, const char *key, uint32_t *out)
{
    const json_t *v = json_object_get(obj, key);
    uint64_t n;

    *out = 0;
    if (!v || json_is_null(v)) return 0;
    if (!is_number(v)) return fail(c, "\"%s\" is %s, not a number", key, type_name(v));
    if (!parse_uint(json_string_value(v) + 1, json_string_length(v) - 1, UINT32_MAX, &n))
        return fail(c, "\"%s\" is %.40s, not a 32-bit unsigned integer", key,
                    json_string_value(v) + 1);
    *out = (uint32_t)n;
    return 0;
}

/* Reads a required boolean field. */
static int get_bool(const struct ctx *c, const json_t *obj, const char *key, bool *out)
{
    const json_t *v = json_object_get(obj, key);

    if (!v) return fail(c, "missing \"%s\"", key);
    if (!json_is_boolean(v))
        return fail(c, "\"%s\" is %s, not a boolean", key, type_name(v));
    *out = json_is_true(v);
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
static int get_timestamp(const struct ctx *c, const json_t *obj, int64_t *out)
{
    const json_t *v;
    const char *s;

    *out = 0;
    if (get_text(c, obj, "timestamp", false, &s) < 0) return -1;
    if (!s) return 0;
    v = json_object_get(obj, "timestamp");
    if (!parse_timestamp(s, json_string_length(v), out))
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
static const struct {
    const char *name;
    uint32_t oid;
} type_oids[] = {
    {"boolean", 16},
    {"bytea", 17},
    {"\"char\"", 18},
    {"name", 19},
    {"bigint", 20},
    {"smallint", 21},
    {"integer", 23},
    {"text", 25},
    {"oid", 26},
    {"json", 114},
    {"xml", 142},
    {"real", 700},
    {"double precision", 701},
    {"money", 790},
    {"inet", 869},
    {"character", 1042},
    {"character varying", 1043},
    {"date", 1082},
    {"time without time zone", 1083},
    {"timestamp without time zone", 1114},
    {"timestamp with time zone", 1184},
    {"interval", 1186},
    {"time with time zone", 1266},
    {"numeric", 1700},
    {"uuid", 2950},
    {"jsonb", 3802},
};

/* OID for a type name as wal2json prints it, ignoring a typmod such as
 * "(20)" or "(10,2)" wherever it stands; 0 for arrays and unknown types. */
static uint32_t type_oid(const char *type)
{
    char base[64];
    size_t n = 0;
    bool in_mod = false;

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
    base[n] = '\0';
    for (size_t i = 0; i < sizeof(type_oids) / sizeof(type_oids[0]); i++)
        if (strcmp(base, type_oids[i].name) == 0) return type_oids[i].oid;
    return 0;
}

/* Reads the name and type OID of one element of "columns"/"identity". */
static int read_column_head(const struct ctx *c, const json_t *col, const char **name,
                            uint32_t *typid)
{
    const char *type;

    if (!json_is_object(col)) return fail(c, "is %s, not an object", type_name(col));
    if (get_text(c, col, "name", true, name) < 0 ||
        get_text(c, col, "type", false, &type) < 0 || get_u32(c, col, "typeoid", typid) < 0)
        return -1;
    if (**name == '\0') return fail(c, "empty \"name\"");
    if (*typid == 0 && type) *typid = type_oid(type);
    return 0;
}

/* Reads the value of one column into v; it borrows from the document. */
static int read_value(const struct ctx *c, const json_t *col, struct col_value *v)
{
    const json_t *j = json_object_get(col, "value");

    v->kind = CV_TEXT;
    v->data = NULL;
    v->len = 0;
    if (!j) return fail(c, "missing \"value\"");
    switch (json_typeof(j)) {
    case JSON_NULL:
        v->kind = CV_NULL;
        return 0;
    case JSON_TRUE:
    case JSON_FALSE:
        v->data = json_is_true(j) ? "t" : "f";
        v->len = 1;
        return 0;
    case JSON_STRING:
        if (json_string_length(j) > UINT32_MAX) return fail(c, "value too long");
        v->data = json_string_value(j);
        v->len = (uint32_t)json_string_length(j);
        if (is_number(j)) {
            v->data++;
            v->len--;
        }
        return 0;
    default:
        return fail(c, "\"value\" is %s, not a scalar", type_name(j));
    }
}

/* True when column i of rel (if it has one) is name with type typid. */
static bool same_column(const struct relation *rel, size_t i, const char *name,
                        uint32_t typid)
{
    return i < (size_t)rel->ncols && rel->cols[i].typid == typid &&
           strcmp(rel->cols[i].name, name) == 0;
}

/* Caches a new layout for nsp.table built from the (already validated)
 * heads of cols, replacing the old layout if any, and points *out at it. */
static int new_layout(struct wal2json_decoder *d, struct ctx *c, const char *nsp,
                      const char *table, const json_t *cols, const struct relation *old,
                      const struct relation **out)
{
    int ncols = (int)json_array_size(cols);
    struct relation *rel;

    /* Relids wrap after 2^32 layouts; never reuse one still cached. */
    while (d->next_relid == 0 || relcache_get(d->rels, d->next_relid))
        d->next_relid++;
    rel = relation_new(d->next_relid, nsp, table, 0, ncols);
    if (!rel) return fail(c, "out of memory for relation %s.%s", nsp, table);
    for (int i = 0; i < ncols; i++) {
        struct rel_column *col = &rel->cols[i];
        const char *name;

        c->col = i + 1;
        if (read_column_head(c, json_array_get(cols, (size_t)i), &name, &col->typid) < 0)
            goto fail;
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

/*
 * A row: "schema" and "table" strings and, under key ("columns" for I/U,
 * "identity" for D), an array of
 *   {"name": string, ["type": string,] ["typeoid": number,] "value": scalar}
 * Values land in the scratch array; names and types are compared with the
 * cached layout of schema.table on the way, and a new layout is cached
 * when they differ.
 */
static int parse_row(struct wal2json_decoder *d, struct ctx *c, const json_t *obj,
                     const char *key, enum repl_msg_kind kind, struct repl_msg *out)
{
    const char *nsp, *table, *name;
    const json_t *cols;
    const struct relation *rel;
    uint32_t typid;
    bool same;
    size_t n;

    if (get_text(c, obj, "schema", true, &nsp) < 0 ||
        get_text(c, obj, "table", true, &table) < 0)
        return -1;
    cols = json_object_get(obj, key);
    if (!cols) return fail(c, "missing \"%s\"", key);
    if (!json_is_array(cols))
        return fail(c, "\"%s\" is %s, not an array", key, type_name(cols));
    n = json_array_size(cols);
    if (n > REL_MAX_COLS)
        return fail(c, "%zu columns in \"%s\" (max %d)", n, key, REL_MAX_COLS);
    if (col_values_reserve(&d->values, &d->values_cap, n) < 0)
        return fail(c, "out of memory for %zu column values", n);
    rel = d->last;
    if (!rel || strcmp(rel->relname, table) != 0 || strcmp(rel->nspname, nsp) != 0)
        rel = relcache_find(d->rels, nsp, table);
    same = rel && (size_t)rel->ncols == n;
    for (size_t i = 0; i < n; i++) {
        const json_t *col = json_array_get(cols, i);

        c->col = (int)i + 1;
        if (read_column_head(c, col, &name, &typid) < 0 ||
            read_value(c, col, &d->values[i]) < 0)
            return -1;
        same = same && same_column(rel, i, name, typid);
    }
    c->col = 0;
    if (same)
        d->last = rel;
    else if (new_layout(d, c, nsp, table, cols, rel, &rel) < 0)
        return -1;
    out->kind = kind;
    out->u.tuple.rel = rel;
    out->u.tuple.nvalues = (int)n;
    out->u.tuple.values = d->values;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Step 3: one parser per action                                           */
/* ---------------------------------------------------------------------- */

/* B: {"action":"B", ["xid":number,] "timestamp":string, "lsn":LSN, ...}
 *    final_lsn = lsn (the commit record's LSN). */
static int parse_begin(struct wal2json_decoder *d, struct ctx *c, const json_t *obj,
                       lsn_t data_start, struct repl_msg *out)
{
    bool present;

    (void)d;
    (void)data_start;
    out->kind = RM_BEGIN;
    if (get_lsn(c, obj, "lsn", true, &out->u.begin.final_lsn, &present) < 0 ||
        get_timestamp(c, obj, &out->u.begin.commit_time) < 0 ||
        get_u32(c, obj, "xid", &out->u.begin.xid) < 0)
        return -1;
    return 0;
}

/* C: {"action":"C", ["xid":number,] "timestamp":string, "lsn":LSN,
 *     "nextlsn":LSN}. commit_lsn = lsn; end_lsn = the frame's dataStart,
 *     which nextlsn (the end of the commit record) must equal. */
static int parse_commit(struct wal2json_decoder *d, struct ctx *c, const json_t *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    char a[LSN_STRLEN], b[LSN_STRLEN];
    lsn_t next = 0;
    bool present;

    (void)d;
    out->kind = RM_COMMIT;
    out->u.commit.flags = 0;
    out->u.commit.end_lsn = data_start;
    if (get_lsn(c, obj, "lsn", true, &out->u.commit.commit_lsn, &present) < 0 ||
        get_timestamp(c, obj, &out->u.commit.commit_time) < 0 ||
        get_lsn(c, obj, "nextlsn", false, &next, &present) < 0)
        return -1;
    if (present && next != data_start)
        return fail(c, "\"nextlsn\" %s differs from the frame's dataStart %s",
                    lsn_format(next, a), lsn_format(data_start, b));
    return 0;
}

/* I: {"action":"I", ..., "schema", "table", "columns":[...]} (new row) */
static int parse_insert(struct wal2json_decoder *d, struct ctx *c, const json_t *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, "columns", RM_INSERT, out);
}

/* U: {"action":"U", ..., "schema", "table", "columns":[...] (new row, less
 *     unchanged TOASTed columns), ["identity":[...] (old key)]} */
static int parse_update(struct wal2json_decoder *d, struct ctx *c, const json_t *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, "columns", RM_UPDATE, out);
}

/* D: {"action":"D", ..., "schema", "table", "identity":[...] (old key)} */
static int parse_delete(struct wal2json_decoder *d, struct ctx *c, const json_t *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, "identity", RM_DELETE, out);
}

/* T: {"action":"T", ..., "schema", "table"}, one line per table. */
static int parse_truncate(struct wal2json_decoder *d, struct ctx *c, const json_t *obj,
                          lsn_t data_start, struct repl_msg *out)
{
    const char *nsp, *table;

    (void)d;
    (void)data_start;
    if (get_text(c, obj, "schema", true, &nsp) < 0 ||
        get_text(c, obj, "table", true, &table) < 0)
        return -1;
    out->kind = RM_TRUNCATE;
    out->u.truncate.nrelids = 1;
    out->u.truncate.options = 0;
    return 0;
}

/* M: {"action":"M", ["xid",] "timestamp":string|null, ["lsn":LSN,]
 *     "transactional":bool, "prefix":string, "content":string} */
static int parse_message(struct wal2json_decoder *d, struct ctx *c, const json_t *obj,
                         lsn_t data_start, struct repl_msg *out)
{
    const json_t *content = json_object_get(obj, "content");
    bool transactional = false, present;

    (void)d;
    (void)data_start;
    out->kind = RM_MESSAGE;
    if (get_bool(c, obj, "transactional", &transactional) < 0 ||
        get_text(c, obj, "prefix", true, &out->u.message.prefix) < 0 ||
        get_lsn(c, obj, "lsn", false, &out->u.message.lsn, &present) < 0)
        return -1;
    if (!content) return fail(c, "missing \"content\"");
    if (!is_text(content))
        return fail(c, "\"content\" is %s, not a string", type_name(content));
    if (json_string_length(content) > UINT32_MAX) return fail(c, "content too long");
    out->u.message.flags = transactional ? 1 : 0;
    out->u.message.content = json_string_value(content);
    out->u.message.len = (uint32_t)json_string_length(content);
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
    if (!d->rels) {
        free(d);
        return NULL;
    }
    return d;
}

void wal2json_decoder_free(struct wal2json_decoder *d)
{
    if (!d) return;
    json_decref(d->root);
    relcache_free(d->rels);
    free(d->buf);
    free(d->values);
    free(d);
}

typedef int (*parse_fn)(struct wal2json_decoder *, struct ctx *, const json_t *, lsn_t,
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

/* Parses d->buf into d->root, which must be an object. */
static int load(struct wal2json_decoder *d, const struct ctx *c, size_t srclen)
{
    json_error_t jerr;

    d->root = json_loadb(d->buf, d->buf_len,
                         JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (d->buf_cap > W2J_KEEP_BUF) {
        free(d->buf);
        d->buf = NULL;
        d->buf_cap = d->buf_len = 0;
    }
    if (!d->root) {
        /* jansson may quote a rewritten number: drop the markers. */
        char text[JSON_ERROR_TEXT_LENGTH], *p = text;
        for (const char *s = jerr.text; *s;)
            if (strncmp(s, "\\u0000", 6) == 0)
                s += 6;
            else
                *p++ = *s++;
        *p = '\0';
        return fail(c, "not valid JSON (%zu-byte line): %s", srclen, text);
    }
    if (!json_is_object(d->root))
        return fail(c, "line is %s, not a JSON object", type_name(d->root));
    return 0;
}

int wal2json_decode(struct wal2json_decoder *d, lsn_t data_start, const char *buf,
                    size_t len, struct repl_msg *out, char *err, size_t errlen)
{
    struct ctx c = {NULL, 0, err, errlen};
    const char *action;
    struct repl_msg msg;

    json_decref(d->root);
    d->root = NULL;
    if (len == 0) return fail(&c, "empty line");
    if (rewrite_numbers(d, &c, buf, len) < 0 || load(d, &c, len) < 0 ||
        get_text(&c, d->root, "action", true, &action) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(parsers) / sizeof(parsers[0]); i++) {
        if (action[0] != parsers[i].action || action[1] != '\0') continue;
        c.action = parsers[i].name;
        memset(&msg, 0, sizeof(msg));
        if (parsers[i].parse(d, &c, d->root, data_start, &msg) < 0) return -1;
        *out = msg;
        return 0;
    }
    return fail(&c, "unknown action \"%.16s\"", action);
}
