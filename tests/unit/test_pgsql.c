/*
 * test_pgsql.c - the SQL helpers of include/pg/pgsql.h without a server:
 * identifiers and literals quoted, array parameters in their text form
 * (the event_ids `outboxd requeue` and `republish --event-id` send, the polling
 * relay's outcome parameters). pgsql_exec() runs against a server in the
 * end-to-end tests (polling_*, requeue, republish, slot_repair).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgsql.h"

/* Checks a quoted string against want and frees it. */
static void expect_quoted(char *got, const char *want)
{
    ck_assert_ptr_nonnull(got);
    ck_assert_str_eq(got, want);
    free(got);
}

START_TEST(test_quote_ident)
{
    expect_quoted(pgsql_quote_ident("outbox_events"), "\"outbox_events\"");
    expect_quoted(pgsql_quote_ident("we\"ird Name"), "\"we\"\"ird Name\"");
    expect_quoted(pgsql_quote_ident(""), "\"\"");
}
END_TEST

START_TEST(test_quote_qualified)
{
    expect_quoted(pgsql_quote_qualified("public", "outbox_events"),
                  "\"public\".\"outbox_events\"");
    expect_quoted(pgsql_quote_qualified("my.schema", "t\"x"), "\"my.schema\".\"t\"\"x\"");
}
END_TEST

START_TEST(test_quote_literal)
{
    expect_quoted(pgsql_quote_literal("\"public\".\"outbox\""), "'\"public\".\"outbox\"'");
    expect_quoted(pgsql_quote_literal("it's"), "'it''s'");
    /* standard_conforming_strings: a backslash is an ordinary character */
    expect_quoted(pgsql_quote_literal("a\\b"), "'a\\b'");
    expect_quoted(pgsql_quote_literal(""), "''");
    /* a wal2json add-tables value (issue 53): escaped with backslashes for
     * wal2json, then a literal of START_REPLICATION, whose grammar has no
     * E'...' form (PQescapeLiteral's for a backslash: a syntax error) */
    expect_quoted(pgsql_quote_literal("Sales\\ EU.Outbox\\ Events\\,\\ v2,x\\'s.a\\\\b"),
                  "'Sales\\ EU.Outbox\\ Events\\,\\ v2,x\\''s.a\\\\b'");
}
END_TEST

START_TEST(test_array_literal)
{
    struct pgsql_array a = {0};
    ck_assert_str_eq(pgsql_array_text(&a), "{}");
    pgsql_array_free(&a);
    const char *ids[] = {"id-1", "a\"b", "c\\d", NULL, ""};
    for (size_t i = 0; i < 5; i++) pgsql_array_add(&a, ids[i]);
    ck_assert_int_eq(a.n, 5);
    ck_assert_str_eq(pgsql_array_text(&a), "{\"id-1\",\"a\\\"b\",\"c\\\\d\",NULL,\"\"}");
    pgsql_array_free(&a);
    ck_assert_ptr_null(a.s);
}
END_TEST

START_TEST(test_array_grows)
{
    struct pgsql_array a = {0};
    char want[8000] = "{";
    for (int i = 0; i < 500; i++) {
        char v[16];
        snprintf(v, sizeof(v), "e%d", i);
        pgsql_array_add(&a, v);
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s\"%s\"", i ? "," : "",
                 v);
    }
    strcat(want, "}");
    ck_assert_str_eq(pgsql_array_text(&a), want);
    pgsql_array_free(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pgsql");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_quote_ident);
    tcase_add_test(tc, test_quote_qualified);
    tcase_add_test(tc, test_quote_literal);
    tcase_add_test(tc, test_array_literal);
    tcase_add_test(tc, test_array_grows);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
