/*
 * relcache.h - relations (struct relation, decode.h) and the cache that owns
 * them, shared by the output-plugin decoders (pgoutput.c, wal2json.c); plus
 * the growable scratch array the decoders put tuple values in.
 *
 * The cache is an open-addressing hash keyed by relid. pgoutput names
 * relations by the relid the server sends; wal2json, which sends none, looks
 * them up by schema and table (relcache_find) and assigns relids itself.
 */
#ifndef OUTBOXD_RELCACHE_H
#define OUTBOXD_RELCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"

/* Postgres' MaxTupleAttributeNumber: no tuple can have more columns. */
#define REL_MAX_COLS 1664

/* Allocates a relation with ncols zeroed columns (names NULL) and copies of
 * nsp and name. NULL on out of memory. Free with relation_free(). */
struct relation *relation_new(uint32_t relid, const char *nsp, const char *name,
                              char replident, int ncols);

/* Frees rel, its strings and every non-NULL column name; NULL is fine. */
void relation_free(struct relation *rel);

struct relcache;

/* NULL on out of memory. Free with relcache_free(), which frees every
 * cached relation. */
struct relcache *relcache_new(void);
void relcache_free(struct relcache *c);

/* Stores rel, taking ownership; a cached relation with the same relid is
 * freed. Returns -1 on out of memory, in which case rel is still the
 * caller's and the cache is unchanged. */
int relcache_put(struct relcache *c, struct relation *rel);

/* The cached relation with this relid, or NULL. */
const struct relation *relcache_get(const struct relcache *c, uint32_t relid);

/* A cached relation named nsp.relname, or NULL. Scans the whole table:
 * meant for streams of few tables, with the caller remembering its last
 * hit. */
const struct relation *relcache_find(const struct relcache *c, const char *nsp,
                                     const char *relname);

/* Frees and forgets the relation with this relid; returns -1 when there is
 * none. */
int relcache_remove(struct relcache *c, uint32_t relid);

/* Number of cached relations. */
size_t relcache_count(const struct relcache *c);

/* Makes the array *values (of *cap entries, may be NULL/0) hold at least n
 * entries, growing it by doubling (the old entries are kept). Returns -1
 * on out of memory, leaving *values and *cap as they were. */
int col_values_reserve(struct col_value **values, size_t *cap, size_t n);

#endif
