/*
 * backoff.c - exponential reconnect backoff with jitter (see backoff.h).
 */
#include "backoff.h"

void backoff_init(struct backoff *b, int min_ms, int max_ms)
{
    b->min_ms = min_ms > 0 ? min_ms : 1;
    b->max_ms = max_ms > b->min_ms ? max_ms : b->min_ms;
    backoff_reset(b);
}

void backoff_reset(struct backoff *b)
{
    b->step_ms = b->min_ms;
    b->failures = 0;
}

int backoff_next(struct backoff *b, int rnd)
{
    int step = b->step_ms;
    b->failures++;
    b->step_ms = step > b->max_ms / 2 ? b->max_ms : step * 2;
    if (rnd < 0) rnd = -rnd;
    return step / 2 + rnd % (step / 2 + 1);
}
