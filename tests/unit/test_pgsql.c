/*
 * test_pgsql.c - the SQL helpers of include/pgsql.h without a server:
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

START_TEST(test_quote_ident)
{
    char *q = pgsql_quote_ident("outbox_events");
    ck_assert_str_eq(q, "\"outbox_events\"");
    free(q);
    q = pgsql_quote_ident("we\"ird Name");
    ck_assert_str_eq(q, "\"we\"\"ird Name\"");
    free(q);
    q = pgsql_quote_ident("");
    ck_assert_str_eq(q, "\"\"");
    free(q);
}
END_TEST

START_TEST(test_quote_qualified)
{
    char *q = pgsql_quote_qualified("public", "outbox_events");
    ck_assert_str_eq(q, "\"public\".\"outbox_events\"");
    free(q);
    q = pgsql_quote_qualified("my.schema", "t\"x");
    ck_assert_str_eq(q, "\"my.schema\".\"t\"\"x\"");
    free(q);
}
END_TEST

START_TEST(test_quote_literal)
{
    char *q = pgsql_quote_literal("\"public\".\"outbox\"");
    ck_assert_str_eq(q, "'\"public\".\"outbox\"'");
    free(q);
    q = pgsql_quote_literal("it's");
    ck_assert_str_eq(q, "'it''s'");
    free(q);
    /* standard_conforming_strings: a backslash is an ordinary character */
    q = pgsql_quote_literal("a\\b");
    ck_assert_str_eq(q, "'a\\b'");
    free(q);
    q = pgsql_quote_literal("");
    ck_assert_str_eq(q, "''");
    free(q);
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
