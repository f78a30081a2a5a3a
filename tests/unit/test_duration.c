/*
 * test_duration.c - durations as configured (include/config/duration.h): units,
 * bare numbers (milliseconds for the *_ms keys only), limits, formatting.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"

static char err[256];

#define HAS(s) ck_assert_msg(strstr(err, (s)) != NULL, "err \"%s\" lacks \"%s\"", err, (s))

START_TEST(test_units)
{
    static const struct {
        const char *in;
        int64_t ms;
    } cases[] = {{"500ms", 500}, {"5s", 5000},        {"2m", 120000}, {"1h", 3600000},
                 {"7d", 604800000}, {"0", 0},         {"off", 0},     {"0s", 0},
                 {"1500ms", 1500}, {"3650d", 315360000000LL}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (unsigned flags = 0; flags <= DURATION_BARE_MS; flags++) {
            int64_t ms = -1;
            ck_assert_msg(duration_parse(cases[i].in, flags, &ms, err, sizeof(err)) == 0,
                          "%s: %s", cases[i].in, err);
            ck_assert_int_eq(ms, cases[i].ms);
        }
}
END_TEST

/* A bare number is milliseconds for the *_ms keys, an error elsewhere. */
START_TEST(test_bare_number)
{
    int64_t ms = -1;
    ck_assert_int_eq(duration_parse("500", DURATION_BARE_MS, &ms, err, sizeof(err)), 0);
    ck_assert_int_eq(ms, 500);
    ck_assert_int_eq(duration_parse("500", 0, &ms, err, sizeof(err)), -1);
    HAS("\"500\" is not a duration");
    HAS("with a unit");
}
END_TEST

START_TEST(test_errors)
{
    static const char *const bad[] = {"", "s", "-5s", "5 s", "5sec", "5S", "1.5s", "5s ",
                                      " 5s", "ms", "5ms5", "+5s", "0x10s", "5mss"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        for (unsigned flags = 0; flags <= DURATION_BARE_MS; flags++) {
            int64_t ms = 42;
            ck_assert_msg(duration_parse(bad[i], flags, &ms, err, sizeof(err)) == -1,
                          "\"%s\" was accepted", bad[i]);
            ck_assert_int_eq(ms, 42); /* untouched */
            HAS("is not a duration");
        }
    int64_t ms;
    ck_assert_int_eq(duration_parse("3651d", 0, &ms, err, sizeof(err)), -1);
    HAS("longer than 10 years");
    ck_assert_int_eq(
        duration_parse("99999999999999999999ms", DURATION_BARE_MS, &ms, err, sizeof(err)), -1);
    HAS("longer than 10 years");
}
END_TEST

/* The duration keys without _ms (lease, backoff_min, ...; formerly
 * polling_duration_parse): the unit is required and named. */
START_TEST(test_unit_required)
{
    static const char *const bad[] = {"30", "1.5h", "7dd", "99999999999999999999d"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ms = 42;
        err[0] = '\0';
        ck_assert_msg(duration_parse(bad[i], 0, &ms, err, sizeof(err)) == -1,
                      "\"%s\" accepted", bad[i]);
        ck_assert_msg(err[0] != '\0', "no reason for \"%s\"", bad[i]);
        ck_assert_int_eq(ms, 42);
    }
    int64_t ms;
    duration_parse("30", 0, &ms, err, sizeof(err));
    HAS("\"30\" is not a duration");
    HAS("ms, s, m, h or d");
    ck_assert_int_eq(duration_parse("4000d", 0, &ms, err, sizeof(err)), -1);
    HAS("longer than 10 years");
}
END_TEST

START_TEST(test_format)
{
    char b[32];
    ck_assert_str_eq(duration_format(0, b, sizeof(b)), "0");
    ck_assert_str_eq(duration_format(1500, b, sizeof(b)), "1500ms");
    ck_assert_str_eq(duration_format(30000, b, sizeof(b)), "30s");
    ck_assert_str_eq(duration_format(300000, b, sizeof(b)), "5m");
    ck_assert_str_eq(duration_format(7200000, b, sizeof(b)), "2h");
    ck_assert_str_eq(duration_format(604800000, b, sizeof(b)), "7d");
    /* formatted values parse back to themselves */
    static const int64_t vals[] = {1, 999, 1000, 61000, 3600000, 90000000, 315360000000LL};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        int64_t ms;
        ck_assert_int_eq(duration_parse(duration_format(vals[i], b, sizeof(b)), 0, &ms, err,
                                        sizeof(err)),
                         0);
        ck_assert_int_eq(ms, vals[i]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("duration");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_units);
    tcase_add_test(tc, test_bare_number);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_unit_required);
    tcase_add_test(tc, test_format);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
