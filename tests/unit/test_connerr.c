/*
 * test_connerr.c - connerr_fix() (include/pg/connerr.h) on the messages libpq
 * 15 and the server give: permanent ones get their fix, transient ones NULL.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "connerr.h"

static void has_fix(const char *msg, const char *needle)
{
    const char *fix = connerr_fix(msg);
    ck_assert_msg(fix != NULL, "no fix for: %s", msg);
    ck_assert_msg(strstr(fix, needle) != NULL, "fix for \"%s\" is \"%s\", wanted \"%s\"", msg,
                  fix, needle);
}

START_TEST(test_tls)
{
    has_fix("cannot connect to postgres: connection to server at \"127.0.0.1\", port 5432 "
            "failed: SSL error: certificate verify failed",
            "sslrootcert");
    has_fix("connection to server at \"127.0.0.1\", port 5432 failed: server certificate "
            "for \"127.0.0.1\" does not match host name \"localhost\"",
            "host name the server's certificate was issued for");
    has_fix("connection to server at \"127.0.0.1\", port 5432 failed: root certificate file "
            "\"/nope/root.crt\" does not exist\nEither provide the file or change sslmode to "
            "disable server certificate verification.",
            "set sslrootcert");
    has_fix("connection to server at \"127.0.0.1\", port 5432 failed: server does not support "
            "SSL, but SSL was required",
            "turn ssl on");
}
END_TEST

START_TEST(test_options)
{
    has_fix("invalid sslmode value: \"bogus\"", "verify-full");
    has_fix("invalid connection option \"bogus\"", "remove or correct");
    has_fix("invalid gssencmode value: \"x\"", "value");
    has_fix("invalid integer value \"x\" for connection option \"port\"", "number");
    has_fix("missing \"=\" after \"x\" in connection info string", "syntax");
}
END_TEST

START_TEST(test_auth)
{
    has_fix("FATAL:  password authentication failed for user \"outboxd\"", "correct the password");
    has_fix("fe_sendauth: no password supplied", "give the password");
    has_fix("FATAL:  no pg_hba.conf entry for replication connection from host \"127.0.0.1\", "
            "user \"x\", no encryption",
            "pg_hba.conf");
    has_fix("FATAL:  pg_hba.conf rejects connection for host \"127.0.0.1\", user \"x\"",
            "rejects this role");
    has_fix("FATAL:  role \"nobody\" does not exist", "role (user) or database");
    has_fix("FATAL:  database \"nope\" does not exist", "role (user) or database");
    has_fix("FATAL:  must be superuser or replication role to start walsender", "REPLICATION");
    /* RDS refuses an IAM token through PAM */
    has_fix("FATAL:  PAM authentication failed for user \"outboxd\"", "GRANT rds_iam");
}
END_TEST

START_TEST(test_transient)
{
    const char *transient[] = {
        "connection to server at \"127.0.0.1\", port 1 failed: Connection refused\n\tIs the "
        "server running on that host and accepting TCP/IP connections?",
        "FATAL:  the database system is starting up",
        "FATAL:  the database system is shutting down",
        "FATAL:  sorry, too many clients already",
        "server closed the connection unexpectedly",
        "could not translate host name \"db\" to address: Temporary failure in name resolution",
        "timeout expired",
        "",
        /* no AWS credentials for an RDS IAM token (pgconn.c): they may come */
        "cannot connect to postgres: [postgres] auth = aws_rds_iam: no AWS credentials: web "
        "identity: /var/run/secrets/token: Permission denied; instance: does not exist",
    };
    for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++)
        ck_assert_msg(connerr_fix(transient[i]) == NULL, "taken as permanent: %s",
                      transient[i]);
    ck_assert_ptr_null(connerr_fix(NULL));
}
END_TEST

/* RDS refusing a token once outboxd has streamed is retried (connerr.h);
 * a password refused is not, and no token auth means no exception. */
START_TEST(test_heals_once_streamed)
{
    const char *pam = "FATAL:  PAM authentication failed for user \"outboxd\"";
    ck_assert(connerr_heals_once_streamed(pam, true));
    ck_assert(!connerr_heals_once_streamed(pam, false));
    ck_assert(!connerr_heals_once_streamed(
        "FATAL:  password authentication failed for user \"outboxd\"", true));
    ck_assert(!connerr_heals_once_streamed("FATAL:  no pg_hba.conf entry for host", true));
    ck_assert(!connerr_heals_once_streamed(NULL, true));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("connerr");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_tls);
    tcase_add_test(tc, test_options);
    tcase_add_test(tc, test_auth);
    tcase_add_test(tc, test_transient);
    tcase_add_test(tc, test_heals_once_streamed);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
