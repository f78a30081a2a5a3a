/*
 * latency.h - a histogram of latencies in microseconds (commit-to-ACK, the
 * stages of an event's way through the relay).
 *
 * Log-linear buckets in the style of HdrHistogram: values below 64 us
 * have a bucket each; above, every power of two is split into 64 equal
 * buckets, so a bucket is never wider than 1/64 (1.6%) of its values.
 * Count, sum and max are exact. Recording is O(1) with no allocation; the
 * struct is plain data (about 21 KB), embedded by its owner, and all-zero
 * is an empty histogram. Pure: no clock, no I/O.
 */
#ifndef OUTBOXD_LATENCY_H
#define OUTBOXD_LATENCY_H

#include <stdint.h>

#define LATENCY_SUB_BITS 6
#define LATENCY_SUB (1 << LATENCY_SUB_BITS) /* buckets per power of two */
#define LATENCY_MAX_EXP 42                  /* values up to 2^42 us (~50 days) */
#define LATENCY_BUCKETS (LATENCY_SUB + (LATENCY_MAX_EXP - LATENCY_SUB_BITS) * LATENCY_SUB)

struct latency_hist {
    uint64_t count;
    uint64_t sum_us;
    int64_t max_us;
    uint64_t buckets[LATENCY_BUCKETS];
};

/* Records one value; negative values (clock skew) count as 0, values past
 * the range count in the last bucket (max stays exact). */
void latency_record(struct latency_hist *h, int64_t us);

/* Records n samples of the same value at once (as n latency_record()
 * calls would): events that share a latency, such as those of one
 * transaction read in one turn, cost one call. n = 0 records nothing. */
void latency_record_n(struct latency_hist *h, int64_t us, uint64_t n);

/* The value at quantile q (0 < q <= 1): the highest value of the bucket
 * holding the ceil(q * count)-th smallest sample, capped at max; it is
 * within one bucket (<= 1.6%) above the exact answer. 0 when empty. */
int64_t latency_quantile(const struct latency_hist *h, double q);

/* Samples in the buckets whose every value is <= bound_us: the cumulative
 * count for a Prometheus "le" bucket (exact when bound_us is a bucket's
 * highest value, otherwise short by at most the samples in one bucket). */
uint64_t latency_count_le(const struct latency_hist *h, int64_t bound_us);

#endif
