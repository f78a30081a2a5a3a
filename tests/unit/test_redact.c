/*
 * test_redact.c - passwords kept out of logs (include/base/redact.h): quoted
 * parts of a conninfo parse error dropped, a secret masked, libpq's line
 * breaks folded; redact_conn_error() for a parsable and an unparsable
 * conninfo; a URL's credentials masked (redact_url()).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"

/* ---- masking ---- */

START_TEST(test_strip_quoted)
{
    char b[256];
    redact_strip_quoted("invalid percent-encoded token: \"S3cr3t%zz\"", b, sizeof(b));
    ck_assert_str_eq(b, "invalid percent-encoded token: \"...\"");
    redact_strip_quoted("a \"x\" b \"yy\" c", b, sizeof(b));
    ck_assert_str_eq(b, "a \"...\" b \"...\" c");
    redact_strip_quoted("empty \"\" here", b, sizeof(b));
    ck_assert_str_eq(b, "empty \"...\" here");
    redact_strip_quoted("unclosed \"postgres://u:S3cr3t@[::1", b, sizeof(b));
    ck_assert_ptr_null(strstr(b, "S3cr3t"));
    ck_assert_str_eq(b, "unclosed \"...");
    redact_strip_quoted("no quotes", b, sizeof(b));
    ck_assert_str_eq(b, "no quotes");
    char small[8];
    redact_strip_quoted("abcdefghijkl", small, sizeof(small));
    ck_assert_uint_lt(strlen(small), sizeof(small));
}
END_TEST

START_TEST(test_mask)
{
    char b[256];
    redact_mask("connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  password "
                "authentication failed for user \"outboxd\"\n",
                "S3cr3t", b, sizeof(b));
    ck_assert_str_eq(b, "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  "
                        "password authentication failed for user \"outboxd\"");
    redact_mask("x S3cr3t y S3cr3t\n\tz", "S3cr3t", b, sizeof(b));
    ck_assert_str_eq(b, "x ******** y ******** z");
    redact_mask("keep\nlines", NULL, b, sizeof(b));
    ck_assert_str_eq(b, "keep lines");
    redact_mask("keep", "", b, sizeof(b));
    ck_assert_str_eq(b, "keep");
    char small[5];
    redact_mask("S3cr3t", "S3cr3t", small, sizeof(small));
    ck_assert_str_eq(small, "****");
}
END_TEST

START_TEST(test_conn_error)
{
    char b[256];
    /* parsable: the conninfo's password masked wherever libpq repeats it */
    redact_conn_error("host=db password=S3cr3t", "bad S3cr3t\nthere", b, sizeof(b));
    ck_assert_str_eq(b, "bad ******** there");
    /* unparsable: every quoted part dropped, the password with it */
    redact_conn_error("postgres://u:S3cr3t%zz@db",
                      "invalid percent-encoded token: \"S3cr3t%zz\"\n", b, sizeof(b));
    ck_assert_ptr_null(strstr(b, "S3cr3t"));
    ck_assert_str_eq(b, "invalid percent-encoded token: \"...\"");
    /* no conninfo at all: the text as it is, on one line */
    redact_conn_error(NULL, "x\ny", b, sizeof(b));
    ck_assert_str_eq(b, "x y");
}
END_TEST

/* A multi-host conninfo (failover: host=a,b target_session_attrs=...):
 * libpq's message has one part per server, each on its own lines; the one
 * password is masked in all of them, in both conninfo forms. */
START_TEST(test_conn_error_multi_host)
{
    char b[512];
    const char *msg = "connection to server at \"a\" (10.0.0.1), port 5432 failed: "
                      "Connection refused\n\tIs the server running on that host?\n"
                      "connection to server at \"b\" (10.0.0.2), port 5433 failed: "
                      "FATAL:  password authentication failed for user \"S3cr3t\"\n";
    redact_conn_error("host=a,b port=5432,5433 password=S3cr3t "
                      "target_session_attrs=read-write",
                      msg, b, sizeof(b));
    ck_assert_ptr_null(strstr(b, "S3cr3t"));
    ck_assert_ptr_nonnull(strstr(b, "port 5432 failed: Connection refused Is the server"));
    ck_assert_ptr_nonnull(strstr(b, "port 5433 failed: FATAL:  password"));
    ck_assert_ptr_null(strchr(b, '\n'));
    redact_conn_error("postgresql://u:S3cr3t@a:5432,b:5433/app?target_session_attrs=read-write",
                      msg, b, sizeof(b));
    ck_assert_ptr_null(strstr(b, "S3cr3t"));
    ck_assert_ptr_nonnull(strstr(b, "user \"********\""));
}
END_TEST

/* ---- URLs ---- */

START_TEST(test_url)
{
    char b[256];
    static const char *const urls[][2] = {
        {"https://user:S3cr3t@reg.example:8081/apis/ccompat/v7",
         "https://********@reg.example:8081/apis/ccompat/v7"},
        {"http://token@reg/", "http://********@reg/"},
        /* an unescaped '/' or '@' in the password: up to the last '@' */
        {"https://u:S3/cr@t@reg/x", "https://********@reg/x"},
        {"u:S3cr3t@reg", "********@reg"},
        {"https://reg.example/apis/ccompat/v7", "https://reg.example/apis/ccompat/v7"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        redact_url(urls[i][0], b, sizeof(b));
        ck_assert_str_eq(b, urls[i][1]);
        ck_assert(redact_url_has_credentials(urls[i][0]) == (strcmp(b, urls[i][0]) != 0));
    }
    ck_assert(!redact_url_has_credentials(NULL));
    char small[12];
    redact_url("https://u:S3cr3t@reg/", small, sizeof(small));
    ck_assert_ptr_null(strstr(small, "S3c"));
    ck_assert_uint_lt(strlen(small), sizeof(small));
}
END_TEST

static Suite *redact_suite(void)
{
    Suite *s = suite_create("redact");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_strip_quoted);
    tcase_add_test(tc, test_mask);
    tcase_add_test(tc, test_conn_error);
    tcase_add_test(tc, test_conn_error_multi_host);
    tcase_add_test(tc, test_url);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(redact_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
