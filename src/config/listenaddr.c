/*
 * listenaddr.c - an [http] listen value, HOST:PORT, parsed (see
 * listenaddr.h).
 */
#include "listenaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_port(const char *s, int *port)
{
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    if (*s == '\0' || *s == '-' || *s == '+' || errno || *end != '\0' || n < 0 || n > 65535)
        return -1;
    *port = (int)n;
    return 0;
}

/* A host name: letters, digits, '-' and '.', not all digits and dots (that
 * is a mistyped IPv4 address), at most 253 bytes. */
static bool host_name_ok(const char *h)
{
    size_t n = strlen(h);
    if (n == 0 || n > 253 || strspn(h, "0123456789.") == n) return false;
    return strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") == n;
}

int listen_addr_parse(const char *s, struct listen_addr *out, char *err, size_t errlen)
{
    char host[256];
    const char *colon;
    memset(out, 0, sizeof(*out));
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':') {
            snprintf(err, errlen, "\"%s\": expected [IPv6]:PORT, e.g. [::1]:19187", s);
            return -1;
        }
        if ((size_t)(close - s - 1) >= sizeof(host)) goto bad_host;
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = '\0';
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon) {
            snprintf(err, errlen, "\"%s\": expected HOST:PORT, e.g. 127.0.0.1:19187", s);
            return -1;
        }
        if ((size_t)(colon - s) >= sizeof(host)) goto bad_host;
        memcpy(host, s, (size_t)(colon - s));
        host[colon - s] = '\0';
    }
    if (parse_port(colon + 1, &out->port) != 0) {
        snprintf(err, errlen, "\"%s\": the port \"%s\" is not a number from 0 to 65535", s,
                 colon + 1);
        return -1;
    }
    if (s[0] == '[') {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&out->sa;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) goto bad_host;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)out->port);
        out->family = AF_INET6;
        out->len = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&out->sa;
        if (host[0] == '\0') {
            a->sin_addr.s_addr = htonl(INADDR_ANY);
        } else if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
            if (!host_name_ok(host)) goto bad_host;
            memset(a, 0, sizeof(*a));
            snprintf(out->name, sizeof(out->name), "%s", host);
            out->family = AF_UNSPEC;
            return 0;
        }
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)out->port);
        out->family = AF_INET;
        out->len = sizeof(*a);
    }
    return 0;
bad_host:
    snprintf(err, errlen,
             "\"%s\": the host is not a numeric IP address nor a host name (e.g. "
             "127.0.0.1:19187, 0.0.0.0:19187, [::]:19187, localhost:19187)",
             s);
    return -1;
}
