/*
 * relayobs.h - what the logical relay shows: the metrics snapshot for the
 * HTTP server, readiness, the monitor's findings (slot lag, heartbeats,
 * publication proofs), the latency summary at stop.
 */
#ifndef OUTBOXD_RELAYOBS_H
#define OUTBOXD_RELAYOBS_H

#include "relay_int.h"

/* The start of every turn of the loop: signals, the monitor, the HTTP
 * server's beat and snapshot. */
void relay_tick(struct relay *r);

/* Publishes a snapshot now (monotonic now ms). */
void relay_publish(struct relay *r, int64_t now);

/* A snapshot at the next turn: readiness changed, say so at once. */
void relay_publish_soon(struct relay_obs *o);

/* A stream started: ready now (relay_publish_soon()), and a shutdown of
 * the server seen before it is forgotten. */
void relay_stream_started(struct relay_obs *o);

/* Whether the monitor saw the server shut down (pgoutput) since the last
 * stream started or the last call, which forgets it. */
bool relay_server_stopping(struct relay_obs *o);

/* Every reason and cause r counts, at 0 from the start. */
void relay_seed_metrics(struct metrics *m, bool pub_capped);

/* Logs the commit-to-ACK latency of the events ACKed since start, then
 * one line per stage (changes.h) and one per Kafka broker (kstats.h). */
void relay_log_latency(const struct relay *r);

#endif
