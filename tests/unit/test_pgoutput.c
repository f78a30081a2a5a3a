/*
 * test_pgoutput.c - unit tests for the pgoutput protocol v1 decoder
 * (src/decode/pgoutput.c). Messages are built by hand with a small byte builder so
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

/* ---------------------------------------------------------------------- */
/* Messages captured from a real server                                    */
/* ---------------------------------------------------------------------- */

/*
 * Bytes sent by our own PostgreSQL 15 server (pgoutput, proto_version 1,
 * messages on), read with pg_logical_slot_peek_binary_changes(): an
 * independent check on the hand-built messages above. The complete streams,
 * one hex line per message, and the workload that produced them are in
 * tests/data/pgoutput/ (see its README.md); the arrays below are lines of
 * outboxd_pub.hex (the publication outboxd uses: inserts only) and of
 * all_ops.hex (the same table published for update, delete and truncate).
 */
/* clang-format off */
/* Begin */
static const unsigned char cap_begin[] = {
    0x42, 0x00, 0x00, 0x00, 0x00, 0x01, 0x52, 0xa2, 0x20, 0x00, 0x03, 0x04,
    0x72, 0xab, 0x3d, 0xcd, 0xe9, 0x00, 0x00, 0x02, 0xd6};
/* Relation public.outbox_events, 7 columns */
static const unsigned char cap_relation[] = {
    0x52, 0x00, 0x00, 0x40, 0x00, 0x70, 0x75, 0x62, 0x6c, 0x69, 0x63, 0x00,
    0x6f, 0x75, 0x74, 0x62, 0x6f, 0x78, 0x5f, 0x65, 0x76, 0x65, 0x6e, 0x74,
    0x73, 0x00, 0x64, 0x00, 0x07, 0x01, 0x65, 0x76, 0x65, 0x6e, 0x74, 0x5f,
    0x69, 0x64, 0x00, 0x00, 0x00, 0x0b, 0x86, 0xff, 0xff, 0xff, 0xff, 0x00,
    0x61, 0x67, 0x67, 0x72, 0x65, 0x67, 0x61, 0x74, 0x65, 0x5f, 0x74, 0x79,
    0x70, 0x65, 0x00, 0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff, 0x00,
    0x61, 0x67, 0x67, 0x72, 0x65, 0x67, 0x61, 0x74, 0x65, 0x5f, 0x69, 0x64,
    0x00, 0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff, 0x00, 0x61, 0x67,
    0x67, 0x72, 0x65, 0x67, 0x61, 0x74, 0x65, 0x5f, 0x76, 0x65, 0x72, 0x73,
    0x69, 0x6f, 0x6e, 0x00, 0x00, 0x00, 0x00, 0x14, 0xff, 0xff, 0xff, 0xff,
    0x00, 0x65, 0x76, 0x65, 0x6e, 0x74, 0x5f, 0x74, 0x79, 0x70, 0x65, 0x00,
    0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff, 0x00, 0x70, 0x61, 0x79,
    0x6c, 0x6f, 0x61, 0x64, 0x00, 0x00, 0x00, 0x0e, 0xda, 0xff, 0xff, 0xff,
    0xff, 0x00, 0x63, 0x72, 0x65, 0x61, 0x74, 0x65, 0x64, 0x5f, 0x61, 0x74,
    0x00, 0x00, 0x00, 0x04, 0xa0, 0xff, 0xff, 0xff, 0xff};
/* Insert, every column set */
static const unsigned char cap_insert1[] = {
    0x49, 0x00, 0x00, 0x40, 0x00, 0x4e, 0x00, 0x07, 0x74, 0x00, 0x00, 0x00,
    0x24, 0x38, 0x66, 0x31, 0x34, 0x65, 0x34, 0x35, 0x66, 0x2d, 0x63, 0x65,
    0x65, 0x61, 0x2d, 0x34, 0x36, 0x37, 0x66, 0x2d, 0x61, 0x39, 0x64, 0x35,
    0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
    0x31, 0x74, 0x00, 0x00, 0x00, 0x05, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x74,
    0x00, 0x00, 0x00, 0x06, 0x41, 0x2d, 0x31, 0x30, 0x30, 0x31, 0x74, 0x00,
    0x00, 0x00, 0x01, 0x31, 0x74, 0x00, 0x00, 0x00, 0x0d, 0x6f, 0x72, 0x64,
    0x65, 0x72, 0x2e, 0x63, 0x72, 0x65, 0x61, 0x74, 0x65, 0x64, 0x74, 0x00,
    0x00, 0x00, 0x24, 0x7b, 0x22, 0x74, 0x6f, 0x74, 0x61, 0x6c, 0x22, 0x3a,
    0x20, 0x22, 0x31, 0x39, 0x2e, 0x39, 0x30, 0x22, 0x2c, 0x20, 0x22, 0x6f,
    0x72, 0x64, 0x65, 0x72, 0x5f, 0x69, 0x64, 0x22, 0x3a, 0x20, 0x31, 0x30,
    0x30, 0x31, 0x7d, 0x74, 0x00, 0x00, 0x00, 0x1d, 0x32, 0x30, 0x32, 0x34,
    0x2d, 0x30, 0x35, 0x2d, 0x30, 0x31, 0x20, 0x31, 0x32, 0x3a, 0x30, 0x30,
    0x3a, 0x30, 0x30, 0x2e, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x2b, 0x30,
    0x30};
/* Insert, aggregate_version and payload NULL */
static const unsigned char cap_insert2[] = {
    0x49, 0x00, 0x00, 0x40, 0x00, 0x4e, 0x00, 0x07, 0x74, 0x00, 0x00, 0x00,
    0x24, 0x38, 0x66, 0x31, 0x34, 0x65, 0x34, 0x35, 0x66, 0x2d, 0x63, 0x65,
    0x65, 0x61, 0x2d, 0x34, 0x36, 0x37, 0x66, 0x2d, 0x61, 0x39, 0x64, 0x35,
    0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
    0x32, 0x74, 0x00, 0x00, 0x00, 0x05, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x74,
    0x00, 0x00, 0x00, 0x06, 0x41, 0x2d, 0x31, 0x30, 0x30, 0x31, 0x6e, 0x74,
    0x00, 0x00, 0x00, 0x0b, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x2e, 0x6e, 0x6f,
    0x74, 0x65, 0x64, 0x6e, 0x74, 0x00, 0x00, 0x00, 0x16, 0x32, 0x30, 0x32,
    0x34, 0x2d, 0x30, 0x35, 0x2d, 0x30, 0x31, 0x20, 0x31, 0x32, 0x3a, 0x30,
    0x30, 0x3a, 0x30, 0x31, 0x2b, 0x30, 0x30};
/* Insert, non-ASCII text and JSON escapes */
static const unsigned char cap_insert3[] = {
    0x49, 0x00, 0x00, 0x40, 0x00, 0x4e, 0x00, 0x07, 0x74, 0x00, 0x00, 0x00,
    0x24, 0x38, 0x66, 0x31, 0x34, 0x65, 0x34, 0x35, 0x66, 0x2d, 0x63, 0x65,
    0x65, 0x61, 0x2d, 0x34, 0x36, 0x37, 0x66, 0x2d, 0x61, 0x39, 0x64, 0x35,
    0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
    0x33, 0x74, 0x00, 0x00, 0x00, 0x05, 0x63, 0x61, 0x66, 0xc3, 0xa9, 0x74,
    0x00, 0x00, 0x00, 0x0e, 0x5a, 0xc3, 0xbc, 0x72, 0x69, 0x63, 0x68, 0x2d,
    0xe6, 0x9d, 0xb1, 0xe4, 0xba, 0xac, 0x74, 0x00, 0x00, 0x00, 0x01, 0x33,
    0x74, 0x00, 0x00, 0x00, 0x0c, 0x63, 0x69, 0x74, 0x79, 0x2e, 0x72, 0x65,
    0x6e, 0x61, 0x6d, 0x65, 0x64, 0x74, 0x00, 0x00, 0x00, 0x2f, 0x7b, 0x22,
    0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x5a, 0xc3, 0xbc, 0x72,
    0x69, 0x63, 0x68, 0x20, 0xf0, 0x9f, 0x9a, 0x80, 0x22, 0x2c, 0x20, 0x22,
    0x71, 0x75, 0x6f, 0x74, 0x65, 0x22, 0x3a, 0x20, 0x22, 0x61, 0x5c, 0x22,
    0x62, 0x5c, 0x5c, 0x63, 0x5c, 0x6e, 0x64, 0x22, 0x7d, 0x74, 0x00, 0x00,
    0x00, 0x16, 0x32, 0x30, 0x32, 0x34, 0x2d, 0x30, 0x35, 0x2d, 0x30, 0x31,
    0x20, 0x31, 0x32, 0x3a, 0x30, 0x30, 0x3a, 0x30, 0x32, 0x2b, 0x30, 0x30};
/* Message from pg_logical_emit_message(true, ...) */
static const unsigned char cap_message[] = {
    0x4d, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x52, 0xa2, 0x20, 0x6f, 0x75,
    0x74, 0x62, 0x6f, 0x78, 0x64, 0x2e, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00,
    0x00, 0x00, 0x15, 0x74, 0x72, 0x61, 0x6e, 0x73, 0x61, 0x63, 0x74, 0x69,
    0x6f, 0x6e, 0x61, 0x6c, 0x20, 0x6d, 0x65, 0x73, 0x73, 0x61, 0x67, 0x65};
/* Commit */
static const unsigned char cap_commit[] = {
    0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x52, 0xa2, 0x20, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x52, 0xa2, 0x50, 0x00, 0x03, 0x04, 0x72, 0xab, 0x3d,
    0xcd, 0xe9};
/* Message from pg_logical_emit_message(false, ...) */
static const unsigned char cap_message_nontx[] = {
    0x4d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x54, 0x50, 0x20, 0x6f, 0x75,
    0x74, 0x62, 0x6f, 0x78, 0x64, 0x2e, 0x6e, 0x6f, 0x6e, 0x74, 0x78, 0x00,
    0x00, 0x00, 0x00, 0x14, 0x6e, 0x6f, 0x74, 0x20, 0x69, 0x6e, 0x20, 0x61,
    0x20, 0x74, 0x72, 0x61, 0x6e, 0x73, 0x61, 0x63, 0x74, 0x69, 0x6f, 0x6e};
/* Begin */
static const unsigned char cap_begin2[] = {
    0x42, 0x00, 0x00, 0x00, 0x00, 0x01, 0x54, 0x66, 0x30, 0x00, 0x03, 0x04,
    0x72, 0xab, 0x3d, 0xf3, 0x58, 0x00, 0x00, 0x02, 0xda};
/* Type public.outbox_priority (an enum) */
static const unsigned char cap_type[] = {
    0x59, 0x00, 0x00, 0x40, 0x0c, 0x70, 0x75, 0x62, 0x6c, 0x69, 0x63, 0x00,
    0x6f, 0x75, 0x74, 0x62, 0x6f, 0x78, 0x5f, 0x70, 0x72, 0x69, 0x6f, 0x72,
    0x69, 0x74, 0x79, 0x00};
/* Relation after ADD COLUMN priority, trace_id */
static const unsigned char cap_relation2[] = {
    0x52, 0x00, 0x00, 0x40, 0x00, 0x70, 0x75, 0x62, 0x6c, 0x69, 0x63, 0x00,
    0x6f, 0x75, 0x74, 0x62, 0x6f, 0x78, 0x5f, 0x65, 0x76, 0x65, 0x6e, 0x74,
    0x73, 0x00, 0x64, 0x00, 0x09, 0x01, 0x65, 0x76, 0x65, 0x6e, 0x74, 0x5f,
    0x69, 0x64, 0x00, 0x00, 0x00, 0x0b, 0x86, 0xff, 0xff, 0xff, 0xff, 0x00,
    0x61, 0x67, 0x67, 0x72, 0x65, 0x67, 0x61, 0x74, 0x65, 0x5f, 0x74, 0x79,
    0x70, 0x65, 0x00, 0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff, 0x00,
    0x61, 0x67, 0x67, 0x72, 0x65, 0x67, 0x61, 0x74, 0x65, 0x5f, 0x69, 0x64,
    0x00, 0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff, 0x00, 0x61, 0x67,
    0x67, 0x72, 0x65, 0x67, 0x61, 0x74, 0x65, 0x5f, 0x76, 0x65, 0x72, 0x73,
    0x69, 0x6f, 0x6e, 0x00, 0x00, 0x00, 0x00, 0x14, 0xff, 0xff, 0xff, 0xff,
    0x00, 0x65, 0x76, 0x65, 0x6e, 0x74, 0x5f, 0x74, 0x79, 0x70, 0x65, 0x00,
    0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff, 0x00, 0x70, 0x61, 0x79,
    0x6c, 0x6f, 0x61, 0x64, 0x00, 0x00, 0x00, 0x0e, 0xda, 0xff, 0xff, 0xff,
    0xff, 0x00, 0x63, 0x72, 0x65, 0x61, 0x74, 0x65, 0x64, 0x5f, 0x61, 0x74,
    0x00, 0x00, 0x00, 0x04, 0xa0, 0xff, 0xff, 0xff, 0xff, 0x00, 0x70, 0x72,
    0x69, 0x6f, 0x72, 0x69, 0x74, 0x79, 0x00, 0x00, 0x00, 0x40, 0x0c, 0xff,
    0xff, 0xff, 0xff, 0x00, 0x74, 0x72, 0x61, 0x63, 0x65, 0x5f, 0x69, 0x64,
    0x00, 0x00, 0x00, 0x04, 0x13, 0x00, 0x00, 0x00, 0x44};
/* Insert, 9 columns */
static const unsigned char cap_insert4[] = {
    0x49, 0x00, 0x00, 0x40, 0x00, 0x4e, 0x00, 0x09, 0x74, 0x00, 0x00, 0x00,
    0x24, 0x38, 0x66, 0x31, 0x34, 0x65, 0x34, 0x35, 0x66, 0x2d, 0x63, 0x65,
    0x65, 0x61, 0x2d, 0x34, 0x36, 0x37, 0x66, 0x2d, 0x61, 0x39, 0x64, 0x35,
    0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
    0x35, 0x74, 0x00, 0x00, 0x00, 0x05, 0x6f, 0x72, 0x64, 0x65, 0x72, 0x74,
    0x00, 0x00, 0x00, 0x06, 0x41, 0x2d, 0x31, 0x30, 0x30, 0x32, 0x74, 0x00,
    0x00, 0x00, 0x01, 0x32, 0x74, 0x00, 0x00, 0x00, 0x0d, 0x6f, 0x72, 0x64,
    0x65, 0x72, 0x2e, 0x73, 0x68, 0x69, 0x70, 0x70, 0x65, 0x64, 0x74, 0x00,
    0x00, 0x00, 0x12, 0x7b, 0x22, 0x63, 0x61, 0x72, 0x72, 0x69, 0x65, 0x72,
    0x22, 0x3a, 0x20, 0x22, 0x64, 0x68, 0x6c, 0x22, 0x7d, 0x74, 0x00, 0x00,
    0x00, 0x16, 0x32, 0x30, 0x32, 0x34, 0x2d, 0x30, 0x35, 0x2d, 0x30, 0x31,
    0x20, 0x31, 0x32, 0x3a, 0x30, 0x30, 0x3a, 0x30, 0x34, 0x2b, 0x30, 0x30,
    0x74, 0x00, 0x00, 0x00, 0x04, 0x68, 0x69, 0x67, 0x68, 0x74, 0x00, 0x00,
    0x00, 0x0a, 0x74, 0x72, 0x61, 0x63, 0x65, 0x2d, 0x30, 0x30, 0x30, 0x35};
/* Commit */
static const unsigned char cap_commit2[] = {
    0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x54, 0x66, 0x30, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x54, 0x66, 0x60, 0x00, 0x03, 0x04, 0x72, 0xab, 0x3d,
    0xf3, 0x58};
/* Update leaving the TOASTed payload alone ('u') */
static const unsigned char cap_update[] = {
    0x55, 0x00, 0x00, 0x40, 0x00, 0x4e, 0x00, 0x09, 0x74, 0x00, 0x00, 0x00,
    0x24, 0x38, 0x66, 0x31, 0x34, 0x65, 0x34, 0x35, 0x66, 0x2d, 0x63, 0x65,
    0x65, 0x61, 0x2d, 0x34, 0x36, 0x37, 0x66, 0x2d, 0x61, 0x39, 0x64, 0x35,
    0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
    0x34, 0x74, 0x00, 0x00, 0x00, 0x04, 0x62, 0x6c, 0x6f, 0x62, 0x74, 0x00,
    0x00, 0x00, 0x03, 0x42, 0x2d, 0x31, 0x74, 0x00, 0x00, 0x00, 0x01, 0x31,
    0x74, 0x00, 0x00, 0x00, 0x0c, 0x62, 0x6c, 0x6f, 0x62, 0x2e, 0x74, 0x6f,
    0x75, 0x63, 0x68, 0x65, 0x64, 0x75, 0x74, 0x00, 0x00, 0x00, 0x16, 0x32,
    0x30, 0x32, 0x34, 0x2d, 0x30, 0x35, 0x2d, 0x30, 0x31, 0x20, 0x31, 0x32,
    0x3a, 0x30, 0x30, 0x3a, 0x30, 0x33, 0x2b, 0x30, 0x30, 0x6e, 0x6e};
/* Delete, replica identity key only ('K') */
static const unsigned char cap_delete[] = {
    0x44, 0x00, 0x00, 0x40, 0x00, 0x4b, 0x00, 0x09, 0x74, 0x00, 0x00, 0x00,
    0x24, 0x38, 0x66, 0x31, 0x34, 0x65, 0x34, 0x35, 0x66, 0x2d, 0x63, 0x65,
    0x65, 0x61, 0x2d, 0x34, 0x36, 0x37, 0x66, 0x2d, 0x61, 0x39, 0x64, 0x35,
    0x2d, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30, 0x30,
    0x32, 0x6e, 0x6e, 0x6e, 0x6e, 0x6e, 0x6e, 0x6e, 0x6e};
/* Truncate */
static const unsigned char cap_truncate[] = {
    0x54, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x40, 0x00};
/* clang-format on */

#define CAP_RELID 16384u        /* public.outbox_events */
#define CAP_PRIORITY_OID 16396u /* public.outbox_priority */

static const char *const cap_names[] = {
    "event_id", "aggregate_type", "aggregate_id", "aggregate_version", "event_type",
    "payload",  "created_at",     "priority",     "trace_id"};
/* uuid, text, text, int8, text, jsonb, timestamptz, enum, varchar(64) */
static const uint32_t cap_types[] = {2950, 25, 25, 20, 25, 3802, 1184, CAP_PRIORITY_OID,
                                     1043};

/* Checks the cached public.outbox_events layout: the first ncols columns
 * of cap_names/cap_types, event_id the only key column. */
static void check_cap_relation(const struct relation *r, int ncols)
{
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_eq(r, pgoutput_relation(dec, CAP_RELID));
    ck_assert_uint_eq(r->relid, CAP_RELID);
    ck_assert_str_eq(r->nspname, "public");
    ck_assert_str_eq(r->relname, "outbox_events");
    ck_assert_int_eq(r->replident, 'd');
    ck_assert_int_eq(r->ncols, ncols);
    for (int i = 0; i < ncols; i++) {
        ck_assert_str_eq(r->cols[i].name, cap_names[i]);
        ck_assert_uint_eq(r->cols[i].typid, cap_types[i]);
        /* varchar(64) carries typmod 64 + 4; the others have none. */
        ck_assert_int_eq(r->cols[i].typmod, i == 8 ? 68 : -1);
        ck_assert_uint_eq(r->cols[i].flags, i == 0 ? 1 : 0);
    }
}

#define CHECK_TEXT(i, s) check_value(&m.u.tuple.values[i], CV_TEXT, s, sizeof(s) - 1)

START_TEST(test_captured_server_transaction)
{
    const struct relation *r;

    /* BEGIN; three INSERTs; pg_logical_emit_message(true, ...); COMMIT */
    ck_assert_int_eq(decode_bytes(cap_begin, sizeof(cap_begin)), 0);
    ck_assert_int_eq(m.kind, RM_BEGIN);
    ck_assert_uint_eq(m.u.begin.final_lsn, UINT64_C(0x152A220));
    ck_assert_int_eq(m.u.begin.commit_time, INT64_C(849315475869161));
    ck_assert_uint_eq(m.u.begin.xid, 726);

    ck_assert_int_eq(decode_bytes(cap_relation, sizeof(cap_relation)), 0);
    ck_assert_int_eq(m.kind, RM_RELATION);
    r = m.u.relation.rel;
    check_cap_relation(r, 7);

    ck_assert_int_eq(decode_bytes(cap_insert1, sizeof(cap_insert1)), 0);
    ck_assert_int_eq(m.kind, RM_INSERT);
    ck_assert_ptr_eq(m.u.tuple.rel, r);
    ck_assert_int_eq(m.u.tuple.nvalues, 7);
    CHECK_TEXT(0, "8f14e45f-ceea-467f-a9d5-000000000001");
    CHECK_TEXT(1, "order");
    CHECK_TEXT(2, "A-1001");
    CHECK_TEXT(3, "1");
    CHECK_TEXT(4, "order.created");
    /* jsonb output: keys reordered, one space after ':' and ','. */
    CHECK_TEXT(5, "{\"total\": \"19.90\", \"order_id\": 1001}");
    CHECK_TEXT(6, "2024-05-01 12:00:00.123456+00");

    ck_assert_int_eq(decode_bytes(cap_insert2, sizeof(cap_insert2)), 0);
    ck_assert_int_eq(m.kind, RM_INSERT);
    ck_assert_int_eq(m.u.tuple.nvalues, 7);
    CHECK_TEXT(0, "8f14e45f-ceea-467f-a9d5-000000000002");
    CHECK_TEXT(2, "A-1001");
    ck_assert_int_eq(m.u.tuple.values[3].kind, CV_NULL);
    ck_assert_ptr_null(m.u.tuple.values[3].data);
    CHECK_TEXT(4, "order.noted");
    ck_assert_int_eq(m.u.tuple.values[5].kind, CV_NULL);
    ck_assert_ptr_null(m.u.tuple.values[5].data);
    CHECK_TEXT(6, "2024-05-01 12:00:01+00");

    ck_assert_int_eq(decode_bytes(cap_insert3, sizeof(cap_insert3)), 0);
    ck_assert_int_eq(m.kind, RM_INSERT);
    ck_assert_int_eq(m.u.tuple.nvalues, 7);
    CHECK_TEXT(0, "8f14e45f-ceea-467f-a9d5-000000000003");
    CHECK_TEXT(1, "caf\xc3\xa9");
    CHECK_TEXT(2, "Z\xc3\xbcrich-\xe6\x9d\xb1\xe4\xba\xac");
    CHECK_TEXT(3, "3");
    CHECK_TEXT(4, "city.renamed");
    CHECK_TEXT(5, "{\"name\": \"Z\xc3\xbcrich \xf0\x9f\x9a\x80\", "
                  "\"quote\": \"a\\\"b\\\\c\\nd\"}");
    CHECK_TEXT(6, "2024-05-01 12:00:02+00");

    ck_assert_int_eq(decode_bytes(cap_message, sizeof(cap_message)), 0);
    ck_assert_int_eq(m.kind, RM_MESSAGE);
    ck_assert_uint_eq(m.u.message.flags, 1);
    ck_assert_uint_eq(m.u.message.lsn, UINT64_C(0x152A220));
    ck_assert_str_eq(m.u.message.prefix, "outboxd.test");
    ck_assert_uint_eq(m.u.message.len, 21);
    ck_assert_mem_eq(m.u.message.content, "transactional message", 21);

    ck_assert_int_eq(decode_bytes(cap_commit, sizeof(cap_commit)), 0);
    ck_assert_int_eq(m.kind, RM_COMMIT);
    ck_assert_uint_eq(m.u.commit.flags, 0);
    /* Commit names the same commit record as Begin's final_lsn. */
    ck_assert_uint_eq(m.u.commit.commit_lsn, UINT64_C(0x152A220));
    ck_assert_uint_eq(m.u.commit.end_lsn, UINT64_C(0x152A250));
    ck_assert_int_eq(m.u.commit.commit_time, INT64_C(849315475869161));
}
END_TEST

START_TEST(test_captured_layout_change)
{
    const struct relation *r;

    ck_assert_int_eq(decode_bytes(cap_relation, sizeof(cap_relation)), 0);
    ck_assert_int_eq(decode_bytes(cap_insert1, sizeof(cap_insert1)), 0);

    /* Between transactions: pg_logical_emit_message(false, ...). */
    ck_assert_int_eq(decode_bytes(cap_message_nontx, sizeof(cap_message_nontx)), 0);
    ck_assert_int_eq(m.kind, RM_MESSAGE);
    ck_assert_uint_eq(m.u.message.flags, 0);
    ck_assert_uint_eq(m.u.message.lsn, UINT64_C(0x1545020));
    ck_assert_str_eq(m.u.message.prefix, "outboxd.nontx");
    ck_assert_uint_eq(m.u.message.len, 20);
    ck_assert_mem_eq(m.u.message.content, "not in a transaction", 20);

    /* CREATE TYPE outbox_priority AS ENUM (...); ALTER TABLE outbox_events
     * ADD COLUMN priority outbox_priority, ADD COLUMN trace_id varchar(64);
     * then an INSERT: the user-defined type comes first as a Type message,
     * then the new layout as a Relation message. */
    ck_assert_int_eq(decode_bytes(cap_begin2, sizeof(cap_begin2)), 0);
    ck_assert_int_eq(m.kind, RM_BEGIN);
    ck_assert_uint_eq(m.u.begin.final_lsn, UINT64_C(0x1546630));
    ck_assert_int_eq(m.u.begin.commit_time, INT64_C(849315475878744));
    ck_assert_uint_eq(m.u.begin.xid, 730);

    ck_assert_int_eq(decode_bytes(cap_type, sizeof(cap_type)), 0);
    ck_assert_int_eq(m.kind, RM_TYPE);
    ck_assert_uint_eq(m.u.type.oid, CAP_PRIORITY_OID);
    ck_assert_str_eq(m.u.type.nspname, "public");
    ck_assert_str_eq(m.u.type.name, "outbox_priority");

    ck_assert_int_eq(decode_bytes(cap_relation2, sizeof(cap_relation2)), 0);
    ck_assert_int_eq(m.kind, RM_RELATION);
    r = m.u.relation.rel;
    check_cap_relation(r, 9);

    ck_assert_int_eq(decode_bytes(cap_insert4, sizeof(cap_insert4)), 0);
    ck_assert_int_eq(m.kind, RM_INSERT);
    ck_assert_ptr_eq(m.u.tuple.rel, r);
    ck_assert_int_eq(m.u.tuple.nvalues, 9);
    CHECK_TEXT(0, "8f14e45f-ceea-467f-a9d5-000000000005");
    CHECK_TEXT(1, "order");
    CHECK_TEXT(2, "A-1002");
    CHECK_TEXT(3, "2");
    CHECK_TEXT(4, "order.shipped");
    CHECK_TEXT(5, "{\"carrier\": \"dhl\"}");
    CHECK_TEXT(6, "2024-05-01 12:00:04+00");
    CHECK_TEXT(7, "high");
    CHECK_TEXT(8, "trace-0005");

    ck_assert_int_eq(decode_bytes(cap_commit2, sizeof(cap_commit2)), 0);
    ck_assert_int_eq(m.kind, RM_COMMIT);
    ck_assert_uint_eq(m.u.commit.flags, 0);
    ck_assert_uint_eq(m.u.commit.commit_lsn, UINT64_C(0x1546630));
    ck_assert_uint_eq(m.u.commit.end_lsn, UINT64_C(0x1546660));
    ck_assert_int_eq(m.u.commit.commit_time, INT64_C(849315475878744));

    /* The 7-column layout is gone. */
    ck_assert_int_eq(decode_bytes(cap_insert1, sizeof(cap_insert1)), -1);
    ck_assert_ptr_nonnull(strstr(err, "layout mismatch"));
}
END_TEST

START_TEST(test_captured_update_delete_truncate)
{
    const struct relation *r;

    ck_assert_int_eq(decode_bytes(cap_relation2, sizeof(cap_relation2)), 0);
    r = m.u.relation.rel;

    /* UPDATE ... SET event_type: no old tuple (the key did not change), and
     * the out-of-line payload is not resent. */
    ck_assert_int_eq(decode_bytes(cap_update, sizeof(cap_update)), 0);
    ck_assert_int_eq(m.kind, RM_UPDATE);
    ck_assert_ptr_eq(m.u.tuple.rel, r);
    ck_assert_int_eq(m.u.tuple.nvalues, 9);
    CHECK_TEXT(0, "8f14e45f-ceea-467f-a9d5-000000000004");
    CHECK_TEXT(1, "blob");
    CHECK_TEXT(2, "B-1");
    CHECK_TEXT(3, "1");
    CHECK_TEXT(4, "blob.touched");
    ck_assert_int_eq(m.u.tuple.values[5].kind, CV_UNCHANGED);
    ck_assert_uint_eq(m.u.tuple.values[5].len, 0);
    ck_assert_ptr_null(m.u.tuple.values[5].data);
    CHECK_TEXT(6, "2024-05-01 12:00:03+00");
    ck_assert_int_eq(m.u.tuple.values[7].kind, CV_NULL);
    ck_assert_int_eq(m.u.tuple.values[8].kind, CV_NULL);

    /* DELETE: the replica identity key, every other column NULL. */
    ck_assert_int_eq(decode_bytes(cap_delete, sizeof(cap_delete)), 0);
    ck_assert_int_eq(m.kind, RM_DELETE);
    ck_assert_ptr_eq(m.u.tuple.rel, r);
    ck_assert_int_eq(m.u.tuple.nvalues, 9);
    CHECK_TEXT(0, "8f14e45f-ceea-467f-a9d5-000000000002");
    for (int i = 1; i < 9; i++)
        ck_assert_int_eq(m.u.tuple.values[i].kind, CV_NULL);

    ck_assert_int_eq(decode_bytes(cap_truncate, sizeof(cap_truncate)), 0);
    ck_assert_int_eq(m.kind, RM_TRUNCATE);
    ck_assert_int_eq(m.u.truncate.nrelids, 1);
    ck_assert_uint_eq(m.u.truncate.options, 0);
}
END_TEST

/* The path of tests/data/pgoutput/<name>, found from this source file's. */
static void capture_path(char *out, size_t outlen, const char *name)
{
    const char *slash = strrchr(__FILE__, '/');

    if (slash)
        snprintf(out, outlen, "%.*s/../data/pgoutput/%s", (int)(slash - __FILE__), __FILE__,
                 name);
    else
        snprintf(out, outlen, "../data/pgoutput/%s", name);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/*
 * Decodes every message of tests/data/pgoutput/<name> in order, each from a
 * heap block of its exact length, and checks the transaction framing:
 * Begin/Commit pair up with Begin's final_lsn == Commit's commit_lsn,
 * changes only inside a transaction, a Message is transactional exactly
 * when inside one. counts[kind] is incremented per message; check(i) runs
 * with message i (0-based) decoded in m. Returns the number of messages.
 */
static int decode_capture_file(const char *name, int counts[RM_MESSAGE + 1],
                               void (*check)(int))
{
    char path[4096];
    char chunk[8192];
    struct bb file = {0};
    FILE *f;
    size_t n, pos = 0;
    int nmsgs = 0, in_tx = 0;
    uint32_t last_xid = 0;
    lsn_t final_lsn = 0, last_end = 0;
    int64_t begin_time = 0;

    capture_path(path, sizeof(path), name);
    f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        bb_raw(&file, chunk, n);
    ck_assert(!ferror(f));
    fclose(f);

    while (pos < file.len) {
        size_t eol = pos, len;
        unsigned char *msg;
        int rc;

        while (eol < file.len && file.p[eol] != '\n')
            eol++;
        len = (eol - pos) / 2;
        ck_assert_msg((eol - pos) % 2 == 0 && len > 0, "%s line %d: odd or empty hex", name,
                      nmsgs + 1);
        msg = malloc(len);
        ck_assert_ptr_nonnull(msg);
        for (size_t i = 0; i < len; i++) {
            int hi = hexval(file.p[pos + 2 * i]);
            int lo = hexval(file.p[pos + 2 * i + 1]);
            ck_assert_msg(hi >= 0 && lo >= 0, "%s line %d: bad hex", name, nmsgs + 1);
            msg[i] = (unsigned char)(hi << 4 | lo);
        }
        pos = eol + 1;

        rc = decode_bytes(msg, len);
        ck_assert_msg(rc == 0, "%s line %d: %s", name, nmsgs + 1, err);
        counts[m.kind]++;
        switch (m.kind) {
        case RM_BEGIN:
            ck_assert_msg(!in_tx, "%s line %d: nested Begin", name, nmsgs + 1);
            ck_assert_uint_gt(m.u.begin.xid, last_xid);
            ck_assert_uint_ge(m.u.begin.final_lsn, last_end);
            last_xid = m.u.begin.xid;
            final_lsn = m.u.begin.final_lsn;
            begin_time = m.u.begin.commit_time;
            in_tx = 1;
            break;
        case RM_COMMIT:
            ck_assert_msg(in_tx, "%s line %d: Commit without Begin", name, nmsgs + 1);
            ck_assert_uint_eq(m.u.commit.commit_lsn, final_lsn);
            ck_assert_uint_gt(m.u.commit.end_lsn, m.u.commit.commit_lsn);
            ck_assert_int_eq(m.u.commit.commit_time, begin_time);
            last_end = m.u.commit.end_lsn;
            in_tx = 0;
            break;
        case RM_MESSAGE:
            ck_assert_uint_eq(m.u.message.flags, in_tx ? 1 : 0);
            break;
        default:
            ck_assert_msg(in_tx, "%s line %d: change outside a transaction", name,
                          nmsgs + 1);
            break;
        }
        if (check) check(nmsgs);
        free(msg);
        nmsgs++;
    }
    ck_assert_msg(!in_tx, "%s ends inside a transaction", name);
    bb_free(&file);
    return nmsgs;
}

/* outboxd_pub.hex: the ~100 KB jsonb payload, TOASTed on the server, comes
 * inline in the Insert: '{"blob": "' + md5('1') || ... || md5('3200') + '"}'. */
static void check_outboxd_pub(int i)
{
    static const char head[] = "{\"blob\": \"c4ca4238a0b923820dcc509a6f75849b";
    const struct col_value *v;

    if (i != 8) return;
    ck_assert_int_eq(m.kind, RM_INSERT);
    ck_assert_int_eq(m.u.tuple.nvalues, 7);
    CHECK_TEXT(0, "8f14e45f-ceea-467f-a9d5-000000000004");
    CHECK_TEXT(4, "blob.stored");
    v = &m.u.tuple.values[5];
    ck_assert_int_eq(v->kind, CV_TEXT);
    ck_assert_uint_eq(v->len, 10 + 3200 * 32 + 2);
    ck_assert_mem_eq(v->data, head, sizeof(head) - 1);
    ck_assert_mem_eq(v->data + v->len - 2, "\"}", 2);
}

/* all_ops.hex: after REPLICA IDENTITY FULL, every column is in the key and
 * an UPDATE carries the old row ('O') before the new one. */
static void check_all_ops(int i)
{
    const struct relation *r;

    if (i == 10) {
        ck_assert_int_eq(m.kind, RM_RELATION);
        r = m.u.relation.rel;
        ck_assert_int_eq(r->replident, 'f');
        ck_assert_int_eq(r->ncols, 9);
        for (int k = 0; k < 9; k++) {
            ck_assert_str_eq(r->cols[k].name, cap_names[k]);
            ck_assert_uint_eq(r->cols[k].flags, 1);
        }
    } else if (i == 11) {
        ck_assert_int_eq(m.kind, RM_UPDATE);
        ck_assert_int_eq(m.u.tuple.nvalues, 9);
        CHECK_TEXT(0, "8f14e45f-ceea-467f-a9d5-000000000001");
        CHECK_TEXT(3, "2");
        CHECK_TEXT(5, "{\"total\": \"19.90\", \"order_id\": 1001}");
        ck_assert_int_eq(m.u.tuple.values[8].kind, CV_NULL);
    }
}

START_TEST(test_captured_streams)
{
    int counts[RM_MESSAGE + 1] = {0};

    /* What outboxd sees: three transactions of inserts, two messages. */
    ck_assert_int_eq(decode_capture_file("outboxd_pub.hex", counts, check_outboxd_pub), 16);
    ck_assert_int_eq(counts[RM_BEGIN], 3);
    ck_assert_int_eq(counts[RM_COMMIT], 3);
    ck_assert_int_eq(counts[RM_RELATION], 2);
    ck_assert_int_eq(counts[RM_TYPE], 1);
    ck_assert_int_eq(counts[RM_INSERT], 5);
    ck_assert_int_eq(counts[RM_MESSAGE], 2);

    /* Into a fresh decoder: UPDATE, DELETE, UPDATE, TRUNCATE, each in its
     * own transaction; Type and Relation come again after each relcache
     * invalidation (REPLICA IDENTITY FULL, TRUNCATE). */
    pgoutput_decoder_free(dec);
    dec = pgoutput_decoder_new();
    ck_assert_ptr_nonnull(dec);
    memset(counts, 0, sizeof(counts));
    ck_assert_int_eq(decode_capture_file("all_ops.hex", counts, check_all_ops), 18);
    ck_assert_int_eq(counts[RM_BEGIN], 4);
    ck_assert_int_eq(counts[RM_COMMIT], 4);
    ck_assert_int_eq(counts[RM_TYPE], 3);
    ck_assert_int_eq(counts[RM_RELATION], 3);
    ck_assert_int_eq(counts[RM_UPDATE], 2);
    ck_assert_int_eq(counts[RM_DELETE], 1);
    ck_assert_int_eq(counts[RM_TRUNCATE], 1);
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

    /* The captured server messages, in stream order (each Relation before
     * the changes that use it). */
    {
        static const struct {
            const unsigned char *p;
            size_t len;
        } cap[] = {
            {cap_begin, sizeof(cap_begin)},
            {cap_relation, sizeof(cap_relation)},
            {cap_insert1, sizeof(cap_insert1)},
            {cap_insert2, sizeof(cap_insert2)},
            {cap_insert3, sizeof(cap_insert3)},
            {cap_message, sizeof(cap_message)},
            {cap_commit, sizeof(cap_commit)},
            {cap_message_nontx, sizeof(cap_message_nontx)},
            {cap_begin2, sizeof(cap_begin2)},
            {cap_type, sizeof(cap_type)},
            {cap_relation2, sizeof(cap_relation2)},
            {cap_insert4, sizeof(cap_insert4)},
            {cap_commit2, sizeof(cap_commit2)},
            {cap_update, sizeof(cap_update)},
            {cap_delete, sizeof(cap_delete)},
            {cap_truncate, sizeof(cap_truncate)},
        };
        for (size_t i = 0; i < sizeof(cap) / sizeof(cap[0]); i++) {
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

/*
 * Found by tests/fuzz/fuzz_pgoutput (reproducer: a Relation for
 * "public"."outb\rx_events", then an Insert with the wrong column count).
 * pgoutput.h promises a one-line reason, and relay.c logs it as it is; a
 * relation name is the server's text and may hold any byte but NUL, so
 * control bytes must not reach err (wal2json.c replaces them by '?').
 */
START_TEST(test_error_has_no_control_bytes_from_names)
{
    static const char *const names[] = {"outb\rx_events", "evil\nINFO: forged",
                                        "esc\x1b[31mred", "del\x7f"};

    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        bb_reset(&b);
        relation(&b, 77, "pub\nlic", names[k], 'd', 3, outbox_cols);
        DECODE_OK();
        bb_reset(&b);
        change(&b, 'I', 77, 'N', 2);
        bb_text(&b, "1");
        bb_text(&b, "2");
        DECODE_ERR("layout mismatch");
        for (const char *p = err; *p; p++)
            ck_assert_msg((unsigned char)*p >= 0x20 && *p != 0x7f,
                          "control byte 0x%02x at %d in error \"%s\"",
                          (unsigned char)*p, (int)(p - err), err);
    }
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
    tcase_add_test(msgs, test_captured_layout_change);
    tcase_add_test(msgs, test_captured_update_delete_truncate);
    tcase_add_test(msgs, test_captured_streams);
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
    tcase_add_test(errs, test_error_has_no_control_bytes_from_names);
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
