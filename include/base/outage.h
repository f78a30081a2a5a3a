/*
 * outage.h - what the log says about a connection that keeps failing (a
 * Kafka broker, the PostgreSQL server). Pure: no I/O, the caller passes the
 * time and logs the lines it is handed.
 *
 * An outage starts with its first failure, which is said at once with its
 * cause. While it lasts, the failures (librdkafka's error callbacks, which
 * come in bursts within the same millisecond; each reconnect attempt) are
 * counted and at most one line is said per interval: how long, how many
 * attempts, the last error. When the connection works again, one line says
 * so with the outage's length. An operator reading the journal at 3 a.m.
 * finds the cause, the duration and the end, not thousands of repeats.
 * Counters (metrics.h) are the callers' and count every failure.
 */
#ifndef OUTBOXD_OUTAGE_H
#define OUTBOXD_OUTAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The interval between two lines while an outage lasts. */
#define OUTAGE_EVERY_MS 30000

struct outage {
    char what[32];       /* the line's prefix: "kafka", "postgres" */
    char unit[16];       /* what down_n counts ("brokers"), "" when nothing does */
    int64_t every_ms;    /* OUTAGE_EVERY_MS, or a test's */
    bool down;           /* an outage is in progress */
    int64_t since_ms;    /* its first failure */
    int64_t said_ms;     /* its last line */
    int64_t last_ms;     /* its last failure */
    uint64_t attempts;   /* failures in it */
    int down_n, total_n; /* units down of total, -1: not known */
    char last[384];      /* the last failure's cause */
};

/* An outage tracker for WHAT (copied), counting UNIT (NULL: none), saying
 * one line per every_ms at most. */
void outage_init(struct outage *o, const char *what, const char *unit, int64_t every_ms);

/* A failure at now_ms with its cause (one line; cut to fit). Returns true
 * when a line is due now, written into line (NUL-terminated, cut to len):
 * the outage's first failure, or the first failure an interval after the
 * last line. */
bool outage_fail(struct outage *o, int64_t now_ms, const char *cause, char *line,
                 size_t len);

/* DOWN of TOTAL units are unreachable (librdkafka's "1/1 brokers are
 * down"), for the lines that follow. */
void outage_units(struct outage *o, int down, int total);

/* No new failure but time passed (a caller's periodic turn): true with the
 * interval's line when an outage lasts and its interval is over. */
bool outage_tick(struct outage *o, int64_t now_ms, char *line, size_t len);

/* The connection works at now_ms. Returns true with the recovery line
 * when an outage was in progress, and ends it. */
bool outage_ok(struct outage *o, int64_t now_ms, char *line, size_t len);

/* A duration as a person says it: "850 ms", "42 s", "2 min 5 s",
 * "3 h 12 min". Writes into buf (cut to len) and returns buf. */
const char *outage_duration(int64_t ms, char *buf, size_t len);

#endif
