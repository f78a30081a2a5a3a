/*
 * test_offset.c - the offset file (include/offset.h): one line "X/X\n",
 * written atomically (temp file + rename), read back as 1 / 0 / -1.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "offset.h"

static char dir[256];
static char path[512];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/outboxd-test-offset.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/outboxd.offset", dir);
}

static void rm_rf(const char *d)
{
    DIR *dh = opendir(d);
    if (!dh) return;
    struct dirent *de;
    char p[1024];
    while ((de = readdir(dh)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof(p), "%s/%s", d, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_rf(p);
        else
            unlink(p);
    }
    closedir(dh);
    rmdir(d);
}

static void teardown(void) { rm_rf(dir); }

/* Whole file content into buf (NUL-terminated); returns length or -1. */
static long slurp(const char *p, char *buf, size_t cap)
{
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

static void spit(const char *p, const char *data, size_t len)
{
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Names of the entries of dir, joined with ',' (sorted is not needed: we
 * expect at most one). Returns the count. */
static int list_dir(char *names, size_t cap)
{
    DIR *dh = opendir(dir);
    ck_assert_ptr_nonnull(dh);
    int n = 0;
    names[0] = '\0';
    struct dirent *de;
    while ((de = readdir(dh)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n++) strncat(names, ",", cap - strlen(names) - 1);
        strncat(names, de->d_name, cap - strlen(names) - 1);
    }
    closedir(dh);
    return n;
}

START_TEST(test_round_trip)
{
    char err[256] = "";
    lsn_t v = 0;
    ck_assert_int_eq(offset_write(path, 0x16B374D848ULL, err, sizeof(err)), 0);
    ck_assert_int_eq(offset_read(path, &v, err, sizeof(err)), 1);
    ck_assert_uint_eq(v, 0x16B374D848ULL);
}
END_TEST

START_TEST(test_round_trip_edges)
{
    static const lsn_t vals[] = {0, 1, 0xFFFFFFFFULL, 0x100000000ULL,
                                 UINT64_MAX};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char err[256] = "";
        lsn_t v = ~vals[i];
        ck_assert_int_eq(offset_write(path, vals[i], err, sizeof(err)), 0);
        ck_assert_int_eq(offset_read(path, &v, err, sizeof(err)), 1);
        ck_assert_uint_eq(v, vals[i]);
    }
}
END_TEST

START_TEST(test_missing_file)
{
    char err[256] = "";
    lsn_t v = 0x1234;
    ck_assert_int_eq(offset_read(path, &v, err, sizeof(err)), 0);
    char p2[600];
    snprintf(p2, sizeof(p2), "%s/no/such/dir/offset", dir);
    ck_assert_int_eq(offset_read(p2, &v, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_exact_content)
{
    char err[256] = "", buf[128];
    ck_assert_int_eq(offset_write(path, 0x16B374D848ULL, err, sizeof(err)), 0);
    ck_assert_int_eq(slurp(path, buf, sizeof(buf)), 12);
    ck_assert_str_eq(buf, "16/B374D848\n");

    ck_assert_int_eq(offset_write(path, 0, err, sizeof(err)), 0);
    ck_assert_int_eq(slurp(path, buf, sizeof(buf)), 4);
    ck_assert_str_eq(buf, "0/0\n");

    ck_assert_int_eq(offset_write(path, UINT64_MAX, err, sizeof(err)), 0);
    ck_assert_str_eq((slurp(path, buf, sizeof(buf)), buf), "FFFFFFFF/FFFFFFFF\n");

    ck_assert_int_eq(offset_write(path, 0xA0000000BULL, err, sizeof(err)), 0);
    ck_assert_str_eq((slurp(path, buf, sizeof(buf)), buf), "A/B\n");
}
END_TEST

START_TEST(test_overwrite)
{
    char err[256] = "", buf[128];
    lsn_t v = 0;
    /* A longer value first, then a shorter one: no stale tail may remain. */
    ck_assert_int_eq(offset_write(path, 0xFFFFFFFFFFFFFFF0ULL, err, sizeof(err)), 0);
    ck_assert_int_eq(offset_write(path, 0x1A2BULL, err, sizeof(err)), 0);
    ck_assert_str_eq((slurp(path, buf, sizeof(buf)), buf), "0/1A2B\n");
    ck_assert_int_eq(offset_read(path, &v, err, sizeof(err)), 1);
    ck_assert_uint_eq(v, 0x1A2BULL);

    for (lsn_t l = 0x100; l < 0x100 + 50; l++) {
        ck_assert_int_eq(offset_write(path, l << 24, err, sizeof(err)), 0);
        ck_assert_int_eq(offset_read(path, &v, err, sizeof(err)), 1);
        ck_assert_uint_eq(v, l << 24);
    }
}
END_TEST

START_TEST(test_no_temp_files_left)
{
    char err[256] = "", names[1024];
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(offset_write(path, (lsn_t)i * 0x1000001ULL, err, sizeof(err)), 0);
    ck_assert_int_eq(list_dir(names, sizeof(names)), 1);
    ck_assert_str_eq(names, "outboxd.offset");
}
END_TEST

START_TEST(test_permissions_regular_file)
{
    char err[256] = "";
    ck_assert_int_eq(offset_write(path, 77, err, sizeof(err)), 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
}
END_TEST

static const char *const corrupt[] = {
    "garbage\n",        "",          "\n",        "16B374D848\n", "16/\n",
    "/B374D848\n",      "1/2/3\n",   "G/1\n",     "16/B374D848 junk\n",
    "123456789/0\n",    "16/B374D848\n17/0\n",
};

START_TEST(test_corrupt)
{
    const char *c = corrupt[_i];
    char err[256] = "";
    lsn_t v = 0x5555;
    spit(path, c, strlen(c));
    ck_assert_msg(offset_read(path, &v, err, sizeof(err)) == -1,
                  "offset_read accepted \"%s\"", c);
    ck_assert_msg(err[0] != '\0', "no reason for corrupt content \"%s\"", c);
}
END_TEST

START_TEST(test_unreadable_is_error)
{
    /* The path is a directory: it exists but cannot be read as a file. */
    char err[256] = "";
    lsn_t v = 0;
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(offset_read(path, &v, err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
}
END_TEST

START_TEST(test_write_into_missing_dir_fails)
{
    char err[256] = "", p2[600];
    snprintf(p2, sizeof(p2), "%s/missing-subdir/outboxd.offset", dir);
    ck_assert_int_eq(offset_write(p2, 42, err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
}
END_TEST

START_TEST(test_write_failure_keeps_old_value)
{
    /* The temp file cannot be created (a directory occupies its name; this
     * fails for root too, unlike a permission bit): the write fails and the
     * old file is still readable with its old value. */
    char err[256] = "", tmp[600];
    lsn_t v = 0;
    ck_assert_int_eq(offset_write(path, 0x2A00000001ULL, err, sizeof(err)), 0);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    int rc = offset_write(path, 0x99, err, sizeof(err));
    rmdir(tmp);
    ck_assert_int_eq(rc, -1);
    ck_assert(err[0] != '\0');
    ck_assert_int_eq(offset_read(path, &v, err, sizeof(err)), 1);
    ck_assert_uint_eq(v, 0x2A00000001ULL);
}
END_TEST

START_TEST(test_relative_path)
{
    /* A bare file name (the default "outboxd.offset") is relative to the
     * working directory: the temp file must land in the same directory. */
    char err[256] = "", names[1024];
    lsn_t v = 0;
    char cwd[1024];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
    ck_assert_int_eq(chdir(dir), 0);
    int w = offset_write("outboxd.offset", 0x300000004ULL, err, sizeof(err));
    int r = offset_read("outboxd.offset", &v, err, sizeof(err));
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_int_eq(w, 0);
    ck_assert_int_eq(r, 1);
    ck_assert_uint_eq(v, 0x300000004ULL);
    ck_assert_int_eq(list_dir(names, sizeof(names)), 1);
    ck_assert_str_eq(names, "outboxd.offset");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("offset");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_round_trip_edges);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_exact_content);
    tcase_add_test(tc, test_overwrite);
    tcase_add_test(tc, test_no_temp_files_left);
    tcase_add_test(tc, test_permissions_regular_file);
    tcase_add_loop_test(tc, test_corrupt, 0,
                        (int)(sizeof(corrupt) / sizeof(corrupt[0])));
    tcase_add_test(tc, test_unreadable_is_error);
    tcase_add_test(tc, test_write_into_missing_dir_fails);
    tcase_add_test(tc, test_write_failure_keeps_old_value);
    tcase_add_test(tc, test_relative_path);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
