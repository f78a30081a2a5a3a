/*
 * audit.h - the comparison behind `outboxd verify`. Pure: no I/O.
 *
 * The caller feeds the outbox rows (event_id, rendered topic, aggregate_id,
 * aggregate_version) and the Kafka messages it read (topic, partition,
 * offset, key, event_id and aggregate_version headers); audit_run() then
 * counts:
 *  - missing: in-scope rows whose event_id is in no message and in no
 *    dead-letter record;
 *  - dead-lettered: in-scope rows whose event_id is in no message of its
 *    topics but in a record of the dead-letter topic (audit_add_dead_letter();
 *    [errors] policy = dlq set it aside: not lost, not delivered). Such
 *    records take no part in duplicates, unknown or order; those whose
 *    event_id is no row (or that have none: a wal2json record that could
 *    not be decoded, a NULL event_id) are counted as unmatched;
 *  - duplicates: extra copies of an event_id (n messages = n - 1 extra),
 *    and the number of event_ids delivered more than once;
 *  - unknown: messages whose event_id is not among the rows (out-of-scope
 *    rows included), and messages without an event_id header;
 *  - order violations, per topic + key (null keys are not checked):
 *    * a key on more than one partition (counted once per topic + key);
 *    * in (partition, offset) order, considering only the first message of
 *      each event_id under that topic + key, an aggregate_version lower
 *      than the highest one before it on that partition. A re-delivered
 *      older event later in the partition is a duplicate, not a violation.
 *      Messages without a version, and those of events known only from
 *      rows outside the scope (re-deliveries of events older than --since),
 *      take no part.
 *
 * Rows come in two kinds: in scope (checked for missing; their topics are
 * the ones to read) and out of scope (rows older than --since): they make
 * their messages known, and keep them out of the version order check.
 *
 * Memory: struct audit copies everything it is given (one arena) and owns
 * it; report examples and audit_unknown_ids() borrow from it and stay
 * valid until audit_free() (unknown ids: until the next audit_run()).
 */
#ifndef OUTBOXD_AUDIT_H
#define OUTBOXD_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "outbox.h" /* struct slice */

#define AUDIT_MAX_EXAMPLES 10

/* One outbox row. Slices with data == NULL are SQL NULLs. */
struct audit_row {
    struct slice event_id;
    const char *topic; /* rendered topic, NUL-terminated; NULL when it could
                          not be rendered (the row cannot have been sent) */
    struct slice key;  /* aggregate_id */
    bool has_version;
    int64_t version;
    bool in_scope; /* false: older than the checked window; see above */
};

/* One Kafka message. */
struct audit_msg {
    const char *topic; /* NUL-terminated */
    int32_t partition;
    int64_t offset;
    struct slice key;      /* data == NULL: null key */
    struct slice event_id; /* data == NULL: no event_id header */
    bool has_version;      /* an aggregate_version header holding an integer */
    int64_t version;
    struct slice dlq_error; /* dead-letter records: the dlq_error header */
};

enum audit_kind { AK_MISSING = 0, AK_DUPLICATE, AK_UNKNOWN, AK_ORDER, AK_DEAD_LETTERED, AK__COUNT };

/* One example of a problem; every pointer borrows from the audit. */
struct audit_example {
    struct slice event_id; /* data == NULL: none (no header / NULL column) */
    const char *topic;     /* NULL: a row whose topic could not be rendered */
    struct slice key;      /* data == NULL: null key */
    int32_t partition;     /* -1 for rows (missing); AK_DEAD_LETTERED: of the
                              dead-letter record */
    int64_t offset;        /* -1 for rows (missing) */
    struct slice dlq_error;  /* AK_DEAD_LETTERED: its dlq_error header */
    bool has_version;
    int64_t version;
    size_t copies;           /* AK_DUPLICATE: messages with this event_id */
    bool split;              /* AK_ORDER: key on another partition (else:
                                version going backwards) */
    int32_t first_partition; /* AK_ORDER split: the key's lowest partition */
    int64_t prev_version;    /* AK_ORDER version: highest earlier version */
};

struct audit_report {
    size_t rows;       /* in-scope rows */
    size_t known_rows; /* all rows, out-of-scope ones included */
    size_t messages;
    size_t topics; /* distinct topics of the in-scope rows */
    size_t missing;
    size_t dead_lettered;          /* in-scope rows only in the dead-letter topic */
    size_t dead_letters;           /* dead-letter records read */
    size_t dead_letters_unmatched; /* of those, not of any row */
    size_t duplicates;       /* extra copies */
    size_t duplicate_events; /* event_ids with more than one message */
    size_t unknown;          /* messages */
    size_t version_regressions;
    size_t split_keys;
    size_t order_violations; /* version_regressions + split_keys */
    size_t nexamples[AK__COUNT];
    struct audit_example examples[AK__COUNT][AUDIT_MAX_EXAMPLES];
};

struct audit;

/* Returns a new, empty audit (free with audit_free()), NULL on OOM. */
struct audit *audit_new(void);
void audit_free(struct audit *a);

/* Copy one row / message into the audit. Return 0, -1 on out of memory. */
int audit_add_row(struct audit *a, const struct audit_row *row);
int audit_add_message(struct audit *a, const struct audit_msg *msg);
/* A record of the dead-letter topic (its original topic is not needed). */
int audit_add_dead_letter(struct audit *a, const struct audit_msg *msg);

/* The distinct topics of the in-scope rows, in first-seen order: *out is a
 * malloc'd array the caller frees (not the strings, which the audit owns).
 * Returns 0 (with *out NULL when *n is 0), -1 on out of memory. */
int audit_topics(const struct audit *a, const char ***out, size_t *n);

/* Compares everything added so far and fills r. May be called again after
 * more adds. Returns 0, -1 on out of memory. */
int audit_run(struct audit *a, struct audit_report *r);

/* The event_ids of the unknown messages and of the unmatched
 * dead-letter records of the last audit_run() (those without an event_id
 * excluded; an id may repeat), to look up once more. Borrowed; valid until the next
 * audit_run() or audit_free(). */
const struct slice *audit_unknown_ids(const struct audit *a, size_t *n);

/* True when nothing is missing and nothing is out of order (dead-lettered
 * events and unknown messages are reported, not failed). Duplicates fail
 * only when exactly_once: at least once allows them, [delivery] mode =
 * exactly_once promises a read_committed consumer none. */
bool audit_report_ok(const struct audit_report *r, bool exactly_once);

/* Parses a version as Postgres prints an integer ("-12", "7"). Returns
 * false for anything else (empty, spaces, overflow). */
bool audit_parse_version(const char *s, size_t len, int64_t *out);

#endif
