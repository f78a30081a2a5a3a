/*
 * str.h - small string helpers shared by modules that build SQL and
 * messages on the heap.
 */
#ifndef OUTBOXD_STR_H
#define OUTBOXD_STR_H

/* A malloc'd string formatted like printf. The caller frees it. NULL on
 * out of memory or a formatting error. */
char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
