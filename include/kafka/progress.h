/*
 * progress.h - the progress topic of [delivery] mode = exactly_once: where
 * the position commits atomically with the events (relaytxn.h).
 *
 * Each Kafka transaction ends with one record on partition 0 of the topic
 * ([delivery] progress_topic, compacted): key = the transactional.id,
 * value = the offset file's own text (offset_format(), format 3: the
 * stream's identity, the commit LSN whose events are all in committed
 * transactions, and the count of a transaction in progress). A restart
 * reads the newest committed record of its key and resumes from it.
 */
#ifndef OUTBOXD_PROGRESS_H
#define OUTBOXD_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "offset.h"

/* Creates topic with one partition and cleanup.policy = compact unless it
 * exists (replication factor: the broker's default); an existing topic
 * needs no CREATE right. Returns 0, or -1 with a reason in err. Waits up
 * to timeout_ms for each of its two requests. */
int progress_topic_ensure(const struct config *c, const char *topic, int timeout_ms,
                          char *err, size_t errlen);

/* What the broker says about the progress topic (`outboxd check`, and
 * the start-up's warning). */
struct progress_topic_info {
    bool exists;
    char policy[64];      /* exists: its cleanup.policy */
    bool compacted;       /* exists: the policy holds "compact" */
    bool can_create;      /* !exists: a validate-only CreateTopics passed */
    char create_err[512]; /* !exists && !can_create: the broker's reason */
};

/* Fills *out (DescribeConfigs of topic; when it does not exist, a
 * CreateTopics with validate_only). Returns 0, or -1 with a reason in err
 * (no answer within timeout_ms). */
int progress_topic_describe(const struct config *c, const char *topic, int timeout_ms,
                            struct progress_topic_info *out, char *err, size_t errlen);

/* Reads partition 0 of topic up to its end and keeps the newest record of
 * key that a read_committed consumer sees. The end is the log end offset
 * taken first (read_uncommitted): another producer's open transaction
 * holds a read_committed reader back below records committed after it
 * began, so reading "to the end" as read_committed sees it could miss
 * ours; the wait for it is bounded by timeout_ms (an open transaction
 * ends within its transaction.timeout.ms). Returns 1 with *out set, 0 when
 * the key has no record (or its newest is a tombstone), -1 with a reason
 * in err (the broker, a record that does not parse). */
int progress_read(const struct config *c, const char *topic, const char *key,
                  int timeout_ms, struct offset_state *out, char *err, size_t errlen);

#endif
