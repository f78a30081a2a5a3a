/*
 * pgoutput.c - decoder for the messages of PostgreSQL's built-in pgoutput
 * logical decoding plugin, protocol version 1, text values.
 *
 * One call to pgoutput_decode() takes the payload of one XLogData frame
 * (exactly one pgoutput message) and fills one struct repl_msg (decode.h).
 * The decoder is pure apart from its own state:
 *
 *   - a relation cache keyed by relid (relcache.h, shared with the wal2json
 *     decoder). pgoutput sends a Relation message before the first change
 *     of a table in a session and again whenever its layout changes; the
 *     newest layout replaces the cached one, which is freed.
 *   - a scratch array of column values, grown on demand and reused, so that
 *     decoding an Insert allocates nothing in steady state.
 *
 * Every read goes through a bounds-checked cursor (struct cursor below): a
 * truncated or malformed message is reported as -1 with one line in err that
 * names the message type, the field and the offset; nothing is ever read
 * outside buf[0..len). A message with bytes left over after its last field is
 * malformed too. All integers on the wire are big-endian; strings are
 * NUL-terminated; all values in a repl_msg that are not relations point into
 * the caller's buffer or into the scratch array (see decode.h for lifetimes).
 *
 * Wire formats are written above each parser; the reference is "Logical
 * Replication Message Formats" in the PostgreSQL documentation.
 */
#include "pgoutput.h"
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relcache.h"
#include "replproto.h"

/* Initial size of the scratch value array. */
#define PGO_VALUES_INIT 16

struct pgoutput_decoder {
    struct relcache *rels;    /* owns the relations */
    struct col_value *values; /* scratch for tuple values; owned */
    size_t values_cap;
};

/* A read position in one message, plus what to say when a read fails. */
struct cursor {
    const unsigned char *buf;
    size_t len;
    size_t pos;
    const char *msg; /* message type name for errors, e.g. "Insert" */
    int col;         /* 1-based column being read, 0 when not in a column */
    char *err;
    size_t errlen;
};

/* ---------------------------------------------------------------------- */
/* Errors and bounds-checked reads                                         */
/* ---------------------------------------------------------------------- */

/* Writes "pgoutput <msg>: <formatted>" into c->err; always returns -1. */
static int fail(const struct cursor *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(const struct cursor *c, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (!c->err || c->errlen == 0) return -1;
    n = snprintf(c->err, c->errlen, "pgoutput %s: ", c->msg);
    if (n < 0 || (size_t)n >= c->errlen) return -1;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    log_one_line(c->err); /* relation and column names may hold any byte */
    return -1;
}

/* Names the field being read, prefixed with the column when inside one. */
static const char *field_label(const struct cursor *c, const char *field,
                               char *buf, size_t buflen)
{
    if (c->col <= 0) return field;
    snprintf(buf, buflen, "column %d %s", c->col, field);
    return buf;
}

/* need()'s error: kept out of line so that need() inlines into every read. */
static __attribute__((noinline, cold)) void truncated(const struct cursor *c, size_t n,
                                                      const char *field)
{
    char lbl[96];

    fail(c, "truncated at %s (offset %zu, need %zu bytes, have %zu)",
         field_label(c, field, lbl, sizeof(lbl)), c->pos, n, c->len - c->pos);
}

/* Checks that n more bytes are available; errors name the field. (The -1
 * stays here, in sight of the callers: gcc then sees that a read that
 * returned 0 wrote its output.) */
static inline int need(const struct cursor *c, size_t n, const char *field)
{
    if (c->len - c->pos >= n) return 0;
    truncated(c, n, field);
    return -1;
}

static int get_u8(struct cursor *c, const char *field, uint8_t *out)
{
    if (need(c, 1, field) < 0) return -1;
    *out = c->buf[c->pos];
    c->pos += 1;
    return 0;
}

static int get_u16(struct cursor *c, const char *field, uint16_t *out)
{
    if (need(c, 2, field) < 0) return -1;
    *out = repl_get_u16(c->buf + c->pos);
    c->pos += 2;
    return 0;
}

static int get_u32(struct cursor *c, const char *field, uint32_t *out)
{
    if (need(c, 4, field) < 0) return -1;
    *out = repl_get_u32(c->buf + c->pos);
    c->pos += 4;
    return 0;
}

static int get_u64(struct cursor *c, const char *field, uint64_t *out)
{
    if (need(c, 8, field) < 0) return -1;
    *out = repl_get_u64(c->buf + c->pos);
    c->pos += 8;
    return 0;
}

/* Reads a signed Int16 count and rejects negative values. */
static int get_count16(struct cursor *c, const char *field, int *out)
{
    uint16_t v;

    if (get_u16(c, field, &v) < 0) return -1;
    if ((int16_t)v < 0) {
        fail(c, "negative %s %d at offset %zu", field, (int16_t)v, c->pos - 2);
        return -1; /* here, not fail()'s, so gcc sees *out is set on 0 */
    }
    *out = (int16_t)v;
    return 0;
}

/* Reads a signed Int32 length/count and rejects negative values. */
static int get_len32(struct cursor *c, const char *field, uint32_t *out)
{
    char lbl[96];
    uint32_t v;

    if (get_u32(c, field, &v) < 0) return -1;
    if ((int32_t)v < 0) {
        fail(c, "negative %s %d at offset %zu", field_label(c, field, lbl, sizeof(lbl)),
             (int32_t)v, c->pos - 4);
        return -1; /* see get_count16() */
    }
    *out = v;
    return 0;
}

/* Borrows a NUL-terminated string; the NUL must lie within the buffer. */
static int get_str(struct cursor *c, const char *field, const char **out)
{
    const unsigned char *start = c->buf + c->pos;
    const unsigned char *nul;
    char lbl[96];

    if (need(c, 1, field) < 0) return -1;
    nul = memchr(start, '\0', c->len - c->pos);
    if (!nul) {
        fail(c, "unterminated string at %s (offset %zu, %zu bytes left)",
             field_label(c, field, lbl, sizeof(lbl)), c->pos, c->len - c->pos);
        return -1; /* see get_count16() */
    }
    *out = (const char *)start;
    c->pos += (size_t)(nul - start) + 1;
    return 0;
}

/* Borrows n raw bytes. */
static int get_bytes(struct cursor *c, size_t n, const char *field,
                     const char **out)
{
    if (need(c, n, field) < 0) return -1;
    *out = (const char *)c->buf + c->pos;
    c->pos += n;
    return 0;
}

/* A complete message has no bytes after its last field. */
static int finish(const struct cursor *c)
{
    if (c->pos == c->len) return 0;
    return fail(c, "%zu trailing bytes after the message (offset %zu)",
                c->len - c->pos, c->pos);
}

/* ---------------------------------------------------------------------- */
/* Relations and the relation cache                                        */
/* ---------------------------------------------------------------------- */

const struct relation *pgoutput_relation(const struct pgoutput_decoder *d,
                                         uint32_t relid)
{
    return relcache_get(d->rels, relid);
}

/* Finds the cached relation a change refers to; unknown relid is an error. */
static int lookup_rel(struct pgoutput_decoder *d, struct cursor *c,
                      uint32_t relid, const struct relation **out)
{
    *out = pgoutput_relation(d, relid);
    if (!*out)
        return fail(c, "unknown relation %u (no Relation message seen for it)",
                    relid);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Decoder lifetime                                                        */
/* ---------------------------------------------------------------------- */

/* Allocates the decoder; the caller frees it with pgoutput_decoder_free(). */
struct pgoutput_decoder *pgoutput_decoder_new(void)
{
    struct pgoutput_decoder *d = calloc(1, sizeof(*d));

    if (!d) return NULL;
    d->rels = relcache_new();
    if (!d->rels || col_values_reserve(&d->values, &d->values_cap,
                                       PGO_VALUES_INIT) < 0) {
        pgoutput_decoder_free(d);
        return NULL;
    }
    return d;
}

/* Frees the decoder, every cached relation and the scratch array. */
void pgoutput_decoder_free(struct pgoutput_decoder *d)
{
    if (!d) return;
    relcache_free(d->rels);
    free(d->values);
    free(d);
}

/* Makes the scratch array hold at least n values (contents not kept). */
static int values_reserve(struct pgoutput_decoder *d, struct cursor *c, int n)
{
    if (col_values_reserve(&d->values, &d->values_cap, (size_t)n) < 0)
        return fail(c, "out of memory for %d column values", n);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Message parsers: each reads the fields after the type byte into out.    */
/* ---------------------------------------------------------------------- */

/* Begin: Byte1('B') Int64 final_lsn Int64 commit_time Int32 xid */
static int parse_begin(struct pgoutput_decoder *d, struct cursor *c,
                       struct repl_msg *out)
{
    uint64_t ts;

    (void)d;
    out->kind = RM_BEGIN;
    if (get_u64(c, "final LSN", &out->u.begin.final_lsn) < 0 ||
        get_u64(c, "commit timestamp", &ts) < 0 ||
        get_u32(c, "xid", &out->u.begin.xid) < 0)
        return -1;
    out->u.begin.commit_time = (int64_t)ts;
    return finish(c);
}

/* Commit: Byte1('C') Int8 flags Int64 commit_lsn Int64 end_lsn
 *         Int64 commit_time */
static int parse_commit(struct pgoutput_decoder *d, struct cursor *c,
                        struct repl_msg *out)
{
    uint64_t ts;

    (void)d;
    out->kind = RM_COMMIT;
    if (get_u8(c, "flags", &out->u.commit.flags) < 0 ||
        get_u64(c, "commit LSN", &out->u.commit.commit_lsn) < 0 ||
        get_u64(c, "end LSN", &out->u.commit.end_lsn) < 0 ||
        get_u64(c, "commit timestamp", &ts) < 0)
        return -1;
    out->u.commit.commit_time = (int64_t)ts;
    return finish(c);
}

/* Origin: Byte1('O') Int64 commit_lsn String name */
static int parse_origin(struct pgoutput_decoder *d, struct cursor *c,
                        struct repl_msg *out)
{
    (void)d;
    out->kind = RM_ORIGIN;
    if (get_u64(c, "commit LSN", &out->u.origin.commit_lsn) < 0 ||
        get_str(c, "origin name", &out->u.origin.name) < 0)
        return -1;
    return finish(c);
}

/* Type: Byte1('Y') Int32 oid String namespace String name */
static int parse_type(struct pgoutput_decoder *d, struct cursor *c,
                      struct repl_msg *out)
{
    (void)d;
    out->kind = RM_TYPE;
    if (get_u32(c, "type oid", &out->u.type.oid) < 0 ||
        get_str(c, "namespace", &out->u.type.nspname) < 0 ||
        get_str(c, "type name", &out->u.type.name) < 0)
        return -1;
    return finish(c);
}

/*
 * One column of a Relation message:
 *   Int8 flags, String name, Int32 type oid, Int32 typmod
 * The name is copied into col (owned by the relation).
 */
static int parse_rel_column(struct cursor *c, struct rel_column *col)
{
    const char *name;
    uint32_t typmod;

    if (get_u8(c, "flags", &col->flags) < 0 ||
        get_str(c, "name", &name) < 0 ||
        get_u32(c, "type oid", &col->typid) < 0 ||
        get_u32(c, "typmod", &typmod) < 0)
        return -1;
    col->typmod = (int32_t)typmod;
    col->name = strdup(name);
    if (!col->name) return fail(c, "out of memory copying a column name");
    return 0;
}

/*
 * Reads the header and columns of a Relation message into a new relation,
 * which the caller owns (free with relation_free) when 0 is returned.
 *   Int32 relid, String namespace, String relname, Int8 replica identity,
 *   Int16 ncols, ncols * column (see parse_rel_column)
 */
static int read_relation(struct cursor *c, struct relation **out)
{
    struct relation *rel;
    const char *nsp = NULL, *name = NULL;
    uint32_t relid = 0;
    uint8_t ident = 0;
    int ncols = 0;

    if (get_u32(c, "relid", &relid) < 0 ||
        get_str(c, "namespace", &nsp) < 0 ||
        get_str(c, "relation name", &name) < 0 ||
        get_u8(c, "replica identity", &ident) < 0 ||
        get_count16(c, "column count", &ncols) < 0)
        return -1;
    if (ncols > REL_MAX_COLS)
        return fail(c, "absurd column count %d for relation %u (max %d)",
                    ncols, relid, REL_MAX_COLS);
    rel = relation_new(relid, nsp, name, (char)ident, ncols);
    if (!rel) return fail(c, "out of memory for relation %u", relid);
    for (int i = 0; i < ncols; i++) {
        c->col = i + 1;
        if (parse_rel_column(c, &rel->cols[i]) < 0) {
            relation_free(rel);
            return -1;
        }
    }
    c->col = 0;
    *out = rel;
    return 0;
}

/* Relation: Byte1('R') followed by what read_relation() reads. The new
 * layout replaces any cached one only once the whole message is valid. */
static int parse_relation(struct pgoutput_decoder *d, struct cursor *c,
                          struct repl_msg *out)
{
    struct relation *rel = NULL;

    if (read_relation(c, &rel) < 0) return -1;
    if (finish(c) < 0) {
        relation_free(rel);
        return -1;
    }
    if (relcache_put(d->rels, rel) < 0) {
        fail(c, "out of memory caching relation %u", rel->relid);
        relation_free(rel);
        return -1;
    }
    out->kind = RM_RELATION;
    out->u.relation.rel = rel;
    return 0;
}

/*
 * One value of a TupleData:
 *   Byte1 kind: 'n' (NULL) | 'u' (unchanged TOAST) | 't' text | 'b' binary,
 *   for 't' and 'b' followed by Int32 len and Byte(len) data.
 */
static int parse_value(struct cursor *c, struct col_value *v)
{
    uint8_t kind;

    if (get_u8(c, "kind", &kind) < 0) return -1;
    v->len = 0;
    v->data = NULL;
    switch (kind) {
    case CV_NULL:
    case CV_UNCHANGED:
        v->kind = (enum col_kind)kind;
        return 0;
    case CV_TEXT:
    case CV_BINARY:
        v->kind = (enum col_kind)kind;
        if (get_len32(c, "length", &v->len) < 0) return -1;
        return get_bytes(c, v->len, "value", &v->data);
    default:
        return fail(c, "unknown value kind 0x%02x at column %d (offset %zu)",
                    kind, c->col, c->pos - 1);
    }
}

/*
 * TupleData: Int16 ncols, then ncols values (see parse_value). The column
 * count must match the cached layout of rel. Values land in the decoder's
 * scratch array, overwriting whatever the previous tuple left there.
 */
static int parse_tuple(struct pgoutput_decoder *d, struct cursor *c,
                       const struct relation *rel)
{
    int ncols = 0;

    if (get_count16(c, "tuple column count", &ncols) < 0) return -1;
    if (ncols != rel->ncols)
        return fail(c,
                    "relation layout mismatch: tuple has %d columns but "
                    "relation %u (%s.%s) has %d",
                    ncols, rel->relid, rel->nspname, rel->relname, rel->ncols);
    if (values_reserve(d, c, ncols) < 0) return -1;
    for (int i = 0; i < ncols; i++) {
        c->col = i + 1;
        if (parse_value(c, &d->values[i]) < 0) return -1;
    }
    c->col = 0;
    return 0;
}

/* Reads one Byte1 tuple marker and checks it is one of the allowed ones. */
static int get_marker(struct cursor *c, const char *allowed, uint8_t *out)
{
    if (get_u8(c, "tuple marker", out) < 0) return -1;
    if (*out == 0 || !strchr(allowed, *out))
        return fail(c, "unexpected tuple marker 0x%02x at offset %zu "
                       "(expected one of \"%s\")",
                    *out, c->pos - 1, allowed);
    return 0;
}

/* Reads the relid of a change message and resolves it. */
static int read_change_rel(struct pgoutput_decoder *d, struct cursor *c,
                           const struct relation **rel)
{
    uint32_t relid;

    if (get_u32(c, "relid", &relid) < 0) return -1;
    return lookup_rel(d, c, relid, rel);
}

/* Points out at the tuple just parsed into the scratch array. */
static void set_tuple(struct pgoutput_decoder *d, struct repl_msg *out,
                      enum repl_msg_kind kind, const struct relation *rel)
{
    out->kind = kind;
    out->u.tuple.rel = rel;
    out->u.tuple.nvalues = rel->ncols;
    out->u.tuple.values = d->values;
}

/* Insert: Byte1('I') Int32 relid Byte1('N') TupleData */
static int parse_insert(struct pgoutput_decoder *d, struct cursor *c,
                        struct repl_msg *out)
{
    const struct relation *rel;
    uint8_t marker;

    if (read_change_rel(d, c, &rel) < 0 || get_marker(c, "N", &marker) < 0 ||
        parse_tuple(d, c, rel) < 0 || finish(c) < 0)
        return -1;
    set_tuple(d, out, RM_INSERT, rel);
    return 0;
}

/* Update: Byte1('U') Int32 relid [Byte1('K'|'O') TupleData(old)]
 *         Byte1('N') TupleData(new). Only the new tuple is exposed. */
static int parse_update(struct pgoutput_decoder *d, struct cursor *c,
                        struct repl_msg *out)
{
    const struct relation *rel;
    uint8_t marker;

    if (read_change_rel(d, c, &rel) < 0 || get_marker(c, "KON", &marker) < 0)
        return -1;
    if (marker != 'N') {
        if (parse_tuple(d, c, rel) < 0 || get_marker(c, "N", &marker) < 0)
            return -1;
    }
    if (parse_tuple(d, c, rel) < 0 || finish(c) < 0) return -1;
    set_tuple(d, out, RM_UPDATE, rel);
    return 0;
}

/* Delete: Byte1('D') Int32 relid Byte1('K'|'O') TupleData(key or old) */
static int parse_delete(struct pgoutput_decoder *d, struct cursor *c,
                        struct repl_msg *out)
{
    const struct relation *rel;
    uint8_t marker;

    if (read_change_rel(d, c, &rel) < 0 || get_marker(c, "KO", &marker) < 0 ||
        parse_tuple(d, c, rel) < 0 || finish(c) < 0)
        return -1;
    set_tuple(d, out, RM_DELETE, rel);
    return 0;
}

/* Truncate: Byte1('T') Int32 nrelations Int8 options Int32 relid * n.
 * The relids are validated for length but not exposed. */
static int parse_truncate(struct pgoutput_decoder *d, struct cursor *c,
                          struct repl_msg *out)
{
    uint32_t n, relid;

    (void)d;
    out->kind = RM_TRUNCATE;
    if (get_len32(c, "relation count", &n) < 0 ||
        get_u8(c, "options", &out->u.truncate.options) < 0)
        return -1;
    /* A lying count stops at the end of the buffer, not after n reads. */
    for (uint32_t i = 0; i < n; i++)
        if (get_u32(c, "relid", &relid) < 0) return -1;
    out->u.truncate.nrelids = (int)n;
    return finish(c);
}

/* Message: Byte1('M') Int8 flags Int64 lsn String prefix Int32 length
 *          Byte(length) content */
static int parse_message(struct pgoutput_decoder *d, struct cursor *c,
                         struct repl_msg *out)
{
    (void)d;
    out->kind = RM_MESSAGE;
    if (get_u8(c, "flags", &out->u.message.flags) < 0 ||
        get_u64(c, "LSN", &out->u.message.lsn) < 0 ||
        get_str(c, "prefix", &out->u.message.prefix) < 0 ||
        get_len32(c, "content length", &out->u.message.len) < 0 ||
        get_bytes(c, out->u.message.len, "content", &out->u.message.content) < 0)
        return -1;
    return finish(c);
}

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                */
/* ---------------------------------------------------------------------- */

typedef int (*parse_fn)(struct pgoutput_decoder *, struct cursor *,
                        struct repl_msg *);

static const struct {
    char type;
    const char *name;
    parse_fn parse;
} parsers[] = {
    {'B', "Begin", parse_begin},       {'C', "Commit", parse_commit},
    {'O', "Origin", parse_origin},     {'R', "Relation", parse_relation},
    {'Y', "Type", parse_type},         {'I', "Insert", parse_insert},
    {'U', "Update", parse_update},     {'D', "Delete", parse_delete},
    {'T', "Truncate", parse_truncate}, {'M', "Message", parse_message},
};

int pgoutput_decode(struct pgoutput_decoder *d, const char *buf, size_t len,
                    struct repl_msg *out, char *err, size_t errlen)
{
    struct cursor c = {(const unsigned char *)buf, len, 0, "message", 0,
                       err, errlen};
    struct repl_msg msg;
    unsigned char type;

    if (len == 0) return fail(&c, "empty message");
    type = c.buf[0];
    c.pos = 1;
    for (size_t i = 0; i < sizeof(parsers) / sizeof(parsers[0]); i++) {
        if ((unsigned char)parsers[i].type != type) continue;
        c.msg = parsers[i].name;
        memset(&msg, 0, sizeof(msg));
        if (parsers[i].parse(d, &c, &msg) < 0) return -1;
        *out = msg;
        return 0;
    }
    if (type >= 0x20 && type < 0x7f)
        return fail(&c, "unknown message type '%c' (0x%02x)", type, type);
    return fail(&c, "unknown message type 0x%02x", type);
}
