/*
 * test_awsparse.c - what the sources of AWS credentials give, read
 * (awsparse.h): profiles of the shared credentials and config files
 * ([NAME] and [profile NAME], [default], comments, nested blocks, the last
 * of a repeated key), STS's AssumeRoleWithWebIdentity answer and its
 * error, the container's and IMDS's JSON, and their times.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awsparse.h"

static const char *CREDS = "# a comment\n"
                           "[default]\n"
                           "aws_access_key_id = AKIADEFAULT\n"
                           "aws_secret_access_key=secretdefault  \n"
                           "\n"
                           "[ prod ]\n"
                           "; another\n"
                           "aws_access_key_id = AKIAPROD\n"
                           "aws_secret_access_key = secret/prod+=\n"
                           "aws_session_token = tok\n"
                           "aws_access_key_id = AKIAPROD2\n";

static const char *CONFIG = "[default]\n"
                            "region = eu-west-1\n"
                            "[profile dev]\n"
                            "s3 =\n"
                            "  aws_access_key_id = NOTTHIS\n"
                            "aws_access_key_id = AKIADEV\n"
                            "[dev]\n"
                            "aws_access_key_id = NOTTHISEITHER\n"
                            "[profile default]\n"
                            "output = json\n";

START_TEST(test_ini)
{
    char *v = aws_ini_get(CREDS, false, "default", "aws_secret_access_key");
    ck_assert_str_eq(v, "secretdefault");
    free(v);
    v = aws_ini_get(CREDS, false, "prod", "aws_access_key_id");
    ck_assert_str_eq(v, "AKIAPROD2"); /* the last wins */
    free(v);
    v = aws_ini_get(CREDS, false, "prod", "aws_secret_access_key");
    ck_assert_str_eq(v, "secret/prod+=");
    free(v);
    ck_assert(!aws_ini_has_profile(CREDS, false, "dev"));
    ck_assert_ptr_null(aws_ini_get(CREDS, false, "dev", "aws_access_key_id"));
    /* config: [profile dev], not [dev]; the nested s3 block is not the profile's */
    v = aws_ini_get(CONFIG, true, "dev", "aws_access_key_id");
    ck_assert_str_eq(v, "AKIADEV");
    free(v);
    /* config: [default] and [profile default] are both the default profile */
    v = aws_ini_get(CONFIG, true, "default", "region");
    ck_assert_str_eq(v, "eu-west-1");
    free(v);
    v = aws_ini_get(CONFIG, true, "default", "output");
    ck_assert_str_eq(v, "json");
    free(v);
    /* the credentials file has no "profile " prefix */
    ck_assert(!aws_ini_has_profile("[profile prod]\nx=1\n", false, "prod"));
    ck_assert(aws_ini_has_profile("[profile prod]\nx=1\n", true, "prod"));
}
END_TEST

START_TEST(test_time)
{
    time_t t;
    ck_assert_int_eq(aws_parse_time("2025-12-06T05:46:40Z", &t), 0);
    ck_assert_int_eq(t, 1765000000);
    ck_assert_int_eq(aws_parse_time("2025-12-06T05:46:40.123Z", &t), 0);
    ck_assert_int_eq(t, 1765000000);
    ck_assert_int_eq(aws_parse_time("2025-12-06T05:46:40+00:00", &t), 0);
    ck_assert_int_eq(aws_parse_time("2025-12-06 05:46:40", &t), -1);
    ck_assert_int_eq(aws_parse_time("2025-12-06T05:46:40+02:00", &t), -1);
}
END_TEST

/* STS's answer, shaped as its API reference's example. */
static const char *STS_OK =
    "<AssumeRoleWithWebIdentityResponse "
    "xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
    "  <AssumeRoleWithWebIdentityResult>\n"
    "    "
    "<SubjectFromWebIdentityToken>system:serviceaccount:ns:outboxd</"
    "SubjectFromWebIdentityToken>\n"
    "    <Audience>sts.amazonaws.com</Audience>\n"
    "    <AssumedRoleUser>\n"
    "      <Arn>arn:aws:sts::123456789012:assumed-role/outboxd/s1</Arn>\n"
    "      <AssumedRoleId>AROACLKWSDQRAOEXAMPLE:s1</AssumedRoleId>\n"
    "    </AssumedRoleUser>\n"
    "    <Credentials>\n"
    "      <SessionToken>AQoDYXdzE&amp;+/=</SessionToken>\n"
    "      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>\n"
    "      <Expiration>2025-12-06T06:46:40Z</Expiration>\n"
    "      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>\n"
    "    </Credentials>\n"
    "    <Provider>www.amazon.com</Provider>\n"
    "  </AssumeRoleWithWebIdentityResult>\n"
    "</AssumeRoleWithWebIdentityResponse>\n";

START_TEST(test_sts)
{
    struct aws_creds c;
    char *role, err[256];
    ck_assert_int_eq(aws_parse_sts(200, STS_OK, &c, &role, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key_id, "ASIAIOSFODNN7EXAMPLE");
    ck_assert_str_eq(c.secret_access_key, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY");
    ck_assert_str_eq(c.session_token, "AQoDYXdzE&+/=");
    ck_assert_int_eq(c.expires, 1765003600);
    ck_assert_str_eq(c.source, "web identity");
    ck_assert_str_eq(role, "arn:aws:sts::123456789012:assumed-role/outboxd/s1");
    free(role);
    aws_creds_clear(&c);
    const char *refused =
        "<ErrorResponse "
        "xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender"
        "</Type><Code>InvalidIdentityToken</Code><Message>Incorrect token "
        "audience</Message>"
        "</Error><RequestId>x</RequestId></ErrorResponse>";
    ck_assert_int_eq(aws_parse_sts(400, refused, &c, &role, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "HTTP 400: InvalidIdentityToken: Incorrect token audience");
    ck_assert_int_eq(aws_parse_sts(503, "busy", &c, &role, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "HTTP 503: busy");
    ck_assert_int_eq(aws_parse_sts(200, "<x/>", &c, &role, err, sizeof(err)), -1);
    ck_assert_ptr_null(c.access_key_id);
}
END_TEST

START_TEST(test_json)
{
    struct aws_creds c;
    char err[256];
    /* IMDS's shape */
    const char *imds = "{\"Code\":\"Success\",\"LastUpdated\":\"2025-12-06T05:40:00Z\","
                       "\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"ASIAIMDS\","
                       "\"SecretAccessKey\":\"s3cr3t\",\"Token\":\"tok\","
                       "\"Expiration\":\"2025-12-06T11:46:40Z\"}";
    ck_assert_int_eq(aws_parse_creds_json(imds, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key_id, "ASIAIMDS");
    ck_assert_str_eq(c.session_token, "tok");
    ck_assert_int_eq(c.expires, 1765021600);
    aws_creds_clear(&c);
    /* the container's (no Code; RoleArn) */
    ck_assert_int_eq(aws_parse_creds_json(
                         "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\",\"Token\":\"T\","
                         "\"Expiration\":\"2025-12-06T06:00:00Z\",\"RoleArn\":\"r\"}",
                         &c, err, sizeof(err)),
                     0);
    ck_assert_int_eq(c.expires, 1765000800);
    aws_creds_clear(&c);
    ck_assert_int_eq(aws_parse_creds_json("{\"Code\":\"AssumeRoleUnauthorizedAccess\","
                                          "\"Message\":\"denied\"}",
                                          &c, err, sizeof(err)),
                     -1);
    ck_assert_str_eq(err, "Code AssumeRoleUnauthorizedAccess: denied");
    ck_assert_int_eq(aws_parse_creds_json("{\"AccessKeyId\":\"A\"}", &c, err, sizeof(err)),
                     -1);
    ck_assert_str_eq(err, "the answer has no AccessKeyId and SecretAccessKey");
    ck_assert_int_eq(aws_parse_creds_json("<html>", &c, err, sizeof(err)), -1);
    ck_assert_int_eq(
        aws_parse_creds_json("{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\","
                             "\"Expiration\":\"soon\"}",
                             &c, err, sizeof(err)),
        -1);
    ck_assert_ptr_null(c.secret_access_key);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("awsparse");
    TCase *tc = tcase_create("awsparse");
    tcase_add_test(tc, test_ini);
    tcase_add_test(tc, test_time);
    tcase_add_test(tc, test_sts);
    tcase_add_test(tc, test_json);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
