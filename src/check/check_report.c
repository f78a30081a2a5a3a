/*
 * check_report.c - the lines `outboxd check` prints (check.h): to stdout
 * one per finding, or, for the daemon's start-up checks (quiet), FAIL and
 * warn lines to the log; and the count of FAIL and warn lines a check's ok
 * line depends on (check_int.h).
 */
#include "check_int.h"

#include <stdarg.h>
#include <stdio.h>

#include "log.h"

char *check_format_line(char *out, size_t outlen, enum check_status st, const char *what,
                        const char *problem, const char *fix)
{
    static const char *const prefix[] = {"ok  ", "warn", "FAIL", "skip"};
    bool has_problem = problem && *problem,
         has_fix = fix && *fix && st != CHECK_OK && st != CHECK_SKIP;
    snprintf(out, outlen, "%s %s%s%s%s%s", prefix[st], what, has_problem ? ": " : "",
             has_problem ? problem : "", has_fix ? "; " : "", has_fix ? fix : "");
    return out;
}

static void emit(struct ck *k, enum check_status st, const char *what, const char *problem,
                 const char *fix)
{
    char line[4096], named[512];
    if (k->label) {
        snprintf(named, sizeof(named), "%s %s", what, k->label);
        what = named;
    }
    if (st == CHECK_FAIL) k->nfail++;
    if (st == CHECK_FAIL || st == CHECK_WARN) k->said++;
    if (k->quiet) {
        if (st == CHECK_FAIL || st == CHECK_WARN)
            log_msg(st == CHECK_FAIL ? LOG_ERROR : LOG_WARN, "%s: %s%s%s", what,
                    problem ? problem : "", fix && *fix ? "; " : "", fix ? fix : "");
        return;
    }
    puts(check_format_line(line, sizeof(line), st, what, problem, fix));
    fflush(stdout);
}

/* ck_report(k, status, what, fix, fmt, ...): one line; fmt (may be NULL)
 * gives the problem, or the detail of an ok line. */
void ck_report(struct ck *k, enum check_status st, const char *what, const char *fix,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void ck_report(struct ck *k, enum check_status st, const char *what, const char *fix,
               const char *fmt, ...)
{
    char problem[2048] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(problem, sizeof(problem), fmt, ap);
        va_end(ap);
    }
    emit(k, st, what, fmt ? problem : NULL, fix);
}

/* Starts a check: remembers how many FAIL/warn lines came before, so an ok
 * line is printed only when the check itself said nothing else. */
int ck_begin(const struct ck *k)
{
    return k->said;
}
bool ck_silent_since(const struct ck *k, int mark)
{
    return k->said == mark;
}

void ck_skip(struct ck *k, const char *what, const char *why)
{
    emit(k, CHECK_SKIP, what, why, NULL);
}
