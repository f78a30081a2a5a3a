/*
 * pghosts.c - the servers of a multi-host conninfo (see pghosts.h).
 */
#include "pghosts.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

/* Entries of a comma-separated list (0 for NULL or ""). */
static int count_items(const char *list)
{
    if (!list || !*list) return 0;
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    return n;
}

/* Copies the i-th entry of list into out ("" when list has none). */
static void item(const char *list, int i, char *out, size_t outlen)
{
    out[0] = '\0';
    if (!list) return;
    const char *p = list;
    for (; i > 0 && p; i--) {
        p = strchr(p, ',');
        if (p) p++;
    }
    if (!p) return;
    size_t len = strcspn(p, ",");
    if (len >= outlen) len = outlen - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

int pghosts_split(const char *host, const char *hostaddr, const char *port,
                  struct pghost *out, int max, char *err, size_t errlen)
{
    int nh = count_items(host), na = count_items(hostaddr), np = count_items(port);
    int n = na ? na : nh ? nh : 1;
    if (na && nh && na != nh) {
        snprintf(err, errlen, "host lists %d servers, hostaddr %d", nh, na);
        return -1;
    }
    if (np > 1 && np != n) {
        snprintf(err, errlen, "%d ports for %d servers (give one port, or one per server)", np,
                 n);
        return -1;
    }
    if (n > max) {
        snprintf(err, errlen, "%d servers listed, at most %d are checked", n, max);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        item(host, nh ? i : -1, out[i].host, sizeof(out[i].host));
        item(hostaddr, na ? i : -1, out[i].hostaddr, sizeof(out[i].hostaddr));
        item(port, np > 1 ? i : 0, out[i].port, sizeof(out[i].port));
    }
    return n;
}

char *pghost_label(const struct pghost *h, char *out, size_t outlen)
{
    const char *name = h->host[0] ? h->host : h->hostaddr[0] ? h->hostaddr : "default";
    snprintf(out, outlen, "%s:%s", name, h->port[0] ? h->port : "default port");
    return out;
}

/* A loopback address literal: 127.0.0.0/8 or ::1. */
static bool is_loopback(const char *a)
{
    unsigned char buf[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, a, buf) == 1) return buf[0] == 127;
    static const unsigned char one[16] = {[15] = 1};
    return inet_pton(AF_INET6, a, buf) == 1 && memcmp(buf, one, 16) == 0;
}

bool pghost_is_local(const struct pghost *h)
{
    bool host_local = !h->host[0] || h->host[0] == '/' || h->host[0] == '@' ||
                      strcmp(h->host, "localhost") == 0 || is_loopback(h->host);
    return host_local && (!h->hostaddr[0] || is_loopback(h->hostaddr));
}

bool pghosts_sslmode_verifies(const char *sslmode)
{
    return sslmode &&
           (strcmp(sslmode, "verify-ca") == 0 || strcmp(sslmode, "verify-full") == 0);
}
