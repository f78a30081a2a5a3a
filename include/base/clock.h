/*
 * clock.h - the clocks every module reads: monotonic time for deadlines and
 * durations, wall-clock time for what is compared with the database's
 * timestamps (commit times, heartbeats) or shown to people; and the epoch
 * those timestamps count from.
 */
#ifndef OUTBOXD_CLOCK_H
#define OUTBOXD_CLOCK_H

#include <stdint.h>

/* Microseconds between 1970-01-01 00:00 UTC and 2000-01-01 00:00 UTC, the
 * epoch of PostgreSQL's timestamps (commit times, the replication
 * protocol's send times): add it to one to get Unix time. */
#define PG_EPOCH_OFFSET_US INT64_C(946684800000000)

/* Monotonic time: only differences mean anything. */
int64_t clock_mono_ms(void);
int64_t clock_mono_us(void);

/* Wall-clock time since 1970-01-01 00:00 UTC. */
int64_t clock_unix_us(void);

/* The deterministic simulator (tests/sim) drives time: while now_us is
 * set, the monotonic clocks read *now_us and the wall clock a fixed epoch
 * plus it, and sleeping returns at once; NULL: the system's clocks again.
 * The daemon never calls it. */
void clock_simulate(const int64_t *now_us);

/* Sleeps ms milliseconds (less when a signal interrupts it: callers that
 * wait for a stop want to see it at once). */
void clock_sleep_ms(int64_t ms);

#endif
