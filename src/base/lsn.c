/*
 * lsn.c - printing and parsing LSNs the way Postgres does ("%X/%X").
 */
#include "lsn.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* Writes v in upper-case hex without leading zeros ("0" for 0); returns
 * the end. */
static char *put_hex32(char *p, uint32_t v)
{
    static const char digits[] = "0123456789ABCDEF";
    int shift = 28;
    while (shift > 0 && (v >> shift) == 0) shift -= 4;
    for (; shift >= 0; shift -= 4) *p++ = digits[(v >> shift) & 0xF];
    return p;
}

/* Formats by hand: every event carries its commit LSN as a header, and
 * snprintf() was a measurable share of building one. */
char *lsn_format(lsn_t lsn, char *buf)
{
    char *p = put_hex32(buf, (uint32_t)(lsn >> 32));
    *p++ = '/';
    *put_hex32(p, (uint32_t)lsn) = '\0';
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
