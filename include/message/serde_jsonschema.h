/*
 * serde_jsonschema.h - a JSON payload checked against the subject's JSON
 * Schema before it is framed ([outbox] value_converter = json_schema with
 * value_validate = true; serde.h). Pure: no I/O.
 *
 * The keywords evaluated (drafts 4 to 2020-12, as Confluent's and
 * Apicurio's serializers use them): type, enum, const; properties,
 * required, additionalProperties, minProperties, maxProperties; items (one
 * schema for every item), minItems, maxItems, uniqueItems; minimum,
 * maximum, exclusiveMinimum, exclusiveMaximum (draft 4's boolean form
 * too), multipleOf; minLength, maxLength (in code points); allOf, anyOf,
 * oneOf, not; $ref to the schema's own definitions ("#", "#/definitions/
 * NAME", "#/$defs/NAME"). Annotations are ignored: $schema, $id, title,
 * description, default, examples, $comment, format (an annotation since
 * draft 2019-09), readOnly, writeOnly, deprecated, and definitions/$defs
 * themselves.
 *
 * A schema that uses any other keyword (pattern, patternProperties, if/
 * then/else, a remote $ref, ...) is refused when it is compiled, naming
 * the keyword: outboxd never claims to have validated what it did not
 * evaluate. So is one whose $ref is not a string, or points at something
 * that is not a schema outboxd evaluates (every target is compiled, even
 * one inside a const or an example), and one whose $refs and combinators
 * loop without going into the payload ({"$ref": "#"}, {"anyOf":
 * [{"$ref": "#"}]}), which no payload could ever be checked against.
 *
 * A payload is checked within the limits of serde_int.h (steps and depth):
 * one that needs more fails, and the error names the limit.
 */
#ifndef OUTBOXD_SERDE_JSONSCHEMA_H
#define OUTBOXD_SERDE_JSONSCHEMA_H

#include <stddef.h>

struct serde_jsonschema;

/* Compiles the schema text. NULL with the reason in err: not JSON, not a
 * schema (an object or a boolean), or a keyword outside the list above
 * (err names it and where). Free with serde_jsonschema_free(). */
struct serde_jsonschema *serde_jsonschema_new(const char *schema, size_t len, char *err,
                                              size_t errlen);
void serde_jsonschema_free(struct serde_jsonschema *s);

/* 0 when json[0..len) is JSON that the schema accepts; -1 with the first
 * failure in err, with its path ("$.items[2].qty: 7 is above the maximum
 * 5"), or the limit the check reached there. */
int serde_jsonschema_validate(const struct serde_jsonschema *s, const char *json, size_t len,
                              char *err, size_t errlen);

#endif
