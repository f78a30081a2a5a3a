/*
 * test_confirm.c - confirm_position() (include/confirm.h): the ACKed
 * position, capped at the last proven publication membership (pgoutput),
 * never below what was already confirmed.
 */
#include <check.h>
#include <stdlib.h>

#include "confirm.h"

START_TEST(test_uncapped_is_acked)
{
    ck_assert_uint_eq(confirm_position(500, false, 0, 100), 500);
    ck_assert_uint_eq(confirm_position(500, false, 200, 100), 500);
}
END_TEST

START_TEST(test_capped_at_proven)
{
    ck_assert_uint_eq(confirm_position(500, true, 300, 100), 300);
    ck_assert_uint_eq(confirm_position(500, true, 500, 100), 500);
    ck_assert_uint_eq(confirm_position(500, true, 900, 100), 500); /* proof ahead */
}
END_TEST

START_TEST(test_never_below_floor)
{
    /* Nothing proven yet (0), or a proof older than the start position. */
    ck_assert_uint_eq(confirm_position(500, true, 0, 100), 100);
    ck_assert_uint_eq(confirm_position(500, true, 50, 100), 100);
    ck_assert_uint_eq(confirm_position(50, false, 0, 100), 100);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("confirm");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_uncapped_is_acked);
    tcase_add_test(tc, test_capped_at_proven);
    tcase_add_test(tc, test_never_below_floor);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
