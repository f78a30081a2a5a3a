/*
 * spanctx.c - the outbox's tracing span-context column (java.util.Properties
 * text, see spanctx.h) into header names and values.
 */
#include "spanctx.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Where parsing is: the text left, and the output buffer used so far. */
struct cursor {
    const char *p, *end;
    struct spanctx *sc;
    size_t used;
};

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool is_eol(char c) { return c == '\n' || c == '\r'; }
static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\f'; }

/* Appends c to the buffer; false when it is full. */
static bool put(struct cursor *c, char ch)
{
    if (c->used == SPANCTX_BUF) return false;
    c->sc->buf[c->used++] = ch;
    return true;
}

/* Copies one key (stop_at_sep) or value, unescaping, up to the end of the
 * line; NUL-terminates it. 0, or -1 with err. */
static int copy_part(struct cursor *c, bool stop_at_sep, char *err, size_t errlen)
{
    while (c->p < c->end && !is_eol(*c->p)) {
        char ch = *c->p;
        if (stop_at_sep && (ch == '=' || ch == ':' || is_blank(ch))) break;
        c->p++;
        if (ch == '\\') {
            if (c->p == c->end || is_eol(*c->p)) {
                snprintf(err, errlen, "span context: a line continuation (trailing backslash)");
                return -1;
            }
            ch = *c->p++;
            if (ch == 't') ch = '\t';
            else if (ch == 'n') ch = '\n';
            else if (ch == 'r') ch = '\r';
            else if (ch == 'f') ch = '\f';
            else if (ch == 'u') {
                int v = 0;
                for (int i = 0; i < 4; i++, c->p++) {
                    int h = c->p < c->end ? hexval(*c->p) : -1;
                    if (h < 0) {
                        snprintf(err, errlen, "span context: a \\u escape without 4 hex digits");
                        return -1;
                    }
                    v = v * 16 + h;
                }
                if (v == 0 || v >= 0x80) {
                    snprintf(err, errlen, "span context: \\u%04x is not a printable ASCII "
                             "character (a trace context header is ASCII)", (unsigned)v);
                    return -1;
                }
                ch = (char)v;
            }
        }
        if (!put(c, ch)) goto full;
    }
    if (put(c, '\0')) return 0;
full:
    snprintf(err, errlen, "span context: longer than %d bytes unescaped", SPANCTX_BUF);
    return -1;
}

/* One "key = value" line at c->p (blanks before it skipped). */
static int parse_entry(struct cursor *c, char *err, size_t errlen)
{
    struct spanctx *sc = c->sc;
    if (sc->n == SPANCTX_MAX_ENTRIES) {
        snprintf(err, errlen, "span context: more than %d entries", SPANCTX_MAX_ENTRIES);
        return -1;
    }
    size_t key = c->used;
    if (copy_part(c, true, err, errlen) != 0) return -1;
    if (sc->buf[key] == '\0') {
        snprintf(err, errlen, "span context: an entry with an empty key");
        return -1;
    }
    while (c->p < c->end && is_blank(*c->p)) c->p++;
    if (c->p == c->end || (*c->p != '=' && *c->p != ':')) {
        snprintf(err, errlen, "span context: \"%s\" is not followed by '=' or ':'",
                 &sc->buf[key]);
        return -1;
    }
    c->p++;
    while (c->p < c->end && is_blank(*c->p)) c->p++;
    size_t value = c->used;
    if (copy_part(c, false, err, errlen) != 0) return -1;
    sc->name[sc->n] = &sc->buf[key];
    sc->value[sc->n] = &sc->buf[value];
    sc->value_len[sc->n] = c->used - 1 - value;
    sc->n++;
    return 0;
}

int spanctx_parse(const char *text, size_t len, struct spanctx *sc, char *err, size_t errlen)
{
    struct cursor c = {text, text + len, sc, 0};
    sc->n = 0;
    while (c.p < c.end) {
        while (c.p < c.end && (is_blank(*c.p) || is_eol(*c.p))) c.p++;
        if (c.p == c.end) break;
        if (*c.p == '#' || *c.p == '!') {
            while (c.p < c.end && !is_eol(*c.p)) c.p++;
            continue;
        }
        if (parse_entry(&c, err, errlen) != 0) return -1;
    }
    return 0;
}
