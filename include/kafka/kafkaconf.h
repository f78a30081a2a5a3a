/*
 * kafkaconf.h - what every librdkafka client of outboxd (the relay's
 * producer, `outboxd check`'s, verify's consumer) configures the same way:
 * setting a property with outboxd's error convention, the producer's
 * configuration built from [kafka], and routing librdkafka's errors and log
 * lines into outboxd's log.
 */
#ifndef OUTBOXD_KAFKACONF_H
#define OUTBOXD_KAFKACONF_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* Sets k=v on conf. Returns 0, or -1 with "[kafka] k: librdkafka's reason"
 * in err. */
int kafka_conf_set(rd_kafka_conf_t *conf, const char *k, const char *v, char *err,
                   size_t errlen);

/* Told each property librdkafka refuses, with "[kafka] key: librdkafka's
 * reason" in msg. */
typedef void (*kafka_conf_refused_fn)(void *ctx, const char *msg);

/*
 * The configuration of a producer as outboxd runs it, built in this one
 * place for the relay's producer and `outboxd check`: outboxd's producer
 * defaults (config_kafka_producer_default) unless [kafka] sets them, then
 * every [kafka] property of c
 * as config.c holds it (its defaults, the file, the environment, --set and
 * the secret files, config_load_secrets, applied). without_brokers leaves
 * bootstrap.servers out: a handle that judges every property but contacts
 * nothing (`outboxd check --config-only`). Returns the configuration (the
 * caller hands it to rd_kafka_new(), which then owns it, or destroys it),
 * or NULL with the first refusal in err. refused, when not NULL, is told
 * every refusal and the build goes on to the last property (check reports
 * them all); without it the build stops at the first.
 */
rd_kafka_conf_t *kafka_conf_producer(const struct config *c, bool without_brokers,
                                     kafka_conf_refused_fn refused, void *ctx, char *err,
                                     size_t errlen);

/* To call on each client made from kafka_conf_producer()'s or
 * kafka_conf_consumer()'s configuration, right after rd_kafka_new(): with
 * [kafka] sasl.mechanism = AWS_MSK_IAM, the token refresh callback is
 * served on librdkafka's background thread from then on (mskiam.c);
 * otherwise it does nothing. */
void kafka_conf_started(rd_kafka_t *rk);

/* The configuration of a consumer (verify, the progress topic's reader):
 * every [kafka] property of c except those that only mean something to a
 * producer (which would warn about each), then own[0..nown) (key, value).
 * Returns it (the caller owns it, as above), or NULL with the first
 * refusal in err. */
rd_kafka_conf_t *kafka_conf_consumer(const struct config *c, const char *const own[][2],
                                     size_t nown, char *err, size_t errlen);

/* The producer's queue bound in bytes as the producer runs it:
 * queue.buffering.max.kbytes ([kafka], else outboxd's default) * 1024. */
long long kafka_queue_max_bytes(const struct config *c);

/* True when a message whose value has value_len bytes can ever enter a
 * producer queue bounded to queue_max_bytes: librdkafka counts only value
 * bytes against queue.buffering.max.kbytes and refuses (QUEUE_FULL) a
 * message that would take the total past it, even into an empty queue.
 * Pure. */
bool kafka_value_fits_queue(size_t value_len, long long queue_max_bytes);

/* Installs the error and log callbacks that write to outboxd's log. A
 * broker that cannot be reached and a failing OIDC token fetch (librdkafka
 * retries every 10 s while the token it holds lasts) are each folded into
 * one line at once and one per OUTAGE_EVERY_MS (outage.h). */
void kafka_conf_route_logs(rd_kafka_conf_t *conf);

/* What the error callback of kafka_conf_route_logs() logs, for a handle
 * that installs its own error callback after it. */
void kafka_log_error(int err, const char *reason);

/* UP brokers are connected and DOWN of TOTAL are not (librdkafka's
 * statistics): some up and none down (or none reported unreachable for
 * 20 s) ends a broker outage the callbacks above are folding, with one
 * line saying how long it lasted; otherwise the interval's line is said
 * when it is due. Also the turn of the token fetches' outage: over once
 * none failed for 45 s. Any thread. */
void kafka_brokers_seen(int up, int down, int total);

/* librdkafka's reports of a broker not reached since the start, each one
 * (the log folds them; /metrics counts them). Any thread. */
uint64_t kafka_unreachable_total(void);

/*
 * A refusal: a connection error that waiting cannot heal, unlike a broker
 * that is down or unreachable (_TRANSPORT, _ALL_BROKERS_DOWN, timeouts):
 *  - _AUTHENTICATION: the broker answered and refused the SASL credentials
 *    (a wrong password, user or mechanism) or the OAUTHBEARER token (its
 *    audience, issuer or signature), or, with OAUTHBEARER by OIDC, the
 *    identity provider refused the client's credentials (librdkafka's
 *    "Failed to acquire SASL OAUTHBEARER token" with the provider's RFC
 *    6749 error answer), or its certificate did not verify against
 *    https.ca.location ("... certificate ..."). When it did not answer
 *    (down, unreachable), librdkafka tries again in 10 s and the token it
 *    has lasts until it expires: transient;
 *  - _SSL whose reason says the certificate did not verify ("certificate
 *    verify failed": the broker's certificate is not signed by
 *    ssl.ca.location, or does not name the host). Other _SSL errors (a
 *    handshake cut by a broker going down, a TLS client on a plaintext
 *    port during a change) stay transient.
 * Pure.
 */
bool kafka_err_is_refusal(int err, const char *reason);

/* True when librdkafka rdk_version (rd_kafka_version()'s 0xMMmmrrpp) has
 * the SCRAM bug that Kafka 4 brokers refuse as "invalid credentials":
 * before 2.6.1 the client's final message carries its nonce twice
 * (librdkafka#4895); Kafka 3.x accepted that, Kafka 4 checks the nonce as
 * RFC 5802 says. Seen here with Debian 12's 2.0.2 (rdkafka202.kafka_security).
 * Pure. */
bool kafka_scram_kafka4_bug(int rdk_version);

/* The fix to log with a refusal of err and reason (NULL: not known) (a
 * static string), for a client of librdkafka rdk_version: the identity
 * provider's certificate, the broker's rejection of an OAUTHBEARER token,
 * else the credentials (an authentication failure with a librdkafka that
 * has the SCRAM bug above also names that). Pure. */
const char *kafka_refusal_fix(int err, const char *reason, int rdk_version);

/* Who refused, for the log line of a refusal of err and reason (a static
 * string): "the broker refused the connection for good", "the broker
 * rejected the OAUTHBEARER token", "the identity provider refused the
 * token request for good", "the identity provider's certificate did not
 * verify". Pure. */
const char *kafka_refusal_who(int err, const char *reason);

/* The first refusal a handle's error callback saw (err 0: none yet). */
struct kafka_refusal {
    int err;
    char reason[512];
};

/* Keeps err and reason in r when they are a refusal and r holds none. */
void kafka_refusal_note(struct kafka_refusal *r, int err, const char *reason);

#endif
