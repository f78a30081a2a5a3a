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

/* A NUL-terminated text that grows as bytes are appended, up to max bytes
 * (an HTTP answer read by libcurl: the registry's, the OIDC token
 * endpoint's). Start it as {.max = N}; the caller frees data. */
struct growtext {
    char *data;
    size_t len, cap, max;
    int too_large; /* an append would have passed max: refused */
};

/* Appends n bytes of p to t. Returns 0, or -1 when they do not fit max
 * (too_large set) or on out of memory. */
int growtext_append(struct growtext *t, const char *p, size_t n);

/* growtext_append() as a libcurl write callback (CURLOPT_WRITEFUNCTION,
 * with the struct growtext as CURLOPT_WRITEDATA): what it took, or 0 to
 * end the transfer. */
size_t growtext_curl_write(char *ptr, size_t size, size_t nmemb, void *ud);

#endif
