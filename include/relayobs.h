/*
 * relayobs.h - what the logical relay shows: the metrics snapshot for the
 * HTTP server, readiness, the monitor's findings (slot lag, heartbeats,
 * publication proofs), the latency summary at stop.
 */
#ifndef OUTBOXD_RELAYOBS_H
#define OUTBOXD_RELAYOBS_H

#include "relaystate.h"

/* The start of every turn of the loop: signals, the monitor, the HTTP
 * server's beat and snapshot. */
void relay_tick(struct relay *r);

/* Publishes a snapshot now (monotonic now ms). */
void relay_publish(struct relay *r, int64_t now);

/* Every reason and cause r counts, at 0 from the start. */
void relay_seed_metrics(struct metrics *m, bool pub_capped);

/* Logs the commit-to-ACK latency of the events ACKed since start, then
 * one line per stage (changes.h) and one per Kafka broker (kstats.h). */
void relay_log_latency(const struct relay *r);

#endif
