/*
 * test_str.c - the string helpers (include/base/str.h): str_printf and the
 * did-you-mean of mistyped names (optimal string alignment distance).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "str.h"

START_TEST(test_printf)
{
    char *s = str_printf("%s-%d", "slot", 7);
    ck_assert_str_eq(s, "slot-7");
    free(s);
    s = str_printf("%s", "");
    ck_assert_str_eq(s, "");
    free(s);
}
END_TEST

/* ---- edit distance and suggestions ---- */

static const struct {
    const char *a, *b;
    size_t d;
} distances[] = {
    {"", "", 0},         {"slot", "slot", 0},
    {"slto", "slot", 1}, /* transposition */
    {"slo", "slot", 1},  {"sloot", "slot", 1},
    {"slit", "slot", 1}, {"", "abc", 3},
    {"abc", "", 3},      {"kitten", "sitting", 3},
    {"ca", "abc", 3}, /* OSA: no edit of a transposed pair */
    {"Slot", "slot", 1}, {"create-slot", "create_slot", 1},
};

START_TEST(test_edit_distance)
{
    ck_assert_uint_eq(str_edit_distance(distances[_i].a, distances[_i].b), distances[_i].d);
    ck_assert_uint_eq(str_edit_distance(distances[_i].b, distances[_i].a), distances[_i].d);
}
END_TEST

START_TEST(test_edit_distance_long)
{
    char a[200], b[200];
    memset(a, 'a', sizeof(a) - 1);
    a[sizeof(a) - 1] = '\0';
    memset(b, 'a', 10);
    b[10] = '\0';
    /* beyond the table: the longer length, no overflow */
    ck_assert_uint_eq(str_edit_distance(a, b), sizeof(a) - 1);
}
END_TEST

static const char *const postgres_keys[] = {
    "conninfo",           "slot",         "publication",  "plugin", "create_slot",
    "status_interval_ms", "retry_min_ms", "retry_max_ms",
};
#define NPG (sizeof(postgres_keys) / sizeof(postgres_keys[0]))

START_TEST(test_suggest)
{
    ck_assert_pstr_eq(str_suggest("slto", postgres_keys, NPG), "slot");
    ck_assert_pstr_eq(str_suggest("slots", postgres_keys, NPG), "slot");
    ck_assert_pstr_eq(str_suggest("conninf", postgres_keys, NPG), "conninfo");
    ck_assert_pstr_eq(str_suggest("publicaton", postgres_keys, NPG), "publication");
    ck_assert_pstr_eq(str_suggest("create-slot", postgres_keys, NPG), "create_slot");
    ck_assert_pstr_eq(str_suggest("retry_max", postgres_keys, NPG), "retry_max_ms");
    ck_assert_pstr_eq(str_suggest("status_interval", postgres_keys, NPG),
                      "status_interval_ms");
    ck_assert_pstr_eq(str_suggest("plugni", postgres_keys, NPG), "plugin");
}
END_TEST

START_TEST(test_suggest_none)
{
    /* too far from everything: no guess */
    ck_assert_ptr_null(str_suggest("bogus_key", postgres_keys, NPG));
    ck_assert_ptr_null(str_suggest("host", postgres_keys, NPG));
    ck_assert_ptr_null(str_suggest("", postgres_keys, NPG));
    ck_assert_ptr_null(str_suggest("slot", postgres_keys, 0));
    /* short words allow one edit only */
    static const char *const file[] = {"file"};
    ck_assert_ptr_null(str_suggest("path", file, 1));
    ck_assert_ptr_null(str_suggest("fl", file, 1));
    ck_assert_pstr_eq(str_suggest("fiel", file, 1), "file");
}
END_TEST

START_TEST(test_suggest_tie_first)
{
    static const char *const c[] = {"abcd", "abce", "abcf"};
    ck_assert_pstr_eq(str_suggest("abcx", c, 3), "abcd");
    static const char *const d[] = {"far-away-word", "abce"};
    ck_assert_pstr_eq(str_suggest("abcx", d, 2), "abce");
}
END_TEST

static Suite *str_suite(void)
{
    Suite *s = suite_create("str");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_printf);
    tcase_add_loop_test(tc, test_edit_distance, 0,
                        (int)(sizeof(distances) / sizeof(distances[0])));
    tcase_add_test(tc, test_edit_distance_long);
    tcase_add_test(tc, test_suggest);
    tcase_add_test(tc, test_suggest_none);
    tcase_add_test(tc, test_suggest_tie_first);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(str_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
