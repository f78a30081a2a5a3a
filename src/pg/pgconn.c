/*
 * pgconn.c - opening ordinary and replication connections, and their error
 * text (see pgconn.h).
 */
#define _GNU_SOURCE /* memfd_create */
#include "pgconn.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "awstoken.h"
#include "log.h"
#include "pgauth.h"
#include "redact.h"

/* TCP defaults that bound how long a dead database host (no FIN, no RST:
 * a crashed host, a partition) goes unnoticed. outboxd writes a standby
 * status every [postgres] status_interval_ms (1 s), so the stream always
 * has data in flight: tcp_user_timeout (Linux) ends the connection once
 * that data stays unacknowledged this long. Keepalives cover a connection
 * that sends nothing (an ordinary one between statements). Placed before
 * dbname, so that the same keyword in the user's conninfo wins. A host
 * that is alive but slow still acknowledges at the TCP level, so only a
 * silent network trips them. */
static const struct {
    const char *key, *val;
} TCP_DEFAULTS[] = {
    {"keepalives", "1"},
    {"keepalives_idle", "10"},
    {"keepalives_interval", "5"},
    {"keepalives_count", "2"},
    {"tcp_user_timeout", PGCONN_TCP_USER_TIMEOUT_MS_STR},
};
#define N_TCP (sizeof(TCP_DEFAULTS) / sizeof(TCP_DEFAULTS[0]))
/* Ours, and every option libpq knows (about 50) when a server is picked. */
#define N_PARAMS 128

/* [postgres] auth, set once by pgconn_set_auth(). The credentials are
 * kept between connections (awscreds.h's cache: fetched again shortly
 * before they expire, so that a web identity's or the instance's are not
 * asked for on every connection); a token is made for each connection. */
static struct {
    enum pg_auth method;
    char *region, *profile; /* [aws]'s; NULL: the environment's */
    struct aws_creds_cache cache;
    char said[512]; /* what the last tokens were made with */
} A = {.cache = AWS_CREDS_CACHE_INIT};

/* Why the last connect returned NULL. */
static char last_error[768] = "out of memory";

int pgconn_set_auth(enum pg_auth method, const struct aws_settings *aws)
{
    free(A.region);
    free(A.profile);
    aws_creds_cache_clear(&A.cache);
    A.method = method;
    A.region = aws && aws->region ? strdup(aws->region) : NULL;
    A.profile = aws && aws->profile ? strdup(aws->profile) : NULL;
    A.said[0] = '\0';
    bool oom = (aws && aws->region && !A.region) || (aws && aws->profile && !A.profile);
    return oom ? -1 : 0;
}

const char *pgconn_auth_said(void)
{
    return A.said;
}

/* Writes the password file of o's servers, each with a token made now,
 * into a memory file (mode 0600: libpq ignores a file others may read).
 * Returns its descriptor (the caller closes it once libpq has read it:
 * PQconnectStartParams reads it before it returns) and its path in path,
 * or -1 with last_error. */
static int token_file(const struct pgconn_opts *o, char *path, size_t pathlen)
{
    struct aws_settings s = {.region = A.region, .profile = A.profile};
    const char *region = aws_region(&s);
    A.said[0] = '\0';
    if (!region) {
        snprintf(last_error, sizeof(last_error),
                 "[postgres] auth = aws_rds_iam: no AWS region: set [aws] region (or "
                 "AWS_REGION in the environment)");
        return -1;
    }
    struct passwd *pw = getpwuid(geteuid());
    struct pgauth_target t[PGHOSTS_MAX];
    char err[600];
    int n = pgauth_targets(o->conninfo, o->server, pw ? pw->pw_name : NULL, t, PGHOSTS_MAX,
                           err, sizeof(err));
    if (n < 0) {
        snprintf(last_error, sizeof(last_error), "[postgres] auth = aws_rds_iam: %s", err);
        return -1;
    }
    struct aws_creds cr = {0};
    if (aws_creds_cached(&A.cache, &s, time(NULL), &cr, err, sizeof(err)) != 0) {
        snprintf(last_error, sizeof(last_error), "[postgres] auth = aws_rds_iam: %s%s",
                 strstr(err, "credentials") ? "" : "no AWS credentials: ", err);
        return -1;
    }
    int fd = memfd_create("outboxd-pgpass", MFD_CLOEXEC);
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        snprintf(last_error, sizeof(last_error),
                 "[postgres] auth = aws_rds_iam: a memory file for the token: %s",
                 strerror(errno));
        if (fd >= 0) close(fd);
        aws_creds_clear(&cr);
        return -1;
    }
    time_t now = time(NULL);
    int wrote = 0;
    errno = 0;
    for (int i = 0; i < n; i++) {
        char *token = aws_rds_token(&cr, region, t[i].host, atoi(t[i].port), t[i].user,
                                    now);
        char *line = token ? pgauth_passfile_line(&t[i], token) : NULL;
        size_t len = line ? strlen(line) : 0;
        bool ok = line && write(fd, line, len) == (ssize_t)len;
        if (token) explicit_bzero(token, strlen(token));
        if (line) explicit_bzero(line, len);
        free(token);
        free(line);
        if (!ok) break;
        wrote++;
    }
    if (wrote < n) {
        snprintf(last_error, sizeof(last_error),
                 "[postgres] auth = aws_rds_iam: writing the token: %s",
                 errno ? strerror(errno) : "out of memory");
        close(fd);
        aws_creds_clear(&cr);
        return -1;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    if (access(path, R_OK) != 0) { /* libpq would silently send no password */
        snprintf(last_error, sizeof(last_error),
                 "[postgres] auth = aws_rds_iam: %s: %s (libpq reads the token there: is "
                 "/proc mounted?)",
                 path, strerror(errno));
        close(fd);
        aws_creds_clear(&cr);
        return -1;
    }
    snprintf(A.said, sizeof(A.said),
             "credentials from %s, region %s, a token for %s:%s%s as user \"%s\"",
             cr.source, region, t[0].host, t[0].port,
             n > 1 ? " and each other server listed" : "", t[0].user);
    aws_creds_clear(&cr);
    return fd;
}

/* The keyword/value arrays of one connection, NULL-terminated, and what
 * they point into. */
struct params {
    const char *keys[N_PARAMS], *vals[N_PARAMS];
    size_t n;
    int expand;               /* expand_dbname */
    char timeout[16];         /* connect_timeout */
    char passfile[32];        /* the token file's path */
    int fd;                   /* the token file, -1 if none */
    PQconninfoOption *parsed; /* the conninfo, when one server is picked */
};

static void add(struct params *p, const char *key, const char *val)
{
    if (p->n + 1 >= N_PARAMS) return; /* libpq has fewer options than this */
    p->keys[p->n] = key;
    p->vals[p->n++] = val;
}

/* Whether libpq reads s as a connection string rather than a database
 * name. */
static bool is_conninfo(const char *s)
{
    return strncmp(s, "postgresql://", 13) == 0 || strncmp(s, "postgres://", 11) == 0 ||
           strchr(s, '=') != NULL;
}

/* The conninfo with only server o->server: its options but the servers',
 * then the one server. */
static void one_server(const struct pgconn_opts *o, struct params *p)
{
    const char *ci = o->conninfo ? o->conninfo : "";
    if (!is_conninfo(ci)) {
        if (*ci) add(p, "dbname", ci);
    } else {
        char *perr = NULL;
        p->parsed = PQconninfoParse(ci, &perr);
        PQfreemem(perr); /* config_validate() parsed it already */
    }
    for (PQconninfoOption *c = p->parsed; c && c->keyword; c++) {
        if (!c->val || !*c->val) continue;
        if (!strcmp(c->keyword, "host") || !strcmp(c->keyword, "hostaddr") ||
            !strcmp(c->keyword, "port") || !strcmp(c->keyword, "target_session_attrs"))
            continue;
        add(p, c->keyword, c->val);
    }
    const struct pghost *h = o->server;
    if (h->host[0]) add(p, "host", h->host);
    if (h->hostaddr[0]) add(p, "hostaddr", h->hostaddr);
    if (h->port[0]) add(p, "port", h->port);
    /* Explicitly: PGTARGETSESSIONATTRS would otherwise refuse a standby. */
    add(p, "target_session_attrs", "any");
}

/* The parameters of o into p (release them with done()). 0, or -1 with
 * last_error when no token could be made. */
static int fill_params(const struct pgconn_opts *o, struct params *p)
{
    memset(p, 0, sizeof(*p));
    p->fd = -1;
    if (o->timeout_s > 0) {
        snprintf(p->timeout, sizeof(p->timeout), "%d", o->timeout_s);
        add(p, "connect_timeout", p->timeout);
    }
    for (size_t i = 0; i < N_TCP; i++)
        add(p, TCP_DEFAULTS[i].key, TCP_DEFAULTS[i].val);
    if (o->server) {
        one_server(o, p);
    } else {
        add(p, "dbname", o->conninfo ? o->conninfo : "");
        p->expand = 1;
    }
    if (o->replication) add(p, "replication", "database");
    add(p, "fallback_application_name", o->app_name ? o->app_name : "outboxd");
    if (A.method == PG_AUTH_AWS_RDS_IAM) {
        /* Last: it wins over a passfile of the conninfo's (a password
         * would win over it: config_validate() refuses one). */
        p->fd = token_file(o, p->passfile, sizeof(p->passfile));
        if (p->fd < 0) {
            PQconninfoFree(p->parsed);
            return -1;
        }
        add(p, "passfile", p->passfile);
    }
    p->keys[p->n] = NULL;
    p->vals[p->n] = NULL;
    return 0;
}

static void done(struct params *p)
{
    if (p->fd >= 0) close(p->fd); /* libpq has read it: the token is gone */
    PQconninfoFree(p->parsed);
}

PGconn *pgconn_connect(const struct pgconn_opts *o)
{
    struct params p;
    snprintf(last_error, sizeof(last_error), "out of memory");
    if (fill_params(o, &p) != 0) return NULL;
    PGconn *c = PQconnectdbParams(p.keys, p.vals, p.expand);
    done(&p);
    return c;
}

PGconn *pgconn_start(const struct pgconn_opts *o)
{
    struct params p;
    snprintf(last_error, sizeof(last_error), "out of memory");
    if (fill_params(o, &p) != 0) return NULL;
    PGconn *c = PQconnectStartParams(p.keys, p.vals, p.expand);
    done(&p);
    return c;
}

const char *pgconn_error(const PGconn *conn)
{
    return conn ? PQerrorMessage(conn) : last_error;
}

void pgconn_clean(const char *msg, const char *conninfo, const char *what, char *out,
                  size_t outlen)
{
    if (!outlen) return;
    char raw[1024];
    snprintf(raw, sizeof(raw), "%s", msg ? msg : "");
    size_t n = strlen(raw);
    while (n > 0 && (raw[n - 1] == '\n' || raw[n - 1] == ' ')) raw[--n] = '\0';
    for (char *p = raw; *p; p++)
        if (*p == '\n' || *p == '\t') *p = ' '; /* libpq's messages span lines */
    log_one_line(raw);
    char safe[1024];
    redact_conn_error(conninfo, raw, safe, sizeof(safe));
    if (what)
        snprintf(out, outlen, "%s: %s", what, safe);
    else
        snprintf(out, outlen, "%s", safe);
}

void pgconn_message(const PGconn *conn, const PGresult *res, const char *conninfo,
                    const char *what, char *out, size_t outlen)
{
    const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    if (!m || !*m) m = pgconn_error(conn);
    pgconn_clean(m, conninfo, what, out, outlen);
}
