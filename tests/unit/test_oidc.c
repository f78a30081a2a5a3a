/*
 * test_oidc.c - OAUTHBEARER by OIDC client credentials as `outboxd check`
 * reads it (include/oidc.h): which [kafka] settings make it, the request
 * body librdkafka sends, and the token endpoint's answers: a token (its
 * principal claim and expiry), a refusal in RFC 6749's form (Keycloak's,
 * as seen), a body that is not, and tokens librdkafka would not take.
 * And the secret file ([kafka] sasl.oauthbearer.client.secret_file): read
 * into sasl.oauthbearer.client.secret, refused beside the secret itself,
 * its key a path (shown), the secret masked.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "oidc.h"

static struct config C;

static void setup(void)
{
    ck_assert_int_eq(config_init(&C), 0);
}

static void teardown(void)
{
    config_free(&C);
}

static void set(const char *k, const char *v)
{
    char err[256];
    ck_assert_int_eq(config_set(&C, "kafka", k, v, err, sizeof(err)), 0);
}

START_TEST(test_settings)
{
    struct oidc_settings s;
    const char *why;
    ck_assert_int_eq(oidc_settings_from(&C, &s, &why), OIDC_NONE);
    set("sasl.mechanism", "OAUTHBEARER");
    ck_assert_int_eq(oidc_settings_from(&C, &s, &why), OIDC_NONE); /* method default */
    set("sasl.oauthbearer.method", "OIDC");
    set("sasl.oauthbearer.client.credentials.client.id", "outboxd"); /* the alias */
    set("sasl.oauthbearer.client.secret", "pw");
    set("sasl.oauthbearer.token.endpoint.url", "https://idp/token");
    ck_assert_int_eq(oidc_settings_from(&C, &s, &why), OIDC_CLIENT_CREDENTIALS);
    ck_assert_str_eq(s.client_id, "outboxd");
    ck_assert_str_eq(s.client_secret, "pw");
    ck_assert_str_eq(s.token_url, "https://idp/token");
    ck_assert_str_eq(s.sub_claim, "sub");
    ck_assert_ptr_null(s.scope);
    set("sasl.oauthbearer.sub.claim.name", "azp");
    ck_assert_int_eq(oidc_settings_from(&C, &s, &why), OIDC_CLIENT_CREDENTIALS);
    ck_assert_str_eq(s.sub_claim, "azp");
    set("sasl.oauthbearer.grant.type", "urn:ietf:params:oauth:grant-type:jwt-bearer");
    ck_assert_int_eq(oidc_settings_from(&C, &s, &why), OIDC_OTHER);
    ck_assert_ptr_nonnull(strstr(why, "grant.type"));
}
END_TEST

START_TEST(test_request_body)
{
    char *b = oidc_request_body(NULL);
    ck_assert_str_eq(b, "grant_type=client_credentials");
    free(b);
    b = oidc_request_body("kafka offline_access");
    ck_assert_str_eq(b, "grant_type=client_credentials&scope=kafka offline_access");
    free(b);
}
END_TEST

/* {"exp":1796576106,"iat":1796576046,"sub":"9c3b","azp":"outboxd"} */
#define PAYLOAD                                                                            \
    "eyJleHAiOjE3OTY1NzYxMDYsImlhdCI6MTc5NjU3NjA0Niwic3ViIjoiOWMzYiIsImF6cCI6Im91dGJveGQi" \
    "fQ"
/* {"iat":1,"azp":"x"}: no exp */
#define NO_EXP "eyJpYXQiOjEsImF6cCI6IngifQ"
#define ANSWER(jwt)                                                                        \
    "{\"access_token\":\"" jwt "\",\"expires_in\":60,\"token_type\":\"Bearer\"}"

START_TEST(test_token)
{
    struct oidc_token t;
    char err[512];
    const char *a = ANSWER("eyJhbGciOiJSUzI1NiJ9." PAYLOAD ".c2ln");
    ck_assert_int_eq(oidc_parse_answer(200, a, strlen(a), "azp", &t, err, sizeof(err)), 0);
    ck_assert_str_eq(t.principal, "outboxd");
    ck_assert_int_eq(t.exp, 1796576106);
    ck_assert_int_eq(t.issued_at, 1796576046);
    oidc_token_clear(&t);
    ck_assert_int_eq(oidc_parse_answer(200, a, strlen(a), "sub", &t, err, sizeof(err)), 0);
    ck_assert_str_eq(t.principal, "9c3b");
    oidc_token_clear(&t);
}
END_TEST

/* The audience and issuer check prints for a token the broker rejects:
 * aud a string or an array (its strings), iss; NULL when absent. */
START_TEST(test_audience_and_issuer)
{
    struct oidc_token t;
    char err[512];
    /* {"exp":1796576106,"azp":"outboxd","aud":"kafka","iss":"https://idp/realms/r"} */
    const char *a = ANSWER("eyJhbGciOiJSUzI1NiJ9."
                           "eyJleHAiOjE3OTY1NzYxMDYsImF6cCI6Im91dGJveGQiLCJhdWQiOiJrYWZrYSI"
                           "sImlzcyI6Imh0dHBzOi8vaWRwL3JlYWxtcy9yIn0.c2ln");
    ck_assert_int_eq(oidc_parse_answer(200, a, strlen(a), "azp", &t, err, sizeof(err)), 0);
    ck_assert_str_eq(t.audience, "kafka");
    ck_assert_str_eq(t.issuer, "https://idp/realms/r");
    oidc_token_clear(&t);
    /* {"exp":1796576106,"azp":"outboxd","aud":["kafka","account",7]} */
    const char *b = ANSWER("eyJhbGciOiJSUzI1NiJ9."
                           "eyJleHAiOjE3OTY1NzYxMDYsImF6cCI6Im91dGJveGQiLCJhdWQiOlsia2Fma2E"
                           "iLCJhY2NvdW50Iiw3XX0.c2ln");
    ck_assert_int_eq(oidc_parse_answer(200, b, strlen(b), "azp", &t, err, sizeof(err)), 0);
    ck_assert_str_eq(t.audience, "kafka, account");
    ck_assert_ptr_null(t.issuer);
    oidc_token_clear(&t);
    const char *c = ANSWER("eyJhbGciOiJSUzI1NiJ9." PAYLOAD ".c2ln");
    ck_assert_int_eq(oidc_parse_answer(200, c, strlen(c), "azp", &t, err, sizeof(err)), 0);
    ck_assert_ptr_null(t.audience);
    oidc_token_clear(&t);
}
END_TEST

START_TEST(test_refusals)
{
    struct oidc_token t;
    char err[512];
    const char *kc = "{\"error\":\"unauthorized_client\",\"error_description\":\"Invalid "
                     "client or Invalid client credentials\"}";
    ck_assert_int_eq(oidc_parse_answer(401, kc, strlen(kc), "sub", &t, err, sizeof(err)),
                     -1);
    ck_assert_str_eq(err, "HTTP 401: unauthorized_client: Invalid client or Invalid client "
                          "credentials");
    const char *html = "<html>Bad Gateway</html>";
    ck_assert_int_eq(
        oidc_parse_answer(502, html, strlen(html), "sub", &t, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "HTTP 502: <html>Bad Gateway</html>");
    ck_assert_int_eq(oidc_parse_answer(503, "", 0, "sub", &t, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "HTTP 503 (an empty answer)");
    /* 200, but not a token librdkafka takes */
    const char *a = "{\"token_type\":\"Bearer\"}";
    ck_assert_int_eq(oidc_parse_answer(200, a, strlen(a), "sub", &t, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "access_token"));
    a = ANSWER("opaque-token");
    ck_assert_int_eq(oidc_parse_answer(200, a, strlen(a), "sub", &t, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "not a JWT"));
    a = ANSWER("h." NO_EXP ".s");
    ck_assert_int_eq(oidc_parse_answer(200, a, strlen(a), "azp", &t, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "\"exp\""));
    a = ANSWER("h." PAYLOAD ".s");
    ck_assert_int_eq(
        oidc_parse_answer(200, a, strlen(a), "client_id", &t, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "no claim \"client_id\""));
    ck_assert_ptr_nonnull(strstr(err, "sasl.oauthbearer.sub.claim.name"));
    ck_assert_ptr_null(t.principal);
}
END_TEST

START_TEST(test_jwt_payload)
{
    char *p = oidc_jwt_payload("a." NO_EXP ".c");
    ck_assert_str_eq(p, "{\"iat\":1,\"azp\":\"x\"}");
    free(p);
    ck_assert_ptr_null(oidc_jwt_payload("a.b"));
    ck_assert_ptr_null(oidc_jwt_payload("a.b.c.d"));
    ck_assert_ptr_null(oidc_jwt_payload("a.b*c.d"));
    ck_assert_ptr_null(oidc_jwt_payload(NULL));
}
END_TEST

START_TEST(test_secret_file)
{
    char path[] = "/tmp/test_oidc.XXXXXX", err[512];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "s3cret\n", 7), 7);
    close(fd);
    set("sasl.oauthbearer.client.secret_file", path);
    ck_assert_ptr_null(config_kafka_get(&C, "sasl.oauthbearer.client.secret_file"));
    ck_assert_int_eq(config_load_secrets(&C, err, sizeof(err)), 0);
    ck_assert_str_eq(config_kafka_get(&C, "sasl.oauthbearer.client.secret"), "s3cret");
    ck_assert(config_kafka_key_secret("sasl.oauthbearer.client.secret"));
    ck_assert(!config_kafka_key_secret("sasl.oauthbearer.client.secret_file"));
    /* the secret beside its file: refused */
    ck_assert_int_eq(config_load_secrets(&C, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "both set"));
    unlink(path);
}
END_TEST

START_TEST(test_secret_file_from_the_environment)
{
    char err[256];
    char *env[] = {"OUTBOXD_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET_FILE=/run/secrets/oidc",
                   NULL};
    ck_assert_int_eq(config_load_env(&C, env, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(C.kafka_oidc_secret_file);
    ck_assert_str_eq(C.kafka_oidc_secret_file, "/run/secrets/oidc");
    ck_assert_int_eq(C.kafka_oidc_secret_file_source, CONFIG_SRC_ENV);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("oidc");
    TCase *tc = tcase_create("oidc");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_settings);
    tcase_add_test(tc, test_request_body);
    tcase_add_test(tc, test_token);
    tcase_add_test(tc, test_audience_and_issuer);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_jwt_payload);
    tcase_add_test(tc, test_secret_file);
    tcase_add_test(tc, test_secret_file_from_the_environment);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
