/*
 * grow.h - making room in a malloc'd array: the capacity doubles (from
 * first) until need elements fit, so appending n elements costs O(n).
 */
#ifndef OUTBOXD_GROW_H
#define OUTBOXD_GROW_H

#include <stddef.h>

/* Makes *arr (capacity *cap elements of elem bytes) hold at least need
 * elements. Returns 0, or -1 on out of memory (*arr and *cap unchanged;
 * the caller still owns and frees *arr). */
int grow_array(void **arr, size_t *cap, size_t need, size_t elem, size_t first);

#endif
