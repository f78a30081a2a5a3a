/*
 * test_mskiam.c - [kafka] sasl.mechanism = AWS_MSK_IAM (mskiam.h) as the
 * producer's and the consumer's configurations take it
 * (kafka_conf_producer, kafka_conf_consumer): librdkafka is given
 * OAUTHBEARER; SASL_SSL, a region and no OIDC method are required, each
 * refusal says so; [aws] region over AWS_REGION. And check's token:
 * signed with the environment's credentials, only 4 characters of the key
 * id told, or every source tried.
 */
#include <check.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awstoken.h"
#include "config.h"
#include "kafkaconf.h"
#include "mskiam.h"

static struct config C;
static char e[2048];

static void setup(void)
{
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_PROFILE");
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    ck_assert_int_eq(config_init(&C), 0);
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "b:9098", e, sizeof(e)),
                     0);
    ck_assert_int_eq(config_set(&C, "kafka", "sasl.mechanism", "AWS_MSK_IAM", e, sizeof(e)),
                     0);
}

static void teardown(void)
{
    config_free(&C);
}

static const char *conf_value(rd_kafka_conf_t *conf, const char *k)
{
    static char v[256];
    size_t n = sizeof(v);
    return rd_kafka_conf_get(conf, k, v, &n) == RD_KAFKA_CONF_OK ? v : NULL;
}

START_TEST(test_needs_sasl_ssl_and_region)
{
    ck_assert(msk_iam_configured(&C));
    ck_assert_ptr_null(kafka_conf_producer(&C, false, NULL, NULL, e, sizeof(e)));
    ck_assert_str_eq(e, "[kafka] sasl.mechanism = AWS_MSK_IAM needs security.protocol = "
                        "SASL_SSL (MSK's IAM listener, port 9098; it is not set)");
    ck_assert_int_eq(config_set(&C, "kafka", "security.protocol", "SASL_SSL", e, sizeof(e)),
                     0);
    ck_assert_ptr_null(kafka_conf_producer(&C, false, NULL, NULL, e, sizeof(e)));
    ck_assert_msg(strstr(e, "needs the cluster's AWS region") != NULL, "%s", e);
    ck_assert_ptr_null(kafka_conf_consumer(&C, NULL, 0, e, sizeof(e)));
    ck_assert_msg(strstr(e, "needs the cluster's AWS region") != NULL, "%s", e);
    setenv("AWS_REGION", "eu-west-1", 1);
    rd_kafka_conf_t *conf = kafka_conf_producer(&C, false, NULL, NULL, e, sizeof(e));
    ck_assert_msg(conf != NULL, "%s", e);
    ck_assert_str_eq(conf_value(conf, "sasl.mechanisms"), "OAUTHBEARER");
    rd_kafka_conf_destroy(conf);
    conf = kafka_conf_consumer(&C, NULL, 0, e, sizeof(e));
    ck_assert_msg(conf != NULL, "%s", e);
    ck_assert_str_eq(conf_value(conf, "sasl.mechanisms"), "OAUTHBEARER");
    rd_kafka_conf_destroy(conf);
    ck_assert_int_eq(
        config_set(&C, "kafka", "sasl.oauthbearer.method", "oidc", e, sizeof(e)), 0);
    ck_assert_ptr_null(kafka_conf_producer(&C, false, NULL, NULL, e, sizeof(e)));
    ck_assert_msg(strstr(e, "remove sasl.oauthbearer.method = oidc") != NULL, "%s", e);
}
END_TEST

START_TEST(test_check_token)
{
    char *token, source[64], last4[5];
    const char *region;
    time_t exp;
    ck_assert_int_eq(config_set(&C, "aws", "region", "us-east-2", e, sizeof(e)), 0);
    setenv("AWS_REGION", "eu-west-1", 1);
    ck_assert_int_eq(msk_iam_token(&C, &token, &exp, source, sizeof(source), last4, &region,
                                   e, sizeof(e)),
                     -1);
    ck_assert_msg(strstr(e,
                         "environment: AWS_ACCESS_KEY_ID is not set; profile default: not "
                         "found in /nonexistent/credentials (absent), /nonexistent/config "
                         "(absent); instance: AWS_EC2_METADATA_DISABLED is true") != NULL,
                  "%s", e);
    setenv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", 1);
    ck_assert_int_eq(msk_iam_token(&C, &token, &exp, source, sizeof(source), last4, &region,
                                   e, sizeof(e)),
                     0);
    ck_assert_str_eq(source, "environment");
    ck_assert_str_eq(last4, "MPLE");
    ck_assert_str_eq(region, "us-east-2"); /* [aws] region over AWS_REGION */
    char *url = aws_msk_token_url(token);
    ck_assert_msg(strstr(url,
                         "https://kafka.us-east-2.amazonaws.com/?Action=kafka-cluster%3A"
                         "Connect&User-Agent=outboxd%2F") == url,
                  "%s", url);
    ck_assert_ptr_nonnull(strstr(url, "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F"));
    ck_assert_ptr_null(strstr(url, "wJalrXUtnFEMI")); /* a signature, not the secret */
    free(url);
    free(token);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mskiam");
    TCase *tc = tcase_create("mskiam");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_needs_sasl_ssl_and_region);
    tcase_add_test(tc, test_check_token);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
