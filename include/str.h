/*
 * str.h - small string helpers: strings formatted on the heap (SQL,
 * messages), and the did-you-mean of a mistyped name (config keys, table
 * columns).
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

#endif
