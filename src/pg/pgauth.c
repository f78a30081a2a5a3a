/*
 * pgauth.c - which server each RDS IAM token is for, and the password
 * file lines that hand them to libpq (see pgauth.h).
 */
#include "pgauth.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether libpq reads s as a connection string (it expands dbname only
 * then): a URI, or key=value pairs. Else s is a bare database name. */
static bool is_conninfo(const char *s)
{
    return strncmp(s, "postgresql://", 13) == 0 || strncmp(s, "postgres://", 11) == 0 ||
           strchr(s, '=') != NULL;
}

/* opts' value of key, else the environment's envvar; NULL when neither. */
static const char *value(const PQconninfoOption *opts, const char *key, const char *envvar)
{
    for (const PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, key) == 0 && o->val && *o->val) return o->val;
    const char *e = getenv(envvar);
    return e && *e ? e : NULL;
}

int pgauth_targets(const char *conninfo, const struct pghost *only, const char *os_user,
                   struct pgauth_target *out, int max, char *err, size_t errlen)
{
    PQconninfoOption *opts = NULL;
    if (conninfo && is_conninfo(conninfo)) {
        char *perr = NULL;
        opts = PQconninfoParse(conninfo, &perr);
        PQfreemem(perr);
        if (!opts) {
            snprintf(err, errlen, "the conninfo cannot be parsed");
            return -1;
        }
    }
    struct pghost hosts[PGHOSTS_MAX];
    int n;
    if (only) {
        hosts[0] = *only;
        n = 1;
    } else {
        n = pghosts_split(value(opts, "host", "PGHOST"), value(opts, "hostaddr", "PGHOSTADDR"),
                          value(opts, "port", "PGPORT"), hosts, PGHOSTS_MAX, err, errlen);
    }
    const char *user = value(opts, "user", "PGUSER");
    if (!user) user = os_user ? os_user : "";
    /* A single server's port left empty by its own list: libpq's default. */
    const char *port_default = getenv("PGPORT");
    if (n > max) {
        snprintf(err, errlen, "%d servers listed, at most %d", n, max);
        n = -1;
    }
    for (int i = 0; i < n; i++) {
        const struct pghost *h = &hosts[i];
        const char *host = h->host[0] ? h->host : h->hostaddr[0] ? h->hostaddr : "localhost";
        const char *port =
            h->port[0] ? h->port : port_default && *port_default ? port_default : "5432";
        snprintf(out[i].host, sizeof(out[i].host), "%s", host);
        snprintf(out[i].port, sizeof(out[i].port), "%s", port);
        snprintf(out[i].user, sizeof(out[i].user), "%s", user);
    }
    PQconninfoFree(opts);
    return n;
}

/* Appends s to p with ':' and '\' escaped as libpq's password file reads
 * them. Returns the end. */
static char *escaped(char *p, const char *s)
{
    for (; *s; s++) {
        if (*s == ':' || *s == '\\') *p++ = '\\';
        *p++ = *s;
    }
    return p;
}

char *pgauth_passfile_line(const struct pgauth_target *t, const char *password)
{
    /* Each byte escaped at most doubles; ":*:*:" and the newline. */
    size_t len = 2 * (strlen(t->host) + strlen(t->port) + strlen(password)) + 8;
    char *line = malloc(len);
    if (!line) return NULL;
    char *p = escaped(line, t->host);
    *p++ = ':';
    p = escaped(p, t->port);
    memcpy(p, ":*:*:", 5);
    p = escaped(p + 5, password);
    *p++ = '\n';
    *p = '\0';
    return line;
}
