/*
 * signals.c - the daemon's signal handlers (flags only) and what the event
 * loop does about them (see signals.h).
 */
#include "signals.h"

#include <string.h>
#include <unistd.h>

#include "log.h"
#include "exitcode.h"

static volatile sig_atomic_t *stop_flag;
static volatile sig_atomic_t hup_seen, usr1_seen, usr2_seen;
static void (*reload_fn)(void *);
static void *reload_ctx;

static void on_stop(int sig)
{
    (void)sig;
    if (*stop_flag) _exit(EXIT_FATAL);
    *stop_flag = 1;
}

static void on_other(int sig)
{
    if (sig == SIGHUP) hup_seen = 1;
    if (sig == SIGUSR1) usr1_seen = 1;
    if (sig == SIGUSR2) usr2_seen = 1;
}

static void handle(int sig, void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL); /* no SA_RESTART: see signals.h */
}

void signals_install(volatile sig_atomic_t *stop, void (*reload)(void *), void *ctx)
{
    stop_flag = stop;
    reload_fn = reload;
    reload_ctx = ctx;
    handle(SIGTERM, on_stop);
    handle(SIGINT, on_stop);
    handle(SIGHUP, on_other);
    handle(SIGUSR1, on_other);
    handle(SIGUSR2, on_other);
    signal(SIGPIPE, SIG_IGN);
}

/* 1 once for each flag that was set (cleared before acting, so a signal
 * that comes while acting is served on the next turn). */
static int take(volatile sig_atomic_t *flag)
{
    if (!*flag) return 0;
    *flag = 0;
    return 1;
}

void signals_service(void)
{
    static const struct {
        volatile sig_atomic_t *seen;
        const char *name;
    } ignored[] = {{&usr1_seen, "SIGUSR1"}, {&usr2_seen, "SIGUSR2"}};
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        if (take(ignored[i].seen))
            log_warn("%s received: ignored (it means nothing to outboxd; SIGHUP reloads "
                     "the configuration, SIGTERM stops)",
                     ignored[i].name);
    if (take(&hup_seen)) {
        if (reload_fn)
            reload_fn(reload_ctx);
        else
            log_warn("SIGHUP received: nothing to reload");
    }
}
