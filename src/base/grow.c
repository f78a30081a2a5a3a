/*
 * grow.c - doubling a malloc'd array's capacity (see grow.h).
 */
#include "grow.h"

#include <stdlib.h>

int grow_array(void **arr, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : (first ? first : 1);
    while (n < need) n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p) return -1;
    *arr = p;
    *cap = n;
    return 0;
}
