/*
 * jsonvalue.h - the message value as Kafka Connect's JsonConverter
 * (schemas.enable=false) writes what Debezium's Outbox Event Router hands
 * it: the payload column as a JSON string, or, with envelope placements,
 * an object {"payload": ..., "<alias>": ..., ...}. Pure: no I/O.
 *
 * Strings are escaped as Jackson (JsonConverter's serializer) escapes
 * them: '"' and '\' with a backslash; \b \t \n \f \r; other bytes below
 * 0x20 as \u00XX (upper-case hex); a character beyond the Basic
 * Multilingual Plane (a 4-byte UTF-8 sequence, an emoji) as its UTF-16
 * surrogate pair \uD83D\uDE80 (seen from Kafka Connect 4.3's JsonConverter
 * in real.debezium_conformance); everything else, other UTF-8 included, as
 * it is. Compact: no blanks.
 */
#ifndef OUTBOXD_JSONVALUE_H
#define OUTBOXD_JSONVALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer; the caller owns data and frees it. */
struct jbuf {
    char *data;
    size_t len, cap;
};

/* How one envelope field (or the payload) is written, from its column's
 * type OID: a JSON number (int2, int4, int8: Connect's INT16/32/64),
 * true/false (bool, from PostgreSQL's t/f), a base64 string of the bytes
 * (bytea: Connect's BYTES, which JsonConverter writes so; Debezium's
 * binary.handling.mode = bytes, its default), or a string (everything else
 * Debezium hands on as a string: text, varchar, uuid, json, jsonb, ...). */
enum jv_kind { JV_STRING, JV_NUMBER, JV_BOOL, JV_BYTES };
enum jv_kind jsonvalue_kind(uint32_t typid);

/* Appends s[0..len) as a JSON string (quoted, escaped). 0, or -1 on out of
 * memory. */
int jsonvalue_string(struct jbuf *b, const char *s, size_t len);

/* Appends s[0..len) as a JSON string of its standard base64 (RFC 4648,
 * with '=' padding), as Jackson writes a byte[]. 0, or -1 on out of
 * memory. */
int jsonvalue_base64(struct jbuf *b, const char *s, size_t len);

/* Appends raw bytes. 0, or -1 on out of memory. */
int jsonvalue_raw(struct jbuf *b, const char *s, size_t len);

/* Appends one field's value: null when is_null, else as kind says
 * (a bool that is not "t" or "f", or a number that is not digits with an
 * optional leading '-', is written as a string, never as broken JSON). 0,
 * or -1 on out of memory. */
int jsonvalue_field(struct jbuf *b, enum jv_kind kind, bool is_null, const char *data,
                    size_t len);

#endif
