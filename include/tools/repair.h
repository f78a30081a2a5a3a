/*
 * repair.h - `outboxd repair` ([postgres] on_slot_loss = repair runs the
 * same at start): delivery continues after the replication slot was
 * dropped, invalidated (wal_status = lost) or left behind by a failover,
 * without a gap.
 *
 * When the slot is gone, WAL decoding cannot give back what outboxd had
 * not sent yet, but the outbox table still holds those rows (unless the
 * application deletes them after insert). Repair:
 *   1. decides from the offset file, the slot and the server's settings
 *      (repairplan.h): nothing to do, refused (an operator must decide),
 *      or re-publish every row committed at or after the boundary;
 *   2. drops an invalidated slot, then creates the slot again with an
 *      exported snapshot (CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export')):
 *      the snapshot sees exactly the transactions committed before the
 *      new slot's consistent point, and the slot streams exactly those
 *      after it;
 *   3. in that snapshot, produces every row from the boundary on, in
 *      commit order and within a transaction in insert order (by [outbox]
 *      order_column; a table without it is sent in its physical order,
 *      with a warning: repairplan.h), through the normal producer, topic routing and
 *      headers, and waits until Kafka ACKed every one; with several
 *      outbox tables ([outbox.NAME]) a cursor per table (each with its
 *      section's repair_column), merged on time and transaction: within
 *      one transaction, the first section's rows come before the next's
 *      (the tables do not say in which order the statements ran);
 *   4. writes the offset file for the new slot at its consistent point
 *      (with the commit time taken just before it was created), so the
 *      daemon streams on from there.
 * A failure before 4 drops the new slot and leaves the offset file as it
 * was: running repair again sends the same rows again (duplicates, never
 * gaps). Consumers de-duplicate by event_id, as after any re-delivery.
 */
#ifndef OUTBOXD_REPAIR_H
#define OUTBOXD_REPAIR_H

#include <stdbool.h>

#include "config.h"

struct repair_options {
    const char *since; /* --since TIMESTAMP (Postgres syntax); NULL: the file's */
    bool at_start;     /* the daemon runs it (on_slot_loss = repair): a usable
                        * slot is the normal case and said at info level */
};

/* Runs the repair. Prints what it did on stdout (the command) or logs it
 * (at_start). Returns EXIT_OK (repaired, or nothing to repair), EXIT_USAGE
 * (refused: the reason logged with what to do), EXIT_FATAL (a connection,
 * statement or delivery failed: the new slot dropped, nothing written). */
int repair_run(const struct config *cfg, const struct repair_options *o);

#endif
