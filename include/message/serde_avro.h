/*
 * serde_avro.h - a JSON payload encoded as Avro binary with a schema the
 * registry holds ([outbox] value_converter = avro; serde.h). Pure: no I/O;
 * the encoding itself is libavro's (avro-c), this file only walks the
 * JSON along the schema and fills libavro's generic value.
 *
 * How JSON meets the schema (the JSON that applications write, not Avro's
 * own JSON encoding, though that is read too where it differs):
 *   - record: a JSON object; every field of the schema must be present,
 *     except a field whose type is a union with null (then null); a member
 *     the schema does not have is a mismatch (a misspelt field would be
 *     lost otherwise);
 *   - int/long: a JSON integer in range; float/double: any JSON number;
 *     boolean; null; string: a JSON string; bytes and fixed: a JSON string
 *     of code points 0-255 (Avro's JSON encoding of bytes), fixed of the
 *     schema's size;
 *   - enum: a JSON string naming a symbol;
 *   - array: a JSON array; map: a JSON object;
 *   - union: Avro's JSON form {"<branch type name>": value} when the value
 *     is an object of one member named so, else the first branch the value
 *     fits.
 * A payload that does not fit is a mismatch, and the error names the path
 * (e.g. "$.items[2].price: a string where the schema has double"). So is
 * one whose walk reaches the limits of serde_int.h (union branches tried
 * at every level of a recursive schema; nesting): the error names the
 * limit.
 */
#ifndef OUTBOXD_SERDE_AVRO_H
#define OUTBOXD_SERDE_AVRO_H

#include <stddef.h>

struct serde_avro;

/* Compiles the schema text the registry returned. NULL with the reason in
 * err when it is not a schema libavro reads. Free with serde_avro_free(). */
struct serde_avro *serde_avro_new(const char *schema_json, size_t len, char *err, size_t errlen);
void serde_avro_free(struct serde_avro *a);

/* Encodes the JSON text json[0..len) as Avro binary. 0: *out (len *outlen)
 * points into a's buffer, valid until the next call on a. -1: the payload
 * is not JSON or does not fit the schema, or its walk reached a limit (err
 * says where and why). */
int serde_avro_encode(struct serde_avro *a, const char *json, size_t len, const char **out,
                      size_t *outlen, char *err, size_t errlen);

#endif
