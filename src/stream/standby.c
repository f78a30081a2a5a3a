/*
 * standby.c - a hot standby pair's check interval and fence, and a standby
 * server's WAL receiver (standby.h).
 */
#include "standby.h"

#include <string.h>

int standby_check_ms(int retry_max_ms)
{
    return retry_max_ms > 0 && retry_max_ms < STANDBY_CHECK_MS ? retry_max_ms
                                                               : STANDBY_CHECK_MS;
}

int64_t standby_fence_ms(int64_t sender_timeout_ms)
{
    if (sender_timeout_ms <= 0) return 0;
    int64_t f = sender_timeout_ms * STANDBY_FENCE_NUM / STANDBY_FENCE_DEN;
    return f > 0 ? f : 1;
}

bool standby_fenced(int64_t now_ms, int64_t last_status_ms, int64_t fence_ms)
{
    return fence_ms > 0 && now_ms - last_status_ms > fence_ms;
}

int64_t standby_kafka_lost(int brokers_up, int64_t now_ms, int64_t *lost_since_ms)
{
    if (brokers_up != 0) { /* some are up, or not known yet */
        *lost_since_ms = 0;
        return 0;
    }
    if (*lost_since_ms == 0) *lost_since_ms = now_ms > 0 ? now_ms : 1;
    return now_ms - *lost_since_ms;
}

int64_t standby_receiver_stalled(const char *status, int64_t now_ms, int64_t *since_ms)
{
    if (!status || !*status || strcmp(status, "?") == 0 ||
        strcmp(status, "streaming") == 0) {
        *since_ms = 0;
        return 0;
    }
    if (*since_ms == 0) *since_ms = now_ms > 0 ? now_ms : 1;
    return now_ms > *since_ms ? now_ms - *since_ms : 0;
}

bool standby_should_yield(int64_t lost_ms, int64_t yield_ms)
{
    return yield_ms > 0 && lost_ms >= yield_ms;
}
