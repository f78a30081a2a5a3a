/*
 * test_pollout.c - the polling relay's outcome queue (include/polling/pollout.h):
 * the parameters of the sent and fail statements, and what their answer
 * does (recorded, stale, the other group kept).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "pollout.h"

static struct pollout O;

static void add(enum pollout_kind k, const char *id, int64_t gen, int64_t delay,
                const char *error)
{
    ck_assert_int_eq(pollout_add(&O, k, strdup(id), gen, delay, error ? strdup(error) : NULL),
                     0);
}

/* a SENT, b retry, c SENT, d QUARANTINED, e released */
static void fill(void)
{
    memset(&O, 0, sizeof(O));
    add(OUT_SENT, "a", 1, 0, NULL);
    add(OUT_RETRY, "b", 2, 1500, "x: timed out");
    add(OUT_SENT, "c", 3, 0, NULL);
    add(OUT_QUARANTINE, "d", 4, 0, "too \"large\"");
    add(OUT_RELEASE, "e", 5, 999, NULL); /* a delay only counts for a retry */
}

START_TEST(test_params_sent)
{
    fill();
    struct pollout_params p = {0};
    ck_assert_int_eq(pollout_params(&O, true, &p), 2);
    ck_assert_str_eq(p.ids.s, "{\"a\",\"c\"}");
    ck_assert_str_eq(p.gens.s, "{\"1\",\"3\"}");
    pollout_params_free(&p);
    pollout_free(&O);
}
END_TEST

START_TEST(test_params_fail)
{
    fill();
    struct pollout_params p = {0};
    ck_assert_int_eq(pollout_params(&O, false, &p), 3);
    ck_assert_str_eq(p.ids.s, "{\"b\",\"d\",\"e\"}");
    ck_assert_str_eq(p.gens.s, "{\"2\",\"4\",\"5\"}");
    ck_assert_str_eq(p.sts.s, "{\"PENDING\",\"QUARANTINED\",\"PENDING\"}");
    ck_assert_str_eq(p.delays.s, "{\"1500\",\"0\",\"0\"}");
    ck_assert_str_eq(p.errs.s, "{\"x: timed out\",\"too \\\"large\\\"\",NULL}");
    ck_assert_str_eq(p.bumps.s, "{\"1\",\"1\",\"0\"}"); /* a release is no attempt */
    pollout_params_free(&p);
    pollout_free(&O);
}
END_TEST

static char seen[8][8];
static size_t nseen, last_nth;

static void on_stale(void *ctx, const struct pollout_entry *e, size_t nth)
{
    (void)ctx;
    strcpy(seen[nseen++], e->event_id);
    last_nth = nth;
}

START_TEST(test_done_records_and_drops_stale)
{
    fill();
    nseen = 0;
    const char *changed[] = {"e", "b"}; /* d lost its lease */
    ck_assert_uint_eq(pollout_done(&O, false, changed, 2, on_stale, NULL), 1);
    ck_assert_uint_eq(nseen, 1);
    ck_assert_str_eq(seen[0], "d");
    ck_assert_uint_eq(O.recorded[OUT_RETRY], 1);
    ck_assert_uint_eq(O.recorded[OUT_RELEASE], 1);
    ck_assert_uint_eq(O.recorded[OUT_QUARANTINE], 0);
    ck_assert_uint_eq(O.stale, 1);
    /* The SENT group stays, in order. */
    ck_assert_uint_eq(O.n, 2);
    ck_assert_str_eq(O.e[0].event_id, "a");
    ck_assert_str_eq(O.e[1].event_id, "c");
    ck_assert(pollout_has(&O, "c"));
    ck_assert(!pollout_has(&O, "b"));
    pollout_free(&O);
}
END_TEST

START_TEST(test_done_all_stale_counted)
{
    fill();
    nseen = 0;
    ck_assert_uint_eq(pollout_done(&O, true, NULL, 0, on_stale, NULL), 2);
    ck_assert_uint_eq(last_nth, 2);
    ck_assert_uint_eq(O.recorded[OUT_SENT], 0);
    ck_assert_uint_eq(O.stale, 2);
    ck_assert_uint_eq(pollout_count(&O, OUT_RETRY), 1);
    ck_assert_uint_eq(pollout_count(&O, OUT_SENT), 0);
    const char *changed[] = {"a", "c"};
    add(OUT_SENT, "a", 6, 0, NULL);
    add(OUT_SENT, "c", 7, 0, NULL);
    ck_assert_uint_eq(pollout_done(&O, true, changed, 2, NULL, NULL), 0);
    ck_assert_uint_eq(O.recorded[OUT_SENT], 2);
    ck_assert_uint_eq(O.n, 3);
    pollout_free(&O);
}
END_TEST

START_TEST(test_kind_names)
{
    ck_assert_str_eq(pollout_kind_name(OUT_SENT), "SENT");
    ck_assert_str_eq(pollout_kind_name(OUT_RETRY), "retry");
    ck_assert_str_eq(pollout_kind_name(OUT_QUARANTINE), "QUARANTINED");
    ck_assert_str_eq(pollout_kind_name(OUT_RELEASE), "release");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pollout");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_params_sent);
    tcase_add_test(tc, test_params_fail);
    tcase_add_test(tc, test_done_records_and_drops_stale);
    tcase_add_test(tc, test_done_all_stale_counted);
    tcase_add_test(tc, test_kind_names);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
