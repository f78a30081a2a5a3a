/*
 * relcache.c - relations and the relation cache shared by the decoders.
 *
 * The cache is an open-addressing hash of relation pointers keyed by relid:
 * linear probing, Knuth's multiplicative (Fibonacci) hash taking the top
 * bits of relid * 2654435761 (the low bits would map relids that differ
 * only in high bits, e.g. multiples of the table size, to one slot), never
 * more than half full, doubled when it would be. Removal shifts later entries of the same
 * probe run back into the hole (no tombstones), so lookups stay a short scan that stops at
 * the first empty slot.
 */
#include "relcache.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Initial number of slots is 1 << RELCACHE_INIT_BITS. */
#define RELCACHE_INIT_BITS 4
/* Initial size of a scratch value array. */
#define VALUES_INIT 16

struct relcache {
    struct relation **slots; /* cap entries, NULL = empty; owns relations */
    size_t cap;              /* 1 << bits */
    unsigned bits;           /* 4..31 */
    size_t count;            /* used slots; kept <= cap / 2 */
};

/* ---------------------------------------------------------------------- */
/* Relations                                                               */
/* ---------------------------------------------------------------------- */

/* The source of layout ids: a counter, not state any module reads. */
static atomic_uint_fast64_t next_layout_id = 1;

struct relation *relation_new(uint32_t relid, const char *nsp, const char *name,
                              char replident, int ncols)
{
    struct relation *rel = calloc(1, sizeof(*rel));

    if (!rel) return NULL;
    rel->layout_id = (uint64_t)atomic_fetch_add(&next_layout_id, 1);
    rel->relid = relid;
    rel->replident = replident;
    rel->ncols = ncols;
    rel->nspname = strdup(nsp);
    rel->relname = strdup(name);
    rel->cols = calloc(ncols > 0 ? (size_t)ncols : 1, sizeof(*rel->cols));
    if (!rel->nspname || !rel->relname || !rel->cols) {
        relation_free(rel);
        return NULL;
    }
    return rel;
}

void relation_free(struct relation *rel)
{
    if (!rel) return;
    if (rel->cols)
        for (int i = 0; i < rel->ncols; i++)
            free(rel->cols[i].name);
    free(rel->cols);
    free(rel->nspname);
    free(rel->relname);
    free(rel);
}

/* ---------------------------------------------------------------------- */
/* The cache                                                               */
/* ---------------------------------------------------------------------- */

/* Home slot of relid in a table of 1 << bits slots. */
static size_t slot_of(uint32_t relid, unsigned bits)
{
    return (size_t)((uint32_t)(relid * UINT32_C(2654435761)) >> (32 - bits));
}

/* Returns the slot holding relid, or the empty slot where it would go. */
static struct relation **cache_slot(struct relation **slots, unsigned bits, uint32_t relid)
{
    size_t mask = ((size_t)1 << bits) - 1, i = slot_of(relid, bits);

    while (slots[i] && slots[i]->relid != relid)
        i = (i + 1) & mask;
    return &slots[i];
}

/* Doubles the table and rehashes; returns -1 on out of memory. */
static int cache_grow(struct relcache *c)
{
    size_t ncap = c->cap * 2;
    struct relation **nslots;

    if (c->bits >= 31) return -1;
    nslots = calloc(ncap, sizeof(*nslots));
    if (!nslots) return -1;
    for (size_t i = 0; i < c->cap; i++)
        if (c->slots[i]) *cache_slot(nslots, c->bits + 1, c->slots[i]->relid) = c->slots[i];
    free(c->slots);
    c->slots = nslots;
    c->cap = ncap;
    c->bits++;
    return 0;
}

struct relcache *relcache_new(void)
{
    struct relcache *c = calloc(1, sizeof(*c));

    if (!c) return NULL;
    c->bits = RELCACHE_INIT_BITS;
    c->cap = (size_t)1 << c->bits;
    c->slots = calloc(c->cap, sizeof(*c->slots));
    if (!c->slots) {
        free(c);
        return NULL;
    }
    return c;
}

void relcache_free(struct relcache *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->cap; i++)
        relation_free(c->slots[i]);
    free(c->slots);
    free(c);
}

int relcache_put(struct relcache *c, struct relation *rel)
{
    struct relation **slot = cache_slot(c->slots, c->bits, rel->relid);

    if (*slot) {
        relation_free(*slot);
        *slot = rel;
        return 0;
    }
    if ((c->count + 1) * 2 > c->cap) {
        if (cache_grow(c) < 0) return -1;
        slot = cache_slot(c->slots, c->bits, rel->relid);
    }
    *slot = rel;
    c->count++;
    return 0;
}

const struct relation *relcache_get(const struct relcache *c, uint32_t relid)
{
    return *cache_slot(c->slots, c->bits, relid);
}

const struct relation *relcache_find(const struct relcache *c, const char *nsp,
                                     const char *relname)
{
    for (size_t i = 0; i < c->cap; i++) {
        const struct relation *r = c->slots[i];
        if (r && strcmp(r->relname, relname) == 0 && strcmp(r->nspname, nsp) == 0) return r;
    }
    return NULL;
}

/* True when home slot h lies cyclically in (hole, j]: the entry at j may
 * not move back to hole, as lookups starting at h would then miss it. */
static bool stays(size_t hole, size_t j, size_t h)
{
    if (hole < j) return hole < h && h <= j;
    return hole < h || h <= j; /* the run wrapped around the end */
}

int relcache_remove(struct relcache *c, uint32_t relid)
{
    struct relation **slot = cache_slot(c->slots, c->bits, relid);
    size_t mask = c->cap - 1, hole, j;

    if (!*slot) return -1;
    relation_free(*slot);
    *slot = NULL;
    c->count--;
    hole = (size_t)(slot - c->slots);
    for (j = (hole + 1) & mask; c->slots[j]; j = (j + 1) & mask) {
        if (stays(hole, j, slot_of(c->slots[j]->relid, c->bits))) continue;
        c->slots[hole] = c->slots[j];
        c->slots[j] = NULL;
        hole = j;
    }
    return 0;
}

size_t relcache_count(const struct relcache *c)
{
    return c->count;
}

/* ---------------------------------------------------------------------- */
/* Scratch values                                                          */
/* ---------------------------------------------------------------------- */

int col_values_reserve(struct col_value **values, size_t *cap, size_t n)
{
    size_t ncap = *cap ? *cap : VALUES_INIT;
    struct col_value *nv;

    if (n <= *cap && *values) return 0;
    while (ncap < n)
        ncap *= 2;
    nv = realloc(*values, ncap * sizeof(*nv));
    if (!nv) return -1;
    *values = nv;
    *cap = ncap;
    return 0;
}
