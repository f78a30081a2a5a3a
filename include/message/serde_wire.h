/*
 * serde_wire.h - the Schema Registry wire format around a record's value
 * (or key), as Confluent's serializers write it and every registry-aware
 * deserializer (Confluent's, Apicurio's in its Confluent-compatible mode,
 * Karapace's clients) reads it. Pure: no I/O.
 *
 *   byte 0       magic byte, 0
 *   bytes 1-4    the schema id, big-endian signed 32-bit
 *   Protobuf only: the message-index list, which message of the schema's
 *                .proto file the value is: its length then each index, as
 *                zig-zag varints; the common [0] (the first message) is
 *                written as the single byte 0
 *   the rest     the encoded value (Avro binary, JSON text, Protobuf bytes)
 */
#ifndef OUTBOXD_SERDE_WIRE_H
#define OUTBOXD_SERDE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define SERDE_WIRE_MAGIC 0
#define SERDE_WIRE_PREFIX 5       /* magic byte and id */
#define SERDE_WIRE_MAX_INDEXES 16 /* message-index list entries at most */
/* The longest message-index list: its length and each index, 5 bytes each. */
#define SERDE_WIRE_INDEX_MAX (5 * (SERDE_WIRE_MAX_INDEXES + 1))

/* Writes the magic byte and id into out. Returns SERDE_WIRE_PREFIX. */
size_t serde_wire_prefix(unsigned char out[SERDE_WIRE_PREFIX], int32_t id);

/* Writes the message-index list idx[0..n) (n <= SERDE_WIRE_MAX_INDEXES)
 * into out (SERDE_WIRE_INDEX_MAX bytes); [0] as the single byte 0.
 * Returns the bytes written. */
size_t serde_wire_indexes(unsigned char *out, const int *idx, int n);

/* Reads a framed value: 0 with *id and the offset of what follows the
 * prefix, or -1 when buf is shorter than the prefix or its magic byte is
 * not 0. */
int serde_wire_read(const unsigned char *buf, size_t len, int32_t *id, size_t *body);

/* Parses a message-index list "0", "1.0", "2,3" (dots or commas) into
 * idx. Returns the count, or -1 when it is empty, not non-negative
 * integers or longer than SERDE_WIRE_MAX_INDEXES. */
int serde_wire_parse_indexes(const char *s, int idx[SERDE_WIRE_MAX_INDEXES]);

#endif
