/*
 * evloop.c - one poll() over what a loop turn waits for (see evloop.h).
 */
#include "evloop.h"

#include <errno.h>

void evloop_begin(struct evloop *l, int64_t deadline_ms)
{
    l->nfds = 0;
    l->deadline_ms = deadline_ms;
}

int evloop_watch(struct evloop *l, int fd, bool write)
{
    if (fd < 0) return 0;
    for (int i = 0; i < l->nfds; i++)
        if (l->fds[i].fd == fd) {
            l->fds[i].events |= write ? POLLOUT : POLLIN;
            return 0;
        }
    if (l->nfds == EVLOOP_MAX_FDS) return -1;
    l->fds[l->nfds++] = (struct pollfd){.fd = fd, .events = write ? POLLOUT : POLLIN};
    return 0;
}

void evloop_until(struct evloop *l, int64_t deadline_ms)
{
    if (deadline_ms < l->deadline_ms) l->deadline_ms = deadline_ms;
}

int evloop_wait(struct evloop *l, int64_t now_ms)
{
    int64_t wait = l->deadline_ms - now_ms;
    if (wait < 0) wait = 0;
    if (wait > 60000) wait = 60000; /* callers keep their own deadlines anyway */
    for (int i = 0; i < l->nfds; i++) l->fds[i].revents = 0;
    int n = poll(l->fds, (nfds_t)l->nfds, (int)wait);
    return n < 0 ? 0 : n; /* EINTR: a signal; the caller looks at its flags */
}

bool evloop_ready(const struct evloop *l, int fd)
{
    if (fd < 0) return false;
    for (int i = 0; i < l->nfds; i++)
        if (l->fds[i].fd == fd) return l->fds[i].revents != 0;
    return false;
}
