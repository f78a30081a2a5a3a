/*
 * test_inidiff.c - the keys of a configuration file and which changed
 * between two readings (include/config/inidiff.h): what SIGHUP names as "needs a
 * restart".
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "inidiff.h"

static size_t changed(const char *a, const char *b, const char *const *skip, char *out,
                      size_t outlen)
{
    struct ini_pairs pa, pb;
    char err[256];
    ck_assert_int_eq(ini_pairs_read_string(a, &pa, err, sizeof(err)), 0);
    ck_assert_int_eq(ini_pairs_read_string(b, &pb, err, sizeof(err)), 0);
    size_t n = ini_pairs_changed(&pa, &pb, skip, out, outlen);
    ini_pairs_free(&pa);
    ini_pairs_free(&pb);
    return n;
}

START_TEST(test_names_changed_added_removed)
{
    char out[256];
    const char *a = "[log]\nlevel = debug\n[kafka]\nlinger.ms = 2\nacks = all\n"
                    "[http]\nlisten = 127.0.0.1:1\n";
    const char *b = "[http]\nlisten = 127.0.0.1:2\n[log]\nlevel = info\n"
                    "[kafka]\nacks = all\nbatch.size = 10\n";
    ck_assert_uint_eq(changed(a, b, NULL, out, sizeof(out)), 4);
    ck_assert_str_eq(out, "http.listen, log.level, kafka.batch.size, kafka.linger.ms");
    static const char *const live[] = {"log.level", "log.format", NULL};
    ck_assert_uint_eq(changed(a, b, live, out, sizeof(out)), 3);
    ck_assert_str_eq(out, "http.listen, kafka.batch.size, kafka.linger.ms");
}
END_TEST

START_TEST(test_same_file_nothing_changed)
{
    char out[64];
    const char *a = "; comment\n[postgres]\nslot = s\nslot = t\n";
    ck_assert_uint_eq(changed(a, "[postgres]\nslot = t\n", NULL, out, sizeof(out)), 0);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_cut_short)
{
    char out[16];
    const char *b = "[a]\nkey1 = 1\nkey2 = 2\nkey3 = 3\n";
    ck_assert_uint_eq(changed("", b, NULL, out, sizeof(out)), 3);
    ck_assert_str_eq(out, "a.key1, ...");
    char tiny[4];
    ck_assert_uint_eq(changed("", b, NULL, tiny, sizeof(tiny)), 3);
    ck_assert_str_eq(tiny, "...");
}
END_TEST

START_TEST(test_syntax_error_names_line)
{
    struct ini_pairs p;
    char err[256];
    ck_assert_int_eq(ini_pairs_read_string("[log]\nlevel = info\nnot a pair\n", &p, err,
                                           sizeof(err)),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "line 3"));
    ini_pairs_free(&p);
    ck_assert_int_eq(ini_pairs_read_file("/nonexistent/outboxd.ini", &p, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "cannot be read"));
    ini_pairs_free(&p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("inidiff");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_names_changed_added_removed);
    tcase_add_test(tc, test_same_file_nothing_changed);
    tcase_add_test(tc, test_cut_short);
    tcase_add_test(tc, test_syntax_error_names_line);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
