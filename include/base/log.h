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
 * The error convention, the one every module follows:
 *
 *   Return codes. A function that can fail returns int: 0 on success, -1
 *   on failure. One whose caller must tell more outcomes apart returns a
 *   documented code of its module instead: an enum or #defines in its
 *   header (e.g. PRODUCER_OK/PRODUCER_QUEUE_FULL/PRODUCER_ERROR), or a
 *   count >= 0 and -1; the function's comment lists every value it
 *   returns. A bare negative literal never means anything but -1, failed
 *   (no -2 for "retry later": name it). Predicates return bool; a
 *   constructor returns its object, NULL on failure, and says who frees it.
 *
 *   The err buffer. A function that can fail for a reason worth telling
 *   takes char *err, size_t errlen (last) and on failure writes one line
 *   into it: NUL-terminated, cut to errlen, no newline and no control
 *   bytes from the input (log_one_line()), secrets masked (redact.h). On
 *   success it leaves err alone or empty; the caller reads err only after
 *   a failure. A caller that adds context writes its own err quoting the
 *   callee's ("reading the slot: <callee's err>"). Error texts are part of
 *   the behaviour: tests and operators match them.
 *
 *   Who logs. The caller that decides what happens next (retry, skip,
 *   dead-letter, stop, exit) logs the failure, once, with log_msg() or
 *   log_kv(); a function that reports an error through its return code and
 *   err does not log it as well. Pure modules never log. Code with nobody
 *   to return to (librdkafka's callbacks, signal-driven reloads, the HTTP
 *   server's threads) logs itself.
 *
 *   Exit codes. Only main.c's functions and the run functions main()
 *   calls (relay_run, poll_relay_run, check_run, check_config_failed,
 *   verify_run, accept_slot_run, poll_requeue_run) return exit codes, and
 *   only those of exitcode.h:
 *   EXIT_OK 0, EXIT_FATAL 1 (systemd restarts), EXIT_USAGE 2 (bad usage or
 *   configuration, or a state only an operator can resolve; README "Exit
 *   codes"). Nothing below them returns an exit code: they map their
 *   callees' codes to one.
 *
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
