/*
 * clock.c - monotonic and wall clocks (see clock.h).
 */
#include "clock.h"

#include <time.h>

static int64_t read_clock(clockid_t id, int64_t per_sec)
{
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
    if (ms <= 0) return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
