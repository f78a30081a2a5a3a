/*
 * test_audit.c - the verify comparison (include/tools/audit.h): missing,
 * duplicates, unknown and order violations on hand-built rows and
 * messages, examples, known-only rows, the unknown-id list, topics and
 * version parsing.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"

/* ---- helpers ---- */

#define NOV INT64_MIN /* "no aggregate_version" in the helpers below */
#define T1 "outbox.event.Order"
#define T2 "outbox.event.Customer"

static struct audit *A;
static struct audit_report R;

static void setup(void)
{
    A = audit_new();
    ck_assert_ptr_nonnull(A);
    memset(&R, 0xab, sizeof(R)); /* audit_run must set every field */
}

static void teardown(void)
{
    audit_free(A);
    A = NULL;
}

static struct slice S(const char *s) {
    return (struct slice){s, s ? strlen(s) : 0};
}

static void
add_row_full(const char *id, const char *topic, const char *key, int64_t version,
             bool in_scope)
{
    struct audit_row r = {.event_id = S(id),
                          .topic = topic,
                          .key = S(key),
                          .has_version = version != NOV,
                          .version = version,
                          .in_scope = in_scope};
    ck_assert_int_eq(audit_add_row(A, &r), 0);
}

/* An in-scope row. */
static void row(const char *id, const char *topic, const char *key, int64_t version)
{
    add_row_full(id, topic, key, version, true);
}

static void msg(const char *topic, int32_t partition, int64_t offset, const char *key,
                const char *id, int64_t version)
{
    struct audit_msg m = {.topic = topic,
                          .partition = partition,
                          .offset = offset,
                          .key = S(key),
                          .event_id = S(id),
                          .has_version = version != NOV,
                          .version = version};
    ck_assert_int_eq(audit_add_message(A, &m), 0);
}

static void run(void)
{
    ck_assert_int_eq(audit_run(A, &R), 0);
}

#define SLICE_EQ(sl, str)                                                                  \
    do {                                                                                   \
        ck_assert_ptr_nonnull((sl).data);                                                  \
        ck_assert_uint_eq((sl).len, strlen(str));                                          \
        ck_assert_mem_eq((sl).data, (str), strlen(str));                                   \
    } while (0)

static void assert_counts(size_t missing, size_t dups, size_t dup_events, size_t unknown,
                          size_t regressions, size_t splits)
{
    ck_assert_uint_eq(R.missing, missing);
    ck_assert_uint_eq(R.duplicates, dups);
    ck_assert_uint_eq(R.duplicate_events, dup_events);
    ck_assert_uint_eq(R.unknown, unknown);
    ck_assert_uint_eq(R.version_regressions, regressions);
    ck_assert_uint_eq(R.split_keys, splits);
    ck_assert_uint_eq(R.order_violations, regressions + splits);
}

/* ---- dead letters ---- */

static void dlq(int32_t partition, int64_t offset, const char *key, const char *id,
                const char *code)
{
    struct audit_msg m = {.topic = "outbox.dlq",
                          .partition = partition,
                          .offset = offset,
                          .key = S(key),
                          .event_id = S(id),
                          .dlq_error = S(code)};
    ck_assert_int_eq(audit_add_dead_letter(A, &m), 0);
}

/* A row only in the dead-letter topic is dead-lettered, not missing, and
 * does not fail the audit; one in its topic as well is delivered. */
START_TEST(test_dead_lettered_not_missing)
{
    row("e1", T1, "k1", 1);
    row("e2", T1, NULL, NOV); /* NULL aggregate_id: dead-lettered */
    row("e3", T1, "k3", 1);   /* missing */
    row("e4", T1, "k4", 1);   /* delivered, and dead-lettered too */
    msg(T1, 0, 0, "k1", "e1", 1);
    msg(T1, 0, 1, "k4", "e4", 1);
    dlq(0, 7, NULL, "e2", "NULL_AGGREGATE_ID");
    dlq(0, 8, "k4", "e4", "MSG_SIZE_TOO_LARGE");
    run();
    assert_counts(1, 0, 0, 0, 0, 0);
    ck_assert_uint_eq(R.dead_lettered, 1);
    ck_assert_uint_eq(R.dead_letters, 2);
    ck_assert_uint_eq(R.dead_letters_unmatched, 0);
    ck_assert_uint_eq(R.messages, 2); /* dead-letter records are not messages */
    ck_assert(audit_report_ok(&R, false) == false); /* e3 is missing */
    ck_assert_uint_eq(R.nexamples[AK_DEAD_LETTERED], 1);
    const struct audit_example *e = &R.examples[AK_DEAD_LETTERED][0];
    SLICE_EQ(e->event_id, "e2");
    ck_assert_str_eq(e->topic, T1); /* the topic it would have gone to */
    ck_assert_int_eq(e->partition, 0);
    ck_assert_int_eq(e->offset, 7);
    SLICE_EQ(e->dlq_error, "NULL_AGGREGATE_ID");
    SLICE_EQ(R.examples[AK_MISSING][0].event_id, "e3");
    ck_assert_ptr_null(R.examples[AK_MISSING][0].dlq_error.data);
}
END_TEST

START_TEST(test_only_dead_lettered_is_ok)
{
    row("e1", T1, "k1", 1);
    dlq(0, 0, "k1", "e1", "BAD_TOPIC");
    run();
    ck_assert_uint_eq(R.missing, 0);
    ck_assert_uint_eq(R.dead_lettered, 1);
    ck_assert(audit_report_ok(&R, false));
    ck_assert_uint_eq(R.unknown, 0);
}
END_TEST

/* Records of no row (or without an event_id: an undecodable record) are
 * unmatched, not unknown; their ids are offered for the look-up, and an
 * out-of-scope row matches. */
START_TEST(test_dead_letters_unmatched)
{
    add_row_full("old", T1, "k", 1, false);
    dlq(0, 0, NULL, NULL, "INVALID_RECORD");
    dlq(0, 1, "k", "ghost", "BAD_TOPIC");
    dlq(0, 2, "k", "old", "BAD_TOPIC");
    run();
    ck_assert_uint_eq(R.dead_letters, 3);
    ck_assert_uint_eq(R.dead_letters_unmatched, 2);
    ck_assert_uint_eq(R.dead_lettered, 0);
    ck_assert_uint_eq(R.unknown, 0);
    size_t n;
    const struct slice *ids = audit_unknown_ids(A, &n);
    ck_assert_uint_eq(n, 1);
    SLICE_EQ(ids[0], "ghost");
    /* looked up: an in-scope row after all */
    row("ghost", T1, "k", NOV);
    run();
    ck_assert_uint_eq(R.dead_letters_unmatched, 1);
    ck_assert_uint_eq(R.dead_lettered, 1);
    ck_assert_uint_eq(R.missing, 0);
}
END_TEST

/* ---- clean and empty ---- */

START_TEST(test_empty)
{
    run();
    ck_assert_uint_eq(R.rows, 0);
    ck_assert_uint_eq(R.known_rows, 0);
    ck_assert_uint_eq(R.messages, 0);
    ck_assert_uint_eq(R.topics, 0);
    assert_counts(0, 0, 0, 0, 0, 0);
    for (int k = 0; k < AK__COUNT; k++)
        ck_assert_uint_eq(R.nexamples[k], 0);
    ck_assert(audit_report_ok(&R, false));
    const char **topics = (const char **)1;
    size_t n = 99;
    ck_assert_int_eq(audit_topics(A, &topics, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(topics);
    audit_unknown_ids(A, &n);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(test_clean)
{
    row("e1", T1, "order-1", 1);
    row("e2", T1, "order-1", 2);
    row("e3", T2, "cust-1", NOV);
    row("e4", T1, "order-2", 1);
    msg(T1, 0, 0, "order-1", "e1", 1);
    msg(T1, 0, 1, "order-1", "e2", 2);
    msg(T2, 3, 0, "cust-1", "e3", NOV);
    msg(T1, 2, 0, "order-2", "e4", 1);
    run();
    ck_assert_uint_eq(R.rows, 4);
    ck_assert_uint_eq(R.known_rows, 4);
    ck_assert_uint_eq(R.messages, 4);
    ck_assert_uint_eq(R.topics, 2);
    assert_counts(0, 0, 0, 0, 0, 0);
    ck_assert(audit_report_ok(&R, false));
    ck_assert(audit_report_ok(&R, true));
}
END_TEST

START_TEST(test_rows_only_all_missing)
{
    row("e1", T1, "k", 1);
    row("e2", T1, "k", 2);
    run();
    assert_counts(2, 0, 0, 0, 0, 0);
    ck_assert(!audit_report_ok(&R, false));
}
END_TEST

START_TEST(test_messages_only_all_unknown)
{
    msg(T1, 0, 0, "k", "e1", 1);
    msg(T1, 0, 1, "k", "e2", 2);
    run();
    ck_assert_uint_eq(R.rows, 0);
    ck_assert_uint_eq(R.topics, 0);
    assert_counts(0, 0, 0, 2, 0, 0);
    ck_assert(audit_report_ok(&R, false)); /* unknown is reported, not failed */
}
END_TEST

/* ---- missing ---- */

START_TEST(test_missing)
{
    row("e1", T1, "order-1", 1);
    row("e2", T1, "order-1", 2);
    row("e3", T2, "cust-1", NOV);
    msg(T1, 0, 0, "order-1", "e1", 1);
    run();
    assert_counts(2, 0, 0, 0, 0, 0);
    ck_assert(!audit_report_ok(&R, false));
    ck_assert_uint_eq(R.nexamples[AK_MISSING], 2);
    const struct audit_example *e = &R.examples[AK_MISSING][0];
    SLICE_EQ(e->event_id, "e2"); /* rows in the order given */
    ck_assert_str_eq(e->topic, T1);
    SLICE_EQ(e->key, "order-1");
    ck_assert_int_eq(e->partition, -1);
    ck_assert_int_eq(e->offset, -1);
    ck_assert(e->has_version);
    ck_assert_int_eq(e->version, 2);
    e = &R.examples[AK_MISSING][1];
    SLICE_EQ(e->event_id, "e3");
    ck_assert_str_eq(e->topic, T2);
    ck_assert(!e->has_version);
}
END_TEST

/* A message with the event_id in another topic still counts as delivered. */
START_TEST(test_found_in_other_topic)
{
    row("e1", T1, "k", 1);
    msg(T2, 0, 0, "k", "e1", 1);
    run();
    assert_counts(0, 0, 0, 0, 0, 0);
}
END_TEST

START_TEST(test_missing_unrenderable_and_null_id)
{
    row("e1", NULL, "k", 1); /* topic could not be rendered */
    row(NULL, T1, "k", 2);   /* NULL event_id */
    msg(T1, 0, 0, "k", "e9", 3);
    run();
    ck_assert_uint_eq(R.topics, 1); /* only T1: the NULL topic is no topic */
    ck_assert_uint_eq(R.missing, 2);
    ck_assert_uint_eq(R.unknown, 1);
    ck_assert_ptr_null(R.examples[AK_MISSING][0].topic);
    SLICE_EQ(R.examples[AK_MISSING][0].event_id, "e1");
    ck_assert_ptr_null(R.examples[AK_MISSING][1].event_id.data);
    ck_assert_str_eq(R.examples[AK_MISSING][1].topic, T1);
}
END_TEST

START_TEST(test_examples_capped)
{
    char ids[15][8];
    for (int i = 0; i < 15; i++) {
        snprintf(ids[i], sizeof(ids[i]), "m%02d", i);
        row(ids[i], T1, "k", i);
    }
    run();
    ck_assert_uint_eq(R.missing, 15);
    ck_assert_uint_eq(R.nexamples[AK_MISSING], AUDIT_MAX_EXAMPLES);
    SLICE_EQ(R.examples[AK_MISSING][9].event_id, "m09");
}
END_TEST

/* ---- duplicates ---- */

START_TEST(test_duplicates_do_not_fail)
{
    row("e1", T1, "k", 1);
    row("e2", T1, "k", 2);
    row("e3", T1, "k", 3);
    msg(T1, 0, 0, "k", "e1", 1);
    msg(T1, 0, 1, "k", "e2", 2);
    msg(T1, 0, 2, "k", "e3", 3);
    msg(T1, 0, 3, "k", "e1", 1); /* e1 three times */
    msg(T1, 0, 4, "k", "e1", 1);
    msg(T1, 0, 5, "k", "e2", 2); /* e2 twice */
    run();
    assert_counts(0, 3, 2, 0, 0, 0);
    ck_assert(audit_report_ok(&R, false));
    ck_assert(!audit_report_ok(&R, true)); /* exactly_once promises none */
    ck_assert_uint_eq(R.nexamples[AK_DUPLICATE], 2);
    const struct audit_example *e = &R.examples[AK_DUPLICATE][0];
    SLICE_EQ(e->event_id, "e1");
    ck_assert_uint_eq(e->copies, 3);
    ck_assert_int_eq(e->partition, 0);
    ck_assert_int_eq(e->offset, 3); /* the first extra copy */
    e = &R.examples[AK_DUPLICATE][1];
    SLICE_EQ(e->event_id, "e2");
    ck_assert_uint_eq(e->copies, 2);
    ck_assert_int_eq(e->offset, 5);
}
END_TEST

/* A re-delivered older event later in the partition is a duplicate, not
 * an order violation: only first occurrences are ordered. */
START_TEST(test_redelivery_is_not_violation)
{
    row("e1", T1, "k", 1);
    row("e2", T1, "k", 2);
    row("e3", T1, "k", 3);
    msg(T1, 1, 10, "k", "e1", 1);
    msg(T1, 1, 11, "k", "e2", 2);
    msg(T1, 1, 12, "k", "e3", 3);
    msg(T1, 1, 13, "k", "e1", 1); /* redelivered after a restart */
    msg(T1, 1, 14, "k", "e2", 2);
    msg(T1, 1, 15, "k", "e3", 3);
    run();
    assert_counts(0, 3, 3, 0, 0, 0);
    ck_assert(audit_report_ok(&R, false));
}
END_TEST

/* Only first occurrences count, but a first occurrence that goes back is a
 * violation even when a later copy of a newer event follows. */
START_TEST(test_violation_on_first_occurrence_only)
{
    row("e1", T1, "k", 1);
    row("e2", T1, "k", 2);
    msg(T1, 0, 0, "k", "e2", 2);
    msg(T1, 0, 1, "k", "e1", 1); /* first e1, after e2: violation */
    msg(T1, 0, 2, "k", "e2", 2); /* copy: ignored for order */
    msg(T1, 0, 3, "k", "e1", 1); /* copy: not a second violation */
    run();
    assert_counts(0, 2, 2, 0, 1, 0);
    ck_assert_uint_eq(R.nexamples[AK_ORDER], 1);
    const struct audit_example *e = &R.examples[AK_ORDER][0];
    SLICE_EQ(e->event_id, "e1");
    ck_assert_int_eq(e->offset, 1);
    ck_assert(!e->split);
    ck_assert_int_eq(e->version, 1);
    ck_assert_int_eq(e->prev_version, 2);
}
END_TEST

/* ---- unknown ---- */

START_TEST(test_unknown)
{
    row("e1", T1, "k", 1);
    msg(T1, 0, 0, "k", "e1", 1);
    msg(T1, 0, 1, "k", "x1", NOV);  /* not in the table */
    msg(T1, 0, 2, "k", "x1", NOV);  /* twice: 2 unknown, 1 id, 1 duplicate */
    msg(T1, 0, 3, "k", NULL, NOV);  /* no event_id header */
    msg(T1, 0, 4, NULL, NULL, NOV); /* nothing at all */
    run();
    assert_counts(0, 1, 1, 4, 0, 0);
    ck_assert(audit_report_ok(&R, false));
    ck_assert_uint_eq(R.nexamples[AK_UNKNOWN], 4);
    SLICE_EQ(R.examples[AK_UNKNOWN][0].event_id, "x1");
    ck_assert_int_eq(R.examples[AK_UNKNOWN][0].offset, 1);
    ck_assert_int_eq(R.examples[AK_UNKNOWN][1].offset, 2);
    ck_assert_ptr_null(R.examples[AK_UNKNOWN][2].event_id.data);
    ck_assert_int_eq(R.examples[AK_UNKNOWN][2].offset, 3);
    ck_assert_ptr_null(R.examples[AK_UNKNOWN][3].key.data);
    size_t n;
    const struct slice *ids = audit_unknown_ids(A, &n);
    ck_assert_uint_eq(n, 1);
    SLICE_EQ(ids[0], "x1");
}
END_TEST

/* Rows outside the scope (older than --since, or found by re-checking
 * unknown ids) make messages known without being checked for missing. */
START_TEST(test_known_rows)
{
    row("e2", T1, "k", 2);
    add_row_full("e1", T1, "k", 1, false);  /* older, delivered */
    add_row_full("e0", T2, "k0", 1, false); /* older, never delivered */
    msg(T1, 0, 0, "k", "e1", 1);
    msg(T1, 0, 1, "k", "e2", 2);
    msg(T1, 0, 2, "k", "x9", NOV);
    run();
    ck_assert_uint_eq(R.rows, 1);
    ck_assert_uint_eq(R.known_rows, 3);
    ck_assert_uint_eq(R.topics, 1); /* T2 only has an out-of-scope row */
    assert_counts(0, 0, 0, 1, 0, 0);

    /* The re-check flow: x9 turns out to be in the table. */
    size_t n;
    const struct slice *ids = audit_unknown_ids(A, &n);
    ck_assert_uint_eq(n, 1);
    struct audit_row known = {.event_id = ids[0], .in_scope = false};
    ck_assert_int_eq(audit_add_row(A, &known), 0);
    run();
    assert_counts(0, 0, 0, 0, 0, 0);
    ck_assert_uint_eq(R.known_rows, 4);
    audit_unknown_ids(A, &n);
    ck_assert_uint_eq(n, 0);
}
END_TEST

/* event_ids are bytes: embedded NULs and prefixes do not match. */
START_TEST(test_ids_are_bytes)
{
    struct audit_row r = {
        .event_id = {"a\0b", 3}, .topic = T1, .key = S("k"), .in_scope = true};
    ck_assert_int_eq(audit_add_row(A, &r), 0);
    row("ab", T1, "k", NOV);
    struct audit_msg m = {
        .topic = T1, .partition = 0, .offset = 0, .key = S("k"), .event_id = {"a\0c", 3}};
    ck_assert_int_eq(audit_add_message(A, &m), 0);
    msg(T1, 0, 1, "k", "a", NOV);
    m.event_id = (struct slice){"a\0b", 3};
    m.offset = 2;
    ck_assert_int_eq(audit_add_message(A, &m), 0);
    run();
    ck_assert_uint_eq(R.missing, 1); /* "ab" */
    SLICE_EQ(R.examples[AK_MISSING][0].event_id, "ab");
    ck_assert_uint_eq(R.unknown, 2); /* "a\0c" and "a" */
}
END_TEST

/* ---- order ---- */

START_TEST(test_version_regression)
{
    row("e1", T1, "k", 1);
    row("e2", T1, "k", 3);
    row("e3", T1, "k", 2);
    row("e4", T1, "k", 4);
    msg(T1, 2, 0, "k", "e1", 1);
    msg(T1, 2, 1, "k", "e2", 3);
    msg(T1, 2, 2, "k", "e3", 2); /* 2 after 3 */
    msg(T1, 2, 3, "k", "e4", 4);
    run();
    assert_counts(0, 0, 0, 0, 1, 0);
    ck_assert(!audit_report_ok(&R, false));
    const struct audit_example *e = &R.examples[AK_ORDER][0];
    SLICE_EQ(e->event_id, "e3");
    ck_assert_str_eq(e->topic, T1);
    SLICE_EQ(e->key, "k");
    ck_assert_int_eq(e->partition, 2);
    ck_assert_int_eq(e->offset, 2);
    ck_assert_int_eq(e->version, 2);
    ck_assert_int_eq(e->prev_version, 3);
}
END_TEST

/* Compared with the highest earlier version, not just the previous one. */
START_TEST(test_regression_against_max)
{
    msg(T1, 0, 0, "k", "e1", 5);
    msg(T1, 0, 1, "k", "e2", 2); /* < 5 */
    msg(T1, 0, 2, "k", "e3", 3); /* > 2 but < 5 */
    msg(T1, 0, 3, "k", "e4", 5); /* equal: fine */
    msg(T1, 0, 4, "k", "e5", 6);
    run();
    ck_assert_uint_eq(R.version_regressions, 2);
    ck_assert_int_eq(R.examples[AK_ORDER][1].prev_version, 5);
    ck_assert_int_eq(R.examples[AK_ORDER][1].version, 3);
}
END_TEST

/* With --since, an event older than the window that shows up again after
 * newer ones is a re-delivery: not ordered. In scope, the same is a
 * violation. */
START_TEST(test_out_of_scope_redelivery_not_ordered)
{
    add_row_full("e1", T1, "k", 1, false);
    row("e2", T1, "k", 2);
    row("e3", T1, "k", 3);
    msg(T1, 0, 10, "k", "e2", 2);
    msg(T1, 0, 11, "k", "e3", 3);
    msg(T1, 0, 12, "k", "e1", 1);
    run();
    assert_counts(0, 0, 0, 0, 0, 0);
    ck_assert(audit_report_ok(&R, false));
}
END_TEST

START_TEST(test_in_scope_late_event_is_violation)
{
    row("e1", T1, "k", 1);
    row("e2", T1, "k", 2);
    row("e3", T1, "k", 3);
    msg(T1, 0, 10, "k", "e2", 2);
    msg(T1, 0, 11, "k", "e3", 3);
    msg(T1, 0, 12, "k", "e1", 1);
    run();
    assert_counts(0, 0, 0, 0, 1, 0);
    ck_assert(!audit_report_ok(&R, false));
}
END_TEST

/* Events no longer in the table (rows deleted after publishing) are
 * unknown, and still ordered. */
START_TEST(test_unknown_events_ordered)
{
    msg(T1, 0, 0, "k", "x1", 2);
    msg(T1, 0, 1, "k", "x2", 1);
    run();
    assert_counts(0, 0, 0, 2, 1, 0);
}
END_TEST

/* Messages arrive in any order; the audit orders them by offset. */
START_TEST(test_input_order_irrelevant)
{
    msg(T1, 0, 2, "k", "e3", 3);
    msg(T1, 0, 0, "k", "e1", 1);
    msg(T1, 0, 1, "k", "e2", 2);
    run();
    ck_assert_uint_eq(R.order_violations, 0);
}
END_TEST

/* Versions are compared per topic + key: other keys, other topics and
 * null keys do not interfere. */
START_TEST(test_order_per_key_and_topic)
{
    msg(T1, 0, 0, "a", "e1", 5);
    msg(T1, 0, 1, "b", "e2", 1); /* other key */
    msg(T2, 0, 0, "a", "e3", 1); /* same key, other topic */
    msg(T1, 0, 2, NULL, "e4", 9);
    msg(T1, 1, 0, NULL, "e5", 1); /* null keys: never checked */
    run();
    ck_assert_uint_eq(R.order_violations, 0);
}
END_TEST

START_TEST(test_null_versions_not_checked)
{
    row("e1", T1, "k", NOV);
    row("e2", T1, "k", NOV);
    row("e3", T1, "k", 2);
    row("e4", T1, "k", 3);
    msg(T1, 0, 0, "k", "e1", NOV);
    msg(T1, 0, 1, "k", "e3", 2);
    msg(T1, 0, 2, "k", "e2", NOV); /* no version between 2 and 3 */
    msg(T1, 0, 3, "k", "e4", 3);
    run();
    assert_counts(0, 0, 0, 0, 0, 0);
    ck_assert(audit_report_ok(&R, false));
}
END_TEST

START_TEST(test_key_split_across_partitions)
{
    msg(T1, 0, 0, "k", "e1", 5);
    msg(T1, 1, 0, "k", "e2", 1); /* other partition: split, not a regression */
    msg(T1, 3, 0, "k", "e3", 2); /* a third partition: still one split key */
    msg(T1, 1, 1, "k", "e4", 0); /* per partition: 0 after 1 on partition 1 */
    msg(T1, 2, 0, "j", "e5", 1);
    msg(T1, 2, 1, "j", "e6", 2);
    run();
    assert_counts(0, 0, 0, 6, 1, 1);
    ck_assert(!audit_report_ok(&R, false));
    ck_assert_uint_eq(R.nexamples[AK_ORDER], 2);
    const struct audit_example *split = &R.examples[AK_ORDER][0];
    ck_assert(split->split);
    SLICE_EQ(split->event_id, "e2");
    ck_assert_int_eq(split->partition, 1);
    ck_assert_int_eq(split->first_partition, 0);
    const struct audit_example *reg = &R.examples[AK_ORDER][1];
    ck_assert(!reg->split);
    SLICE_EQ(reg->event_id, "e4");
    ck_assert_int_eq(reg->prev_version, 1);
}
END_TEST

/* A redelivery to another partition is still a key on two partitions. */
START_TEST(test_split_by_duplicate)
{
    row("e1", T1, "k", 1);
    msg(T1, 0, 0, "k", "e1", 1);
    msg(T1, 2, 0, "k", "e1", 1);
    run();
    assert_counts(0, 1, 1, 0, 0, 1);
}
END_TEST

/* ---- topics, re-runs, versions ---- */

START_TEST(test_topics)
{
    row("e1", T1, "k", 1);
    row("e2", T2, "k", 1);
    row("e3", T1, "k", 1);
    add_row_full("e4", "outbox.event.Old", "k", 1, false);
    msg("outbox.event.Other", 0, 0, "k", "e1", 1);
    const char **topics;
    size_t n;
    ck_assert_int_eq(audit_topics(A, &topics, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(topics[0], T1);
    ck_assert_str_eq(topics[1], T2);
    free(topics);
}
END_TEST

/* Many topics: the interning table grows and keeps every name. */
START_TEST(test_many_topics)
{
    char name[32], id[32];
    for (int i = 0; i < 500; i++) {
        snprintf(name, sizeof(name), "topic-%d", i);
        snprintf(id, sizeof(id), "id-%d", i);
        row(id, name, "k", 1);
        msg(name, 0, 0, "k", id, 1);
    }
    run();
    ck_assert_uint_eq(R.topics, 500);
    assert_counts(0, 0, 0, 0, 0, 0);
    const char **topics;
    size_t n;
    ck_assert_int_eq(audit_topics(A, &topics, &n), 0);
    ck_assert_uint_eq(n, 500);
    ck_assert_str_eq(topics[0], "topic-0");
    ck_assert_str_eq(topics[499], "topic-499");
    free(topics);
}
END_TEST

START_TEST(test_run_twice_same_result)
{
    row("e1", T1, "k", 2);
    row("e2", T1, "k", 1);
    msg(T1, 0, 0, "k", "e1", 2);
    msg(T1, 0, 1, "k", "e2", 1);
    msg(T1, 0, 2, "k", "e1", 2);
    run();
    assert_counts(0, 1, 1, 0, 1, 0);
    run();
    assert_counts(0, 1, 1, 0, 1, 0);
    ck_assert_uint_eq(R.nexamples[AK_ORDER], 1);
}
END_TEST

START_TEST(test_input_is_copied)
{
    char id[] = "e1", key[] = "k", topic[] = T1;
    struct audit_row r = {
        .event_id = S(id), .topic = topic, .key = S(key), .in_scope = true};
    ck_assert_int_eq(audit_add_row(A, &r), 0);
    memset(id, 'z', 2);
    memset(topic, 'z', strlen(topic));
    run();
    SLICE_EQ(R.examples[AK_MISSING][0].event_id, "e1");
    ck_assert_str_eq(R.examples[AK_MISSING][0].topic, T1);
}
END_TEST

START_TEST(test_parse_version)
{
    static const struct {
        const char *s;
        bool ok;
        int64_t v;
    } cases[] = {
        {"0", true, 0},
        {"7", true, 7},
        {"-12", true, -12},
        {"9223372036854775807", true, INT64_MAX},
        {"-9223372036854775808", true, INT64_MIN},
        {"9223372036854775808", false, 0},
        {"-9223372036854775809", false, 0},
        {"", false, 0},
        {"-", false, 0},
        {" 1", false, 0},
        {"1 ", false, 0},
        {"1a", false, 0},
        {"+1", false, 0},
        {"1.5", false, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t v = 42;
        ck_assert_msg(audit_parse_version(cases[i].s, strlen(cases[i].s), &v) ==
                          cases[i].ok,
                      "case \"%s\"", cases[i].s);
        if (cases[i].ok) ck_assert_int_eq(v, cases[i].v);
    }
    int64_t v;
    ck_assert(audit_parse_version("123456", 3, &v)); /* uses len, not NUL */
    ck_assert_int_eq(v, 123);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("audit");

    TCase *tb = tcase_create("basics");
    tcase_add_checked_fixture(tb, setup, teardown);
    tcase_add_test(tb, test_empty);
    tcase_add_test(tb, test_clean);
    tcase_add_test(tb, test_rows_only_all_missing);
    tcase_add_test(tb, test_messages_only_all_unknown);
    suite_add_tcase(s, tb);

    TCase *te = tcase_create("events");
    tcase_add_checked_fixture(te, setup, teardown);
    tcase_add_test(te, test_missing);
    tcase_add_test(te, test_found_in_other_topic);
    tcase_add_test(te, test_missing_unrenderable_and_null_id);
    tcase_add_test(te, test_examples_capped);
    tcase_add_test(te, test_duplicates_do_not_fail);
    tcase_add_test(te, test_redelivery_is_not_violation);
    tcase_add_test(te, test_violation_on_first_occurrence_only);
    tcase_add_test(te, test_unknown);
    tcase_add_test(te, test_known_rows);
    tcase_add_test(te, test_ids_are_bytes);
    tcase_add_test(te, test_dead_lettered_not_missing);
    tcase_add_test(te, test_only_dead_lettered_is_ok);
    tcase_add_test(te, test_dead_letters_unmatched);
    suite_add_tcase(s, te);

    TCase *to = tcase_create("order");
    tcase_add_checked_fixture(to, setup, teardown);
    tcase_add_test(to, test_version_regression);
    tcase_add_test(to, test_regression_against_max);
    tcase_add_test(to, test_out_of_scope_redelivery_not_ordered);
    tcase_add_test(to, test_in_scope_late_event_is_violation);
    tcase_add_test(to, test_unknown_events_ordered);
    tcase_add_test(to, test_input_order_irrelevant);
    tcase_add_test(to, test_order_per_key_and_topic);
    tcase_add_test(to, test_null_versions_not_checked);
    tcase_add_test(to, test_key_split_across_partitions);
    tcase_add_test(to, test_split_by_duplicate);
    suite_add_tcase(s, to);

    TCase *tm = tcase_create("misc");
    tcase_add_checked_fixture(tm, setup, teardown);
    tcase_add_test(tm, test_topics);
    tcase_add_test(tm, test_many_topics);
    tcase_add_test(tm, test_run_twice_same_result);
    tcase_add_test(tm, test_input_is_copied);
    tcase_add_test(tm, test_parse_version);
    suite_add_tcase(s, tm);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
