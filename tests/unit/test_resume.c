/*
 * test_resume.c - where a start may resume (include/ack/resume.h): the offset
 * file against the server, the configuration and the slot; the flush
 * clamp; when keepalive-only advances are written.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resume.h"

static struct resume_server server(void)
{
    struct resume_server s = {.timeline = 1,
                              .wal_end = 0x5000000,
                              .slot = "outboxd",
                              .plugin = "pgoutput",
                              .slot_exists = true,
                              .slot_confirmed = 0x1A2000};
    snprintf(s.system, sizeof(s.system), "7312000000000000001");
    snprintf(s.database, sizeof(s.database), "outbox");
    return s;
}

static struct offset_state file_of(const struct resume_server *s, lsn_t lsn)
{
    struct offset_state f;
    resume_identity(s, lsn, &f);
    return f;
}

START_TEST(test_file_ahead_of_slot_is_normal)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, 0x1A2B3C);
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(!d.refused);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert_uint_eq(d.start, 0x1A2B3C);
    ck_assert_str_eq(d.note, "");
    f.lsn = s.slot_confirmed; /* equal */
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
}
END_TEST

START_TEST(test_no_file)
{
    struct resume_server s = server();
    struct resume_decision d;
    resume_decide(NULL, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_FROM_SLOT);
    ck_assert_uint_eq(d.start, 0x1A2000);
    s.slot_exists = false;
    resume_decide(NULL, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_NO_SLOT);
    ck_assert(!d.refused);
}
END_TEST

/* system, database, slot, plugin of the file differing in turn. */
START_TEST(test_other_stream_refused)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, 0x1A2B3C);
    static const char *const names[] = {"system identifier", "database", "slot", "plugin"};
    switch (_i) {
    case 0: snprintf(f.system, sizeof(f.system), "7399999999999999999"); break;
    case 1: snprintf(f.database, sizeof(f.database), "other"); break;
    case 2: snprintf(f.slot, sizeof(f.slot), "slot_a"); break;
    default: snprintf(f.plugin, sizeof(f.plugin), "wal2json"); break;
    }
    struct resume_decision d;
    resume_decide(&f, &s, "/var/lib/outboxd/offset", "/etc/o.ini", &d);
    ck_assert(d.refused);
    ck_assert_int_eq(d.verdict, RESUME_OTHER_STREAM);
    ck_assert_msg(strstr(d.message, names[_i]), "%s", d.message);
    /* both sides, and the way out */
    ck_assert_msg(strstr(d.message, f.system) && strstr(d.message, s.system) &&
                      strstr(d.message, "0/1A2B3C") && strstr(d.message, "slot outboxd") &&
                      strstr(d.message, "Point [offsets] file") &&
                      strstr(d.message, "move /var/lib/outboxd/offset away"),
                  "%s", d.message);
}
END_TEST

START_TEST(test_beyond_wal_refused)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, UINT64_MAX);
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(d.refused);
    ck_assert_int_eq(d.verdict, RESUME_BEYOND_WAL);
    ck_assert_msg(strstr(d.message, "FFFFFFFF/FFFFFFFF") && strstr(d.message, "0/5000000") &&
                      strstr(d.message, "accept-slot -c /etc/o.ini"),
                  "%s", d.message);
    f.lsn = s.wal_end; /* at the end exactly: fine */
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(!d.refused);
    /* a format 1 file is checked the same */
    f.has_identity = false;
    f.format = 1;
    f.lsn = s.wal_end + 1;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_BEYOND_WAL);
}
END_TEST

START_TEST(test_slot_ahead_refused)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, 0x1A1C00);
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(d.refused);
    ck_assert_int_eq(d.verdict, RESUME_SLOT_AHEAD);
    ck_assert_msg(strstr(d.message, "0/1A2000") && strstr(d.message, "0/1A1C00") &&
                      strstr(d.message, "1 kB") && strstr(d.message, "may never have been sent") &&
                      strstr(d.message, "outboxd accept-slot -c /etc/o.ini"),
                  "%s", d.message);
}
END_TEST

/* The slot confirmed past the file's lsn but not past its acked: this
 * stream confirmed it (exactly_once stores its position only at a commit,
 * and with pgoutput that lsn is capped by the last publication proof while
 * the slot follows later proofs). Everything before acked was delivered:
 * resumed at the slot's position, not refused (the simulator's seed 13,
 * tests/sim, was refused before), also when shared (seed 60 took over and
 * dropped the progress). Past acked it stays refused (or, shared, taken
 * over), and past a fork the acked counts for nothing. */
START_TEST(test_slot_between_lsn_and_acked)
{
    struct resume_server s = server(); /* slot at 0x1A2000 */
    struct offset_state f = file_of(&s, 0x1A1C00);
    f.has_acked = true;
    f.acked_lsn = 0x1A3000;
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_msg(!d.refused, "%s", d.message);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert_uint_eq(d.start, 0x1A2000);
    f.acked_lsn = 0x1A2000; /* at acked: the same */
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    /* a shared slot (hot_standby) there too: the file's progress stands
     * (exactly_once's record is the pair's; taking over dropped it) */
    s.shared = true;
    f.acked_lsn = 0x1A3000;
    f.has_progress = true;
    f.txn_lsn = 0x1A3000;
    f.txn_acked = 11;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert_uint_eq(d.start, 0x1A2000);
    f.acked_lsn = 0x1A1E00; /* acked behind a shared slot: the file is stale */
    f.txn_lsn = 0x1A1E00;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_TAKE_OVER);
    s.shared = false; /* not shared: moved by someone else */
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_SLOT_AHEAD);
    f.has_progress = false;
    /* a fork before the slot: the acked is of the old history */
    struct offset_state g = file_of(&s, 0x4000000);
    g.has_acked = true;
    g.acked_lsn = 0x4100000;
    s.timeline = 2;
    s.slot_confirmed = 0x3850000;
    s.file_timeline_end = 0x3800000;
    s.wal_end = 0x3900000; /* the file is not of this server's WAL (else the
                            * stream crossed the switch: test_crossed_the_switch) */
    resume_decide(&g, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_SLOT_AHEAD);
}
END_TEST

/* hot_standby: a shared slot confirmed ahead of the file was moved by the
 * other instance: taken over at the slot's position, with a note; what
 * is refused without it stays refused with it. */
START_TEST(test_shared_slot_taken_over)
{
    struct resume_server s = server();
    s.shared = true;
    struct offset_state f = file_of(&s, 0x1A1C00);
    f.has_progress = true; /* stale: inside a transaction the other one finished */
    f.txn_lsn = 0x1A1D00;
    f.txn_acked = 3;
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(!d.refused);
    ck_assert_int_eq(d.verdict, RESUME_TAKE_OVER);
    ck_assert_uint_eq(d.start, 0x1A2000);
    ck_assert_msg(strstr(d.note, "taking over") && strstr(d.note, "0/1A2000") &&
                      strstr(d.note, "0/1A1C00") && strstr(d.note, "1 kB") &&
                      strstr(d.note, "hot_standby = true"),
                  "%s", d.note);
    ck_assert(!d.note_is_warning);
    /* a new timeline's warning is kept with it */
    s.timeline = 2;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_TAKE_OVER);
    ck_assert_msg(strstr(d.note, "taking over") && strstr(d.note, "timeline is 2"), "%s",
                  d.note);
    ck_assert(d.note_is_warning);
    s.timeline = 1;
    /* the file at or ahead of the slot: the file, as without sharing */
    f.lsn = 0x1A2000;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert_uint_eq(d.start, 0x1A2000);
    f.lsn = 0x1A3000;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert_uint_eq(d.start, 0x1A3000);
    /* still refused: another stream, beyond the WAL, a lost slot */
    f.lsn = 0x1A1C00;
    snprintf(f.slot, sizeof(f.slot), "other");
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_OTHER_STREAM);
    f = file_of(&s, UINT64_MAX);
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_BEYOND_WAL);
    f = file_of(&s, 0x1A1C00);
    s.slot_exists = false;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_SLOT_LOST);
    /* not shared: refused, and the refusal names the key */
    s = server();
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_SLOT_AHEAD);
    ck_assert_msg(strstr(d.message, "hot_standby = true"), "%s", d.message);
}
END_TEST

START_TEST(test_slot_lost)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, 0x1A2B3C);
    snprintf(f.system, sizeof(f.system), "7300000000000000009");
    s.slot_exists = false;
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(d.refused);
    ck_assert_int_eq(d.verdict, RESUME_SLOT_LOST);
    ck_assert_msg(strstr(d.message, "does not exist on this server (system 7312000000000000001") &&
                      strstr(d.message, "up to 0/1A2B3C on system 7300000000000000009") &&
                      strstr(d.message, "failover") && strstr(d.message, "mistyped") &&
                      strstr(d.message, "move /x away"),
                  "%s", d.message);
    ck_assert_ptr_null(strstr(d.message, "was dropped"));
}
END_TEST

START_TEST(test_notes)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, 0x1A2B3C);
    struct resume_decision d;
    f.timeline = 1;
    s.timeline = 2;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(!d.refused);
    ck_assert_msg(strstr(d.note, "timeline is 2") && strstr(d.note, "promoted"), "%s", d.note);
    ck_assert(d.note_is_warning);
    f.has_identity = false;
    f.format = 1;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(!d.refused);
    ck_assert_msg(strstr(d.note, "format 1") && strstr(d.note, "rewritten"), "%s", d.note);
}
END_TEST

/* A standby promoted before it had what outboxd streamed from the old
 * primary: the file (timeline 1) is past where timeline 1 ended on the
 * promoted server (timeline 2). The start is that end, not the file. */
START_TEST(test_past_the_fork)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, 0x4000000); /* timeline 1 */
    s.timeline = 2;
    s.wal_end = 0x3900000; /* the file is even beyond the new WAL */
    s.slot_confirmed = 0x3000000; /* the synced slot, behind the fork */
    s.file_timeline_end = 0x3800000;
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_msg(!d.refused, "%s", d.message);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert(d.forked);
    ck_assert_uint_eq(d.start, 0x3800000);
    ck_assert(d.note_is_warning);
    ck_assert_msg(strstr(d.note, "0/4000000 on timeline 1") && strstr(d.note, "0/3800000") &&
                      strstr(d.note, "unknown") && strstr(d.note, "synchronized_standby_slots"),
                  "%s", d.note);
    /* without the history (unknown end) the old refusal stands */
    s.file_timeline_end = 0;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_BEYOND_WAL);
    /* within the old timeline's part of the history: the file as is */
    s.file_timeline_end = 0x4000000;
    s.wal_end = 0x5000000;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert(!d.forked);
    ck_assert_uint_eq(d.start, 0x4000000);
    ck_assert_msg(strstr(d.note, "timeline is 2"), "%s", d.note);
    /* the slot confirmed past the fork: someone else moved it */
    s.file_timeline_end = 0x3800000;
    s.slot_confirmed = 0x3850000;
    s.wal_end = 0x3900000;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_SLOT_AHEAD);
}
END_TEST

/* The stream crossed the timeline switch itself (issue 58): outboxd's
 * walsender on a standby outlived the standby's switch to the timeline of
 * another, promoted, standby, and the file (timeline 1) holds a position
 * on timeline 2, past where timeline 1 ended here; the slot was confirmed
 * there by that stream. Resumed from the file, not taken for a fork (nor
 * refused as a slot someone else moved, as pg17.standby_promote_other's
 * restart was). */
START_TEST(test_crossed_the_switch)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, 0x1527FA8); /* timeline 1 */
    s.timeline = 2;
    s.wal_end = 0x1530000;
    s.file_timeline_end = 0x1527DF0;
    s.slot_confirmed = 0x1527FA8;
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_msg(!d.refused, "%s", d.message);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert(!d.forked);
    ck_assert_uint_eq(d.start, 0x1527FA8);
    ck_assert_msg(strstr(d.note, "timeline is 2"), "%s", d.note);
    /* killed after the write, before the status: the slot between the
     * end of timeline 1 and the file */
    s.slot_confirmed = 0x1527F00;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert_int_eq(d.verdict, RESUME_FROM_FILE);
    ck_assert_uint_eq(d.start, 0x1527FA8);
    /* the slot at or before the end of timeline 1: a fork, as before */
    s.slot_confirmed = 0x1527DF0;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(d.forked);
    ck_assert_uint_eq(d.start, 0x1527DF0);
}
END_TEST

/* The server is on an older timeline than the file: an old primary. */
START_TEST(test_old_timeline_refused)
{
    struct resume_server s = server();
    struct offset_state f = file_of(&s, 0x10000);
    f.timeline = 3;
    s.timeline = 2;
    struct resume_decision d;
    resume_decide(&f, &s, "/x", "/etc/o.ini", &d);
    ck_assert(d.refused);
    ck_assert_int_eq(d.verdict, RESUME_OLD_TIMELINE);
    ck_assert_msg(strstr(d.message, "timeline 2") && strstr(d.message, "timeline 3") &&
                      strstr(d.message, "old primary"),
                  "%s", d.message);
}
END_TEST

START_TEST(test_timeline_history)
{
    lsn_t end = 0;
    const char *h = "1\t0/3000158\tno recovery target specified\n"
                    "\n"
                    "2\t0/5A00000\tbefore 2026-12-03 17:00:00+00\n";
    ck_assert(resume_timeline_end(h, 1, &end));
    ck_assert_uint_eq(end, 0x3000158);
    ck_assert(resume_timeline_end(h, 2, &end));
    ck_assert_uint_eq(end, 0x5A00000);
    ck_assert(!resume_timeline_end(h, 3, &end));
    ck_assert(!resume_timeline_end("", 1, &end));
    ck_assert(!resume_timeline_end(NULL, 1, &end));
    ck_assert(!resume_timeline_end("12\t0/1\tx\n", 1, &end)); /* 12 is not 1 */
    ck_assert(!resume_timeline_end("1\tgarbage\tx\n", 1, &end));
    /* no trailing newline, no reason */
    ck_assert(resume_timeline_end("1\t0/16B3740", 1, &end));
    ck_assert_uint_eq(end, 0x16B3740);
}
END_TEST

START_TEST(test_clamp_flush)
{
    ck_assert_uint_eq(resume_clamp_flush(100, 200, 50), 100);
    ck_assert_uint_eq(resume_clamp_flush(300, 200, 50), 200); /* never past received */
    ck_assert_uint_eq(resume_clamp_flush(300, 0, 250), 250);  /* nothing received yet */
    ck_assert_uint_eq(resume_clamp_flush(300, 0, 300), 300);
}
END_TEST

START_TEST(test_write_due)
{
    /* nothing new */
    ck_assert(!resume_write_due(100, 100, true, true, 5000, 0, 1000));
    /* events ACKed: at once */
    ck_assert(resume_write_due(200, 100, true, false, 5000, 4990, 1000));
    /* forced: at once */
    ck_assert(resume_write_due(200, 100, false, true, 5000, 4990, 1000));
    /* keepalive only: once per interval */
    ck_assert(!resume_write_due(200, 100, false, false, 5000, 4990, 1000));
    ck_assert(!resume_write_due(200, 100, false, false, 5989, 4990, 1000));
    ck_assert(resume_write_due(200, 100, false, false, 5990, 4990, 1000));
}
END_TEST

START_TEST(test_bytes)
{
    char b[32];
    ck_assert_str_eq(resume_bytes(312, b, sizeof(b)), "312 bytes");
    ck_assert_str_eq(resume_bytes(1024, b, sizeof(b)), "1 kB");
    ck_assert_str_eq(resume_bytes(3u << 20, b, sizeof(b)), "3 MB");
}
END_TEST

/* A stored count inside a transaction is used only for the events it
 * counted: the same fingerprint, or none (formats 3 to 5). */
START_TEST(test_progress_usable)
{
    struct offset_state st = {.format = 6, .has_progress = true, .txn_lsn = 0x200,
                              .txn_acked = 5000, .txn_events = 0xabc};
    ck_assert(resume_progress_usable(&st, 0xabc));
    ck_assert(!resume_progress_usable(&st, 0xabd));
    st.format = 5;
    st.txn_events = 0;
    ck_assert(resume_progress_usable(&st, 0xabd));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resume");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_file_ahead_of_slot_is_normal);
    tcase_add_test(tc, test_no_file);
    tcase_add_loop_test(tc, test_other_stream_refused, 0, 4);
    tcase_add_test(tc, test_beyond_wal_refused);
    tcase_add_test(tc, test_slot_ahead_refused);
    tcase_add_test(tc, test_slot_between_lsn_and_acked);
    tcase_add_test(tc, test_shared_slot_taken_over);
    tcase_add_test(tc, test_slot_lost);
    tcase_add_test(tc, test_notes);
    tcase_add_test(tc, test_past_the_fork);
    tcase_add_test(tc, test_crossed_the_switch);
    tcase_add_test(tc, test_old_timeline_refused);
    tcase_add_test(tc, test_timeline_history);
    tcase_add_test(tc, test_clamp_flush);
    tcase_add_test(tc, test_write_due);
    tcase_add_test(tc, test_bytes);
    tcase_add_test(tc, test_progress_usable);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
