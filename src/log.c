/*
 * log.c - one line per message on stderr, with a UTC timestamp, the pid and
 * the level. The threshold is the only process-wide state in outboxd: it is
 * set once from [log] level before anything else runs.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static enum log_level threshold = LOG_INFO;

void log_set_level(enum log_level level) { threshold = level; }

enum log_level log_get_level(void) { return threshold; }

int log_level_parse(const char *s)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

void log_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    static const char *const tags[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    if (level > threshold) return;

    char line[4096];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof(line),
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ outboxd[%d] %s: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000),
                     (int)getpid(), tags[level]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    /* Strip a trailing newline from libpq/librdkafka messages. */
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    line[len++] = '\n';
    /* One write() per line so concurrent lines do not interleave. */
    (void)!write(STDERR_FILENO, line, len);
}
