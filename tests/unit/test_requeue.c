/*
 * test_requeue.c - `outboxd requeue` without a server: the line it prints
 * per argument (polling_requeue_verdict), and the exit codes of
 * poll_requeue_run() (include/tools/requeue.h) for a bad configuration and an
 * unreachable database.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "exitcode.h"
#include "polling.h"
#include "requeue.h"

static char line[512];

/* The answer of a requeue of three ids: one done, one SENT, one missing. */
static const char *const done[] = {"0a0b0c0d-0000-0000-0000-000000000001"};
static const char *const state_ids[] = {"0a0b0c0d-0000-0000-0000-000000000001",
                                        "0a0b0c0d-0000-0000-0000-000000000002"};
static const char *const states[] = {"PENDING", "SENT"};
static const struct polling_requeue_answer ans = {done, 1, state_ids, states, 2};

START_TEST(test_verdict_requeued_in_server_form)
{
    /* The argument in upper case: matched, printed as the server has it. */
    ck_assert(polling_requeue_verdict("0A0B0C0D-0000-0000-0000-000000000001", &ans,
                                      "public.outbox_events", line, sizeof(line)));
    ck_assert_str_eq(line, "requeued 0a0b0c0d-0000-0000-0000-000000000001");
}
END_TEST

START_TEST(test_verdict_not_quarantined)
{
    ck_assert(!polling_requeue_verdict("0a0b0c0d-0000-0000-0000-000000000002", &ans,
                                       "public.outbox_events", line, sizeof(line)));
    ck_assert_str_eq(line, "not requeued 0a0b0c0d-0000-0000-0000-000000000002: it is SENT, "
                           "not QUARANTINED");
}
END_TEST

START_TEST(test_verdict_missing)
{
    ck_assert(!polling_requeue_verdict("777", &ans, "public.outbox_events", line,
                                       sizeof(line)));
    ck_assert_str_eq(line, "not requeued 777: no such event in public.outbox_events");
    /* A row that exists but was not changed is not reported as requeued. */
    struct polling_requeue_answer none = {NULL, 0, state_ids, states, 2};
    ck_assert(!polling_requeue_verdict(state_ids[0], &none, "t.x", line, sizeof(line)));
    ck_assert_str_eq(line, "not requeued 0a0b0c0d-0000-0000-0000-000000000001: it is "
                           "PENDING, not QUARANTINED");
}
END_TEST

static struct config C;

static void setup_config(const char *conninfo)
{
    char err[256];
    ck_assert_int_eq(config_init(&C), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", conninfo, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "source", "mode", "polling", err, sizeof(err)), 0);
}

START_TEST(test_run_bad_table_is_usage)
{
    char err[256];
    setup_config("host=/nonexistent-outboxd-test dbname=x connect_timeout=1");
    ck_assert_int_eq(config_set(&C, "outbox", "topic", "orders.${aggregate_type", err, sizeof(err)), 0);
    char x[] = "x", *ids[] = {x};
    ck_assert_int_eq(poll_requeue_run(&C, ids, 1), EXIT_USAGE);
    config_free(&C);
}
END_TEST

START_TEST(test_run_unreachable_is_fatal)
{
    setup_config("host=/nonexistent-outboxd-test dbname=x connect_timeout=1");
    char x[] = "x", *ids[] = {x};
    ck_assert_int_eq(poll_requeue_run(&C, ids, 1), EXIT_FATAL);
    config_free(&C);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("requeue");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_verdict_requeued_in_server_form);
    tcase_add_test(tc, test_verdict_not_quarantined);
    tcase_add_test(tc, test_verdict_missing);
    tcase_add_test(tc, test_run_bad_table_is_usage);
    tcase_add_test(tc, test_run_unreachable_is_fatal);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
