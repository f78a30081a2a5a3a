/*
 * signals.h - what each signal does to the daemon (README, "Signals"):
 *
 *   SIGTERM, SIGINT   graceful stop: *stop becomes 1 (the loop drains and
 *                     exits 0); a second one exits at once with status 1
 *                     (safe: nothing un-ACKed is ever confirmed)
 *   SIGHUP            reload: the reload function main.c registered runs
 *                     on the event loop's thread (re-reads the file, applies
 *                     [log] level and format, names what needs a restart)
 *   SIGUSR1, SIGUSR2  no meaning: ignored, with a log line
 *   SIGPIPE           ignored (a write to a closed socket fails instead)
 *
 * The handlers only set flags (async-signal-safe); signals_service(),
 * called on every turn of the event loop (relay.c and pollrelay.c, from
 * their tick), acts on them. The handlers are installed without
 * SA_RESTART so that a signal cuts the loop's select()/poll() short.
 */
#ifndef OUTBOXD_SIGNALS_H
#define OUTBOXD_SIGNALS_H

#include <signal.h>

/* Installs the handlers. reload(ctx) is what SIGHUP does (NULL: it is
 * only logged). stop must outlive the daemon's run. */
void signals_install(volatile sig_atomic_t *stop, void (*reload)(void *), void *ctx);

/* Acts on the signals seen since the last call: logs the ignored ones and
 * runs the reload once however many SIGHUPs came. Main thread only. */
void signals_service(void);

#endif
