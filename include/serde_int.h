/*
 * serde_int.h - what the serde family's payload walkers share
 * (serde_avro.c, serde_jsonschema.c; internal, not part of serde.h): the
 * path into a JSON payload that their errors name ("$.items[2].qty"), and
 * a JSON value's kind in words. Pure.
 */
#ifndef OUTBOXD_SERDE_INT_H
#define OUTBOXD_SERDE_INT_H

#include <jansson.h>
#include <stddef.h>

/* Where in the payload a walk is: "$", "$.a", "$.a[3]" (cut at its size). */
struct serde_path {
    char text[256];
    size_t len;
};

#define SERDE_PATH_ROOT {.text = "$", .len = 1}

/* Appends ".name" (name not NULL) or "[index]"; returns the length before,
 * for serde_path_pop(). */
size_t serde_path_push(struct serde_path *p, const char *name, size_t index);
void serde_path_pop(struct serde_path *p, size_t was);

/* "an object", "an array", "a string", "an integer", "a number", "a
 * boolean" or "null". */
const char *serde_json_kind(const json_t *j);

#endif
