/*
 * test_secrets.c - secrets from files (include/config/secrets.h): the file's
 * first line, refusals, the mode that exposes a secret, the conninfo with
 * the password put in and masked for display.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secrets.h"

static char err[512];

static void write_temp(const char *content, char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/outboxd-test-secrets.XXXXXX");
    int fd = mkstemp(out);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
}

START_TEST(test_read_first_line)
{
    static const char *const ok[] = {"pw", "pw\n", "pw\r\n", "pw\n\n"};
    for (size_t i = 0; i < 4; i++) {
        char path[64], *pw = NULL;
        write_temp(ok[i], path, sizeof(path));
        ck_assert_int_eq(secret_file_read(path, &pw, err, sizeof(err)), 0);
        ck_assert_str_eq(pw, "pw");
        free(pw);
        unlink(path);
    }
}
END_TEST

START_TEST(test_read_refusals)
{
    static const struct {
        const char *content, *why;
    } bad[] = {{"", "empty"}, {"\n", "empty"}, {"a\nb\n", "more than one line"}};
    for (size_t i = 0; i < 3; i++) {
        char path[64], *pw = NULL;
        write_temp(bad[i].content, path, sizeof(path));
        ck_assert_int_eq(secret_file_read(path, &pw, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, bad[i].why) && strstr(err, path), "err: %s", err);
        ck_assert_msg(!strstr(err, "b\n"), "the content is in the error: %s", err);
        unlink(path);
    }
    char *pw = NULL;
    ck_assert_int_eq(secret_file_read("/nonexistent/pw", &pw, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "No such file"));
}
END_TEST

START_TEST(test_modes)
{
    ck_assert(!secret_mode_exposed(0600));
    ck_assert(!secret_mode_exposed(0400));
    ck_assert(!secret_mode_exposed(0700));
    ck_assert(secret_mode_exposed(0640));
    ck_assert(secret_mode_exposed(0604));
    ck_assert(secret_mode_exposed(0644));
    char path[64], msg[512];
    write_temp("pw\n", path, sizeof(path));
    chmod(path, 0600);
    ck_assert_int_eq(secret_file_exposed(path, "the password", msg, sizeof(msg)), 0);
    chmod(path, 0644);
    ck_assert_int_eq(secret_file_exposed(path, "the password", msg, sizeof(msg)), 1);
    ck_assert_msg(strstr(msg, path) && strstr(msg, "(mode 0644)") && strstr(msg, "chmod 600"),
                  "msg: %s", msg);
    unlink(path);
    ck_assert_int_eq(secret_file_exposed(path, "the password", msg, sizeof(msg)), -1);
}
END_TEST

START_TEST(test_conninfo)
{
    char *out = NULL, shown[512];
    ck_assert_int_eq(secret_conninfo_with_password("host=db user=u", "p w'x", &out, err,
                                                   sizeof(err)),
                     0);
    ck_assert(secret_conninfo_has_password(out));
    ck_assert_ptr_nonnull(strstr(out, "password='p w\\'x'"));
    secret_conninfo_masked(out, shown, sizeof(shown));
    ck_assert_msg(!strstr(shown, "p w") && strstr(shown, "password='********'"), "%s", shown);
    free(out);
    /* a conninfo without a password is shown as it is */
    secret_conninfo_masked("postgres://u@db/app", shown, sizeof(shown));
    ck_assert_str_eq(shown, "postgres://u@db/app");
    /* an unparsable one is not shown at all */
    secret_conninfo_masked("postgres://u:S3cret%zz@db/app", shown, sizeof(shown));
    ck_assert(!strstr(shown, "S3cret"));
    ck_assert_int_eq(secret_conninfo_with_password("postgres://u:S3cret%zz@db/app", "x", &out,
                                                   err, sizeof(err)),
                     -1);
    ck_assert(!strstr(err, "S3cret"));
    ck_assert_int_eq(
        secret_conninfo_with_password("postgres://u:old@db/app", "x", &out, err, sizeof(err)),
        -1);
    ck_assert_ptr_nonnull(strstr(err, "keep one of them"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("secrets");
    TCase *tc = tcase_create("files");
    tcase_add_test(tc, test_read_first_line);
    tcase_add_test(tc, test_read_refusals);
    tcase_add_test(tc, test_modes);
    tcase_add_test(tc, test_conninfo);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
