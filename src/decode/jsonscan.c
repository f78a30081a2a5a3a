/*
 * jsonscan.c - the strict JSON scanner of jsonscan.h: one line in, tokens
 * and unescaped text out, in one pass, with no malloc once the scanner's
 * arrays have grown.
 *
 * The grammar checked (RFC 8259, as jansson reads it):
 *
 *   line   = ws value ws
 *   value  = object | array | string | number | "true" | "false" | "null"
 *   object = "{" ws [ string ws ":" ws value ws *( "," ws string ws ":"
 *            ws value ws ) ] "}"          (no key twice in one object)
 *   array  = "[" ws [ value ws *( "," ws value ws ) ] "]"
 *   string = '"' *( unescaped UTF-8 >= 0x20 but '"' and '\' | escape ) '"'
 *   escape = '\' ( '"' | '\' | '/' | b | f | n | r | t | u hex4 )
 *            (a \u high surrogate must be followed by a \u low one;
 *             \u0000 is refused)
 *   number = [ "-" ] ( "0" | [1-9] [0-9]* ) [ "." [0-9]+ ]
 *            [ ( "e" | "E" ) [ "+" | "-" ] [0-9]+ ]
 *   ws     = *( " " | "\t" | "\r" | "\n" )
 *
 * Containers nest through an explicit stack (struct json_scanner.stack),
 * so a deep line cannot overflow the C stack.
 */
#include "jsonscan.h"
#include "log.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Buffers are shrunk back to what the line needs when they grew past this
 * for an earlier, bigger line (a 100 kB TOASTed value should not pin the
 * memory for ever). */
#define JSON_KEEP_BUF (1u << 20)

/* Objects with more keys than this check duplicates through the hash
 * table instead of a linear scan. */
#define JSON_SCAN_KEYS 16

/* A slot of the duplicate-key table: the key token of object obj. */
struct keyslot {
    size_t obj, key; /* token indexes + 1; 0 = empty */
};

struct json_scanner {
    json_key_fn key_id;
    char *text; /* strings and numbers of the line; owned */
    size_t text_cap, text_used;
    struct json_tok *toks; /* tokens of the line; owned */
    size_t ntoks, toks_cap;
    struct keyslot *keys; /* duplicate-key table; owned */
    size_t keys_cap, keys_used;
    struct open {      /* the open containers, innermost last */
        size_t tok;    /* token index of the object or array */
        uint32_t seen; /* objects: bits (1 << kid) of interned keys met */
        bool in_table; /* objects: the other keys are in the key table */
    } stack[JSON_MAX_DEPTH];
};

/* The line being scanned, where the scan stands in it, and where errors go. */
struct scan {
    struct json_scanner *js;
    const char *in;
    size_t len;
    size_t i;
    char *err;
    size_t errlen;
};

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

/* Writes the formatted reason into sc->err, control bytes replaced by '?'
 * so it stays one line; always returns -1. */
static int fail(const struct scan *sc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(const struct scan *sc, const char *fmt, ...)
{
    va_list ap;

    if (!sc->err || sc->errlen == 0) return -1;
    va_start(ap, fmt);
    vsnprintf(sc->err, sc->errlen, fmt, ap);
    va_end(ap);
    log_one_line(sc->err);
    return -1;
}

/* Reports invalid JSON: "not valid JSON (<n>-byte line): <what> at offset
 * <at>"; always -1. */
static int bad_json(const struct scan *sc, size_t at, const char *what)
{
    return fail(sc, "not valid JSON (%zu-byte line): %s at offset %zu", sc->len, what, at);
}

/* Reports that the token at sc->i is not what the grammar wants there:
 * "<expected> near '<token>'", the token cut to 20 bytes and reduced to
 * printable ASCII. A number is shown in double quotes, as the jansson-based
 * decoder showed it (wal2json's tests pin that form). */
static int unexpected(const struct scan *sc, const char *expected)
{
    const char *in = sc->in;
    char tok[32], what[96];
    size_t n = 0, i = sc->i;

    if (i >= sc->len) {
        snprintf(what, sizeof(what), "%s near end of line", expected);
        return bad_json(sc, i, what);
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
    return bad_json(sc, sc->i, what);
}

/* Reports byte ch at offset at, fmt saying what is wrong with it. */
static int bad_byte(const struct scan *sc, size_t at, const char *fmt, unsigned char ch)
    __attribute__((format(printf, 3, 0)));

static int bad_byte(const struct scan *sc, size_t at, const char *fmt, unsigned char ch)
{
    char what[48];

    snprintf(what, sizeof(what), fmt, ch);
    return bad_json(sc, at, what);
}

const char *json_type_name(const struct json_tok *v)
{
    if (!v) return "missing";
    switch (v->type) {
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

/* ---------------------------------------------------------------------- */
/* Numbers                                                                 */
/* ---------------------------------------------------------------------- */

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* Length of the JSON number (see the grammar above) at s[0..n), 0 when s
 * does not start with one. A number glued to more number characters
 * ("01", "1.", "1e") is invalid. */
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

/* ---------------------------------------------------------------------- */
/* Strings                                                                 */
/* ---------------------------------------------------------------------- */

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
 * Decodes the \u escape at in[p] (p at the backslash) of the string that
 * starts at offset start into o: one code point, or a surrogate pair
 * written as two escapes. Sets *used to the input bytes consumed and
 * *wrote to the output bytes; -1 on a bad escape.
 */
static int unicode_escape(const struct scan *sc, size_t start, size_t p, char *o,
                          size_t *used, size_t *wrote)
{
    const char *in = sc->in;
    uint32_t cp, lo;

    if (sc->len - p < 6 || !hex4(in + p + 2, &cp))
        return bad_json(sc, p, "\\u not followed by 4 hex digits");
    *used = 6;
    if (cp == 0)
        return fail(sc, "string at offset %zu holds \\u0000, which Postgres text cannot",
                    start);
    if (cp >= 0xdc00 && cp <= 0xdfff) return bad_json(sc, p, "lone low surrogate escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (sc->len - p < 12 || in[p + 6] != '\\' || in[p + 7] != 'u' ||
            !hex4(in + p + 8, &lo) || lo < 0xdc00 || lo > 0xdfff)
            return bad_json(sc, p, "high surrogate escape without a low one");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        *used = 12;
    }
    *wrote = put_utf8(o, cp);
    return 0;
}

/* The byte the two-character escape \ch stands for; -1 when \ch is not
 * one (\u is handled by unicode_escape()). */
static int simple_escape(unsigned char ch)
{
    switch (ch) {
    case '"':
    case '\\':
    case '/':
        return ch;
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return -1;
    }
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
 * Copies the plain bytes at in[*pp..len) to *oo, up to the first byte
 * that is not plain or the end, and advances *pp and *oo past them. The
 * common case of a string: copied a block at a time while a whole block
 * is plain. Writing a whole block at o is safe: o is behind p, and the
 * line fits the text buffer.
 * With SSE2 (every x86-64) a block is 16 bytes and the first byte that is
 * not plain is found with a bit scan, so a string with many escapes (a
 * jsonb value: every quote in it is \") does not fall back to bytes
 * between them; then eight bytes at a time (SWAR), then byte by byte.
 */
static inline void copy_plain(const unsigned char *in, size_t len, size_t *pp, char **oo)
{
    size_t p = *pp;
    char *o = *oo;

#ifdef __SSE2__
    while (p + 16 <= len) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(in + p));
        /* Signed compare: below 0x20 is a control byte or, as a negative
         * number, a byte >= 0x80. */
        __m128i bad = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                   _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
        unsigned mask = (unsigned)_mm_movemask_epi8(bad);
        _mm_storeu_si128((__m128i *)(void *)o, v);
        if (mask != 0) {
            unsigned k = (unsigned)__builtin_ctz(mask);
            *pp = p + k;
            *oo = o + k;
            return;
        }
        o += 16;
        p += 16;
    }
#endif
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
    *pp = p;
    *oo = o;
}

/*
 * Copies the byte at in[*p] of the string that starts at offset start,
 * which is not plain and not its closing quote, to *o: a UTF-8 sequence
 * as it is, an escape unescaped. Advances *p and *o; -1 on a control
 * byte, invalid UTF-8 or a bad escape.
 */
static inline int string_special(const struct scan *sc, size_t start, size_t *p, char **o)
{
    const unsigned char *in = (const unsigned char *)sc->in;
    size_t k, used = 0, wrote = 0;
    int ch;

    if (in[*p] < 0x20) return bad_byte(sc, *p, "control byte 0x%02x in a string", in[*p]);
    if (in[*p] >= 0x80) {
        k = utf8_length(in + *p, sc->len - *p);
        if (k == 0) return bad_byte(sc, *p, "invalid UTF-8 byte 0x%02x", in[*p]);
        memcpy(*o, in + *p, k);
        *o += k;
        *p += k;
        return 0;
    }
    /* A backslash. */
    if (*p + 1 >= sc->len) return bad_json(sc, start, "unterminated string");
    if (in[*p + 1] == 'u') {
        if (unicode_escape(sc, start, *p, *o, &used, &wrote) < 0) return -1;
        *o += wrote;
        *p += used;
        return 0;
    }
    ch = simple_escape(in[*p + 1]);
    if (ch < 0) return bad_json(sc, *p, "invalid escape");
    *(*o)++ = (char)ch;
    *p += 2;
    return 0;
}

/*
 * Scans the string at sc->i (at its opening quote) into the text buffer,
 * unescaped and NUL-terminated; *s and *n get where and how long. The
 * buffer has room: see json_scan().
 */
static int scan_string(struct scan *sc, const char **s, size_t *n)
{
    struct json_scanner *js = sc->js;
    const unsigned char *in = (const unsigned char *)sc->in;
    const size_t len = sc->len, start = sc->i;
    char *out = js->text + js->text_used, *o = out;
    size_t p = start + 1;

    for (;;) {
        copy_plain(in, len, &p, &o);
        if (p >= len) return bad_json(sc, start, "unterminated string");
        if (in[p] == '"') break;
        if (string_special(sc, start, &p, &o) < 0) return -1;
    }
    *o = '\0';
    *s = out;
    *n = (size_t)(o - out);
    js->text_used += *n + 1;
    sc->i = p + 1;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Tokens and keys                                                         */
/* ---------------------------------------------------------------------- */

/* Doubles js->toks; -1 on out of memory (reported). */
static int grow_toks(const struct scan *sc)
{
    struct json_scanner *js = sc->js;
    size_t ncap = js->toks_cap ? js->toks_cap * 2 : 64;
    struct json_tok *nt =
        ncap < SIZE_MAX / sizeof(*nt) ? realloc(js->toks, ncap * sizeof(*nt)) : NULL;

    if (!nt) return fail(sc, "out of memory for %zu JSON tokens", ncap);
    js->toks = nt;
    js->toks_cap = ncap;
    return 0;
}

/* Appends a token of type t (size 1) and returns it, NULL on out of
 * memory (reported). */
static inline struct json_tok *new_tok(const struct scan *sc, enum json_type t)
{
    struct json_scanner *js = sc->js;
    struct json_tok *tok;

    if (js->ntoks == js->toks_cap && grow_toks(sc) < 0) return NULL;
    tok = &js->toks[js->ntoks++];
    tok->type = t;
    tok->kid = 0;
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
static int key_insert(struct json_scanner *js, size_t obj, size_t key)
{
    const struct json_tok *k = &js->toks[key];
    size_t mask, h;

    if ((js->keys_used + 1) * 2 > js->keys_cap) {
        size_t ncap = js->keys_cap ? js->keys_cap * 2 : 256, oldcap = js->keys_cap;
        struct keyslot *old = js->keys, *nk;

        if (ncap > SIZE_MAX / sizeof(*nk) || !(nk = calloc(ncap, sizeof(*nk)))) return -1;
        js->keys = nk;
        js->keys_cap = ncap;
        js->keys_used = 0;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].key) key_insert(js, old[i].obj - 1, old[i].key - 1);
        free(old);
    }
    mask = js->keys_cap - 1;
    h = key_hash(obj, k->s, k->len) & mask;
    for (; js->keys[h].key; h = (h + 1) & mask) {
        const struct json_tok *o = &js->toks[js->keys[h].key - 1];
        if (js->keys[h].obj == obj + 1 && o->len == k->len &&
            memcmp(o->s, k->s, k->len) == 0)
            return 1;
    }
    js->keys[h].obj = obj + 1;
    js->keys[h].key = key + 1;
    js->keys_used++;
    return 0;
}

/* Reports the duplicate key k found at offset at. */
static int duplicate(const struct scan *sc, size_t at, const struct json_tok *k)
{
    char what[80];

    snprintf(what, sizeof(what), "duplicate object key \"%.40s\"", k->s);
    return bad_json(sc, at, what);
}

/* Enters the other (not interned) keys of object op so far into the key
 * table, which takes over their duplicate check from the linear scan. */
static int table_takes_over(const struct scan *sc, struct open *op)
{
    struct json_scanner *js = sc->js;
    size_t k = op->tok + 1;

    for (size_t m = 0; m < js->toks[op->tok].len; m++) {
        if (js->toks[k].kid == 0 && key_insert(js, op->tok, k) < 0)
            return fail(sc, "out of memory checking keys");
        k += 1 + js->toks[k + 1].size;
    }
    op->in_table = true;
    return 0;
}

/*
 * Checks the key just scanned (the last token), found at offset at,
 * against the earlier keys of the object op. An interned key is a bit in
 * op->seen. Any other key can only equal another such key: a scan of them
 * while the object is small, the hash table once it is not (or once it
 * was: op->in_table).
 */
static int check_duplicate(const struct scan *sc, struct open *op, size_t at)
{
    struct json_scanner *js = sc->js;
    const struct json_tok *o = &js->toks[op->tok], *key = &js->toks[js->ntoks - 1];
    int rc;

    if (key->kid != 0) {
        uint32_t bit = UINT32_C(1) << key->kid;
        if (op->seen & bit) return duplicate(sc, at, key);
        op->seen |= bit;
        return 0;
    }
    if (!op->in_table && o->len < JSON_SCAN_KEYS) {
        const struct json_tok *k = o + 1;
        for (size_t m = 0; m < o->len; m++) {
            if (k->kid == 0 && k->len == key->len && memcmp(k->s, key->s, key->len) == 0)
                return duplicate(sc, at, key);
            k += 1 + k[1].size;
        }
        return 0;
    }
    if (!op->in_table && table_takes_over(sc, op) < 0) return -1;
    rc = key_insert(js, op->tok, js->ntoks - 1);
    if (rc < 0) return fail(sc, "out of memory checking keys");
    if (rc > 0) return duplicate(sc, at, &js->toks[js->ntoks - 1]);
    return 0;
}

/* Scans the object key at sc->i into a new token, interns it and checks
 * it against the earlier keys of the object op. */
static int scan_key(struct scan *sc, struct open *op)
{
    size_t at = sc->i;
    struct json_tok *t;

    if (sc->i >= sc->len || sc->in[sc->i] != '"')
        return unexpected(sc, "string key expected");
    if (!(t = new_tok(sc, JSON_STRING)) || scan_string(sc, &t->s, &t->len) < 0) return -1;
    if (sc->js->key_id) t->kid = sc->js->key_id(t->s, t->len);
    return check_duplicate(sc, op, at);
}

/* ---------------------------------------------------------------------- */
/* Values                                                                  */
/* ---------------------------------------------------------------------- */

/* Scans the number at sc->i (at '-' or a digit) into a new token. */
static int scan_number(struct scan *sc)
{
    struct json_scanner *js = sc->js;
    const char *in = sc->in + sc->i;
    size_t n = number_length(in, sc->len - sc->i);
    struct json_tok *t;

    if (n == 0) return fail(sc, "invalid number at offset %zu", sc->i);
    if (!(t = new_tok(sc, JSON_NUMBER))) return -1;
    t->s = js->text + js->text_used;
    t->len = n;
    memcpy(js->text + js->text_used, in, n);
    js->text[js->text_used + n] = '\0';
    js->text_used += n + 1;
    sc->i += n;
    return 0;
}

/* Scans a scalar at sc->i into a new token (not an object or array). */
static int scan_scalar(struct scan *sc)
{
    const char *in = sc->in + sc->i;
    size_t left = sc->len - sc->i;
    struct json_tok *t;

    switch (*in) {
    case '"':
        if (!(t = new_tok(sc, JSON_STRING))) return -1;
        return scan_string(sc, &t->s, &t->len);
    case 't':
    case 'f':
    case 'n': {
        enum json_type type = *in == 't' ? JSON_TRUE : *in == 'f' ? JSON_FALSE : JSON_NULL;
        const char *word = type == JSON_TRUE    ? "true"
                           : type == JSON_FALSE ? "false"
                                                : "null";
        size_t wl = type == JSON_FALSE ? 5 : 4;
        if (left >= wl && json_same_bytes(in, word, wl)) {
            if (!new_tok(sc, type)) return -1;
            sc->i += wl;
            return 0;
        }
        return unexpected(sc, "value expected");
    }
    default:
        if (*in != '-' && !is_digit(*in)) return unexpected(sc, "value expected");
        return scan_number(sc);
    }
}

/* ---------------------------------------------------------------------- */
/* The scanner                                                             */
/* ---------------------------------------------------------------------- */

/* Makes room in js->text for a line of len bytes, shrinking a buffer an
 * earlier big line left behind. */
static int reserve_text(const struct scan *sc, size_t len)
{
    struct json_scanner *js = sc->js;
    size_t need = len + 1, ncap;

    if (len == SIZE_MAX) return fail(sc, "line too long");
    if (need <= js->text_cap && (js->text_cap <= JSON_KEEP_BUF || need > JSON_KEEP_BUF / 2))
        return 0;
    ncap = need < 256 ? 256 : need;
    /* Growing in small steps: double, as far as the kept size. */
    if (need > js->text_cap && js->text_cap * 2 > ncap && js->text_cap * 2 <= JSON_KEEP_BUF)
        ncap = js->text_cap * 2;
    free(js->text);
    js->text_cap = 0;
    js->text = malloc(ncap);
    if (!js->text) return fail(sc, "out of memory copying a %zu-byte line", len);
    js->text_cap = ncap;
    return 0;
}

/* Drops token and key-table memory an earlier big line left behind. */
static void shrink_tables(struct json_scanner *js)
{
    if (js->toks_cap * sizeof(*js->toks) > JSON_KEEP_BUF) {
        free(js->toks);
        js->toks = NULL;
        js->toks_cap = 0;
    }
    if (js->keys_cap * sizeof(*js->keys) > JSON_KEEP_BUF) {
        free(js->keys);
        js->keys = NULL;
        js->keys_cap = 0;
    } else if (js->keys_used) {
        memset(js->keys, 0, js->keys_cap * sizeof(*js->keys));
    }
    js->keys_used = 0;
}

struct json_scanner *json_scanner_new(json_key_fn key_id)
{
    struct json_scanner *js = calloc(1, sizeof(*js));

    if (js) js->key_id = key_id;
    return js;
}

void json_scanner_free(struct json_scanner *js)
{
    if (!js) return;
    free(js->text);
    free(js->toks);
    free(js->keys);
    free(js);
}

/*
 * The scan is a loop over the explicit stack of open containers, in four
 * states: a value is expected, a value ended, an object member starts, a
 * container closes.
 *
 * js->text never grows during the scan, so token pointers into it stay
 * valid: a string writes at most its source length less one (the quotes
 * make up for the NUL and no escape is shorter than its UTF-8), a number
 * its length plus a NUL, and a delimiter always follows a number before
 * the next token. So at any token the output is no longer than the input
 * consumed, and len + 1 bytes are enough.
 */
int json_scan(struct json_scanner *js, const char *in, size_t len,
              const struct json_tok **toks, char *err, size_t errlen)
{
    struct scan sc = {js, in, len, 0, err, errlen};
    size_t depth = 0, top;

    shrink_tables(js);
    if (reserve_text(&sc, len) < 0) return -1;
    js->text_used = 0;
    js->ntoks = 0;

value: /* a value is expected at sc.i (after whitespace) */
    sc.i = json_skip_ws(in, len, sc.i);
    if (depth >= JSON_MAX_DEPTH) {
        char what[48];
        snprintf(what, sizeof(what), "nested deeper than %d levels", JSON_MAX_DEPTH);
        return bad_json(&sc, sc.i, what);
    }
    if (sc.i >= len) return unexpected(&sc, "value expected");
    if (in[sc.i] == '{' || in[sc.i] == '[') {
        bool obj = in[sc.i] == '{';

        if (!new_tok(&sc, obj ? JSON_OBJECT : JSON_ARRAY)) return -1;
        js->stack[depth].tok = js->ntoks - 1;
        js->stack[depth].seen = 0;
        js->stack[depth++].in_table = false;
        sc.i = json_skip_ws(in, len, sc.i + 1);
        if (sc.i < len && in[sc.i] == (obj ? '}' : ']')) goto close;
        if (obj) goto key;
        goto value;
    }
    if (scan_scalar(&sc) < 0) return -1;

done: /* a value ended; what follows depends on its container */
    sc.i = json_skip_ws(in, len, sc.i);
    if (depth == 0) {
        if (sc.i != len) return unexpected(&sc, "end of line expected");
        *toks = js->toks;
        return 0;
    }
    top = js->stack[depth - 1].tok;
    js->toks[top].len++;
    if (sc.i < len && in[sc.i] == ',') {
        sc.i++;
        if (js->toks[top].type == JSON_OBJECT) goto key;
        goto value;
    }
    if (sc.i < len && in[sc.i] == (js->toks[top].type == JSON_OBJECT ? '}' : ']'))
        goto close;
    return unexpected(&sc, js->toks[top].type == JSON_OBJECT ? "',' or '}' expected"
                                                             : "',' or ']' expected");

key: /* a member of the object on top of the stack starts */
    sc.i = json_skip_ws(in, len, sc.i);
    if (scan_key(&sc, &js->stack[depth - 1]) < 0) return -1;
    sc.i = json_skip_ws(in, len, sc.i);
    if (sc.i >= len || in[sc.i] != ':') return unexpected(&sc, "':' expected");
    sc.i++;
    goto value;

close: /* the container on top of the stack ends at sc.i */
    sc.i++;
    top = js->stack[--depth].tok;
    js->toks[top].size = js->ntoks - top;
    goto done;
}
