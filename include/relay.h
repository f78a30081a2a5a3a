/*
 * relay.h - the event loop: replication stream in, Kafka out, confirmed
 * LSN back. The one place where the modules meet.
 */
#ifndef OUTBOXD_RELAY_H
#define OUTBOXD_RELAY_H

#include <signal.h>

#include "config.h"

/* Exit codes of the daemon. */
#define EXIT_OK 0      /* stopped by SIGTERM/SIGINT after a graceful drain */
#define EXIT_FATAL 1   /* fatal runtime error */
#define EXIT_USAGE 2   /* bad usage or configuration */

/* How long a graceful stop waits for outstanding deliveries. */
#define RELAY_SHUTDOWN_FLUSH_MS 10000

/* Runs until *stop becomes non-zero (graceful) or a fatal error. Returns
 * one of the exit codes above. */
int relay_run(const struct config *cfg, volatile sig_atomic_t *stop);

#endif
