/*
 * test_awscreds.c - the AWS credential chain (awscreds.h) over files and
 * environments this test writes: which source wins (the environment over
 * a profile; AWS_PROFILE and [aws] profile; the credentials file over the
 * config file's [profile NAME]), the error naming every source tried and
 * why, the region's and profile's fallbacks, and the cache. No network:
 * EC2 metadata is disabled (AWS_EC2_METADATA_DISABLED) and no web identity
 * or container variable is set (tests/aws/chain.sh covers those against
 * local stand-ins).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "awscreds.h"

static char dir[] = "/tmp/test_awscreds.XXXXXX";
static char credpath[256], confpath[256];

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static const char *const VARS[] = {"AWS_ACCESS_KEY_ID",
                                   "AWS_SECRET_ACCESS_KEY",
                                   "AWS_SESSION_TOKEN",
                                   "AWS_PROFILE",
                                   "AWS_REGION",
                                   "AWS_DEFAULT_REGION",
                                   "AWS_WEB_IDENTITY_TOKEN_FILE",
                                   "AWS_ROLE_ARN",
                                   "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                   "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                   "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                                   NULL};

static void setup(void)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(credpath, sizeof(credpath), "%s/credentials", dir);
    snprintf(confpath, sizeof(confpath), "%s/config", dir);
    for (int i = 0; VARS[i]; i++)
        unsetenv(VARS[i]);
    setenv("AWS_SHARED_CREDENTIALS_FILE", credpath, 1);
    setenv("AWS_CONFIG_FILE", confpath, 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    put(credpath, "[default]\naws_access_key_id = AKIAFILEDEFAULT\n"
                  "aws_secret_access_key = filesecret\n"
                  "[prod]\naws_access_key_id = AKIAFILEPROD\naws_secret_access_key = p\n"
                  "aws_session_token = prodtoken\n");
    put(confpath, "[profile dev]\naws_access_key_id = AKIACONFDEV\n"
                  "aws_secret_access_key = d\n[profile prod]\naws_access_key_id = NOTTHIS\n"
                  "aws_secret_access_key = x\n[profile sso]\nsso_session = corp\n");
}

static void teardown(void)
{
    unlink(credpath);
    unlink(confpath);
    rmdir(dir);
    strcpy(dir, "/tmp/test_awscreds.XXXXXX");
}

static void get_ok(const struct aws_settings *s, const char *id, const char *source)
{
    struct aws_creds c;
    char err[2048];
    ck_assert_msg(aws_creds_get(s, &c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(c.access_key_id, id);
    ck_assert_str_eq(c.source, source);
    aws_creds_clear(&c);
}

START_TEST(test_environment_wins)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
    setenv("AWS_SESSION_TOKEN", "envtoken", 1);
    setenv("AWS_PROFILE", "prod", 1);
    struct aws_creds c;
    char err[1024];
    ck_assert_int_eq(aws_creds_get(NULL, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key_id, "AKIAENV");
    ck_assert_str_eq(c.secret_access_key, "envsecret");
    ck_assert_str_eq(c.session_token, "envtoken");
    ck_assert_int_eq(c.expires, 0);
    ck_assert_str_eq(c.source, "environment");
    aws_creds_clear(&c);
    ck_assert_ptr_null(c.access_key_id);
    /* half of the pair: said, and the chain goes on to the profile */
    unsetenv("AWS_SECRET_ACCESS_KEY");
    get_ok(NULL, "AKIAFILEPROD", "profile prod");
}
END_TEST

START_TEST(test_profiles)
{
    struct aws_settings s = {0};
    get_ok(&s, "AKIAFILEDEFAULT", "profile default");
    setenv("AWS_PROFILE", "prod", 1);
    get_ok(&s, "AKIAFILEPROD", "profile prod"); /* the credentials file before config */
    s.profile = "dev";                          /* [aws] profile before AWS_PROFILE */
    get_ok(&s, "AKIACONFDEV", "profile dev");   /* config's [profile dev] */
    ck_assert_str_eq(aws_profile(&s), "dev");
    s.profile = NULL;
    ck_assert_str_eq(aws_profile(&s), "prod");
    unsetenv("AWS_PROFILE");
    ck_assert_str_eq(aws_profile(&s), "default");
}
END_TEST

START_TEST(test_nothing_names_every_source)
{
    struct aws_settings s = {.profile = "missing"};
    struct aws_creds c;
    char err[2048];
    ck_assert_int_eq(aws_creds_get(&s, &c, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "environment: AWS_ACCESS_KEY_ID is not set") != NULL, "%s",
                  err);
    ck_assert_msg(strstr(err, "profile missing: not found in ") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "(no [profile missing])") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "instance: AWS_EC2_METADATA_DISABLED is true") != NULL, "%s",
                  err);
    s.profile = "sso";
    ck_assert_int_eq(aws_creds_get(&s, &c, err, sizeof(err)), -1);
    ck_assert_msg(
        strstr(err, "IAM Identity Center (sso_*), which outboxd does not support") != NULL,
        "%s", err);
    /* a web identity half-configured is said */
    setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/x", 1);
    ck_assert_int_eq(aws_creds_get(&s, &c, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "web identity: AWS_ROLE_ARN is set but not "
                              "AWS_WEB_IDENTITY_TOKEN_FILE") != NULL,
                  "%s", err);
}
END_TEST

START_TEST(test_region)
{
    struct aws_settings s = {0};
    ck_assert_ptr_null(aws_region(&s));
    setenv("AWS_DEFAULT_REGION", "eu-central-1", 1);
    ck_assert_str_eq(aws_region(&s), "eu-central-1");
    setenv("AWS_REGION", "eu-west-1", 1);
    ck_assert_str_eq(aws_region(&s), "eu-west-1");
    s.region = "us-east-2";
    ck_assert_str_eq(aws_region(&s), "us-east-2");
    ck_assert_str_eq(aws_region(NULL), "eu-west-1");
}
END_TEST

START_TEST(test_cache)
{
    struct aws_creds_cache cache = AWS_CREDS_CACHE_INIT;
    struct aws_creds c;
    char err[1024];
    ck_assert_int_eq(aws_creds_cached(&cache, NULL, 1000, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key_id, "AKIAFILEDEFAULT");
    aws_creds_clear(&c);
    /* credentials without an expiry are kept: a changed file is not read again */
    put(credpath,
        "[default]\naws_access_key_id = AKIACHANGED\naws_secret_access_key = s\n");
    ck_assert_int_eq(aws_creds_cached(&cache, NULL, 2000, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key_id, "AKIAFILEDEFAULT");
    aws_creds_clear(&c);
    /* ones that expire within AWS_CREDS_REFRESH_S are fetched again */
    cache.c.expires = 2000 + AWS_CREDS_REFRESH_S - 1;
    ck_assert_int_eq(aws_creds_cached(&cache, NULL, 2000, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key_id, "AKIACHANGED");
    aws_creds_clear(&c);
    /* a failed refresh keeps ones that have not expired yet */
    cache.c.expires = 2100;
    unlink(credpath);
    ck_assert_int_eq(aws_creds_cached(&cache, NULL, 2000, &c, err, sizeof(err)), 0);
    ck_assert_str_eq(c.access_key_id, "AKIACHANGED");
    aws_creds_clear(&c);
    /* and fails once they have */
    ck_assert_int_eq(aws_creds_cached(&cache, NULL, 2100, &c, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "no AWS credentials: ") == err, "%s", err);
    aws_creds_cache_clear(&cache);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("awscreds");
    TCase *tc = tcase_create("awscreds");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_environment_wins);
    tcase_add_test(tc, test_profiles);
    tcase_add_test(tc, test_nothing_names_every_source);
    tcase_add_test(tc, test_region);
    tcase_add_test(tc, test_cache);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
