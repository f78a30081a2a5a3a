/*
 * offset.h - the offset file: the last commit end LSN whose events were all
 * ACKed by the broker. Written atomically (temp file, fsync, rename, fsync
 * of the directory) before that LSN is confirmed to Postgres, so a crash
 * leaves either the old or the new value, never a torn one.
 * File format: one line, the LSN as Postgres prints it ("16/B374D848\n").
 */
#ifndef OUTBOXD_OFFSET_H
#define OUTBOXD_OFFSET_H

#include <stddef.h>

#include "lsn.h"

/* Returns 1 and sets *out when the file holds an LSN, 0 when the file does
 * not exist, -1 with a reason in err when it cannot be read or is corrupt. */
int offset_read(const char *path, lsn_t *out, char *err, size_t errlen);

/* Returns 0, or -1 with a reason in err. */
int offset_write(const char *path, lsn_t lsn, char *err, size_t errlen);

#endif
