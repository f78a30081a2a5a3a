/*
 * test_grow.c - room in a malloc'd array, and the bounded text an HTTP
 * answer is read into (include/base/grow.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

START_TEST(test_grow_array)
{
    int *a = NULL;
    size_t cap = 0;
    ck_assert_int_eq(grow_array((void **)&a, &cap, 5, sizeof(int), 4), 0);
    ck_assert_uint_eq(cap, 8); /* first 4, doubled until 5 fit */
    ck_assert_int_eq(grow_array((void **)&a, &cap, 8, sizeof(int), 4), 0);
    ck_assert_uint_eq(cap, 8); /* fits: unchanged */
    ck_assert_int_eq(grow_array((void **)&a, &cap, 9, sizeof(int), 4), 0);
    ck_assert_uint_eq(cap, 16);
    free(a);
}
END_TEST

/* Appends up to max bytes, NUL-terminated; the byte that would pass max
 * refuses the append (too_large), and the text is kept as it was. */
START_TEST(test_growtext_bounded)
{
    struct growtext t = {.max = 8};
    ck_assert_int_eq(growtext_append(&t, "abc", 3), 0);
    ck_assert_int_eq(growtext_append(&t, "defg", 4), 0);
    ck_assert_str_eq(t.data, "abcdefg");
    ck_assert_uint_eq(t.len, 7);
    ck_assert_int_eq(growtext_append(&t, "h", 1), -1); /* 8 bytes and the NUL: 9 > 8 */
    ck_assert(t.too_large);
    ck_assert_str_eq(t.data, "abcdefg");
    free(t.data);
}
END_TEST

/* As libcurl's write callback: what it took, or 0 (which ends the
 * transfer) once the answer is too large. */
START_TEST(test_growtext_curl_write)
{
    struct growtext t = {.max = 10};
    char chunk[4] = {'x', 'y', 'z', 'w'};
    ck_assert_uint_eq(growtext_curl_write(chunk, 2, 2, &t), 4);
    ck_assert_uint_eq(growtext_curl_write(chunk, 1, 4, &t), 4);
    ck_assert_uint_eq(growtext_curl_write(chunk, 1, 4, &t), 0);
    ck_assert(t.too_large);
    ck_assert_uint_eq(t.len, 8);
    free(t.data);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("grow");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_grow_array);
    tcase_add_test(tc, test_growtext_bounded);
    tcase_add_test(tc, test_growtext_curl_write);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
