/*
 * test_check.c - the pure helpers of `outboxd check` (include/check/check.h):
 * output lines, column type fit, template column extraction; plus the
 * FAIL/skip report for a configuration that could not be loaded. (The
 * did-you-mean is tested in test_str.c, the masking in test_redact.c.)
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* ---- lines ---- */

START_TEST(test_line_ok)
{
    char b[256];
    ck_assert_str_eq(
        check_format_line(b, sizeof(b), CHECK_OK, "wal_level = logical", NULL, NULL),
        "ok   wal_level = logical");
    ck_assert_str_eq(
        check_format_line(b, sizeof(b), CHECK_OK, "slot \"s\"", "exists", NULL),
        "ok   slot \"s\": exists");
    /* an ok line never carries a fix */
    ck_assert_str_eq(check_format_line(b, sizeof(b), CHECK_OK, "x", "", "do y"), "ok   x");
}
END_TEST

START_TEST(test_line_fail_warn_skip)
{
    char b[256];
    ck_assert_str_eq(check_format_line(b, sizeof(b), CHECK_FAIL, "role \"r\"",
                                       "no REPLICATION", "ALTER ROLE r REPLICATION"),
                     "FAIL role \"r\": no REPLICATION; ALTER ROLE r REPLICATION");
    ck_assert_str_eq(
        check_format_line(b, sizeof(b), CHECK_WARN, "topics", "2 missing", "create"),
        "warn topics: 2 missing; create");
    ck_assert_str_eq(check_format_line(b, sizeof(b), CHECK_FAIL, "configuration",
                                       "unknown key; did you mean \"slot\"?", NULL),
                     "FAIL configuration: unknown key; did you mean \"slot\"?");
    ck_assert_str_eq(
        check_format_line(b, sizeof(b), CHECK_SKIP, "topics", "no broker", "x"),
        "skip topics: no broker");
}
END_TEST

START_TEST(test_line_truncates)
{
    char b[12];
    check_format_line(b, sizeof(b), CHECK_FAIL, "a long subject", "a long problem", "fix");
    ck_assert_uint_eq(strlen(b), sizeof(b) - 1);
    ck_assert_str_eq(b, "FAIL a long");
}
END_TEST

/* ---- column types ---- */

static const struct {
    enum outbox_col col;
    const char *type;
    char typtype;
    enum check_type_fit fit;
} fits[] = {
    {OC_EVENT_ID, "uuid", 'b', TYPE_FITS},
    {OC_EVENT_ID, "text", 'b', TYPE_FITS},
    {OC_EVENT_ID, "varchar", 'b', TYPE_FITS},
    {OC_EVENT_ID, "int8", 'b', TYPE_ODD},
    {OC_EVENT_ID, "bytea", 'b', TYPE_BAD},
    {OC_EVENT_ID, "timestamptz", 'b', TYPE_BAD},
    {OC_AGGREGATE_ID, "text", 'b', TYPE_FITS},
    {OC_AGGREGATE_ID, "bpchar", 'b', TYPE_FITS},
    {OC_AGGREGATE_ID, "citext", 'b', TYPE_FITS},
    {OC_AGGREGATE_ID, "int4", 'b', TYPE_ODD},
    {OC_AGGREGATE_ID, "numeric", 'b', TYPE_ODD},
    {OC_AGGREGATE_ID, "jsonb", 'b', TYPE_BAD},
    {OC_AGGREGATE_TYPE, "name", 'b', TYPE_FITS},
    {OC_AGGREGATE_TYPE, "aggregate_kind", 'e', TYPE_FITS}, /* an enum */
    {OC_AGGREGATE_TYPE, "bool", 'b', TYPE_BAD},
    {OC_EVENT_TYPE, "text", 'b', TYPE_FITS},
    {OC_EVENT_TYPE, "_text", 'b', TYPE_BAD}, /* an array */
    {OC_AGGREGATE_VERSION, "int2", 'b', TYPE_FITS},
    {OC_AGGREGATE_VERSION, "int4", 'b', TYPE_FITS},
    {OC_AGGREGATE_VERSION, "int8", 'b', TYPE_FITS},
    {OC_AGGREGATE_VERSION, "numeric", 'b', TYPE_ODD},
    {OC_AGGREGATE_VERSION, "text", 'b', TYPE_BAD},
    {OC_AGGREGATE_VERSION, "timestamptz", 'b', TYPE_BAD},
    {OC_PAYLOAD, "jsonb", 'b', TYPE_FITS},
    {OC_PAYLOAD, "json", 'b', TYPE_FITS},
    {OC_PAYLOAD, "text", 'b', TYPE_FITS},
    {OC_PAYLOAD, "varchar", 'b', TYPE_ODD},
    {OC_PAYLOAD, "xml", 'b', TYPE_ODD},
    {OC_PAYLOAD, "bytea", 'b', TYPE_FITS},
    {OC_PAYLOAD, "int8", 'b', TYPE_BAD},
};

START_TEST(test_type_fit)
{
    ck_assert_msg(
        check_type_fit(fits[_i].col, fits[_i].type, fits[_i].typtype) == fits[_i].fit,
        "%s as %s: got %d, want %d", fits[_i].type, outbox_col_name(fits[_i].col),
        check_type_fit(fits[_i].col, fits[_i].type, fits[_i].typtype), fits[_i].fit);
}
END_TEST

START_TEST(test_type_expected)
{
    ck_assert_str_eq(check_type_expected(OC_EVENT_ID), "text-like or uuid");
    ck_assert_str_eq(check_type_expected(OC_AGGREGATE_VERSION), "an integer type");
    ck_assert_str_eq(check_type_expected(OC_PAYLOAD), "json, jsonb, text or bytea");
}
END_TEST

/* ---- template columns ---- */

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
}

START_TEST(test_template_columns)
{
    char *names[8];
    int n = check_template_columns("outbox.event.${aggregate_type}", names, 8);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(names[0], "aggregate_type");
    free_names(names, n);

    n = check_template_columns("${tenant}.${aggregate_type}.${tenant}-v1", names, 8);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(names[0], "tenant");
    ck_assert_str_eq(names[1], "aggregate_type");
    free_names(names, n);

    ck_assert_int_eq(check_template_columns("constant.topic", names, 8), 0);
    ck_assert_int_eq(check_template_columns("", names, 8), 0);
    /* a lone '$' or '}' is literal text */
    ck_assert_int_eq(check_template_columns("a$b}c", names, 8), 0);
}
END_TEST

START_TEST(test_template_columns_bad)
{
    char *names[2];
    ck_assert_int_eq(check_template_columns("x.${unclosed", names, 2), -1);
    ck_assert_int_eq(check_template_columns("x.${}", names, 2), -1);
    ck_assert_int_eq(check_template_columns("${a}${b}${c}", names, 2), -1); /* too many */
    ck_assert_int_eq(check_template_columns("${a}${b}${a}", names, 2),
                     2); /* dups count once */
    free_names(names, 2);
}
END_TEST

/* ---- check_config_failed ---- */

/* Runs check_config_failed(err) with stdout captured; returns its output. */
static char *capture_config_failed(const char *err, int *rc)
{
    static char buf[8192];
    fflush(stdout);
    int saved = dup(1);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    dup2(fileno(tmp), 1);
    *rc = check_config_failed(err);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof(buf) - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
    return buf;
}

START_TEST(test_config_failed)
{
    int rc;
    char *out = capture_config_failed(
        "/etc/o.ini:3: unknown key \"slto\" in section [postgres]; did you mean \"slot\"?",
        &rc);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(
        strncmp(out,
                "FAIL configuration: /etc/o.ini:3: unknown key \"slto\" in section "
                "[postgres]; did you mean \"slot\"?\n",
                strlen("FAIL configuration: /etc/o.ini:3: unknown key")) == 0,
        "got: %s", out);
    /* the suggestion is the fix: nothing appended */
    ck_assert_ptr_nonnull(strstr(out, "did you mean \"slot\"?\n"));
    ck_assert_ptr_nonnull(strstr(out,
                                 "skip postgres connection: the configuration could not "
                                 "be loaded\n"));
    ck_assert_ptr_nonnull(strstr(out, "skip topics: "));
    /* every line is FAIL or skip */
    int lines = 0;
    for (char *p = out; *p; p = strchr(p, '\n') + 1, lines++)
        ck_assert_msg(!strncmp(p, "FAIL ", 5) || !strncmp(p, "skip ", 5), "line: %s", p);
    /* configuration + 18 later checks (check.c's later_checks, the three of
     * failover slots and gap repair's included) */
    ck_assert_int_eq(lines, 19);
    ck_assert_ptr_nonnull(strstr(out, "skip gap repair: "));
    ck_assert_ptr_nonnull(strstr(out, "skip failover slot: "));
    ck_assert_ptr_nonnull(strstr(out, "skip synchronized_standby_slots: "));
    ck_assert_ptr_nonnull(strstr(out, "skip standbys: "));
}
END_TEST

START_TEST(test_config_failed_generic_fix)
{
    int rc;
    char *out = capture_config_failed("[kafka] bootstrap.servers is not set", &rc);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(strstr(out,
                                 "FAIL configuration: [kafka] bootstrap.servers is not "
                                 "set; correct it in the configuration file"));
}
END_TEST

static Suite *check_suite(void)
{
    Suite *s = suite_create("check");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_line_ok);
    tcase_add_test(tc, test_line_fail_warn_skip);
    tcase_add_test(tc, test_line_truncates);
    tcase_add_loop_test(tc, test_type_fit, 0, (int)(sizeof(fits) / sizeof(fits[0])));
    tcase_add_test(tc, test_type_expected);
    tcase_add_test(tc, test_template_columns);
    tcase_add_test(tc, test_template_columns_bad);
    tcase_add_test(tc, test_config_failed);
    tcase_add_test(tc, test_config_failed_generic_fix);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(check_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
