/*
 * test_pgconn.c - the options outboxd adds to every connection (pgconn.h):
 * TCP keepalives and tcp_user_timeout by default, the same keyword in the
 * user's conninfo winning, replication=database only for a walsender. The
 * connections are started (PQconnectStartParams) towards a Unix socket
 * directory that does not exist and read back with PQconninfo(): no server.
 */
#include <check.h>
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

static Suite *pgconn_suite(void)
{
    Suite *s = suite_create("pgconn");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, test_tcp_defaults);
    tcase_add_test(tc, test_conninfo_wins);
    tcase_add_test(tc, test_replication);
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
