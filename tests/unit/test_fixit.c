/*
 * test_fixit.c - the fix-it advice shared by `outboxd check` and the daemon
 * (include/base/fixit.h): the exact words, which tests/e2e/check.sh and the
 * daemon's log lines expect.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fixit.h"

START_TEST(test_publication)
{
    char b[256];
    ck_assert_str_eq(
        fixit_create_publication(b, sizeof(b), "nothere", "public.outbox_events"),
        "create it with CREATE PUBLICATION nothere FOR TABLE public.outbox_events "
        "WITH (publish = 'insert') (see sql/outbox.sql)");
    ck_assert_str_eq(fixit_publish_inserts(b, sizeof(b), "update_pub"),
                     "ALTER PUBLICATION update_pub SET (publish = 'insert')");
    ck_assert_str_eq(fixit_add_table(b, sizeof(b), "\"Pub\"", "s.\"T\""),
                     "ALTER PUBLICATION \"Pub\" ADD TABLE s.\"T\"");
}
END_TEST

START_TEST(test_slot_and_plugin)
{
    char b[256];
    ck_assert_str_eq(fixit_create_slot(b, sizeof(b), "other", "pgoutput"),
                     "create it with SELECT pg_create_logical_replication_slot('other', "
                     "'pgoutput')");
    ck_assert_str_eq(fixit_install_plugin(b, sizeof(b), "wal2json", 15),
                     "Debian: apt-get install postgresql-15-wal2json");
    ck_assert_str_eq(
        fixit_allow_plugin(),
        "run ALTER SYSTEM SET output_plugin_libraries = pgoutput, wal2json (an "
        "unquoted list), then reload the configuration");
}
END_TEST

START_TEST(test_truncates)
{
    char b[16];
    ck_assert_ptr_eq(fixit_add_table(b, sizeof(b), "p", "t"), b);
    ck_assert_uint_eq(strlen(b), sizeof(b) - 1);
    ck_assert_str_eq(b, "ALTER PUBLICATI");
}
END_TEST

static Suite *fixit_suite(void)
{
    Suite *s = suite_create("fixit");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_publication);
    tcase_add_test(tc, test_slot_and_plugin);
    tcase_add_test(tc, test_truncates);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(fixit_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
