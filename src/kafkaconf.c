/*
 * kafkaconf.c - librdkafka configuration shared by the producer and verify.
 */
#include "kafkaconf.h"

#include <stdio.h>

#include "log.h"

int kafka_conf_set(rd_kafka_conf_t *conf, const char *k, const char *v, char *err,
                   size_t errlen)
{
    char reason[512];
    if (rd_kafka_conf_set(conf, k, v, reason, sizeof(reason)) != RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "[kafka] %s: %s", k, reason);
        return -1;
    }
    return 0;
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    (void)opaque;
    /* Transport errors while a broker is down are routine: librdkafka
     * reconnects and retries by itself. */
    if (err == RD_KAFKA_RESP_ERR__FATAL)
        log_error("kafka: fatal: %s", reason);
    else
        log_warn("kafka: %s: %s", rd_kafka_err2name(err), reason);
}

/* Called from librdkafka's threads: log_msg() writes one line per call. */
static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    /* syslog levels: 0-3 error, 4 warning, 5-7 (notice, info, debug) debug */
    enum log_level l = level <= 3 ? LOG_ERROR : level == 4 ? LOG_WARN : LOG_DEBUG;
    log_msg(l, "kafka: %s: %s", fac, buf);
}

void kafka_conf_route_logs(rd_kafka_conf_t *conf)
{
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_log_cb(conf, on_log);
}
