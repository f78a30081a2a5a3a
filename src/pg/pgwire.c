/*
 * pgwire.c - message framing of the PostgreSQL wire protocol for the
 * replication stream outboxd reads itself (see pgwire.h and stream.c).
 */
#include "pgwire.h"

#include <stdio.h>
#include <string.h>

#include "replproto.h"

long pgwire_next(const char *buf, size_t avail, struct pgwire_msg *out, size_t *need,
                 char *err, size_t errlen)
{
    *need = PGWIRE_HEADER_LEN;
    if (avail < PGWIRE_HEADER_LEN) return 0;
    /* The length counts itself: a message has at least 4 of it. */
    uint32_t n = repl_get_u32((const unsigned char *)buf + 1);
    if (n < 4 || n > PGWIRE_MAX_LEN) {
        snprintf(err, errlen, "message '%c' (0x%02x) has an impossible length %u",
                 buf[0] >= 32 && buf[0] < 127 ? buf[0] : '?', (unsigned char)buf[0], n);
        return -1;
    }
    size_t whole = 1 + (size_t)n;
    *need = whole;
    if (avail < whole) return 0;
    out->type = buf[0];
    out->body = buf + PGWIRE_HEADER_LEN;
    out->len = whole - PGWIRE_HEADER_LEN;
    return (long)whole;
}

/* The ErrorResponse fields outboxd prints. */
struct error_fields {
    const char *severity, *sqlstate, *message, *detail, *hint;
};

/* Splits an ErrorResponse/NoticeResponse body into fields. Returns 0, or
 * -1 when a value is not NUL-terminated or the terminator is missing. */
static int split_fields(const char *body, size_t len, struct error_fields *f)
{
    memset(f, 0, sizeof(*f));
    size_t i = 0;
    while (i < len && body[i] != '\0') {
        char code = body[i++];
        const char *v = body + i;
        const char *end = memchr(v, '\0', len - i);
        if (!end) return -1;
        i = (size_t)(end - body) + 1;
        switch (code) {
        case 'V': f->severity = v; break; /* not localized: preferred */
        case 'S':
            if (!f->severity) f->severity = v;
            break;
        case 'C': f->sqlstate = v; break;
        case 'M': f->message = v; break;
        case 'D': f->detail = v; break;
        case 'H': f->hint = v; break;
        default: break; /* position, context, file, line, ... */
        }
    }
    return i < len ? 0 : -1;
}

int pgwire_error_text(const char *body, size_t len, char *out, size_t outlen,
                      char sqlstate[6])
{
    struct error_fields f;
    sqlstate[0] = '\0';
    if (split_fields(body, len, &f) != 0) {
        snprintf(out, outlen, "malformed error message from the server (%zu bytes)", len);
        return -1;
    }
    const char *sev = f.severity ? f.severity : "ERROR";
    if (f.sqlstate && strlen(f.sqlstate) == 5) memcpy(sqlstate, f.sqlstate, 6);
    int n = snprintf(out, outlen, "%s:  %s", sev, f.message ? f.message : "(no message)");
    if (f.detail && n >= 0 && (size_t)n < outlen)
        n += snprintf(out + n, outlen - (size_t)n, "\nDETAIL:  %s", f.detail);
    if (f.hint && n >= 0 && (size_t)n < outlen)
        snprintf(out + n, outlen - (size_t)n, "\nHINT:  %s", f.hint);
    return strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0 ? 0 : 1;
}

static void put_header(char out[PGWIRE_HEADER_LEN], char type, size_t body_len)
{
    uint32_t n = (uint32_t)(body_len + 4);
    out[0] = type;
    out[1] = (char)(n >> 24);
    out[2] = (char)(n >> 16);
    out[3] = (char)(n >> 8);
    out[4] = (char)n;
}

void pgwire_copydata_header(char out[PGWIRE_HEADER_LEN], size_t len)
{
    put_header(out, 'd', len);
}

void pgwire_copydone(char out[PGWIRE_HEADER_LEN]) { put_header(out, 'c', 0); }
