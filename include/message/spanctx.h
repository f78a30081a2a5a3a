/*
 * spanctx.h - a tracing span context, as an application stores it in the
 * outbox's span-context column, turned into the message's headers. Pure:
 * no I/O.
 *
 * The format is the one Debezium's Outbox Event Router reads from its
 * tracingspancontext column: java.util.Properties text, as
 * Properties.store() writes the W3C trace context an OpenTelemetry
 * propagator injected into it:
 *
 *   #Tue Dec 03 12:00:00 UTC 2026
 *   traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01
 *   tracestate=rojo\=00f067aa0ba902b7
 *
 * One entry per line (\n, \r\n or \r); blank lines and lines starting
 * with # or ! are comments; the key ends at the first unescaped '=' or
 * ':' (blanks around the separator dropped); a backslash escapes the next
 * character (\t \n \r \f as in Java, \uXXXX below 0x80, any other
 * character as itself). Line continuations (a trailing backslash) are not
 * accepted: store() never writes them for these values.
 */
#ifndef OUTBOXD_SPANCTX_H
#define OUTBOXD_SPANCTX_H

#include <stddef.h>

#define SPANCTX_MAX_ENTRIES 4
#define SPANCTX_BUF 1024 /* the unescaped names and values, NUL-terminated */

struct spanctx {
    int n;
    const char *name[SPANCTX_MAX_ENTRIES];  /* into buf */
    const char *value[SPANCTX_MAX_ENTRIES]; /* into buf */
    size_t value_len[SPANCTX_MAX_ENTRIES];
    char buf[SPANCTX_BUF];
};

/* Parses len bytes of text into sc. Returns 0, or -1 with the reason in
 * err (an entry without a separator or with an empty key, a bad escape,
 * more than SPANCTX_MAX_ENTRIES entries, more than SPANCTX_BUF bytes). */
int spanctx_parse(const char *text, size_t len, struct spanctx *sc, char *err, size_t errlen);

#endif
