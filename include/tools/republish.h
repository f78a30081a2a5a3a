/*
 * republish.h - `outboxd republish`: outbox rows sent to Kafka again, for
 * consumers that lost events, selected by event id, by aggregate, or by a
 * time range on [outbox] repair_column (repubsel.h), ANDed, from the table
 * of one outbox section (--outbox NAME: needed when there are several).
 *
 * The rows are read from the outbox table (one REPEATABLE READ snapshot:
 * the count and the rows agree) in a stable order (repubsel.h), mapped as
 * the relay maps them (topic template, key, headers; no commit_lsn header:
 * a row read from the table has no commit LSN) and produced through the
 * producer the relay uses ([kafka]), with the [errors] policy for a row
 * that cannot be published (rowpub.h). It never touches the replication
 * slot or the offset file: the daemon may stream on meanwhile, and
 * consumers see copies, which they de-duplicate by event_id as after any
 * re-delivery. Under [delivery] mode = exactly_once the copies are
 * produced outside Kafka transactions (the idempotent producer alone):
 * the progress topic is the relay's, and a read_committed consumer sees
 * them like any other record.
 *
 * An empty selection is explained: when the table's rows are deleted
 * after insert (repair_rows_gone()) nothing can be republished.
 */
#ifndef OUTBOXD_REPUBLISH_H
#define OUTBOXD_REPUBLISH_H

#include "config.h"
#include "repubsel.h"

/* Runs it. Prints what was sent (or, with --dry-run, what would be) on
 * stdout. EXIT_OK when every selected event was ACKed; EXIT_FATAL when
 * one was not (failed, timed out, a row stopped the run under policy =
 * halt), an event id asked for was not found, nothing matched, or a
 * connection failed; EXIT_USAGE for a bad configuration or argument (a
 * timestamp or event id PostgreSQL cannot read, no such table or column). */
int republish_run(const struct config *cfg, const struct repub_options *o);

#endif
