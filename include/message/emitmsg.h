/*
 * emitmsg.h - the table-less outbox: the content of a logical decoding
 * message (pg_logical_emit_message(true, prefix, content), written by
 * sql/outbox_emit.sql's outbox_emit() or by any client) read into the
 * row an outbox table would have held, so that outbox_event_build()
 * (outbox.h) maps it exactly like a row: topic template, key, headers
 * (commit_lsn included), the same poison faults. Pure: no I/O.
 *
 * The content format (version 1) is written above the parser in
 * emitmsg.c and in sql/README.md.
 *
 * The pseudo-row: a struct relation named
 * pg_logical_emit_message.<prefix> whose columns are the section's
 * configured column names ([outbox] column.event_id ... column.payload),
 * then every column the section's additional_placement and
 * span_context_column name. The content's fields fill the mapped columns
 * (a missing or null field is a NULL column, so a message without an
 * event_id is a NULL_EVENT_ID poison event like a row without one); a
 * content header whose name is such a placed column fills that column
 * (and is placed as configured), and every other content header becomes
 * a Kafka header of its own name, after outboxd's own headers.
 */
#ifndef OUTBOXD_EMITMSG_H
#define OUTBOXD_EMITMSG_H

#include <stddef.h>

#include "decode.h"
#include "lsn.h"
#include "outbox.h"

/* The content format versions this outboxd reads ("v"). */
#define EMITMSG_VERSION 1

/* Content headers ("headers") per message at most. */
#define EMITMSG_MAX_HEADERS 16

/* The default prefix of sql/outbox_emit.sql's outbox_emit(). */
#define EMITMSG_DEFAULT_PREFIX "outbox"

struct emitmsg;

/* A reader of messages for map m's section, whose messages carry prefix
 * (used in the pseudo relation's name, for errors). m must outlive it and
 * keep its columns, headers and span column. NULL on out of memory. Free
 * with emitmsg_free(). */
struct emitmsg *emitmsg_new(const struct outbox_map *m, const char *prefix);
void emitmsg_free(struct emitmsg *p);

/*
 * Reads content[0..len) into the pseudo-row. 0: *rel, *values and
 * *nvalues describe it (borrowed from p and content, valid until the next
 * call or the free). -1: the content cannot be read (not JSON, not an
 * object, "v" missing or not a version this outboxd reads, a field of the
 * wrong type, an unknown field, bad base64, too many headers); err says
 * what and where.
 */
int emitmsg_parse(struct emitmsg *p, const char *content, size_t len,
                  const struct relation **rel, const struct col_value **values, int *nvalues,
                  char *err, size_t errlen);

/* The pseudo-row of the last emitmsg_parse() (or emitmsg_event_build()
 * that read its content), as that call returned it: for what is rendered
 * from the row after the build (the registry subject, serde.h). */
void emitmsg_last_row(const struct emitmsg *p, const struct relation **rel,
                      const struct col_value **values, int *nvalues);

/*
 * Builds the event of one message, as outbox_event_build() builds a row's
 * (same return, faults and err), with the content's other headers
 * appended. Content that cannot be read (emitmsg_parse() fails) is the
 * poison event OF_BAD_MESSAGE: no key, the raw content as its value (a
 * dead-letter record keeps it whole), no topic (topic_error says why), the
 * commit LSN header only. ev borrows from p and content until the next call.
 */
int emitmsg_event_build(struct emitmsg *p, const struct outbox_map *m, const char *content,
                        size_t len, lsn_t commit_lsn, struct outbox_event *ev, char *err,
                        size_t errlen);

#endif
