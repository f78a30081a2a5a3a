/*
 * test_latency.c - the commit-to-ACK latency histogram (include/base/latency.h).
 *
 * Quantiles must be within one bucket (1/64) above the exact sample value,
 * never below it; count, sum and max exact; Prometheus "le" counts exact at
 * bucket edges and never over-counting.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "latency.h"

static struct latency_hist H;

static void setup(void) { memset(&H, 0, sizeof(H)); }

START_TEST(test_empty)
{
    ck_assert_int_eq(latency_quantile(&H, 0.5), 0);
    ck_assert_int_eq(latency_quantile(&H, 1.0), 0);
    ck_assert_uint_eq(latency_count_le(&H, 1000000), 0);
}
END_TEST

START_TEST(test_small_values_exact)
{
    for (int v = 0; v < 64; v++) latency_record(&H, v);
    ck_assert_uint_eq(H.count, 64);
    ck_assert_uint_eq(H.sum_us, 63 * 64 / 2);
    ck_assert_int_eq(H.max_us, 63);
    /* One bucket per value below 64: quantiles are exact. */
    ck_assert_int_eq(latency_quantile(&H, 0.5), 31);
    ck_assert_int_eq(latency_quantile(&H, 1.0), 63);
    ck_assert_int_eq(latency_quantile(&H, 1.0 / 64), 0);
    ck_assert_uint_eq(latency_count_le(&H, 9), 10);
    ck_assert_uint_eq(latency_count_le(&H, -1), 0);
}
END_TEST

START_TEST(test_negative_counts_as_zero)
{
    latency_record(&H, -500);
    ck_assert_uint_eq(H.count, 1);
    ck_assert_int_eq(H.max_us, 0);
    ck_assert_int_eq(latency_quantile(&H, 0.99), 0);
    ck_assert_uint_eq(latency_count_le(&H, 0), 1);
}
END_TEST

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Against the exact order statistic of a random sample spanning 6 decades. */
START_TEST(test_quantiles_within_one_bucket)
{
    enum { N = 20000 };
    static int64_t v[N];
    srand(12345);
    for (int i = 0; i < N; i++) {
        int64_t x = (int64_t)rand() % 1000;
        for (int k = rand() % 4; k > 0; k--) x = x * 10 + rand() % 10;
        v[i] = x;
        latency_record(&H, x);
    }
    qsort(v, N, sizeof(v[0]), cmp);
    const double qs[] = {0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0};
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        size_t rank = (size_t)(qs[i] * N + 0.999999); /* ceil */
        int64_t exact = v[rank - 1];
        int64_t got = latency_quantile(&H, qs[i]);
        ck_assert_msg(got >= exact, "q=%g: %lld below exact %lld", qs[i], (long long)got,
                      (long long)exact);
        ck_assert_msg(got - exact <= exact / 64, "q=%g: %lld too far above exact %lld",
                      qs[i], (long long)got, (long long)exact);
    }
    ck_assert_int_eq(latency_quantile(&H, 1.0), v[N - 1]);
    ck_assert_int_eq(H.max_us, v[N - 1]);
}
END_TEST

/* 1000 us is the low edge of a bucket of width 8: [1000, 1007]. */
START_TEST(test_count_le_edges)
{
    latency_record(&H, 999);
    latency_record(&H, 1000);
    latency_record(&H, 1007);
    latency_record(&H, 1008);
    ck_assert_uint_eq(latency_count_le(&H, 999), 1);  /* 999 is a bucket top */
    ck_assert_uint_eq(latency_count_le(&H, 1003), 1); /* mid-bucket: never over */
    ck_assert_uint_eq(latency_count_le(&H, 1007), 3);
    ck_assert_uint_eq(latency_count_le(&H, 1015), 4);
    ck_assert_uint_eq(latency_count_le(&H, INT64_MAX), 4);
}
END_TEST

START_TEST(test_huge_value_keeps_exact_max)
{
    int64_t big = (int64_t)1 << 50;
    latency_record(&H, 10);
    latency_record(&H, big);
    ck_assert_int_eq(H.max_us, big);
    ck_assert_uint_eq(H.count, 2);
    ck_assert_int_eq(latency_quantile(&H, 0.5), 10);
    ck_assert_int_le(latency_quantile(&H, 1.0), big);
    ck_assert_uint_eq(latency_count_le(&H, INT64_MAX), 2);
}
END_TEST

/* n samples at once are n samples: the same histogram as n calls. */
START_TEST(test_record_n_equals_n_records)
{
    static struct latency_hist one;
    memset(&one, 0, sizeof(one));
    static const int64_t values[] = {0, 5, 63, 64, 100, 1234, 98765, -3, 4000000};
    static const uint64_t counts[] = {1, 3, 2, 7, 1, 64, 5, 2, 9};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        latency_record_n(&H, values[i], counts[i]);
        for (uint64_t k = 0; k < counts[i]; k++) latency_record(&one, values[i]);
    }
    latency_record_n(&H, 777777777, 0); /* nothing: not even the max */
    ck_assert_uint_eq(H.count, one.count);
    ck_assert_uint_eq(H.sum_us, one.sum_us);
    ck_assert_int_eq(H.max_us, 4000000);
    ck_assert_int_eq(memcmp(H.buckets, one.buckets, sizeof(H.buckets)), 0);
    ck_assert_int_eq(latency_quantile(&H, 0.5), latency_quantile(&one, 0.5));
}
END_TEST

/* Every power of two and its neighbours land where the bucket formula of
 * latency.c puts them (floor_log2 is a builtin there). */
START_TEST(test_bucket_edges_each_power_of_two)
{
    for (int e = 6; e < 41; e++) {
        memset(&H, 0, sizeof(H));
        int64_t v = (int64_t)1 << e;
        latency_record(&H, v - 1);
        latency_record(&H, v);
        /* v - 1 is the top of the bucket below v: exactly one sample <= v - 1 */
        ck_assert_uint_eq(latency_count_le(&H, v - 1), 1);
        ck_assert_int_eq(latency_quantile(&H, 0.5), v - 1);
        ck_assert_int_eq(latency_quantile(&H, 1.0), v);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("latency");
    TCase *tc = tcase_create("histogram");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_small_values_exact);
    tcase_add_test(tc, test_negative_counts_as_zero);
    tcase_add_test(tc, test_quantiles_within_one_bucket);
    tcase_add_test(tc, test_count_le_edges);
    tcase_add_test(tc, test_huge_value_keeps_exact_max);
    tcase_add_test(tc, test_record_n_equals_n_records);
    tcase_add_test(tc, test_bucket_edges_each_power_of_two);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
