/*
 * log.h - the one error-reporting convention of outboxd.
 *
 * Every message goes to stderr as one line:
 *   2026-11-30T12:00:00.123Z outboxd[pid] LEVEL: message
 * Modules that can fail return an error code and fill a caller-provided
 * message buffer (char *err, size_t errlen); only the caller that decides
 * what to do about the error logs it, so each failure is reported once.
 * Nothing that may hold a secret (conninfo, sasl password) is ever passed here.
 */
#ifndef OUTBOXD_LOG_H
#define OUTBOXD_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* The process-wide threshold; messages above it are discarded. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Parses "error|warn|info|debug"; returns -1 when unknown. */
int log_level_parse(const char *s);

/* Replaces control bytes in s with '?' so that a message built from data
 * (table or column names, topics) stays one log line. */
void log_one_line(char *s);

void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                       \
    do {                                                                     \
        if (log_get_level() >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__);   \
    } while (0)

#endif
