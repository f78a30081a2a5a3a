/*
 * test_log.c - the pure log line formatter (log_format_line in
 * include/base/log.h): text lines with a UTC timestamp, level, message and
 * key=value context (quoted when needed, control bytes as '?'), JSON lines
 * that parse as one object (checked with jansson) whatever bytes the
 * message holds, and lines that do not fit the buffer.
 */
#include <check.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* 2026-11-30T12:34:56.789Z */
#define TS INT64_C(1796042096789123)

START_TEST(test_text_plain)
{
    char out[512];
    size_t n = log_format_line(out, sizeof(out), LOG_FORMAT_TEXT, TS, 42, LOG_WARN,
                               "hello world\n", NULL, NULL);
    ck_assert_str_eq(out, "2026-11-30T12:34:56.789Z outboxd[42] WARN: hello world\n");
    ck_assert_uint_eq(n, strlen(out));
}
END_TEST

START_TEST(test_text_fields)
{
    char out[512];
    const struct log_field *ctx = LOG_FIELDS({"slot", "outboxd"});
    log_format_line(out, sizeof(out), LOG_FORMAT_TEXT, TS, 7, LOG_INFO, "confirmed", ctx,
                    LOG_FIELDS({"lsn", "0/16B3748"}, {"event_id", "a b"}, {"why", ""},
                               {"q", "say \"hi\"\\"}));
    ck_assert_str_eq(out,
                     "2026-11-30T12:34:56.789Z outboxd[7] INFO: confirmed lsn=0/16B3748 "
                     "event_id=\"a b\" why=\"\" q=\"say \\\"hi\\\"\\\\\" slot=outboxd\n");
}
END_TEST

START_TEST(test_text_control_bytes)
{
    char out[512];
    log_format_line(out, sizeof(out), LOG_FORMAT_TEXT, TS, 1, LOG_ERROR, "a\nb\tc\x7f",
                    NULL, LOG_FIELDS({"k", "v\r\n1"}));
    ck_assert_str_eq(out, "2026-11-30T12:34:56.789Z outboxd[1] ERROR: a?b?c? k=v??1\n");
}
END_TEST

START_TEST(test_text_truncated)
{
    char out[40];
    char msg[200];
    memset(msg, 'x', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    size_t n = log_format_line(out, sizeof(out), LOG_FORMAT_TEXT, TS, 1, LOG_INFO, msg,
                               NULL, NULL);
    ck_assert_uint_eq(n, sizeof(out) - 1);
    ck_assert_uint_eq(strlen(out), n);
    ck_assert_int_eq(out[n - 1], '\n');
}
END_TEST

/* Parses a JSON line: one object, a '\n' at the end and nowhere else. */
static json_t *parse_line(const char *out, size_t n)
{
    ck_assert_uint_eq(strlen(out), n);
    ck_assert_int_eq(out[n - 1], '\n');
    ck_assert_ptr_null(memchr(out, '\n', n - 1));
    json_error_t e;
    json_t *j = json_loadb(out, n, 0, &e);
    ck_assert_msg(j != NULL, "not JSON (%s): %s", e.text, out);
    ck_assert(json_is_object(j));
    return j;
}

static const char *str(json_t *j, const char *key)
{
    const char *s = json_string_value(json_object_get(j, key));
    ck_assert_msg(s != NULL, "no string \"%s\"", key);
    return s;
}

START_TEST(test_json_fields)
{
    char out[1024];
    size_t n = log_format_line(out, sizeof(out), LOG_FORMAT_JSON, TS, 42, LOG_DEBUG,
                               "dead-lettered: \"x\"\n", LOG_FIELDS({"slot", "s1"}),
                               LOG_FIELDS({"event_id", "e-1"}, {"lsn", "0/1"}));
    json_t *j = parse_line(out, n);
    ck_assert_str_eq(str(j, "ts"), "2026-11-30T12:34:56.789Z");
    ck_assert_str_eq(str(j, "level"), "debug");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "pid")), 42);
    ck_assert_str_eq(str(j, "msg"), "dead-lettered: \"x\"");
    ck_assert_str_eq(str(j, "slot"), "s1");
    ck_assert_str_eq(str(j, "event_id"), "e-1");
    ck_assert_str_eq(str(j, "lsn"), "0/1");
    ck_assert_uint_eq(json_object_size(j), 7);
    json_decref(j);
}
END_TEST

START_TEST(test_json_reserved_keys_win)
{
    char out[1024];
    size_t n = log_format_line(out, sizeof(out), LOG_FORMAT_JSON, TS, 1, LOG_INFO, "real",
                               NULL, LOG_FIELDS({"msg", "fake"}, {"level", "error"}));
    json_t *j = parse_line(out, n);
    ck_assert_str_eq(str(j, "msg"), "real");
    ck_assert_str_eq(str(j, "level"), "info");
    json_decref(j);
}
END_TEST

START_TEST(test_json_hostile_bytes)
{
    char out[1024];
    /* control bytes, a quote, a backslash, a lone continuation byte, a
     * truncated 3-byte sequence, an overlong '/', a surrogate, valid é */
    const char *msg = "a\x01\x1f\"\\\x80z\xe2\x82|\xc0\xaf|\xed\xa0\x80|\xc3\xa9";
    size_t n = log_format_line(out, sizeof(out), LOG_FORMAT_JSON, TS, 1, LOG_INFO, msg,
                               NULL, LOG_FIELDS({"k", "\xff"}));
    json_t *j = parse_line(out, n);
    ck_assert_str_eq(str(j, "msg"), "a\x01\x1f\"\\?z??|??|???|\xc3\xa9");
    ck_assert_str_eq(str(j, "k"), "?");
    json_decref(j);
}
END_TEST

START_TEST(test_json_too_long)
{
    char out[300];
    char msg[2000];
    for (size_t i = 0; i < sizeof(msg) - 1; i++)
        msg[i] = i % 7 == 0 ? '"' : 'y';
    msg[sizeof(msg) - 1] = '\0';
    size_t n = log_format_line(out, sizeof(out), LOG_FORMAT_JSON, TS, 1, LOG_INFO, msg,
                               LOG_FIELDS({"slot", "s"}), NULL);
    ck_assert_uint_lt(n, sizeof(out));
    json_t *j = parse_line(out, n);
    const char *got = str(j, "msg");
    ck_assert_uint_gt(strlen(got), 50);
    ck_assert_int_eq(strncmp(got, msg, strlen(got)), 0); /* a prefix of it */
    ck_assert_str_eq(str(j, "slot"), "s");
    json_decref(j);
}
END_TEST

/* Context too long even with an empty message: still one valid line. */
START_TEST(test_json_fields_too_long)
{
    char out[200], big[400];
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    size_t n = log_format_line(out, sizeof(out), LOG_FORMAT_JSON, TS, 1, LOG_ERROR, "m",
                               NULL, LOG_FIELDS({"k", big}));
    json_t *j = parse_line(out, n);
    ck_assert_str_eq(str(j, "level"), "error");
    ck_assert_str_eq(str(j, "msg"), "(log line too long or out of memory)");
    json_decref(j);
}
END_TEST

START_TEST(test_parse_names)
{
    ck_assert_int_eq(log_format_parse("text"), LOG_FORMAT_TEXT);
    ck_assert_int_eq(log_format_parse("json"), LOG_FORMAT_JSON);
    ck_assert_int_eq(log_format_parse("JSON"), -1);
    ck_assert_int_eq(log_format_parse(""), -1);
    ck_assert_int_eq(log_level_parse("warn"), LOG_WARN);
    ck_assert_int_eq(log_level_parse("warning"), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_text_plain);
    tcase_add_test(tc, test_text_fields);
    tcase_add_test(tc, test_text_control_bytes);
    tcase_add_test(tc, test_text_truncated);
    tcase_add_test(tc, test_json_fields);
    tcase_add_test(tc, test_json_reserved_keys_win);
    tcase_add_test(tc, test_json_hostile_bytes);
    tcase_add_test(tc, test_json_too_long);
    tcase_add_test(tc, test_json_fields_too_long);
    tcase_add_test(tc, test_parse_names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
