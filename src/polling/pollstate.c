/*
 * pollstate.c - the phases, due steps and wake-up time of the polling
 * relay's loop (see pollstate.h). Pure.
 */
#include "pollstate.h"

static int64_t earlier(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Connected, with the statements built: rows can be claimed and written. */
static bool ready(const struct pollstate *s)
{
    return s->db == DB_UP && s->sql_ready;
}

bool pollstate_connect_due(const struct pollstate *s, int64_t now)
{
    return s->phase == PH_RUN && s->db == DB_DOWN && now >= s->next_connect_ms;
}

bool pollstate_connect_expired(const struct pollstate *s, int64_t now)
{
    return s->db == DB_CONNECTING && now >= s->connect_deadline_ms;
}

bool pollstate_claim_due(const struct pollstate *s, int64_t now)
{
    return s->phase == PH_RUN && ready(s) && !s->fatal && !s->rows_pending &&
           s->inflight < (size_t)(s->batch > 0 ? s->batch : 0) &&
           (s->claim_now || now >= s->next_claim_ms);
}

bool pollstate_produce_due(const struct pollstate *s, int64_t now)
{
    return s->phase == PH_RUN && s->rows_pending && !s->fatal && now >= s->next_produce_ms;
}

bool pollstate_results_due(const struct pollstate *s, int64_t now)
{
    return ready(s) && s->outcomes > 0 && now >= s->results_retry_ms;
}

bool pollstate_retention_due(const struct pollstate *s, int64_t now)
{
    return s->phase == PH_RUN && ready(s) && !s->fatal && s->retention &&
           now >= s->next_retention_ms;
}

bool pollstate_backlog_due(const struct pollstate *s, int64_t now)
{
    return s->phase == PH_RUN && ready(s) && s->backlog && now >= s->next_backlog_ms;
}

bool pollstate_check_due(const struct pollstate *s, int64_t now)
{
    return s->phase == PH_CHECK && (s->stop || now >= s->next_check_ms);
}

enum poll_phase pollstate_advance(struct pollstate *s, int64_t now, int64_t flush_ms)
{
    switch (s->phase) {
    case PH_CHECK:
        if (s->fatal) s->phase = PH_DONE;
        break;
    case PH_RUN:
        if (s->fatal) {
            s->phase = PH_DONE;
        } else if (s->stop && !s->rows_pending) {
            s->phase = PH_DRAIN;
            s->drain_deadline_ms = now + flush_ms;
        }
        break;
    case PH_DRAIN:
        if (s->inflight == 0 || now >= s->drain_deadline_ms) {
            s->phase = PH_RECORD;
            s->record_tries = 0;
        }
        break;
    case PH_RECORD:
        if (s->outcomes == 0 || s->record_tries >= POLLSTATE_RECORD_TRIES) s->phase = PH_DONE;
        break;
    case PH_DONE:
        break;
    }
    return s->phase;
}

bool pollstate_checked(struct pollstate *s, bool passed, int64_t now, int64_t retry_ms)
{
    if (passed) {
        s->phase = PH_RUN;
        return false;
    }
    s->check_tries++;
    if (s->check_tries >= POLLSTATE_CHECK_TRIES || s->stop) {
        s->fatal = true;
        s->phase = PH_DONE;
        return true;
    }
    s->next_check_ms = now + retry_ms;
    return false;
}

/* The earliest deadline of a RUN turn. */
static int64_t run_wake(const struct pollstate *s, int64_t now, int64_t t)
{
    if (s->db == DB_DOWN) t = earlier(t, s->next_connect_ms);
    if (s->db == DB_CONNECTING) t = earlier(t, s->connect_deadline_ms);
    if (s->rows_pending) t = earlier(t, s->next_produce_ms);
    bool can_claim = ready(s) && !s->rows_pending && s->inflight < (size_t)s->batch;
    if (can_claim && s->claim_now) return now;
    if (can_claim) t = earlier(t, s->next_claim_ms);
    if (s->db == DB_UP && s->retention) t = earlier(t, s->next_retention_ms);
    if (s->db == DB_UP && s->outcomes) t = earlier(t, s->results_retry_ms);
    if (ready(s) && s->backlog) t = earlier(t, s->next_backlog_ms);
    return t;
}

int64_t pollstate_wake_ms(const struct pollstate *s, int64_t now)
{
    int64_t t = now + POLLSTATE_MAX_WAIT_MS;
    if (s->fatal) return now;
    switch (s->phase) {
    case PH_CHECK:
        return s->stop ? now : earlier(t, s->next_check_ms);
    case PH_RUN:
        return s->stop && !s->rows_pending ? now : run_wake(s, now, t);
    case PH_DRAIN:
        return s->inflight == 0 ? now : earlier(t, s->drain_deadline_ms);
    case PH_RECORD:
        return s->db == DB_CONNECTING ? earlier(t, s->connect_deadline_ms) : now;
    case PH_DONE:
        break;
    }
    return now;
}
