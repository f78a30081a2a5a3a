/*
 * verify.h - `outboxd verify`: the audit users run after an incident.
 *
 * Reads the outbox table (every row, or rows with created_at >= --since)
 * and the topics those rows route to (a Kafka consumer from the beginning
 * of each partition, or from the offsets of --since), and reports:
 *  - missing: events in the table that are in no topic (and not in the
 *    dead-letter topic);
 *  - dead-lettered: events in no topic of theirs but in the dead-letter
 *    topic ([errors] dlq_topic, read like the others when it exists);
 *  - duplicates: event_ids delivered more than once (with a count);
 *  - unknown: messages whose event_id is not in the table (e.g. rows
 *    deleted after publishing, or events of another producer);
 *  - order violations: within one key, in partition offset order (first
 *    delivery of each event), aggregate_version going backwards.
 * Exit codes (VERIFY_*): 0 nothing missing and nothing out of order
 * (dead-lettered events, duplicates and unknown messages are reported, not
 * failed), 1 problems found, 2 could not run (bad options or
 * configuration, Postgres or the broker unreachable or failing, the
 * topics not read within --timeout).
 */
#ifndef OUTBOXD_VERIFY_H
#define OUTBOXD_VERIFY_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"

struct verify_options {
    const char *since; /* NULL, or a timestamp Postgres accepts */
    bool json;         /* machine-readable summary on stdout */
    int timeout_ms;    /* bound on the broker (and the Postgres connect) */
    const char *isolation; /* the consumer's isolation.level: read_committed (default)
                            * or read_uncommitted */
};

#define VERIFY_CLEAN 0
#define VERIFY_PROBLEMS 1
#define VERIFY_COULD_NOT_RUN 2

/* --timeout when not given. */
#define VERIFY_DEFAULT_TIMEOUT_MS 60000

/* Defaults for opt (no --since, text output, the default timeout). */
void verify_options_init(struct verify_options *opt);

/* Parses the verify option at argv[*i] (advancing *i past its value).
 * Returns 1 when it was one, 0 when it is not a verify option, -1 with a
 * reason in err for a bad or missing value. argv is borrowed by opt. */
int verify_option(struct verify_options *opt, int argc, char **argv, int *i, char *err,
                  size_t errlen);

/* True when arg is a verify option followed by a value (--since, --timeout, --isolation). */
bool verify_option_takes_value(const char *arg);

/* The lines of `outboxd verify --help` for verify's own options (main.c
 * prints the rest: usage, common options, exit codes). */
void verify_options_usage(FILE *out);

/* Runs the audit. Returns one of the VERIFY_* codes. */
int verify_run(const struct config *cfg, const struct verify_options *opt);

#endif
