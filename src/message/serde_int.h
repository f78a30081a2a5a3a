/*
 * serde_int.h - what the serde family's payload walkers share
 * (serde_avro.c, serde_jsonschema.c; internal, not part of serde.h): the
 * path into a JSON payload that their errors name ("$.items[2].qty"), a
 * JSON value's kind in words, and the limits of one payload's walk. Pure.
 */
#ifndef OUTBOXD_SERDE_INT_H
#define OUTBOXD_SERDE_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

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

/*
 * What one payload's walk may cost. A schema from the registry is not
 * outboxd's to trust: anyOf/oneOf over a recursive $ref, or an Avro union
 * of records that recurse, re-check the same values once per branch at
 * every level (2^60 checks for 60 levels), on the relay's own thread. So
 * every walk counts its steps (one subschema or Avro type applied to one
 * value; an enum value compared; an item of a uniqueItems array) and its
 * depth (subschemas, $refs and union branches entered), and stops at
 * SERDE_MAX_DEPTH or at SERDE_STEPS_BASE + SERDE_STEPS_PER_BYTE steps per
 * byte of the payload: the payload is then a mismatch whose error names
 * the limit, never a stall. A payload that only fits a schema in more
 * steps than that is one no consumer should be asked to check either.
 */
#define SERDE_MAX_DEPTH 256
#define SERDE_STEPS_BASE 200000
#define SERDE_STEPS_PER_BYTE 4

/* What the walkers return, besides 0 and -1 (a mismatch): a limit was
 * reached. It is never a branch that does not fit: it ends the walk. */
#define SERDE_LIMIT (-2)

struct serde_budget {
    uint64_t steps, max_steps;
    char *err; /* the walk's own error text: a limit reached inside a branch is said here */
    size_t errlen;
};

/* The budget of a payload of len bytes; its limit errors go into err. */
void serde_budget_init(struct serde_budget *b, size_t len, char *err, size_t errlen);

/* Spends n steps at depth (at path). 0, or SERDE_LIMIT with b->err saying
 * which limit was reached, where. */
int serde_budget_spend(struct serde_budget *b, uint64_t n, int depth, const struct serde_path *p);

#endif
