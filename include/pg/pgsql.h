/*
 * pgsql.h - SQL on an ordinary libpq connection, shared by every module that
 * runs statements of its own (the polling relay and `outboxd requeue`,
 * `repair`, `republish` and the rows they publish again, `check`, the
 * monitor's publication check through outboxset.h): run one statement with
 * text parameters and say what failed, quote an identifier or a string
 * literal, build the text form of an array parameter.
 *
 * Nothing here logs: the caller decides what a failure means (retry,
 * reconnect, stop) and logs it once. The quoting needs no connection and
 * always quotes, whether the name needs it or not.
 */
#ifndef OUTBOXD_PGSQL_H
#define OUTBOXD_PGSQL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* What a failed statement means. */
enum pgsql_fail {
    PGSQL_LOST,      /* the connection is gone: reconnect */
    PGSQL_SETUP,     /* the table or the SQL (SQLSTATE class 42: a missing
                      * column, no privilege), or a mismatch the caller found */
    PGSQL_TRANSIENT, /* lock or statement timeout, deadlock, shutdown... */
};

struct pgsql_error {
    enum pgsql_fail kind;
    const char *what; /* the statement's purpose (static text); NULL when msg
                       * is the whole message */
    char sqlstate[6]; /* "" when the server sent none */
    char msg[1024];   /* one line, the conninfo's password masked */
};

/* Runs one statement with text parameters (autocommit: its own transaction
 * unless one is open). Returns the result (the caller PQclears it) when its
 * status is expect; NULL with e filled otherwise: the message as
 * pgconn_message() writes it (conninfo's password masked), the SQLSTATE, and
 * the kind. what names the statement for messages (static text). */
PGresult *pgsql_exec(PGconn *conn, const char *conninfo, const char *what, const char *sql,
                     int nparams, const char *const *params, ExecStatusType expect,
                     struct pgsql_error *e);

/* An SQL identifier quoted: wrapped in double quotes, any inside doubled.
 * Returns a malloc'd string (caller frees), NULL on out of memory. */
char *pgsql_quote_ident(const char *name);

/* "schema"."name", both quoted as pgsql_quote_ident() does. Returns a
 * malloc'd string (caller frees), NULL on out of memory. */
char *pgsql_quote_qualified(const char *schema, const char *name);

/* A string literal: wrapped in single quotes, any inside doubled (for
 * standard_conforming_strings = on, the default since PostgreSQL 9.1).
 * Also the form an option value of a replication command takes
 * (START_REPLICATION ... ("add-tables" '...')): the walsender's grammar
 * knows only '...' with quotes doubled, never E'...'.
 * Returns a malloc'd string (caller frees), NULL on out of memory. */
char *pgsql_quote_literal(const char *s);

/* An array parameter in PostgreSQL's text form ("{"a","b",NULL}"), built
 * element by element; zero-initialise it. Free with pgsql_array_free(). */
struct pgsql_array {
    FILE *f;     /* open_memstream() on s while elements are added */
    char *s;     /* owned: the text */
    size_t len;
    int n;       /* elements so far */
    bool oom;    /* out of memory: the text is incomplete */
};

/* Appends one element: NULL, or v double-quoted with '"' and '\' escaped. */
void pgsql_array_add(struct pgsql_array *a, const char *v);

/* Closes the literal (call once, after the last element) and returns its
 * text, owned by a; NULL when an append ran out of memory. */
const char *pgsql_array_text(struct pgsql_array *a);

/* Frees the text and the stream; a is zeroed, ready for reuse. */
void pgsql_array_free(struct pgsql_array *a);

#endif
