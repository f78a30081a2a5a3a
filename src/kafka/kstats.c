/*
 * kstats.c - librdkafka's per-broker statistics over a run (see kstats.h
 * for the fields read and what they mean).
 */
#include "kstats.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

void kstats_free(struct kstats *ks)
{
    for (size_t i = 0; i < ks->n; i++) free(ks->b[i].name);
    free(ks->b);
    *ks = (struct kstats){0};
}

/* The broker named name, added on first sight; NULL when out of memory
 * or past KSTATS_MAX_BROKERS. */
static struct kstats_broker *broker_of(struct kstats *ks, const char *name)
{
    for (size_t i = 0; i < ks->n; i++)
        if (strcmp(ks->b[i].name, name) == 0) return &ks->b[i];
    if (ks->n >= KSTATS_MAX_BROKERS) return NULL;
    void *arr = ks->b;
    if (grow_array(&arr, &ks->cap, ks->n + 1, sizeof(*ks->b), 4) != 0) return NULL;
    ks->b = arr;
    char *copy = strdup(name);
    if (!copy) return NULL;
    ks->b[ks->n] = (struct kstats_broker){.name = copy};
    return &ks->b[ks->n++];
}

static int64_t int_of(const json_t *o, const char *key)
{
    return (int64_t)json_integer_value(json_object_get(o, key));
}

/* One window of a rolling latency object ("rtt", ...); none without
 * samples, and none with a negative sample: librdkafka computes a
 * message's int_latency as (now + message.timeout.ms) - its timeout
 * deadline, which for message.timeout.ms = 0 (outboxd's default: never
 * time out) is INT64_MAX, so every sample is about -2^63 and the window
 * says nothing. */
static void add_latency(struct kstats_lat *l, const json_t *w)
{
    int64_t cnt = int_of(w, "cnt");
    if (cnt <= 0 || int_of(w, "min") < 0 || int_of(w, "avg") < 0) return;
    l->cnt += (uint64_t)cnt;
    l->avg_sum += (double)int_of(w, "avg") * (double)cnt;
    int64_t p99 = int_of(w, "p99");
    if (p99 > l->p99_max) l->p99_max = p99;
}

/* The growth of a cumulative counter since the client's last window
 * (*last); a value below it means the counter started again. */
static uint64_t counter_delta(int64_t *last, int64_t now)
{
    int64_t d = now >= *last ? now - *last : now;
    *last = now;
    return d > 0 ? (uint64_t)d : 0;
}

static bool is_real(const json_t *b)
{
    const char *source = json_string_value(json_object_get(b, "source"));
    return source && (strcmp(source, "learned") == 0 || strcmp(source, "configured") == 0);
}

int kstats_window(struct kstats *ks, const json_t *brokers)
{
    const char *key;
    json_t *b;
    int rc = 0;
    json_object_foreach((json_t *)brokers, key, b)
    {
        if (!json_is_object(b) || !is_real(b)) continue;
        const char *name = json_string_value(json_object_get(b, "name"));
        struct kstats_broker *k = broker_of(ks, name ? name : key);
        if (!k) {
            rc = -1;
            continue;
        }
        k->windows++;
        add_latency(&k->rtt, json_object_get(b, "rtt"));
        add_latency(&k->int_latency, json_object_get(b, "int_latency"));
        add_latency(&k->outbuf_latency, json_object_get(b, "outbuf_latency"));
        k->produce_reqs +=
            counter_delta(&k->last_produce, int_of(json_object_get(b, "req"), "Produce"));
        k->txbytes += counter_delta(&k->last_txbytes, int_of(b, "txbytes"));
        k->wakeups += counter_delta(&k->last_wakeups, int_of(b, "wakeups"));
    }
    return rc;
}

void kstats_new_client(struct kstats *ks)
{
    for (size_t i = 0; i < ks->n; i++) ks->b[i].last_produce = ks->b[i].last_txbytes = ks->b[i].last_wakeups = 0;
}

int64_t kstats_avg(const struct kstats_lat *l)
{
    return l->cnt ? (int64_t)(l->avg_sum / (double)l->cnt + 0.5) : -1;
}

/* "avg A us p99 B us", or n/a for both without samples. p99 is the
 * highest p99 of a window: librdkafka gives no histogram to merge, and the
 * worst second is what a latency budget has to cover. */
static const char *lat_text(const struct kstats_lat *l, char *buf, size_t len)
{
    if (l->cnt)
        snprintf(buf, len, "avg %lld us p99 %lld us", (long long)kstats_avg(l),
                 (long long)l->p99_max);
    else
        snprintf(buf, len, "avg n/a us p99 n/a us");
    return buf;
}

/* Bytes per request: txbytes counts every request to the broker, of which
 * a producer's are nearly all Produce (the others: Metadata every few
 * minutes, and ApiVersion, InitProducerId on connecting), so it is the
 * mean Produce request's size to within those. */
void kstats_format(const struct kstats_broker *b, char *buf, size_t len)
{
    char rtt[64], il[64], ol[64], per[32];
    if (b->produce_reqs)
        snprintf(per, sizeof(per), "%llu",
                 (unsigned long long)((b->txbytes + b->produce_reqs / 2) / b->produce_reqs));
    else
        snprintf(per, sizeof(per), "n/a");
    snprintf(buf, len,
             "kafka broker %s over %llu windows: rtt %s; int_latency %s; outbuf_latency %s; "
             "produce requests %llu, bytes per request %s; thread wake-ups %llu",
             b->name, (unsigned long long)b->windows, lat_text(&b->rtt, rtt, sizeof(rtt)),
             lat_text(&b->int_latency, il, sizeof(il)),
             lat_text(&b->outbuf_latency, ol, sizeof(ol)), (unsigned long long)b->produce_reqs,
             per, (unsigned long long)b->wakeups);
}
