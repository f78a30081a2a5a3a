/*
 * jsonvalue.c - the JsonConverter form of the message value (jsonvalue.h).
 */
#include "jsonvalue.h"

#include <string.h>

#include "grow.h"

enum { BOOLOID = 16, BYTEAOID = 17, INT8OID = 20, INT2OID = 21, INT4OID = 23 };

enum jv_kind jsonvalue_kind(uint32_t typid)
{
    switch (typid) {
    case INT2OID:
    case INT4OID:
    case INT8OID:
        return JV_NUMBER;
    case BOOLOID:
        return JV_BOOL;
    case BYTEAOID:
        return JV_BYTES;
    default:
        return JV_STRING;
    }
}

static int reserve(struct jbuf *b, size_t more)
{
    void *p = b->data;
    if (grow_array(&p, &b->cap, b->len + more, 1, 256) != 0) return -1;
    b->data = p;
    return 0;
}

int jsonvalue_raw(struct jbuf *b, const char *s, size_t len)
{
    if (reserve(b, len) != 0) return -1;
    memcpy(b->data + b->len, s, len);
    b->len += len;
    return 0;
}

static const char hex[] = "0123456789ABCDEF";

/* Writes \uXXXX of the 16-bit unit u at o; returns the end. */
static char *put_u(char *o, unsigned u)
{
    *o++ = '\\';
    *o++ = 'u';
    for (int shift = 12; shift >= 0; shift -= 4) *o++ = hex[(u >> shift) & 15];
    return o;
}

/* The code point of a valid 4-byte UTF-8 sequence at s[0..n), or 0. */
static unsigned utf8_4(const unsigned char *s, size_t n)
{
    if (n < 4 || (s[0] & 0xF8) != 0xF0 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 ||
        (s[3] & 0xC0) != 0x80)
        return 0;
    unsigned cp = (unsigned)(s[0] & 7) << 18 | (unsigned)(s[1] & 63) << 12 |
                  (unsigned)(s[2] & 63) << 6 | (unsigned)(s[3] & 63);
    return cp >= 0x10000 && cp <= 0x10FFFF ? cp : 0;
}

int jsonvalue_string(struct jbuf *b, const char *s, size_t len)
{
    /* At most 6 bytes per input byte (\u00XX; a 4-byte character's 12),
     * and the quotes. */
    if (reserve(b, len * 6 + 2) != 0) return -1;
    char *o = b->data + b->len;
    *o++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        unsigned cp;
        if (c >= 0xF0 && (cp = utf8_4((const unsigned char *)s + i, len - i)) != 0) {
            cp -= 0x10000;
            o = put_u(o, 0xD800 + (cp >> 10));
            o = put_u(o, 0xDC00 + (cp & 0x3FF));
            i += 3;
        } else if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c >= 0x20) {
            *o++ = (char)c;
        } else {
            *o++ = '\\';
            switch (c) {
            case '\b': *o++ = 'b'; break;
            case '\t': *o++ = 't'; break;
            case '\n': *o++ = 'n'; break;
            case '\f': *o++ = 'f'; break;
            case '\r': *o++ = 'r'; break;
            default:
                o = put_u(o - 1, c); /* over the backslash written above */
            }
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->data);
    return 0;
}

static bool is_integer(const char *s, size_t len)
{
    size_t i = len && s[0] == '-' ? 1 : 0;
    if (i == len) return false;
    for (; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

int jsonvalue_base64(struct jbuf *b, const char *s, size_t len)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (reserve(b, (len + 2) / 3 * 4 + 2) != 0) return -1;
    const unsigned char *p = (const unsigned char *)s;
    char *o = b->data + b->len;
    *o++ = '"';
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < len ? p[i + 2] : 0);
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < len ? b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? b64[v & 63] : '=';
    }
    *o++ = '"';
    b->len = (size_t)(o - b->data);
    return 0;
}

int jsonvalue_field(struct jbuf *b, enum jv_kind kind, bool is_null, const char *data,
                    size_t len)
{
    if (is_null) return jsonvalue_raw(b, "null", 4);
    if (kind == JV_BYTES) return jsonvalue_base64(b, data, len);
    if (kind == JV_NUMBER && is_integer(data, len)) return jsonvalue_raw(b, data, len);
    if (kind == JV_BOOL && len == 1 && (data[0] == 't' || data[0] == 'f'))
        return data[0] == 't' ? jsonvalue_raw(b, "true", 4) : jsonvalue_raw(b, "false", 5);
    return jsonvalue_string(b, data, len);
}
