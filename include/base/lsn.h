/*
 * lsn.h - PostgreSQL log sequence numbers.
 *
 * An LSN is a 64-bit byte position in the WAL. Postgres prints it as two
 * 32-bit hex halves, "%X/%X"; outboxd prints and parses it the same way so
 * that log lines, headers and the offset file can be pasted into SQL.
 */
#ifndef OUTBOXD_LSN_H
#define OUTBOXD_LSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t lsn_t;

#define LSN_INVALID ((lsn_t)0)
/* "FFFFFFFF/FFFFFFFF" plus NUL. */
#define LSN_STRLEN 18

/* Formats lsn as Postgres does into buf (at least LSN_STRLEN bytes); returns buf. */
char *lsn_format(lsn_t lsn, char *buf);

/* Parses "%X/%X" (the whole string). Returns true on success. */
bool lsn_parse(const char *s, lsn_t *out);

#endif
