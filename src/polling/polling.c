/*
 * polling.c - the pure part of polling mode (see polling.h): retry
 * backoff with jitter, outcome classification, the SQL text of the
 * polling relay's statements (quoted with pgsql.h), the backlog, and the
 * verdict `outboxd requeue` prints per event.
 */
#include "polling.h"

#include "pgsql.h"
#include "str.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const polling_state_columns[] = {
    "seq",         "status",           "attempts",    "next_attempt_at", "lease_owner",
    "lease_generation", "lease_until", "sent_at",     "last_error",      NULL,
};

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

/* The lease/ownership condition of every outcome update, on alias t and
 * the unnest alias a (id, gen). */
#define OWNED "t.%s = a.id AND t.lease_generation = a.gen AND t.status = 'CLAIMED' " \
              "AND t.lease_owner = $3"

int polling_sql_build(struct polling_sql *q, const struct outbox_map *map,
                      const char *etype, char *err, size_t errlen)
{
    memset(q, 0, sizeof(*q));
    char *t = pgsql_quote_qualified(map->schema, map->table);
    char *eid = pgsql_quote_ident(map->columns[OC_EVENT_ID]);
    char *agg = pgsql_quote_ident(map->columns[OC_AGGREGATE_ID]);
    if (!t || !eid || !agg) goto oom;

    q->claim = str_printf(
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
    q->sent = str_printf(
        "UPDATE %s t SET status = 'SENT', sent_at = now(), lease_owner = NULL,"
        " lease_until = NULL FROM unnest($1::%s[], $2::bigint[]) AS a(id, gen)"
        " WHERE " OWNED " RETURNING t.%s::text",
        t, etype, eid, eid);
    q->fail = str_printf(
        "UPDATE %s t SET status = a.st, attempts = t.attempts + a.bump,"
        " next_attempt_at = CASE WHEN a.st = 'PENDING'"
        " THEN now() + a.delay * interval '1 millisecond' ELSE t.next_attempt_at END,"
        " last_error = coalesce(a.err, t.last_error), lease_owner = NULL, lease_until = NULL"
        " FROM unnest($1::%s[], $2::bigint[], $4::text[], $5::bigint[], $6::text[],"
        " $7::int[]) AS a(id, gen, st, delay, err, bump)"
        " WHERE " OWNED " RETURNING t.%s::text",
        t, etype, eid, eid);
    q->retention = str_printf(
        "DELETE FROM %1$s t WHERE t.ctid IN (SELECT s.ctid FROM %1$s s"
        " WHERE s.status = 'SENT' AND s.sent_at < now() - $1::bigint * interval '1 millisecond'"
        " ORDER BY s.sent_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
        t);
    q->requeue = str_printf(
        "UPDATE %1$s SET status = 'PENDING', attempts = 0, next_attempt_at = now(),"
        " lease_owner = NULL, lease_until = NULL"
        " WHERE %2$s = ANY($1::%3$s[]) AND status = 'QUARANTINED' RETURNING %2$s::text",
        t, eid, etype);
    q->states = str_printf("SELECT %2$s::text, status FROM %1$s WHERE %2$s = ANY($1::%3$s[])",
                           t, eid, etype);
    if (!q->claim || !q->sent || !q->fail || !q->retention || !q->requeue || !q->states)
        goto oom;
    free(eid);
    free(agg);
    free(t);
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
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

/* ---- the backlog --------------------------------------------------------- */

const char *polling_status_name(enum polling_status s)
{
    static const char *const names[PS__COUNT] = {"PENDING", "CLAIMED", "QUARANTINED"};
    return (unsigned)s < PS__COUNT ? names[s] : "?";
}

char *polling_backlog_sql(const struct outbox_map *map)
{
    char *t = pgsql_quote_qualified(map->schema, map->table);
    char *lit = t ? pgsql_quote_literal(t) : NULL;
    char *sql = lit ? str_printf(
        "WITH b AS (SELECT status, count(*) AS n, min(created_at) AS oldest,"
        " max(attempts) AS att FROM %1$s WHERE status <> 'SENT' GROUP BY status)"
        " SELECT s.status, coalesce(b.n, 0),"
        " coalesce(greatest(floor(extract(epoch FROM now() - b.oldest) * 1000), 0),"
        " 0)::bigint,"
        " coalesce(b.att, 0), pg_catalog.pg_total_relation_size(%2$s::regclass)"
        " FROM unnest(ARRAY['PENDING', 'CLAIMED', 'QUARANTINED'])"
        " WITH ORDINALITY AS s(status, i)"
        " LEFT JOIN b USING (status) ORDER BY s.i",
        t, lit) : NULL;
    free(t);
    free(lit);
    return sql;
}

/* A non-negative decimal integer. */
static int parse_count(const char *s, int64_t *out)
{
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int polling_backlog_row(struct polling_backlog *b, const char *const vals[5], char *err,
                        size_t errlen)
{
    int s = 0;
    while (s < PS__COUNT && (!vals[0] || strcmp(vals[0], polling_status_name(s)) != 0)) s++;
    if (s == PS__COUNT) {
        snprintf(err, errlen, "backlog query: unknown status \"%s\"",
                 vals[0] ? vals[0] : "");
        return -1;
    }
    int64_t v[4];
    for (int i = 0; i < 4; i++)
        if (parse_count(vals[i + 1], &v[i]) != 0) {
            snprintf(err, errlen, "backlog query: \"%s\" is not a count",
                     vals[i + 1] ? vals[i + 1] : "");
            return -1;
        }
    b->rows[s] = v[0];
    b->oldest_ms[s] = v[1];
    b->max_attempts[s] = v[2];
    b->table_bytes = v[3];
    return 0;
}

/* "45 s", "3m 20s", "5h 2m", "2d 3h". */
static void duration_text(int64_t ms, char *out, size_t outlen)
{
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(out, outlen, "%" PRId64 " s", s);
    else if (s < 3600)
        snprintf(out, outlen, "%" PRId64 "m %" PRId64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(out, outlen, "%" PRId64 "h %" PRId64 "m", s / 3600, s % 3600 / 60);
    else
        snprintf(out, outlen, "%" PRId64 "d %" PRId64 "h", s / 86400, s % 86400 / 3600);
}

/* "512 B", "64.0 KiB", "1.2 MiB" ... */
static void bytes_text(int64_t n, char *out, size_t outlen)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (n < 1024) {
        snprintf(out, outlen, "%" PRId64 " B", n);
        return;
    }
    double v = (double)n / 1024;
    size_t u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    snprintf(out, outlen, "%.1f %s", v, units[u]);
}

char *polling_backlog_line(const struct polling_backlog *b, char *out, size_t outlen)
{
    int64_t total = 0, attempts = 0;
    int oldest = -1;
    for (int s = 0; s < PS__COUNT; s++) {
        total += b->rows[s];
        if (b->max_attempts[s] > attempts) attempts = b->max_attempts[s];
        if (b->rows[s] && (oldest < 0 || b->oldest_ms[s] > b->oldest_ms[oldest])) oldest = s;
    }
    char size[32], age[32], status[16];
    bytes_text(b->table_bytes, size, sizeof(size));
    if (total == 0) {
        snprintf(out, outlen, "0 undelivered rows; table %s", size);
        return out;
    }
    duration_text(b->oldest_ms[oldest], age, sizeof(age));
    snprintf(status, sizeof(status), "%s", polling_status_name(oldest));
    for (char *p = status; *p; p++) *p = (char)(*p - 'A' + 'a');
    snprintf(out, outlen,
             "%" PRId64 " undelivered row%s: %" PRId64 " pending, %" PRId64 " claimed, %" PRId64
             " quarantined; oldest created %s ago (%s); at most %" PRId64
             " failed attempt%s; table %s",
             total, total == 1 ? "" : "s", b->rows[PS_PENDING], b->rows[PS_CLAIMED],
             b->rows[PS_QUARANTINED], age, status, attempts, attempts == 1 ? "" : "s", size);
    return out;
}

/* ---- requeue ------------------------------------------------------------- */

bool polling_requeue_verdict(const char *id, const struct polling_requeue_answer *ans,
                             const char *table, char *out, size_t outlen)
{
    /* The server's text form may differ from the argument (uuid case). */
    const char *state = NULL, *norm = NULL;
    for (int s = 0; s < ans->nstates && !state; s++)
        if (!strcasecmp(ans->state_ids[s], id)) {
            state = ans->states[s];
            norm = ans->state_ids[s];
        }
    bool requeued = false;
    for (int d = 0; d < ans->ndone && norm && !requeued; d++)
        requeued = !strcmp(ans->done[d], norm);
    if (requeued)
        snprintf(out, outlen, "requeued %s", norm);
    else if (state)
        snprintf(out, outlen, "not requeued %s: it is %s, not QUARANTINED", id, state);
    else
        snprintf(out, outlen, "not requeued %s: no such event in %s", id, table);
    return requeued;
}
