/*
 * kafkaconf.h - what every librdkafka client of outboxd (the relay's
 * producer, verify's consumer) configures the same way: setting a property
 * with outboxd's error convention, and routing librdkafka's errors and log
 * lines into outboxd's log.
 */
#ifndef OUTBOXD_KAFKACONF_H
#define OUTBOXD_KAFKACONF_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "config.h"

/* Sets k=v on conf. Returns 0, or -1 with "[kafka] k: librdkafka's reason"
 * in err. */
int kafka_conf_set(rd_kafka_conf_t *conf, const char *k, const char *v, char *err,
                   size_t errlen);

/* Sets outboxd's producer defaults that go beyond config.c's (queue
 * bounds, no delivery timeout, linger) on conf, each unless [kafka] sets
 * it. Returns 0 or -1 with a reason in err. The relay's producer and
 * `outboxd check` both use it, so check validates what the daemon runs. */
int kafka_conf_producer_defaults(rd_kafka_conf_t *conf, const struct config *c, char *err,
                                 size_t errlen);

/* Installs the error and log callbacks that write to outboxd's log. */
void kafka_conf_route_logs(rd_kafka_conf_t *conf);

#endif
