/*
 * pollrelay.h - polling mode ([source] mode = polling): the relay for
 * databases without logical replication (`outboxd requeue` is requeue.h).
 *
 * The relay claims due rows of the polling table (sql/outbox_polling.sql)
 * in one short transaction each (FOR UPDATE SKIP LOCKED, lease with owner
 * and generation), commits, then produces them; every outcome is written
 * back with an UPDATE conditional on the event_id, status CLAIMED, the
 * owner and the generation, so a relay whose lease moved on changes
 * nothing. It waits for new rows outside any transaction: LISTEN on
 * [polling] notify_channel (the insert trigger NOTIFYs), with
 * poll_interval_ms as the fallback. See polling.h for the statements and
 * pollstate.h for the states of its loop.
 */
#ifndef OUTBOXD_POLLRELAY_H
#define OUTBOXD_POLLRELAY_H

#include <signal.h>

#include "config.h"

/* Runs the polling relay until *stop becomes non-zero (graceful: waits up
 * to PRODUCER_SHUTDOWN_FLUSH_MS for outstanding deliveries, records their
 * outcomes, and gives what is still unknown back as PENDING) or a fatal
 * error. cfg is not changed: when [kafka] message.timeout.ms is not set,
 * the producer is given half the lease, so that a delivery's outcome is
 * known before the lease ends. Returns EXIT_OK, EXIT_FATAL or EXIT_USAGE. */
int poll_relay_run(const struct config *cfg, volatile sig_atomic_t *stop);

#endif
