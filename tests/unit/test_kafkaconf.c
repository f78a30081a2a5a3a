/*
 * test_kafkaconf.c - which librdkafka errors are refusals
 * (include/kafka/kafkaconf.h): a SASL authentication failure and a broker
 * certificate that does not verify make the daemon exit 2; a broker that
 * is down, or any other TLS trouble, does not. And the producer's
 * configuration as kafka_conf_producer() builds it for the relay and
 * `outboxd check`: outboxd's defaults, [kafka] over them, every refusal.
 * And an unreachable broker's burst of reports as one line (outage.h).
 */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "kafkaconf.h"

/* librdkafka 2.0.2's own reasons, as seen against Kafka 3.9.1. */
#define SASL_REASON                                                                      \
    "sasl_ssl://127.0.0.1:29507/bootstrap: SASL authentication error: Authentication "  \
    "failed during authentication due to invalid credentials with SASL mechanism "       \
    "SCRAM-SHA-512 (after 344ms in state AUTH_REQ)"
#define CERT_REASON                                                                      \
    "ssl://127.0.0.1:51301/bootstrap: SSL handshake failed: error:0A000086:SSL "         \
    "routines::certificate verify failed: broker certificate could not be verified, "    \
    "verify that ssl.ca.location is correctly configured or root CA certificates are "   \
    "installed (install ca-certificates package) (after 12ms in state SSL_HANDSHAKE)"

/* librdkafka 2.14.2's reasons when its OIDC token fetch fails: the
 * provider's answer (Keycloak 26.7, a wrong secret), and none. */
#define OIDC_REFUSED                                                                     \
    "Failed to acquire SASL OAUTHBEARER token: {\"error\":\"unauthorized_client\","         \
    "\"error_description\":\"Invalid client or Invalid client credentials\"}"
#define OIDC_UNREACHABLE                                                                 \
    "Failed to acquire SASL OAUTHBEARER token: Failed to connect to 127.0.0.1 port 1 "     \
    "after 0 ms: Couldn't connect to server"

/* librdkafka 2.14.2's reason when the token endpoint's certificate does not
 * verify (curl's error: no https.ca.location for a private CA). */
#define OIDC_CERT                                                                        \
    "Failed to acquire SASL OAUTHBEARER token: SSL certificate problem: unable to get "   \
    "local issuer certificate"

/* What librdkafka reports when the broker rejects a token (Kafka 4.4 on a
 * token with the wrong audience). */
#define TOKEN_REJECTED                                                                   \
    "sasl_ssl://127.0.0.1:9094/bootstrap: SASL authentication error: "                  \
    "{\"status\":\"invalid_token\"} (after 3ms in state AUTH_REQ)"

START_TEST(test_refusals)
{
    ck_assert(kafka_err_is_refusal(RD_KAFKA_RESP_ERR__AUTHENTICATION, SASL_REASON));
    ck_assert(kafka_err_is_refusal(RD_KAFKA_RESP_ERR__SSL, CERT_REASON));
    ck_assert(kafka_err_is_refusal(RD_KAFKA_RESP_ERR__AUTHENTICATION, OIDC_REFUSED));
    /* waiting does not make the provider's certificate verify */
    ck_assert(kafka_err_is_refusal(RD_KAFKA_RESP_ERR__AUTHENTICATION, OIDC_CERT));
    ck_assert(strstr(kafka_refusal_fix(RD_KAFKA_RESP_ERR__AUTHENTICATION, OIDC_CERT, 0x020e02ff),
                     "https.ca.location") != NULL);
    ck_assert_str_eq(kafka_refusal_who(RD_KAFKA_RESP_ERR__AUTHENTICATION, OIDC_CERT),
                     "the identity provider's certificate did not verify");
    ck_assert_str_eq(kafka_refusal_who(RD_KAFKA_RESP_ERR__AUTHENTICATION, OIDC_REFUSED),
                     "the identity provider refused the token request for good");
    /* the broker's RFC 7628 answer to a token with the wrong audience */
    ck_assert(kafka_err_is_refusal(RD_KAFKA_RESP_ERR__AUTHENTICATION, TOKEN_REJECTED));
    ck_assert_str_eq(kafka_refusal_who(RD_KAFKA_RESP_ERR__AUTHENTICATION, TOKEN_REJECTED),
                     "the broker rejected the OAUTHBEARER token");
    ck_assert(strstr(kafka_refusal_fix(RD_KAFKA_RESP_ERR__AUTHENTICATION, TOKEN_REJECTED,
                                       0x020e02ff),
                     "expected.audience") != NULL);
    ck_assert_str_eq(kafka_refusal_who(RD_KAFKA_RESP_ERR__AUTHENTICATION, SASL_REASON),
                     "the broker refused the connection for good");
    /* Kafka's generic answer, naming the mechanism */
    ck_assert_str_eq(kafka_refusal_who(RD_KAFKA_RESP_ERR__AUTHENTICATION,
                                       "SASL authentication error: Authentication failed "
                                       "during authentication due to invalid credentials "
                                       "with SASL mechanism OAUTHBEARER"),
                     "the broker rejected the OAUTHBEARER token");
}
END_TEST

START_TEST(test_not_refusals)
{
    /* A broker that is down or restarting. */
    ck_assert(!kafka_err_is_refusal(RD_KAFKA_RESP_ERR__TRANSPORT,
                                    "127.0.0.1:9092/1: Connect to ipv4#127.0.0.1:9092 "
                                    "failed: Connection refused"));
    ck_assert(!kafka_err_is_refusal(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN,
                                    "1/1 brokers are down"));
    /* A handshake cut short is TLS trouble, not a verdict on the certificate. */
    ck_assert(!kafka_err_is_refusal(RD_KAFKA_RESP_ERR__SSL,
                                    "ssl://127.0.0.1:9093/1: SSL handshake failed: "
                                    "Disconnected: connecting to a PLAINTEXT broker "
                                    "listener?"));
    ck_assert(!kafka_err_is_refusal(RD_KAFKA_RESP_ERR__SSL, NULL));
    /* The identity provider down: librdkafka tries again, the token lasts. */
    ck_assert(!kafka_err_is_refusal(RD_KAFKA_RESP_ERR__AUTHENTICATION, OIDC_UNREACHABLE));
    ck_assert(!kafka_err_is_refusal(RD_KAFKA_RESP_ERR_NO_ERROR, "certificate verify failed"));
}
END_TEST

START_TEST(test_note_keeps_the_first_refusal)
{
    struct kafka_refusal r = {0};
    kafka_refusal_note(&r, RD_KAFKA_RESP_ERR__TRANSPORT, "Connection refused");
    ck_assert_int_eq(r.err, 0);
    kafka_refusal_note(&r, RD_KAFKA_RESP_ERR__AUTHENTICATION, SASL_REASON);
    kafka_refusal_note(&r, RD_KAFKA_RESP_ERR__SSL, CERT_REASON);
    ck_assert_int_eq(r.err, RD_KAFKA_RESP_ERR__AUTHENTICATION);
    ck_assert_str_eq(r.reason, SASL_REASON);
    ck_assert(strstr(kafka_refusal_fix(r.err, NULL, 0x020e02ff), "sasl.password") != NULL);
    ck_assert(strstr(kafka_refusal_fix(RD_KAFKA_RESP_ERR__SSL, NULL, 0x020e02ff), "ssl.ca.location") !=
              NULL);
}
END_TEST

/* librdkafka before 2.6.1 (librdkafka#4895): its SCRAM proof is refused by
 * Kafka 4; an authentication failure with it names that, and only then. */
START_TEST(test_refusal_fix_names_the_scram_bug_of_old_clients)
{
    ck_assert(kafka_scram_kafka4_bug(0x020002ff));  /* 2.0.2, Debian 12 */
    ck_assert(kafka_scram_kafka4_bug(0x020300ff));  /* 2.3.0, Ubuntu 24.04 */
    ck_assert(kafka_scram_kafka4_bug(0x020600ff));  /* 2.6.0 */
    ck_assert(!kafka_scram_kafka4_bug(0x020601ff)); /* 2.6.1: fixed */
    ck_assert(!kafka_scram_kafka4_bug(0x020e02ff)); /* 2.14.2 */
    const char *old = kafka_refusal_fix(RD_KAFKA_RESP_ERR__AUTHENTICATION, NULL, 0x020002ff);
    ck_assert(strstr(old, "sasl.password") != NULL);
    ck_assert(strstr(old, "librdkafka#4895") != NULL);
    ck_assert(strstr(old, "deploy/librdkafka.sh") != NULL);
    ck_assert(strstr(kafka_refusal_fix(RD_KAFKA_RESP_ERR__AUTHENTICATION, NULL, 0x020e02ff),
                     "librdkafka#4895") == NULL);
    ck_assert(strstr(kafka_refusal_fix(RD_KAFKA_RESP_ERR__SSL, NULL, 0x020002ff), "librdkafka#4895") ==
              NULL);
}
END_TEST

/* ---- kafka_conf_producer ---- */

/* prop's value in conf ("" when unset). */
static const char *conf_value(rd_kafka_conf_t *conf, const char *prop)
{
    static char v[512];
    size_t len = sizeof(v);
    if (rd_kafka_conf_get(conf, prop, v, &len) != RD_KAFKA_CONF_OK) v[0] = '\0';
    return v;
}

static struct config C;

static void conf_setup(void)
{
    char err[256];
    ck_assert_int_eq(config_init(&C), 0);
    ck_assert_int_eq(
        config_set(&C, "kafka", "bootstrap.servers", "b1:9092", err, sizeof(err)), 0);
}

static void conf_teardown(void)
{
    config_free(&C);
}

struct refusals {
    int n;
    char first[512];
};

static void note_refused(void *ctx, const char *msg)
{
    struct refusals *r = ctx;
    if (!r->n++) snprintf(r->first, sizeof(r->first), "%s", msg);
}

START_TEST(test_producer_defaults_and_overrides)
{
    char err[512], e[256];
    ck_assert_int_eq(config_set(&C, "kafka", "linger.ms", "7", e, sizeof(e)), 0);
    rd_kafka_conf_t *conf = kafka_conf_producer(&C, false, NULL, NULL, err, sizeof(err));
    ck_assert_ptr_nonnull(conf);
    ck_assert_str_eq(conf_value(conf, "linger.ms"), "7"); /* [kafka] wins */
    ck_assert_str_eq(conf_value(conf, "queue.buffering.max.messages"),
                     "5000"); /* outboxd's */
    ck_assert_str_eq(conf_value(conf, "message.timeout.ms"), "0");
    ck_assert_str_eq(conf_value(conf, "enable.idempotence"), "true"); /* config_init()'s */
    ck_assert_str_eq(conf_value(conf, "max.in.flight.requests.per.connection"), "1");
    ck_assert_str_eq(conf_value(conf, "bootstrap.servers"), "b1:9092");
    rd_kafka_conf_destroy(conf);

    /* --config-only: every property but the brokers */
    conf = kafka_conf_producer(&C, true, NULL, NULL, err, sizeof(err));
    ck_assert_ptr_nonnull(conf);
    ck_assert_str_eq(conf_value(conf, "bootstrap.servers"), "");
    ck_assert_str_eq(conf_value(conf, "linger.ms"), "7");
    rd_kafka_conf_destroy(conf);
}
END_TEST

START_TEST(test_producer_refusals)
{
    char err[512] = "", e[256];
    ck_assert_int_eq(config_set(&C, "kafka", "no.such.property", "1", e, sizeof(e)), 0);
    ck_assert_int_eq(config_set(&C, "kafka", "acks", "sometimes", e, sizeof(e)), 0);
    /* without a callback: NULL at the first refusal, named in err */
    ck_assert_ptr_null(kafka_conf_producer(&C, false, NULL, NULL, err, sizeof(err)));
    ck_assert_msg(strncmp(err, "[kafka] acks: ", 14) == 0, "err: %s", err);
    /* with one: every refusal told, in [kafka]'s order, still NULL */
    struct refusals r = {0};
    ck_assert_ptr_null(kafka_conf_producer(&C, false, note_refused, &r, err, sizeof(err)));
    ck_assert_int_eq(r.n, 2);
    ck_assert_str_eq(r.first, err);
    ck_assert_msg(strncmp(err, "[kafka] acks: ", 14) == 0, "err: %s", err);
}
END_TEST

/* ---- an unreachable broker's reports, folded (issue 56) ---- */

/* Runs fn with stderr (the log) into a temporary file; returns its
 * content (malloc'd: the caller frees). */
static char *stderr_of(void (*fn)(void))
{
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    long n = ftell(tmp);
    char *out = calloc(1, (size_t)n + 1);
    rewind(tmp);
    ck_assert_int_eq((int)fread(out, 1, (size_t)n, tmp), (int)n);
    fclose(tmp);
    return out;
}

/* What librdkafka 2.14.2 said against a closed port within 10 s of
 * `outboxd check` (196 lines before), in its order. */
static void broker_down_burst(void)
{
    kafka_log_error(RD_KAFKA_RESP_ERR__TRANSPORT,
                    "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection "
                    "refused (after 0ms in state CONNECT)");
    for (int i = 0; i < 146; i++)
        kafka_log_error(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, "1/1 brokers are down");
    for (int i = 0; i < 47; i++)
        kafka_log_error(RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, "0/1 brokers are down");
    kafka_log_error(RD_KAFKA_RESP_ERR__TRANSPORT,
                    "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection "
                    "refused (after 0ms in state CONNECT, 1 identical error(s) suppressed)");
}

START_TEST(test_unreachable_folded)
{
    uint64_t before = kafka_unreachable_total();
    char *out = stderr_of(broker_down_burst);
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    ck_assert_msg(lines == 1, "%d lines:\n%.400s", lines, out);
    ck_assert_msg(strstr(out, "WARN: kafka: 127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 "
                              "failed: Connection refused (after 0ms in state CONNECT) "
                              "(repeats are folded into one line every 30 s"),
                  "%s", out);
    /* Every report but the 47 saying none is down is counted. */
    ck_assert_int_eq((int)(kafka_unreachable_total() - before), 148);
    free(out);
}
END_TEST

/* A refusal, or any other error, is not folded: each is its own line. */
static void other_errors(void)
{
    kafka_log_error(RD_KAFKA_RESP_ERR__AUTHENTICATION, SASL_REASON);
    kafka_log_error(RD_KAFKA_RESP_ERR__AUTHENTICATION, SASL_REASON);
}

START_TEST(test_other_errors_not_folded)
{
    uint64_t before = kafka_unreachable_total();
    char *out = stderr_of(other_errors);
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    ck_assert_msg(lines == 2, "%d lines:\n%.400s", lines, out);
    ck_assert_ptr_nonnull(strstr(out, "kafka: _AUTHENTICATION: sasl_ssl://"));
    ck_assert_int_eq((int)(kafka_unreachable_total() - before), 0);
    free(out);
}
END_TEST

/* A token endpoint that does not answer: librdkafka's error callback
 * repeats the failed fetch (once per change of its error; its OIDC log
 * line, every 10 s, takes the same fold): one error line, at once. */
static void token_endpoint_down(void)
{
    for (int i = 0; i < 3; i++)
        kafka_log_error(RD_KAFKA_RESP_ERR__AUTHENTICATION, OIDC_UNREACHABLE);
}

START_TEST(test_token_fetch_failures_folded)
{
    char *out = stderr_of(token_endpoint_down);
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    ck_assert_msg(lines == 1, "%d lines:\n%.400s", lines, out);
    ck_assert_msg(strstr(out, "ERROR: kafka: OIDC: " OIDC_UNREACHABLE
                              " (repeats are folded into one line every 30 s"),
                  "%s", out);
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafkaconf");
    TCase *tc = tcase_create("refusals");
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_not_refusals);
    tcase_add_test(tc, test_note_keeps_the_first_refusal);
    tcase_add_test(tc, test_refusal_fix_names_the_scram_bug_of_old_clients);
    tcase_add_test(tc, test_token_fetch_failures_folded);
    suite_add_tcase(s, tc);
    tc = tcase_create("producer configuration");
    tcase_add_checked_fixture(tc, conf_setup, conf_teardown);
    tcase_add_test(tc, test_producer_defaults_and_overrides);
    tcase_add_test(tc, test_producer_refusals);
    suite_add_tcase(s, tc);
    /* The fold is process-wide: the burst must be the process's first
     * (under valgrind Check does not fork). */
    tc = tcase_create("unreachable");
    tcase_add_test(tc, test_unreachable_folded);
    tcase_add_test(tc, test_other_errors_not_folded);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
