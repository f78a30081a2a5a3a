/*
 * jsonscan.h - a strict, allocation-free-per-line JSON scanner: one line of
 * JSON in, a flat array of tokens out. Pure (no I/O). Used by the wal2json
 * decoder (wal2json.c), which maps the tokens to decoded messages; nothing
 * here knows wal2json.
 *
 * The scan checks the whole line in one pass and writes it into two arrays
 * the scanner owns and reuses from line to line (a line costs no malloc
 * once they have grown; they shrink back after a line past 1 MiB):
 *   - text: every string unescaped to UTF-8 and every number as its exact
 *     source text (1.50 stays "1.50", a 30-digit number stays whole), each
 *     NUL-terminated;
 *   - tokens: one per value and per object key, in document order, each
 *     container followed by its members, each token knowing the size of its
 *     subtree so a reader skips a member in one step: the members of an
 *     object are key, value, key, value...
 *
 * It is as strict as jansson's json_loadb with JSON_REJECT_DUPLICATES:
 * structure, trailing garbage, escapes and surrogate pairs, UTF-8 (no
 * overlong forms, surrogates or code points past U+10FFFF), control bytes
 * in strings, the number grammar (RFC 8259), duplicate keys in any object,
 * and nesting depth (JSON_MAX_DEPTH, counting every value as jansson does).
 * The escape \u0000 is refused by name: it keeps every string
 * NUL-terminated without holes (and Postgres text cannot hold NUL).
 *
 * Object keys can be interned while scanning: the caller gives a function
 * mapping a key to a small id (1..JSON_MAX_KEY_ID; 0 for any other key),
 * stored in the key token, so a lookup compares an integer (json_get) and
 * the duplicate check of a known key is one bit. Other keys are compared
 * with the object's earlier other keys, through a hash table once the
 * object has many keys, so that a hostile line cannot make the check
 * quadratic.
 *
 * Errors (log.h convention: -1 and one line in err, the caller logs):
 *   "not valid JSON (<n>-byte line): <what> at offset <k>", where <what>
 *   is e.g. "',' or '}' expected near 'x'", "unterminated string",
 *   "lone low surrogate escape", "duplicate object key \"k\"";
 *   "string at offset <k> holds \u0000, which Postgres text cannot";
 *   "invalid number at offset <k>"; "out of memory ...".
 * err never holds a control byte from the input.
 */
#ifndef OUTBOXD_JSONSCAN_H
#define OUTBOXD_JSONSCAN_H

#include <stdbool.h>
#include <stddef.h>

/* Deepest nesting accepted, counted as jansson counts it: every value,
 * scalar or not, is one level deeper than its container. */
#define JSON_MAX_DEPTH 2048

/* Largest key id a key function may return (ids are bits of a mask). */
#define JSON_MAX_KEY_ID 31

/* Room err needs for any message of json_scan() in full. */
#define JSON_ERRLEN 256

enum json_type {
    JSON_OBJECT,
    JSON_ARRAY,
    JSON_STRING,
    JSON_NUMBER,
    JSON_TRUE,
    JSON_FALSE,
    JSON_NULL
};

/* One scanned value or object key. */
struct json_tok {
    enum json_type type;
    int kid;       /* object keys: the interned id; 0 otherwise */
    size_t size;   /* tokens in the subtree, this one included (1 for scalars) */
    size_t len;    /* STRING/NUMBER: bytes at s; OBJECT/ARRAY: members */
    const char *s; /* STRING/NUMBER: NUL-terminated, in the scanner's text */
};

/* Maps key s[0..n) (unescaped, NUL-terminated) to 1..JSON_MAX_KEY_ID, or 0. */
typedef int (*json_key_fn)(const char *s, size_t n);

struct json_scanner;

/* A scanner interning keys with key_id (NULL: every key gets 0). NULL on
 * out of memory. The caller frees it with json_scanner_free(). */
struct json_scanner *json_scanner_new(json_key_fn key_id);
void json_scanner_free(struct json_scanner *js);

/*
 * Scans in[0..len) (no NUL needed; a NUL byte is a control byte inside a
 * string and invalid elsewhere). 0: *toks points at the tokens, (*toks)[0]
 * being the top-level value, valid (with the strings they point at) until
 * the next scan or the free. -1: err holds the reason (see above).
 */
int json_scan(struct json_scanner *js, const char *in, size_t len,
              const struct json_tok **toks, char *err, size_t errlen);

/* The value of the member of object obj whose key has id kid, or NULL.
 * (kid 0 finds the first key that is not interned.) Inline: the mapping
 * from tokens to messages calls it for every field it reads. */
static inline const struct json_tok *json_get(const struct json_tok *obj, int kid)
{
    const struct json_tok *k = obj + 1;

    for (size_t m = 0; m < obj->len; m++) {
        if (k->kid == kid) return k + 1;
        k += 1 + k[1].size;
    }
    return NULL;
}

/* "an object", "a string", "null", ... for errors; "missing" for NULL. */
const char *json_type_name(const struct json_tok *v);

/* Index of the first byte at or after i in s[0..len) that is not JSON
 * whitespace (space, tab, CR, LF); len if none. */
static inline size_t json_skip_ws(const char *s, size_t len, size_t i)
{
    /* wal2json writes no whitespace between tokens: one test, usually. */
    if (i < len && (unsigned char)s[i] > ' ') return i;
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* True when a[0..n) equals b[0..n). Inline: for a short constant n the
 * compiler unrolls it, where memcmp() stayed a libc call (4 % of the
 * benchmark's CPU in wal2json's key interning). */
static inline bool json_same_bytes(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return false;
    return true;
}

#endif
