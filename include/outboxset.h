/*
 * outboxset.h - the outbox tables one relay serves ([outbox] or the
 * [outbox.NAME] sections, config.h), and which of them a decoded relation
 * is. Pure: no I/O.
 *
 * The lookup runs for every decoded INSERT, so it is cached per relation
 * layout (relation.layout_id): a set of one map asks that map alone, as
 * a single-table relay always did; a set of several remembers the last
 * OUTBOX_SET_SEEN layouts it looked up, so interleaved inserts into a few
 * tables compare names only when a relation's layout is new.
 */
#ifndef OUTBOXD_OUTBOXSET_H
#define OUTBOXD_OUTBOXSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "outbox.h"

#define OUTBOX_SET_SEEN 16

struct outbox_set {
    struct outbox_map *maps; /* owned, n of them */
    char **names;            /* owned; names[i] NULL: the plain [outbox] */
    size_t n;
    struct {
        uint64_t layout_id; /* 0: empty */
        int index;          /* into maps, -1: not an outbox table */
    } seen[OUTBOX_SET_SEEN];
    unsigned next_seen; /* the slot the next new layout replaces */
};

/* An empty set. */
void outbox_set_init(struct outbox_set *s);

/* Takes m (moved: the caller no longer frees it) as the next table,
 * named name (copied; NULL for the plain section). 0, or -1 on out of
 * memory (m freed). */
int outbox_set_add(struct outbox_set *s, struct outbox_map *m, const char *name);

void outbox_set_free(struct outbox_set *s);

/* The index of the map whose table rel is, or -1 when it is none of them. */
int outbox_set_find(struct outbox_set *s, const struct relation *rel);

/* "schema.table, schema.table, ..." of every map, for messages and SQL
 * advice; malloc'd, the caller frees it; NULL on out of memory. */
char *outbox_set_tables(const struct outbox_set *s);

/* A PostgreSQL text[] literal of every map's schema (tables false) or
 * table name (tables true), in order: {"public","app"}; malloc'd, the
 * caller frees it; NULL on out of memory. */
char *outbox_set_array(const struct outbox_set *s, bool tables);

/* The index of the first map whose table is the same as another's, else
 * -1 (two sections may not share a table); *other is the earlier one. */
int outbox_set_duplicate(const struct outbox_set *s, size_t *other);

#endif
