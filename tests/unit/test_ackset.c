/*
 * test_ackset.c - the ACKed prefix of one transaction (include/ack/ackset.h):
 * in order, out of order, duplicates, long gaps, and against a model with
 * random orders.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "ackset.h"

START_TEST(test_in_order_never_allocates)
{
    struct ackset a = ACKSET_EMPTY;
    for (uint64_t i = 0; i < 1000; i++) {
        ck_assert_int_eq(ackset_add(&a, i), 0);
        ck_assert_uint_eq(a.prefix, i + 1);
    }
    ck_assert_ptr_null(a.bits);
    ackset_clear(&a);
}
END_TEST

START_TEST(test_gap_holds_the_prefix)
{
    struct ackset a = ACKSET_EMPTY;
    ck_assert_int_eq(ackset_add(&a, 1), 0);
    ck_assert_int_eq(ackset_add(&a, 2), 0);
    ck_assert_int_eq(ackset_add(&a, 4), 0);
    ck_assert_uint_eq(a.prefix, 0); /* 0 is missing */
    ck_assert_int_eq(ackset_add(&a, 0), 0);
    ck_assert_uint_eq(a.prefix, 3); /* walks over 1 and 2, stops at 3 */
    ck_assert_int_eq(ackset_add(&a, 3), 0);
    ck_assert_uint_eq(a.prefix, 5);
    ackset_clear(&a);
    ck_assert_uint_eq(a.prefix, 0);
    ck_assert_ptr_null(a.bits);
}
END_TEST

START_TEST(test_duplicates_refused)
{
    struct ackset a = ACKSET_EMPTY;
    ck_assert_int_eq(ackset_add(&a, 0), 0);
    ck_assert_int_eq(ackset_add(&a, 0), 1); /* inside the prefix */
    ck_assert_int_eq(ackset_add(&a, 9), 0);
    ck_assert_int_eq(ackset_add(&a, 9), 1); /* ahead of it */
    ck_assert_uint_eq(a.prefix, 1);
    ackset_clear(&a);
}
END_TEST

START_TEST(test_far_ahead)
{
    /* One slow partition: ACKs run 100,000 ahead of the gap at 0. */
    struct ackset a = ACKSET_EMPTY;
    for (uint64_t i = 1; i <= 100000; i++) ck_assert_int_eq(ackset_add(&a, i), 0);
    ck_assert_uint_eq(a.prefix, 0);
    ck_assert_int_eq(ackset_add(&a, 0), 0);
    ck_assert_uint_eq(a.prefix, 100001);
    ck_assert_int_eq(ackset_add(&a, 100001), 0);
    ck_assert_uint_eq(a.prefix, 100002);
    ackset_clear(&a);
}
END_TEST

/* Random permutations of n ordinals against a model array. */
START_TEST(test_random_against_model)
{
    srand(1234 + (unsigned)_i);
    enum { N = 5000 };
    static uint32_t order[N];
    static bool seen[N];
    for (uint32_t i = 0; i < N; i++) order[i] = i, seen[i] = false;
    /* Mostly in order with local disorder, like several partitions. */
    for (uint32_t i = 0; i < N; i++) {
        uint32_t j = i + (uint32_t)rand() % (N - i < 200 ? N - i : 200);
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    struct ackset a = ACKSET_EMPTY;
    uint64_t model = 0;
    for (uint32_t k = 0; k < N; k++) {
        ck_assert_int_eq(ackset_add(&a, order[k]), 0);
        seen[order[k]] = true;
        while (model < N && seen[model]) model++;
        ck_assert_uint_eq(a.prefix, model);
        if (k % 97 == 0) ck_assert_int_eq(ackset_add(&a, order[k]), 1);
    }
    ck_assert_uint_eq(a.prefix, N);
    ackset_clear(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ackset");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_in_order_never_allocates);
    tcase_add_test(tc, test_gap_holds_the_prefix);
    tcase_add_test(tc, test_duplicates_refused);
    tcase_add_test(tc, test_far_ahead);
    tcase_add_loop_test(tc, test_random_against_model, 0, 4);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
