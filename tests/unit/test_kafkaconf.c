/*
 * test_kafkaconf.c - which librdkafka errors are refusals
 * (include/kafkaconf.h): a SASL authentication failure and a broker
 * certificate that does not verify make the daemon exit 2; a broker that
 * is down, or any other TLS trouble, does not.
 */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdlib.h>
#include <string.h>

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

START_TEST(test_refusals)
{
    ck_assert(kafka_err_is_refusal(RD_KAFKA_RESP_ERR__AUTHENTICATION, SASL_REASON));
    ck_assert(kafka_err_is_refusal(RD_KAFKA_RESP_ERR__SSL, CERT_REASON));
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
    ck_assert(strstr(kafka_refusal_fix(r.err), "sasl.password") != NULL);
    ck_assert(strstr(kafka_refusal_fix(RD_KAFKA_RESP_ERR__SSL), "ssl.ca.location") != NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafkaconf");
    TCase *tc = tcase_create("refusals");
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_not_refusals);
    tcase_add_test(tc, test_note_keeps_the_first_refusal);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
