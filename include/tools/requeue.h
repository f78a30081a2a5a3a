/*
 * requeue.h - `outboxd requeue EVENT_ID...` ([source] mode = polling): puts
 * QUARANTINED rows of the polling table back to PENDING.
 */
#ifndef OUTBOXD_REQUEUE_H
#define OUTBOXD_REQUEUE_H

#include "config.h"

/* QUARANTINED rows back to PENDING with attempts reset (and a NOTIFY so
 * relays pick them up at once). Prints one line per event_id on stdout
 * (polling_requeue_verdict()). Returns EXIT_OK when every one was
 * requeued, EXIT_FATAL when one was missing or not QUARANTINED or on a
 * database error, EXIT_USAGE for a bad [outbox] configuration. */
int poll_requeue_run(const struct config *cfg, char *const *ids, int nids);

#endif
