/*
 * log.h - the one error-reporting convention of outboxd.
 *
 * Every message goes to stderr as one line, in one of two formats
 * ([log] format):
 *
 *   text: 2026-11-30T12:00:00.123Z outboxd[pid] LEVEL: message key=value ...
 *   json: {"ts":"2026-11-30T12:00:00.123Z","level":"info","pid":12,
 *          "msg":"message","key":"value",...}
 *
 * Timestamps are UTC. The key=value pairs are the line's context: the
 * process-wide ones (log_set_context(), e.g. the slot) and the call's own
 * (log_kv(), e.g. lsn and event_id).
 *
 * Modules that can fail return an error code and fill a caller-provided
 * message buffer (char *err, size_t errlen); only the caller that decides
 * what to do about the error logs it, so each failure is reported once.
 * Nothing that may hold a secret (conninfo, sasl password) is ever passed here.
 *
 * Thread safety: log_msg() and log_kv() may be called from any thread
 * (librdkafka's, the HTTP server's); the context is set once at start-up
 * before other threads exist; the level and the format may be set again at
 * any time (SIGHUP reloads them: signals.h).
 */
#ifndef OUTBOXD_LOG_H
#define OUTBOXD_LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON = 1 };

/* One key=value context pair; arrays of them end with {NULL, NULL}. */
struct log_field {
    const char *key;
    const char *value;
};

/* A NULL-terminated field array as an expression: LOG_FIELDS({"lsn", a}). */
#define LOG_FIELDS(...) ((const struct log_field[]){__VA_ARGS__, {NULL, NULL}})

/* The process-wide threshold; messages above it are discarded. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Parses "error|warn|info|debug"; returns -1 when unknown. */
int log_level_parse(const char *s);

/* "error", "warn", "info", "debug"; "text", "json" (static strings). */
const char *log_level_name(enum log_level level);
const char *log_format_name(enum log_format format);

/* The output format (text by default). */
void log_set_format(enum log_format format);

/* Parses "text|json"; returns -1 when unknown. */
int log_format_parse(const char *s);

/* Sets a context pair that every later line carries (at most 4; a key set
 * again replaces its value). key and value are copied. */
void log_set_context(const char *key, const char *value);

/* Replaces control bytes in s with '?' so that a message built from data
 * (table or column names, topics) stays one log line. */
void log_one_line(char *s);

/*
 * Formats one line (ending in '\n') into out, at most outlen bytes
 * including a terminating NUL; a line that does not fit is cut short
 * (text) or its message shortened (json) so that it still ends in '\n' and
 * json stays valid. ts_us: microseconds since the Unix epoch. ctx and
 * fields: NULL or {NULL, NULL}-terminated. Control bytes become '?' (text)
 * or are escaped (json); bytes that are not UTF-8 become '?' in json.
 * Returns the length written. Pure: no clock, no I/O.
 */
size_t log_format_line(char *out, size_t outlen, enum log_format format, int64_t ts_us,
                       int pid, enum log_level level, const char *msg,
                       const struct log_field *ctx, const struct log_field *fields);

void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* log_msg() with context pairs for this line (NULL-terminated array). */
void log_kv(enum log_level level, const struct log_field *fields, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                       \
    do {                                                                     \
        if (log_get_level() >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__);   \
    } while (0)

#endif
