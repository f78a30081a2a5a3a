/*
 * kafkaconf.c - librdkafka configuration shared by the producer, check and
 * verify (see kafkaconf.h).
 */
#include "kafkaconf.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "kafkasock.h"
#include "log.h"
#include "mskiam.h"
#include "outage.h"

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

/* ---- broker connectivity, folded (outage.h) ----
 * librdkafka reports an unreachable broker many times over: the error
 * callback's _TRANSPORT and _ALL_BROKERS_DOWN (dozens within the same
 * millisecond, some saying "0/1 brokers are down" under _ALL_BROKERS_DOWN,
 * counting the bootstrap address as a broker of its own) and the log
 * callback's FAIL lines, from its own threads. One tracker per process
 * folds them: the first failure at once, one line per OUTAGE_EVERY_MS
 * while it lasts, one when the brokers are up again; how many are down is
 * the statistics' count (kafka_brokers_seen()). */
static pthread_mutex_t unreach_mu = PTHREAD_MUTEX_INITIALIZER;
static struct outage unreach;
static bool unreach_init;
static uint64_t unreach_total; /* under unreach_mu */

/* ---- failed OIDC token fetches, folded (outage.h) ----
 * librdkafka's OIDC client (sasl.oauthbearer.method = oidc) logs each
 * failed fetch ("OIDC" facility, LOG_ERR) and retries every 10 s for as
 * long as the identity provider does not answer, from each handle; the
 * token it holds lasts until it expires, so deliveries go on. The first
 * failure is said at once (an error: without a token yet nothing can be
 * delivered), then at most one line per OUTAGE_EVERY_MS, at a failure,
 * while they last. librdkafka says nothing when a fetch succeeds (unless
 * debugging), so the outage is over once no fetch failed for
 * TOKEN_QUIET_MS: more than the 10 s between two tries plus the 20 s a try
 * may wait for an answer (or librdkafka's 4 retries, 5 s apart, of a 5xx
 * answer). */
#define TOKEN_QUIET_MS 45000
#define TOKEN_RETRY_MS 10000 /* librdkafka's next try after a failed fetch */
#define OIDC_TOKEN_FAILED "Failed to acquire SASL OAUTHBEARER token"
static struct outage token_out; /* under unreach_mu */
static bool token_init;

/* One failed fetch (cause: librdkafka's text). counted: false for the
 * error callback's copy of a failure the OIDC log line already counted
 * (it comes right after it, once per change of the error). */
static void token_failed(const char *cause, bool counted)
{
    char line[1024];
    bool say = false;
    if (strncmp(cause, "[thrd:", 6) == 0 && strstr(cause, "]: "))
        cause = strstr(cause, "]: ") + 3; /* "[thrd:background]: " */
    pthread_mutex_lock(&unreach_mu);
    if (!token_init) outage_init(&token_out, "kafka: OIDC", NULL, OUTAGE_EVERY_MS);
    token_init = true;
    if (counted || !token_out.down)
        say = outage_fail(&token_out, clock_mono_ms(), cause, line, sizeof(line));
    bool first = say && token_out.attempts == 1;
    pthread_mutex_unlock(&unreach_mu);
    if (!say) {
        log_debug("kafka: OIDC: %s", cause);
        return;
    }
    /* The first line an error (a daemon without a token yet cannot
     * deliver), the interval's a warning. */
    if (first)
        log_error("%s", line);
    else
        log_warn("%s", line);
}

/* The stats callback's turn: the end of a fetch outage (see above). No
 * interval line without a new failure: between two, nothing failed. The
 * outage lasted until librdkafka's next try after the last failure (10 s
 * later), the first that did not fail. */
static void token_tick(int64_t now)
{
    char line[1024];
    bool say = false;
    pthread_mutex_lock(&unreach_mu);
    if (token_init && token_out.down && now - token_out.last_ms >= TOKEN_QUIET_MS)
        say = outage_ok(&token_out, token_out.last_ms + TOKEN_RETRY_MS, line, sizeof(line));
    pthread_mutex_unlock(&unreach_mu);
    if (say)
        log_info("%s; no fetch failed in the %d s since: the identity provider answers "
                 "again",
                 line, TOKEN_QUIET_MS / 1000);
}

static bool err_is_unreachable(int err)
{
    return err == RD_KAFKA_RESP_ERR__TRANSPORT ||
           err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || err == RD_KAFKA_RESP_ERR__RESOLVE;
}

/* One failure to reach a broker (cause: librdkafka's text). */
static void unreachable(int err, const char *cause)
{
    char line[1024];
    bool say;
    int down = -1, total = -1;
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN &&
        sscanf(cause, "%d/%d brokers are down", &down, &total) == 2 && down <= 0)
        return; /* "0/1 brokers are down": none is, say nothing */
    char all[64];
    if (down > 0) {
        snprintf(all, sizeof(all), "all brokers unreachable");
        cause = all;
    }
    /* "[thrd:host:9092/bootstrap]: host:9092/bootstrap: Connect to ...":
     * the thread's name repeats the broker's. */
    if (strncmp(cause, "[thrd:", 6) == 0 && strstr(cause, "]: "))
        cause = strstr(cause, "]: ") + 3;
    /* "(after 0ms in state CONNECT, 5 identical error(s) suppressed)":
     * librdkafka's own folding, which the count replaces. */
    char trimmed[512];
    const char *sup = strstr(cause, " identical error(s) suppressed)");
    const char *comma = sup ? sup : NULL;
    while (comma && comma > cause && comma[-1] >= '0' && comma[-1] <= '9') comma--;
    if (sup && comma > cause + 1 && comma[-1] == ' ' && comma[-2] == ',') {
        snprintf(trimmed, sizeof(trimmed), "%.*s)%s", (int)(comma - 2 - cause), cause,
                 sup + strlen(" identical error(s) suppressed)"));
        cause = trimmed;
    }
    pthread_mutex_lock(&unreach_mu);
    if (!unreach_init) outage_init(&unreach, "kafka", "brokers", OUTAGE_EVERY_MS);
    unreach_init = true;
    unreach_total++;
    if (down > 0) {
        /* Says no more than the count; the cause stays the last
         * connection's error. */
        char last[sizeof(unreach.last)];
        if (unreach.down && *unreach.last)
            memcpy(last, unreach.last, sizeof(last));
        else
            snprintf(last, sizeof(last), "%s", all);
        say = outage_fail(&unreach, clock_mono_ms(), last, line, sizeof(line));
    } else {
        say = outage_fail(&unreach, clock_mono_ms(), cause, line, sizeof(line));
    }
    pthread_mutex_unlock(&unreach_mu);
    if (say) log_warn("%s", line);
}

/* An outage whose brokers are not all up again is over once none was
 * reported unreachable for this long: librdkafka retries a broker it
 * needs at least every reconnect.backoff.max.ms (10 s), and one it no
 * longer needs may stay out of UP without failing (sparse connections). */
#define KAFKA_QUIET_MS 20000

void kafka_brokers_seen(int up, int down, int total)
{
    char line[1024];
    bool say;
    token_tick(clock_mono_ms());
    pthread_mutex_lock(&unreach_mu);
    if (!unreach_init) {
        pthread_mutex_unlock(&unreach_mu);
        return;
    }
    int64_t now = clock_mono_ms();
    up = up > 0 && (down == 0 || now - unreach.last_ms >= KAFKA_QUIET_MS);
    if (down > 0) outage_units(&unreach, down, total);
    say = up ? outage_ok(&unreach, now, line, sizeof(line))
             : outage_tick(&unreach, now, line, sizeof(line));
    pthread_mutex_unlock(&unreach_mu);
    if (!say) return;
    if (up)
        log_info("%s", line);
    else
        log_warn("%s", line);
}

uint64_t kafka_unreachable_total(void)
{
    pthread_mutex_lock(&unreach_mu);
    uint64_t n = unreach_total;
    pthread_mutex_unlock(&unreach_mu);
    return n;
}

void kafka_log_error(int err, const char *reason)
{
    /* Transport errors while a broker is down are routine: librdkafka
     * reconnects and retries by itself; they are folded. */
    if (err == RD_KAFKA_RESP_ERR__FATAL)
        log_error("kafka: fatal: %s", reason);
    else if (err_is_unreachable(err))
        unreachable(err, reason);
    else if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION && reason &&
             strstr(reason, OIDC_TOKEN_FAILED) && !kafka_err_is_refusal(err, reason))
        token_failed(reason, false); /* the OIDC line's copy */
    else
        log_warn("kafka: %s: %s", rd_kafka_err2name(err), reason);
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    (void)opaque;
    kafka_log_error(err, reason);
}

/* An OIDC token fetch that failed on the identity provider's certificate
 * (curl's "SSL certificate problem: ...", "SSL peer certificate ... was
 * not OK"): https.ca.location does not hold the CA that signed it. */
static bool token_cert_failed(const char *reason)
{
    return reason && strstr(reason, OIDC_TOKEN_FAILED) && strstr(reason, "certificate");
}

/* The broker's refusal of an OAUTHBEARER token (the identity provider
 * issued it; the broker's validation refused it): the broker's answer is
 * RFC 7628's error status ({"status":"invalid_token"}, Kafka's for a
 * token that fails its checks; "insufficient_scope"), which librdkafka
 * passes on ("SASL authentication error: ..." or "SASL OAUTHBEARER
 * authentication failed (principal=...): ..."), or Kafka's generic
 * "... invalid credentials with SASL mechanism OAUTHBEARER". */
static bool token_rejected(const char *reason)
{
    return reason && !strstr(reason, OIDC_TOKEN_FAILED) &&
           (strstr(reason, "OAUTHBEARER authentication failed") ||
            strstr(reason, "mechanism OAUTHBEARER") || strstr(reason, "invalid_token") ||
            strstr(reason, "insufficient_scope"));
}

bool kafka_err_is_refusal(int err, const char *reason)
{
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION)
        return !reason || !strstr(reason, OIDC_TOKEN_FAILED) ||
               strstr(reason, "\"error\"") || token_cert_failed(reason);
    return err == RD_KAFKA_RESP_ERR__SSL && reason &&
           strstr(reason, "certificate verify failed") != NULL;
}

bool kafka_scram_kafka4_bug(int rdk_version)
{
    return rdk_version < 0x020601ff; /* 2.6.1, its release build */
}

/* The fix for an authentication failure, with every librdkafka. */
#define SASL_FIX                                                                           \
    "correct [kafka] sasl.username, sasl.password and sasl.mechanism (the broker's SCRAM " \
    "credentials for this user); with OAUTHBEARER by OIDC, the client "                    \
    "(sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret_file, "                   \
    "sasl.oauthbearer.token.endpoint.url: outboxd check shows the identity provider's "    \
    "answer) and the token's claims against the broker's sasl.oauthbearer.expected.* and " \
    "sub.claim.name"

const char *kafka_refusal_who(int err, const char *reason)
{
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION && token_cert_failed(reason))
        return "the identity provider's certificate did not verify";
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION && reason && strstr(reason, OIDC_TOKEN_FAILED))
        return "the identity provider refused the token request for good";
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION && token_rejected(reason))
        return "the broker rejected the OAUTHBEARER token";
    return "the broker refused the connection for good";
}

const char *kafka_refusal_fix(int err, const char *reason, int rdk_version)
{
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION && token_cert_failed(reason))
        return "set [kafka] https.ca.location to the CA that signed the identity "
               "provider's certificate (a PEM file or a directory; "
               "https.ca.pem for the PEM text), and name the provider in "
               "sasl.oauthbearer.token.endpoint.url as its certificate does";
    if (err == RD_KAFKA_RESP_ERR__AUTHENTICATION && token_rejected(reason))
        return "the identity provider issued it, the broker refused it: its claims "
               "(outboxd check prints its principal, audience and issuer) do "
               "not "
               "match the broker's sasl.oauthbearer.expected.audience, expected.issuer or "
               "sub.claim.name, or the broker cannot verify its signature (its "
               "sasl.oauthbearer.jwks.endpoint.url); the broker's log says which. With "
               "sasl.mechanism = AWS_MSK_IAM outboxd signed it: the IAM identity of its "
               "credentials (outboxd check names their source) needs kafka-cluster:Connect "
               "on the cluster, and [aws] region must be the cluster's";
    if (err != RD_KAFKA_RESP_ERR__AUTHENTICATION)
        return "set [kafka] ssl.ca.location to the CA that signed the broker's "
               "certificate, and name the broker in bootstrap.servers as its "
               "certificate does";
    if (!kafka_scram_kafka4_bug(rdk_version)) return SASL_FIX;
    return SASL_FIX "; if they are right and the broker is Kafka 4, this librdkafka "
                    "(before 2.6.1) is the cause: its SCRAM proof is refused by Kafka 4 "
                    "(librdkafka#4895); build outboxd with deploy/librdkafka.sh (README, "
                    "\"Which Kafka and librdkafka\")";
}

void kafka_refusal_note(struct kafka_refusal *r, int err, const char *reason)
{
    if (r->err || !kafka_err_is_refusal(err, reason)) return;
    r->err = err;
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
}

/* Called from librdkafka's threads: log_msg() writes one line per call. */
static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    (void)rk;
    /* syslog levels: 0-3 error, 4 warning, 5-7 (notice, info, debug) debug */
    enum log_level l = level <= 3 ? LOG_ERROR : level == 4 ? LOG_WARN : LOG_DEBUG;
    /* A failed OIDC token fetch, every 10 s while the provider is down:
     * folded. */
    if (l == LOG_ERROR && strcmp(fac, "OIDC") == 0 && strstr(buf, "Failed to retrieve")) {
        token_failed(buf, true);
        return;
    }
    /* A broker's connection failed: the error callback's _TRANSPORT says
     * the same; both are folded. */
    if (l <= LOG_WARN && strcmp(fac, "FAIL") == 0) {
        unreachable(RD_KAFKA_RESP_ERR__TRANSPORT, buf);
        return;
    }
    log_msg(l, "kafka: %s: %s", fac, buf);
}

void kafka_conf_route_logs(rd_kafka_conf_t *conf)
{
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_log_cb(conf, on_log);
}

/* Whether k=v is [kafka] sasl.mechanism = AWS_MSK_IAM (mskiam.h), which
 * librdkafka does not know: outboxd sets OAUTHBEARER and signs the tokens. */
static bool is_msk_iam(const char *k, const char *v)
{
    return !strcmp(k, "sasl.mechanism") && !strcmp(v, MSK_IAM_MECHANISM);
}

void kafka_conf_started(rd_kafka_t *rk)
{
    /* Fails (not configured) unless the configuration enabled a SASL queue:
     * only AWS_MSK_IAM's does (mskiam.c says why its callback must not run
     * on the relay's loop). */
    rd_kafka_error_t *e = rd_kafka_sasl_background_callbacks_enable(rk);
    if (e) rd_kafka_error_destroy(e);
}

/* Sets k=v on conf; a refusal goes to refused (when set) and, the first,
 * to err. Returns 0 or -1. */
static int set_noting(rd_kafka_conf_t *conf, const char *k, const char *v,
                      kafka_conf_refused_fn refused, void *ctx, bool *failed, char *err,
                      size_t errlen)
{
    char why[1024];
    if (kafka_conf_set(conf, k, v, why, sizeof(why)) == 0) return 0;
    if (!*failed) snprintf(err, errlen, "%s", why);
    *failed = true;
    if (refused) refused(ctx, why);
    return -1;
}

rd_kafka_conf_t *kafka_conf_producer(const struct config *c, bool without_brokers,
                                     kafka_conf_refused_fn refused, void *ctx, char *err,
                                     size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bool failed = false;
    const char *key, *value, *meaning;
    for (size_t i = 0; config_kafka_producer_default(i, &key, &value, &meaning); i++)
        if (!config_kafka_get(c, key) &&
            set_noting(conf, key, value, refused, ctx, &failed, err, errlen) != 0 &&
            !refused)
            goto fail;
    for (size_t i = 0; i < c->nkafka; i++) {
        if (without_brokers && !strcmp(c->kafka[i].key, "bootstrap.servers")) continue;
        if (is_msk_iam(c->kafka[i].key, c->kafka[i].value)) {
            char why[1024];
            if (msk_iam_conf(conf, c, why, sizeof(why)) == 0) continue;
            if (!failed) snprintf(err, errlen, "%s", why);
            failed = true;
            if (refused) refused(ctx, why);
            if (!refused) goto fail;
            continue;
        }
        if (set_noting(conf, c->kafka[i].key, c->kafka[i].value, refused, ctx, &failed, err,
                       errlen) != 0 &&
            !refused)
            goto fail;
    }
    if (!failed) {
        kafka_conf_set_sockets(conf);
        return conf;
    }
fail:
    rd_kafka_conf_destroy(conf);
    return NULL;
}

long long kafka_queue_max_bytes(const struct config *c)
{
    long long kb = config_kafka_number(c, "queue.buffering.max.kbytes",
                                       KAFKA_DEFAULT_QUEUE_MAX_KBYTES);
    return kb < 0 ? -1 : kb * 1024;
}

bool kafka_value_fits_queue(size_t value_len, long long queue_max_bytes)
{
    return queue_max_bytes < 0 ||
           (unsigned long long)value_len <= (unsigned long long)queue_max_bytes;
}

/* [kafka] keys that only mean something to a producer (outboxd's own
 * defaults among them): not given to the consumer, which would warn about
 * each. Any other key librdkafka refuses is reported as its error. */
static const char *const producer_only[] = {
    "enable.idempotence",
    "acks",
    "request.required.acks",
    "partitioner",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "queue.buffering.max.ms",
    "linger.ms",
    "message.timeout.ms",
    "delivery.timeout.ms",
    "message.send.max.retries",
    "retries",
    "batch.num.messages",
    "batch.size",
    "compression.codec",
    "compression.type",
    "compression.level",
    "transactional.id",
    "transaction.timeout.ms",
    "enable.gapless.guarantee",
    "sticky.partitioning.linger.ms",
    "request.timeout.ms",
    "delivery.report.only.error",
    NULL,
};

static bool is_producer_only(const char *key)
{
    for (size_t i = 0; producer_only[i]; i++)
        if (!strcmp(producer_only[i], key)) return true;
    return false;
}

rd_kafka_conf_t *kafka_conf_consumer(const struct config *c, const char *const own[][2],
                                     size_t nown, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < c->nkafka + nown; i++) {
        bool mine = i >= c->nkafka;
        const char *k = mine ? own[i - c->nkafka][0] : c->kafka[i].key;
        const char *val = mine ? own[i - c->nkafka][1] : c->kafka[i].value;
        if (!mine && is_producer_only(k)) continue;
        if (!mine && is_msk_iam(k, val)) {
            if (msk_iam_conf(conf, c, err, errlen) != 0) {
                rd_kafka_conf_destroy(conf);
                return NULL;
            }
            continue;
        }
        if (kafka_conf_set(conf, k, val, err, errlen) != 0) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    }
    kafka_conf_route_logs(conf);
    kafka_conf_set_sockets(conf);
    return conf;
}
