/*
 * latency.c - the log-linear latency histogram (see latency.h).
 *
 * Bucket index of a value v:
 *   v < 64:  v itself (one bucket per microsecond);
 *   v >= 64: with e = floor(log2 v) (>= 6) and s = e - 6, the bucket is
 *            64 + s * 64 + ((v >> s) - 64): 64 buckets of width 2^s cover
 *            [2^e, 2^(e+1)).
 */
#include "latency.h"

/* v > 0. One instruction where the compiler has it: this runs for every
 * sample of every histogram, several per event. */
static int floor_log2(uint64_t v)
{
#if defined(__GNUC__) || defined(__clang__)
    return 63 - __builtin_clzll(v);
#else
    int e = 0;
    while (v >>= 1) e++;
    return e;
#endif
}

static int bucket_of(uint64_t v)
{
    if (v < LATENCY_SUB) return (int)v;
    int e = floor_log2(v);
    if (e >= LATENCY_MAX_EXP) return LATENCY_BUCKETS - 1;
    int s = e - LATENCY_SUB_BITS;
    return LATENCY_SUB + s * LATENCY_SUB + (int)((v >> s) - LATENCY_SUB);
}

/* The highest value that falls in bucket i. */
static uint64_t bucket_high(int i)
{
    if (i < LATENCY_SUB) return (uint64_t)i;
    int s = (i - LATENCY_SUB) / LATENCY_SUB;
    uint64_t low = (uint64_t)(LATENCY_SUB + (i - LATENCY_SUB) % LATENCY_SUB) << s;
    return low + ((uint64_t)1 << s) - 1;
}

void latency_record(struct latency_hist *h, int64_t us) { latency_record_n(h, us, 1); }

void latency_record_n(struct latency_hist *h, int64_t us, uint64_t n)
{
    if (n == 0) return;
    if (us < 0) us = 0;
    h->buckets[bucket_of((uint64_t)us)] += n;
    h->count += n;
    h->sum_us += (uint64_t)us * n;
    if (us > h->max_us) h->max_us = us;
}

int64_t latency_quantile(const struct latency_hist *h, double q)
{
    if (h->count == 0) return 0;
    if (q > 1) q = 1;
    uint64_t rank = (uint64_t)(q * (double)h->count);
    if ((double)rank < q * (double)h->count) rank++; /* ceil */
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (int i = 0; i < LATENCY_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t high = bucket_high(i);
            return (int64_t)high < h->max_us ? (int64_t)high : h->max_us;
        }
    }
    return h->max_us;
}

uint64_t latency_count_le(const struct latency_hist *h, int64_t bound_us)
{
    if (bound_us < 0) return 0;
    uint64_t n = 0;
    for (int i = 0; i < LATENCY_BUCKETS && bucket_high(i) <= (uint64_t)bound_us; i++)
        n += h->buckets[i];
    return n;
}
