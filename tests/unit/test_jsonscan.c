/*
 * test_jsonscan.c - the JSON scanner (src/decode/jsonscan.c) on its own: valid
 * and invalid strings, escapes, surrogates (lone, paired, reversed),
 * control bytes and UTF-8, numbers, literals, structure, nesting limits,
 * duplicate keys, truncated input, the token layout and key interning.
 *
 * Each input is copied into a heap block of exactly its length, so
 * valgrind (memcheck.test_jsonscan) sees any read past its end.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonscan.h"

static struct json_scanner *js;
static const struct json_tok *toks;
static char err[JSON_ERRLEN];

/* Interns "a" as 1 and "bb" as 2 (and "big" as JSON_MAX_KEY_ID). */
static int test_key_id(const char *s, size_t n)
{
    if (n == 1 && s[0] == 'a') return 1;
    if (n == 2 && memcmp(s, "bb", 2) == 0) return 2;
    if (n == 3 && memcmp(s, "big", 3) == 0) return JSON_MAX_KEY_ID;
    return 0;
}

static void setup(void)
{
    js = json_scanner_new(test_key_id);
    ck_assert_ptr_nonnull(js);
}

static void teardown(void)
{
    json_scanner_free(js);
}

/* Scans in[0..n) from an exact-size heap copy. */
static int scan_n(const char *in, size_t n)
{
    char *copy = malloc(n ? n : 1);
    int rc;

    ck_assert_ptr_nonnull(copy);
    memcpy(copy, in, n);
    err[0] = '\0';
    toks = NULL;
    rc = json_scan(js, copy, n, &toks, err, sizeof(err));
    free(copy);
    return rc;
}

static int scan(const char *in)
{
    return scan_n(in, strlen(in));
}

/* Scans a JSON string literal and checks it decodes to want[0..wn). The
 * text stays valid after the input is freed: it is the scanner's. */
static void string_is(const char *lit, const char *want, size_t wn)
{
    ck_assert_msg(scan(lit) == 0, "%s: %s", lit, err);
    ck_assert_int_eq(toks[0].type, JSON_STRING);
    ck_assert_uint_eq(toks[0].len, wn);
    ck_assert_msg(memcmp(toks[0].s, want, wn) == 0, "%s decoded wrong", lit);
    ck_assert_int_eq(toks[0].s[wn], '\0');
}

/* Scans in, expects -1 and err equal to want. */
static void fails_with(const char *in, size_t n, const char *want)
{
    ck_assert_msg(scan_n(in, n) == -1, "accepted: %.*s", (int)n, in);
    ck_assert_str_eq(err, want);
}

/* A line the scanner must refuse, and its error. */
struct bad {
    const char *in;
    size_t len;
    const char *err;
};
#define BAD(lit, err)                                                                      \
    {                                                                                      \
        lit, sizeof(lit) - 1, err                                                          \
    }

static void all_fail(const struct bad *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fails_with(cases[i].in, cases[i].len, cases[i].err);
}

START_TEST(test_strings_and_escapes)
{
    string_is("\"\"", "", 0);
    string_is("\"plain ascii\"", "plain ascii", 11);
    string_is("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", "\" \\ / \b \f \n \r \t", 15);
    string_is("\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac", 6);
    string_is("\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
              "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
    /* Long enough for the 16- and 8-byte copy paths, an escape past both. */
    string_is("\"0123456789abcdef01234567\\n89\"", "0123456789abcdef01234567\n89", 27);
    {
        static const struct bad cases[] = {
            BAD("\"a\\x\"", "not valid JSON (5-byte line): invalid escape at offset 2"),
            BAD("\"\\u12\"", "not valid JSON (6-byte line): \\u not followed by 4 hex "
                             "digits at offset 1"),
            BAD("\"\\u12g4\"", "not valid JSON (8-byte line): \\u not followed by 4 hex "
                               "digits at offset 1"),
            BAD("\"x\\u0000\"",
                "string at offset 0 holds \\u0000, which Postgres text cannot"),
        };
        all_fail(cases, sizeof(cases) / sizeof(cases[0]));
    }
}
END_TEST

START_TEST(test_surrogates)
{
    static const struct bad cases[] = {
        BAD("\"\\ude00\"",
            "not valid JSON (8-byte line): lone low surrogate escape at offset 1"),
        BAD("\"\\ud83d\"",
            "not valid JSON (8-byte line): high surrogate escape without a low "
            "one at offset 1"),
        BAD("\"\\ud83dx\\ude00\"", "not valid JSON (15-byte line): high surrogate escape "
                                   "without a low one at offset 1"),
        /* Reversed: the low one first is lone. */
        BAD("\"\\ude00\\ud83d\"",
            "not valid JSON (14-byte line): lone low surrogate escape "
            "at offset 1"),
        /* Two high ones. */
        BAD("\"\\ud83d\\ud83d\"", "not valid JSON (14-byte line): high surrogate escape "
                                  "without a low one at offset 1"),
        /* A raw (CESU-8) surrogate is not UTF-8. */
        BAD("\"\xed\xa0\xbd\"", "not valid JSON (5-byte line): invalid UTF-8 byte 0xed at "
                                "offset 1"),
    };

    string_is("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4); /* paired */
    string_is("\"\\uDBFF\\uDFFF\"", "\xf4\x8f\xbf\xbf", 4); /* U+10FFFF */
    all_fail(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_control_bytes_and_utf8)
{
    string_is("\"\x7f\"", "\x7f", 1); /* DEL is allowed, as in jansson */
    {
        static const struct bad cases[] = {
            BAD("\"a\nb\"",
                "not valid JSON (5-byte line): control byte 0x0a in a string at offset 2"),
            BAD("\"ab\0\"",
                "not valid JSON (5-byte line): control byte 0x00 in a string at offset 3"),
            BAD("\"0123456789abcdefghij\x1f\"", "not valid JSON (23-byte line): control "
                                                "byte 0x1f in a string at offset 21"),
            BAD("\"\x80\"",
                "not valid JSON (3-byte line): invalid UTF-8 byte 0x80 at offset 1"),
            BAD("\"\xc0\xaf\"",
                "not valid JSON (4-byte line): invalid UTF-8 byte 0xc0 at offset 1"),
            BAD("\"\xe0\x80\xaf\"",
                "not valid JSON (5-byte line): invalid UTF-8 byte 0xe0 at offset 1"),
            BAD("\"\xf4\x90\x80\x80\"",
                "not valid JSON (6-byte line): invalid UTF-8 byte 0xf4 at offset 1"),
            BAD("\"\xf5\x80\x80\x80\"",
                "not valid JSON (6-byte line): invalid UTF-8 byte 0xf5 at offset 1"),
            BAD("\"\xc3\"",
                "not valid JSON (3-byte line): invalid UTF-8 byte 0xc3 at offset 1"),
        };
        all_fail(cases, sizeof(cases) / sizeof(cases[0]));
    }
}
END_TEST

START_TEST(test_truncated)
{
    static const char *const whole[] = {
        "{\"a\":[1,\"x\\u00e9\",true,null,{\"bb\":-0.5e+3}]}",
        "\"\\ud83d\\ude00\"",
        "[false]",
    };

    /* Every proper prefix of a valid line fails and says why in one line. */
    for (size_t w = 0; w < sizeof(whole) / sizeof(whole[0]); w++) {
        size_t n = strlen(whole[w]);
        ck_assert_msg(scan(whole[w]) == 0, "%s: %s", whole[w], err);
        for (size_t k = 0; k < n; k++) {
            ck_assert_msg(scan_n(whole[w], k) == -1, "prefix %zu of %s accepted", k,
                          whole[w]);
            ck_assert_msg(err[0] != '\0' && !strchr(err, '\n'), "prefix %zu: '%s'", k, err);
        }
    }
    static const struct bad cases[] = {
        BAD("",
            "not valid JSON (0-byte line): value expected near end of line at offset 0"),
        BAD("\"abc", "not valid JSON (4-byte line): unterminated string at offset 0"),
        BAD("\"abc\\", "not valid JSON (5-byte line): unterminated string at offset 0"),
        BAD("{\"a\":1", "not valid JSON (6-byte line): ',' or '}' expected near end of "
                        "line at offset 6"),
        BAD("[1,",
            "not valid JSON (3-byte line): value expected near end of line at offset 3"),
        BAD("tru", "not valid JSON (3-byte line): value expected near 'tru' at offset 0"),
    };

    all_fail(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_numbers)
{
    static const char *const good[] = {
        "0",   "-0",  "1",    "-12",      "1.50",
        "0.0", "1e5", "1E+5", "-1.5e-10", "123456789012345678901234567890"};
    static const char *const bad[] = {"01",  "-",   "1.",  ".5",    "1e",
                                      "1e+", "--1", "-01", "1.2.3", "+1"};

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        ck_assert_msg(scan(good[i]) == 0, "%s: %s", good[i], err);
        ck_assert_int_eq(toks[0].type, JSON_NUMBER);
        ck_assert_str_eq(toks[0].s, good[i]); /* the exact source text */
        ck_assert_uint_eq(toks[0].len, strlen(good[i]));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(scan(bad[i]) == -1, "%s accepted", bad[i]);
    {
        static const struct bad cases[] = {
            BAD("01", "invalid number at offset 0"),
            BAD("[1,1.]", "invalid number at offset 3"),
            BAD("+1", "not valid JSON (2-byte line): value expected near '+1' at offset 0"),
            BAD("[1 2]", "not valid JSON (5-byte line): ',' or ']' expected near '\"2\"' "
                         "at offset 3"),
        };
        all_fail(cases, sizeof(cases) / sizeof(cases[0]));
    }
}
END_TEST

START_TEST(test_tokens_and_keys)
{
    const struct json_tok *arr, *v;

    ck_assert_int_eq(
        scan(" {\"a\" : [1, {\"x\":2}, \"s\"], \"bb\":true, \"c\":null,\"big\":false}\r\n"),
        0);
    ck_assert_int_eq(toks[0].type, JSON_OBJECT);
    ck_assert_uint_eq(toks[0].len, 4); /* members */
    ck_assert_uint_eq(toks[0].size,
                      14);            /* obj, 4 keys, [1, {x:2}, "s"], true, null, false */
    ck_assert_int_eq(toks[1].kid, 1); /* "a" */
    arr = json_get(&toks[0], 1);
    ck_assert_ptr_eq(arr, &toks[2]);
    ck_assert_int_eq(arr->type, JSON_ARRAY);
    ck_assert_uint_eq(arr->len, 3);
    ck_assert_uint_eq(arr->size, 6);
    ck_assert_int_eq(arr[2].type, JSON_OBJECT);
    ck_assert_uint_eq(arr[2].size, 3);
    ck_assert_int_eq(arr[2 + 3].type, JSON_STRING); /* skipped the object in one step */
    ck_assert_str_eq(arr[5].s, "s");
    v = json_get(&toks[0], 2);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, JSON_TRUE);
    v = json_get(&toks[0], JSON_MAX_KEY_ID);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, JSON_FALSE);
    v = json_get(&toks[0], 0); /* the first key not interned: "c" */
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->type, JSON_NULL);
    ck_assert_ptr_null(json_get(&toks[0], 3));
    ck_assert_str_eq(json_type_name(arr), "an array");
    ck_assert_str_eq(json_type_name(NULL), "missing");
    ck_assert_str_eq(json_type_name(&arr[1]), "a number");
    /* The inner object's "x" is not a member of the outer one. */
    ck_assert_int_eq(scan("{\"o\":{\"a\":1}}"), 0);
    ck_assert_ptr_null(json_get(&toks[0], 1));
    ck_assert_ptr_nonnull(json_get(&toks[2], 1));
}
END_TEST

START_TEST(test_structure)
{
    ck_assert_int_eq(scan("[]"), 0);
    ck_assert_uint_eq(toks[0].len, 0);
    ck_assert_int_eq(scan("{ }"), 0);
    ck_assert_int_eq(scan("\t\"x\"\n"), 0);
    static const struct bad cases[] = {
        BAD("{} x",
            "not valid JSON (4-byte line): end of line expected near 'x' at offset 3"),
        BAD("{1:2}",
            "not valid JSON (5-byte line): string key expected near '\"1\"' at offset 1"),
        BAD("{\"a\" 1}",
            "not valid JSON (7-byte line): ':' expected near '\"1\"' at offset 5"),
        BAD("[1,]", "not valid JSON (4-byte line): value expected near ']' at offset 3"),
        BAD("{\"a\":1,}",
            "not valid JSON (8-byte line): string key expected near '}' at offset 7"),
        BAD("[1}",
            "not valid JSON (3-byte line): ',' or ']' expected near '}' at offset 2"),
        BAD("nul\x01",
            "not valid JSON (4-byte line): value expected near 'nul?' at offset 0"),
    };

    all_fail(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_duplicate_keys)
{
    char line[4096];
    size_t n = 0;

    {
        static const struct bad cases[] = {
            BAD("{\"a\":1,\"a\":2}",
                "not valid JSON (13-byte line): duplicate object key \"a\" at offset 7"),
            BAD("{\"z\":1,\"z\":2}",
                "not valid JSON (13-byte line): duplicate object key \"z\" at offset 7"),
        };
        all_fail(cases, sizeof(cases) / sizeof(cases[0]));
    }
    /* Same key in different objects is fine; "\u0061" is "a". */
    ck_assert_int_eq(scan("{\"a\":{\"a\":1},\"b\":{\"a\":2}}"), 0);
    fails_with("{\"a\":1,\"\\u0061\":2}", 18,
               "not valid JSON (18-byte line): duplicate object key \"a\" at offset 7");
    /* Past the linear scan: many other keys, then a repeat of an early one. */
    n += (size_t)snprintf(line + n, sizeof(line) - n, "{");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(line + n, sizeof(line) - n, "\"k%d\":%d,", i, i);
    ck_assert_int_eq(scan_n(line, n - 1), -1); /* ends in ',' */
    n += (size_t)snprintf(line + n, sizeof(line) - n, "\"k3\":0}");
    ck_assert_int_eq(scan_n(line, n), -1);
    ck_assert_msg(strstr(err, "duplicate object key \"k3\"") != NULL, "%s", err);
    line[n - 5] = '9'; /* "k9" is there too */
    ck_assert_int_eq(scan_n(line, n), -1);
    line[n - 6] = 'q'; /* "q9" is new */
    ck_assert_msg(scan_n(line, n) == 0, "%s", err);
    ck_assert_uint_eq(toks[0].len, 101);
}
END_TEST

START_TEST(test_nesting_limit)
{
    size_t max = JSON_MAX_DEPTH, n = 2 * max + 2;
    char *line = malloc(n);

    /* JSON_MAX_DEPTH - 1 arrays around a scalar: every value counts, so
     * this is exactly the deepest accepted. */
    ck_assert_ptr_nonnull(line);
    memset(line, '[', max - 1);
    line[max - 1] = '0';
    memset(line + max, ']', max - 1);
    ck_assert_msg(scan_n(line, 2 * max - 1) == 0, "%s", err);
    ck_assert_uint_eq(toks[0].size, max);
    /* One more level fails, naming the limit and where. */
    memset(line, '[', max);
    line[max] = '0';
    memset(line + max + 1, ']', max);
    ck_assert_int_eq(scan_n(line, 2 * max + 1), -1);
    ck_assert_str_eq(err,
                     "not valid JSON (4097-byte line): nested deeper than 2048 levels at "
                     "offset 2048");
    free(line);
}
END_TEST

START_TEST(test_reuse_and_big_lines)
{
    size_t n = (3u << 20) + 2;
    char *line = malloc(n);

    ck_assert_ptr_nonnull(line);
    line[0] = '"';
    memset(line + 1, 'x', n - 2);
    line[n - 1] = '"';
    ck_assert_int_eq(scan_n(line, n), 0);
    ck_assert_uint_eq(toks[0].len, n - 2);
    free(line);
    /* After a failure and a big line, a small one still scans. */
    ck_assert_int_eq(scan("[1,"), -1);
    ck_assert_int_eq(scan("{\"a\":\"b\"}"), 0);
    ck_assert_str_eq(toks[2].s, "b");
    /* No key function: every key is 0. */
    json_scanner_free(js);
    js = json_scanner_new(NULL);
    ck_assert_int_eq(scan("{\"a\":1}"), 0);
    ck_assert_int_eq(toks[1].kid, 0);
}
END_TEST

START_TEST(test_skip_ws_and_same_bytes)
{
    ck_assert_uint_eq(json_skip_ws(" \t\r\nx", 5, 0), 4);
    ck_assert_uint_eq(json_skip_ws("x", 1, 0), 0);
    ck_assert_uint_eq(json_skip_ws("  ", 2, 0), 2);
    ck_assert_uint_eq(json_skip_ws("\v", 1, 0), 0); /* not JSON whitespace */
    ck_assert(json_same_bytes("abc", "abd", 2));
    ck_assert(!json_same_bytes("abc", "abd", 3));
}
END_TEST

static Suite *jsonscan_suite(void)
{
    Suite *s = suite_create("jsonscan");
    TCase *tc = tcase_create("scan");

    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_strings_and_escapes);
    tcase_add_test(tc, test_surrogates);
    tcase_add_test(tc, test_control_bytes_and_utf8);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_numbers);
    tcase_add_test(tc, test_tokens_and_keys);
    tcase_add_test(tc, test_structure);
    tcase_add_test(tc, test_duplicate_keys);
    tcase_add_test(tc, test_nesting_limit);
    tcase_add_test(tc, test_reuse_and_big_lines);
    tcase_add_test(tc, test_skip_ws_and_same_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(jsonscan_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
