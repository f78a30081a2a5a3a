/*
 * redact.c - connection errors without secrets (see redact.h).
 */
#include "redact.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

void redact_conn_error(const char *conninfo, const char *msg, char *out, size_t outlen)
{
    char *perr = NULL, *password = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo ? conninfo : "", &perr);
    if (opts) {
        for (PQconninfoOption *o = opts; o->keyword; o++)
            if (strcmp(o->keyword, "password") == 0 && o->val && *o->val)
                password = strdup(o->val);
        PQconninfoFree(opts);
        check_mask(msg, password, out, outlen);
    } else {
        /* Unparsable: libpq quotes the offending part, which may be the
         * password; drop every quoted part. */
        char *stripped = malloc(outlen);
        if (stripped) {
            check_strip_quoted(msg, stripped, outlen);
            check_mask(stripped, NULL, out, outlen);
            free(stripped);
        } else if (outlen) {
            out[0] = '\0';
        }
    }
    PQfreemem(perr);
    free(password);
}
