/*
 * outboxset.h - the outbox tables one relay serves ([outbox] or the
 * [outbox.NAME] sections, config.h), and which of them a decoded relation
 * is. Pure: no I/O.
 *
 * The lookup runs for every decoded INSERT, so it is cached per relation
 * layout (relation.layout_id): the last layout's answer is checked
 * inline (an insert is most often into the table of the one before), then
 * the last OUTBOX_SET_SEEN layouts, so interleaved inserts into a few
 * tables compare names only when a relation's layout is new. Measured
 * (a throw-away loop of 20 M lookups, -O2, on the shared 2-core host; and
 * callgrind, 1 M lookups with the loop): one table, before sets
 * (outbox_is_table()) 5.7-6.1 ns and 38 instructions per lookup, with
 * this 1.5 ns and 14; three tables in turn (the worst case) 6.9 ns, 65.
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
    uint64_t last_layout; /* the last lookup's layout (0: none) ... */
    int last_index;       /* ... and its answer */
};

/* An empty set. */
void outbox_set_init(struct outbox_set *s);

/* Takes m (moved: the caller no longer frees it) as the next table,
 * named name (copied; NULL for the plain section). 0, or -1 on out of
 * memory (m freed). */
int outbox_set_add(struct outbox_set *s, struct outbox_map *m, const char *name);

void outbox_set_free(struct outbox_set *s);

/* outbox_set_find() past the last layout's answer. */
int outbox_set_lookup(struct outbox_set *s, const struct relation *rel);

/* The index of the map whose table rel is, or -1 when it is none of them. */
static inline int outbox_set_find(struct outbox_set *s, const struct relation *rel)
{
    if (rel->layout_id != 0 && rel->layout_id == s->last_layout) return s->last_index;
    return outbox_set_lookup(s, rel);
}

/* The index of the map whose message_prefix is prefix (the section whose
 * outbox messages those are, emitmsg.h), or -1 when none has it (or
 * prefix is NULL). A loop over the maps: a message is rarer than a row,
 * and sections are few. */
int outbox_set_find_prefix(const struct outbox_set *s, const char *prefix);

/* Whether any map has a message_prefix (pgoutput must send messages). */
bool outbox_set_has_prefix(const struct outbox_set *s);

/* The index of the first map whose message_prefix is the same as
 * another's, else -1 (a message must belong to one section); *other is
 * the earlier one. */
int outbox_set_duplicate_prefix(const struct outbox_set *s, size_t *other);

/* Which events the relay numbers inside a transaction: a fingerprint of
 * every map's table and message prefix, independent of their order (the
 * numbering counts every event in stream order, whichever map it is of).
 * The offset file and the progress record keep it beside a partly ACKed
 * transaction's count (offset.h, format 6), so that a restart configured
 * with other tables or prefixes does not skip by a count of other events
 * (resume.h). Never 0. */
uint64_t outbox_set_fingerprint(const struct outbox_set *s);

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
