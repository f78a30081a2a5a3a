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
 *   1. a hand-written JSON parser (parse_json) checks the whole line in one
 *      pass and writes it into two decoder-owned arrays that are reused from
 *      line to line, so a line costs no malloc once they have grown:
 *        - text: every string unescaped to UTF-8 and every number as its
 *          exact source text (1.50 stays "1.50", a 30-digit numeric stays
 *          whole: a numeric column must reach Kafka as exactly the text
 *          Postgres printed), each NUL-terminated;
 *        - toks: one token per value and per object key, in document order,
 *          each container followed by its members, and each token knowing
 *          the size of its subtree so a reader skips a member in one step.
 *      It is as strict as the jansson parse it replaces (json_loadb with
 *      JSON_REJECT_DUPLICATES): structure, trailing garbage, escapes and
 *      surrogate pairs, UTF-8 (no overlong forms, surrogates or code points
 *      past U+10FFFF), control bytes in strings, the number grammar,
 *      duplicate keys in any object, and nesting depth (jansson's 2048,
 *      counting every value). The escape \u0000 is refused by name: Postgres
 *      text cannot hold NUL, and refusing it keeps every string
 *      NUL-terminated without holes.
 *      Keys the readers use are interned as they are parsed (enum key): a
 *      repeat of one is a bit already set in its object's mask. Any other
 *      key is compared with the object's earlier other keys, through a hash
 *      table once the object has many keys so that a hostile line cannot
 *      make the check quadratic.
 *   2. one reader per action looks up the fields it needs in the object;
 *      unknown fields are ignored, missing or mistyped ones are errors.
 *      wal2json objects have a handful of keys, so a lookup is a short
 *      linear scan comparing key ids.
 *
 * Column values and strings in the repl_msg point into text, which is kept
 * until the next call (or the free); never into the caller's buffer. The
 * decoder also owns a relation cache (relcache.h) keyed by schema and
 * table: wal2json sends no Relation messages, so the layout is read off
 * each row (column names and types, in order). A row whose layout differs
 * from the cached one - ALTER TABLE, or an UPDATE that leaves out
 * unchanged TOASTed columns - gets a new relation with the next relid,
 * which replaces the old one. wal2json sends no replica identity
 * (replident is 0) and no typmod (-1); typid comes from "typeoid" when
 * present, else from the "type" name for common built-in types, else 0
 * (outboxd's own stream asks for no types, see stream.c: its typids are 0
 * and nothing downstream reads them).
 *
 * Errors are -1 with one line in err: "wal2json <Action>: <reason>", where
 * the reason names the field (and the column, 1-based, inside a row); a
 * line that is no JSON gets "not valid JSON (<n>-byte line): <what> at
 * offset <k>". Control bytes from the input never reach err.
 */
#include "wal2json.h"
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "relcache.h"

/* Buffers are shrunk back to what the line needs when they grew past this
 * for an earlier, bigger line (a 100 kB TOASTed value should not pin the
 * memory for ever). */
#define W2J_KEEP_BUF (1u << 20)

/* Deepest nesting accepted, counted as jansson counts it: every value,
 * scalar or not, is one level deeper than its container. */
#define W2J_MAX_DEPTH 2048

/* Objects with more keys than this check duplicates through the hash
 * table instead of a linear scan. */
#define W2J_SCAN_KEYS 16

/* Microseconds per second / day, and days from 1970-01-01 to 2000-01-01. */
#define USECS_PER_SEC INT64_C(1000000)
#define SECS_PER_DAY INT64_C(86400)
#define PG_EPOCH_DAYS INT64_C(10957)

enum jtype { J_OBJECT, J_ARRAY, J_STRING, J_NUMBER, J_TRUE, J_FALSE, J_NULL };

/*
 * The object keys the readers look up, interned while parsing: a key token
 * gets its id (K_OTHER for any other key), so a lookup compares an integer
 * and the duplicate check of a known key is one bit in its object's mask.
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

/* One parsed value or object key. */
struct jtok {
    enum jtype type;
    enum key kid;  /* object keys: the interned key; K_OTHER otherwise */
    size_t size;   /* tokens in the subtree, this one included (1 for scalars) */
    size_t len;    /* J_STRING/J_NUMBER: bytes at s; J_OBJECT/J_ARRAY: members */
    const char *s; /* J_STRING/J_NUMBER: NUL-terminated, in d->text */
};

/* A slot of the duplicate-key table: the key token of object obj. */
struct keyslot {
    size_t obj, key; /* token indexes + 1; 0 = empty */
};

struct wal2json_decoder {
    struct relcache *rels;       /* layouts by relid; owns the relations */
    const struct relation *last; /* the layout the previous row used */
    uint32_t next_relid;         /* relid of the next new layout */
    char *text;                  /* strings and numbers of the line; owned */
    size_t text_cap, text_used;
    struct jtok *toks; /* tokens of the line; owned */
    size_t ntoks, toks_cap;
    struct keyslot *keys; /* duplicate-key table; owned */
    size_t keys_cap, keys_used;
    struct open {      /* the open containers, innermost last */
        size_t tok;    /* token index of the object or array */
        uint32_t seen; /* objects: bits (1 << enum key) of known keys met */
        bool in_table; /* objects: the other keys are in the key table */
    } stack[W2J_MAX_DEPTH];
    struct col_value *values;    /* scratch for tuple values; owned */
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
/* Step 1: the JSON parser                                                 */
/* ---------------------------------------------------------------------- */

/* The line being parsed and where the parser stands in it. */
struct scan {
    const char *in;
    size_t len;
    size_t i;
};

/* Reports invalid JSON: "not valid JSON (<n>-byte line): <what> at offset
 * <i>"; always -1. */
static int bad_json(const struct ctx *c, const struct scan *sc, size_t at, const char *what)
{
    return fail(c, "not valid JSON (%zu-byte line): %s at offset %zu", sc->len, what, at);
}

/* Reports that the token at sc->i is not what the grammar wants there:
 * "<expected> near '<token>'", the token cut to 20 bytes and reduced to
 * printable ASCII. A number is shown in double quotes, as the jansson-based
 * decoder showed it (the tests pin that form). */
static int unexpected(const struct ctx *c, const struct scan *sc, const char *expected)
{
    const char *in = sc->in;
    char tok[32], what[96];
    size_t n = 0, i = sc->i;

    if (i >= sc->len) {
        snprintf(what, sizeof(what), "%s near end of line", expected);
        return bad_json(c, sc, i, what);
    }
    if (in[i] == '-' || (in[i] >= '0' && in[i] <= '9')) {
        tok[n++] = '"';
        for (; i < sc->len && n < 21 && strchr("0123456789.eE+-", in[i]) && in[i]; i++)
            tok[n++] = in[i];
        tok[n++] = '"';
    } else if (in[i] == '"') {
        for (tok[n++] = in [i++]; i < sc->len && n < 21; i++) {
            unsigned char ch = (unsigned char)in[i];
            tok[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
            if (ch == '"') break;
        }
    } else if (in[i] != '\0' && strchr(",:[]{}", in[i])) {
        tok[n++] = in[i];
    } else {
        do {
            unsigned char ch = (unsigned char)in[i];
            tok[n++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
        } while (++i < sc->len && n < 20 && !strchr(" \t\r\n,:[]{}\"", in[i]) && in[i]);
    }
    tok[n] = '\0';
    snprintf(what, sizeof(what), "%s near '%s'", expected, tok);
    return bad_json(c, sc, sc->i, what);
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static inline void skip_ws(struct scan *sc)
{
    /* wal2json writes no whitespace between tokens: one test, usually. */
    if (sc->i < sc->len && (unsigned char)sc->in[sc->i] > ' ') return;
    while (sc->i < sc->len) {
        char ch = sc->in[sc->i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') break;
        sc->i++;
    }
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

/* Length of the UTF-8 sequence at s[0..n) that starts with a byte >= 0x80,
 * or 0 when it is not valid UTF-8: a stray continuation byte, a lead byte
 * that cannot start a sequence (C0, C1, F5..FF), a missing continuation,
 * an overlong form, a UTF-16 surrogate or a code point past U+10FFFF. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    size_t k;
    uint32_t cp;

    if (s[0] < 0xc2)
        return 0;
    else if (s[0] < 0xe0)
        k = 2, cp = s[0] & 0x1fu;
    else if (s[0] < 0xf0)
        k = 3, cp = s[0] & 0x0fu;
    else if (s[0] < 0xf5)
        k = 4, cp = s[0] & 0x07u;
    else
        return 0;
    if (n < k) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if (k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) return 0;
    if (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) return 0;
    return k;
}

/* Reads the 4 hex digits at s into *out. */
static bool hex4(const char *s, uint32_t *out)
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++) {
        char ch = s[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9')
            v |= (uint32_t)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            v |= (uint32_t)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            v |= (uint32_t)(ch - 'A' + 10);
        else
            return false;
    }
    *out = v;
    return true;
}

/* Writes code point cp (not a surrogate, at most U+10FFFF) as UTF-8 at o;
 * returns the bytes written. */
static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/*
 * Decodes the \u escape at in[p] (p at the backslash) into o: one code
 * point, or a surrogate pair written as two escapes. Sets *used to the
 * input bytes consumed and *wrote to the output bytes; -1 on a bad escape.
 */
static int unicode_escape(const struct ctx *c, const struct scan *sc, size_t start,
                          size_t p, char *o, size_t *used, size_t *wrote)
{
    const char *in = sc->in;
    uint32_t cp, lo;

    if (sc->len - p < 6 || !hex4(in + p + 2, &cp))
        return bad_json(c, sc, p, "\\u not followed by 4 hex digits");
    *used = 6;
    if (cp == 0)
        return fail(c, "string at offset %zu holds \\u0000, which Postgres text cannot",
                    start);
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return bad_json(c, sc, p, "lone low surrogate escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (sc->len - p < 12 || in[p + 6] != '\\' || in[p + 7] != 'u' ||
            !hex4(in + p + 8, &lo) || lo < 0xdc00 || lo > 0xdfff)
            return bad_json(c, sc, p, "high surrogate escape without a low one");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        *used = 12;
    }
    *wrote = put_utf8(o, cp);
    return 0;
}

/* A byte that a string holds as it is: printable ASCII but the quote and
 * the backslash. The rest (controls, escapes, UTF-8) is looked at one by
 * one. */
static bool plain_byte(unsigned char ch)
{
    return ch >= 0x20 && ch < 0x80 && ch != '"' && ch != '\\';
}

/*
 * plain_byte() for eight bytes at once (SWAR): the high bit of byte i of
 * the result is set when byte i of x is not plain, that is has the high
 * bit set, is below 0x20, or equals '"' or '\\'. For a word x,
 * (x - 0x01..01 * n) & ~x & 0x80..80 flags the bytes of x below n (n <=
 * 0x80), and a byte equal to ch is a zero byte of x ^ (0x01..01 * ch),
 * flagged with n = 1. (A borrow can flag a byte above a flagged one too:
 * the mask says whether, not where.)
 */
static uint64_t not_plain_mask(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');

    return (x | ((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & highs;
}

/*
 * Parses the string at sc->i (at its opening quote) into d->text,
 * unescaped and NUL-terminated; *s and *n get where and how long. Raw
 * bytes are checked as UTF-8, control bytes refused. d->text has room:
 * see parse_json.
 */
static int parse_string(struct wal2json_decoder *d, const struct ctx *c, struct scan *sc,
                        const char **s, size_t *n)
{
    const unsigned char *in = (const unsigned char *)sc->in;
    const size_t len = sc->len, start = sc->i;
    char *out = d->text + d->text_used, *o = out;
    size_t p = start + 1;

    for (;;) {
        size_t k;

        /* The common case: printable ASCII, copied a block at a time while
         * a whole block is plain (writing a block at o is safe: o is behind
         * p, and the line fits d->text). With SSE2 (every x86-64) a block
         * is 16 bytes and the first byte that is not plain is found with a
         * bit scan, so a string with many escapes (a jsonb value: every
         * quote in it is \") does not fall back to bytes between them. */
#ifdef __SSE2__
        while (p + 16 <= len) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(in + p));
            /* Signed compare: below 0x20 is a control byte or, as a
             * negative number, a byte >= 0x80. */
            __m128i bad = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                    _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                       _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
            unsigned mask = (unsigned)_mm_movemask_epi8(bad);
            _mm_storeu_si128((__m128i *)(void *)o, v);
            if (mask != 0) {
                unsigned k = (unsigned)__builtin_ctz(mask);
                o += k;
                p += k;
                goto special;
            }
            o += 16;
            p += 16;
        }
#endif
        /* Eight bytes at a time (SWAR), then byte by byte up to the byte
         * that is not plain. */
        while (p + 8 <= len) {
            uint64_t w;
            memcpy(&w, in + p, 8);
            if (not_plain_mask(w) != 0) break;
            memcpy(o, &w, 8);
            o += 8;
            p += 8;
        }
        while (p < len && plain_byte(in[p]))
            *o++ = (char)in[p++];
#ifdef __SSE2__
    special: /* in[p] is not plain, or p is at the end */
#endif
        if (p >= len) return bad_json(c, sc, start, "unterminated string");
        if (in[p] == '"') break;
        if (in[p] < 0x20) {
            char what[48];
            snprintf(what, sizeof(what), "control byte 0x%02x in a string", in[p]);
            return bad_json(c, sc, p, what);
        }
        if (in[p] >= 0x80) {
            k = utf8_length(in + p, len - p);
            if (k == 0) {
                char what[48];
                snprintf(what, sizeof(what), "invalid UTF-8 byte 0x%02x", in[p]);
                return bad_json(c, sc, p, what);
            }
            memcpy(o, in + p, k);
            o += k;
            p += k;
            continue;
        }
        /* A backslash. */
        if (p + 1 >= len) return bad_json(c, sc, start, "unterminated string");
        switch (in[p + 1]) {
        case '"':
        case '\\':
        case '/':
            *o++ = (char)in[p + 1];
            break;
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'n':
            *o++ = '\n';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'u': {
            size_t used = 0, wrote = 0;
            if (unicode_escape(c, sc, start, p, o, &used, &wrote) < 0) return -1;
            o += wrote;
            p += used;
            continue;
        }
        default:
            return bad_json(c, sc, p, "invalid escape");
        }
        p += 2;
    }
    *o = '\0';
    *s = out;
    *n = (size_t)(o - out);
    d->text_used += *n + 1;
    sc->i = p + 1;
    return 0;
}

/* Doubles d->toks; -1 on out of memory (reported). */
static int grow_toks(struct wal2json_decoder *d, const struct ctx *c)
{
    size_t ncap = d->toks_cap ? d->toks_cap * 2 : 64;
    struct jtok *nt =
        ncap < SIZE_MAX / sizeof(*nt) ? realloc(d->toks, ncap * sizeof(*nt)) : NULL;

    if (!nt) return fail(c, "out of memory for %zu JSON tokens", ncap);
    d->toks = nt;
    d->toks_cap = ncap;
    return 0;
}

/* Appends a token of type t (size 1) and returns it, NULL on out of
 * memory (reported). */
static inline struct jtok *new_tok(struct wal2json_decoder *d, const struct ctx *c,
                                   enum jtype t)
{
    struct jtok *tok;

    if (d->ntoks == d->toks_cap && grow_toks(d, c) < 0) return NULL;
    tok = &d->toks[d->ntoks++];
    tok->type = t;
    tok->kid = K_OTHER;
    tok->size = 1;
    tok->len = 0;
    tok->s = NULL;
    return tok;
}

/* FNV-1a of the key bytes, mixed with the object's index. */
static size_t key_hash(size_t obj, const char *s, size_t n)
{
    uint64_t h = UINT64_C(14695981039346656037) ^ obj;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * UINT64_C(1099511628211);
    return (size_t)(h ^ h >> 32);
}

/* Inserts key token key of object obj into the duplicate-key table;
 * 1 when the object already has that key, -1 on out of memory. */
static int key_insert(struct wal2json_decoder *d, size_t obj, size_t key)
{
    const struct jtok *k = &d->toks[key];
    size_t mask, h;

    if ((d->keys_used + 1) * 2 > d->keys_cap) {
        size_t ncap = d->keys_cap ? d->keys_cap * 2 : 256, oldcap = d->keys_cap;
        struct keyslot *old = d->keys, *nk;

        if (ncap > SIZE_MAX / sizeof(*nk) || !(nk = calloc(ncap, sizeof(*nk)))) return -1;
        d->keys = nk;
        d->keys_cap = ncap;
        d->keys_used = 0;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].key) key_insert(d, old[i].obj - 1, old[i].key - 1);
        free(old);
    }
    mask = d->keys_cap - 1;
    h = key_hash(obj, k->s, k->len) & mask;
    for (; d->keys[h].key; h = (h + 1) & mask) {
        const struct jtok *o = &d->toks[d->keys[h].key - 1];
        if (d->keys[h].obj == obj + 1 && o->len == k->len &&
            memcmp(o->s, k->s, k->len) == 0)
            return 1;
    }
    d->keys[h].obj = obj + 1;
    d->keys[h].key = key + 1;
    d->keys_used++;
    return 0;
}

/* Reports the duplicate key k found at offset at. */
static int duplicate(const struct ctx *c, const struct scan *sc, size_t at,
                     const struct jtok *k)
{
    char what[80];

    snprintf(what, sizeof(what), "duplicate object key \"%.40s\"", k->s);
    return bad_json(c, sc, at, what);
}

/* True when a[0..n) equals b[0..n). Inline: for the short constant n of
 * key_id() the compiler unrolls it, where memcmp() stayed a libc call (4 %
 * of the benchmark's CPU). */
static inline bool same_bytes(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* The interned id of key s[0..n). */
static enum key key_id(const char *s, size_t n)
{
#define IS(lit) same_bytes(s, lit, sizeof(lit) - 1)
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

/*
 * Checks the key just parsed (the last token) against the earlier keys of
 * the object op. A known key is a bit in op->seen. Any other key can only
 * equal another such key: a scan of them while the object is small, the
 * hash table once it is not (or once it was: op->in_table).
 */
static int check_duplicate(struct wal2json_decoder *d, const struct ctx *c,
                           const struct scan *sc, struct open *op, size_t at)
{
    const struct jtok *o = &d->toks[op->tok], *key = &d->toks[d->ntoks - 1];
    int rc;

    if (key->kid != K_OTHER) {
        uint32_t bit = UINT32_C(1) << key->kid;
        if (op->seen & bit) return duplicate(c, sc, at, key);
        op->seen |= bit;
        return 0;
    }
    if (!op->in_table && o->len < W2J_SCAN_KEYS) {
        const struct jtok *k = o + 1;
        for (size_t m = 0; m < o->len; m++) {
            if (k->kid == K_OTHER && k->len == key->len &&
                memcmp(k->s, key->s, key->len) == 0)
                return duplicate(c, sc, at, key);
            k += 1 + k[1].size;
        }
        return 0;
    }
    if (!op->in_table) { /* the table takes over: enter the other keys so far */
        size_t k = op->tok + 1;
        for (size_t m = 0; m < o->len; m++) {
            if (d->toks[k].kid == K_OTHER && key_insert(d, op->tok, k) < 0)
                return fail(c, "out of memory checking keys");
            k += 1 + d->toks[k + 1].size;
        }
        op->in_table = true;
    }
    rc = key_insert(d, op->tok, d->ntoks - 1);
    if (rc < 0) return fail(c, "out of memory checking keys");
    if (rc > 0) return duplicate(c, sc, at, &d->toks[d->ntoks - 1]);
    return 0;
}

/* Parses a scalar at sc->i into a new token (not an object or array). */
static int parse_scalar(struct wal2json_decoder *d, const struct ctx *c, struct scan *sc)
{
    const char *in = sc->in + sc->i;
    size_t left = sc->len - sc->i, n;
    struct jtok *t;

    switch (*in) {
    case '"':
        if (!(t = new_tok(d, c, J_STRING))) return -1;
        return parse_string(d, c, sc, &t->s, &t->len);
    case 't':
    case 'f':
    case 'n': {
        enum jtype type = *in == 't' ? J_TRUE : *in == 'f' ? J_FALSE : J_NULL;
        size_t wl = type == J_FALSE ? 5 : 4;
        if (left >= wl && same_bytes(in,
                                     type == J_TRUE    ? "true"
                                     : type == J_FALSE ? "false"
                                                       : "null",
                                     wl)) {
            if (!new_tok(d, c, type)) return -1;
            sc->i += wl;
            return 0;
        }
        return unexpected(c, sc, "value expected");
    }
    default:
        if (*in != '-' && !is_digit(*in)) return unexpected(c, sc, "value expected");
        n = number_length(in, left);
        if (n == 0) return fail(c, "invalid number at offset %zu", sc->i);
        if (!(t = new_tok(d, c, J_NUMBER))) return -1;
        t->s = d->text + d->text_used;
        t->len = n;
        memcpy(d->text + d->text_used, in, n);
        d->text[d->text_used + n] = '\0';
        d->text_used += n + 1;
        sc->i += n;
        return 0;
    }
}

/* Makes room in d->text for a line of len bytes, shrinking a buffer an
 * earlier big line left behind. */
static int reserve_text(struct wal2json_decoder *d, const struct ctx *c, size_t len)
{
    size_t need = len + 1, ncap;

    if (len == SIZE_MAX) return fail(c, "line too long");
    if (need <= d->text_cap && (d->text_cap <= W2J_KEEP_BUF || need > W2J_KEEP_BUF / 2))
        return 0;
    ncap = need < 256 ? 256 : need;
    /* Growing in small steps: double, as far as the kept size. */
    if (need > d->text_cap && d->text_cap * 2 > ncap && d->text_cap * 2 <= W2J_KEEP_BUF)
        ncap = d->text_cap * 2;
    free(d->text);
    d->text_cap = 0;
    d->text = malloc(ncap);
    if (!d->text) return fail(c, "out of memory copying a %zu-byte line", len);
    d->text_cap = ncap;
    return 0;
}

/* Drops token and key-table memory an earlier big line left behind. */
static void shrink_tables(struct wal2json_decoder *d)
{
    if (d->toks_cap * sizeof(*d->toks) > W2J_KEEP_BUF) {
        free(d->toks);
        d->toks = NULL;
        d->toks_cap = 0;
    }
    if (d->keys_cap * sizeof(*d->keys) > W2J_KEEP_BUF) {
        free(d->keys);
        d->keys = NULL;
        d->keys_cap = 0;
    } else if (d->keys_used) {
        memset(d->keys, 0, d->keys_cap * sizeof(*d->keys));
    }
    d->keys_used = 0;
}

/*
 * Parses the line into d->toks (d->toks[0] is the top-level value) and
 * d->text. The parser is a loop over an explicit stack of open containers
 * (d->stack), so a deep line cannot overflow the C stack.
 *
 * d->text never grows during the parse, so token pointers into it stay
 * valid: a string writes at most its source length less one (the quotes
 * make up for the NUL and no escape is shorter than its UTF-8), a number
 * its length plus a NUL, and a delimiter always follows a number before
 * the next token. So at any token the output is no longer than the input
 * consumed, and len + 1 bytes are enough.
 */
static int parse_json(struct wal2json_decoder *d, const struct ctx *c, const char *in,
                      size_t len)
{
    struct scan sc = {in, len, 0};
    size_t depth = 0, top;
    struct jtok *t;

    shrink_tables(d);
    if (reserve_text(d, c, len) < 0) return -1;
    d->text_used = 0;
    d->ntoks = 0;

value: /* a value is expected at sc.i (after whitespace) */
    skip_ws(&sc);
    if (depth >= W2J_MAX_DEPTH) {
        char what[48];
        snprintf(what, sizeof(what), "nested deeper than %d levels", W2J_MAX_DEPTH);
        return bad_json(c, &sc, sc.i, what);
    }
    if (sc.i >= len) return unexpected(c, &sc, "value expected");
    if (in[sc.i] == '{' || in[sc.i] == '[') {
        bool obj = in[sc.i] == '{';

        if (!(t = new_tok(d, c, obj ? J_OBJECT : J_ARRAY))) return -1;
        d->stack[depth].tok = d->ntoks - 1;
        d->stack[depth].seen = 0;
        d->stack[depth++].in_table = false;
        sc.i++;
        skip_ws(&sc);
        if (sc.i < len && in[sc.i] == (obj ? '}' : ']')) goto close;
        if (obj) goto key;
        goto value;
    }
    if (parse_scalar(d, c, &sc) < 0) return -1;

done: /* a value ended; what follows depends on its container */
    if (depth == 0) {
        skip_ws(&sc);
        if (sc.i != len) return unexpected(c, &sc, "end of line expected");
        return 0;
    }
    top = d->stack[depth - 1].tok;
    d->toks[top].len++;
    skip_ws(&sc);
    if (sc.i < len && in[sc.i] == ',') {
        sc.i++;
        if (d->toks[top].type == J_OBJECT) goto key;
        goto value;
    }
    if (sc.i < len && in[sc.i] == (d->toks[top].type == J_OBJECT ? '}' : ']')) goto close;
    return unexpected(c, &sc,
                      d->toks[top].type == J_OBJECT ? "',' or '}' expected"
                                                    : "',' or ']' expected");

key: /* a member of the object on top of the stack starts */
    skip_ws(&sc);
    if (sc.i >= len || in[sc.i] != '"') return unexpected(c, &sc, "string key expected");
    {
        size_t at = sc.i;

        if (!(t = new_tok(d, c, J_STRING)) || parse_string(d, c, &sc, &t->s, &t->len) < 0)
            return -1;
        t->kid = key_id(t->s, t->len);
        if (check_duplicate(d, c, &sc, &d->stack[depth - 1], at) < 0) return -1;
    }
    skip_ws(&sc);
    if (sc.i >= len || in[sc.i] != ':') return unexpected(c, &sc, "':' expected");
    sc.i++;
    goto value;

close: /* the container on top of the stack ends at sc.i */
    sc.i++;
    top = d->stack[--depth].tok;
    d->toks[top].size = d->ntoks - top;
    goto done;
}

/* ---------------------------------------------------------------------- */
/* Typed field access                                                      */
/* ---------------------------------------------------------------------- */

/* The value of member key of object obj, or NULL. */
static const struct jtok *obj_get(const struct jtok *obj, enum key key)
{
    const struct jtok *k = obj + 1;

    for (size_t m = 0; m < obj->len; m++) {
        if (k->kid == key) return k + 1;
        k += 1 + k[1].size;
    }
    return NULL;
}

/* Names the JSON type of v for errors. */
static const char *type_name(const struct jtok *v)
{
    if (!v) return "missing";
    switch (v->type) {
    case J_OBJECT:
        return "an object";
    case J_ARRAY:
        return "an array";
    case J_STRING:
        return "a string";
    case J_TRUE:
        return "true";
    case J_FALSE:
        return "false";
    case J_NULL:
        return "null";
    default:
        return "a number";
    }
}

/* Reads string field key of obj into *out (NUL-terminated, borrowed) and
 * its length into *len (if not NULL). Missing or null is an error when
 * required, else leaves *out = NULL. */
static int get_textn(const struct ctx *c, const struct jtok *obj, enum key key,
                     bool required, const char **out, size_t *len)
{
    const struct jtok *v = obj_get(obj, key);

    *out = NULL;
    if ((!v || v->type == J_NULL) && !required) return 0;
    if (!v) return fail(c, "missing \"%s\"", key_names[key]);
    if (v->type != J_STRING)
        return fail(c, "\"%s\" is %s, not a string", key_names[key], type_name(v));
    *out = v->s;
    if (len) *len = v->len;
    return 0;
}

static int get_text(const struct ctx *c, const struct jtok *obj, enum key key,
                    bool required, const char **out)
{
    return get_textn(c, obj, key, required, out, NULL);
}

/* Reads field key as an LSN ("%X/%X"). Missing or null is an error when
 * required, else *present = false. */
static int get_lsn(const struct ctx *c, const struct jtok *obj, enum key key, bool required,
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
static int get_u32(const struct ctx *c, const struct jtok *obj, enum key key, uint32_t *out)
{
    const struct jtok *v = obj_get(obj, key);
    uint64_t n;

    *out = 0;
    if (!v || v->type == J_NULL) return 0;
    if (v->type != J_NUMBER)
        return fail(c, "\"%s\" is %s, not a number", key_names[key], type_name(v));
    if (!parse_uint(v->s, v->len, UINT32_MAX, &n))
        return fail(c, "\"%s\" is %.40s, not a 32-bit unsigned integer", key_names[key],
                    v->s);
    *out = (uint32_t)n;
    return 0;
}

/* Reads a required boolean field. */
static int get_bool(const struct ctx *c, const struct jtok *obj, enum key key, bool *out)
{
    const struct jtok *v = obj_get(obj, key);

    if (!v) return fail(c, "missing \"%s\"", key_names[key]);
    if (v->type != J_TRUE && v->type != J_FALSE)
        return fail(c, "\"%s\" is %s, not a boolean", key_names[key], type_name(v));
    *out = v->type == J_TRUE;
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
static int get_timestamp(const struct ctx *c, const struct jtok *obj, int64_t *out)
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
static int read_column_head(const struct ctx *c, const struct jtok *col, const char **name,
                            size_t *name_len, uint32_t *typid)
{
    const char *type;
    size_t type_len = 0;

    if (col->type != J_OBJECT) return fail(c, "is %s, not an object", type_name(col));
    if (get_textn(c, col, K_NAME, true, name, name_len) < 0 ||
        get_textn(c, col, K_TYPE, false, &type, &type_len) < 0 ||
        get_u32(c, col, K_TYPEOID, typid) < 0)
        return -1;
    if (**name == '\0') return fail(c, "empty \"name\"");
    if (*typid == 0 && type) *typid = type_oid(type, type_len);
    return 0;
}

/* Reads the value of one column into v; it borrows from d->text. */
static int read_value(const struct ctx *c, const struct jtok *col, struct col_value *v)
{
    const struct jtok *j = obj_get(col, K_VALUE);

    v->kind = CV_TEXT;
    v->data = NULL;
    v->len = 0;
    if (!j) return fail(c, "missing \"value\"");
    switch (j->type) {
    case J_NULL:
        v->kind = CV_NULL;
        return 0;
    case J_TRUE:
    case J_FALSE:
        v->data = j->type == J_TRUE ? "t" : "f";
        v->len = 1;
        return 0;
    case J_STRING:
    case J_NUMBER:
        if (j->len > UINT32_MAX) return fail(c, "value too long");
        v->data = j->s;
        v->len = (uint32_t)j->len;
        return 0;
    default:
        return fail(c, "\"value\" is %s, not a scalar", type_name(j));
    }
}

/* True when column i of rel (if it has one) is name[0..len) with type
 * typid. (name holds no NUL: \u0000 is refused; so when all len bytes
 * match, the cached name is at least len long and [len] can be read.) */
static bool same_column(const struct relation *rel, size_t i, const char *name, size_t len,
                        uint32_t typid)
{
    return i < (size_t)rel->ncols && rel->cols[i].typid == typid &&
           same_bytes(rel->cols[i].name, name, len) && rel->cols[i].name[len] == '\0';
}

/* Caches a new layout for nsp.table built from the (already validated)
 * heads of cols, replacing the old layout if any, and points *out at it. */
static int new_layout(struct wal2json_decoder *d, struct ctx *c, const char *nsp,
                      const char *table, const struct jtok *cols,
                      const struct relation *old, const struct relation **out)
{
    int ncols = (int)cols->len;
    const struct jtok *head = cols + 1;
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

/*
 * A row: "schema" and "table" strings and, under key ("columns" for I/U,
 * "identity" for D), an array of
 *   {"name": string, ["type": string,] ["typeoid": number,] "value": scalar}
 * Values land in the scratch array; names and types are compared with the
 * cached layout of schema.table on the way, and a new layout is cached
 * when they differ.
 */
static int parse_row(struct wal2json_decoder *d, struct ctx *c, const struct jtok *obj,
                     enum key key, enum repl_msg_kind kind, struct repl_msg *out)
{
    const char *nsp, *table, *name;
    size_t name_len;
    const struct jtok *cols, *col;
    const struct relation *rel;
    uint32_t typid;
    bool same;
    size_t n;

    if (get_text(c, obj, K_SCHEMA, true, &nsp) < 0 ||
        get_text(c, obj, K_TABLE, true, &table) < 0)
        return -1;
    cols = obj_get(obj, key);
    if (!cols) return fail(c, "missing \"%s\"", key_names[key]);
    if (cols->type != J_ARRAY)
        return fail(c, "\"%s\" is %s, not an array", key_names[key], type_name(cols));
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
static int parse_begin(struct wal2json_decoder *d, struct ctx *c, const struct jtok *obj,
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
static int parse_commit(struct wal2json_decoder *d, struct ctx *c, const struct jtok *obj,
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
static int parse_insert(struct wal2json_decoder *d, struct ctx *c, const struct jtok *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, K_COLUMNS, RM_INSERT, out);
}

/* U: {"action":"U", ..., "schema", "table", "columns":[...] (new row, less
 *     unchanged TOASTed columns), ["identity":[...] (old key)]} */
static int parse_update(struct wal2json_decoder *d, struct ctx *c, const struct jtok *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, K_COLUMNS, RM_UPDATE, out);
}

/* D: {"action":"D", ..., "schema", "table", "identity":[...] (old key)} */
static int parse_delete(struct wal2json_decoder *d, struct ctx *c, const struct jtok *obj,
                        lsn_t data_start, struct repl_msg *out)
{
    (void)data_start;
    return parse_row(d, c, obj, K_IDENTITY, RM_DELETE, out);
}

/* T: {"action":"T", ..., "schema", "table"}, one line per table. */
static int parse_truncate(struct wal2json_decoder *d, struct ctx *c, const struct jtok *obj,
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
static int parse_message(struct wal2json_decoder *d, struct ctx *c, const struct jtok *obj,
                         lsn_t data_start, struct repl_msg *out)
{
    const struct jtok *content = obj_get(obj, K_CONTENT);
    bool transactional = false, present;

    (void)d;
    (void)data_start;
    out->kind = RM_MESSAGE;
    if (get_bool(c, obj, K_TRANSACTIONAL, &transactional) < 0 ||
        get_text(c, obj, K_PREFIX, true, &out->u.message.prefix) < 0 ||
        get_lsn(c, obj, K_LSN, false, &out->u.message.lsn, &present) < 0)
        return -1;
    if (!content) return fail(c, "missing \"content\"");
    if (content->type != J_STRING)
        return fail(c, "\"content\" is %s, not a string", type_name(content));
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
    if (!d->rels) {
        free(d);
        return NULL;
    }
    return d;
}

void wal2json_decoder_free(struct wal2json_decoder *d)
{
    if (!d) return;
    relcache_free(d->rels);
    free(d->text);
    free(d->toks);
    free(d->keys);
    free(d->values);
    free(d);
}

typedef int (*parse_fn)(struct wal2json_decoder *, struct ctx *, const struct jtok *, lsn_t,
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
    const struct jtok *root;
    const char *action;
    struct repl_msg msg;

    if (len == 0) return fail(&c, "empty line");
    if (parse_json(d, &c, buf, len) < 0) return -1;
    root = &d->toks[0];
    if (root->type != J_OBJECT)
        return fail(&c, "line is %s, not a JSON object", type_name(root));
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
    struct scan sc = {buf, len, 0};
    char action;

    skip_ws(&sc);
    if (sc.i >= len || buf[sc.i++] != '{') return '\0';
    skip_ws(&sc);
    if (len - sc.i < sizeof(key) - 1 || memcmp(buf + sc.i, key, sizeof(key) - 1) != 0)
        return '\0';
    sc.i += sizeof(key) - 1;
    skip_ws(&sc);
    if (sc.i >= len || buf[sc.i++] != ':') return '\0';
    skip_ws(&sc);
    if (len - sc.i < 3 || buf[sc.i] != '"' || buf[sc.i + 2] != '"') return '\0';
    action = buf[sc.i + 1];
    return action >= 'A' && action <= 'Z' ? action : '\0';
}
