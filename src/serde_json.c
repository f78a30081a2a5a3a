/*
 * serde_json.c - the payload walkers' shared helpers (serde_int.h).
 */
#include "serde_int.h"

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
