/*
 * duration.c - durations as configured (see duration.h).
 */
#include "duration.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *unit;
    int64_t ms;
} units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1}};
#define NUNITS (sizeof(units) / sizeof(units[0]))
#define TEN_YEARS_MS 315360000000LL

int duration_parse(const char *s, unsigned flags, int64_t *ms, char *err, size_t errlen)
{
    if (!strcmp(s, "0") || !strcmp(s, "off")) {
        *ms = 0;
        return 0;
    }
    if (*s < '0' || *s > '9') goto bad;
    errno = 0;
    char *end;
    long long n = strtoll(s, &end, 10);
    if (errno) goto too_long;
    int64_t scale = 0;
    if (*end == '\0' && (flags & DURATION_BARE_MS))
        scale = 1;
    else
        for (size_t i = 0; i < NUNITS; i++)
            if (strcmp(end, units[i].unit) == 0) scale = units[i].ms;
    if (!scale) goto bad;
    if (n > TEN_YEARS_MS / scale) goto too_long;
    *ms = (int64_t)n * scale;
    return 0;
too_long:
    snprintf(err, errlen, "\"%s\" is longer than 10 years", s);
    return -1;
bad:
    snprintf(err, errlen,
             (flags & DURATION_BARE_MS)
                 ? "\"%s\" is not a duration (milliseconds, or a whole number with a unit: "
                   "ms, s, m, h or d, e.g. 500, 500ms or 5s)"
                 : "\"%s\" is not a duration (a whole number with a unit: ms, s, m, h or d, "
                   "e.g. 30s or 7d; or 0)",
             s);
    return -1;
}

const char *duration_format(int64_t ms, char *out, size_t outlen)
{
    if (ms == 0) {
        snprintf(out, outlen, "0");
        return out;
    }
    for (size_t i = 0; i < NUNITS; i++)
        if (ms % units[i].ms == 0) {
            snprintf(out, outlen, "%lld%s", (long long)(ms / units[i].ms), units[i].unit);
            return out;
        }
    return out; /* not reached: every ms divides by 1 */
}
