/*
 * test_pgconn.c - the options outboxd adds to every connection (pgconn.h):
 * TCP keepalives and tcp_user_timeout by default, the same keyword in the
 * user's conninfo winning, replication=database only for a walsender. The
 * connections are started (PQconnectStartParams) towards a Unix socket
 * directory that does not exist and read back with PQconninfo(): no server.
 * With [postgres] auth = aws_rds_iam, PQpass() shows the token libpq took
 * from the password file outboxd handed it.
 */
#include <check.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#include "pgconn.h"

#define NO_SERVER "host=/nonexistent-outboxd-test-dir port=1 user=u dbname=d"

/* The value libpq settled on for keyword in conn ("" when unset); copied
 * into out. */
static const char *option(PGconn *conn, const char *keyword, char *out, size_t outlen)
{
    PQconninfoOption *opts = PQconninfo(conn);
    ck_assert_ptr_nonnull(opts);
    out[0] = '\0';
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (strcmp(o->keyword, keyword) == 0 && o->val) snprintf(out, outlen, "%s", o->val);
    PQconninfoFree(opts);
    return out;
}

static PGconn *start(const char *conninfo, bool replication)
{
    struct pgconn_opts o = {.conninfo = conninfo, .app_name = "outboxd-test", .timeout_s = 3,
                            .replication = replication};
    PGconn *c = pgconn_start(&o);
    ck_assert_ptr_nonnull(c);
    return c;
}

START_TEST(test_tcp_defaults)
{
    char v[64];
    PGconn *c = start(NO_SERVER, false);
    ck_assert_str_eq(option(c, "keepalives", v, sizeof(v)), "1");
    ck_assert_str_eq(option(c, "keepalives_idle", v, sizeof(v)), "10");
    ck_assert_str_eq(option(c, "keepalives_interval", v, sizeof(v)), "5");
    ck_assert_str_eq(option(c, "keepalives_count", v, sizeof(v)), "2");
    ck_assert_str_eq(option(c, "tcp_user_timeout", v, sizeof(v)), PGCONN_TCP_USER_TIMEOUT_MS_STR);
    ck_assert_str_eq(option(c, "connect_timeout", v, sizeof(v)), "3");
    ck_assert_str_eq(option(c, "fallback_application_name", v, sizeof(v)), "outboxd-test");
    ck_assert_str_eq(option(c, "replication", v, sizeof(v)), "");
    ck_assert_str_eq(option(c, "dbname", v, sizeof(v)), "d");
    PQfinish(c);
}
END_TEST

START_TEST(test_conninfo_wins)
{
    char v[64];
    PGconn *c = start(NO_SERVER " tcp_user_timeout=5000 keepalives_idle=30 connect_timeout=7",
                      false);
    ck_assert_str_eq(option(c, "tcp_user_timeout", v, sizeof(v)), "5000");
    ck_assert_str_eq(option(c, "keepalives_idle", v, sizeof(v)), "30");
    ck_assert_str_eq(option(c, "connect_timeout", v, sizeof(v)), "7");
    ck_assert_str_eq(option(c, "keepalives_interval", v, sizeof(v)), "5"); /* not given */
    PQfinish(c);
    /* The URI form too. */
    c = start("postgresql://u@%2Fnonexistent-outboxd-test-dir:1/d?tcp_user_timeout=0", false);
    ck_assert_str_eq(option(c, "tcp_user_timeout", v, sizeof(v)), "0");
    ck_assert_str_eq(option(c, "keepalives", v, sizeof(v)), "1");
    PQfinish(c);
}
END_TEST

START_TEST(test_replication)
{
    char v[64];
    PGconn *c = start(NO_SERVER, true);
    ck_assert_str_eq(option(c, "replication", v, sizeof(v)), "database");
    ck_assert_str_eq(option(c, "tcp_user_timeout", v, sizeof(v)), PGCONN_TCP_USER_TIMEOUT_MS_STR);
    PQfinish(c);
}
END_TEST

/* The AWS environment of the chain's first source, nothing else of it. */
static void aws_env(const char *akid)
{
    if (akid) {
        setenv("AWS_ACCESS_KEY_ID", akid, 1);
        setenv("AWS_SECRET_ACCESS_KEY", "test-secret", 1);
    } else {
        unsetenv("AWS_ACCESS_KEY_ID");
        unsetenv("AWS_SECRET_ACCESS_KEY");
    }
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
    unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    unsetenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    unsetenv("AWS_DEFAULT_REGION");
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent-outboxd-test/credentials", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent-outboxd-test/config", 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    setenv("AWS_REGION", "eu-west-1", 1);
    unsetenv("PGPASSWORD");
    unsetenv("PGPASSFILE");
    unsetenv("PGPORT");
}

/* [postgres] auth = aws_rds_iam: each server of a multi-host conninfo gets
 * the token signed for its own name and port (libpq tried both: PQpass()
 * is the last one's), for the conninfo's user; the memory file is closed
 * once libpq has read it; the source is said for check. */
START_TEST(test_rds_iam_token_per_server)
{
    char v[64];
    aws_env("AKIDPGCONNTEST");
    ck_assert_int_eq(pgconn_set_auth(PG_AUTH_AWS_RDS_IAM, &(struct aws_settings){0}), 0);
    PGconn *c = start("host=/nonexistent-outboxd-a,/nonexistent-outboxd-b port=1,2 user=u "
                      "dbname=d",
                      true);
    const char *pw = PQpass(c);
    ck_assert_msg(strncmp(pw, "/nonexistent-outboxd-b:2/?Action=connect&DBUser=u&", 50) == 0,
                  "password: %.60s", pw);
    ck_assert_ptr_nonnull(strstr(pw, "X-Amz-Credential=AKIDPGCONNTEST%2F"));
    ck_assert_ptr_nonnull(strstr(pw, "%2Feu-west-1%2Frds-db%2Faws4_request"));
    option(c, "passfile", v, sizeof(v));
    ck_assert_msg(strncmp(v, "/proc/self/fd/", 14) == 0, "passfile %s", v);
    ck_assert_int_eq(fcntl(atoi(v + 14), F_GETFD), -1); /* closed: the token is gone */
    ck_assert_str_eq(option(c, "replication", v, sizeof(v)), "database");
    PQfinish(c);
    c = start("host=/nonexistent-outboxd-a port=1 user=u dbname=d", false);
    ck_assert(strncmp(PQpass(c), "/nonexistent-outboxd-a:1/?Action=connect&DBUser=u&", 50) == 0);
    PQfinish(c);
    ck_assert_str_eq(pgconn_auth_said(), "credentials from environment, region eu-west-1, a "
                                         "token for /nonexistent-outboxd-a:1 as user \"u\"");
    /* one server picked out of the list (check's standbys) */
    struct pghost h = {.host = "/nonexistent-outboxd-b", .port = "2"};
    c = pgconn_start(&(struct pgconn_opts){.conninfo = "host=/nonexistent-outboxd-a,"
                                                       "/nonexistent-outboxd-b port=1,2 user=u",
                                           .server = &h});
    ck_assert(strncmp(PQpass(c), "/nonexistent-outboxd-b:2/?Action=connect&DBUser=u&", 50) == 0);
    ck_assert_str_eq(option(c, "target_session_attrs", v, sizeof(v)), "any");
    PQfinish(c);
    ck_assert_int_eq(pgconn_set_auth(PG_AUTH_PASSWORD, NULL), 0);
    c = start(NO_SERVER, false); /* password: libpq's own sources again */
    ck_assert_ptr_null(strstr(PQpass(c), "Action=connect"));
    PQfinish(c);
}
END_TEST

/* No token can be made: no connection is started, and pgconn_error()
 * says why (the relay retries it; check prints it). */
START_TEST(test_rds_iam_no_token)
{
    aws_env(NULL);
    setenv("HOME", "/nonexistent-outboxd-test", 1);
    ck_assert_int_eq(pgconn_set_auth(PG_AUTH_AWS_RDS_IAM, &(struct aws_settings){0}), 0);
    struct pgconn_opts o = {.conninfo = NO_SERVER};
    ck_assert_ptr_null(pgconn_start(&o));
    ck_assert_msg(strstr(pgconn_error(NULL), "[postgres] auth = aws_rds_iam: no AWS credentials"),
                  "%s", pgconn_error(NULL));
    ck_assert_ptr_null(pgconn_connect(&o));
    char msg[1024];
    pgconn_message(NULL, NULL, NO_SERVER, "cannot connect to postgres", msg, sizeof(msg));
    ck_assert_ptr_nonnull(strstr(msg, "cannot connect to postgres: [postgres] auth = "));
    aws_env("AKIDPGCONNTEST");
    unsetenv("AWS_REGION");
    ck_assert_int_eq(pgconn_set_auth(PG_AUTH_AWS_RDS_IAM, &(struct aws_settings){0}), 0);
    ck_assert_ptr_null(pgconn_start(&o));
    ck_assert_ptr_nonnull(strstr(pgconn_error(NULL), "no AWS region"));
    /* [aws] region, when set, is the region */
    ck_assert_int_eq(
        pgconn_set_auth(PG_AUTH_AWS_RDS_IAM, &(struct aws_settings){.region = "ap-south-1"}), 0);
    PGconn *c = pgconn_start(&o);
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(strstr(PQpass(c), "%2Fap-south-1%2Frds-db%2F"));
    PQfinish(c);
    ck_assert_int_eq(pgconn_set_auth(PG_AUTH_PASSWORD, NULL), 0);
}
END_TEST

static Suite *pgconn_suite(void)
{
    Suite *s = suite_create("pgconn");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, test_tcp_defaults);
    tcase_add_test(tc, test_conninfo_wins);
    tcase_add_test(tc, test_replication);
    tcase_add_test(tc, test_rds_iam_token_per_server);
    tcase_add_test(tc, test_rds_iam_no_token);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pgconn_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
