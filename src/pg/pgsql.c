/*
 * pgsql.c - SQL on an ordinary libpq connection (see pgsql.h): one
 * statement with its failure classified, identifiers and literals quoted,
 * array parameters in their text form.
 */
#include "pgsql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgconn.h"
#include "str.h"

PGresult *pgsql_exec(PGconn *conn, const char *conninfo, const char *what, const char *sql,
                     int nparams, const char *const *params, ExecStatusType expect,
                     struct pgsql_error *e)
{
    PGresult *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);
    if (res && PQresultStatus(res) == expect) return res;
    pgconn_message(conn, res, conninfo, NULL, e->msg, sizeof(e->msg));
    /* The SQLSTATE is copied: PQresultErrorField() points into res. */
    const char *field = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    snprintf(e->sqlstate, sizeof(e->sqlstate), "%s", field ? field : "");
    e->what = what;
    PQclear(res);
    if (PQstatus(conn) == CONNECTION_BAD)
        e->kind = PGSQL_LOST;
    else if (strncmp(e->sqlstate, "42", 2) == 0)
        e->kind = PGSQL_SETUP;
    else
        e->kind = PGSQL_TRANSIENT;
    return NULL;
}

/* ---- quoting ------------------------------------------------------------- */

/* s between two q's, every q inside doubled; malloc'd, NULL on out of
 * memory (caller frees). */
static char *quote_doubling(const char *s, char q)
{
    size_t n = 2;
    for (const char *p = s; *p; p++) n += *p == q ? 2 : 1;
    char *out = malloc(n + 1), *o = out;
    if (!out) return NULL;
    *o++ = q;
    for (const char *p = s; *p; p++) {
        if (*p == q) *o++ = q;
        *o++ = *p;
    }
    *o++ = q;
    *o = '\0';
    return out;
}

char *pgsql_quote_ident(const char *name)
{
    return quote_doubling(name, '"');
}

char *pgsql_quote_qualified(const char *schema, const char *name)
{
    char *s = pgsql_quote_ident(schema), *n = pgsql_quote_ident(name);
    char *q = s && n ? str_printf("%s.%s", s, n) : NULL;
    free(s);
    free(n);
    return q;
}

char *pgsql_quote_literal(const char *s)
{
    return quote_doubling(s, '\'');
}

/* ---- array parameters ---------------------------------------------------- */

/* The stream the elements are written to, opened on first use. Returns
 * false on out of memory (a->oom) or after the literal was closed. */
static bool array_open(struct pgsql_array *a)
{
    if (!a->f && !a->oom && !a->s && !(a->f = open_memstream(&a->s, &a->len))) a->oom = true;
    return a->f != NULL;
}

void pgsql_array_add(struct pgsql_array *a, const char *v)
{
    if (!array_open(a)) return;
    bool ok = fputc(a->n++ ? ',' : '{', a->f) != EOF;
    if (!v) {
        a->oom |= !ok || fputs("NULL", a->f) == EOF;
        return;
    }
    ok = ok && fputc('"', a->f) != EOF;
    for (const char *p = v; *p && ok; p++) {
        if (*p == '"' || *p == '\\') ok = fputc('\\', a->f) != EOF;
        ok = ok && fputc(*p, a->f) != EOF;
    }
    a->oom |= !ok || fputc('"', a->f) == EOF;
}

const char *pgsql_array_text(struct pgsql_array *a)
{
    if (!array_open(a)) return NULL;
    bool ok = (a->n || fputc('{', a->f) != EOF) && fputc('}', a->f) != EOF;
    ok = fclose(a->f) == 0 && ok;
    a->f = NULL;
    a->oom |= !ok || !a->s;
    return a->oom ? NULL : a->s;
}

void pgsql_array_free(struct pgsql_array *a)
{
    if (a->f) fclose(a->f);
    free(a->s);
    memset(a, 0, sizeof(*a));
}
