/*
 * serde_json.c - the payload walkers' shared helpers (serde_int.h).
 */
#include "serde_int.h"

#include <inttypes.h>
#include <stdio.h>

size_t serde_path_push(struct serde_path *p, const char *name, size_t index)
{
    size_t was = p->len, room = sizeof(p->text) - p->len;
    int n = name ? snprintf(p->text + p->len, room, ".%s", name)
                 : snprintf(p->text + p->len, room, "[%zu]", index);
    if (n > 0 && (size_t)n < room) p->len += (size_t)n;
    p->text[p->len] = '\0';
    return was;
}

void serde_path_pop(struct serde_path *p, size_t was)
{
    p->len = was;
    p->text[was] = '\0';
}

const char *serde_json_kind(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

void serde_budget_init(struct serde_budget *b, size_t len, char *err, size_t errlen)
{
    b->steps = 0;
    b->max_steps = SERDE_STEPS_BASE + (uint64_t)SERDE_STEPS_PER_BYTE * len;
    b->err = err;
    b->errlen = errlen;
}

int serde_budget_spend(struct serde_budget *b, uint64_t n, int depth, const struct serde_path *p)
{
    b->steps += n;
    if (depth > SERDE_MAX_DEPTH) {
        snprintf(b->err, b->errlen,
                 "%s: the schema nests deeper than %d subschemas here, outboxd's limit per "
                 "payload (deploy/schema-registry.md)",
                 p->text, SERDE_MAX_DEPTH);
        return SERDE_LIMIT;
    }
    if (b->steps > b->max_steps) {
        snprintf(b->err, b->errlen,
                 "%s: checking the payload against the schema takes more than %" PRIu64
                 " steps, outboxd's limit per payload (%d + %d per byte; "
                 "deploy/schema-registry.md): the schema's anyOf, oneOf or union branches "
                 "re-check the same values",
                 p->text, b->max_steps, SERDE_STEPS_BASE, SERDE_STEPS_PER_BYTE);
        return SERDE_LIMIT;
    }
    return 0;
}
