/*
 * test_replproto.c - unit tests for the streaming replication CopyData
 * frames (src/pg/replproto.c): XLogData and keepalive parsing, the standby
 * status update, big-endian helpers and repl_now().
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replproto.h"

/* Writes v big-endian into p, independently of the code under test. */
static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (56 - 8 * i));
}

/* Builds a 'w' frame with the given header and payload; returns its length. */
static size_t make_xlogdata(unsigned char *buf, uint64_t start, uint64_t end,
                            uint64_t t, const char *data, size_t n)
{
    buf[0] = 'w';
    put64(buf + 1, start);
    put64(buf + 9, end);
    put64(buf + 17, t);
    memcpy(buf + 25, data, n);
    return 25 + n;
}

static size_t make_keepalive(unsigned char *buf, uint64_t end, uint64_t t,
                             unsigned char reply)
{
    buf[0] = 'k';
    put64(buf + 1, end);
    put64(buf + 9, t);
    buf[17] = reply;
    return 18;
}

START_TEST(test_xlogdata)
{
    unsigned char buf[64];
    const char payload[] = "B\x00\x01\x02";
    size_t len = make_xlogdata(buf, UINT64_C(0x0000000116A2B3C8),
                               UINT64_C(0x00000001FFFFFFFF),
                               UINT64_C(0x0002C1D2E3F40506), payload, 4);
    struct repl_frame f;
    char err[256] = "";

    ck_assert_uint_eq(len, 29);
    ck_assert_int_eq(repl_parse_frame((char *)buf, len, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(f.kind, RF_XLOGDATA);
    ck_assert_uint_eq(f.data_start, UINT64_C(0x0000000116A2B3C8));
    ck_assert_uint_eq(f.wal_end, UINT64_C(0x00000001FFFFFFFF));
    ck_assert_int_eq(f.send_time, INT64_C(0x0002C1D2E3F40506));
    ck_assert(!f.reply_requested);
    ck_assert_ptr_eq(f.data, (char *)buf + 25);
    ck_assert_uint_eq(f.len, 4);
    ck_assert_mem_eq(f.data, payload, 4);
}
END_TEST

START_TEST(test_xlogdata_empty_payload)
{
    unsigned char buf[32];
    size_t len = make_xlogdata(buf, 1, 2, 3, "", 0);
    struct repl_frame f;
    char err[256];

    ck_assert_int_eq(repl_parse_frame((char *)buf, len, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(f.kind, RF_XLOGDATA);
    ck_assert_uint_eq(f.data_start, 1);
    ck_assert_uint_eq(f.wal_end, 2);
    ck_assert_int_eq(f.send_time, 3);
    ck_assert_uint_eq(f.len, 0);
}
END_TEST

START_TEST(test_keepalive)
{
    unsigned char buf[32];
    struct repl_frame f;
    char err[256];
    size_t len;

    len = make_keepalive(buf, UINT64_C(0xDEADBEEF00C0FFEE), 777, 1);
    memset(&f, 0xAA, sizeof(f));
    ck_assert_int_eq(repl_parse_frame((char *)buf, len, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(f.kind, RF_KEEPALIVE);
    ck_assert_uint_eq(f.wal_end, UINT64_C(0xDEADBEEF00C0FFEE));
    ck_assert_int_eq(f.send_time, 777);
    ck_assert(f.reply_requested);
    ck_assert_uint_eq(f.data_start, 0);
    ck_assert_ptr_null(f.data);
    ck_assert_uint_eq(f.len, 0);

    len = make_keepalive(buf, 5, 6, 0);
    ck_assert_int_eq(repl_parse_frame((char *)buf, len, &f, err, sizeof(err)), 0);
    ck_assert_int_eq(f.kind, RF_KEEPALIVE);
    ck_assert_uint_eq(f.wal_end, 5);
    ck_assert_int_eq(f.send_time, 6);
    ck_assert(!f.reply_requested);
}
END_TEST

/* Copies the first n bytes into an exact-size heap block so that memory
 * checkers catch any read past the end, then parses it. */
static int parse_prefix(const unsigned char *buf, size_t n, char *err,
                        size_t errlen)
{
    struct repl_frame f;
    char *copy = malloc(n ? n : 1);
    int rc;

    ck_assert_ptr_nonnull(copy);
    memcpy(copy, buf, n);
    rc = repl_parse_frame(copy, n, &f, err, errlen);
    free(copy);
    return rc;
}

START_TEST(test_truncated_frames)
{
    unsigned char buf[64];
    char err[256];
    size_t len;

    len = make_xlogdata(buf, 1, 2, 3, "", 0);
    for (size_t n = 0; n < len; n++) {
        err[0] = '\0';
        ck_assert_int_eq(parse_prefix(buf, n, err, sizeof(err)), -1);
        ck_assert_msg(err[0] != '\0', "no error text for prefix %zu", n);
    }
    ck_assert_int_eq(parse_prefix(buf, len, err, sizeof(err)), 0);
    parse_prefix(buf, 10, err, sizeof(err));
    ck_assert_ptr_nonnull(strstr(err, "XLogData"));

    len = make_keepalive(buf, 1, 2, 0);
    for (size_t n = 0; n < len; n++)
        ck_assert_int_eq(parse_prefix(buf, n, err, sizeof(err)), -1);
    ck_assert_int_eq(parse_prefix(buf, len, err, sizeof(err)), 0);
    parse_prefix(buf, 17, err, sizeof(err));
    ck_assert_ptr_nonnull(strstr(err, "keepalive"));

    /* A keepalive with extra bytes is malformed too. */
    buf[18] = 0;
    ck_assert_int_eq(parse_prefix(buf, 19, err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_unknown_kind)
{
    unsigned char buf[64];
    struct repl_frame f;
    char err[256] = "";
    size_t len = make_xlogdata(buf, 1, 2, 3, "abc", 3);

    buf[0] = 'r';
    ck_assert_int_eq(repl_parse_frame((char *)buf, len, &f, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "0x72"));
    buf[0] = 0xff;
    ck_assert_int_eq(repl_parse_frame((char *)buf, len, &f, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "0xff"));
    /* NULL/0 error buffer is tolerated. */
    ck_assert_int_eq(repl_parse_frame((char *)buf, len, &f, NULL, 0), -1);
}
END_TEST

START_TEST(test_status_bytes)
{
    char out[REPL_STATUS_LEN + 1];
    const unsigned char *p = (const unsigned char *)out;
    static const unsigned char expect[REPL_STATUS_LEN] = {
        'r',
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* written */
        0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, /* flushed */
        0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, /* applied */
        0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8, /* sendTime */
        1,                                              /* reply */
    };

    ck_assert_int_eq(REPL_STATUS_LEN, 34);
    memset(out, 0x5A, sizeof(out));
    repl_build_status(out, UINT64_C(0x0102030405060708),
                      UINT64_C(0x1112131415161718), UINT64_C(0x2122232425262728),
                      (int64_t)UINT64_C(0xF1F2F3F4F5F6F7F8), true);
    for (int i = 0; i < REPL_STATUS_LEN; i++)
        ck_assert_msg(p[i] == expect[i], "byte %d: got 0x%02x want 0x%02x", i,
                      p[i], expect[i]);
    ck_assert_uint_eq(p[REPL_STATUS_LEN], 0x5A); /* nothing written past 34 */

    repl_build_status(out, 0, 0, 0, 0, false);
    ck_assert_uint_eq(p[0], 'r');
    for (int i = 1; i < REPL_STATUS_LEN; i++)
        ck_assert_msg(p[i] == 0, "byte %d not zero", i);
}
END_TEST

START_TEST(test_status_fields)
{
    char out[REPL_STATUS_LEN];
    const unsigned char *p = (const unsigned char *)out;

    repl_build_status(out, UINT64_C(0x16B3748), UINT64_C(0x16B3740),
                      UINT64_C(0x16B3700), INT64_C(812345678901234), false);
    ck_assert_uint_eq(repl_get_u64(p + 1), UINT64_C(0x16B3748));
    ck_assert_uint_eq(repl_get_u64(p + 9), UINT64_C(0x16B3740));
    ck_assert_uint_eq(repl_get_u64(p + 17), UINT64_C(0x16B3700));
    ck_assert_int_eq((int64_t)repl_get_u64(p + 25), INT64_C(812345678901234));
    ck_assert_uint_eq(p[33], 0);
}
END_TEST

START_TEST(test_be_helpers)
{
    static const unsigned char b[8] = {0x80, 0x01, 0xFE, 0x7F,
                                       0x00, 0xFF, 0x10, 0x02};
    unsigned char w[8];
    static const uint64_t lsns[] = {0,
                                    1,
                                    UINT64_C(0x00000000FFFFFFFF),
                                    UINT64_C(0x0000000100000000),
                                    UINT64_C(0x16B3748),
                                    UINT64_C(0x8000000000000000),
                                    UINT64_MAX};

    ck_assert_uint_eq(repl_get_u16(b), 0x8001);
    ck_assert_uint_eq(repl_get_u16(b + 2), 0xFE7F);
    ck_assert_uint_eq(repl_get_u32(b), UINT32_C(0x8001FE7F));
    ck_assert_uint_eq(repl_get_u32(b + 4), UINT32_C(0x00FF1002));
    ck_assert_uint_eq(repl_get_u64(b), UINT64_C(0x8001FE7F00FF1002));

    repl_put_u64(w, UINT64_C(0x8001FE7F00FF1002));
    ck_assert_mem_eq(w, b, 8);

    for (size_t i = 0; i < sizeof(lsns) / sizeof(lsns[0]); i++) {
        unsigned char frame[32];
        struct repl_frame f;
        char err[128];

        repl_put_u64(w, lsns[i]);
        ck_assert_uint_eq(repl_get_u64(w), lsns[i]);
        make_keepalive(frame, lsns[i], lsns[i], 0);
        ck_assert_int_eq(repl_parse_frame((char *)frame, 18, &f, err, sizeof(err)),
                         0);
        ck_assert_uint_eq(f.wal_end, lsns[i]);
    }
}
END_TEST

START_TEST(test_now)
{
    struct timespec ts;
    int64_t now, expect;

    clock_gettime(CLOCK_REALTIME, &ts);
    expect = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 -
             INT64_C(946684800000000);
    now = repl_now();
    ck_assert_int_ge(now, expect);
    ck_assert_int_lt(now - expect, 5 * 1000000); /* within 5 s */
    /* Sanity: after 2020-01-01 (631152000 s after 2000-01-01). */
    ck_assert_int_gt(now, INT64_C(631152000) * 1000000);
}
END_TEST

static Suite *replproto_suite(void)
{
    Suite *s = suite_create("replproto");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_xlogdata);
    tcase_add_test(tc, test_xlogdata_empty_payload);
    tcase_add_test(tc, test_keepalive);
    tcase_add_test(tc, test_truncated_frames);
    tcase_add_test(tc, test_unknown_kind);
    tcase_add_test(tc, test_status_bytes);
    tcase_add_test(tc, test_status_fields);
    tcase_add_test(tc, test_be_helpers);
    tcase_add_test(tc, test_now);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(replproto_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
