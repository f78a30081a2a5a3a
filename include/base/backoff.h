/*
 * backoff.h - the reconnect backoff of the replication connection. Pure.
 *
 * Every failed attempt (a connection refused, or a stream that started and
 * failed before it was healthy) doubles the pause, from min_ms up to
 * max_ms; only a stream that stayed healthy (see relay.c) resets it. Each
 * pause is drawn from the upper half of the current step (jitter), so
 * instances restarted together do not reconnect in lock step.
 */
#ifndef OUTBOXD_BACKOFF_H
#define OUTBOXD_BACKOFF_H

struct backoff {
    int min_ms, max_ms;
    int step_ms;  /* the next pause is drawn from [step/2, step] */
    int failures; /* consecutive failed attempts since the last reset */
};

void backoff_init(struct backoff *b, int min_ms, int max_ms);

/* Counts a failed attempt and returns the pause before the next one, in
 * ms; rnd is any non-negative random number (rand()). */
int backoff_next(struct backoff *b, int rnd);

/* A healthy stream: the next failure starts again at min_ms. */
void backoff_reset(struct backoff *b);

#endif
