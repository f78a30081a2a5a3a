/*
 * evloop.h - the one place where outboxd waits.
 *
 * Each turn of a relay's loop says what it waits for (sockets to read or
 * write, the earliest deadline among its timers) and sleeps in one poll()
 * until the first of them, or a signal: the handlers are installed without
 * SA_RESTART (signals.h), so SIGTERM ends the wait at once. Nothing else in
 * the daemon blocks: work that has to wait (a full producer queue, a
 * reconnect backoff, the shutdown drain) is a state of the loop, and the
 * next turn waits for what that state needs.
 */
#ifndef OUTBOXD_EVLOOP_H
#define OUTBOXD_EVLOOP_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#define EVLOOP_MAX_FDS 8

struct evloop {
    struct pollfd fds[EVLOOP_MAX_FDS];
    int nfds;
    int64_t deadline_ms; /* monotonic (clock.h); the wait ends by then */
};

/* Starts a turn: no sockets yet, wake up by deadline_ms at the latest. */
void evloop_begin(struct evloop *l, int64_t deadline_ms);

/* Also wakes when fd can be read (or written, when write). A negative fd
 * is ignored, so callers can pass "no socket" as it is. Returns 0, or -1
 * when EVLOOP_MAX_FDS are watched already (a programming error). */
int evloop_watch(struct evloop *l, int fd, bool write);

/* Wakes by deadline_ms at the latest, if that is earlier. */
void evloop_until(struct evloop *l, int64_t deadline_ms);

/* Waits until a socket is ready, the deadline passes or a signal arrives.
 * now_ms is the current monotonic time. Returns the number of ready
 * sockets (0 on the deadline or a signal). */
int evloop_wait(struct evloop *l, int64_t now_ms);

/* Whether fd was ready after the last evloop_wait(). */
bool evloop_ready(const struct evloop *l, int fd);

#endif
