/*
 * relay.h - the event loop: replication stream in, Kafka out, confirmed
 * LSN back. The one place where the modules meet.
 */
#ifndef OUTBOXD_RELAY_H
#define OUTBOXD_RELAY_H

#include <signal.h>

#include "config.h"

/* Runs until *stop becomes non-zero (graceful) or a fatal error. Returns
 * an exit code (exitcode.h). */
int relay_run(const struct config *cfg, volatile sig_atomic_t *stop);

#endif
