/*
 * test_awssigv4.c - SigV4 presigning (awssigv4.h) and the MSK and RDS IAM
 * tokens built on it (awstoken.h): AWS's published vectors (the signing
 * key of the SigV4 documentation's example, S3's presigned GET example of
 * "Authenticating Requests: Using Query Parameters"), the URI encoding,
 * and one MSK and one RDS token as AWS's own signers gave them
 * (aws-msk-iam-sasl-signer-js 1.0.3, @aws-sdk/rds-signer 3.1178.0, through
 * tests/aws/signers.js at 1765000000; tests/aws/signers.sh compares many
 * more inputs with the signers themselves). The expiry of an MSK token
 * with credentials that expire sooner than 900 s.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awssigv4.h"
#include "awstoken.h"

START_TEST(test_signing_key)
{
    /* The SigV4 documentation's "derive a signing key" example. */
    unsigned char k[32];
    char hex[65];
    aws_sigv4_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215",
                          "us-east-1", "iam", k);
    for (int i = 0; i < 32; i++)
        sprintf(hex + 2 * i, "%02x", k[i]);
    ck_assert_str_eq(hex,
                     "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
}
END_TEST

START_TEST(test_s3_presigned_example)
{
    /* S3's presigned GET example: examplebucket/test.txt, 24 hours from
     * 20130524T000000Z, UNSIGNED-PAYLOAD. */
    struct aws_creds c = {.access_key_id = "AKIAIOSFODNN7EXAMPLE",
                          .secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
    struct aws_presign p = {.region = "us-east-1",
                            .service = "s3",
                            .host = "examplebucket.s3.amazonaws.com",
                            .path = "/test.txt",
                            .expires = 86400,
                            .now = 1369353600,
                            .payload_hash = AWS_UNSIGNED_PAYLOAD};
    char *cr = aws_sigv4_canonical_request(&c, &p);
    ck_assert_str_eq(
        cr, "GET\n/test.txt\nX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential="
            "AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-"
            "Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\n"
            "host:examplebucket.s3.amazonaws.com\n\nhost\nUNSIGNED-PAYLOAD");
    free(cr);
    char *q = aws_sigv4_presign(&c, &p);
    ck_assert_str_eq(
        q, "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%"
           "2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-"
           "Amz-Expires=86400&X-Amz-Signature="
           "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404&X-Amz-"
           "SignedHeaders=host");
    free(q);
}
END_TEST

START_TEST(test_uri_encode)
{
    char *e = aws_uri_encode("a b/c~d._-*!'()=&:+%\xc3\xa9");
    ck_assert_str_eq(e, "a%20b%2Fc~d._-%2A%21%27%28%29%3D%26%3A%2B%25%C3%A9");
    free(e);
    char hex[65];
    aws_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, AWS_EMPTY_SHA256);
    char d[17];
    aws_sigv4_date(1765000000, d);
    ck_assert_str_eq(d, "20251206T054640Z");
}
END_TEST

static struct aws_creds C = {.access_key_id = "AKIDEXAMPLE",
                             .secret_access_key =
                                 "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};

START_TEST(test_msk_token_as_aws_signer)
{
    time_t exp = 0;
    char *t = aws_msk_token_ua(&C, "us-east-1", 1765000000,
                               "aws-msk-iam-sasl-signer-js/1.0.3", &exp);
    ck_assert_str_eq(t, "aHR0cHM6Ly9rYWZrYS51cy1lYXN0LTEuYW1hem9uYXdzLmNvbS8_"
                        "QWN0aW9uPWthZmthLWNsdXN0ZXIlM0F"
                        "Db25uZWN0JlVzZXItQWdlbnQ9YXdzLW1zay1pYW0tc2FzbC1zaWduZXItanMlMkYxL"
                        "jAuMyZYLUFtei1BbGd"
                        "vcml0aG09QVdTNC1ITUFDLVNIQTI1NiZYLUFtei1DcmVkZW50aWFsPUFLSURFWEFNU"
                        "ExFJTJGMjAyNTEyMD"
                        "YlMkZ1cy1lYXN0LTElMkZrYWZrYS1jbHVzdGVyJTJGYXdzNF9yZXF1ZXN0JlgtQW16"
                        "LURhdGU9MjAyNTEyM"
                        "DZUMDU0NjQwWiZYLUFtei1FeHBpcmVzPTkwMCZYLUFtei1TaWduYXR1cmU9NTIzOTd"
                        "hMTA5ZTgxNzk0MzU1"
                        "YWZlNjM3NzA1NWU5MjlhODMyYTRlZDkwNDQ4NDQzYzA5NDMyYThhNDMyMDEyNyZYLU"
                        "Ftei1TaWduZWRIZWF"
                        "kZXJzPWhvc3Q");
    ck_assert_int_eq(exp, 1765000900);
    char *url = aws_msk_token_url(t);
    ck_assert_str_eq(
        url, "https://kafka.us-east-1.amazonaws.com/?Action=kafka-cluster%3AConnect&"
             "User-Agent=aws-msk-iam-sasl-signer-js%2F1.0.3&X-Amz-Algorithm=AWS4-"
             "HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20251206%2Fus-east-1%"
             "2Fkafka-cluster%2Faws4_request&X-Amz-Date=20251206T054640Z&X-Amz-"
             "Expires=900&X-Amz-Signature="
             "52397a109e81794355afe6377055e929a832a4ed90448443c09432a8a4320127&X-"
             "Amz-SignedHeaders=host");
    free(url);
    free(t);
    /* outboxd's own User-Agent, the rest the same */
    t = aws_msk_token(&C, "us-east-1", 1765000000, &exp);
    url = aws_msk_token_url(t);
    ck_assert_ptr_nonnull(strstr(url, "&User-Agent=outboxd%2F"));
    ck_assert_ptr_nonnull(
        strstr(url, "X-Amz-Signature="
                    "52397a109e81794355afe6377055e929a832a4ed90448443c09432a8a4320127"));
    free(url);
    free(t);
}
END_TEST

START_TEST(test_msk_token_short_credentials)
{
    /* Credentials that expire in 300 s: the token lives 300 s, as the
     * signer's ttl = min(expiration - now, 900); with a session token. */
    struct aws_creds c = C;
    c.session_token = "FQoGZXIvYXdzE+/=";
    c.expires = 1765000300;
    time_t exp = 0;
    char *t = aws_msk_token(&c, "eu-west-1", 1765000000, &exp);
    ck_assert_int_eq(exp, 1765000300);
    char *url = aws_msk_token_url(t);
    ck_assert_ptr_nonnull(strstr(url, "&X-Amz-Expires=300&"));
    ck_assert_ptr_nonnull(strstr(url, "&X-Amz-Security-Token=FQoGZXIvYXdzE%2B%2F%3D&"));
    ck_assert_ptr_nonnull(strstr(url, "https://kafka.eu-west-1.amazonaws.com/?"));
    free(url);
    free(t);
    /* already expired: 1 s, never 0 or negative */
    c.expires = 1764999000;
    t = aws_msk_token(&c, "eu-west-1", 1765000000, &exp);
    ck_assert_int_eq(exp, 1765000001);
    free(t);
    ck_assert_ptr_null(aws_msk_token_url("not*base64"));
}
END_TEST

START_TEST(test_rds_token_as_aws_signer)
{
    char *t = aws_rds_token(&C, "us-east-1", "mydb.abc.us-east-1.rds.amazonaws.com", 5432,
                            "outboxd", 1765000000);
    ck_assert_str_eq(
        t, "mydb.abc.us-east-1.rds.amazonaws.com:5432/?Action=connect&DBUser="
           "outboxd&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%"
           "2F20251206%2Fus-east-1%2Frds-db%2Faws4_request&X-Amz-Date="
           "20251206T054640Z&X-Amz-Expires=900&X-Amz-Signature="
           "690a6d288d6274bd3cdc1754622bde18b043530d7e07946111b0b5da1b3ef527&X-Amz-"
           "SignedHeaders=host");
    free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("awssigv4");
    TCase *tc = tcase_create("awssigv4");
    tcase_add_test(tc, test_signing_key);
    tcase_add_test(tc, test_s3_presigned_example);
    tcase_add_test(tc, test_uri_encode);
    tcase_add_test(tc, test_msk_token_as_aws_signer);
    tcase_add_test(tc, test_msk_token_short_credentials);
    tcase_add_test(tc, test_rds_token_as_aws_signer);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
