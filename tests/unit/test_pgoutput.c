/*
 * test_pgoutput.c - unit tests for the pgoutput protocol v1 decoder
 * (src/pgoutput.c). Messages are built by hand with a small byte builder so
 * that every field is known; each decoded field is checked.
 *
 * The prefix and mutation tests copy their input into heap blocks of the
 * exact length, so running this binary under valgrind or ASan (CK_FORK=no)
 * catches any read outside the buffer.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgoutput.h"

/* ---------------------------------------------------------------------- */
/* Byte builder                                                            */
/* ---------------------------------------------------------------------- */

struct bb {
    unsigned char *p;
    size_t len, cap;
};

static void bb_raw(struct bb *b, const void *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t ncap = b->cap ? b->cap : 64;
        while (ncap < b->len + n) ncap *= 2;
        b->p = realloc(b->p, ncap);
        ck_assert_ptr_nonnull(b->p);
        b->cap = ncap;
    }
    if (n) memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void bb_u8(struct bb *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    bb_raw(b, &c, 1);
}

static void bb_u16(struct bb *b, unsigned v)
{
    bb_u8(b, (v >> 8) & 0xff);
    bb_u8(b, v & 0xff);
}

static void bb_u32(struct bb *b, uint32_t v)
{
    bb_u16(b, v >> 16);
    bb_u16(b, v & 0xffff);
}

static void bb_u64(struct bb *b, uint64_t v)
{
    bb_u32(b, (uint32_t)(v >> 32));
    bb_u32(b, (uint32_t)v);
}

/* A NUL-terminated string. */
static void bb_str(struct bb *b, const char *s) { bb_raw(b, s, strlen(s) + 1); }

/* A 't' column value with explicit length (may hold NULs). */
static void bb_textn(struct bb *b, const char *s, size_t n)
{
    bb_u8(b, 't');
    bb_u32(b, (uint32_t)n);
    bb_raw(b, s, n);
}

static void bb_text(struct bb *b, const char *s) { bb_textn(b, s, strlen(s)); }

static void bb_reset(struct bb *b) { b->len = 0; }

static void bb_free(struct bb *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* A relation column description for relation(). */
struct colspec {
    unsigned flags;
    const char *name;
    uint32_t typid;
    int32_t typmod;
};

/* Relation: 'R' relid nsp name ident ncols cols... */
static void relation(struct bb *b, uint32_t relid, const char *nsp,
                     const char *name, char ident, int ncols,
                     const struct colspec *cols)
{
    bb_u8(b, 'R');
    bb_u32(b, relid);
    bb_str(b, nsp);
    bb_str(b, name);
    bb_u8(b, (unsigned char)ident);
    bb_u16(b, (unsigned)ncols);
    for (int i = 0; cols && i < ncols; i++) {
        bb_u8(b, cols[i].flags);
        bb_str(b, cols[i].name);
        bb_u32(b, cols[i].typid);
        bb_u32(b, (uint32_t)cols[i].typmod);
    }
}

/* Starts a change message: type byte, relid, tuple marker, column count. */
static void change(struct bb *b, char type, uint32_t relid, char marker,
                   int ncols)
{
    bb_u8(b, (unsigned char)type);
    bb_u32(b, relid);
    bb_u8(b, (unsigned char)marker);
    bb_u16(b, (unsigned)ncols);
}

/* The outbox-like table used by most tests: 16384 public.outbox(id, topic, payload). */
#define OUTBOX_RELID 16384u
static const struct colspec outbox_cols[] = {
    {1, "id", 20, -1},
    {0, "topic", 25, -1},
    {0, "payload", 3802, -1},
};

static struct pgoutput_decoder *dec;
static struct bb b;
static struct repl_msg m;
static char err[512];

/* Decodes n bytes at p into m; the reason for a failure lands in err. */
static int decode_bytes(const unsigned char *p, size_t n)
{
    err[0] = '\0';
    memset(&m, 0, sizeof(m));
    return pgoutput_decode(dec, (const char *)p, n, &m, err, sizeof(err));
}

/* Decodes the builder's current contents. */
static int decode(void) { return decode_bytes(b.p, b.len); }

/* Decodes b and fails the test (with the decoder's reason) unless it works. */
#define DECODE_OK()                                                          \
    do {                                                                     \
        int rc_ = decode();                                                  \
        ck_assert_msg(rc_ == 0, "decode failed: %s", err);                   \
    } while (0)

/* Decodes b, expects -1 and an error mentioning `needle`. */
#define DECODE_ERR(needle)                                                   \
    do {                                                                     \
        int rc_ = decode();                                                  \
        ck_assert_msg(rc_ == -1, "decode unexpectedly succeeded");          \
        ck_assert_msg(strstr(err, (needle)) != NULL,                        \
                      "error \"%s\" does not mention \"%s\"", err, (needle)); \
    } while (0)

static void define_outbox(void)
{
    bb_reset(&b);
    relation(&b, OUTBOX_RELID, "public", "outbox", 'd', 3, outbox_cols);
    DECODE_OK();
    bb_reset(&b);
}

static void setup(void)
{
    dec = pgoutput_decoder_new();
    ck_assert_ptr_nonnull(dec);
    memset(&b, 0, sizeof(b));
}

static void teardown(void)
{
    pgoutput_decoder_free(dec);
    dec = NULL;
    bb_free(&b);
}

/* Checks one decoded value against kind and exact bytes. */
static void check_value(const struct col_value *v, enum col_kind kind,
                        const char *data, size_t len)
{
    ck_assert_int_eq(v->kind, kind);
    ck_assert_uint_eq(v->len, len);
    if (kind == CV_TEXT || kind == CV_BINARY) {
        ck_assert_ptr_nonnull(v->data);
        ck_assert_int_eq(memcmp(v->data, data, len), 0);
    }
}

/* ---------------------------------------------------------------------- */
/* Field-by-field decoding                                                 */
/* ---------------------------------------------------------------------- */

START_TEST(test_begin)
{
    bb_u8(&b, 'B');
    bb_u64(&b, UINT64_C(0x00000001A2B3C4D5));
    bb_u64(&b, UINT64_C(0x0002D8F1E2A3B4C5));
    bb_u32(&b, UINT32_C(0xFEDCBA98));
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_BEGIN);
    ck_assert_uint_eq(m.u.begin.final_lsn, UINT64_C(0x00000001A2B3C4D5));
    ck_assert_int_eq(m.u.begin.commit_time, INT64_C(0x0002D8F1E2A3B4C5));
    ck_assert_uint_eq(m.u.begin.xid, UINT32_C(0xFEDCBA98));
}
END_TEST

START_TEST(test_commit)
{
    bb_u8(&b, 'C');
    bb_u8(&b, 0);
    bb_u64(&b, UINT64_C(0x16B3748));
    bb_u64(&b, UINT64_C(0x16B3778));
    bb_u64(&b, UINT64_C(812345678901234));
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_COMMIT);
    ck_assert_uint_eq(m.u.commit.flags, 0);
    ck_assert_uint_eq(m.u.commit.commit_lsn, UINT64_C(0x16B3748));
    ck_assert_uint_eq(m.u.commit.end_lsn, UINT64_C(0x16B3778));
    ck_assert_int_eq(m.u.commit.commit_time, INT64_C(812345678901234));

    bb_reset(&b);
    bb_u8(&b, 'C');
    bb_u8(&b, 0x7f);
    bb_u64(&b, 1);
    bb_u64(&b, 2);
    bb_u64(&b, 3);
    DECODE_OK();
    ck_assert_uint_eq(m.u.commit.flags, 0x7f);
    ck_assert_uint_eq(m.u.commit.commit_lsn, 1);
    ck_assert_uint_eq(m.u.commit.end_lsn, 2);
    ck_assert_int_eq(m.u.commit.commit_time, 3);
}
END_TEST

START_TEST(test_origin)
{
    bb_u8(&b, 'O');
    bb_u64(&b, UINT64_C(0xAABBCCDD11223344));
    bb_str(&b, "pg_16399");
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_ORIGIN);
    ck_assert_uint_eq(m.u.origin.commit_lsn, UINT64_C(0xAABBCCDD11223344));
    ck_assert_str_eq(m.u.origin.name, "pg_16399");
    /* Borrowed from the input. */
    ck_assert_ptr_eq(m.u.origin.name, (const char *)b.p + 9);
}
END_TEST

START_TEST(test_relation)
{
    const struct relation *r;

    relation(&b, OUTBOX_RELID, "public", "outbox", 'f', 3, outbox_cols);
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_RELATION);
    r = m.u.relation.rel;
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_eq(r, pgoutput_relation(dec, OUTBOX_RELID));
    ck_assert_uint_eq(r->relid, OUTBOX_RELID);
    ck_assert_str_eq(r->nspname, "public");
    ck_assert_str_eq(r->relname, "outbox");
    ck_assert_int_eq(r->replident, 'f');
    ck_assert_int_eq(r->ncols, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_str_eq(r->cols[i].name, outbox_cols[i].name);
        ck_assert_uint_eq(r->cols[i].typid, outbox_cols[i].typid);
        ck_assert_int_eq(r->cols[i].typmod, -1);
        ck_assert_uint_eq(r->cols[i].flags, outbox_cols[i].flags);
    }
    /* Names are copies, not pointers into the input. */
    ck_assert(r->relname < (char *)b.p || r->relname >= (char *)b.p + b.len);
    ck_assert_ptr_null(pgoutput_relation(dec, OUTBOX_RELID + 1));
}
END_TEST

START_TEST(test_relation_typmod_and_empty_nsp)
{
    static const struct colspec cols[] = {
        {1, "code", 1043, 36},               /* varchar(32): typmod 32+4 */
        {0, "amount", 1700, (10 << 16) | 6}, /* numeric(10,2) */
    };
    const struct relation *r;

    /* pgoutput sends "" as the namespace for pg_catalog. */
    relation(&b, 42, "", "weird \"name\" é", 'n', 2, cols);
    DECODE_OK();
    r = m.u.relation.rel;
    ck_assert_str_eq(r->nspname, "");
    ck_assert_str_eq(r->relname, "weird \"name\" é");
    ck_assert_int_eq(r->replident, 'n');
    ck_assert_int_eq(r->cols[0].typmod, 36);
    ck_assert_uint_eq(r->cols[0].typid, 1043);
    ck_assert_int_eq(r->cols[1].typmod, (10 << 16) | 6);
    ck_assert_uint_eq(r->cols[1].flags, 0);
    ck_assert_uint_eq(r->cols[0].flags, 1);
}
END_TEST

START_TEST(test_type)
{
    bb_u8(&b, 'Y');
    bb_u32(&b, 16401);
    bb_str(&b, "myschema");
    bb_str(&b, "mood");
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_TYPE);
    ck_assert_uint_eq(m.u.type.oid, 16401);
    ck_assert_str_eq(m.u.type.nspname, "myschema");
    ck_assert_str_eq(m.u.type.name, "mood");
}
END_TEST

START_TEST(test_insert)
{
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "12345");
    bb_text(&b, "orders.created");
    bb_text(&b, "{\"id\": 7}");
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_INSERT);
    ck_assert_ptr_eq(m.u.tuple.rel, pgoutput_relation(dec, OUTBOX_RELID));
    ck_assert_int_eq(m.u.tuple.nvalues, 3);
    check_value(&m.u.tuple.values[0], CV_TEXT, "12345", 5);
    check_value(&m.u.tuple.values[1], CV_TEXT, "orders.created", 14);
    check_value(&m.u.tuple.values[2], CV_TEXT, "{\"id\": 7}", 9);
    /* Values borrow the input buffer: "12345" starts after the 10-byte
     * header (type, relid, 'N', ncols) and the 5-byte 't'+len. */
    ck_assert_ptr_eq(m.u.tuple.values[0].data, (const char *)b.p + 1 + 4 + 1 + 2 + 5);
}
END_TEST

START_TEST(test_insert_empty_text_and_binary)
{
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "");
    bb_u8(&b, 'b');
    bb_u32(&b, 4);
    bb_raw(&b, "\x00\x01\xff\x7f", 4);
    bb_text(&b, "x");
    DECODE_OK();
    check_value(&m.u.tuple.values[0], CV_TEXT, "", 0);
    check_value(&m.u.tuple.values[1], CV_BINARY, "\x00\x01\xff\x7f", 4);
    check_value(&m.u.tuple.values[2], CV_TEXT, "x", 1);
}
END_TEST

START_TEST(test_null_and_unchanged_toast)
{
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_u8(&b, 'n');
    bb_text(&b, "t");
    bb_u8(&b, 'u');
    DECODE_OK();
    ck_assert_int_eq(m.u.tuple.nvalues, 3);
    ck_assert_int_eq(m.u.tuple.values[0].kind, CV_NULL);
    ck_assert_uint_eq(m.u.tuple.values[0].len, 0);
    ck_assert_ptr_null(m.u.tuple.values[0].data);
    check_value(&m.u.tuple.values[1], CV_TEXT, "t", 1);
    ck_assert_int_eq(m.u.tuple.values[2].kind, CV_UNCHANGED);
    ck_assert_uint_eq(m.u.tuple.values[2].len, 0);
    ck_assert_ptr_null(m.u.tuple.values[2].data);
}
END_TEST

START_TEST(test_update_with_old_key)
{
    define_outbox();
    /* Old key tuple: key column set, others NULL, as pgoutput sends it. */
    change(&b, 'U', OUTBOX_RELID, 'K', 3);
    bb_text(&b, "1");
    bb_u8(&b, 'n');
    bb_u8(&b, 'n');
    bb_u8(&b, 'N');
    bb_u16(&b, 3);
    bb_text(&b, "2");
    bb_text(&b, "new-topic");
    bb_u8(&b, 'u');
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_UPDATE);
    ck_assert_ptr_eq(m.u.tuple.rel, pgoutput_relation(dec, OUTBOX_RELID));
    ck_assert_int_eq(m.u.tuple.nvalues, 3);
    check_value(&m.u.tuple.values[0], CV_TEXT, "2", 1);
    check_value(&m.u.tuple.values[1], CV_TEXT, "new-topic", 9);
    ck_assert_int_eq(m.u.tuple.values[2].kind, CV_UNCHANGED);
}
END_TEST

START_TEST(test_update_with_old_full)
{
    define_outbox();
    change(&b, 'U', OUTBOX_RELID, 'O', 3);
    bb_text(&b, "old1");
    bb_text(&b, "old2");
    bb_text(&b, "old3");
    bb_u8(&b, 'N');
    bb_u16(&b, 3);
    bb_text(&b, "new1");
    bb_u8(&b, 'n');
    bb_text(&b, "new3");
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_UPDATE);
    check_value(&m.u.tuple.values[0], CV_TEXT, "new1", 4);
    ck_assert_int_eq(m.u.tuple.values[1].kind, CV_NULL);
    check_value(&m.u.tuple.values[2], CV_TEXT, "new3", 4);
}
END_TEST

START_TEST(test_update_new_only)
{
    define_outbox();
    change(&b, 'U', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "a");
    bb_text(&b, "bb");
    bb_text(&b, "ccc");
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_UPDATE);
    ck_assert_int_eq(m.u.tuple.nvalues, 3);
    check_value(&m.u.tuple.values[0], CV_TEXT, "a", 1);
    check_value(&m.u.tuple.values[1], CV_TEXT, "bb", 2);
    check_value(&m.u.tuple.values[2], CV_TEXT, "ccc", 3);
}
END_TEST

START_TEST(test_delete)
{
    define_outbox();
    change(&b, 'D', OUTBOX_RELID, 'K', 3);
    bb_text(&b, "99");
    bb_u8(&b, 'n');
    bb_u8(&b, 'n');
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_DELETE);
    ck_assert_ptr_eq(m.u.tuple.rel, pgoutput_relation(dec, OUTBOX_RELID));
    ck_assert_int_eq(m.u.tuple.nvalues, 3);
    check_value(&m.u.tuple.values[0], CV_TEXT, "99", 2);
    ck_assert_int_eq(m.u.tuple.values[1].kind, CV_NULL);
    ck_assert_int_eq(m.u.tuple.values[2].kind, CV_NULL);

    bb_reset(&b);
    change(&b, 'D', OUTBOX_RELID, 'O', 3);
    bb_text(&b, "5");
    bb_text(&b, "t");
    bb_text(&b, "{}");
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_DELETE);
    check_value(&m.u.tuple.values[0], CV_TEXT, "5", 1);
    check_value(&m.u.tuple.values[1], CV_TEXT, "t", 1);
    check_value(&m.u.tuple.values[2], CV_TEXT, "{}", 2);
}
END_TEST

START_TEST(test_truncate)
{
    bb_u8(&b, 'T');
    bb_u32(&b, 3);
    bb_u8(&b, 1); /* CASCADE */
    bb_u32(&b, 16384);
    bb_u32(&b, 16390);
    bb_u32(&b, 16400);
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_TRUNCATE);
    ck_assert_int_eq(m.u.truncate.nrelids, 3);
    ck_assert_uint_eq(m.u.truncate.options, 1);

    bb_reset(&b);
    bb_u8(&b, 'T');
    bb_u32(&b, 1);
    bb_u8(&b, 2); /* RESTART IDENTITY */
    bb_u32(&b, 16384);
    DECODE_OK();
    ck_assert_int_eq(m.u.truncate.nrelids, 1);
    ck_assert_uint_eq(m.u.truncate.options, 2);
}
END_TEST

START_TEST(test_message)
{
    static const char content[] = "hello\0world\n\xc3\xa9";
    const size_t clen = sizeof(content) - 1; /* 14 bytes, one NUL inside */

    bb_u8(&b, 'M');
    bb_u8(&b, 1);
    bb_u64(&b, UINT64_C(0x0000000300000010));
    bb_str(&b, "outboxd");
    bb_u32(&b, (uint32_t)clen);
    bb_raw(&b, content, clen);
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_MESSAGE);
    ck_assert_uint_eq(m.u.message.flags, 1);
    ck_assert_uint_eq(m.u.message.lsn, UINT64_C(0x0000000300000010));
    ck_assert_str_eq(m.u.message.prefix, "outboxd");
    ck_assert_uint_eq(m.u.message.len, clen);
    ck_assert_mem_eq(m.u.message.content, content, clen);

    /* Non-transactional, empty content. */
    bb_reset(&b);
    bb_u8(&b, 'M');
    bb_u8(&b, 0);
    bb_u64(&b, 7);
    bb_str(&b, "");
    bb_u32(&b, 0);
    DECODE_OK();
    ck_assert_uint_eq(m.u.message.flags, 0);
    ck_assert_uint_eq(m.u.message.lsn, 7);
    ck_assert_str_eq(m.u.message.prefix, "");
    ck_assert_uint_eq(m.u.message.len, 0);
}
END_TEST

/*
 * A transaction as a real server sent it (PostgreSQL, pgoutput v1): bytes
 * captured in the test data of Byzanteam/postgrex_wal (test/data/update.exs),
 * an independent check on the hand-built messages above.
 */
static const unsigned char cap_begin[] = {
    66, 0, 0, 0, 0, 2, 227, 105, 168, 0, 2, 146, 73, 215, 42, 157, 86,
    0, 0, 13, 231};
static const unsigned char cap_relation[] = {
    82, 0, 0, 89, 103, 112, 117, 98, 108, 105, 99, 0, 117, 115, 101, 114, 115,
    0, 100, 0, 7, 1, 105, 100, 0, 0, 0, 0, 20, 255, 255, 255, 255, 0, 110, 97,
    109, 101, 0, 0, 0, 4, 19, 255, 255, 255, 255, 0, 97, 103, 101, 0, 0, 0, 0,
    23, 255, 255, 255, 255, 0, 101, 109, 97, 105, 108, 0, 0, 0, 4, 19, 255,
    255, 255, 255, 0, 112, 97, 115, 115, 119, 111, 114, 100, 95, 100, 105,
    103, 101, 115, 116, 0, 0, 0, 4, 19, 255, 255, 255, 255, 0, 115, 97, 108,
    97, 114, 121, 0, 0, 0, 6, 164, 0, 6, 0, 6, 0, 115, 101, 120, 0, 0, 0, 0,
    16, 255, 255, 255, 255};
static const unsigned char cap_update[] = {
    85, 0, 0, 89, 103, 78, 0, 7, 116, 0, 0, 0, 9, 57, 56, 48, 49, 57, 49, 50,
    52, 52, 116, 0, 0, 0, 3, 97, 98, 99, 116, 0, 0, 0, 2, 50, 51, 110, 110,
    110, 110};
static const unsigned char cap_commit[] = {
    67, 0, 0, 0, 0, 0, 2, 227, 105, 168, 0, 0, 0, 0, 2, 227, 105, 216, 0, 2,
    146, 73, 215, 42, 157, 86};

START_TEST(test_captured_server_transaction)
{
    static const char *names[] = {"id", "name", "age", "email",
                                  "password_digest", "salary", "sex"};
    static const uint32_t types[] = {20, 1043, 23, 1043, 1043, 1700, 16};
    const struct relation *r;

    ck_assert_int_eq(decode_bytes(cap_begin, sizeof(cap_begin)), 0);
    ck_assert_int_eq(m.kind, RM_BEGIN);
    ck_assert_uint_eq(m.u.begin.final_lsn, 48458152);
    ck_assert_int_eq(m.u.begin.commit_time, INT64_C(723795793583446));
    ck_assert_uint_eq(m.u.begin.xid, 3559);

    ck_assert_int_eq(decode_bytes(cap_relation, sizeof(cap_relation)), 0);
    ck_assert_int_eq(m.kind, RM_RELATION);
    r = m.u.relation.rel;
    ck_assert_uint_eq(r->relid, 22887);
    ck_assert_str_eq(r->nspname, "public");
    ck_assert_str_eq(r->relname, "users");
    ck_assert_int_eq(r->replident, 'd');
    ck_assert_int_eq(r->ncols, 7);
    for (int i = 0; i < 7; i++) {
        ck_assert_str_eq(r->cols[i].name, names[i]);
        ck_assert_uint_eq(r->cols[i].typid, types[i]);
        ck_assert_int_eq(r->cols[i].typmod, i == 5 ? 393222 : -1);
        ck_assert_uint_eq(r->cols[i].flags, i == 0 ? 1 : 0);
    }

    ck_assert_int_eq(decode_bytes(cap_update, sizeof(cap_update)), 0);
    ck_assert_int_eq(m.kind, RM_UPDATE);
    ck_assert_ptr_eq(m.u.tuple.rel, r);
    ck_assert_int_eq(m.u.tuple.nvalues, 7);
    check_value(&m.u.tuple.values[0], CV_TEXT, "980191244", 9);
    check_value(&m.u.tuple.values[1], CV_TEXT, "abc", 3);
    check_value(&m.u.tuple.values[2], CV_TEXT, "23", 2);
    for (int i = 3; i < 7; i++) ck_assert_int_eq(m.u.tuple.values[i].kind, CV_NULL);

    ck_assert_int_eq(decode_bytes(cap_commit, sizeof(cap_commit)), 0);
    ck_assert_int_eq(m.kind, RM_COMMIT);
    ck_assert_uint_eq(m.u.commit.flags, 0);
    ck_assert_uint_eq(m.u.commit.commit_lsn, 48458152);
    ck_assert_uint_eq(m.u.commit.end_lsn, 48458200);
    ck_assert_int_eq(m.u.commit.commit_time, INT64_C(723795793583446));
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Values                                                                  */
/* ---------------------------------------------------------------------- */

START_TEST(test_large_value)
{
    const size_t big = 100 * 1024;
    char *payload = malloc(big);

    ck_assert_ptr_nonnull(payload);
    for (size_t i = 0; i < big; i++) payload[i] = (char)('a' + (i * 7) % 26);
    payload[big - 1] = '!';
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "1");
    bb_text(&b, "big");
    bb_textn(&b, payload, big);
    DECODE_OK();
    ck_assert_uint_eq(m.u.tuple.values[2].len, big);
    ck_assert_int_eq(memcmp(m.u.tuple.values[2].data, payload, big), 0);
    check_value(&m.u.tuple.values[1], CV_TEXT, "big", 3);

    /* One byte short of the declared 100 KB length is truncated. */
    b.len--;
    DECODE_ERR("truncated");
    ck_assert_ptr_nonnull(strstr(err, "column 3"));
    free(payload);
}
END_TEST

START_TEST(test_utf8_and_control_bytes)
{
    /* UTF-8 (2, 3 and 4 byte sequences), tabs, newlines, CR, backslash,
     * quotes, a NUL and a lone 0xff: all must come through unchanged. */
    static const char v1[] = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac \xf0\x9f\x9a\x80";
    static const char v2[] = "a\tb\nc\r\nd\\e\"f'\x00g\xff\x01";
    const size_t l1 = sizeof(v1) - 1, l2 = sizeof(v2) - 1;

    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_textn(&b, v1, l1);
    bb_textn(&b, v2, l2);
    bb_text(&b, "{\"k\":\"\xe6\x97\xa5\xe6\x9c\xac\"}");
    DECODE_OK();
    check_value(&m.u.tuple.values[0], CV_TEXT, v1, l1);
    check_value(&m.u.tuple.values[1], CV_TEXT, v2, l2);
    ck_assert_uint_eq(m.u.tuple.values[1].len, 17);
    check_value(&m.u.tuple.values[2], CV_TEXT,
                "{\"k\":\"\xe6\x97\xa5\xe6\x9c\xac\"}", 14);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Relation cache                                                          */
/* ---------------------------------------------------------------------- */

START_TEST(test_relation_redefinition)
{
    static const struct colspec v2[] = {
        {1, "id", 20, -1},
        {0, "topic", 25, -1},
        {0, "payload", 3802, -1},
        {0, "headers", 3802, -1},
    };
    const struct relation *r;

    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "1");
    bb_text(&b, "t");
    bb_text(&b, "{}");
    DECODE_OK();
    ck_assert_int_eq(m.u.tuple.nvalues, 3);

    /* ALTER TABLE outbox ADD COLUMN headers jsonb */
    bb_reset(&b);
    relation(&b, OUTBOX_RELID, "public", "outbox", 'd', 4, v2);
    DECODE_OK();
    r = pgoutput_relation(dec, OUTBOX_RELID);
    ck_assert_ptr_eq(r, m.u.relation.rel);
    ck_assert_int_eq(r->ncols, 4);
    ck_assert_str_eq(r->cols[3].name, "headers");

    bb_reset(&b);
    change(&b, 'I', OUTBOX_RELID, 'N', 4);
    bb_text(&b, "2");
    bb_text(&b, "t");
    bb_text(&b, "{}");
    bb_text(&b, "{\"h\":1}");
    DECODE_OK();
    ck_assert_ptr_eq(m.u.tuple.rel, r);
    ck_assert_int_eq(m.u.tuple.nvalues, 4);
    check_value(&m.u.tuple.values[3], CV_TEXT, "{\"h\":1}", 7);

    /* The old 3-column layout is gone. */
    bb_reset(&b);
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "3");
    bb_text(&b, "t");
    bb_text(&b, "{}");
    DECODE_ERR("layout mismatch");

    /* Renaming the table / schema (and dropping columns) replaces it too. */
    bb_reset(&b);
    relation(&b, OUTBOX_RELID, "app", "events", 'i', 1, v2);
    DECODE_OK();
    r = pgoutput_relation(dec, OUTBOX_RELID);
    ck_assert_str_eq(r->nspname, "app");
    ck_assert_str_eq(r->relname, "events");
    ck_assert_int_eq(r->replident, 'i');
    ck_assert_int_eq(r->ncols, 1);
}
END_TEST

START_TEST(test_bad_redefinition_keeps_old)
{
    const struct relation *before;

    define_outbox();
    before = pgoutput_relation(dec, OUTBOX_RELID);
    relation(&b, OUTBOX_RELID, "public", "renamed", 'd', 3, outbox_cols);
    bb_u8(&b, 0); /* trailing garbage */
    DECODE_ERR("trailing");
    ck_assert_ptr_eq(pgoutput_relation(dec, OUTBOX_RELID), before);
    ck_assert_str_eq(before->relname, "outbox");
}
END_TEST

START_TEST(test_many_relations)
{
    /* Enough relids (some colliding modulo powers of two) to grow the cache
     * several times. */
    char name[32];
    struct colspec col = {0, "c", 25, -1};

    for (uint32_t i = 0; i < 1000; i++) {
        uint32_t relid = (i % 2) ? 16384 + i : i * 1024;
        snprintf(name, sizeof(name), "t%u", relid);
        bb_reset(&b);
        relation(&b, relid, "s", name, 'd', 1, &col);
        DECODE_OK();
    }
    for (uint32_t i = 0; i < 1000; i++) {
        uint32_t relid = (i % 2) ? 16384 + i : i * 1024;
        const struct relation *r = pgoutput_relation(dec, relid);
        snprintf(name, sizeof(name), "t%u", relid);
        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(r->relid, relid);
        ck_assert_str_eq(r->relname, name);

        bb_reset(&b);
        change(&b, 'I', relid, 'N', 1);
        bb_text(&b, name);
        DECODE_OK();
        ck_assert_ptr_eq(m.u.tuple.rel, r);
        check_value(&m.u.tuple.values[0], CV_TEXT, name, strlen(name));
    }
    ck_assert_ptr_null(pgoutput_relation(dec, 3));
    ck_assert_ptr_null(pgoutput_relation(dec, 16384 + 1000 + 1));
}
END_TEST

START_TEST(test_wide_table_and_scratch_reuse)
{
    /* Widths just past powers of two, so the scratch array must grow
     * exactly enough each time (exact-size overruns show up under ASan). */
    static const int widths[] = {15, 16, 17, 32, 33, 64, 65, 129};
    struct colspec cols[300];
    char names[300][16];
    const struct col_value *first;

    for (int i = 0; i < 300; i++) {
        snprintf(names[i], sizeof(names[i]), "c%d", i);
        cols[i] = (struct colspec){0, names[i], 25, -1};
    }
    for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
        int n = widths[w];

        bb_reset(&b);
        relation(&b, 100 + (uint32_t)n, "public", "w", 'd', n, cols);
        DECODE_OK();
        bb_reset(&b);
        change(&b, 'I', 100 + (uint32_t)n, 'N', n);
        for (int i = 0; i < n; i++) bb_text(&b, names[i]);
        DECODE_OK();
        ck_assert_int_eq(m.u.tuple.nvalues, n);
        check_value(&m.u.tuple.values[n - 1], CV_TEXT, names[n - 1],
                    strlen(names[n - 1]));
    }

    bb_reset(&b);
    relation(&b, 7, "public", "wide", 'd', 300, cols);
    DECODE_OK();
    ck_assert_int_eq(m.u.relation.rel->ncols, 300);
    ck_assert_str_eq(m.u.relation.rel->cols[299].name, "c299");

    bb_reset(&b);
    change(&b, 'I', 7, 'N', 300);
    for (int i = 0; i < 300; i++) bb_text(&b, names[i]);
    DECODE_OK();
    ck_assert_int_eq(m.u.tuple.nvalues, 300);
    for (int i = 0; i < 300; i++)
        check_value(&m.u.tuple.values[i], CV_TEXT, names[i], strlen(names[i]));
    first = m.u.tuple.values;

    /* The next Insert (same or smaller) reuses the same scratch array. */
    DECODE_OK();
    ck_assert_ptr_eq(m.u.tuple.values, first);
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "1");
    bb_text(&b, "2");
    bb_text(&b, "3");
    DECODE_OK();
    ck_assert_ptr_eq(m.u.tuple.values, first);
    check_value(&m.u.tuple.values[2], CV_TEXT, "3", 1);
}
END_TEST

START_TEST(test_zero_column_relation)
{
    relation(&b, 99, "public", "empty", 'd', 0, NULL);
    DECODE_OK();
    ck_assert_int_eq(m.u.relation.rel->ncols, 0);
    bb_reset(&b);
    change(&b, 'I', 99, 'N', 0);
    DECODE_OK();
    ck_assert_int_eq(m.kind, RM_INSERT);
    ck_assert_int_eq(m.u.tuple.nvalues, 0);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

START_TEST(test_unknown_relid)
{
    define_outbox();
    change(&b, 'I', 4242, 'N', 3);
    bb_text(&b, "1");
    bb_text(&b, "2");
    bb_text(&b, "3");
    DECODE_ERR("4242");
    ck_assert_ptr_nonnull(strstr(err, "Insert"));
    ck_assert_ptr_nonnull(strstr(err, "unknown relation"));

    bb_reset(&b);
    change(&b, 'U', 4242, 'N', 1);
    bb_text(&b, "1");
    DECODE_ERR("Update");
    ck_assert_ptr_nonnull(strstr(err, "4242"));

    bb_reset(&b);
    change(&b, 'D', 4242, 'K', 1);
    bb_text(&b, "1");
    DECODE_ERR("Delete");
    ck_assert_ptr_nonnull(strstr(err, "4242"));
}
END_TEST

START_TEST(test_column_count_mismatch)
{
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 2);
    bb_text(&b, "1");
    bb_text(&b, "2");
    DECODE_ERR("layout mismatch");
    ck_assert_ptr_nonnull(strstr(err, "Insert"));

    bb_reset(&b);
    change(&b, 'I', OUTBOX_RELID, 'N', 4);
    for (int i = 0; i < 4; i++) bb_text(&b, "x");
    DECODE_ERR("layout mismatch");

    /* Old tuple of an Update with the wrong count. */
    bb_reset(&b);
    change(&b, 'U', OUTBOX_RELID, 'K', 1);
    bb_text(&b, "1");
    bb_u8(&b, 'N');
    bb_u16(&b, 3);
    for (int i = 0; i < 3; i++) bb_text(&b, "x");
    DECODE_ERR("layout mismatch");
    ck_assert_ptr_nonnull(strstr(err, "Update"));

    bb_reset(&b);
    change(&b, 'D', OUTBOX_RELID, 'K', 5);
    for (int i = 0; i < 5; i++) bb_u8(&b, 'n');
    DECODE_ERR("layout mismatch");
    ck_assert_ptr_nonnull(strstr(err, "Delete"));
}
END_TEST

START_TEST(test_bad_markers_and_kinds)
{
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'K', 3); /* Insert needs 'N' */
    for (int i = 0; i < 3; i++) bb_text(&b, "x");
    DECODE_ERR("marker");

    bb_reset(&b);
    change(&b, 'D', OUTBOX_RELID, 'N', 3); /* Delete needs 'K' or 'O' */
    for (int i = 0; i < 3; i++) bb_text(&b, "x");
    DECODE_ERR("marker");

    bb_reset(&b);
    change(&b, 'U', OUTBOX_RELID, 'K', 3); /* old tuple then 'K' again */
    for (int i = 0; i < 3; i++) bb_text(&b, "x");
    bb_u8(&b, 'K');
    bb_u16(&b, 3);
    for (int i = 0; i < 3; i++) bb_text(&b, "x");
    DECODE_ERR("marker");

    bb_reset(&b);
    change(&b, 'U', OUTBOX_RELID, 0, 3); /* NUL is not a marker */
    for (int i = 0; i < 3; i++) bb_text(&b, "x");
    DECODE_ERR("marker");

    bb_reset(&b);
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "x");
    bb_u8(&b, 'x'); /* unknown value kind */
    bb_text(&b, "x");
    DECODE_ERR("kind");
    ck_assert_ptr_nonnull(strstr(err, "column 2"));
}
END_TEST

START_TEST(test_negative_and_absurd_lengths)
{
    define_outbox();
    /* Value length -1 */
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "x");
    bb_u8(&b, 't');
    bb_u32(&b, 0xFFFFFFFFu);
    bb_raw(&b, "abc", 3);
    bb_text(&b, "x");
    DECODE_ERR("negative");
    ck_assert_ptr_nonnull(strstr(err, "column 2"));

    /* Value length 2^31-1 with 3 bytes present */
    bb_reset(&b);
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_u8(&b, 't');
    bb_u32(&b, 0x7FFFFFFFu);
    bb_raw(&b, "abc", 3);
    DECODE_ERR("truncated");

    /* Tuple column count -1 */
    bb_reset(&b);
    change(&b, 'I', OUTBOX_RELID, 'N', 0xFFFF);
    DECODE_ERR("negative");

    /* Relation column count -2 and 2000 */
    bb_reset(&b);
    relation(&b, 5, "s", "t", 'd', 0xFFFE, NULL);
    DECODE_ERR("negative");
    ck_assert_ptr_nonnull(strstr(err, "Relation"));
    bb_reset(&b);
    relation(&b, 5, "s", "t", 'd', 2000, NULL);
    DECODE_ERR("absurd");
    ck_assert_ptr_null(pgoutput_relation(dec, 5));

    /* Relation column count 1600 but no column data */
    bb_reset(&b);
    relation(&b, 5, "s", "t", 'd', 1600, NULL);
    DECODE_ERR("truncated");
    ck_assert_ptr_nonnull(strstr(err, "column 1"));

    /* Message content length negative / beyond the buffer */
    bb_reset(&b);
    bb_u8(&b, 'M');
    bb_u8(&b, 1);
    bb_u64(&b, 1);
    bb_str(&b, "p");
    bb_u32(&b, 0x80000000u);
    DECODE_ERR("negative");
    ck_assert_ptr_nonnull(strstr(err, "Message"));
    bb_reset(&b);
    bb_u8(&b, 'M');
    bb_u8(&b, 1);
    bb_u64(&b, 1);
    bb_str(&b, "p");
    bb_u32(&b, 10);
    bb_raw(&b, "123456789", 9);
    DECODE_ERR("truncated");

    /* Truncate with a negative and an absurd relation count */
    bb_reset(&b);
    bb_u8(&b, 'T');
    bb_u32(&b, 0xFFFFFFF0u);
    bb_u8(&b, 0);
    DECODE_ERR("negative");
    ck_assert_ptr_nonnull(strstr(err, "Truncate"));
    bb_reset(&b);
    bb_u8(&b, 'T');
    bb_u32(&b, 0x7FFFFFFFu);
    bb_u8(&b, 0);
    bb_u32(&b, 16384);
    DECODE_ERR("truncated");
}
END_TEST

START_TEST(test_unterminated_strings)
{
    bb_u8(&b, 'O');
    bb_u64(&b, 1);
    bb_raw(&b, "no-nul", 6);
    DECODE_ERR("unterminated");
    ck_assert_ptr_nonnull(strstr(err, "Origin"));

    bb_reset(&b);
    bb_u8(&b, 'R');
    bb_u32(&b, 1);
    bb_str(&b, "public");
    bb_raw(&b, "outbox", 6);
    DECODE_ERR("unterminated");
    ck_assert_ptr_nonnull(strstr(err, "Relation"));
    ck_assert_ptr_null(pgoutput_relation(dec, 1));
}
END_TEST

START_TEST(test_trailing_bytes)
{
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    for (int i = 0; i < 3; i++) bb_text(&b, "x");
    DECODE_OK();
    bb_u8(&b, 0);
    DECODE_ERR("trailing");

    bb_reset(&b);
    bb_u8(&b, 'B');
    bb_u64(&b, 1);
    bb_u64(&b, 2);
    bb_u32(&b, 3);
    bb_u32(&b, 4);
    DECODE_ERR("Begin");
    ck_assert_ptr_nonnull(strstr(err, "trailing"));
}
END_TEST

START_TEST(test_error_names_column_and_offset)
{
    define_outbox();
    change(&b, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(&b, "1");
    bb_text(&b, "2");
    bb_u8(&b, 't');
    bb_u32(&b, 120);
    bb_raw(&b, "0123456789012345678901234567890123456789", 40);
    DECODE_ERR("pgoutput Insert: truncated at column 3 value");
    /* header 8 + col1 6 + col2 6 + 't' + len 4 = offset 25 */
    ck_assert_ptr_nonnull(strstr(err, "offset 25"));
    ck_assert_ptr_nonnull(strstr(err, "need 120 bytes, have 40"));
    ck_assert_ptr_null(strchr(err, '\n'));

    /* A tiny error buffer is honoured (truncated, still NUL-terminated). */
    {
        char small[8];
        memset(small, 'Z', sizeof(small));
        ck_assert_int_eq(pgoutput_decode(dec, (const char *)b.p, b.len, &m,
                                         small, sizeof(small)),
                         -1);
        ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
        ck_assert_int_eq(pgoutput_decode(dec, (const char *)b.p, b.len, &m,
                                         NULL, 0),
                         -1);
    }
}
END_TEST

START_TEST(test_unknown_type_byte)
{
    bb_u8(&b, 'X');
    bb_u64(&b, 0);
    DECODE_ERR("'X'");
    ck_assert_ptr_nonnull(strstr(err, "unknown message type"));

    bb_reset(&b);
    bb_u8(&b, 0);
    DECODE_ERR("0x00");

    bb_reset(&b);
    bb_u8(&b, 0xff);
    bb_raw(&b, "garbage", 7);
    DECODE_ERR("0xff");

    /* Protocol v2 streaming messages are not part of v1. */
    bb_reset(&b);
    bb_u8(&b, 'S');
    bb_u32(&b, 1234);
    bb_u8(&b, 1);
    DECODE_ERR("'S'");

    bb_reset(&b);
    DECODE_ERR("empty");
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Truncation at every length and mutation                                 */
/* ---------------------------------------------------------------------- */

/* Decodes the first n bytes of src from an exact-size heap copy. */
static int decode_copy(const unsigned char *src, size_t n)
{
    char *copy = malloc(n ? n : 1);
    int rc;

    ck_assert_ptr_nonnull(copy);
    if (n) memcpy(copy, src, n);
    err[0] = '\0';
    rc = pgoutput_decode(dec, copy, n, &m, err, sizeof(err));
    free(copy);
    return rc;
}

/* One valid message of every type, built into separate builders. */
#define NSAMPLES 13
static struct bb samples[NSAMPLES];
static const char *sample_names[NSAMPLES] = {
    "Begin",  "Commit", "Origin", "Relation", "Type",     "Insert", "Update",
    "Update", "Update", "Delete", "Delete",   "Truncate", "Message",
};

static void build_samples(void)
{
    struct bb *s = samples;

    memset(samples, 0, sizeof(samples));
    bb_u8(s, 'B'); bb_u64(s, 100); bb_u64(s, 200); bb_u32(s, 300);
    s++;
    bb_u8(s, 'C'); bb_u8(s, 0); bb_u64(s, 1); bb_u64(s, 2); bb_u64(s, 3);
    s++;
    bb_u8(s, 'O'); bb_u64(s, 9); bb_str(s, "origin");
    s++;
    relation(s, OUTBOX_RELID, "public", "outbox", 'd', 3, outbox_cols);
    s++;
    bb_u8(s, 'Y'); bb_u32(s, 5); bb_str(s, "ns"); bb_str(s, "ty");
    s++;
    change(s, 'I', OUTBOX_RELID, 'N', 3);
    bb_text(s, "1"); bb_u8(s, 'n'); bb_text(s, "{\"a\":\"\xc3\xa9\"}");
    s++;
    change(s, 'U', OUTBOX_RELID, 'N', 3);
    bb_text(s, "1"); bb_u8(s, 'u'); bb_text(s, "{}");
    s++;
    change(s, 'U', OUTBOX_RELID, 'K', 3);
    bb_text(s, "1"); bb_u8(s, 'n'); bb_u8(s, 'n');
    bb_u8(s, 'N'); bb_u16(s, 3);
    bb_text(s, "2"); bb_text(s, "t"); bb_u8(s, 'u');
    s++;
    change(s, 'U', OUTBOX_RELID, 'O', 3);
    bb_text(s, "1"); bb_text(s, "a"); bb_text(s, "b");
    bb_u8(s, 'N'); bb_u16(s, 3);
    bb_text(s, "2"); bb_text(s, "c"); bb_text(s, "d");
    s++;
    change(s, 'D', OUTBOX_RELID, 'K', 3);
    bb_text(s, "1"); bb_u8(s, 'n'); bb_u8(s, 'n');
    s++;
    change(s, 'D', OUTBOX_RELID, 'O', 3);
    bb_text(s, "1"); bb_text(s, "x"); bb_u8(s, 'b'); bb_u32(s, 2);
    bb_raw(s, "\x00\x01", 2);
    s++;
    bb_u8(s, 'T'); bb_u32(s, 2); bb_u8(s, 0); bb_u32(s, 1); bb_u32(s, 2);
    s++;
    bb_u8(s, 'M'); bb_u8(s, 1); bb_u64(s, 77); bb_str(s, "pfx");
    bb_u32(s, 3); bb_raw(s, "a\0b", 3);
    s++;
    ck_assert_int_eq((int)(s - samples), NSAMPLES);
}

static void free_samples(void)
{
    for (int i = 0; i < NSAMPLES; i++) bb_free(&samples[i]);
}

START_TEST(test_every_proper_prefix_fails)
{
    const struct relation *rel;

    build_samples();
    define_outbox();
    rel = pgoutput_relation(dec, OUTBOX_RELID);
    for (int i = 0; i < NSAMPLES; i++) {
        const struct bb *s = &samples[i];

        for (size_t n = 0; n < s->len; n++) {
            int rc = decode_copy(s->p, n);
            ck_assert_msg(rc == -1, "%s prefix %zu/%zu decoded", sample_names[i],
                          n, s->len);
            ck_assert_msg(err[0] != '\0', "%s prefix %zu: no error text",
                          sample_names[i], n);
            if (n > 0)
                ck_assert_msg(strstr(err, sample_names[i]) != NULL,
                              "%s prefix %zu: error \"%s\" lacks the type",
                              sample_names[i], n, err);
            /* A broken Relation never replaces the cached layout. */
            ck_assert_ptr_eq(pgoutput_relation(dec, OUTBOX_RELID), rel);
        }
        /* The whole message decodes (so the loop above was not vacuous). */
        ck_assert_msg(decode_copy(s->p, s->len) == 0, "%s: %s",
                      sample_names[i], err);
        if (i == 3) rel = pgoutput_relation(dec, OUTBOX_RELID);
    }
    free_samples();

    /* The captured server messages, in order (Relation before Update). */
    {
        static const struct {
            const unsigned char *p;
            size_t len;
        } cap[] = {{cap_begin, sizeof(cap_begin)},
                   {cap_relation, sizeof(cap_relation)},
                   {cap_update, sizeof(cap_update)},
                   {cap_commit, sizeof(cap_commit)}};
        for (size_t i = 0; i < 4; i++) {
            for (size_t n = 0; n < cap[i].len; n++)
                ck_assert_msg(decode_copy(cap[i].p, n) == -1,
                              "captured message %zu prefix %zu decoded", i, n);
            ck_assert_msg(decode_copy(cap[i].p, cap[i].len) == 0, "%s", err);
        }
    }
}
END_TEST

/* Deterministic xorshift so failures reproduce. */
static uint32_t rng_state = 2463534242u;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

START_TEST(test_mutations_never_crash)
{
    /* Flip, overwrite and chop bytes of valid messages; the decoder must
     * return 0 or -1 and stay within bounds (checked by valgrind/ASan).
     * Relation mutations may redefine the table, so it is re-sent. */
    unsigned char buf[256];
    int ok = 0, bad = 0;

    build_samples();
    for (int iter = 0; iter < 20000; iter++) {
        const struct bb *s = &samples[rng() % NSAMPLES];
        size_t n = s->len;
        int rc;

        if (iter % 50 == 0) define_outbox();
        ck_assert_uint_le(n, sizeof(buf));
        memcpy(buf, s->p, n);
        for (int k = 1 + (int)(rng() % 3); k > 0; k--) {
            size_t at = rng() % n;
            switch (rng() % 4) {
            case 0: buf[at] ^= (unsigned char)(1u << (rng() % 8)); break;
            case 1: buf[at] = (unsigned char)rng(); break;
            case 2: buf[at] = (rng() % 2) ? 0xff : 0x00; break;
            default: n = at + 1; break;
            }
        }
        rc = decode_copy(buf, n);
        ck_assert(rc == 0 || rc == -1);
        if (rc == 0) ok++;
        else {
            bad++;
            ck_assert(err[0] != '\0');
        }
    }
    /* Both outcomes happen, so the mutations are neither all harmless nor
     * all caught by the type byte. */
    ck_assert_int_gt(ok, 100);
    ck_assert_int_gt(bad, 100);

    /* Pure garbage after every known type byte. */
    for (int iter = 0; iter < 5000; iter++) {
        static const char types[] = "BCORYIUDTM";
        size_t n = 1 + rng() % 64;
        buf[0] = (unsigned char)types[rng() % 10];
        for (size_t i = 1; i < n; i++) buf[i] = (unsigned char)rng();
        ck_assert(decode_copy(buf, n) >= -1);
    }
    free_samples();
}
END_TEST

static Suite *pgoutput_suite(void)
{
    Suite *s = suite_create("pgoutput");
    TCase *msgs = tcase_create("messages");
    TCase *vals = tcase_create("values");
    TCase *cache = tcase_create("relation-cache");
    TCase *errs = tcase_create("errors");
    TCase *robust = tcase_create("robustness");

    tcase_add_checked_fixture(msgs, setup, teardown);
    tcase_add_test(msgs, test_begin);
    tcase_add_test(msgs, test_commit);
    tcase_add_test(msgs, test_origin);
    tcase_add_test(msgs, test_relation);
    tcase_add_test(msgs, test_relation_typmod_and_empty_nsp);
    tcase_add_test(msgs, test_type);
    tcase_add_test(msgs, test_insert);
    tcase_add_test(msgs, test_insert_empty_text_and_binary);
    tcase_add_test(msgs, test_update_with_old_key);
    tcase_add_test(msgs, test_update_with_old_full);
    tcase_add_test(msgs, test_update_new_only);
    tcase_add_test(msgs, test_delete);
    tcase_add_test(msgs, test_truncate);
    tcase_add_test(msgs, test_message);
    tcase_add_test(msgs, test_captured_server_transaction);
    suite_add_tcase(s, msgs);

    tcase_add_checked_fixture(vals, setup, teardown);
    tcase_add_test(vals, test_null_and_unchanged_toast);
    tcase_add_test(vals, test_large_value);
    tcase_add_test(vals, test_utf8_and_control_bytes);
    suite_add_tcase(s, vals);

    tcase_add_checked_fixture(cache, setup, teardown);
    tcase_add_test(cache, test_relation_redefinition);
    tcase_add_test(cache, test_bad_redefinition_keeps_old);
    tcase_add_test(cache, test_many_relations);
    tcase_add_test(cache, test_wide_table_and_scratch_reuse);
    tcase_add_test(cache, test_zero_column_relation);
    suite_add_tcase(s, cache);

    tcase_add_checked_fixture(errs, setup, teardown);
    tcase_add_test(errs, test_unknown_relid);
    tcase_add_test(errs, test_column_count_mismatch);
    tcase_add_test(errs, test_bad_markers_and_kinds);
    tcase_add_test(errs, test_negative_and_absurd_lengths);
    tcase_add_test(errs, test_unterminated_strings);
    tcase_add_test(errs, test_trailing_bytes);
    tcase_add_test(errs, test_error_names_column_and_offset);
    tcase_add_test(errs, test_unknown_type_byte);
    suite_add_tcase(s, errs);

    tcase_set_timeout(robust, 300); /* slow under valgrind */
    tcase_add_checked_fixture(robust, setup, teardown);
    tcase_add_test(robust, test_every_proper_prefix_fails);
    tcase_add_test(robust, test_mutations_never_crash);
    suite_add_tcase(s, robust);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pgoutput_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
