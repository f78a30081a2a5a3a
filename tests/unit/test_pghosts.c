/*
 * test_pghosts.c - the servers of a multi-host conninfo (include/pg/pghosts.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pghosts.h"

static struct pghost h[PGHOSTS_MAX];
static char err[256], label[300];

START_TEST(test_one_host)
{
    ck_assert_int_eq(pghosts_split("db", NULL, "5432", h, PGHOSTS_MAX, err, sizeof(err)), 1);
    ck_assert_str_eq(pghost_label(&h[0], label, sizeof(label)), "db:5432");
    ck_assert_str_eq(h[0].hostaddr, "");
}
END_TEST

START_TEST(test_nothing_set_is_the_default)
{
    ck_assert_int_eq(pghosts_split(NULL, "", NULL, h, PGHOSTS_MAX, err, sizeof(err)), 1);
    ck_assert_str_eq(pghost_label(&h[0], label, sizeof(label)), "default:default port");
}
END_TEST

START_TEST(test_hosts_and_ports_pair)
{
    ck_assert_int_eq(pghosts_split("a,b,c", NULL, "1,2,3", h, PGHOSTS_MAX, err, sizeof(err)), 3);
    ck_assert_str_eq(pghost_label(&h[0], label, sizeof(label)), "a:1");
    ck_assert_str_eq(pghost_label(&h[1], label, sizeof(label)), "b:2");
    ck_assert_str_eq(pghost_label(&h[2], label, sizeof(label)), "c:3");
}
END_TEST

START_TEST(test_one_port_for_all)
{
    ck_assert_int_eq(pghosts_split("a,b", NULL, "6432", h, PGHOSTS_MAX, err, sizeof(err)), 2);
    ck_assert_str_eq(h[0].port, "6432");
    ck_assert_str_eq(h[1].port, "6432");
    /* and none at all */
    ck_assert_int_eq(pghosts_split("a,b", NULL, NULL, h, PGHOSTS_MAX, err, sizeof(err)), 2);
    ck_assert_str_eq(pghost_label(&h[1], label, sizeof(label)), "b:default port");
}
END_TEST

START_TEST(test_same_host_two_ports)
{
    ck_assert_int_eq(pghosts_split("127.0.0.1,127.0.0.1", NULL, "5432,5433", h, PGHOSTS_MAX,
                                   err, sizeof(err)),
                     2);
    ck_assert_str_eq(pghost_label(&h[1], label, sizeof(label)), "127.0.0.1:5433");
}
END_TEST

START_TEST(test_hostaddr)
{
    ck_assert_int_eq(pghosts_split("a,b", "10.0.0.1,10.0.0.2", "1", h, PGHOSTS_MAX, err,
                                   sizeof(err)),
                     2);
    ck_assert_str_eq(h[1].host, "b");
    ck_assert_str_eq(h[1].hostaddr, "10.0.0.2");
    ck_assert_int_eq(pghosts_split(NULL, "10.0.0.1,10.0.0.2", NULL, h, PGHOSTS_MAX, err,
                                   sizeof(err)),
                     2);
    ck_assert_str_eq(pghost_label(&h[1], label, sizeof(label)), "10.0.0.2:default port");
    ck_assert_int_eq(pghosts_split("a,b,c", "10.0.0.1,10.0.0.2", NULL, h, PGHOSTS_MAX, err,
                                   sizeof(err)),
                     -1);
}
END_TEST

START_TEST(test_ports_do_not_pair)
{
    ck_assert_int_eq(pghosts_split("a,b,c", NULL, "1,2", h, PGHOSTS_MAX, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "2 ports for 3 servers"));
}
END_TEST

START_TEST(test_too_many)
{
    ck_assert_int_eq(pghosts_split("a,b,c", NULL, NULL, h, 2, err, sizeof(err)), -1);
}
END_TEST

START_TEST(test_empty_entries_kept)
{
    /* libpq reads an empty entry as the default (a Unix socket / 5432) */
    ck_assert_int_eq(pghosts_split("a,,c", NULL, "1,,3", h, PGHOSTS_MAX, err, sizeof(err)), 3);
    ck_assert_str_eq(h[1].host, "");
    ck_assert_str_eq(h[1].port, "");
    ck_assert_str_eq(h[2].host, "c");
    ck_assert_str_eq(h[2].port, "3");
}
END_TEST

START_TEST(test_local_hosts)
{
    /* nothing set: libpq's default Unix socket */
    ck_assert_int_eq(pghosts_split(NULL, NULL, NULL, h, PGHOSTS_MAX, err, sizeof(err)), 1);
    ck_assert(pghost_is_local(&h[0]));
    const char *local[] = {"/var/run/postgresql", "@abstract", "localhost", "127.0.0.1",
                           "127.1.2.3", "::1"};
    for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
        ck_assert_int_eq(
            pghosts_split(local[i], NULL, NULL, h, PGHOSTS_MAX, err, sizeof(err)), 1);
        ck_assert_msg(pghost_is_local(&h[0]), "%s", local[i]);
    }
    const char *remote[] = {"db.example", "10.0.0.5",          "128.0.0.1",
                            "::2",        "localhost.example", "fe80::1"};
    for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++) {
        ck_assert_int_eq(
            pghosts_split(remote[i], NULL, NULL, h, PGHOSTS_MAX, err, sizeof(err)), 1);
        ck_assert_msg(!pghost_is_local(&h[0]), "%s", remote[i]);
    }
    /* a name is another machine even when its hostaddr is loopback (the
     * name is what verify-full checks); a loopback name with a remote
     * hostaddr goes to the remote address */
    ck_assert_int_eq(pghosts_split("db.example,localhost", "127.0.0.1,10.0.0.5", NULL, h,
                                   PGHOSTS_MAX, err, sizeof(err)),
                     2);
    ck_assert(!pghost_is_local(&h[0]));
    ck_assert(!pghost_is_local(&h[1]));
    ck_assert_int_eq(
        pghosts_split(NULL, "127.0.0.1", NULL, h, PGHOSTS_MAX, err, sizeof(err)), 1);
    ck_assert(pghost_is_local(&h[0]));
}
END_TEST

START_TEST(test_sslmode_verifies)
{
    ck_assert(pghosts_sslmode_verifies("verify-full"));
    ck_assert(pghosts_sslmode_verifies("verify-ca"));
    const char *weak[] = {"disable", "allow", "prefer", "require", "", "verify"};
    for (size_t i = 0; i < sizeof(weak) / sizeof(weak[0]); i++)
        ck_assert_msg(!pghosts_sslmode_verifies(weak[i]), "%s", weak[i]);
    ck_assert(!pghosts_sslmode_verifies(NULL));
}
END_TEST

static Suite *pghosts_suite(void)
{
    Suite *s = suite_create("pghosts");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_one_host);
    tcase_add_test(tc, test_local_hosts);
    tcase_add_test(tc, test_sslmode_verifies);
    tcase_add_test(tc, test_nothing_set_is_the_default);
    tcase_add_test(tc, test_hosts_and_ports_pair);
    tcase_add_test(tc, test_one_port_for_all);
    tcase_add_test(tc, test_same_host_two_ports);
    tcase_add_test(tc, test_hostaddr);
    tcase_add_test(tc, test_ports_do_not_pair);
    tcase_add_test(tc, test_too_many);
    tcase_add_test(tc, test_empty_entries_kept);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(pghosts_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
