/*
 * pgoutput.h - decoder for the built-in pgoutput logical decoding plugin
 * (protocol version 1, text values), pure: bytes in, struct repl_msg out.
 *
 * The decoder keeps a relation cache keyed by relid: pgoutput sends a
 * Relation message before the first change of a table in a session and
 * again after its layout changes (ALTER TABLE); the newest layout wins.
 */
#ifndef OUTBOXD_PGOUTPUT_H
#define OUTBOXD_PGOUTPUT_H

#include <stddef.h>

#include "decode.h"

struct pgoutput_decoder;

/* Returns a new decoder, or NULL on out of memory. Free with
 * pgoutput_decoder_free(). */
struct pgoutput_decoder *pgoutput_decoder_new(void);
void pgoutput_decoder_free(struct pgoutput_decoder *d);

/*
 * Decodes one pgoutput message (the payload of one XLogData frame, i.e. the
 * bytes after the 25-byte 'w' header). Returns 0 and fills *out, or -1 and
 * writes a one-line reason into err (which names the message type and the
 * offset/field at fault). Never reads outside buf[0..len). Changes (I/U/D)
 * for a relid with no cached Relation are an error.
 */
int pgoutput_decode(struct pgoutput_decoder *d, const char *buf, size_t len,
                    struct repl_msg *out, char *err, size_t errlen);

/* Looks up a cached relation; NULL when unknown. */
const struct relation *pgoutput_relation(const struct pgoutput_decoder *d,
                                         uint32_t relid);

#endif
