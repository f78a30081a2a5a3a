/*
 * duration.h - durations as configured: "500ms", "5s", "2m", "1h", "7d".
 *
 * Every duration key takes a whole number with a unit. The keys whose name
 * ends in _ms (status_interval_ms, retry_min_ms, ...) also take a bare
 * number, read as milliseconds, as they always did: "retry_min_ms = 500"
 * and "retry_min_ms = 500ms" are the same, "retry_min_ms = 2s" is 2000 ms.
 * The other duration keys (lease, backoff_min, ...) need the unit, so that
 * "lease = 30" is not silently 30 ms; only "0" (and "off") may go without.
 * Pure: unit-tested in tests/unit/test_duration.c.
 */
#ifndef OUTBOXD_DURATION_H
#define OUTBOXD_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* duration_parse() flags. */
enum { DURATION_BARE_MS = 1 }; /* a number without a unit is milliseconds */

/* Parses s: a non-negative whole number followed by ms, s, m, h or d (at
 * most 10 years), "0" or "off" (zero), or, with DURATION_BARE_MS, a bare
 * number of milliseconds. Returns 0 with *ms, or -1 with a reason naming
 * s in err. */
int duration_parse(const char *s, unsigned flags, int64_t *ms, char *err, size_t errlen);

/* ms in the largest unit that divides it exactly ("7d", "30s", "1500ms",
 * "0"), into out. Returns out. */
const char *duration_format(int64_t ms, char *out, size_t outlen);

#endif
