/*
 * outage.c - a failing connection's log lines, folded (see outage.h).
 */
#include "outage.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

void outage_init(struct outage *o, const char *what, const char *unit, int64_t every_ms)
{
    memset(o, 0, sizeof(*o));
    snprintf(o->what, sizeof(o->what), "%s", what);
    snprintf(o->unit, sizeof(o->unit), "%s", unit ? unit : "");
    o->every_ms = every_ms > 0 ? every_ms : OUTAGE_EVERY_MS;
    o->down_n = o->total_n = -1;
}

const char *outage_duration(int64_t ms, char *buf, size_t len)
{
    if (ms < 0) ms = 0;
    int64_t s = ms / 1000;
    if (ms < 1000)
        snprintf(buf, len, "%" PRId64 " ms", ms);
    else if (s < 60)
        snprintf(buf, len, "%" PRId64 " s", s);
    else if (s < 3600)
        snprintf(buf, len, "%" PRId64 " min %" PRId64 " s", s / 60, s % 60);
    else
        snprintf(buf, len, "%" PRId64 " h %" PRId64 " min", s / 3600, s % 3600 / 60);
    return buf;
}

/* The cause as one line: control bytes (a libpq error's newline and tab)
 * become spaces, runs of them one. */
static void set_cause(struct outage *o, const char *cause)
{
    size_t n = 0;
    bool space = false;
    for (const char *c = cause ? cause : "?"; *c && n + 1 < sizeof(o->last); c++) {
        bool ws = (unsigned char)*c < 0x20 || *c == ' ';
        if (ws && (space || n == 0)) continue;
        o->last[n++] = ws ? ' ' : *c;
        space = ws;
    }
    while (n > 0 && o->last[n - 1] == ' ')
        n--;
    o->last[n] = '\0';
}

/* The interval's line: for how long, how many attempts, the last error. */
static void say_still(struct outage *o, int64_t now_ms, char *line, size_t len)
{
    char d[32];
    outage_duration(now_ms - o->since_ms, d, sizeof(d));
    if (*o->unit && o->down_n > 0 && o->total_n > 0)
        snprintf(line, len,
                 "%s: %d of %d %s unreachable for %s, %" PRIu64 " attempts, last error: %s",
                 o->what, o->down_n, o->total_n, o->unit, d, o->attempts, o->last);
    else
        snprintf(line, len, "%s: failing for %s, %" PRIu64 " attempts, last error: %s",
                 o->what, d, o->attempts, o->last);
    o->said_ms = now_ms;
}

bool outage_fail(struct outage *o, int64_t now_ms, const char *cause, char *line,
                 size_t len)
{
    set_cause(o, cause);
    o->attempts++;
    o->last_ms = now_ms;
    if (!o->down) {
        o->down = true;
        o->since_ms = o->said_ms = now_ms;
        char d[32];
        snprintf(line, len,
                 "%s: %s (repeats are folded into one line every %s until it "
                 "recovers)",
                 o->what, o->last, outage_duration(o->every_ms, d, sizeof(d)));
        return true;
    }
    return outage_tick(o, now_ms, line, len);
}

void outage_units(struct outage *o, int down, int total)
{
    o->down_n = down;
    o->total_n = total;
}

bool outage_tick(struct outage *o, int64_t now_ms, char *line, size_t len)
{
    if (!o->down || now_ms - o->said_ms < o->every_ms) return false;
    say_still(o, now_ms, line, len);
    return true;
}

bool outage_ok(struct outage *o, int64_t now_ms, char *line, size_t len)
{
    if (!o->down) return false;
    char d[32];
    snprintf(line, len, "%s: recovered after %s of failures (%" PRIu64 " failed attempt%s)",
             o->what, outage_duration(now_ms - o->since_ms, d, sizeof(d)), o->attempts,
             o->attempts == 1 ? "" : "s");
    o->down = false;
    o->attempts = 0;
    o->down_n = o->total_n = -1;
    return true;
}
