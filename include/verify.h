/*
 * verify.h - `outboxd verify`: the audit users run after an incident.
 *
 * Reads the outbox table (every row, or rows with created_at >= --since)
 * and the topics those rows route to (a Kafka consumer from the beginning
 * of each partition, or from the offsets of --since), and reports:
 *  - missing: events in the table that are in no topic;
 *  - duplicates: event_ids delivered more than once (with a count);
 *  - unknown: messages whose event_id is not in the table (e.g. rows
 *    deleted after publishing, or events of another producer);
 *  - order violations: within one key, in partition offset order (first
 *    delivery of each event), aggregate_version going backwards.
 * Exit 0 only when nothing is missing and nothing is out of order;
 * duplicates (at-least-once) and unknown messages are reported, not failed.
 */
#ifndef OUTBOXD_VERIFY_H
#define OUTBOXD_VERIFY_H

#include <stdbool.h>

#include "config.h"

struct verify_options {
    const char *since; /* NULL, or a timestamp Postgres accepts */
    bool json;         /* machine-readable summary on stdout */
    int timeout_ms;    /* bound on reading the topics */
};

/* Runs the audit. Returns 0 (consistent), 1 (missing or out of order, or
 * a runtime error), 2 (bad options). */
int verify_run(const struct config *cfg, const struct verify_options *opt);

#endif
