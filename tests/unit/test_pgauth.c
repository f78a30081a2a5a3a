/*
 * test_pgauth.c - which server, port and user each RDS IAM token is made
 * for, as libpq pairs a conninfo's servers, and the password file lines
 * that hand them to libpq (include/pg/pgauth.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pgauth.h"

static struct pgauth_target t[PGHOSTS_MAX];
static char err[256];

static void clear_env(void)
{
    unsetenv("PGHOST");
    unsetenv("PGHOSTADDR");
    unsetenv("PGPORT");
    unsetenv("PGUSER");
}

START_TEST(test_one_server)
{
    clear_env();
    ck_assert_int_eq(pgauth_targets("host=db.example port=6432 user=outboxd dbname=app", NULL,
                                    "root", t, PGHOSTS_MAX, err, sizeof(err)),
                     1);
    ck_assert_str_eq(t[0].host, "db.example");
    ck_assert_str_eq(t[0].port, "6432");
    ck_assert_str_eq(t[0].user, "outboxd");
}
END_TEST

/* What the conninfo leaves out, libpq takes from the environment, then
 * its defaults: 5432, the operating system user. */
START_TEST(test_defaults_and_environment)
{
    clear_env();
    ck_assert_int_eq(pgauth_targets("host=db.example", NULL, "svc", t, PGHOSTS_MAX, err,
                                    sizeof(err)),
                     1);
    ck_assert_str_eq(t[0].port, "5432");
    ck_assert_str_eq(t[0].user, "svc");
    setenv("PGPORT", "5444", 1);
    setenv("PGUSER", "envuser", 1);
    setenv("PGHOST", "env.example", 1);
    ck_assert_int_eq(pgauth_targets("dbname=app", NULL, "svc", t, PGHOSTS_MAX, err,
                                    sizeof(err)),
                     1);
    ck_assert_str_eq(t[0].host, "env.example");
    ck_assert_str_eq(t[0].port, "5444");
    ck_assert_str_eq(t[0].user, "envuser");
    /* a bare database name is no conninfo (libpq does not expand it) */
    ck_assert_int_eq(pgauth_targets("app", NULL, "svc", t, PGHOSTS_MAX, err, sizeof(err)), 1);
    ck_assert_str_eq(t[0].host, "env.example");
    clear_env();
    /* nothing at all: libpq's default socket, which its file calls localhost */
    ck_assert_int_eq(pgauth_targets("", NULL, "svc", t, PGHOSTS_MAX, err, sizeof(err)), 1);
    ck_assert_str_eq(t[0].host, "localhost");
}
END_TEST

/* Each server of a multi-host conninfo gets its own token: host (not the
 * hostaddr, which only says where to connect) and its own port. */
START_TEST(test_multi_host)
{
    clear_env();
    ck_assert_int_eq(pgauth_targets("postgresql://u@a.example:5432,b.example:5433/app"
                                    "?target_session_attrs=read-write",
                                    NULL, "svc", t, PGHOSTS_MAX, err, sizeof(err)),
                     2);
    ck_assert_str_eq(t[0].host, "a.example");
    ck_assert_str_eq(t[0].port, "5432");
    ck_assert_str_eq(t[1].host, "b.example");
    ck_assert_str_eq(t[1].port, "5433");
    ck_assert_str_eq(t[1].user, "u");
    ck_assert_int_eq(pgauth_targets("host=a.example,b.example hostaddr=10.0.0.1,10.0.0.2 "
                                    "user=u",
                                    NULL, "svc", t, PGHOSTS_MAX, err, sizeof(err)),
                     2);
    ck_assert_str_eq(t[1].host, "b.example");
    ck_assert_str_eq(t[1].port, "5432");
    ck_assert_int_eq(pgauth_targets("hostaddr=10.0.0.9 user=u", NULL, "svc", t, PGHOSTS_MAX,
                                    err, sizeof(err)),
                     1);
    ck_assert_str_eq(t[0].host, "10.0.0.9");
    /* lists that do not pair, and a conninfo that does not parse */
    ck_assert_int_eq(pgauth_targets("host=a,b port=1,2,3", NULL, "svc", t, PGHOSTS_MAX, err,
                                    sizeof(err)),
                     -1);
    ck_assert_int_eq(pgauth_targets("host=a port", NULL, "svc", t, PGHOSTS_MAX, err,
                                    sizeof(err)),
                     -1);
    ck_assert_int_eq(pgauth_targets("host=a,b,c", NULL, "svc", t, 2, err, sizeof(err)), -1);
}
END_TEST

/* check's connection to one standby: only that server. */
START_TEST(test_only_one_server)
{
    clear_env();
    struct pghost h = {.host = "b.example", .port = ""};
    ck_assert_int_eq(pgauth_targets("host=a.example,b.example port=5432 user=u", &h, "svc", t,
                                    PGHOSTS_MAX, err, sizeof(err)),
                     1);
    ck_assert_str_eq(t[0].host, "b.example");
    ck_assert_str_eq(t[0].port, "5432"); /* libpq's default: the server gave none */
    ck_assert_str_eq(t[0].user, "u");
}
END_TEST

/* A token holds ':' (HOST:PORT/?...) and percent signs; the password file
 * escapes ':' and '\' with '\', in every field. */
START_TEST(test_passfile_line)
{
    struct pgauth_target a = {.host = "db.example", .port = "5432", .user = "u"};
    char *l = pgauth_passfile_line(&a, "db.example:5432/?Action=connect&X=a%2Fb");
    ck_assert_str_eq(l, "db.example:5432:*:*:db.example\\:5432/?Action=connect&X=a%2Fb\n");
    free(l);
    struct pgauth_target v6 = {.host = "fe80::1", .port = "5432"};
    l = pgauth_passfile_line(&v6, "p\\q");
    ck_assert_str_eq(l, "fe80\\:\\:1:5432:*:*:p\\\\q\n");
    free(l);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pgauth");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_one_server);
    tcase_add_test(tc, test_defaults_and_environment);
    tcase_add_test(tc, test_multi_host);
    tcase_add_test(tc, test_only_one_server);
    tcase_add_test(tc, test_passfile_line);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
