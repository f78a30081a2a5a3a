/*
 * grow.c - doubling a malloc'd array's capacity (see grow.h).
 */
#include "grow.h"

#include <stdlib.h>
#include <string.h>

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

int growtext_append(struct growtext *t, const char *p, size_t n)
{
    if (t->len + n + 1 > t->max) {
        t->too_large = 1;
        return -1;
    }
    if (grow_array((void **)&t->data, &t->cap, t->len + n + 1, 1, 4096) != 0) return -1;
    memcpy(t->data + t->len, p, n);
    t->len += n;
    t->data[t->len] = '\0';
    return 0;
}

size_t growtext_curl_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    size_t n = size * nmemb;
    return growtext_append(ud, ptr, n) == 0 ? n : 0;
}
