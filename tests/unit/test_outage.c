/*
 * test_outage.c - a failing connection's log lines (include/base/outage.h): the
 * first failure at once with its cause, then at most one line per
 * interval, one line on recovery with the outage's length; a burst of
 * same-millisecond failures is one line.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "outage.h"

START_TEST(test_first_then_folded)
{
    struct outage o;
    char line[512];
    outage_init(&o, "kafka", "brokers", 30000);
    ck_assert(outage_fail(&o, 1000,
                          "Connect to ipv4#127.0.0.1:9 failed: Connection refused", line,
                          sizeof(line)));
    ck_assert_str_eq(line,
                     "kafka: Connect to ipv4#127.0.0.1:9 failed: Connection refused "
                     "(repeats are folded into one line every 30 s until it recovers)");
    /* librdkafka's burst: 59 callbacks within the same millisecond. */
    int said = 0;
    for (int i = 0; i < 59; i++)
        said += outage_fail(&o, 1000, "1/1 brokers are down", line, sizeof(line));
    ck_assert_int_eq(said, 0);
    /* Every 100 ms for two minutes: one line per 30 s. */
    outage_units(&o, 1, 1);
    for (int64_t t = 1100; t <= 121000; t += 100)
        if (outage_fail(&o, t, "Connection refused", line, sizeof(line))) said++;
    ck_assert_int_eq(said, 4);
    ck_assert_str_eq(line,
                     "kafka: 1 of 1 brokers unreachable for 2 min 0 s, 1260 attempts, "
                     "last error: Connection refused");
    ck_assert_int_eq((int)o.last_ms,
                     121000); /* kafkaconf.c's quiet period counts from it */
    ck_assert(outage_ok(&o, 125500, line, sizeof(line)));
    ck_assert_str_eq(line,
                     "kafka: recovered after 2 min 4 s of failures (1260 failed attempts)");
    ck_assert(!o.down);
    /* Up: nothing more to say. */
    ck_assert(!outage_ok(&o, 126000, line, sizeof(line)));
    ck_assert(!outage_tick(&o, 999999, line, sizeof(line)));
}
END_TEST

START_TEST(test_tick_and_no_units)
{
    struct outage o;
    char line[512];
    outage_init(&o, "postgres", NULL, 30000);
    ck_assert(outage_fail(&o, 0,
                          "connection to server at \"127.0.0.1\", port 1 failed:\n\t"
                          "Connection refused",
                          line, sizeof(line)));
    ck_assert_ptr_nonnull(strstr(line, "port 1 failed: Connection refused (repeats"));
    ck_assert(!outage_tick(&o, 29999, line, sizeof(line)));
    ck_assert(outage_tick(&o, 30000, line, sizeof(line)));
    ck_assert_str_eq(line, "postgres: failing for 30 s, 1 attempts, last error: connection "
                           "to server at \"127.0.0.1\", port 1 failed: Connection refused");
    ck_assert(!outage_tick(&o, 59999, line, sizeof(line)));
    /* The second outage starts over: its first failure is said at once. */
    ck_assert(outage_ok(&o, 61000, line, sizeof(line)));
    ck_assert_str_eq(line,
                     "postgres: recovered after 1 min 1 s of failures (1 failed attempt)");
    ck_assert(outage_fail(&o, 70000, "again", line, sizeof(line)));
    ck_assert_str_eq(line, "postgres: again (repeats are folded into one line every 30 s "
                           "until it recovers)");
    ck_assert_int_eq((int)o.attempts, 1);
}
END_TEST

START_TEST(test_duration_and_cut)
{
    char d[32];
    ck_assert_str_eq(outage_duration(850, d, sizeof(d)), "850 ms");
    ck_assert_str_eq(outage_duration(-5, d, sizeof(d)), "0 ms");
    ck_assert_str_eq(outage_duration(42999, d, sizeof(d)), "42 s");
    ck_assert_str_eq(outage_duration(3600000 + 12 * 60000 + 5000, d, sizeof(d)),
                     "1 h 12 min");
    struct outage o;
    char small[16], big[2000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    outage_init(&o, "kafka", "brokers", 0); /* 0: the default interval */
    ck_assert_int_eq((int)o.every_ms, OUTAGE_EVERY_MS);
    ck_assert(outage_fail(&o, 5, big, small, sizeof(small)));
    ck_assert_int_eq((int)strlen(small), 15);
    ck_assert_int_eq((int)strlen(o.last), (int)sizeof(o.last) - 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outage");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_first_then_folded);
    tcase_add_test(tc, test_tick_and_no_units);
    tcase_add_test(tc, test_duration_and_cut);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
