/*
 * mskiam.h - [kafka] sasl.mechanism = AWS_MSK_IAM: outboxd signs Amazon
 * MSK's IAM tokens itself (awstoken.h, with credentials from the standard
 * chain, awscreds.h, and [aws] region and profile) and hands them to
 * librdkafka as OAUTHBEARER tokens through its token refresh callback,
 * served on librdkafka's background thread.
 */
#ifndef OUTBOXD_MSKIAM_H
#define OUTBOXD_MSKIAM_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The sasl.mechanism value that selects it (outboxd's, not librdkafka's). */
#define MSK_IAM_MECHANISM "AWS_MSK_IAM"

/* Whether c's [kafka] sasl.mechanism is AWS_MSK_IAM. */
bool msk_iam_configured(const struct config *c);

/* What a client of c needs besides c's other [kafka] properties:
 * sasl.mechanism OAUTHBEARER and the token refresh callback, on a SASL
 * queue of its own (kafka_conf_started() moves it to the background
 * thread). Returns 0, or -1 with err saying what is missing: [kafka]
 * security.protocol must be SASL_SSL (MSK's IAM listener; a token is a
 * bearer credential), a region must be known ([aws] region, AWS_REGION,
 * AWS_DEFAULT_REGION), no OIDC method (sasl.oauthbearer.method = oidc).
 * Remembers c's [aws] settings for the callback (any later call replaces
 * them: a reloaded configuration). */
int msk_iam_conf(rd_kafka_conf_t *conf, const struct config *c, char *err, size_t errlen);

/* One token for [aws] of c, as the callback makes it: 0 with the token
 * (malloc'ed, the caller frees it), its expiry, the credentials' source,
 * their access key id's last 4 characters and the region used; or -1 with
 * err naming each source of credentials tried and why it failed. May
 * fetch credentials (the shared cache: the daemon's callback then uses
 * them). For `outboxd check`. */
int msk_iam_token(const struct config *c, char **token, time_t *expires, char *source,
                  size_t sourcelen, char last4[5], const char **region, char *err,
                  size_t errlen);

#endif
