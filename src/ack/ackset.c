/*
 * ackset.c - the ACKed prefix of one transaction's events (see ackset.h).
 */
#include "ackset.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool bit_set(const struct ackset *a, uint64_t ord)
{
    uint64_t w = ord / 64;
    return w < a->nwords && (a->bits[w] >> (ord % 64) & 1u);
}

/* Makes bits cover ordinal ord. Returns 0 or -1 on out of memory. */
static int cover(struct ackset *a, uint64_t ord)
{
    size_t need = (size_t)(ord / 64) + 1;
    if (need <= a->nwords) return 0;
    size_t n = a->nwords ? a->nwords : 4;
    while (n < need) n *= 2;
    uint64_t *nb = realloc(a->bits, n * sizeof(*nb));
    if (!nb) return -1;
    memset(nb + a->nwords, 0, (n - a->nwords) * sizeof(*nb));
    a->bits = nb;
    a->nwords = n;
    return 0;
}

int ackset_add(struct ackset *a, uint64_t ord)
{
    if (ord < a->prefix || bit_set(a, ord)) return 1;
    if (ord != a->prefix) {
        if (cover(a, ord) != 0) return -1;
        a->bits[ord / 64] |= (uint64_t)1 << (ord % 64);
        return 0;
    }
    /* The gap closed: walk over what arrived ahead of it. */
    a->prefix++;
    while (bit_set(a, a->prefix)) a->prefix++;
    return 0;
}

void ackset_clear(struct ackset *a)
{
    free(a->bits);
    *a = ACKSET_EMPTY;
}
