/*
 * test_monitor.c - the monitoring connection (include/stream/monitor.h) without a
 * server: a refused connection is reported once as a failure, without
 * blocking, and retried only after the interval; an unparsable conninfo
 * with a password fails with a log line that does not show the password.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "monitor.h"

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Steps m until a step reports a failure or 5 s pass; returns the number
 * of failures seen (stepping at most 5 s). */
static int step_until_failed(struct monitor *m, struct monitor_report *rep)
{
    int64_t start = mono_ms();
    int failures = 0;
    while (mono_ms() - start < 5000) {
        int64_t t0 = mono_ms();
        monitor_step(m, mono_ms(), 0, rep);
        /* A blocking connect would wait out connect_timeout (5 s); 1 s
         * tells the two apart with room for valgrind on a busy machine
         * (200 ms failed there: 222 ms under memcheck beside other tests). */
        ck_assert_msg(mono_ms() - t0 < 1000, "monitor_step blocked for %lld ms",
                      (long long)(mono_ms() - t0));
        ck_assert(!rep->slot_answer && !rep->heartbeat_sent);
        if (rep->failed) {
            failures++;
            break;
        }
        usleep(2000);
    }
    return failures;
}

START_TEST(test_refused_connection)
{
    struct monitor_config c = {.conninfo = "host=127.0.0.1 port=1 dbname=x connect_timeout=5",
                               .slot = "s",
                               .interval_ms = 3000,
                               .heartbeat_ms = 500};
    struct monitor *m = monitor_new(&c);
    struct monitor_report rep;
    ck_assert_int_eq(step_until_failed(m, &rep), 1);
    bool w;
    ck_assert_int_eq(monitor_wait_fd(m, &w), -1); /* down: nothing to wait on */
    int64_t due = monitor_due_in(m, mono_ms());
    ck_assert_msg(due > 2000 && due <= 3000, "next attempt in %lld ms", (long long)due);
    /* stepping before the interval does nothing */
    for (int i = 0; i < 10; i++) {
        monitor_step(m, mono_ms(), 0, &rep);
        ck_assert(!rep.failed);
    }
    /* at the interval it tries (and fails) again */
    int64_t later = mono_ms() + 3000;
    monitor_step(m, later, 0, &rep);
    int failures = rep.failed ? 1 : 0;
    for (int i = 0; i < 2000 && !failures; i++) {
        usleep(2000);
        monitor_step(m, later, 0, &rep);
        failures = rep.failed;
    }
    ck_assert_int_eq(failures, 1);
    monitor_free(m);
}
END_TEST

START_TEST(test_password_not_logged)
{
    /* stderr into a file for the duration */
    char path[] = "/tmp/test_monitor_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    int saved = dup(2);
    dup2(fd, 2);
    struct monitor_config c = {.conninfo = "host=127.0.0.1 password=Sekr3t-99 port=notaport",
                               .slot = "s",
                               .interval_ms = 1000,
                               .heartbeat_ms = 0};
    struct monitor *m = monitor_new(&c);
    struct monitor_report rep;
    int failures = step_until_failed(m, &rep);
    monitor_free(m);
    dup2(saved, 2);
    close(saved);
    ck_assert_int_eq(failures, 1);
    char buf[4096] = "";
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    unlink(path);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';
    ck_assert_msg(strstr(buf, "monitor connection") != NULL, "log: %s", buf);
    ck_assert_msg(strstr(buf, "Sekr3t-99") == NULL, "the password is in the log: %s", buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("monitor");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_refused_connection);
    tcase_add_test(tc, test_password_not_logged);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
