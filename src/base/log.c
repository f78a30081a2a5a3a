/*
 * log.c - one line per message on stderr, text or JSON, with a UTC
 * timestamp, the pid, the level and key=value context.
 *
 * The settings (threshold, format, process-wide context) are the only
 * process-wide state in outboxd: the context is set once before any other
 * thread exists; the threshold and the format are atomics, because SIGHUP
 * (signals.c) sets them again while librdkafka's and the HTTP server's
 * threads log. Formatting is done by the
 * pure log_format_line() into a stack buffer, written with one write() so
 * that lines from several threads never interleave.
 */
#include "log.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define LOG_LINE_MAX 4096
#define LOG_CONTEXT_MAX 4

static _Atomic int threshold = LOG_INFO;
static _Atomic int out_format = LOG_FORMAT_TEXT;
static char context_keys[LOG_CONTEXT_MAX][32];
static char context_values[LOG_CONTEXT_MAX][128];
static struct log_field context[LOG_CONTEXT_MAX + 1];

static const char *const level_tags[] = {"ERROR", "WARN", "INFO", "DEBUG"};
static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(enum log_level level) { threshold = level; }

enum log_level log_get_level(void) { return (enum log_level)atomic_load(&threshold); }

const char *log_level_name(enum log_level level)
{
    return (unsigned)level <= LOG_DEBUG ? level_names[level] : "?";
}

const char *log_format_name(enum log_format format)
{
    return format == LOG_FORMAT_JSON ? "json" : "text";
}

int log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0) return i;
    return -1;
}

void log_set_format(enum log_format format)
{
    out_format = format;
}

int log_format_parse(const char *s)
{
    if (strcmp(s, "text") == 0) return LOG_FORMAT_TEXT;
    if (strcmp(s, "json") == 0) return LOG_FORMAT_JSON;
    return -1;
}

void log_set_context(const char *key, const char *value)
{
    int i = 0;
    while (i < LOG_CONTEXT_MAX && context[i].key && strcmp(context[i].key, key) != 0)
        i++;
    if (i == LOG_CONTEXT_MAX) return;
    snprintf(context_keys[i], sizeof(context_keys[i]), "%s", key);
    snprintf(context_values[i], sizeof(context_values[i]), "%s", value);
    context[i] = (struct log_field){context_keys[i], context_values[i]};
}

void log_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* ---- text -------------------------------------------------------------- */

/* Appends up to n bytes of s to out, control bytes as '?', always leaving
 * room for the final '\n' and NUL. */
static size_t put(char *out, size_t outlen, size_t pos, const char *s, size_t n)
{
    for (size_t i = 0; i < n && pos + 2 < outlen; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[pos++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    return pos;
}

/* A value that needs quotes in key=value: empty, or with space, quote,
 * backslash or '='. */
static bool needs_quotes(const char *v)
{
    return *v == '\0' || strpbrk(v, " \"\\=") != NULL;
}

static size_t put_field(char *out, size_t outlen, size_t pos, const struct log_field *f)
{
    const char *v = f->value ? f->value : "";
    pos = put(out, outlen, pos, " ", 1);
    pos = put(out, outlen, pos, f->key, strlen(f->key));
    pos = put(out, outlen, pos, "=", 1);
    if (!needs_quotes(v)) return put(out, outlen, pos, v, strlen(v));
    pos = put(out, outlen, pos, "\"", 1);
    for (; *v; v++) {
        if (*v == '"' || *v == '\\') pos = put(out, outlen, pos, "\\", 1);
        pos = put(out, outlen, pos, v, 1);
    }
    return put(out, outlen, pos, "\"", 1);
}

static void format_ts(int64_t ts_us, char *buf, size_t len)
{
    time_t secs = (time_t)(ts_us / 1000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    int ms = (int)(ts_us % 1000000 / 1000);
    if (ms < 0) ms = 0;
    snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             (tm.tm_mon + 1) % 100, tm.tm_mday % 100, tm.tm_hour % 100, tm.tm_min % 100,
             tm.tm_sec % 100, ms % 1000);
}

/* The message without trailing newlines (libpq and librdkafka end theirs
 * with one). */
static size_t msg_len(const char *msg)
{
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        n--;
    return n;
}

static size_t format_text(char *out, size_t outlen, const char *ts, int pid,
                          enum log_level level, const char *msg,
                          const struct log_field *ctx, const struct log_field *fields)
{
    char head[96];
    int hn =
        snprintf(head, sizeof(head), "%s outboxd[%d] %s: ", ts, pid, level_tags[level]);
    size_t pos = put(out, outlen, 0, head, (size_t)hn);
    pos = put(out, outlen, pos, msg, msg_len(msg));
    for (const struct log_field *f = fields; f && f->key; f++)
        pos = put_field(out, outlen, pos, f);
    for (const struct log_field *f = ctx; f && f->key; f++)
        pos = put_field(out, outlen, pos, f);
    out[pos++] = '\n'; /* put() always leaves room for it and the NUL */
    out[pos] = '\0';
    return pos;
}

/* ---- json -------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if ((s[0] & 0xe0) == 0xc0)
        len = 2, cp = s[0] & 0x1f;
    else if ((s[0] & 0xf0) == 0xe0)
        len = 3, cp = s[0] & 0x0f;
    else if ((s[0] & 0xf8) == 0xf0)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

/* A JSON string of the first n bytes of s, invalid UTF-8 bytes as '?'. */
static json_t *json_text(const char *s, size_t n)
{
    char *copy = malloc(n + 1);
    if (!copy) return NULL;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0) {
            copy[i++] = '?';
        } else {
            memcpy(copy + i, s + i, k);
            i += k;
        }
    }
    copy[n] = '\0';
    json_t *j = json_stringn(copy, n);
    free(copy);
    return j;
}

static void set_text(json_t *obj, const char *key, const char *v, size_t n)
{
    json_t *j = json_text(v, n);
    if (j) json_object_set_new(obj, key, j);
}

/* Dumps the line with the message cut to mlen bytes; NULL on out of
 * memory. The caller frees. */
static char *dump_json(const char *ts, int pid, enum log_level level, const char *msg,
                       size_t mlen, const struct log_field *ctx,
                       const struct log_field *fields)
{
    json_t *obj = json_object();
    if (!obj) return NULL;
    set_text(obj, "ts", ts, strlen(ts));
    set_text(obj, "level", level_names[level], strlen(level_names[level]));
    json_object_set_new(obj, "pid", json_integer(pid));
    set_text(obj, "msg", msg, mlen);
    /* Context never replaces the four fields above. */
    const struct log_field *lists[2] = {fields, ctx};
    for (int l = 0; l < 2; l++)
        for (const struct log_field *f = lists[l]; f && f->key; f++)
            if (!json_object_get(obj, f->key)) {
                const char *v = f->value ? f->value : "";
                set_text(obj, f->key, v, strlen(v));
            }
    char *s = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return s;
}

static size_t format_json(char *out, size_t outlen, const char *ts, int pid,
                          enum log_level level, const char *msg,
                          const struct log_field *ctx, const struct log_field *fields)
{
    size_t mlen = msg_len(msg);
    for (int attempt = 0; attempt < 12; attempt++) {
        char *s = dump_json(ts, pid, level, msg, mlen, ctx, fields);
        size_t n = s ? strlen(s) : 0;
        if (s && n + 2 <= outlen) {
            memcpy(out, s, n);
            out[n++] = '\n';
            out[n] = '\0';
            free(s);
            return n;
        }
        free(s);
        if (!s || mlen == 0) break; /* the fields alone are too long */
        /* Too long: shorten the message in proportion (escapes make
         * some bytes longer) at a character boundary, and try again. */
        size_t shorter = (size_t)((double)mlen * (double)(outlen - 2) / (double)n * 0.9);
        mlen = shorter < mlen ? shorter : mlen - 1;
        while (mlen > 0 && ((unsigned char)msg[mlen] & 0xc0) == 0x80)
            mlen--;
    }
    int n = snprintf(out, outlen,
                     "{\"ts\":\"%s\",\"level\":\"%s\",\"pid\":%d,\"msg\":\"%s\"}\n", ts,
                     level_names[level], pid, "(log line too long or out of memory)");
    return n < 0 ? 0 : (size_t)n < outlen ? (size_t)n : outlen - 1;
}

size_t log_format_line(char *out, size_t outlen, enum log_format format, int64_t ts_us,
                       int pid, enum log_level level, const char *msg,
                       const struct log_field *ctx, const struct log_field *fields)
{
    char ts[64];
    if (outlen < 2) return 0;
    if ((unsigned)level > LOG_DEBUG) level = LOG_ERROR;
    format_ts(ts_us, ts, sizeof(ts));
    if (format == LOG_FORMAT_JSON)
        return format_json(out, outlen, ts, pid, level, msg, ctx, fields);
    return format_text(out, outlen, ts, pid, level, msg, ctx, fields);
}

/* ---- output ------------------------------------------------------------ */

static void emit(enum log_level level, const struct log_field *fields, const char *fmt,
                 va_list ap)
{
    char msg[LOG_LINE_MAX], line[LOG_LINE_MAX + 512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = log_format_line(line, sizeof(line), out_format, clock_unix_us(), (int)getpid(),
                               level, msg, context, fields);
    /* One write() per line so concurrent lines do not interleave. */
    (void)!write(STDERR_FILENO, line, n);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if ((int)level > atomic_load(&threshold)) return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, NULL, fmt, ap);
    va_end(ap);
}

void log_kv(enum log_level level, const struct log_field *fields, const char *fmt, ...)
{
    if ((int)level > atomic_load(&threshold)) return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, fields, fmt, ap);
    va_end(ap);
}
