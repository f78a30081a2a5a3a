/*
 * test_pubnotice.c - pubnotice_is_skip() and pubnotice_stream_error()
 * (include/stream/pubnotice.h) on PostgreSQL 18's notice, as the direct reader
 * (pgwire_error_text) and libpq format it, and on notices that are not it.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pubnotice.h"
#include "slotsetup.h"

/* PostgreSQL 18.4's notice, as pgwire_error_text() gives it. */
static const char *const PG18_NOTICE =
    "WARNING:  skipped loading publication \"outboxd_pub\"\n"
    "DETAIL:  The publication does not exist at this point in the WAL.\n"
    "HINT:  Create the publication if it does not exist.";

START_TEST(test_recognises_the_pg18_notice)
{
    ck_assert(pubnotice_is_skip(PG18_NOTICE, "55000"));
    ck_assert(pubnotice_is_skip(PG18_NOTICE, "")); /* SQLSTATE not known */
    ck_assert(pubnotice_is_skip(PG18_NOTICE, NULL));
    /* lc_messages in another language: the SQLSTATE alone says it. */
    ck_assert(pubnotice_is_skip("WARNUNG:  Publikation \"outboxd_pub\" ...", "55000"));
}
END_TEST

START_TEST(test_other_notices_are_not_it)
{
    ck_assert(!pubnotice_is_skip("WARNING:  out of background worker slots", "53400"));
    ck_assert(!pubnotice_is_skip("NOTICE:  relation \"x\" already exists, skipping", "42P07"));
    ck_assert(!pubnotice_is_skip("", ""));
    ck_assert(!pubnotice_is_skip(NULL, NULL));
}
END_TEST

START_TEST(test_error_reads_as_the_pg15_error)
{
    char err[1024];
    pubnotice_stream_error("outboxd_pub", PG18_NOTICE, err, sizeof(err));
    /* What the daemon acts on: the same test as for 15-17's ERROR. */
    ck_assert(slot_says_publication_missing(err, "outboxd_pub"));
    ck_assert(!slot_says_publication_missing(err, "other_pub"));
    ck_assert_ptr_nonnull(strstr(err, "skipped loading publication"));
    ck_assert_ptr_null(strchr(err, '\n')); /* one log line */
}
END_TEST

START_TEST(test_error_truncates_safely)
{
    char err[40];
    memset(err, 'x', sizeof(err));
    pubnotice_stream_error("outboxd_pub", PG18_NOTICE, err, sizeof(err));
    ck_assert_uint_eq(strlen(err), sizeof(err) - 1);
    pubnotice_stream_error("outboxd_pub", PG18_NOTICE, err, 0); /* no write */
    pubnotice_stream_error(NULL, NULL, err, sizeof(err));
    ck_assert_ptr_nonnull(strstr(err, "publication \"\" does not"));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pubnotice");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_recognises_the_pg18_notice);
    tcase_add_test(tc, test_other_notices_are_not_it);
    tcase_add_test(tc, test_error_reads_as_the_pg15_error);
    tcase_add_test(tc, test_error_truncates_safely);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
