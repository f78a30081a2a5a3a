/*
 * test_slotcmd.c - the slot commands for each server version and the
 * [postgres] failover decision (include/pg/slotcmd.h); the failover and
 * on_slot_loss words (include/config/settings.h).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "slotcmd.h"

static char out[512], err[512];

START_TEST(test_create_plain_by_version)
{
    ck_assert_int_eq(slotcmd_create("\"s\"", "\"pgoutput\"", NULL, 15, out, sizeof(out), err,
                                    sizeof(err)),
                     0);
    ck_assert_str_eq(out, "CREATE_REPLICATION_SLOT \"s\" LOGICAL \"pgoutput\" (SNAPSHOT 'nothing')");
    /* 14 and older: the legacy keyword, the only syntax they parse */
    ck_assert_int_eq(slotcmd_create("\"s\"", "\"pgoutput\"", NULL, 14, out, sizeof(out), err,
                                    sizeof(err)),
                     0);
    ck_assert_str_eq(out, "CREATE_REPLICATION_SLOT \"s\" LOGICAL \"pgoutput\" NOEXPORT_SNAPSHOT");
}
END_TEST

START_TEST(test_create_options)
{
    struct slot_create_opts o = {.failover = true};
    ck_assert_int_eq(slotcmd_create("s", "pgoutput", &o, 17, out, sizeof(out), err, sizeof(err)),
                     0);
    ck_assert_str_eq(out, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'nothing', "
                          "FAILOVER true)");
    o.export_snapshot = true;
    ck_assert_int_eq(slotcmd_create("s", "pgoutput", &o, 18, out, sizeof(out), err, sizeof(err)),
                     0);
    ck_assert_str_eq(out, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'export', "
                          "FAILOVER true)");
    o.failover = false;
    ck_assert_int_eq(slotcmd_create("s", "pgoutput", &o, 16, out, sizeof(out), err, sizeof(err)),
                     0);
    ck_assert_str_eq(out, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'export')");
    ck_assert_int_eq(slotcmd_create("s", "pgoutput", &o, 13, out, sizeof(out), err, sizeof(err)),
                     0);
    ck_assert_str_eq(out, "CREATE_REPLICATION_SLOT s LOGICAL pgoutput EXPORT_SNAPSHOT");
}
END_TEST

START_TEST(test_failover_needs_17)
{
    struct slot_create_opts o = {.failover = true};
    out[0] = '\0';
    ck_assert_int_eq(slotcmd_create("s", "pgoutput", &o, 16, out, sizeof(out), err, sizeof(err)),
                     -1);
    ck_assert_ptr_nonnull(strstr(err, "PostgreSQL 17"));
    ck_assert_ptr_nonnull(strstr(err, "PostgreSQL 16"));
    ck_assert_int_eq(slotcmd_alter_failover("s", true, 16, out, sizeof(out), err, sizeof(err)),
                     -1);
    ck_assert_int_eq(slotcmd_alter_failover("s", true, 17, out, sizeof(out), err, sizeof(err)),
                     0);
    ck_assert_str_eq(out, "ALTER_REPLICATION_SLOT s (FAILOVER true)");
    ck_assert_int_eq(slotcmd_alter_failover("s", false, 17, out, sizeof(out), err, sizeof(err)),
                     0);
    ck_assert_str_eq(out, "ALTER_REPLICATION_SLOT s (FAILOVER false)");
}
END_TEST

START_TEST(test_too_small)
{
    char small[20];
    ck_assert_int_eq(slotcmd_create("s", "pgoutput", NULL, 17, small, sizeof(small), err,
                                    sizeof(err)),
                     -1);
}
END_TEST

START_TEST(test_parse)
{
    ck_assert_int_eq(failover_parse("auto"), FAILOVER_AUTO);
    ck_assert_int_eq(failover_parse("AUTO"), FAILOVER_AUTO);
    ck_assert_int_eq(failover_parse("on"), FAILOVER_ON);
    ck_assert_int_eq(failover_parse("true"), FAILOVER_ON);
    ck_assert_int_eq(failover_parse("off"), FAILOVER_OFF);
    ck_assert_int_eq(failover_parse("no"), FAILOVER_OFF);
    ck_assert_int_eq(failover_parse("maybe"), -1);
    ck_assert_int_eq(failover_parse(""), -1);
    ck_assert_int_eq(failover_parse(NULL), -1);
    ck_assert_str_eq(failover_name(FAILOVER_ON), "on");
    ck_assert_str_eq(failover_name(FAILOVER_OFF), "off");
    ck_assert_str_eq(failover_name(FAILOVER_AUTO), "auto");
    /* [postgres] on_slot_loss (settings.h): exactly halt or repair */
    ck_assert_int_eq(slot_loss_parse("halt"), SLOT_LOSS_HALT);
    ck_assert_int_eq(slot_loss_parse("repair"), SLOT_LOSS_REPAIR);
    ck_assert_int_eq(slot_loss_parse("Repair"), -1);
    ck_assert_int_eq(slot_loss_parse(""), -1);
    ck_assert_str_eq(slot_loss_name(SLOT_LOSS_REPAIR), "repair");
    ck_assert_str_eq(slot_loss_name(SLOT_LOSS_HALT), "halt");
}
END_TEST

START_TEST(test_wanted)
{
    err[0] = '\0';
    ck_assert_int_eq(slotcmd_failover_wanted(FAILOVER_AUTO, 17, err, sizeof(err)), 1);
    ck_assert_int_eq(slotcmd_failover_wanted(FAILOVER_AUTO, 18, err, sizeof(err)), 1);
    ck_assert_int_eq(slotcmd_failover_wanted(FAILOVER_AUTO, 16, err, sizeof(err)), 0);
    ck_assert_int_eq(slotcmd_failover_wanted(FAILOVER_OFF, 17, err, sizeof(err)), 0);
    ck_assert_int_eq(slotcmd_failover_wanted(FAILOVER_ON, 17, err, sizeof(err)), 1);
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(slotcmd_failover_wanted(FAILOVER_ON, 15, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "PostgreSQL 15"));
    ck_assert_ptr_nonnull(strstr(err, "failover = auto"));
}
END_TEST

/* A slot created on a standby never asks for FAILOVER (the server refuses
 * it there): repair on a standby with failover = auto on 17+ failed so. */
START_TEST(test_at_create)
{
    ck_assert(slotcmd_failover_at_create(1, false));
    ck_assert(!slotcmd_failover_at_create(1, true));
    ck_assert(!slotcmd_failover_at_create(0, false));
    ck_assert(!slotcmd_failover_at_create(0, true));
}
END_TEST

START_TEST(test_action)
{
    ck_assert_int_eq(slotcmd_failover_action(true, false, 17), SLOT_FAILOVER_ENABLE);
    ck_assert_int_eq(slotcmd_failover_action(true, true, 17), SLOT_FAILOVER_KEEP);
    ck_assert_int_eq(slotcmd_failover_action(false, false, 17), SLOT_FAILOVER_KEEP);
    /* off never takes away a flag an operator set */
    ck_assert_int_eq(slotcmd_failover_action(false, true, 17), SLOT_FAILOVER_LEFT_ON);
    /* below 17 there is no flag to act on */
    ck_assert_int_eq(slotcmd_failover_action(true, false, 16), SLOT_FAILOVER_KEEP);
}
END_TEST

/* An invalidated slot's cause, as the server names it: each known reason
 * its own cause and prevention (18's idle timeout named as such, not as
 * removed WAL), an unknown one named as it comes, none (before 17) the
 * usual cause said as a guess. */
START_TEST(test_lost_cause)
{
    struct slotcmd_lost w = slotcmd_lost_cause("idle_timeout");
    ck_assert_str_eq(w.label, "idle_timeout");
    ck_assert_ptr_nonnull(strstr(w.cause, "idle_replication_slot_timeout"));
    ck_assert_ptr_nonnull(w.prevent);
    ck_assert_ptr_nonnull(strstr(w.prevent, "planned_downtime"));
    w = slotcmd_lost_cause("wal_removed");
    ck_assert_str_eq(w.label, "wal_removed");
    ck_assert_ptr_nonnull(strstr(w.cause, "max_slot_wal_keep_size"));
    ck_assert_ptr_null(strstr(w.cause, "idle"));
    w = slotcmd_lost_cause("rows_removed");
    ck_assert_ptr_nonnull(strstr(w.prevent, "hot_standby_feedback"));
    w = slotcmd_lost_cause("wal_level_insufficient");
    ck_assert_ptr_nonnull(strstr(w.cause, "wal_level"));
    w = slotcmd_lost_cause("something_new");
    ck_assert_str_eq(w.label, "something_new");
    ck_assert_ptr_null(w.prevent);
    w = slotcmd_lost_cause("");
    ck_assert_str_eq(w.label, "unknown");
    ck_assert_ptr_nonnull(strstr(w.cause, "before PostgreSQL 17"));
    w = slotcmd_lost_cause(NULL);
    ck_assert_str_eq(w.label, "unknown");
}
END_TEST

static Suite *slotcmd_suite(void)
{
    Suite *s = suite_create("slotcmd");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_create_plain_by_version);
    tcase_add_test(tc, test_create_options);
    tcase_add_test(tc, test_failover_needs_17);
    tcase_add_test(tc, test_too_small);
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_wanted);
    tcase_add_test(tc, test_at_create);
    tcase_add_test(tc, test_action);
    tcase_add_test(tc, test_lost_cause);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(slotcmd_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
