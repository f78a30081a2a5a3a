/*
 * test_pgwire.c - unit tests for the wire-protocol framing outboxd uses to
 * read the replication stream itself (src/pg/pgwire.c): splitting messages
 * out of a byte stream at every cut, impossible lengths, ErrorResponse
 * formatting and SQLSTATE, and the frontend messages it writes.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pgwire.h"

/* Appends one message (type, big-endian length, body) to buf at *n,
 * independently of the code under test. */
static void put_msg(char *buf, size_t *n, char type, const char *body, size_t len)
{
    uint32_t l = (uint32_t)len + 4;
    buf[(*n)++] = type;
    buf[(*n)++] = (char)(l >> 24);
    buf[(*n)++] = (char)(l >> 16);
    buf[(*n)++] = (char)(l >> 8);
    buf[(*n)++] = (char)l;
    memcpy(buf + *n, body, len);
    *n += len;
}

static char err[256];

START_TEST(test_one_message)
{
    char buf[64];
    size_t n = 0, need;
    put_msg(buf, &n, 'd', "hello", 5);
    struct pgwire_msg m;
    ck_assert_int_eq(pgwire_next(buf, n, &m, &need, err, sizeof(err)), 10);
    ck_assert_int_eq(m.type, 'd');
    ck_assert_uint_eq(m.len, 5);
    ck_assert_ptr_eq(m.body, buf + 5);
    ck_assert_int_eq(memcmp(m.body, "hello", 5), 0);
}
END_TEST

START_TEST(test_empty_body)
{
    char buf[16];
    size_t n = 0, need;
    put_msg(buf, &n, 'c', "", 0);
    struct pgwire_msg m;
    ck_assert_int_eq(pgwire_next(buf, n, &m, &need, err, sizeof(err)), 5);
    ck_assert_int_eq(m.type, 'c');
    ck_assert_uint_eq(m.len, 0);
}
END_TEST

/* A stream cut anywhere: every prefix shorter than the first message says
 * "incomplete" with the right need; then the messages come out in order. */
START_TEST(test_every_cut)
{
    char buf[256];
    size_t n = 0;
    put_msg(buf, &n, 'W', "\0\0\0", 3);
    put_msg(buf, &n, 'd', "w0123456789abcdefghijklmnopq", 28);
    put_msg(buf, &n, 'N', "SWARNING\0Mhi\0\0", 15);
    put_msg(buf, &n, 'd', "k", 1);
    static const char types[] = {'W', 'd', 'N', 'd'};
    static const size_t sizes[] = {8, 33, 20, 6};
    for (size_t cut = 0; cut <= n; cut++) {
        size_t off = 0, i = 0, need;
        struct pgwire_msg m;
        long got;
        while ((got = pgwire_next(buf + off, cut - off, &m, &need, err, sizeof(err))) > 0) {
            ck_assert_uint_lt(i, 4);
            ck_assert_int_eq(m.type, types[i]);
            ck_assert_int_eq(got, (long)sizes[i]);
            ck_assert_uint_eq(m.len, sizes[i] - 5);
            off += (size_t)got;
            i++;
        }
        ck_assert_int_eq(got, 0);
        if (i < 4) {
            /* Once the header is in, need is the whole message. */
            ck_assert_uint_eq(need, cut - off >= 5 ? sizes[i] : 5);
            ck_assert_uint_lt(cut - off, sizes[i]);
        } else {
            ck_assert_uint_eq(off, n);
        }
    }
}
END_TEST

START_TEST(test_impossible_lengths)
{
    /* Lengths 0..3 cannot count themselves; 2 GB is past any message. */
    static const unsigned char bad[][5] = {
        {'d', 0, 0, 0, 0}, {'d', 0, 0, 0, 3}, {'E', 0x7f, 0xff, 0xff, 0xff}, {'d', 0xff, 0, 0, 0}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct pgwire_msg m;
        size_t need;
        err[0] = '\0';
        ck_assert_int_eq(pgwire_next((const char *)bad[i], 5, &m, &need, err, sizeof(err)), -1);
        ck_assert_ptr_nonnull(strstr(err, "impossible length"));
    }
    /* The largest body the server can send is accepted (incomplete here). */
    unsigned char big[5] = {'d', 0x40, 0, 0, 4};
    struct pgwire_msg m;
    size_t need;
    ck_assert_int_eq(pgwire_next((const char *)big, 5, &m, &need, err, sizeof(err)), 0);
    ck_assert_uint_eq(need, 0x40000000UL + 5);
}
END_TEST

START_TEST(test_error_text)
{
    static const char body[] = "SERROR\0VERROR\0C55006\0Mreplication slot \"s\" is active for "
                               "PID 42\0Dsome detail\0Hsome hint\0Fslot.c\0L1\0\0";
    char out[512], st[6] = "xxxxx";
    ck_assert_int_eq(pgwire_error_text(body, sizeof(body) - 1, out, sizeof(out), st), 1);
    ck_assert_str_eq(st, "55006");
    ck_assert_str_eq(out, "ERROR:  replication slot \"s\" is active for PID 42\n"
                          "DETAIL:  some detail\nHINT:  some hint");
}
END_TEST

START_TEST(test_fatal_is_reported)
{
    /* V (never localized) wins over a localized S. */
    static const char body[] = "SFATAL-LOCAL\0VFATAL\0C57P01\0Mterminating connection due to "
                               "administrator command\0\0";
    char out[512], st[6];
    ck_assert_int_eq(pgwire_error_text(body, sizeof(body) - 1, out, sizeof(out), st), 0);
    ck_assert_str_eq(st, "57P01");
    ck_assert_str_eq(out, "FATAL:  terminating connection due to administrator command");
    static const char panic[] = "SPANIC\0Mx\0\0";
    ck_assert_int_eq(pgwire_error_text(panic, sizeof(panic) - 1, out, sizeof(out), st), 0);
    ck_assert_str_eq(st, "");
}
END_TEST

START_TEST(test_malformed_error)
{
    char out[256], st[6] = "zzzzz";
    /* A value without its NUL, and fields without the final 0. */
    static const char open_value[] = {'M', 'a', 'b'};
    ck_assert_int_eq(pgwire_error_text(open_value, sizeof(open_value), out, sizeof(out), st), -1);
    ck_assert_ptr_nonnull(strstr(out, "malformed"));
    ck_assert_str_eq(st, "");
    static const char no_end[] = "SERROR\0Mx\0";
    ck_assert_int_eq(pgwire_error_text(no_end, sizeof(no_end) - 1, out, sizeof(out), st), -1);
    /* Only the terminator: a message without fields still formats. */
    ck_assert_int_eq(pgwire_error_text("", 1, out, sizeof(out), st), 1);
    ck_assert_str_eq(out, "ERROR:  (no message)");
}
END_TEST

START_TEST(test_frontend_messages)
{
    char h[PGWIRE_HEADER_LEN];
    pgwire_copydata_header(h, 34);
    ck_assert_int_eq(memcmp(h, "d\0\0\0\x26", 5), 0); /* 34 + 4 */
    pgwire_copydata_header(h, 0x01020304);
    ck_assert_int_eq(memcmp(h, "d\x01\x02\x03\x08", 5), 0);
    pgwire_copydone(h);
    ck_assert_int_eq(memcmp(h, "c\0\0\0\x04", 5), 0);
    /* What is written reads back. */
    char buf[64];
    pgwire_copydata_header(buf, 3);
    memcpy(buf + 5, "abc", 3);
    struct pgwire_msg m;
    size_t need;
    ck_assert_int_eq(pgwire_next(buf, 8, &m, &need, err, sizeof(err)), 8);
    ck_assert_int_eq(m.type, 'd');
    ck_assert_uint_eq(m.len, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pgwire");
    TCase *tc = tcase_create("pgwire");
    tcase_add_test(tc, test_one_message);
    tcase_add_test(tc, test_empty_body);
    tcase_add_test(tc, test_every_cut);
    tcase_add_test(tc, test_impossible_lengths);
    tcase_add_test(tc, test_error_text);
    tcase_add_test(tc, test_fatal_is_reported);
    tcase_add_test(tc, test_malformed_error);
    tcase_add_test(tc, test_frontend_messages);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
