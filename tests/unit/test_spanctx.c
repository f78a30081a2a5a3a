/*
 * test_spanctx.c - the tracing span-context column (include/message/spanctx.h):
 * java.util.Properties text as Properties.store() writes a W3C trace
 * context, into header names and values.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "spanctx.h"

static struct spanctx SC;
static char err[256];

static int parse(const char *text)
{
    err[0] = '\0';
    return spanctx_parse(text, strlen(text), &SC, err, sizeof(err));
}

#define ENTRY_EQ(i, n, v)                                                             \
    do {                                                                              \
        ck_assert_str_eq(SC.name[i], (n));                                            \
        ck_assert_str_eq(SC.value[i], (v));                                           \
        ck_assert_uint_eq(SC.value_len[i], strlen(v));                                \
    } while (0)

/* What Properties.store() writes: a date comment, then key=value lines,
 * '=' and ':' in values escaped. */
START_TEST(test_store_output)
{
    ck_assert_int_eq(parse("#Tue Dec 03 12:00:00 UTC 2026\n"
                           "traceparent=00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n"
                           "tracestate=rojo\\=00f067aa0ba902b7,congo\\=t61rcWkgMzE\n"),
                     0);
    ck_assert_int_eq(SC.n, 2);
    ENTRY_EQ(0, "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    ENTRY_EQ(1, "tracestate", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
}
END_TEST

START_TEST(test_separators_blanks_comments)
{
    ck_assert_int_eq(parse("\r\n  ! a comment\r\n a : 1 \r\nb=\rc\\:d = x\\ty\\u0041\n"), 0);
    ck_assert_int_eq(SC.n, 3);
    ENTRY_EQ(0, "a", "1 "); /* trailing blanks belong to the value, as in Java */
    ENTRY_EQ(1, "b", "");
    ENTRY_EQ(2, "c:d", "x\tyA");
    ck_assert_int_eq(parse(""), 0);
    ck_assert_int_eq(SC.n, 0);
    ck_assert_int_eq(parse("# only a comment"), 0);
    ck_assert_int_eq(SC.n, 0);
}
END_TEST

START_TEST(test_refused)
{
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"traceparent", "not followed by '=' or ':'"},
        {"trace parent=1", "not followed by '=' or ':'"},
        {"=1", "empty key"},
        {"a=1\\\n  continued", "line continuation"},
        {"a=\\u00e9", "not a printable ASCII"},
        {"a=\\u0000", "not a printable ASCII"},
        {"a=\\u12", "4 hex digits"},
        {"a=1\nb=2\nc=3\nd=4\ne=5", "more than 4 entries"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_msg(parse(bad[i].text) == -1, "accepted: %s", bad[i].text);
        ck_assert_msg(strstr(err, bad[i].says), "%s: err \"%s\" lacks \"%s\"", bad[i].text, err,
                      bad[i].says);
    }
    char big[SPANCTX_BUF + 16];
    memset(big, 'x', sizeof(big) - 1);
    big[0] = 'k';
    big[1] = '=';
    big[sizeof(big) - 1] = '\0';
    ck_assert_int_eq(parse(big), -1);
    ck_assert_ptr_nonnull(strstr(err, "longer than"));
    /* not NUL-terminated input: only len bytes are read */
    ck_assert_int_eq(spanctx_parse("a=1b=2", 3, &SC, err, sizeof(err)), 0);
    ck_assert_int_eq(SC.n, 1);
    ENTRY_EQ(0, "a", "1");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("spanctx");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, test_store_output);
    tcase_add_test(tc, test_separators_blanks_comments);
    tcase_add_test(tc, test_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
