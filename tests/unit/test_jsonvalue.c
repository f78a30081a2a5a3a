/*
 * test_jsonvalue.c - the JsonConverter form of the value
 * (include/message/jsonvalue.h): Jackson's string escapes, typed fields.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "jsonvalue.h"

static struct jbuf B;

static void teardown(void)
{
    free(B.data);
    memset(&B, 0, sizeof(B));
}

#define BUF_EQ(want)                                                                    \
    do {                                                                                \
        const char *_w = (want);                                                        \
        ck_assert_msg(B.len == strlen(_w) && memcmp(B.data, _w, B.len) == 0,            \
                      "got \"%.*s\", want \"%s\"", (int)B.len, B.data, _w);             \
        B.len = 0;                                                                      \
    } while (0)

START_TEST(test_escapes)
{
    static const char in[] = "a\"b\\c/d\b\t\n\f\r\x01\x1f\x7f é€😀";
    ck_assert_int_eq(jsonvalue_string(&B, in, sizeof(in) - 1), 0);
    BUF_EQ("\"a\\\"b\\\\c/d\\b\\t\\n\\f\\r\\u0001\\u001F\x7f é€\\uD83D\\uDE00\"");
    /* beyond the BMP: a surrogate pair, as Jackson writes it; a broken
     * 4-byte sequence goes through as it is */
    ck_assert_int_eq(jsonvalue_string(&B, "a\xf0\x9f\x9a\x80" "b\xf0\x9f", 8), 0);
    BUF_EQ("\"a\\uD83D\\uDE80b\xf0\x9f\"");
    ck_assert_int_eq(jsonvalue_string(&B, "\xf4\x8f\xbf\xbf", 4), 0); /* U+10FFFF */
    BUF_EQ("\"\\uDBFF\\uDFFF\"");
    ck_assert_int_eq(jsonvalue_string(&B, "", 0), 0);
    BUF_EQ("\"\"");
    /* a NUL byte inside the text is escaped, not the end */
    ck_assert_int_eq(jsonvalue_string(&B, "x\0y", 3), 0);
    BUF_EQ("\"x\\u0000y\"");
}
END_TEST

START_TEST(test_fields)
{
    ck_assert_int_eq(jsonvalue_kind(23), JV_NUMBER);
    ck_assert_int_eq(jsonvalue_kind(20), JV_NUMBER);
    ck_assert_int_eq(jsonvalue_kind(21), JV_NUMBER);
    ck_assert_int_eq(jsonvalue_kind(16), JV_BOOL);
    ck_assert_int_eq(jsonvalue_kind(25), JV_STRING);
    ck_assert_int_eq(jsonvalue_kind(1700), JV_STRING); /* numeric: Debezium's is not a number */
    ck_assert_int_eq(jsonvalue_field(&B, JV_NUMBER, false, "-12", 3), 0);
    BUF_EQ("-12");
    ck_assert_int_eq(jsonvalue_field(&B, JV_NUMBER, false, "1e3", 3), 0);
    BUF_EQ("\"1e3\"");
    ck_assert_int_eq(jsonvalue_field(&B, JV_NUMBER, false, "-", 1), 0);
    BUF_EQ("\"-\"");
    ck_assert_int_eq(jsonvalue_field(&B, JV_BOOL, false, "f", 1), 0);
    BUF_EQ("false");
    ck_assert_int_eq(jsonvalue_field(&B, JV_BOOL, false, "true", 4), 0);
    BUF_EQ("\"true\"");
    ck_assert_int_eq(jsonvalue_field(&B, JV_STRING, true, NULL, 0), 0);
    BUF_EQ("null");
    ck_assert_int_eq(jsonvalue_field(&B, JV_STRING, false, "", 0), 0);
    BUF_EQ("\"\"");
}
END_TEST

/* A value far beyond the first allocation grows the buffer. */
START_TEST(test_grows)
{
    size_t n = 1 << 20;
    char *big = malloc(n);
    ck_assert_ptr_nonnull(big);
    memset(big, '"', n);
    ck_assert_int_eq(jsonvalue_string(&B, big, n), 0);
    ck_assert_uint_eq(B.len, 2 * n + 2);
    ck_assert(B.data[0] == '"' && B.data[1] == '\\' && B.data[2] == '"');
    free(big);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("jsonvalue");
    TCase *tc = tcase_create("json");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, test_escapes);
    tcase_add_test(tc, test_fields);
    tcase_add_test(tc, test_grows);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
