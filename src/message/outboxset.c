/*
 * outboxset.c - the outbox tables of one relay, and which one a relation
 * is, cached per relation layout (see outboxset.h).
 */
#include "outboxset.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "pgsql.h"

void outbox_set_init(struct outbox_set *s) { memset(s, 0, sizeof(*s)); }

int outbox_set_add(struct outbox_set *s, struct outbox_map *m, const char *name)
{
    struct outbox_map *maps = realloc(s->maps, (s->n + 1) * sizeof(*maps));
    if (maps) s->maps = maps;
    char **names = maps ? realloc(s->names, (s->n + 1) * sizeof(*names)) : NULL;
    if (names) s->names = names;
    char *copy = name ? strdup(name) : NULL;
    if (!maps || !names || (name && !copy)) {
        free(copy);
        outbox_map_free(m);
        return -1;
    }
    s->maps[s->n] = *m;
    s->names[s->n] = copy;
    s->n++;
    memset(s->seen, 0, sizeof(s->seen)); /* indexes may have changed meaning */
    s->last_layout = 0;
    return 0;
}

void outbox_set_free(struct outbox_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        outbox_map_free(&s->maps[i]);
        free(s->names[i]);
    }
    free(s->maps);
    free(s->names);
    outbox_set_init(s);
}

static int find_by_name(const struct outbox_set *s, const struct relation *rel)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(rel->relname, s->maps[i].table) == 0 &&
            strcmp(rel->nspname, s->maps[i].schema) == 0)
            return (int)i;
    return -1;
}

int outbox_set_lookup(struct outbox_set *s, const struct relation *rel)
{
    if (rel->layout_id == 0) return find_by_name(s, rel);
    int index = -2;
    for (int i = 0; i < OUTBOX_SET_SEEN && index == -2; i++)
        if (s->seen[i].layout_id == rel->layout_id) index = s->seen[i].index;
    if (index == -2) {
        index = find_by_name(s, rel);
        s->seen[s->next_seen].layout_id = rel->layout_id;
        s->seen[s->next_seen].index = index;
        s->next_seen = (s->next_seen + 1) % OUTBOX_SET_SEEN;
    }
    s->last_layout = rel->layout_id;
    s->last_index = index;
    return index;
}

int outbox_set_duplicate(const struct outbox_set *s, size_t *other)
{
    for (size_t i = 1; i < s->n; i++)
        for (size_t j = 0; j < i; j++)
            if (!strcmp(s->maps[i].table, s->maps[j].table) &&
                !strcmp(s->maps[i].schema, s->maps[j].schema)) {
                *other = j;
                return (int)i;
            }
    return -1;
}

int outbox_set_find_prefix(const struct outbox_set *s, const char *prefix)
{
    if (!prefix) return -1;
    for (size_t i = 0; i < s->n; i++)
        if (s->maps[i].message_prefix && !strcmp(s->maps[i].message_prefix, prefix))
            return (int)i;
    return -1;
}

bool outbox_set_has_prefix(const struct outbox_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->maps[i].message_prefix) return true;
    return false;
}

int outbox_set_duplicate_prefix(const struct outbox_set *s, size_t *other)
{
    for (size_t i = 1; i < s->n; i++) {
        if (!s->maps[i].message_prefix) continue;
        for (size_t j = 0; j < i; j++)
            if (s->maps[j].message_prefix &&
                !strcmp(s->maps[i].message_prefix, s->maps[j].message_prefix)) {
                *other = j;
                return (int)i;
            }
    }
    return -1;
}

/* FNV-1a over the NUL-terminated s, continuing from h. */
static uint64_t fnv1a(uint64_t h, const char *s)
{
    do {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    } while (*s++);
    return h;
}

uint64_t outbox_set_fingerprint(const struct outbox_set *s)
{
    /* A sum of each entry's hash: the same set in any order gives the same
     * value (two maps never share a table or a prefix). */
    uint64_t sum = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct outbox_map *m = &s->maps[i];
        uint64_t h = fnv1a(fnv1a(fnv1a(0xcbf29ce484222325ULL, "table"), m->schema), m->table);
        sum += h;
        if (m->message_prefix) sum += fnv1a(fnv1a(0xcbf29ce484222325ULL, "prefix"),
                                            m->message_prefix);
    }
    return sum ? sum : 1;
}

char *outbox_set_tables(const struct outbox_set *s)
{
    size_t len = 1;
    for (size_t i = 0; i < s->n; i++)
        len += strlen(s->maps[i].schema) + strlen(s->maps[i].table) + 3;
    char *out = malloc(len);
    if (!out) return NULL;
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < s->n; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s.%s", i ? ", " : "",
                                 s->maps[i].schema, s->maps[i].table);
    return out;
}

char *outbox_set_array(const struct outbox_set *s, bool tables)
{
    struct pgsql_array a = {0};
    for (size_t i = 0; i < s->n; i++)
        pgsql_array_add(&a, tables ? s->maps[i].table : s->maps[i].schema);
    const char *text = pgsql_array_text(&a);
    char *out = text ? strdup(text) : NULL;
    pgsql_array_free(&a);
    return out;
}
