/*
 * test_backoff.c - the reconnect backoff (include/base/backoff.h): doubles per
 * failure from min to max, pauses drawn from the upper half of the step,
 * reset only on request.
 */
#include <check.h>
#include <stdlib.h>

#include "backoff.h"

START_TEST(test_grows_and_caps)
{
    struct backoff b;
    backoff_init(&b, 500, 30000);
    /* rnd = 0: the lower end of each step, step / 2. */
    int expect[] = {250, 500, 1000, 2000, 4000, 8000, 15000, 15000, 15000};
    for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
        ck_assert_int_eq(backoff_next(&b, 0), expect[i]);
        ck_assert_int_eq(b.failures, (int)i + 1);
    }
}
END_TEST

START_TEST(test_jitter_within_step)
{
    struct backoff b;
    backoff_init(&b, 1000, 8000);
    int step = 1000;
    for (int i = 0; i < 6; i++) {
        int ms = backoff_next(&b, rand());
        ck_assert_int_ge(ms, step / 2);
        ck_assert_int_le(ms, step);
        step = step > 4000 ? 8000 : step * 2;
    }
    /* The upper end of the step: rnd = step / 2. */
    backoff_reset(&b);
    ck_assert_int_eq(backoff_next(&b, 500), 1000);
}
END_TEST

START_TEST(test_reset)
{
    struct backoff b;
    backoff_init(&b, 500, 30000);
    for (int i = 0; i < 5; i++) backoff_next(&b, 0);
    backoff_reset(&b);
    ck_assert_int_eq(b.failures, 0);
    ck_assert_int_eq(backoff_next(&b, 0), 250);
}
END_TEST

START_TEST(test_odd_bounds)
{
    struct backoff b;
    backoff_init(&b, 0, 0); /* clamped to 1 ms */
    ck_assert_int_le(backoff_next(&b, 12345), 1);
    backoff_init(&b, 700, 1000); /* max below 2 * min */
    backoff_next(&b, 0);
    ck_assert_int_eq(backoff_next(&b, 0), 500); /* step 1000 */
    ck_assert_int_eq(backoff_next(&b, -7), 500 + 7 % 501);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backoff");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_grows_and_caps);
    tcase_add_test(tc, test_jitter_within_step);
    tcase_add_test(tc, test_reset);
    tcase_add_test(tc, test_odd_bounds);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
