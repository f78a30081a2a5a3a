/*
 * heartbeat.c - the heartbeat message's content, written and recognised
 * (see heartbeat.h).
 */
#include "heartbeat.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void heartbeat_content(const char *slot, int64_t sent_us, char *out, size_t outlen)
{
    snprintf(out, outlen, "slot=%s sent_us=%" PRId64, slot, sent_us);
}

bool heartbeat_parse(const char *prefix, const char *content, size_t len, const char *slot,
                     int64_t *sent_us)
{
    if (!prefix || strcmp(prefix, HEARTBEAT_PREFIX) != 0 || !content) return false;
    size_t slen = strlen(slot);
    static const char key[] = " sent_us=";
    size_t klen = sizeof(key) - 1;
    if (len < 5 + slen + klen + 1 || memcmp(content, "slot=", 5) != 0 ||
        memcmp(content + 5, slot, slen) != 0 || memcmp(content + 5 + slen, key, klen) != 0)
        return false;
    int64_t v = 0;
    size_t i = 5 + slen + klen;
    if (len - i > 18) return false; /* more digits than an int64 holds safely */
    for (; i < len; i++) {
        if (content[i] < '0' || content[i] > '9') return false;
        v = v * 10 + (content[i] - '0');
    }
    *sent_us = v;
    return true;
}
