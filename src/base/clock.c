/*
 * clock.c - monotonic and wall clocks (see clock.h).
 */
#include "clock.h"

#include <time.h>

/* The simulator's time (clock_simulate()), or NULL: the system's clocks. */
static const int64_t *sim_now_us;

/* 2026-01-01 00:00 UTC: the simulated wall clock's epoch. */
#define SIM_UNIX_BASE_US INT64_C(1767225600000000)

void clock_simulate(const int64_t *now_us) { sim_now_us = now_us; }

static int64_t read_clock(clockid_t id, int64_t per_sec)
{
    if (sim_now_us)
        return (id == CLOCK_REALTIME ? SIM_UNIX_BASE_US + *sim_now_us : *sim_now_us) /
               (1000000 / per_sec);
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * per_sec + ts.tv_nsec / (1000000000 / per_sec);
}

int64_t clock_mono_ms(void)
{
    return read_clock(CLOCK_MONOTONIC, 1000);
}

int64_t clock_mono_us(void)
{
    return read_clock(CLOCK_MONOTONIC, 1000000);
}

int64_t clock_unix_us(void)
{
    return read_clock(CLOCK_REALTIME, 1000000);
}

void clock_sleep_ms(int64_t ms)
{
    if (ms <= 0 || sim_now_us) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
