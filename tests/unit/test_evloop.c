/*
 * test_evloop.c - the loop's one wait (include/base/evloop.h): wakes for a
 * readable socket, for the earliest deadline, not for sockets it was not
 * asked to watch; and the clocks it is driven by (include/base/clock.h).
 */
#include <check.h>
#include <unistd.h>

#include "clock.h"
#include "evloop.h"

START_TEST(test_wakes_for_readable_fd)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    struct evloop l;
    int64_t now = clock_mono_ms();
    evloop_begin(&l, now + 5000);
    ck_assert_int_eq(evloop_watch(&l, p[0], false), 0);
    ck_assert_int_eq(evloop_watch(&l, -1, false), 0); /* ignored */
    ck_assert_int_eq(l.nfds, 1);
    ck_assert_int_eq(write(p[1], "x", 1), 1);
    ck_assert_int_eq(evloop_wait(&l, now), 1);
    ck_assert(evloop_ready(&l, p[0]));
    ck_assert(!evloop_ready(&l, p[1]));
    ck_assert(!evloop_ready(&l, -1));
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_earliest_deadline_wins)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    struct evloop l;
    int64_t now = clock_mono_ms();
    evloop_begin(&l, now + 60000);
    evloop_until(&l, now + 30);
    evloop_until(&l, now + 40000); /* later: no effect */
    ck_assert_int_eq(l.deadline_ms, now + 30);
    evloop_watch(&l, p[0], false);
    ck_assert_int_eq(evloop_wait(&l, now), 0); /* nothing written: the deadline */
    ck_assert(!evloop_ready(&l, p[0]));
    ck_assert_int_ge(clock_mono_ms(), now + 30);
    /* A deadline in the past does not block. */
    evloop_begin(&l, now - 10);
    ck_assert_int_eq(evloop_wait(&l, clock_mono_ms()), 0);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_same_fd_both_ways_and_limit)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    struct evloop l;
    evloop_begin(&l, clock_mono_ms());
    evloop_watch(&l, p[1], false);
    evloop_watch(&l, p[1], true); /* merged into one entry */
    ck_assert_int_eq(l.nfds, 1);
    ck_assert_int_eq(evloop_wait(&l, clock_mono_ms()), 1); /* writable */
    ck_assert(evloop_ready(&l, p[1]));
    for (int i = 1; i < EVLOOP_MAX_FDS; i++) ck_assert_int_eq(evloop_watch(&l, 100 + i, false), 0);
    ck_assert_int_eq(evloop_watch(&l, 99, false), -1);
    close(p[0]);
    close(p[1]);
}
END_TEST

START_TEST(test_clocks)
{
    int64_t ms = clock_mono_ms(), us = clock_mono_us();
    ck_assert_int_le(ms * 1000, us + 1000);
    clock_sleep_ms(20);
    ck_assert_int_ge(clock_mono_ms() - ms, 20);
    /* Wall clock: after 2026-01-01 (1767225600 s). */
    ck_assert_int_gt(clock_unix_us(), 1767225600LL * 1000000);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("evloop");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_wakes_for_readable_fd);
    tcase_add_test(tc, test_earliest_deadline_wins);
    tcase_add_test(tc, test_same_fd_both_ways_and_limit);
    tcase_add_test(tc, test_clocks);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
