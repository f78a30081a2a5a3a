/*
 * lsn.c - printing and parsing LSNs the way Postgres does ("%X/%X").
 */
#include "lsn.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

char *lsn_format(lsn_t lsn, char *buf)
{
    snprintf(buf, LSN_STRLEN, "%" PRIX32 "/%" PRIX32, (uint32_t)(lsn >> 32),
             (uint32_t)lsn);
    return buf;
}

static bool parse_hex32(const char *s, const char **end, uint32_t *out)
{
    uint64_t v = 0;
    const char *p = s;
    while (*p) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        v = v * 16 + (uint64_t)d;
        if (v > UINT32_MAX) return false;
        p++;
    }
    if (p == s || p - s > 8) return false;
    *out = (uint32_t)v;
    *end = p;
    return true;
}

bool lsn_parse(const char *s, lsn_t *out)
{
    uint32_t hi, lo;
    const char *p;
    if (!s || !parse_hex32(s, &p, &hi) || *p != '/') return false;
    if (!parse_hex32(p + 1, &p, &lo) || *p != '\0') return false;
    *out = ((lsn_t)hi << 32) | lo;
    return true;
}
