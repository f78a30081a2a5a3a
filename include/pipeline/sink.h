/*
 * sink.h - where the relay's change handlers and dead-lettering hand their
 * events: producer_send() in the daemon (relay.c), a fake in the unit tests
 * (tests/unit/test_changes.c), which makes the queue full on demand and
 * ACKs when it likes. A function pointer and not the producer itself, so
 * the relay's state machine is testable without a broker.
 */
#ifndef OUTBOXD_SINK_H
#define OUTBOXD_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "outbox.h"

struct sink {
    /* producer_send()'s contract: PRODUCER_OK, PRODUCER_QUEUE_FULL (nothing
     * was taken: try the same event again later) or PRODUCER_ERROR with
     * librdkafka's code in *kafka_err and the reason in err. */
    int (*send)(void *ctx, const struct outbox_event *ev, uint64_t tag, int *kafka_err,
                char *err, size_t errlen);
    void *ctx;
};

#endif
