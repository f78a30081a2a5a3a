/*
 * pgwire.h - framing of the PostgreSQL frontend/backend protocol (v3): just
 * what outboxd needs to read a replication stream from the socket itself
 * (pure: bytes in, messages out).
 *
 * Every message: Byte1 type, Int32 length (counting itself, not the type),
 * then length - 4 bytes of body. Backend messages seen on a walsender
 * connection once START_REPLICATION has been sent:
 *   CopyBothResponse 'W'  Int8 format, Int16 ncols, Int16[ncols] formats
 *   CopyData         'd'  Byte(n): one replication sub-protocol frame
 *   CopyDone         'c'  (the server ended the stream)
 *   ErrorResponse    'E'  { Byte1 field code, String value }*, Byte1 0
 *   NoticeResponse   'N'  the same fields
 *   ParameterStatus  'S'  String name, String value
 *   CommandComplete  'C', ReadyForQuery 'Z' (after CopyDone)
 * Frontend messages outboxd writes itself:
 *   CopyData 'd' (standby status updates), CopyDone 'c'.
 */
#ifndef OUTBOXD_PGWIRE_H
#define OUTBOXD_PGWIRE_H

#include <stddef.h>

#define PGWIRE_HEADER_LEN 5
/* Longest message accepted: the server sends none longer than 1 GB of body
 * (MaxAllocSize); anything beyond is a corrupt stream. */
#define PGWIRE_MAX_LEN (0x40000000L + 64)

struct pgwire_msg {
    char type;
    const char *body; /* borrowed from the input */
    size_t len;       /* of body */
};

/* Splits the first message off buf[0..avail). Returns its whole size
 * (header and body) when it is complete; 0 when more bytes are needed,
 * with *need the whole size once the header is in (else 5); -1 when the
 * length field is impossible, with err set. */
long pgwire_next(const char *buf, size_t avail, struct pgwire_msg *out, size_t *need,
                 char *err, size_t errlen);

/* Formats an ErrorResponse/NoticeResponse body as libpq does by default
 * ("ERROR:  message", then "\nDETAIL:  ..." and "\nHINT:  ..." when
 * present) into out, and its SQLSTATE into sqlstate ("" if none). Returns
 * 0 when the severity is FATAL or PANIC (the server closes the connection),
 * 1 for other severities, -1 when the body is malformed (out says so). */
int pgwire_error_text(const char *body, size_t len, char *out, size_t outlen,
                      char sqlstate[6]);

/* Writes a CopyData header for a payload of len bytes into out. */
void pgwire_copydata_header(char out[PGWIRE_HEADER_LEN], size_t len);

/* Writes CopyDone into out. */
void pgwire_copydone(char out[PGWIRE_HEADER_LEN]);

#endif
