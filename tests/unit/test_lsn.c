/*
 * test_lsn.c - lsn_format / lsn_parse against include/base/lsn.h:
 * Postgres' "%X/%X" (two upper-case 32-bit hex halves, no leading zeros),
 * parsing of the whole string only.
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quiet_check.h"
#include "lsn.h"

static const char *fmt(lsn_t v, char *buf)
{
    memset(buf, 'Z', LSN_STRLEN);
    return lsn_format(v, buf);
}

START_TEST(test_format_known_values)
{
    char buf[LSN_STRLEN];
    ck_assert_str_eq(fmt(0, buf), "0/0");
    ck_assert_str_eq(fmt(1, buf), "0/1");
    ck_assert_str_eq(fmt(0x16B374D848ULL, buf), "16/B374D848");
    ck_assert_str_eq(fmt(0x100000000ULL, buf), "1/0");
    ck_assert_str_eq(fmt(0xFFFFFFFFULL, buf), "0/FFFFFFFF");
    ck_assert_str_eq(fmt(0xABCDEF0012345678ULL, buf), "ABCDEF00/12345678");
    ck_assert_str_eq(fmt(0x0000000A0000000BULL, buf), "A/B");
}
END_TEST

START_TEST(test_format_max_fits_buffer)
{
    /* Exactly LSN_STRLEN bytes: the longest output plus its NUL. */
    char buf[LSN_STRLEN + 4];
    memset(buf, 'Z', sizeof(buf));
    ck_assert_str_eq(lsn_format(UINT64_MAX, buf), "FFFFFFFF/FFFFFFFF");
    ck_assert_int_eq(strlen(buf), LSN_STRLEN - 1);
    /* Nothing written past LSN_STRLEN bytes. */
    ck_assert_int_eq(buf[LSN_STRLEN], 'Z');
}
END_TEST

START_TEST(test_format_returns_buf)
{
    char buf[LSN_STRLEN];
    ck_assert_ptr_eq(lsn_format(42, buf), buf);
}
END_TEST

START_TEST(test_parse_valid)
{
    lsn_t v = 12345;
    ck_assert(lsn_parse("0/0", &v));
    ck_assert_uint_eq(v, 0);
    ck_assert(lsn_parse("16/B374D848", &v));
    ck_assert_uint_eq(v, 0x16B374D848ULL);
    ck_assert(lsn_parse("16/b374d848", &v)); /* lower case hex */
    ck_assert_uint_eq(v, 0x16B374D848ULL);
    ck_assert(lsn_parse("aBcDeF00/1234aBcD", &v)); /* mixed case */
    ck_assert_uint_eq(v, 0xABCDEF001234ABCDULL);
    ck_assert(lsn_parse("FFFFFFFF/FFFFFFFF", &v));
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert(lsn_parse("ffffffff/ffffffff", &v));
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert(lsn_parse("1/0", &v));
    ck_assert_uint_eq(v, 0x100000000ULL);
    ck_assert(lsn_parse("0/1", &v));
    ck_assert_uint_eq(v, 1);
    ck_assert(lsn_parse("00000001/00000002", &v)); /* 8 digits with zeros */
    ck_assert_uint_eq(v, 0x100000002ULL);
}
END_TEST

static const char *const invalid_lsns[] = {
    "",           "1",           "1/",          "/1",          "/",
    "G/1",        "1/G",         "1/2/3",       "123456789/0", "0/123456789",
    " 1/2",       "1/2 ",        "1 /2",        "1/ 2",        "-1/2",
    "1/-2",       "+1/2",        "0x1/2",       "1/0x2",       "1/2\n",
    "1\\2",       "1:2",         "FFFFFFFFF/0", "1/2x",        "x1/2",
};

START_TEST(test_parse_invalid)
{
    const char *s = invalid_lsns[_i];
    lsn_t v = 0;
    ck_assert_msg(!lsn_parse(s, &v), "lsn_parse accepted \"%s\"", s);
}
END_TEST

/* Deterministic xorshift64* so the run is reproducible. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* The hand-written formatter against printf's "%X/%X" (what Postgres
 * prints), over every digit count of both halves. */
START_TEST(test_format_matches_printf)
{
    char got[LSN_STRLEN], want[LSN_STRLEN];
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        /* Vary the magnitude of each half: shift both down by 0..31 bits. */
        uint32_t hi = (uint32_t)(x >> 32) >> (i % 32), lo = (uint32_t)x >> ((i / 32) % 32);
        lsn_t v = ((lsn_t)hi << 32) | lo;
        snprintf(want, sizeof(want), "%" PRIX32 "/%" PRIX32, hi, lo);
        qck_assert_str_eq(lsn_format(v, got), want);
    }
    qck_assert_str_eq(lsn_format(0, got), "0/0");
    qck_assert_str_eq(lsn_format(0x10, got), "0/10");
    qck_assert_str_eq(lsn_format(0x100000000ULL, got), "1/0");
}
END_TEST

START_TEST(test_round_trip)
{
    static const lsn_t fixed[] = {0,
                                  1,
                                  0xF,
                                  0x10,
                                  0xFFFFFFFFULL,
                                  0x100000000ULL,
                                  0x16B374D848ULL,
                                  0x8000000000000000ULL,
                                  UINT64_MAX - 1,
                                  UINT64_MAX};
    char buf[LSN_STRLEN];
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        lsn_t back = ~fixed[i];
        qck_assert(lsn_parse(lsn_format(fixed[i], buf), &back));
        qck_assert_uint_eq(back, fixed[i]);
    }
    for (int i = 0; i < 100000; i++) {
        lsn_t v = rnd();
        if (i % 3 == 0) v &= 0xFFFFFFFFULL;       /* high half zero */
        if (i % 5 == 0) v &= 0xFFFF0000FFFF0000ULL; /* zero nibbles */
        lsn_t back = ~v;
        lsn_format(v, buf);
        qck_assert_msg(lsn_parse(buf, &back), "could not parse \"%s\"", buf);
        qck_assert_uint_eq(back, v);
        /* Upper case, no leading zeros, exactly one slash. */
        for (const char *p = buf; *p; p++)
            qck_assert_msg((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'F') ||
                              *p == '/',
                          "bad char in \"%s\"", buf);
        const char *slash = strchr(buf, '/');
        qck_assert_ptr_nonnull(slash);
        qck_assert_ptr_null(strchr(slash + 1, '/'));
        if (slash - buf > 1) qck_assert_int_ne(buf[0], '0');
        if (strlen(slash + 1) > 1) qck_assert_int_ne(slash[1], '0');
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lsn");
    TCase *tc = tcase_create("core");
    /* The round trips are many: Check's default 4 s is too tight on a
     * loaded 2-core machine (seen timing out there, never failing). */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_format_known_values);
    tcase_add_test(tc, test_format_max_fits_buffer);
    tcase_add_test(tc, test_format_returns_buf);
    tcase_add_test(tc, test_parse_valid);
    tcase_add_loop_test(tc, test_parse_invalid, 0,
                        (int)(sizeof(invalid_lsns) / sizeof(invalid_lsns[0])));
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_format_matches_printf);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
