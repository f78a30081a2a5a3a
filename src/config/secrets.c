/*
 * secrets.c - secrets from files, and files that expose them (see
 * secrets.h).
 */
#include "secrets.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SECRET_MAX 1024

int secret_file_read(const char *path, char **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char buf[SECRET_MAX + 3];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "%s: read error", path);
        return -1;
    }
    buf[n] = '\0';
    size_t len = strcspn(buf, "\r\n");
    const char *rest = buf + len + strspn(buf + len, "\r\n");
    if (len == 0) {
        snprintf(err, errlen, "%s: empty (the secret is the file's first line)", path);
        return -1;
    }
    if (*rest || strlen(buf) != n) {
        snprintf(err, errlen, "%s: more than one line (the secret is the whole first line)",
                 path);
        return -1;
    }
    if (len > SECRET_MAX) {
        snprintf(err, errlen, "%s: longer than %d bytes", path, SECRET_MAX);
        return -1;
    }
    if (!(*out = strndup(buf, len))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

bool secret_mode_exposed(mode_t mode)
{
    return (mode & (S_IRGRP | S_IROTH)) != 0;
}

int secret_file_exposed(const char *path, const char *what, char *msg, size_t msglen)
{
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!secret_mode_exposed(st.st_mode)) return 0;
    snprintf(msg, msglen,
             "%s holds %s and is readable by its %s (mode %04o); chmod 600 %s (owned by "
             "the user outboxd runs as)",
             path, what, (st.st_mode & S_IROTH) ? "group and others" : "group",
             (unsigned)(st.st_mode & 07777), path);
    return 1;
}

bool secret_conninfo_has_password(const char *conninfo)
{
    bool has = false;
    PQconninfoOption *opts = PQconninfoParse(conninfo ? conninfo : "", NULL);
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (!strcmp(o->keyword, "password") && o->val && *o->val) has = true;
    PQconninfoFree(opts);
    return has;
}

/* Appends " keyword='value'" (quotes and backslashes escaped, as libpq
 * reads them) to the buffer *buf of *len bytes used, *cap allocated. */
static int append_kv(char **buf, size_t *len, size_t *cap, const char *kw, const char *val)
{
    size_t need = *len + strlen(kw) + 2 * strlen(val) + 5;
    if (need > *cap) {
        char *n = realloc(*buf, need * 2);
        if (!n) return -1;
        *buf = n;
        *cap = need * 2;
    }
    char *p = *buf + *len;
    if (*len) *p++ = ' ';
    p += sprintf(p, "%s='", kw);
    for (const char *v = val; *v; v++) {
        if (*v == '\'' || *v == '\\') *p++ = '\\';
        *p++ = *v;
    }
    *p++ = '\'';
    *p = '\0';
    *len = (size_t)(p - *buf);
    return 0;
}

/* conninfo as key/value with its password replaced by password (or
 * removed when NULL); refuse_existing: -1 when it has one already. */
static int rebuild_conninfo(const char *conninfo, const char *password, bool refuse_existing,
                            char **out, char *err, size_t errlen)
{
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo ? conninfo : "", &perr);
    if (!opts) {
        PQfreemem(perr); /* may quote the conninfo */
        snprintf(err, errlen, "[postgres] conninfo cannot be parsed (not shown: it may hold "
                              "a password)");
        return -1;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (PQconninfoOption *o = opts; o->keyword && rc == 0; o++) {
        if (!o->val) continue;
        if (!strcmp(o->keyword, "password")) {
            if (!*o->val || !refuse_existing) continue;
            snprintf(err, errlen, "[postgres] the conninfo holds a password and password_file "
                                  "is set: keep one of them (the file)");
            rc = -1;
        } else if (append_kv(&buf, &len, &cap, o->keyword, o->val) != 0) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
    }
    PQconninfoFree(opts);
    if (rc == 0 && password && append_kv(&buf, &len, &cap, "password", password) != 0) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (rc != 0) {
        free(buf);
        return -1;
    }
    *out = buf ? buf : strdup("");
    return *out ? 0 : -1;
}

int secret_conninfo_with_password(const char *conninfo, const char *password, char **out,
                                  char *err, size_t errlen)
{
    return rebuild_conninfo(conninfo, password, true, out, err, errlen);
}

void secret_conninfo_masked(const char *conninfo, char *out, size_t outlen)
{
    char err[256], *kv = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
    bool parsable = opts != NULL;
    PQconninfoFree(opts);
    if (!parsable)
        snprintf(out, outlen, "(not shown: cannot be parsed, may hold a password)");
    else if (!secret_conninfo_has_password(conninfo))
        snprintf(out, outlen, "%s", conninfo);
    else if (rebuild_conninfo(conninfo, "********", false, &kv, err, sizeof(err)) == 0)
        snprintf(out, outlen, "%s", kv);
    else
        snprintf(out, outlen, "(not shown: cannot be parsed, may hold a password)");
    free(kv);
}
