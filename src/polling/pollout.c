/*
 * pollout.c - the polling relay's queue of outcomes and the parameters of
 * the statements that write them (see pollout.h). Pure.
 */
#include "pollout.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

const char *pollout_kind_name(enum pollout_kind k)
{
    static const char *const names[OUT__COUNT] = {"SENT", "retry", "QUARANTINED", "release"};
    return (unsigned)k < OUT__COUNT ? names[k] : "?";
}

int pollout_add(struct pollout *o, enum pollout_kind kind, char *event_id, int64_t gen,
                int64_t delay_ms, char *error)
{
    if (grow_array((void **)&o->e, &o->cap, o->n + 1, sizeof(*o->e), 64) != 0) {
        free(event_id);
        free(error);
        return -1;
    }
    o->e[o->n++] = (struct pollout_entry){kind, event_id, gen, delay_ms, error};
    return 0;
}

bool pollout_has(const struct pollout *o, const char *id)
{
    for (size_t i = 0; i < o->n; i++)
        if (!strcmp(o->e[i].event_id, id)) return true;
    return false;
}

size_t pollout_count(const struct pollout *o, enum pollout_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < o->n; i++) n += o->e[i].kind == k;
    return n;
}

/* Whether outcome x belongs to group sent. */
static bool in_group(const struct pollout_entry *x, bool sent)
{
    return (x->kind == OUT_SENT) == sent;
}

int pollout_params(const struct pollout *o, bool sent, struct pollout_params *p)
{
    struct pgsql_array *all[] = {&p->ids, &p->gens, &p->sts, &p->delays, &p->errs, &p->bumps};
    char num[32];
    int n = 0;
    for (size_t i = 0; i < o->n; i++) {
        const struct pollout_entry *x = &o->e[i];
        if (!in_group(x, sent)) continue;
        n++;
        pgsql_array_add(&p->ids, x->event_id);
        snprintf(num, sizeof(num), "%" PRId64, x->gen);
        pgsql_array_add(&p->gens, num);
        pgsql_array_add(&p->sts, x->kind == OUT_QUARANTINE ? "QUARANTINED" : "PENDING");
        snprintf(num, sizeof(num), "%" PRId64, x->kind == OUT_RETRY ? x->delay_ms : 0);
        pgsql_array_add(&p->delays, num);
        pgsql_array_add(&p->errs, x->error);
        pgsql_array_add(&p->bumps, x->kind == OUT_RELEASE ? "0" : "1");
    }
    for (int i = 0; i < 6; i++)
        if (!pgsql_array_text(all[i])) return -1;
    return n;
}

void pollout_params_free(struct pollout_params *p)
{
    struct pgsql_array *all[] = {&p->ids, &p->gens, &p->sts, &p->delays, &p->errs, &p->bumps};
    for (int i = 0; i < 6; i++) pgsql_array_free(all[i]);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

size_t pollout_done(struct pollout *o, bool sent, const char **changed, size_t nchanged,
                    pollout_stale_fn stale, void *ctx)
{
    /* changed may be NULL when nchanged is 0: qsort and bsearch must not get it */
    if (nchanged > 1) qsort(changed, nchanged, sizeof(*changed), cmp_str);
    size_t keep = 0, nstale = 0;
    for (size_t i = 0; i < o->n; i++) {
        struct pollout_entry *x = &o->e[i];
        if (!in_group(x, sent)) {
            o->e[keep++] = *x;
            continue;
        }
        const char *key = x->event_id;
        if (nchanged && bsearch(&key, changed, nchanged, sizeof(*changed), cmp_str)) {
            o->recorded[x->kind]++;
        } else {
            o->stale++;
            nstale++;
            if (stale) stale(ctx, x, nstale);
        }
        free(x->event_id);
        free(x->error);
    }
    o->n = keep;
    return nstale;
}

void pollout_free(struct pollout *o)
{
    for (size_t i = 0; i < o->n; i++) {
        free(o->e[i].event_id);
        free(o->e[i].error);
    }
    free(o->e);
    memset(o, 0, sizeof(*o));
}
