/*
 * listenaddr.h - an [http] listen value, HOST:PORT, parsed: config.c
 * parses it once when it is set, httpd.c binds what it parsed. Pure (no
 * name resolution, no socket); unit-tested in tests/unit/test_httpd.c.
 */
#ifndef OUTBOXD_LISTENADDR_H
#define OUTBOXD_LISTENADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* A parsed [http] listen value: an address (family AF_INET or AF_INET6,
 * sa and len set), or a host name to resolve when the server starts
 * (family AF_UNSPEC, name set). */
struct listen_addr {
    struct sockaddr_storage sa;
    socklen_t len;
    int family; /* AF_INET, AF_INET6, or AF_UNSPEC for a host name */
    int port;
    char name[254]; /* the host name, when family is AF_UNSPEC */
};

/* Parses "HOST:PORT": HOST a numeric IPv4 address, a numeric IPv6 address
 * in brackets ("[::1]:19187"), a host name ("localhost:19187": letters,
 * digits, '-' and '.', resolved by httpd_start(), not here), or empty for
 * every IPv4 interface (":19187"); PORT 0-65535 (0: any free port).
 * Returns 0, or -1 with err naming the problem. Pure. */
int listen_addr_parse(const char *s, struct listen_addr *out, char *err, size_t errlen);

#endif
