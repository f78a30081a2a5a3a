/*
 * bytea.h - a bytea value's bytes from the text PostgreSQL prints for it.
 * Pure: no I/O, no allocation.
 *
 * byteaout writes one of two formats, as the session's bytea_output says:
 *
 *   hex     "\x" followed by two hex digits per byte ("\x00ff41")
 *   escape  bytes 0x20..0x7e but '\' as they are, '\' as "\\", every
 *           other byte as '\' and three octal digits ("\000\377A")
 *
 * An escape text never starts with "\x" (a '\' byte is written "\\"), so
 * the two are told apart by their first two characters. wal2json's
 * format-version 2 sends a bytea column as the hex format's digits alone,
 * without "\x" (bytea_hex_decode()).
 */
#ifndef OUTBOXD_BYTEA_H
#define OUTBOXD_BYTEA_H

#include <stdbool.h>
#include <stddef.h>

/* PostgreSQL's type OID of bytea. */
#define BYTEA_OID 17

/* The most bytes bytea_text_decode() writes for a text of len bytes. */
#define BYTEA_DECODED_MAX(len) (len)

/* Decodes s[0..len), hex digits only (either case, an even count), into
 * out (at least len / 2 bytes; out may be s itself). Returns the number of
 * bytes, or -1 with the reason in err. */
long bytea_hex_decode(const char *s, size_t len, char *out, char *err, size_t errlen);

/* Decodes byteaout's text s[0..len), hex or escape format, into out (at
 * least BYTEA_DECODED_MAX(len) bytes; not s itself). Returns the number of
 * bytes, or -1 with the reason in err (neither format). */
long bytea_text_decode(const char *s, size_t len, char *out, char *err, size_t errlen);

#endif
