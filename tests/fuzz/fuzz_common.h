/*
 * fuzz_common.h - what both decoder harnesses use: a CHECK that aborts (so
 * libFuzzer records the input) and touch(), which reads every byte of a
 * borrowed value so ASan sees any out-of-bounds pointer.
 */
#ifndef OUTBOXD_FUZZ_COMMON_H
#define OUTBOXD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s: check failed at %s:%d: %s\n", FUZZ_NAME,     \
                    __FILE__, __LINE__, #cond);                               \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* Defeats the optimiser: every byte touched is folded into this. */
static volatile unsigned sink;

static inline void touch(const void *p, size_t n)
{
    const unsigned char *b = p;
    unsigned h = 0;

    for (size_t i = 0; i < n; i++) h = h * 31u + b[i];
    sink += h;
}

#endif
