/*
 * str.h - small string helpers: strings formatted on the heap (SQL,
 * messages), the did-you-mean of a mistyped name (config keys, table
 * columns), and the items of a comma-separated list (config values).
 */
#ifndef OUTBOXD_STR_H
#define OUTBOXD_STR_H

#include <stddef.h>

/* A malloc'd string formatted like printf. The caller frees it. NULL on
 * out of memory or a formatting error. */
char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Optimal string alignment distance (Levenshtein plus adjacent
 * transpositions) between a and b. */
size_t str_edit_distance(const char *a, const char *b);

/* The candidate closest to word, or NULL when none is close enough to be
 * a likely typo (distance at most 1 for words up to 4 characters, 2 up to
 * 8, 3 beyond). Ties go to the first candidate. */
const char *str_suggest(const char *word, const char *const *candidates, size_t n);

/* The next item of a comma-separated list at *p, blanks around it
 * trimmed, copied into out (NUL-terminated); *p moves past it and its
 * comma. Returns the item's length (0 for an empty item, as in "a,,b"),
 * -1 at the end of the list, or -2 when the item does not fit outlen. */
int str_next_item(const char **p, char *out, size_t outlen);

#endif
