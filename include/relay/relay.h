/*
 * relay.h - the event loop: replication stream in, Kafka out, confirmed
 * LSN back. The one place where the modules meet.
 */
#ifndef OUTBOXD_RELAY_H
#define OUTBOXD_RELAY_H

#include <signal.h>
#include <stdbool.h>

#include "config.h"

/* Runs until *stop becomes non-zero (graceful) or a fatal error. Returns
 * an exit code (exitcode.h); *slot_lost (may be NULL) says whether it
 * stopped because the slot is invalidated or gone (EXIT_USAGE: outboxd
 * repair can help, repair.h). */
int relay_run(const struct config *cfg, volatile sig_atomic_t *stop, bool *slot_lost);

#endif
