/*
 * pubnotice.c - PostgreSQL 18's "skipped loading publication" notice as a
 * stream error (see pubnotice.h).
 */
#include "pubnotice.h"

#include <stdio.h>
#include <string.h>

bool pubnotice_is_skip(const char *text, const char *sqlstate)
{
    if (text && strstr(text, "skipped loading publication")) return true;
    /* A translated message keeps its SQLSTATE; on the replication stream
     * pgoutput sends no other notice with it. */
    return sqlstate && strcmp(sqlstate, PUBNOTICE_SQLSTATE) == 0;
}

void pubnotice_stream_error(const char *publication, const char *text, char *err,
                            size_t errlen)
{
    if (!err || errlen == 0) return;
    /* The first words are 15-17's error, which slot_says_publication_missing()
     * recognises; the rest says why the stream was ended on a warning. */
    snprintf(err, errlen,
             "publication \"%s\" does not exist at this point in the WAL: the server "
             "skips it and goes on (PostgreSQL 18 and later), which would send none of "
             "the outbox's inserts until it exists again; outboxd ends the stream instead "
             "(server notice: %s)",
             publication ? publication : "", text ? text : "");
    /* One line: the notice's DETAIL and HINT follow newlines. */
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
}
