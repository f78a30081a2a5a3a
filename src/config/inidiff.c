/*
 * inidiff.c - the keys of an INI file and which of them changed between
 * two readings (see inidiff.h). Parsing is inih's, as in config.c.
 */
#include "inidiff.h"

#include <ini.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long find(const struct ini_pairs *p, const char *name)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->names[i], name) == 0) return (long)i;
    return -1;
}

/* Sets name to value (a repeated key keeps its last value). 0 or -1 (out
 * of memory). */
static int put(struct ini_pairs *p, const char *section, const char *key, const char *value)
{
    size_t len = strlen(section) + strlen(key) + 2;
    char *name = malloc(len), *v = strdup(value);
    if (!name || !v) goto oom;
    snprintf(name, len, "%s.%s", section, key);
    long at = find(p, name);
    if (at >= 0) {
        free(name);
        free(p->values[at]);
        p->values[at] = v;
        return 0;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 32;
        char **names = realloc(p->names, cap * sizeof(*names));
        if (!names) goto oom;
        p->names = names;
        char **values = realloc(p->values, cap * sizeof(*values));
        if (!values) goto oom;
        p->values = values;
        p->cap = cap;
    }
    p->names[p->n] = name;
    p->values[p->n++] = v;
    return 0;
oom:
    free(name);
    free(v);
    return -1;
}

static int on_value(void *user, const char *section, const char *key, const char *value)
{
    return put(user, section, key, value ? value : "") == 0; /* inih: nonzero = ok */
}

static int parsed(int rc, const char *what, char *err, size_t errlen)
{
    if (rc == 0) return 0;
    if (rc == -1)
        snprintf(err, errlen, "%s: cannot be read", what);
    else if (rc == -2)
        snprintf(err, errlen, "%s: out of memory", what);
    else
        snprintf(err, errlen, "%s: syntax error (or out of memory) on line %d", what, rc);
    return -1;
}

int ini_pairs_read_string(const char *text, struct ini_pairs *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    return parsed(ini_parse_string(text, on_value, out), "configuration", err, errlen);
}

int ini_pairs_read_file(const char *path, struct ini_pairs *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    return parsed(ini_parse(path, on_value, out), path, err, errlen);
}

static bool skipped(const char *const *skip, const char *name)
{
    for (; skip && *skip; skip++)
        if (strcmp(*skip, name) == 0) return true;
    return false;
}

/* Appends ", name" (or "name" first) to out while there stays room for a
 * last ", ..."; otherwise ends the list with "..." (never half a name) and
 * nothing is appended after it. */
static void append(char *out, size_t outlen, bool first, const char *name)
{
    size_t len = strlen(out);
    const char *sep = first ? "" : ", ";
    if (outlen < 4 || (len >= 3 && strcmp(out + len - 3, "...") == 0)) return;
    if (len + strlen(sep) + strlen(name) + 5 < outlen) {
        snprintf(out + len, outlen - len, "%s%s", sep, name);
        return;
    }
    snprintf(out + len, outlen - len, "%s...", sep);
}

size_t ini_pairs_changed(const struct ini_pairs *before, const struct ini_pairs *after,
                         const char *const *skip, char *out, size_t outlen)
{
    size_t count = 0;
    if (outlen) out[0] = '\0';
    for (size_t i = 0; i < after->n; i++) {
        long at = find(before, after->names[i]);
        if (skipped(skip, after->names[i]) ||
            (at >= 0 && strcmp(before->values[at], after->values[i]) == 0))
            continue;
        append(out, outlen, count++ == 0, after->names[i]);
    }
    for (size_t i = 0; i < before->n; i++) {
        if (skipped(skip, before->names[i]) || find(after, before->names[i]) >= 0) continue;
        append(out, outlen, count++ == 0, before->names[i]);
    }
    return count;
}

void ini_pairs_free(struct ini_pairs *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->names[i]);
        free(p->values[i]);
    }
    free(p->names);
    free(p->values);
    memset(p, 0, sizeof(*p));
}
