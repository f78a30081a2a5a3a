/*
 * pubnotice.h - the replication stream's notice that pgoutput skipped the
 * publication (PostgreSQL 18 on), read as the stream error 15 to 17 give.
 * Pure: looks at the notice's text and SQLSTATE only.
 *
 * pgoutput reads the publication as of each change it decodes. When the
 * publication did not exist at that point of the WAL (dropped and created
 * again after the slot's position, or created after it), PostgreSQL 15 to
 * 17 fail the stream with ERROR 'publication "P" does not exist'; from 18
 * on the walsender sends WARNING 'skipped loading publication "P"'
 * (SQLSTATE 55000) and goes on without it, so the outbox's inserts of that
 * stretch are never sent. Read as a warning, outboxd would confirm the
 * slot past them: events lost without a word. The stream code ends the
 * stream on this notice instead, with pubnotice_stream_error()'s text,
 * which says 'publication "P" does not exist' as 15-17 do, so the daemon
 * explains and refuses the same way on every version (slotsetup.c).
 */
#ifndef OUTBOXD_PUBNOTICE_H
#define OUTBOXD_PUBNOTICE_H

#include <stdbool.h>
#include <stddef.h>

/* SQLSTATE of PostgreSQL 18's notice (ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE). */
#define PUBNOTICE_SQLSTATE "55000"

/* Whether a notice on the replication stream (its text as the server or
 * libpq formats it, and its SQLSTATE, "" if unknown) says pgoutput skipped
 * a publication: the English message, or SQLSTATE 55000 with any text
 * (a server with lc_messages in another language). */
bool pubnotice_is_skip(const char *text, const char *sqlstate);

/* The stream error for that notice: 'publication "<publication>" does not
 * exist at this point in the WAL ...' followed by the notice's text, into
 * err (errlen bytes, truncated). publication: the one outboxd streams (the
 * only one in START_REPLICATION's publication_names). */
void pubnotice_stream_error(const char *publication, const char *text, char *err,
                            size_t errlen);

#endif
