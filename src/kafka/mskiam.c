/*
 * mskiam.c - Amazon MSK's IAM authentication over OAUTHBEARER (see
 * mskiam.h).
 *
 * Which thread signs. librdkafka asks for a token (at the client's start,
 * then at 80 % of the last token's lifetime, and 10 s after a failure)
 * by an op on a queue: by default the main queue, served by the
 * application's rd_kafka_poll() - here the relay's event loop, whose
 * turn must never wait on the network. A refresh may have to fetch
 * credentials (STS, the container endpoint, IMDS: up to
 * AWS_HTTP_TIMEOUT_MS per request, several requests), so the op goes to a
 * SASL queue of its own (rd_kafka_conf_enable_sasl_queue) that
 * kafka_conf_started() forwards to librdkafka's background thread
 * (rd_kafka_sasl_background_callbacks_enable): the callback runs there,
 * where blocking delays only the token, and the producer's first
 * connection and exactly_once's init_transactions (which waits for a
 * broker that needs the token) do not depend on the loop polling.
 * Credentials are cached (aws_creds_cached) until they near expiry, so
 * most refreshes only sign (microseconds).
 */
#include "mskiam.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "awscreds.h"
#include "awstoken.h"
#include "kafkaconf.h"
#include "log.h"

/* The [aws] settings of the configuration last built (strings owned). */
static pthread_mutex_t settings_mu = PTHREAD_MUTEX_INITIALIZER;
static char *set_region, *set_profile;
/* One credential cache per process: every client signs with the same. */
static struct aws_creds_cache cache = AWS_CREDS_CACHE_INIT;
/* The source of the last credentials used, to log a change once. */
static char last_source[32];

bool msk_iam_configured(const struct config *c)
{
    const char *m = config_kafka_get(c, "sasl.mechanism");
    return m && !strcmp(m, MSK_IAM_MECHANISM);
}

static bool same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static void remember(const struct config *c)
{
    pthread_mutex_lock(&settings_mu);
    /* Another profile (a reloaded configuration): other credentials. */
    if (!same(set_profile, c->aws_profile)) aws_creds_cache_clear(&cache);
    free(set_region);
    free(set_profile);
    set_region = c->aws_region ? strdup(c->aws_region) : NULL;
    set_profile = c->aws_profile ? strdup(c->aws_profile) : NULL;
    pthread_mutex_unlock(&settings_mu);
}

/* A token for settings s at now: 0 with *token (malloc'ed), *expires and
 * *creds (the caller clears them), or -1 with err. */
static int sign(const struct aws_settings *s, time_t now, char **token, time_t *expires,
                struct aws_creds *creds, const char **region, char *err, size_t errlen)
{
    *region = aws_region(s);
    if (!*region) {
        snprintf(err, errlen, "no AWS region: set [aws] region, or AWS_REGION");
        return -1;
    }
    if (aws_creds_cached(&cache, s, now, creds, err, errlen) != 0) return -1;
    *token = aws_msk_token(creds, *region, now, expires);
    if (!*token) {
        aws_creds_clear(creds);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* librdkafka's token refresh callback, on its background thread (above). */
static void on_refresh(rd_kafka_t *rk, const char *oauthbearer_config, void *opaque)
{
    (void)oauthbearer_config;
    (void)opaque;
    pthread_mutex_lock(&settings_mu);
    char *region = set_region ? strdup(set_region) : NULL;
    char *profile = set_profile ? strdup(set_profile) : NULL;
    pthread_mutex_unlock(&settings_mu);
    struct aws_settings s = {.region = region, .profile = profile};
    char err[2048], why[512];
    char *token = NULL;
    time_t expires = 0, now = time(NULL);
    struct aws_creds creds = {0};
    const char *r;
    if (sign(&s, now, &token, &expires, &creds, &r, err, sizeof(err)) != 0) {
        /* librdkafka reports it (the error callback: "Failed to acquire SASL
         * OAUTHBEARER token: ...") and asks again in 10 s. A quoted "error"
         * would read as an OIDC provider's refusal for good
         * (kafka_err_is_refusal): an endpoint's JSON body quoted in err
         * loses its double quotes. */
        for (char *q = err; *q; q++)
            if (*q == '"') *q = '\'';
        rd_kafka_oauthbearer_set_token_failure(rk, err);
    } else if (rd_kafka_oauthbearer_set_token(rk, token, (int64_t)expires * 1000,
                                              creds.access_key_id, NULL, 0, why,
                                              sizeof(why)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, sizeof(err), "the MSK IAM token was refused by librdkafka: %s", why);
        rd_kafka_oauthbearer_set_token_failure(rk, err);
    } else {
        size_t n = strlen(creds.access_key_id);
        bool changed;
        pthread_mutex_lock(&settings_mu);
        changed = strcmp(last_source, creds.source) != 0;
        if (changed) snprintf(last_source, sizeof(last_source), "%s", creds.source);
        pthread_mutex_unlock(&settings_mu);
        /* Never the secret or the session token; of the key id, 4 characters. */
        log_msg(changed ? LOG_INFO : LOG_DEBUG,
                "kafka: MSK IAM token signed for %s with credentials from %s (access key "
                "...%s), valid %lld s",
                r, creds.source, n >= 4 ? creds.access_key_id + n - 4 : "",
                (long long)(expires - now));
    }
    if (token) memset(token, 0, strlen(token));
    free(token);
    aws_creds_clear(&creds);
    free(region);
    free(profile);
}

int msk_iam_conf(rd_kafka_conf_t *conf, const struct config *c, char *err, size_t errlen)
{
    const char *proto = config_kafka_get(c, "security.protocol");
    if (!proto || strcasecmp(proto, "SASL_SSL") != 0) {
        snprintf(err, errlen,
                 "[kafka] sasl.mechanism = " MSK_IAM_MECHANISM
                 " needs security.protocol = SASL_SSL (MSK's IAM listener, port 9098; "
                 "it is %s)",
                 proto ? proto : "not set");
        return -1;
    }
    const char *method = config_kafka_get(c, "sasl.oauthbearer.method");
    if (method && strcasecmp(method, "default") != 0) {
        snprintf(err, errlen,
                 "[kafka] sasl.mechanism = " MSK_IAM_MECHANISM
                 " signs its own tokens: remove sasl.oauthbearer.method = %s",
                 method);
        return -1;
    }
    struct aws_settings s = {.region = c->aws_region, .profile = c->aws_profile};
    if (!aws_region(&s)) {
        snprintf(err, errlen,
                 "[kafka] sasl.mechanism = " MSK_IAM_MECHANISM
                 " needs the cluster's AWS region: set [aws] region (or AWS_REGION)");
        return -1;
    }
    if (kafka_conf_set(conf, "sasl.mechanism", "OAUTHBEARER", err, errlen) != 0) return -1;
    remember(c);
    rd_kafka_conf_set_oauthbearer_token_refresh_cb(conf, on_refresh);
    rd_kafka_conf_enable_sasl_queue(conf, 1);
    return 0;
}

int msk_iam_token(const struct config *c, char **token, time_t *expires, char *source,
                  size_t sourcelen, char last4[5], const char **region, char *err,
                  size_t errlen)
{
    struct aws_settings s = {.region = c->aws_region, .profile = c->aws_profile};
    struct aws_creds creds;
    if (sign(&s, time(NULL), token, expires, &creds, region, err, errlen) != 0) return -1;
    size_t n = strlen(creds.access_key_id);
    snprintf(last4, 5, "%s", n >= 4 ? creds.access_key_id + n - 4 : creds.access_key_id);
    snprintf(source, sourcelen, "%s", creds.source);
    aws_creds_clear(&creds);
    return 0;
}
