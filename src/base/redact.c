/*
 * redact.c - connection errors and URLs without secrets (see redact.h).
 */
#include "redact.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void redact_strip_quoted(const char *in, char *out, size_t outlen)
{
    size_t n = 0;
    bool quoted = false, elided = false;
    for (const char *p = in; *p && n + 4 < outlen; p++) {
        if (*p == '"') {
            if (quoted && !elided) {
                memcpy(out + n, "...", 3);
                n += 3;
            }
            quoted = !quoted;
            elided = false;
            out[n++] = '"';
        } else if (quoted) {
            if (!elided) {
                memcpy(out + n, "...", 3);
                n += 3;
                elided = true;
            }
        } else {
            out[n++] = *p;
        }
    }
    if (outlen) out[n < outlen ? n : outlen - 1] = '\0';
}

void redact_mask(const char *in, const char *secret, char *out, size_t outlen)
{
    size_t n = 0, sl = secret ? strlen(secret) : 0;
    if (!outlen) return;
    for (const char *p = in; *p && n + 1 < outlen;) {
        if (sl && strncmp(p, secret, sl) == 0) {
            for (int i = 0; i < 8 && n + 1 < outlen; i++)
                out[n++] = '*';
            p += sl;
        } else if (*p == '\n' || *p == '\t' || *p == '\r') {
            if (n > 0 && out[n - 1] != ' ') out[n++] = ' ';
            p++;
        } else {
            out[n++] = *p++;
        }
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    out[n] = '\0';
}

void redact_conn_error(const char *conninfo, const char *msg, char *out, size_t outlen)
{
    char *perr = NULL, *password = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo ? conninfo : "", &perr);
    if (opts) {
        for (PQconninfoOption *o = opts; o->keyword; o++)
            if (strcmp(o->keyword, "password") == 0 && o->val && *o->val)
                password = strdup(o->val);
        PQconninfoFree(opts);
        redact_mask(msg, password, out, outlen);
    } else {
        /* Unparsable: libpq quotes the offending part, which may be the
         * password; drop every quoted part. */
        char *stripped = malloc(outlen);
        if (stripped) {
            redact_strip_quoted(msg, stripped, outlen);
            redact_mask(stripped, NULL, out, outlen);
            free(stripped);
        } else if (outlen) {
            out[0] = '\0';
        }
    }
    PQfreemem(perr);
    free(password);
}

/* Where url's credentials are: [*from, *to) is "user:password" (the '@'
 * at *to). False when there are none. */
static bool url_credentials(const char *url, size_t *from, size_t *to)
{
    const char *scheme = strstr(url, "://");
    const char *start = scheme ? scheme + 3 : url;
    const char *at = strrchr(start, '@');
    if (!at) return false;
    *from = (size_t)(start - url);
    *to = (size_t)(at - url);
    return true;
}

void redact_url(const char *url, char *out, size_t outlen)
{
    size_t from, to;
    if (!outlen) return;
    if (!url_credentials(url, &from, &to)) {
        snprintf(out, outlen, "%s", url);
        return;
    }
    snprintf(out, outlen, "%.*s********%s", (int)from, url, url + to);
}

bool redact_url_has_credentials(const char *url)
{
    size_t from, to;
    return url && url_credentials(url, &from, &to);
}
