/*
 * test_standby.c - the hot standby's check interval and fence
 * (include/stream/standby.h).
 */
#include <check.h>
#include <stdlib.h>

#include "standby.h"

START_TEST(test_check_interval)
{
    ck_assert_int_eq(standby_check_ms(30000), 1000); /* not the 30 s backoff */
    ck_assert_int_eq(standby_check_ms(1000), 1000);
    ck_assert_int_eq(standby_check_ms(300), 300); /* a shorter retry_max_ms wins */
    ck_assert_int_eq(standby_check_ms(0), 1000);
}
END_TEST

START_TEST(test_fence_interval)
{
    ck_assert_int_eq(standby_fence_ms(60000), 45000); /* the server's default */
    ck_assert_int_eq(standby_fence_ms(4000), 3000);
    ck_assert_int_eq(standby_fence_ms(1), 1);
    ck_assert_int_eq(standby_fence_ms(0), 0);  /* the server never cuts: no fence */
    ck_assert_int_eq(standby_fence_ms(-1), 0); /* unknown */
    /* always below the timeout, above half of it (the server asks for a
     * reply after half the timeout, so a live stream is never fenced) */
    for (int64_t t = 4; t < 200000; t += 997) {
        int64_t f = standby_fence_ms(t);
        ck_assert_msg(f < t && f > t / 2, "timeout %lld: fence %lld", (long long)t,
                      (long long)f);
    }
}
END_TEST

START_TEST(test_fenced)
{
    ck_assert(!standby_fenced(10000, 7000, 3000)); /* exactly the fence: not yet */
    ck_assert(standby_fenced(10001, 7000, 3000));
    ck_assert(!standby_fenced(10000, 9999, 3000));
    ck_assert(!standby_fenced(1000000, 0, 0)); /* no fence */
    ck_assert(!standby_fenced(5000, 6000, 3000)); /* a status "from the future" */
}
END_TEST

/* The yield clock: it starts at the first report of no broker, keeps its
 * start while none are up, and clears when one is up or the count is not
 * known (before librdkafka's first statistics). */
START_TEST(test_kafka_lost)
{
    int64_t since = 0;
    ck_assert_int_eq(standby_kafka_lost(-1, 1000, &since), 0); /* not known yet */
    ck_assert_int_eq(since, 0);
    ck_assert_int_eq(standby_kafka_lost(2, 2000, &since), 0);
    ck_assert_int_eq(standby_kafka_lost(0, 3000, &since), 0); /* none: the clock starts */
    ck_assert_int_eq(since, 3000);
    ck_assert_int_eq(standby_kafka_lost(0, 4500, &since), 1500);
    ck_assert_int_eq(standby_kafka_lost(0, 33000, &since), 30000);
    ck_assert_int_eq(standby_kafka_lost(1, 33500, &since), 0); /* one back: cleared */
    ck_assert_int_eq(since, 0);
    ck_assert_int_eq(standby_kafka_lost(0, 40000, &since), 0); /* starts over */
    ck_assert_int_eq(standby_kafka_lost(0, 41000, &since), 1000);
    ck_assert_int_eq(standby_kafka_lost(-1, 42000, &since), 0); /* a new client */
    ck_assert_int_eq(since, 0);
}
END_TEST

START_TEST(test_should_yield)
{
    ck_assert(!standby_should_yield(29999, 30000));
    ck_assert(standby_should_yield(30000, 30000));
    ck_assert(standby_should_yield(90000, 30000));
    ck_assert(!standby_should_yield(0, 30000));
    ck_assert(!standby_should_yield(1000000, 0)); /* 0: never */
}
END_TEST

/* A standby server's WAL receiver: not streaming for how long; a primary
 * ("") and a status the role may not read ("?") are never stalled. */
START_TEST(test_receiver_stalled)
{
    int64_t since = 0;
    ck_assert_int_eq(standby_receiver_stalled("streaming", 1000, &since), 0);
    ck_assert_int_eq(standby_receiver_stalled("waiting", 2000, &since), 0); /* starts */
    ck_assert_int_eq(since, 2000);
    ck_assert_int_eq(standby_receiver_stalled("waiting", 32000, &since), 30000);
    ck_assert_int_eq(standby_receiver_stalled("none", 40000, &since), 38000);
    ck_assert_int_eq(standby_receiver_stalled("streaming", 41000, &since), 0); /* back */
    ck_assert_int_eq(since, 0);
    ck_assert_int_eq(standby_receiver_stalled("restarting", 50000, &since), 0);
    ck_assert_int_eq(standby_receiver_stalled("", 51000, &since), 0); /* promoted */
    ck_assert_int_eq(since, 0);
    ck_assert_int_eq(standby_receiver_stalled("?", 52000, &since), 0);
    ck_assert_int_eq(standby_receiver_stalled(NULL, 53000, &since), 0);
    ck_assert_int_eq(standby_receiver_stalled("stopped", 0, &since), 0); /* clock at 0 */
    ck_assert_int_eq(since, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("standby");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_check_interval);
    tcase_add_test(tc, test_fence_interval);
    tcase_add_test(tc, test_fenced);
    tcase_add_test(tc, test_kafka_lost);
    tcase_add_test(tc, test_should_yield);
    tcase_add_test(tc, test_receiver_stalled);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
