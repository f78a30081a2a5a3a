/*
 * serde_wire.c - the Schema Registry wire format (serde_wire.h).
 */
#include "serde_wire.h"

#include <ctype.h>
#include <stdlib.h>

size_t serde_wire_prefix(unsigned char out[SERDE_WIRE_PREFIX], int32_t id)
{
    uint32_t u = (uint32_t)id;
    out[0] = SERDE_WIRE_MAGIC;
    out[1] = (unsigned char)(u >> 24);
    out[2] = (unsigned char)(u >> 16);
    out[3] = (unsigned char)(u >> 8);
    out[4] = (unsigned char)u;
    return SERDE_WIRE_PREFIX;
}

/* A zig-zag varint (Protobuf's sint32), as the list's numbers are written
 * by the Java serializers (ByteUtils.writeVarint). */
static size_t put_zigzag(unsigned char *out, int32_t v)
{
    uint32_t z = ((uint32_t)v << 1) ^ (uint32_t)(v >> 31);
    size_t n = 0;
    while (z >= 0x80) {
        out[n++] = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    out[n++] = (unsigned char)z;
    return n;
}

size_t serde_wire_indexes(unsigned char *out, const int *idx, int n)
{
    if (n == 1 && idx[0] == 0) {
        out[0] = 0;
        return 1;
    }
    size_t len = put_zigzag(out, n);
    for (int i = 0; i < n; i++) len += put_zigzag(out + len, idx[i]);
    return len;
}

int serde_wire_read(const unsigned char *buf, size_t len, int32_t *id, size_t *body)
{
    if (len < SERDE_WIRE_PREFIX || buf[0] != SERDE_WIRE_MAGIC) return -1;
    *id = (int32_t)((uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 |
                    (uint32_t)buf[4]);
    *body = SERDE_WIRE_PREFIX;
    return 0;
}

int serde_wire_parse_indexes(const char *s, int idx[SERDE_WIRE_MAX_INDEXES])
{
    int n = 0;
    const char *p = s;
    while (*p) {
        if (!isdigit((unsigned char)*p) || n == SERDE_WIRE_MAX_INDEXES) return -1;
        char *end;
        long v = strtol(p, &end, 10);
        if (v > 1000000) return -1;
        idx[n++] = (int)v;
        p = end;
        if (*p == '.' || *p == ',') {
            p++;
            if (!*p) return -1;
        } else if (*p) {
            return -1;
        }
    }
    return n > 0 ? n : -1;
}
