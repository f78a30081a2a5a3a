/*
 * polling.c - the pure part of polling mode (see polling.h): durations,
 * retry backoff with jitter, outcome classification and the SQL text of
 * the polling relay's statements.
 */
#include "polling.h"

#include "duration.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const polling_state_columns[] = {
    "seq",         "status",           "attempts",    "next_attempt_at", "lease_owner",
    "lease_generation", "lease_until", "sent_at",     "last_error",      NULL,
};

int polling_duration_parse(const char *s, int64_t *ms, char *err, size_t errlen)
{
    return duration_parse(s, 0, ms, err, errlen);
}

int64_t polling_backoff_ms(int attempts, int64_t min_ms, int64_t max_ms, uint64_t rnd)
{
    if (min_ms < 1) min_ms = 1;
    if (max_ms < min_ms) max_ms = min_ms;
    int64_t base = min_ms;
    for (int i = 1; i < attempts && base < max_ms; i++)
        base = base > max_ms / 2 ? max_ms : base * 2;
    if (base > max_ms) base = max_ms;
    int64_t half = base / 2;
    return base - half + (int64_t)(rnd % (uint64_t)(half + 1));
}

enum polling_action polling_classify(int kafka_err, bool permanent, int attempts,
                                     int max_attempts)
{
    if (kafka_err == 0) return PA_SENT;
    if (permanent) return PA_QUARANTINE;
    return attempts + 1 >= max_attempts ? PA_QUARANTINE : PA_RETRY;
}

const char *polling_action_name(enum polling_action a)
{
    switch (a) {
    case PA_SENT: return "SENT";
    case PA_RETRY: return "RETRY";
    case PA_QUARANTINE: return "QUARANTINE";
    }
    return "?";
}

char *polling_quote_ident(const char *name)
{
    size_t n = 2;
    for (const char *p = name; *p; p++) n += *p == '"' ? 2 : 1;
    char *out = malloc(n + 1), *q = out;
    if (!out) return NULL;
    *q++ = '"';
    for (const char *p = name; *p; p++) {
        if (*p == '"') *q++ = '"';
        *q++ = *p;
    }
    *q++ = '"';
    *q = '\0';
    return out;
}

/* printf into a new string (caller frees); NULL on out of memory. */
static char *sql_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *sql_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* The lease/ownership condition of every outcome update, on alias t and
 * the unnest alias a (id, gen). */
#define OWNED "t.%s = a.id AND t.lease_generation = a.gen AND t.status = 'CLAIMED' " \
              "AND t.lease_owner = $3"

int polling_sql_build(struct polling_sql *q, const struct outbox_map *map,
                      const char *etype, char *err, size_t errlen)
{
    memset(q, 0, sizeof(*q));
    char *schema = polling_quote_ident(map->schema);
    char *table = polling_quote_ident(map->table);
    char *eid = polling_quote_ident(map->columns[OC_EVENT_ID]);
    char *agg = polling_quote_ident(map->columns[OC_AGGREGATE_ID]);
    char *t = schema && table ? sql_printf("%s.%s", schema, table) : NULL;
    if (!t || !eid || !agg) goto oom;

    q->claim = sql_printf(
        "WITH c AS (SELECT o.ctid FROM %1$s o"
        " WHERE o.status IN ('PENDING', 'CLAIMED') AND o.next_attempt_at <= now()"
        " AND (o.status = 'PENDING' OR o.lease_until <= now())"
        " AND NOT EXISTS (SELECT 1 FROM %1$s e WHERE e.%2$s = o.%2$s AND e.seq < o.seq"
        " AND e.status <> 'SENT')"
        " ORDER BY o.seq LIMIT $3 FOR UPDATE OF o SKIP LOCKED),"
        " u AS (UPDATE %1$s t SET status = 'CLAIMED', lease_owner = $1,"
        " lease_generation = t.lease_generation + 1,"
        " lease_until = now() + $2::bigint * interval '1 millisecond',"
        " next_attempt_at = now() + $2::bigint * interval '1 millisecond'"
        " FROM c WHERE t.ctid = c.ctid RETURNING t.*)"
        " SELECT * FROM u ORDER BY seq",
        t, agg);
    q->sent = sql_printf(
        "UPDATE %s t SET status = 'SENT', sent_at = now(), lease_owner = NULL,"
        " lease_until = NULL FROM unnest($1::%s[], $2::bigint[]) AS a(id, gen)"
        " WHERE " OWNED " RETURNING t.%s::text",
        t, etype, eid, eid);
    q->fail = sql_printf(
        "UPDATE %s t SET status = a.st, attempts = t.attempts + a.bump,"
        " next_attempt_at = CASE WHEN a.st = 'PENDING'"
        " THEN now() + a.delay * interval '1 millisecond' ELSE t.next_attempt_at END,"
        " last_error = coalesce(a.err, t.last_error), lease_owner = NULL, lease_until = NULL"
        " FROM unnest($1::%s[], $2::bigint[], $4::text[], $5::bigint[], $6::text[],"
        " $7::int[]) AS a(id, gen, st, delay, err, bump)"
        " WHERE " OWNED " RETURNING t.%s::text",
        t, etype, eid, eid);
    q->retention = sql_printf(
        "DELETE FROM %1$s t WHERE t.ctid IN (SELECT s.ctid FROM %1$s s"
        " WHERE s.status = 'SENT' AND s.sent_at < now() - $1::bigint * interval '1 millisecond'"
        " ORDER BY s.sent_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
        t);
    q->requeue = sql_printf(
        "UPDATE %1$s SET status = 'PENDING', attempts = 0, next_attempt_at = now(),"
        " lease_owner = NULL, lease_until = NULL"
        " WHERE %2$s = ANY($1::%3$s[]) AND status = 'QUARANTINED' RETURNING %2$s::text",
        t, eid, etype);
    q->states = sql_printf("SELECT %2$s::text, status FROM %1$s WHERE %2$s = ANY($1::%3$s[])",
                           t, eid, etype);
    if (!q->claim || !q->sent || !q->fail || !q->retention || !q->requeue || !q->states)
        goto oom;
    free(schema);
    free(table);
    free(eid);
    free(agg);
    free(t);
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    free(schema);
    free(table);
    free(eid);
    free(agg);
    free(t);
    polling_sql_free(q);
    return -1;
}

void polling_sql_free(struct polling_sql *q)
{
    free(q->claim);
    free(q->sent);
    free(q->fail);
    free(q->retention);
    free(q->requeue);
    free(q->states);
    memset(q, 0, sizeof(*q));
}
