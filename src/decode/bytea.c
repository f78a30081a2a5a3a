/*
 * bytea.c - a bytea value's bytes from its text output (hex or escape
 * format, see bytea.h).
 */
#include "bytea.h"

#include <stdio.h>

/* 0..15 for a hex digit, -1 otherwise. */
static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long bytea_hex_decode(const char *s, size_t len, char *out, char *err, size_t errlen)
{
    if (len % 2 != 0) {
        snprintf(err, errlen, "bytea hex text has an odd number of digits (%zu)", len);
        return -1;
    }
    for (size_t i = 0; i < len; i += 2) {
        int hi = hexval(s[i]), lo = hexval(s[i + 1]);
        if (hi < 0 || lo < 0) {
            snprintf(err, errlen, "bytea hex text has a non-hex character at %zu",
                     hi < 0 ? i : i + 1);
            return -1;
        }
        out[i / 2] = (char)(hi << 4 | lo);
    }
    return (long)(len / 2);
}

/* Three octal digits of a byte: 000 to 377. */
static bool is_octal3(const char *s)
{
    return s[0] >= '0' && s[0] <= '3' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' &&
           s[2] <= '7';
}

/* The escape format: "\\" is '\', "\ooo" the byte of octal ooo (000-377),
 * anything else is itself. */
static long escape_decode(const char *s, size_t len, char *out, char *err, size_t errlen)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (s[i] != '\\') {
            out[n++] = s[i++];
        } else if (i + 1 < len && s[i + 1] == '\\') {
            out[n++] = '\\';
            i += 2;
        } else if (i + 3 < len && is_octal3(s + i + 1)) {
            out[n++] = (char)((s[i + 1] - '0') << 6 | (s[i + 2] - '0') << 3 |
                              (s[i + 3] - '0'));
            i += 4;
        } else {
            snprintf(err, errlen, "bytea escape text has a bad escape at %zu", i);
            return -1;
        }
    }
    return (long)n;
}

long bytea_text_decode(const char *s, size_t len, char *out, char *err, size_t errlen)
{
    if (len >= 2 && s[0] == '\\' && s[1] == 'x')
        return bytea_hex_decode(s + 2, len - 2, out, err, errlen);
    return escape_decode(s, len, out, err, errlen);
}
