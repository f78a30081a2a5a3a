/*
 * test_outbox.c - outbox row -> Kafka message (include/message/outbox.h): topic
 * templates, table matching, event building (topic, key, value, headers).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "lsn.h"
#include "outbox.h"
#include "relcache.h"

/* ---- helpers: hand-built relations and rows ---- */

static struct relation *rel_new(const char *nsp, const char *name,
                                const char *const *cols, int ncols)
{
    /* relation_new(): each gets its own layout_id, as from a decoder. */
    struct relation *r = relation_new(16384, nsp, name, 'd', ncols);
    ck_assert_ptr_nonnull(r);
    for (int i = 0; i < ncols; i++) {
        r->cols[i].name = strdup(cols[i]);
        r->cols[i].typid = 25; /* text */
        r->cols[i].typmod = -1;
        r->cols[i].flags = 0;
    }
    return r;
}

static void rel_free(struct relation *r) { relation_free(r); }

static struct col_value TXT(const char *s)
{
    struct col_value v = {CV_TEXT, (uint32_t)strlen(s), s};
    return v;
}
static struct col_value BYTES(const char *s, size_t n)
{
    struct col_value v = {CV_TEXT, (uint32_t)n, s};
    return v;
}
static const struct col_value NUL_V = {CV_NULL, 0, NULL};
static const struct col_value UNCH_V = {CV_UNCHANGED, 0, NULL};

#define SLICE_EQ(sl, str)                                                     \
    do {                                                                      \
        const char *_want = (str);                                            \
        ck_assert_uint_eq((sl).len, strlen(_want));                           \
        if ((sl).len) ck_assert_mem_eq((sl).data, _want, (sl).len);           \
    } while (0)

static char err[512];

#define ERR_HAS(s)                                                            \
    ck_assert_msg(strstr(err, (s)) != NULL,                                   \
                  "err \"%s\" does not mention \"%s\"", err, (s))

/* The standard outbox layout. */
static const char *const std_cols[] = {"event_id",          "aggregate_type",
                                       "aggregate_id",      "aggregate_version",
                                       "event_type",        "payload",
                                       "created_at"};
#define NSTD 7

static const char *const default_columns[OC__COUNT] = {
    "event_id", "aggregate_type", "aggregate_id",
    "aggregate_version", "event_type", "payload"};

#define EVENT_ID "0f8fad5b-d9cb-469f-a165-70867728950e"

/* ---- topic templates ---- */

static int render(const char *tmpl, const struct relation *rel,
                  const struct col_value *vals, int nvals, char *out,
                  size_t outlen)
{
    char perr[256] = "";
    struct topic_template *t = topic_template_parse(tmpl, perr, sizeof(perr));
    ck_assert_msg(t != NULL, "parse \"%s\": %s", tmpl, perr);
    err[0] = '\0';
    int n = topic_template_render(t, rel, vals, nvals, out, outlen, err, sizeof(err));
    topic_template_free(t);
    return n;
}

START_TEST(test_template_literal)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT("{}"), TXT("now")};
    char out[64];
    ck_assert_int_eq(render("fixed.topic", r, v, NSTD, out, sizeof(out)), 11);
    ck_assert_str_eq(out, "fixed.topic");
    /* A literal template does not even need values. */
    ck_assert_int_eq(render("fixed.topic", r, NULL, 0, out, sizeof(out)), 11);
    ck_assert_str_eq(out, "fixed.topic");
    rel_free(r);
}
END_TEST

START_TEST(test_template_substitution)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("OrderCreated"), TXT("{}"), TXT("now")};
    char out[64];
    ck_assert_int_eq(render("outbox.event.${aggregate_type}", r, v, NSTD, out, sizeof(out)), 18);
    ck_assert_str_eq(out, "outbox.event.Order");
    ck_assert_int_eq(render("${aggregate_type}", r, v, NSTD, out, sizeof(out)), 5);
    ck_assert_str_eq(out, "Order");
    ck_assert_int_eq(render("${aggregate_type}-suffix", r, v, NSTD, out, sizeof(out)), 12);
    ck_assert_str_eq(out, "Order-suffix");
    rel_free(r);
}
END_TEST

START_TEST(test_template_several)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT("{}"), TXT("now")};
    char out[128];
    int n = render("${aggregate_type}.${event_type}-x${aggregate_type}", r, v, NSTD,
                   out, sizeof(out));
    ck_assert_str_eq(out, "Order.Created-xOrder");
    ck_assert_int_eq(n, 20);
    n = render("${aggregate_type}${event_type}", r, v, NSTD, out, sizeof(out));
    ck_assert_str_eq(out, "OrderCreated");
    ck_assert_int_eq(n, 12);
    rel_free(r);
}
END_TEST

START_TEST(test_template_any_column)
{
    static const char *const cols[] = {"event_id", "tenant", "aggregate_type",
                                       "aggregate_id", "event_type", "payload"};
    struct relation *r = rel_new("public", "outbox_events", cols, 6);
    struct col_value v[6] = {TXT(EVENT_ID), TXT("acme"), TXT("Order"),
                             TXT("o-1"), TXT("Created"), TXT("{}")};
    char out[64];
    ck_assert_int_eq(render("t.${tenant}.${aggregate_type}", r, v, 6, out, sizeof(out)), 12);
    ck_assert_str_eq(out, "t.acme.Order");
    ck_assert_int_eq(render("${payload}", r, v, 6, out, sizeof(out)), 2);
    ck_assert_str_eq(out, "{}");
    rel_free(r);
}
END_TEST

START_TEST(test_template_value_not_nul_terminated)
{
    /* Values are byte slices: only len bytes may be used. */
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    const char buf[] = "OrderJUNKJUNK";
    struct col_value v[NSTD] = {TXT(EVENT_ID), BYTES(buf, 5), TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT("{}"), TXT("now")};
    char out[64];
    ck_assert_int_eq(render("x.${aggregate_type}.y", r, v, NSTD, out, sizeof(out)), 9);
    ck_assert_str_eq(out, "x.Order.y");
    rel_free(r);
}
END_TEST

static const char *const bad_templates[] = {
    "outbox.${aggregate_type", "outbox.${}", "${", "${}", "a${b", "x.${a}.${",
};

START_TEST(test_template_parse_errors)
{
    char perr[256] = "";
    struct topic_template *t = topic_template_parse(bad_templates[_i], perr, sizeof(perr));
    ck_assert_msg(t == NULL, "template \"%s\" accepted", bad_templates[_i]);
    ck_assert_msg(perr[0] != '\0', "no reason for \"%s\"", bad_templates[_i]);
}
END_TEST

START_TEST(test_template_missing_column)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT("{}"), TXT("now")};
    char out[64];
    ck_assert_int_eq(render("t.${tenant}", r, v, NSTD, out, sizeof(out)), -1);
    ERR_HAS("tenant");
    /* Case matters: column names are identifiers as stored. */
    ck_assert_int_eq(render("t.${Aggregate_Type}", r, v, NSTD, out, sizeof(out)), -1);
    ERR_HAS("Aggregate_Type");
    rel_free(r);
}
END_TEST

START_TEST(test_template_column_beyond_values)
{
    /* The relation has the column but the row carries fewer values. */
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT("{}"), TXT("now")};
    char out[64];
    ck_assert_int_eq(render("t.${created_at}", r, v, 6, out, sizeof(out)), -1);
    ck_assert(err[0] != '\0');
    rel_free(r);
}
END_TEST

START_TEST(test_template_null_value)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), NUL_V, TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT("{}"), TXT("now")};
    char out[64];
    ck_assert_int_eq(render("outbox.event.${aggregate_type}", r, v, NSTD, out, sizeof(out)), -1);
    ck_assert(err[0] != '\0');
    rel_free(r);
}
END_TEST

START_TEST(test_template_too_long)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT("{}"), TXT("now")};
    char out[64];
    /* "outbox.event.Order" is 18 bytes: needs 19 with the NUL. */
    ck_assert_int_eq(render("outbox.event.${aggregate_type}", r, v, NSTD, out, 19), 18);
    ck_assert_str_eq(out, "outbox.event.Order");
    memset(out, 'Z', sizeof(out));
    ck_assert_int_eq(render("outbox.event.${aggregate_type}", r, v, NSTD, out, 18), -1);
    ck_assert(err[0] != '\0');
    ck_assert_int_eq(out[18], 'Z'); /* no write past outlen */
    memset(out, 'Z', sizeof(out));
    ck_assert_int_eq(render("outbox.event.${aggregate_type}", r, v, NSTD, out, 10), -1);
    ck_assert_int_eq(out[10], 'Z');
    /* Literal part alone too long. */
    memset(out, 'Z', sizeof(out));
    ck_assert_int_eq(render("a-very-long-literal-topic-name", r, v, NSTD, out, 8), -1);
    ck_assert_int_eq(out[8], 'Z');
    rel_free(r);
}
END_TEST

/* ---- outbox_map ---- */

START_TEST(test_map_init_schema_table)
{
    struct outbox_map m;
    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(outbox_map_init(&m, "app.events", default_columns,
                                     "outbox.event.${aggregate_type}", err, sizeof(err)), 0);
    ck_assert_str_eq(m.schema, "app");
    ck_assert_str_eq(m.table, "events");
    ck_assert_ptr_nonnull(m.topic);
    for (int i = 0; i < OC__COUNT; i++) {
        ck_assert_str_eq(m.columns[i], default_columns[i]);
        ck_assert_ptr_ne(m.columns[i], default_columns[i]); /* owned copy */
    }
    outbox_map_free(&m);
}
END_TEST

START_TEST(test_map_init_bare_table)
{
    struct outbox_map m;
    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(outbox_map_init(&m, "outbox_events", default_columns,
                                     "fixed", err, sizeof(err)), 0);
    ck_assert_str_eq(m.schema, "public");
    ck_assert_str_eq(m.table, "outbox_events");
    outbox_map_free(&m);
}
END_TEST

START_TEST(test_map_init_bad_topic)
{
    struct outbox_map m;
    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox_events", default_columns,
                                     "outbox.${aggregate_type", err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
}
END_TEST

START_TEST(test_is_table)
{
    struct outbox_map m;
    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(outbox_map_init(&m, "app.events", default_columns, "t", err, sizeof(err)), 0);
    struct relation *yes = rel_new("app", "events", std_cols, NSTD);
    struct relation *pub = rel_new("public", "events", std_cols, NSTD);
    struct relation *other = rel_new("app", "events2", std_cols, NSTD);
    struct relation *prefix = rel_new("app", "event", std_cols, NSTD);
    struct relation *swapped = rel_new("events", "app", std_cols, NSTD);
    ck_assert(outbox_is_table(&m, yes));
    ck_assert(!outbox_is_table(&m, pub));
    ck_assert(!outbox_is_table(&m, other));
    ck_assert(!outbox_is_table(&m, prefix));
    ck_assert(!outbox_is_table(&m, swapped));
    outbox_map_free(&m);

    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(outbox_map_init(&m, "events", default_columns, "t", err, sizeof(err)), 0);
    ck_assert(outbox_is_table(&m, pub));
    ck_assert(!outbox_is_table(&m, yes));
    outbox_map_free(&m);
    rel_free(yes);
    rel_free(pub);
    rel_free(other);
    rel_free(prefix);
    rel_free(swapped);
}
END_TEST

/* ---- outbox_event_build ---- */

static struct outbox_map M;

static void map_setup(void)
{
    memset(&M, 0, sizeof(M));
    err[0] = '\0';
    ck_assert_int_eq(outbox_map_init(&M, "public.outbox_events", default_columns,
                                     "outbox.event.${aggregate_type}", err, sizeof(err)), 0);
}

static void map_teardown(void) { outbox_map_free(&M); }

static void check_header(const struct outbox_event *ev, int i, const char *name,
                         const char *value)
{
    ck_assert_msg(i < ev->nheaders, "header %d (%s) missing, nheaders %d", i, name,
                  ev->nheaders);
    ck_assert_ptr_nonnull(ev->headers[i].name);
    ck_assert_str_eq(ev->headers[i].name, name);
    ck_assert_msg(ev->headers[i].value.len == strlen(value),
                  "header %s len %zu want %zu", name, ev->headers[i].value.len,
                  strlen(value));
    ck_assert_mem_eq(ev->headers[i].value.data, value, strlen(value));
}

#define PAYLOAD "{\"total\": 12.5, \"name\": \"Zo\xc3\xab \xe2\x9c\x93\", \"emoji\": \"\xf0\x9f\x93\xa6\"}"

START_TEST(test_build_standard)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("order-42"), TXT("7"),
                                TXT("OrderCreated"), TXT(PAYLOAD),
                                TXT("2024-01-01 00:00:00+00")};
    struct outbox_event ev;
    memset(&ev, 0xA5, sizeof(ev));
    int rc = outbox_event_build(&M, r, v, NSTD, 0x16B374D848ULL, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert_str_eq(ev.topic, "outbox.event.Order");
    SLICE_EQ(ev.key, "order-42");
    SLICE_EQ(ev.value, PAYLOAD);
    ck_assert(!ev.value_null);
    SLICE_EQ(ev.event_id, EVENT_ID);
    ck_assert_str_eq(ev.commit_lsn, "16/B374D848");
    ck_assert_int_eq(ev.nheaders, 6);
    check_header(&ev, 0, "event_id", EVENT_ID);
    check_header(&ev, 1, "event_type", "OrderCreated");
    check_header(&ev, 2, "aggregate_type", "Order");
    check_header(&ev, 3, "aggregate_id", "order-42");
    check_header(&ev, 4, "aggregate_version", "7");
    check_header(&ev, 5, "commit_lsn", "16/B374D848");
    rel_free(r);
}
END_TEST

START_TEST(test_build_borrows_and_uses_len)
{
    /* Slices point into the row (borrowed) and respect len: buffers are not
     * NUL-terminated where the value ends. */
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    static const char rowbuf[] =
        "abc-1XXOrderYYkey-9ZZ3WWTypeQQ{\"a\":1}RRtsSS";
    struct col_value v[NSTD] = {BYTES(rowbuf, 5),      BYTES(rowbuf + 7, 5),
                                BYTES(rowbuf + 14, 5), BYTES(rowbuf + 21, 1),
                                BYTES(rowbuf + 24, 4), BYTES(rowbuf + 30, 7),
                                BYTES(rowbuf + 39, 2)};
    struct outbox_event ev;
    memset(&ev, 0, sizeof(ev));
    int rc = outbox_event_build(&M, r, v, NSTD, 0x100000000ULL, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert_str_eq(ev.topic, "outbox.event.Order");
    SLICE_EQ(ev.key, "key-9");
    SLICE_EQ(ev.value, "{\"a\":1}");
    SLICE_EQ(ev.event_id, "abc-1");
    ck_assert_ptr_eq(ev.key.data, rowbuf + 14);
    ck_assert_ptr_eq(ev.value.data, rowbuf + 30);
    ck_assert_str_eq(ev.commit_lsn, "1/0");
    ck_assert_int_eq(ev.nheaders, 6);
    check_header(&ev, 0, "event_id", "abc-1");
    check_header(&ev, 1, "event_type", "Type");
    check_header(&ev, 2, "aggregate_type", "Order");
    check_header(&ev, 3, "aggregate_id", "key-9");
    check_header(&ev, 4, "aggregate_version", "3");
    check_header(&ev, 5, "commit_lsn", "1/0");
    rel_free(r);
}
END_TEST

START_TEST(test_build_binaryish_payload)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    static const char bin[] = "\x01\x02\x7f\x80\xfe\xff\xc3\x28 \t\r\n\\x00end";
    size_t binlen = sizeof(bin) - 1;
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("Blob"), BYTES(bin, binlen), TXT("now")};
    struct outbox_event ev;
    int rc = outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert_uint_eq(ev.value.len, binlen);
    ck_assert_mem_eq(ev.value.data, bin, binlen);
    ck_assert(!ev.value_null);
    ck_assert_str_eq(ev.commit_lsn, "0/1");
    rel_free(r);
}
END_TEST

START_TEST(test_build_empty_payload)
{
    /* An empty string is not NULL. */
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("T"), TXT(""), TXT("now")};
    struct outbox_event ev;
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), 0);
    ck_assert(!ev.value_null);
    ck_assert_uint_eq(ev.value.len, 0);
    rel_free(r);
}
END_TEST

START_TEST(test_build_null_payload)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("OrderDeleted"), NUL_V, TXT("now")};
    struct outbox_event ev;
    int rc = outbox_event_build(&M, r, v, NSTD, 0x16B374D848ULL, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert(ev.value_null);
    ck_assert_uint_eq(ev.value.len, 0);
    SLICE_EQ(ev.key, "o-1");
    ck_assert_str_eq(ev.topic, "outbox.event.Order");
    ck_assert_int_eq(ev.nheaders, 6);
    check_header(&ev, 1, "event_type", "OrderDeleted");
    check_header(&ev, 5, "commit_lsn", "16/B374D848");
    rel_free(r);
}
END_TEST

START_TEST(test_build_null_version)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), NUL_V,
                                TXT("OrderCreated"), TXT("{}"), TXT("now")};
    struct outbox_event ev;
    int rc = outbox_event_build(&M, r, v, NSTD, 0x16B374D848ULL, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert_int_eq(ev.nheaders, 5);
    check_header(&ev, 0, "event_id", EVENT_ID);
    check_header(&ev, 1, "event_type", "OrderCreated");
    check_header(&ev, 2, "aggregate_type", "Order");
    check_header(&ev, 3, "aggregate_id", "o-1");
    check_header(&ev, 4, "commit_lsn", "16/B374D848");
    rel_free(r);
}
END_TEST

START_TEST(test_build_no_version_column)
{
    static const char *const cols[] = {"event_id", "aggregate_type", "aggregate_id",
                                       "event_type", "payload"};
    struct relation *r = rel_new("public", "outbox_events", cols, 5);
    struct col_value v[5] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"),
                             TXT("OrderCreated"), TXT("{\"x\":1}")};
    struct outbox_event ev;
    int rc = outbox_event_build(&M, r, v, 5, 0x2A, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert_str_eq(ev.topic, "outbox.event.Order");
    SLICE_EQ(ev.key, "o-1");
    SLICE_EQ(ev.value, "{\"x\":1}");
    ck_assert_int_eq(ev.nheaders, 5);
    check_header(&ev, 0, "event_id", EVENT_ID);
    check_header(&ev, 1, "event_type", "OrderCreated");
    check_header(&ev, 2, "aggregate_type", "Order");
    check_header(&ev, 3, "aggregate_id", "o-1");
    check_header(&ev, 4, "commit_lsn", "0/2A");
    rel_free(r);
}
END_TEST

START_TEST(test_build_column_order)
{
    static const char *const cols[] = {"created_at", "payload", "event_type",
                                       "aggregate_version", "aggregate_id",
                                       "id_extra", "aggregate_type", "event_id"};
    struct relation *r = rel_new("public", "outbox_events", cols, 8);
    struct col_value v[8] = {TXT("now"),    TXT("[1,2]"), TXT("Shipped"), TXT("12"),
                             TXT("ship-3"), TXT("zzz"),   TXT("Shipment"), TXT("e-77")};
    struct outbox_event ev;
    int rc = outbox_event_build(&M, r, v, 8, 0xFFFFFFFFFFFFFFFFULL, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert_str_eq(ev.topic, "outbox.event.Shipment");
    SLICE_EQ(ev.key, "ship-3");
    SLICE_EQ(ev.value, "[1,2]");
    SLICE_EQ(ev.event_id, "e-77");
    ck_assert_str_eq(ev.commit_lsn, "FFFFFFFF/FFFFFFFF");
    ck_assert_int_eq(ev.nheaders, 6);
    check_header(&ev, 0, "event_id", "e-77");
    check_header(&ev, 1, "event_type", "Shipped");
    check_header(&ev, 2, "aggregate_type", "Shipment");
    check_header(&ev, 3, "aggregate_id", "ship-3");
    check_header(&ev, 4, "aggregate_version", "12");
    check_header(&ev, 5, "commit_lsn", "FFFFFFFF/FFFFFFFF");
    rel_free(r);
}
END_TEST

/* The map caches column positions per relation layout: alternating two
 * layouts of the outbox (an ALTER TABLE between transactions, a decoder
 * restart) and a non-outbox table through one map must give each row its
 * own columns, including when a new layout reuses the old one's memory. */
START_TEST(test_build_layout_cache)
{
    static const char *const cols_b[] = {"payload", "event_id", "aggregate_id",
                                         "aggregate_type", "event_type"};
    struct relation *a = rel_new("public", "outbox_events", std_cols, NSTD);
    struct relation *b = rel_new("public", "outbox_events", cols_b, 5);
    struct relation *other = rel_new("public", "orders", std_cols, NSTD);
    struct col_value va[NSTD] = {TXT("ea"), TXT("TA"), TXT("ka"), TXT("7"),
                                 TXT("Xa"), TXT("{\"a\":1}"), TXT("now")};
    struct col_value vb[5] = {TXT("{\"b\":2}"), TXT("eb"), TXT("kb"), TXT("TB"), TXT("Xb")};
    struct outbox_event ev;
    for (int round = 0; round < 3; round++) {
        ck_assert(outbox_is_table(&M, a));
        ck_assert(!outbox_is_table(&M, other));
        ck_assert_int_eq(outbox_event_build(&M, a, va, NSTD, 1, &ev, err, sizeof(err)), 0);
        SLICE_EQ(ev.key, "ka");
        SLICE_EQ(ev.event_id, "ea");
        ck_assert_str_eq(ev.topic, "outbox.event.TA");
        ck_assert_int_eq(ev.nheaders, 6); /* with aggregate_version */
        ck_assert(outbox_is_table(&M, b));
        ck_assert_int_eq(outbox_event_build(&M, b, vb, 5, 1, &ev, err, sizeof(err)), 0);
        SLICE_EQ(ev.key, "kb");
        SLICE_EQ(ev.value, "{\"b\":2}");
        SLICE_EQ(ev.event_id, "eb");
        ck_assert_str_eq(ev.topic, "outbox.event.TB");
        ck_assert_int_eq(ev.nheaders, 5); /* b has no aggregate_version */
    }
    /* A new layout in (possibly) the same memory as the freed one. */
    rel_free(b);
    struct relation *c = rel_new("public", "outbox_events", cols_b, 5);
    free(c->cols[2].name);
    c->cols[2].name = strdup("aggregate_type"); /* swap two columns' roles */
    free(c->cols[3].name);
    c->cols[3].name = strdup("aggregate_id");
    ck_assert_int_eq(outbox_event_build(&M, c, vb, 5, 1, &ev, err, sizeof(err)), 0);
    SLICE_EQ(ev.key, "TB");
    ck_assert_str_eq(ev.topic, "outbox.event.kb");
    rel_free(a);
    rel_free(c);
    rel_free(other);
}
END_TEST

START_TEST(test_build_custom_columns)
{
    static const char *const custom[OC__COUNT] = {"id", "agg_type", "agg_id",
                                                  "version", "kind", "body"};
    struct outbox_map m;
    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(outbox_map_init(&m, "events.stream", custom,
                                     "evt.${agg_type}.${kind}", err, sizeof(err)), 0);
    static const char *const cols[] = {"body", "kind", "id", "agg_id", "agg_type",
                                       "version",
                                       /* decoys with the default names */
                                       "event_id", "payload"};
    struct relation *r = rel_new("events", "stream", cols, 8);
    ck_assert(outbox_is_table(&m, r));
    struct col_value v[8] = {TXT("BODY"), TXT("Paid"), TXT("ID-1"), TXT("inv-5"),
                             TXT("Invoice"), TXT("3"), TXT("DECOY-ID"), TXT("DECOY-PAYLOAD")};
    struct outbox_event ev;
    int rc = outbox_event_build(&m, r, v, 8, 0x16B374D848ULL, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert_str_eq(ev.topic, "evt.Invoice.Paid");
    SLICE_EQ(ev.key, "inv-5");
    SLICE_EQ(ev.value, "BODY");
    SLICE_EQ(ev.event_id, "ID-1");
    /* Header names are the standard ones, whatever the column names. */
    ck_assert_int_eq(ev.nheaders, 6);
    check_header(&ev, 0, "event_id", "ID-1");
    check_header(&ev, 1, "event_type", "Paid");
    check_header(&ev, 2, "aggregate_type", "Invoice");
    check_header(&ev, 3, "aggregate_id", "inv-5");
    check_header(&ev, 4, "aggregate_version", "3");
    check_header(&ev, 5, "commit_lsn", "16/B374D848");
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

START_TEST(test_build_custom_missing_version_column)
{
    /* Custom map whose version column is not in the table: header omitted. */
    static const char *const custom[OC__COUNT] = {"id", "agg_type", "agg_id",
                                                  "version", "kind", "body"};
    struct outbox_map m;
    memset(&m, 0, sizeof(m));
    ck_assert_int_eq(outbox_map_init(&m, "public.x", custom, "t", err, sizeof(err)), 0);
    static const char *const cols[] = {"id", "agg_type", "agg_id", "kind", "body",
                                       "aggregate_version"};
    struct relation *r = rel_new("public", "x", cols, 6);
    struct col_value v[6] = {TXT("i"), TXT("A"), TXT("k"), TXT("K"), TXT("b"), TXT("9")};
    struct outbox_event ev;
    int rc = outbox_event_build(&m, r, v, 6, 0, &ev, err, sizeof(err));
    ck_assert_msg(rc == 0, "build: %s", err);
    ck_assert_str_eq(ev.topic, "t");
    ck_assert_int_eq(ev.nheaders, 5);
    check_header(&ev, 4, "commit_lsn", "0/0");
    for (int i = 0; i < ev.nheaders; i++)
        ck_assert_str_ne(ev.headers[i].name, "aggregate_version");
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

/* Row with one standard column replaced by v at index idx. */
static int build_with(int idx, struct col_value repl, struct outbox_event *ev)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("OrderCreated"), TXT("{}"), TXT("now")};
    v[idx] = repl;
    err[0] = '\0';
    int rc = outbox_event_build(&M, r, v, NSTD, 1, ev, err, sizeof(err));
    rel_free(r);
    return rc;
}

START_TEST(test_build_null_required)
{
    struct outbox_event ev;
    ck_assert_int_eq(build_with(2, NUL_V, &ev), -1);
    ERR_HAS("aggregate_id");
    ck_assert_int_eq(build_with(0, NUL_V, &ev), -1);
    ERR_HAS("event_id");
    ck_assert_int_eq(build_with(4, NUL_V, &ev), -1);
    ERR_HAS("event_type");
    /* aggregate_type NULL: the default topic cannot be rendered. */
    ck_assert_int_eq(build_with(1, NUL_V, &ev), -1);
    ck_assert(err[0] != '\0');
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    /* each NULL has its own class, and the rest of the row is kept */
    ck_assert_int_eq(build_with(2, NUL_V, &ev), -1);
    ck_assert_int_eq(ev.fault, OF_NULL_AGGREGATE_ID);
    ck_assert(ev.key_null);
    ck_assert_uint_eq(ev.value.len, 2);
    ck_assert_int_eq(build_with(0, NUL_V, &ev), -1);
    ck_assert_int_eq(ev.fault, OF_NULL_EVENT_ID);
    ck_assert_ptr_null(ev.event_id.data);
    ck_assert_int_eq(build_with(4, NUL_V, &ev), -1);
    ck_assert_int_eq(ev.fault, OF_NULL_EVENT_TYPE);
    /* an empty aggregate_id is poison too: no key, no order */
    ck_assert_int_eq(build_with(2, TXT(""), &ev), -1);
    ck_assert_int_eq(ev.fault, OF_EMPTY_AGGREGATE_ID);
    ck_assert(!ev.key_null);
    ck_assert_uint_eq(ev.key.len, 0);
}
END_TEST

/* An empty event_id (a text column allows it) is poison like a NULL one,
 * with its own class; the row, and its empty event_id, are kept for the
 * dead-letter topic. */
START_TEST(test_build_empty_event_id)
{
    struct outbox_event ev;
    ck_assert_int_eq(build_with(0, TXT(""), &ev), -1);
    ck_assert_int_eq(ev.fault, OF_EMPTY_EVENT_ID);
    ck_assert_str_eq(outbox_fault_name(ev.fault), "EMPTY_EVENT_ID");
    ERR_HAS("event_id is empty");
    ck_assert_ptr_nonnull(ev.event_id.data);
    ck_assert_uint_eq(ev.event_id.len, 0);
    ck_assert(!ev.key_null);
    ck_assert_uint_eq(ev.key.len, 3);
    ck_assert_uint_eq(ev.value.len, 2);
    /* one byte is enough to be an id */
    ck_assert_int_eq(build_with(0, TXT("x"), &ev), 0);
    ck_assert_int_eq(ev.fault, OF_NONE);
}
END_TEST

/* A poison row still says the topic it would have gone to (a key fault
 * used to return before the topic was rendered), or why it has none. */
START_TEST(test_build_poison_keeps_topic)
{
    struct outbox_event ev;
    ck_assert_int_eq(build_with(2, NUL_V, &ev), -1);
    ck_assert_int_eq(ev.fault, OF_NULL_AGGREGATE_ID);
    ck_assert_str_eq(ev.topic, "outbox.event.Order");
    ck_assert_str_eq(ev.topic_error, "");
    ck_assert_int_eq(build_with(0, NUL_V, &ev), -1);
    ck_assert_str_eq(ev.topic, "outbox.event.Order");
    ck_assert_int_eq(build_with(4, NUL_V, &ev), -1);
    ck_assert_str_eq(ev.topic, "outbox.event.Order");
    /* NULL aggregate_id and a bad topic: the first fault, and the reason */
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Bad Type"), NUL_V, TXT("1"),
                                TXT("OrderCreated"), TXT("{}"), TXT("now")};
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), -1);
    ck_assert_int_eq(ev.fault, OF_NULL_AGGREGATE_ID);
    ck_assert_str_eq(ev.topic, "");
    ck_assert_msg(strstr(ev.topic_error, "0x20") != NULL, "topic_error: %s", ev.topic_error);
    rel_free(r);
    ck_assert_int_eq(build_with(1, NUL_V, &ev), -1);
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    ck_assert_str_eq(ev.topic, "");
    ck_assert_msg(strstr(ev.topic_error, "aggregate_type") != NULL, "topic_error: %s",
                  ev.topic_error);
    ck_assert_str_eq(err, ev.topic_error);
    ck_assert_int_eq(build_with(1, TXT("Order"), &ev), 0);
    ck_assert_str_eq(ev.topic_error, "");
}
END_TEST

/* The dead-letter record: every header of the original record, in its
 * order, then the dlq_* headers. */
START_TEST(test_dlq_headers)
{
    struct outbox_event ev, dl;
    ck_assert_int_eq(build_with(2, NUL_V, &ev), -1); /* no aggregate_id header */
    memset(&dl, 0xA5, sizeof(dl));
    outbox_dlq_headers(&dl, ev.headers, ev.nheaders,
                       &(struct outbox_dlq){.topic = ev.topic,
                                            .topic_error = ev.topic_error,
                                            .reason = "aggregate_id is NULL",
                                            .code = "NULL_AGGREGATE_ID"});
    ck_assert_int_eq(dl.nheaders, ev.nheaders + 3);
    for (int i = 0; i < ev.nheaders; i++) {
        ck_assert_str_eq(dl.headers[i].name, ev.headers[i].name);
        ck_assert_ptr_eq(dl.headers[i].value.data, ev.headers[i].value.data);
        ck_assert_uint_eq(dl.headers[i].value.len, ev.headers[i].value.len);
    }
    check_header(&dl, 0, "event_id", EVENT_ID);
    check_header(&dl, 1, "event_type", "OrderCreated");
    check_header(&dl, 2, "aggregate_type", "Order");
    check_header(&dl, 3, "aggregate_version", "1");
    check_header(&dl, 4, "commit_lsn", "0/1");
    check_header(&dl, 5, "dlq_original_topic", "outbox.event.Order");
    check_header(&dl, 6, "dlq_reason", "aggregate_id is NULL");
    check_header(&dl, 7, "dlq_error", "NULL_AGGREGATE_ID");

    /* no topic: the reason instead; record LSN and truncation when set */
    ck_assert_int_eq(build_with(1, NUL_V, &ev), -1);
    outbox_dlq_headers(&dl, ev.headers, ev.nheaders,
                       &(struct outbox_dlq){.topic = ev.topic,
                                            .topic_error = ev.topic_error,
                                            .reason = "r",
                                            .code = "BAD_TOPIC",
                                            .record_lsn = "0/2",
                                            .truncated_from = "50000"});
    int b = ev.nheaders; /* 5: no aggregate_type header */
    ck_assert_int_eq(b, 5);
    ck_assert_int_eq(dl.nheaders, b + 6);
    check_header(&dl, b, "dlq_original_topic", "");
    check_header(&dl, b + 1, "dlq_original_topic_error", ev.topic_error);
    check_header(&dl, b + 2, "dlq_reason", "r");
    check_header(&dl, b + 3, "dlq_error", "BAD_TOPIC");
    check_header(&dl, b + 4, "dlq_record_lsn", "0/2");
    check_header(&dl, b + 5, "dlq_value_truncated_from", "50000");
    /* an empty topic without a reason still says so */
    outbox_dlq_headers(&dl, NULL, 0,
                       &(struct outbox_dlq){.topic = "", .reason = "r", .code = "C"});
    ck_assert_int_eq(dl.nheaders, 4);
    check_header(&dl, 1, "dlq_original_topic_error", "unknown");
}
END_TEST

START_TEST(test_build_unchanged_toast)
{
    struct outbox_event ev;
    ck_assert_int_eq(build_with(5, UNCH_V, &ev), -1);
    ERR_HAS("payload");
    ck_assert_int_eq(build_with(2, UNCH_V, &ev), -1);
    ERR_HAS("aggregate_id");
    ck_assert_int_eq(build_with(0, UNCH_V, &ev), -1);
    ERR_HAS("event_id");
    ck_assert_int_eq(build_with(4, UNCH_V, &ev), -1);
    ERR_HAS("event_type");
}
END_TEST

START_TEST(test_build_missing_required_column)
{
    /* Each required column removed in turn. */
    static const char *const req[] = {"event_id", "aggregate_type", "aggregate_id",
                                      "event_type"};
    for (size_t k = 0; k < sizeof(req) / sizeof(req[0]); k++) {
        const char *cols[NSTD];
        struct col_value v[NSTD];
        struct col_value all[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                      TXT("OrderCreated"), TXT("{}"), TXT("now")};
        int n = 0;
        for (int i = 0; i < NSTD; i++) {
            if (strcmp(std_cols[i], req[k]) == 0) continue;
            cols[n] = std_cols[i];
            v[n] = all[i];
            n++;
        }
        struct relation *r = rel_new("public", "outbox_events", cols, n);
        struct outbox_event ev;
        err[0] = '\0';
        int rc = outbox_event_build(&M, r, v, n, 1, &ev, err, sizeof(err));
        rel_free(r);
        ck_assert_msg(rc == -1, "built without column %s", req[k]);
        ERR_HAS(req[k]);
    }
}
END_TEST

START_TEST(test_build_missing_payload_column)
{
    /* payload is the message value: a table without the configured payload
     * column is a misconfiguration (e.g. column.payload misspelt), not a
     * NULL payload. Producing NULL values instead would emit tombstones that
     * delete the key on compacted topics. */
    static const char *const cols[] = {"event_id", "aggregate_type", "aggregate_id",
                                       "aggregate_version", "event_type", "body"};
    struct relation *r = rel_new("public", "outbox_events", cols, 6);
    struct col_value v[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                             TXT("OrderCreated"), TXT("{}")};
    struct outbox_event ev;
    err[0] = '\0';
    int rc = outbox_event_build(&M, r, v, 6, 1, &ev, err, sizeof(err));
    rel_free(r);
    ck_assert_msg(rc == -1, "built without the payload column (value_null=%d)",
                  (int)ev.value_null);
    ERR_HAS("payload");
}
END_TEST

START_TEST(test_build_topic_too_long)
{
    char longtype[400];
    memset(longtype, 'A', sizeof(longtype) - 1);
    longtype[sizeof(longtype) - 1] = '\0';
    struct outbox_event ev;
    ck_assert_int_eq(build_with(1, TXT(longtype), &ev), -1);
    ck_assert(err[0] != '\0');
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    /* The longest topic Kafka accepts: 249 characters. */
    size_t fit = 249 - strlen("outbox.event.");
    longtype[fit] = '\0';
    ck_assert_msg(build_with(1, TXT(longtype), &ev) == 0, "build: %s", err);
    ck_assert_uint_eq(strlen(ev.topic), 249);
    longtype[fit] = 'A';
    longtype[fit + 1] = '\0';
    ck_assert_int_eq(build_with(1, TXT(longtype), &ev), -1);
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    ERR_HAS("too long");
    /* A poison row still carries what it has, for the dead-letter topic. */
    ck_assert(!ev.key_null);
    ck_assert_uint_gt(ev.event_id.len, 0);
}
END_TEST

START_TEST(test_build_faults)
{
    struct outbox_event ev;
    /* illegal characters in the rendered topic */
    ck_assert_int_eq(build_with(1, TXT("Order Items"), &ev), -1);
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    ERR_HAS("0x20");
    ck_assert_int_eq(build_with(1, TXT("Ordér"), &ev), -1);
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    ck_assert_str_eq(outbox_fault_name(OF_BAD_TOPIC), "BAD_TOPIC");
    ck_assert_str_eq(outbox_fault_name(OF_EMPTY_AGGREGATE_ID), "EMPTY_AGGREGATE_ID");
    char e[128];
    ck_assert(outbox_topic_valid("a.b_c-D9", e, sizeof(e)));
    ck_assert(!outbox_topic_valid("", e, sizeof(e)));
    ck_assert(!outbox_topic_valid("..", e, sizeof(e)));
    ck_assert(!outbox_topic_valid("a/b", e, sizeof(e)));
}
END_TEST

/* The topic of each event is checked, also after a valid one was seen (the
 * mapper remembers the last valid name); an empty topic is refused from a
 * fresh map too. */
START_TEST(test_build_topic_checked_every_event)
{
    struct outbox_event ev;
    for (int round = 0; round < 2; round++) {
        ck_assert_msg(build_with(1, TXT("Order"), &ev) == 0, "build: %s", err);
        ck_assert_str_eq(ev.topic, "outbox.event.Order");
        ck_assert_int_eq(build_with(1, TXT("Order Items"), &ev), -1);
        ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
        ck_assert_int_eq(build_with(1, TXT("Order/"), &ev), -1);
        ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    }

    struct outbox_map bare;
    memset(&bare, 0, sizeof(bare));
    ck_assert_int_eq(outbox_map_init(&bare, "public.outbox_events", default_columns,
                                     "${aggregate_type}", err, sizeof(err)),
                     0);
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID),       TXT(""),   TXT("o-1"), TXT("1"),
                                TXT("OrderCreated"), TXT("{}"), TXT("now")};
    ck_assert_int_eq(outbox_event_build(&bare, r, v, NSTD, 1, &ev, err, sizeof(err)), -1);
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    ERR_HAS("empty");
    rel_free(r);
    outbox_map_free(&bare);
}
END_TEST

START_TEST(test_build_lsn_formats)
{
    static const struct {
        lsn_t l;
        const char *s;
    } cases[] = {{0, "0/0"}, {0x16B374D848ULL, "16/B374D848"}, {0xABCULL, "0/ABC"},
                 {0x1234567800000000ULL, "12345678/0"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
        struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                    TXT("OrderCreated"), TXT("{}"), TXT("now")};
        struct outbox_event ev;
        ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, cases[i].l, &ev, err, sizeof(err)), 0);
        ck_assert_str_eq(ev.commit_lsn, cases[i].s);
        check_header(&ev, 5, "commit_lsn", cases[i].s);
        rel_free(r);
    }
}
END_TEST

/* The commit LSN text is remembered between events: it must follow every
 * change of transaction, back and forth, and be right for LSN 0 on a map
 * that has seen nothing yet. */
START_TEST(test_build_commit_lsn_follows_each_transaction)
{
    struct outbox_map fresh;
    ck_assert_int_eq(outbox_map_init(&fresh, "public.outbox_events", default_columns,
                                     "t.${aggregate_type}", err, sizeof(err)),
                     0);
    static const struct {
        lsn_t l;
        const char *s;
    } seq[] = {{0, "0/0"},         {0x2AULL, "0/2A"},   {0x2AULL, "0/2A"},
               {0x100000000ULL, "1/0"}, {0x2AULL, "0/2A"}, {0, "0/0"}};
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
        struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                    TXT("OrderCreated"), TXT("{}"), TXT("now")};
        struct outbox_event ev;
        ck_assert_int_eq(outbox_event_build(&fresh, r, v, NSTD, seq[i].l, &ev, err, sizeof(err)),
                         0);
        ck_assert_str_eq(ev.commit_lsn, seq[i].s);
        check_header(&ev, 5, "commit_lsn", seq[i].s);
    }
    rel_free(r);
    outbox_map_free(&fresh);
}
END_TEST

/* ---- headers: [outbox] headers and additional_placement ---- */

/* Debezium's default outbox table and the debezium preset's map. */
static const char *const dbz_columns[OC__COUNT] = {"id", "aggregatetype", "aggregateid",
                                                   "aggregate_version", "type", "payload"};
static const char *const dbz_cols[] = {"id", "aggregatetype", "aggregateid", "type",
                                       "payload", "tenant"};

START_TEST(test_headers_debezium_id_only)
{
    struct outbox_map m;
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz_columns,
                                     "outbox.event.${aggregatetype}", err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_map_set_headers(&m, "event_id:id", NULL, err, sizeof(err)), 0);
    struct relation *r = rel_new("public", "outbox", dbz_cols, 6);
    struct col_value v[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("OrderCreated"),
                             TXT("{\"a\": 1}"), NUL_V};
    struct outbox_event ev;
    ck_assert_msg(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)) == 0, "%s", err);
    ck_assert_str_eq(ev.topic, "outbox.event.Order");
    SLICE_EQ(ev.key, "o-1");
    SLICE_EQ(ev.value, "{\"a\": 1}");
    ck_assert_int_eq(ev.nheaders, 1);
    check_header(&ev, 0, "id", EVENT_ID);
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

START_TEST(test_headers_placement)
{
    struct outbox_map m;
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz_columns, "t", err, sizeof(err)),
                     0);
    ck_assert_int_eq(outbox_map_set_headers(&m, " commit_lsn:lsn , event_id:id",
                                            "type:header:eventType,tenant:header", err,
                                            sizeof(err)),
                     0);
    struct relation *r = rel_new("public", "outbox", dbz_cols, 6);
    struct col_value v[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("OrderCreated"),
                             TXT("{}"), TXT("acme")};
    struct outbox_event ev;
    ck_assert_msg(outbox_event_build(&m, r, v, 6, 0x16B374D848ULL, &ev, err, sizeof(err)) == 0,
                  "%s", err);
    ck_assert_int_eq(ev.nheaders, 4);
    ck_assert_str_eq(outbox_header_name(&m, OC_EVENT_ID), "id");
    ck_assert_str_eq(outbox_header_name(&m, OUTBOX_HS_COMMIT_LSN), "lsn");
    ck_assert_ptr_null(outbox_header_name(&m, OC_AGGREGATE_VERSION));
    check_header(&ev, 0, "lsn", "16/B374D848");
    check_header(&ev, 1, "id", EVENT_ID);
    check_header(&ev, 2, "eventType", "OrderCreated");
    check_header(&ev, 3, "tenant", "acme");
    /* A NULL placed column: no such header; the rest stays. */
    v[5] = NUL_V;
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    ck_assert_int_eq(ev.nheaders, 3);
    check_header(&ev, 2, "eventType", "OrderCreated");
    /* Unchanged TOAST in a placed column: a schema fault, not a header. */
    v[5] = UNCH_V;
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), -1);
    ck_assert_int_eq(ev.fault, OF_SCHEMA);
    ERR_HAS("tenant");
    outbox_map_free(&m);
    rel_free(r);
    /* A placed column the table lacks: a schema fault naming it. */
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz_columns, "t", err, sizeof(err)),
                     0);
    ck_assert_int_eq(outbox_map_set_headers(&m, "event_id", "region:header", err, sizeof(err)),
                     0);
    r = rel_new("public", "outbox", dbz_cols, 6);
    v[5] = TXT("acme");
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), -1);
    ck_assert_int_eq(ev.fault, OF_SCHEMA);
    ERR_HAS("\"region\"");
    ERR_HAS("missing");
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

START_TEST(test_headers_none_and_default)
{
    struct outbox_map m;
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz_columns, "t", err, sizeof(err)),
                     0);
    struct relation *r = rel_new("public", "outbox", dbz_cols, 6);
    struct col_value v[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("T"), TXT("{}"),
                             TXT("x")};
    struct outbox_event ev;
    /* outbox_map_init()'s default: outboxd's own headers. */
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    ck_assert_int_eq(ev.nheaders, 5); /* no aggregate_version column */
    check_header(&ev, 0, "event_id", EVENT_ID);
    check_header(&ev, 4, "commit_lsn", "0/1");
    ck_assert_int_eq(outbox_map_set_headers(&m, "none", "", err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    ck_assert_int_eq(ev.nheaders, 0);
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

/* [outbox] tombstone_on_empty_payload: an empty payload is a null value;
 * without it an empty value, as before. NULL is null either way. */
START_TEST(test_tombstone_on_empty_payload)
{
    struct outbox_map m;
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz_columns, "t", err, sizeof(err)),
                     0);
    struct relation *r = rel_new("public", "outbox", dbz_cols, 6);
    struct col_value v[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("T"), TXT(""),
                             TXT("x")};
    struct outbox_event ev;
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    ck_assert(!ev.value_null);
    ck_assert_uint_eq(ev.value.len, 0);
    m.tombstone_on_empty = true;
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    ck_assert(ev.value_null);
    v[4] = TXT("{}");
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    ck_assert(!ev.value_null);
    SLICE_EQ(ev.value, "{}");
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

/* The span-context column's entries become headers after the others; no
 * column or NULL: none; a value that cannot be read: a poison event that
 * keeps its other headers. */
START_TEST(test_span_context)
{
    static const char *const cols[] = {"id", "aggregatetype", "aggregateid", "type",
                                       "payload", "tracingspancontext"};
    struct outbox_map m;
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz_columns, "t", err, sizeof(err)),
                     0);
    ck_assert_int_eq(outbox_map_set_headers(&m, "event_id:id", NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_map_set_span_context(&m, "tracingspancontext", err, sizeof(err)), 0);
    struct relation *r = rel_new("public", "outbox", cols, 6);
    struct col_value v[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("T"), TXT("{}"),
                             TXT("#Tue Dec 03\ntraceparent=00-ab-cd-01\ntracestate=a\\=1\n")};
    struct outbox_event ev;
    ck_assert_msg(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(ev.nheaders, 3);
    check_header(&ev, 0, "id", EVENT_ID);
    check_header(&ev, 1, "traceparent", "00-ab-cd-01");
    check_header(&ev, 2, "tracestate", "a=1");
    v[5] = NUL_V;
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    ck_assert_int_eq(ev.nheaders, 1);
    v[5] = TXT("traceparent 00-ab-cd-01");
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), -1);
    ck_assert_int_eq(ev.fault, OF_BAD_SPAN_CONTEXT);
    ck_assert_str_eq(outbox_fault_name(ev.fault), "BAD_SPAN_CONTEXT");
    ERR_HAS("span context");
    ck_assert_int_eq(ev.nheaders, 1); /* the dead letter still has its id */
    rel_free(r);
    /* a table without the column: no span headers, no fault */
    r = rel_new("public", "outbox", dbz_cols, 6);
    struct col_value w[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("T"), TXT("{}"),
                             TXT("traceparent=x")};
    ck_assert_int_eq(outbox_event_build(&m, r, w, 6, 1, &ev, err, sizeof(err)), 0);
    ck_assert_int_eq(ev.nheaders, 1);
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

/* [outbox] value_converter = json: the payload as a JSON string, or the
 * envelope object with its fields typed by their columns; envelope fields
 * need it. */
START_TEST(test_json_value)
{
    static const char *const cols[] = {"id", "aggregatetype", "aggregateid", "type",
                                       "payload", "version", "urgent"};
    struct outbox_map m;
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz_columns, "t", err, sizeof(err)),
                     0);
    ck_assert_int_eq(outbox_map_set_headers(&m, "event_id:id", NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_map_set_value_json(&m, true, err, sizeof(err)), 0);
    struct relation *r = rel_new("public", "outbox", cols, 7);
    r->cols[5].typid = 23; /* int4 */
    r->cols[6].typid = 16; /* bool */
    struct col_value v[7] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("Cr\"e\tated"),
                             TXT("{\"a\": \"x\\\"y\", \"k\": \"Grüße\"}"), TXT("-42"),
                             TXT("t")};
    struct outbox_event ev;
    ck_assert_msg(outbox_event_build(&m, r, v, 7, 1, &ev, err, sizeof(err)) == 0, "%s", err);
    SLICE_EQ(ev.value, "\"{\\\"a\\\": \\\"x\\\\\\\"y\\\", \\\"k\\\": \\\"Grüße\\\"}\"");
    v[4] = NUL_V; /* a NULL payload stays a null value */
    ck_assert_int_eq(outbox_event_build(&m, r, v, 7, 1, &ev, err, sizeof(err)), 0);
    ck_assert(ev.value_null);
    /* envelope fields: after "payload", in order, typed by their columns */
    ck_assert_int_eq(outbox_map_set_headers(&m, "event_id:id",
                                            "type:envelope:eventType,version:envelope,"
                                            "urgent:envelope,type:header:eventType",
                                            err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_map_set_value_json(&m, true, err, sizeof(err)), 0);
    v[4] = TXT("{}");
    ck_assert_msg(outbox_event_build(&m, r, v, 7, 1, &ev, err, sizeof(err)) == 0, "%s", err);
    SLICE_EQ(ev.value, "{\"payload\":\"{}\",\"eventType\":\"Cr\\\"e\\tated\","
                       "\"version\":-42,\"urgent\":true}");
    ck_assert_int_eq(ev.nheaders, 2);
    check_header(&ev, 1, "eventType", "Cr\"e\tated");
    v[4] = NUL_V;
    v[5] = NUL_V;
    v[6] = TXT("x"); /* not t/f: a string, never broken JSON */
    ck_assert_int_eq(outbox_event_build(&m, r, v, 7, 1, &ev, err, sizeof(err)), 0);
    ck_assert(!ev.value_null);
    SLICE_EQ(ev.value, "{\"payload\":null,\"eventType\":\"Cr\\\"e\\tated\","
                       "\"version\":null,\"urgent\":\"x\"}");
    /* envelope fields without json: refused, naming the key */
    ck_assert_int_eq(outbox_map_set_value_json(&m, false, err, sizeof(err)), -1);
    ERR_HAS("value_converter = json");
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

/* A bytea payload (type OID 17): its text output, hex or escape format,
 * becomes the bytes, all 256 byte values, NUL included; a decoder's bytes
 * (CV_BINARY) are taken as they are; NULL stays a null value; a text that
 * is neither format is a schema fault naming the column. Text columns
 * stay their text, even when it looks like hex. */
START_TEST(test_build_bytea_payload)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    r->cols[5].typid = 17;
    char hex[2 + 512 + 1] = "\\x", esc[256 * 4 + 1], raw[256];
    size_t n = 0;
    for (int i = 0; i < 256; i++) {
        raw[i] = (char)i;
        snprintf(hex + 2 + 2 * i, 3, "%02x", i);
        if (i == '\\')
            n += (size_t)snprintf(esc + n, 3, "\\\\");
        else if (i < 0x20 || i > 0x7e)
            n += (size_t)snprintf(esc + n, 5, "\\%03o", i);
        else
            esc[n++] = (char)i;
    }
    esc[n] = '\0';
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT(hex), TXT("now")};
    struct outbox_event ev;
    const char *forms[] = {hex, esc};
    for (int f = 0; f < 2; f++) {
        v[5] = TXT(forms[f]);
        ck_assert_msg(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)) == 0, "%s",
                      err);
        ck_assert(!ev.value_null);
        ck_assert_uint_eq(ev.value.len, 256);
        ck_assert_mem_eq(ev.value.data, raw, 256);
        /* the other columns are the row's own, not copies */
        ck_assert_ptr_eq(ev.key.data, v[2].data);
        ck_assert_ptr_eq(ev.event_id.data, v[0].data);
    }
    v[5] = (struct col_value){CV_BINARY, 3, "\x00\x01\x02"};
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), 0);
    ck_assert_ptr_eq(ev.value.data, v[5].data);
    ck_assert_uint_eq(ev.value.len, 3);
    v[5] = TXT("\\x");
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), 0);
    ck_assert(!ev.value_null);
    ck_assert_uint_eq(ev.value.len, 0);
    v[5] = NUL_V;
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), 0);
    ck_assert(ev.value_null);
    v[5] = TXT("\\x0");
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), -1);
    ck_assert_int_eq(ev.fault, OF_SCHEMA);
    ERR_HAS("column \"payload\" (bytea)");
    ERR_HAS("odd number of digits");
    rel_free(r);
    /* The same text in a text column: as it is. */
    r = rel_new("public", "outbox_events", std_cols, NSTD);
    v[5] = TXT("\\x00ff");
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), 0);
    SLICE_EQ(ev.value, "\\x00ff");
    rel_free(r);
}
END_TEST

/* Two rows of a bytea layout: each event's value is its own row's bytes
 * (the map's scratch is reused by the next row, not before), and a bytea
 * column placed in a header is its bytes too. */
START_TEST(test_build_bytea_rows_and_headers)
{
    static const char *const cols[] = {"event_id", "aggregate_type", "aggregate_id",
                                       "event_type", "payload",        "sig"};
    ck_assert_int_eq(outbox_map_set_headers(&M, "event_id", "sig:header", err, sizeof(err)),
                     0);
    struct relation *r = rel_new("public", "outbox_events", cols, 6);
    r->cols[4].typid = 17;
    r->cols[5].typid = 17;
    struct col_value v[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"),
                             TXT("Created"), TXT("\\x616263"), TXT("\\000\\377")};
    struct outbox_event ev;
    ck_assert_msg(outbox_event_build(&M, r, v, 6, 1, &ev, err, sizeof(err)) == 0, "%s", err);
    SLICE_EQ(ev.value, "abc");
    ck_assert_int_eq(ev.nheaders, 2);
    ck_assert_str_eq(ev.headers[1].name, "sig");
    ck_assert_uint_eq(ev.headers[1].value.len, 2);
    ck_assert_mem_eq(ev.headers[1].value.data, "\x00\xff", 2);
    v[4] = TXT("\\x7879");
    v[5] = NUL_V; /* NULL: no header */
    ck_assert_int_eq(outbox_event_build(&M, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    SLICE_EQ(ev.value, "xy");
    ck_assert_int_eq(ev.nheaders, 1);
    rel_free(r);
}
END_TEST

/* value_converter = json: a bytea payload and a bytea envelope field are
 * base64 strings, as JsonConverter writes Connect's BYTES. */
START_TEST(test_json_value_bytea)
{
    static const char *const cols[] = {"id", "aggregatetype", "aggregateid", "type",
                                       "payload", "sig"};
    struct outbox_map m;
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz_columns, "t", err, sizeof(err)),
                     0);
    ck_assert_int_eq(outbox_map_set_headers(&m, "event_id:id", NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_map_set_value_json(&m, true, err, sizeof(err)), 0);
    struct relation *r = rel_new("public", "outbox", cols, 6);
    r->cols[4].typid = 17;
    r->cols[5].typid = 17;
    struct col_value v[6] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("T"),
                             TXT("\\x00ff41"), TXT("\\x6869")};
    struct outbox_event ev;
    ck_assert_msg(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)) == 0, "%s", err);
    SLICE_EQ(ev.value, "\"AP9B\"");
    v[4] = TXT("\\x0001");
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    SLICE_EQ(ev.value, "\"AAE=\"");
    ck_assert_int_eq(outbox_map_set_headers(&m, "event_id:id", "sig:envelope", err,
                                            sizeof(err)), 0);
    ck_assert_int_eq(outbox_map_set_value_json(&m, true, err, sizeof(err)), 0);
    v[4] = TXT("\\x61");
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    SLICE_EQ(ev.value, "{\"payload\":\"YQ==\",\"sig\":\"aGk=\"}");
    v[4] = NUL_V;
    ck_assert_int_eq(outbox_event_build(&m, r, v, 6, 1, &ev, err, sizeof(err)), 0);
    SLICE_EQ(ev.value, "{\"payload\":null,\"sig\":\"aGk=\"}");
    outbox_map_free(&m);
    rel_free(r);
}
END_TEST

/* [outbox] timestamp: produce leaves 0 (the producer's clock); commit
 * gives the commit time (PostgreSQL epoch microseconds) in Unix ms,
 * rounded down; an unknown commit time (0) leaves 0. A build clears it. */
START_TEST(test_event_timestamp)
{
    struct relation *r = rel_new("public", "outbox_events", std_cols, NSTD);
    struct col_value v[NSTD] = {TXT(EVENT_ID), TXT("Order"), TXT("o-1"), TXT("1"),
                                TXT("Created"), TXT("{}"), TXT("now")};
    struct outbox_event ev;
    /* 2026-12-03 20:35:11.870790 UTC = 1796330111870790 us since 1970 */
    const int64_t commit = INT64_C(1796330111870790) - INT64_C(946684800000000);
    memset(&ev, 0x5A, sizeof(ev));
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), 0);
    ck_assert_int_eq(ev.timestamp_ms, 0);
    outbox_event_set_commit_time(&M, &ev, commit);
    ck_assert_int_eq(ev.timestamp_ms, 0); /* produce, the default */
    M.timestamp_commit = true;
    outbox_event_set_commit_time(&M, &ev, commit);
    ck_assert_int_eq(ev.timestamp_ms, INT64_C(1796330111870));
    outbox_event_set_commit_time(&M, &ev, 0);
    ck_assert_int_eq(ev.timestamp_ms, 0);
    /* 1969-12-31 23:59:59.9995: rounded down too */
    outbox_event_set_commit_time(&M, &ev, INT64_C(-500) - INT64_C(946684800000000));
    ck_assert_int_eq(ev.timestamp_ms, -1);
    ev.timestamp_ms = 123;
    ck_assert_int_eq(outbox_event_build(&M, r, v, NSTD, 1, &ev, err, sizeof(err)), 0);
    ck_assert_int_eq(ev.timestamp_ms, 0);
    rel_free(r);
}
END_TEST

START_TEST(test_headers_refused)
{
    static const struct {
        const char *headers, *placement, *says;
    } bad[] = {
        {"event_id,payload", NULL, "\"payload\" is not one of"},
        {"eventid", NULL, "\"eventid\" is not one of"},
        {"event_id,,commit_lsn", NULL, "an empty item"},
        {"event_id:", NULL, "empty header name"},
        {"event_id", "type:envelope:payload", "the envelope's field \"payload\""},
        {"event_id", "type:partition", "partition placement is not supported"},
        {"event_id", "type", "COLUMN:header[:NAME]"},
        {"event_id", "type:headers", "expected COLUMN:header[:NAME] or COLUMN:envelope"},
        {"event_id", ":header", "COLUMN:header[:NAME]"},
        {"event_id,event_id,event_id,event_id,event_id,event_id,event_id,event_id,"
         "event_id,event_id,event_id,event_id,event_id,event_id,event_id,event_id,event_id",
         NULL, "more than 16 headers"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct outbox_map m;
        ck_assert_int_eq(
            outbox_map_init(&m, "public.outbox", dbz_columns, "t", err, sizeof(err)), 0);
        err[0] = '\0';
        ck_assert_msg(outbox_map_set_headers(&m, bad[i].headers, bad[i].placement, err,
                                             sizeof(err)) == -1,
                      "accepted %s / %s", bad[i].headers, bad[i].placement);
        ERR_HAS(bad[i].says);
        outbox_map_free(&m);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outbox");

    TCase *tt = tcase_create("template");
    tcase_add_test(tt, test_template_literal);
    tcase_add_test(tt, test_template_substitution);
    tcase_add_test(tt, test_template_several);
    tcase_add_test(tt, test_template_any_column);
    tcase_add_test(tt, test_template_value_not_nul_terminated);
    tcase_add_loop_test(tt, test_template_parse_errors, 0,
                        (int)(sizeof(bad_templates) / sizeof(bad_templates[0])));
    tcase_add_test(tt, test_template_missing_column);
    tcase_add_test(tt, test_template_column_beyond_values);
    tcase_add_test(tt, test_template_null_value);
    tcase_add_test(tt, test_template_too_long);
    suite_add_tcase(s, tt);

    TCase *tm = tcase_create("map");
    tcase_add_test(tm, test_map_init_schema_table);
    tcase_add_test(tm, test_map_init_bare_table);
    tcase_add_test(tm, test_map_init_bad_topic);
    tcase_add_test(tm, test_is_table);
    suite_add_tcase(s, tm);

    TCase *tb = tcase_create("build");
    tcase_add_checked_fixture(tb, map_setup, map_teardown);
    tcase_add_test(tb, test_build_standard);
    tcase_add_test(tb, test_build_borrows_and_uses_len);
    tcase_add_test(tb, test_build_binaryish_payload);
    tcase_add_test(tb, test_build_empty_payload);
    tcase_add_test(tb, test_build_null_payload);
    tcase_add_test(tb, test_build_null_version);
    tcase_add_test(tb, test_build_no_version_column);
    tcase_add_test(tb, test_build_column_order);
    tcase_add_test(tb, test_build_layout_cache);
    tcase_add_test(tb, test_build_custom_columns);
    tcase_add_test(tb, test_build_custom_missing_version_column);
    tcase_add_test(tb, test_build_null_required);
    tcase_add_test(tb, test_build_empty_event_id);
    tcase_add_test(tb, test_build_poison_keeps_topic);
    tcase_add_test(tb, test_dlq_headers);
    tcase_add_test(tb, test_build_unchanged_toast);
    tcase_add_test(tb, test_build_missing_required_column);
    tcase_add_test(tb, test_build_missing_payload_column);
    tcase_add_test(tb, test_build_topic_too_long);
    tcase_add_test(tb, test_build_faults);
    tcase_add_test(tb, test_build_topic_checked_every_event);
    tcase_add_test(tb, test_build_lsn_formats);
    tcase_add_test(tb, test_build_commit_lsn_follows_each_transaction);
    tcase_add_test(tb, test_build_bytea_payload);
    tcase_add_test(tb, test_build_bytea_rows_and_headers);
    tcase_add_test(tb, test_event_timestamp);
    suite_add_tcase(s, tb);

    TCase *th = tcase_create("headers");
    tcase_add_test(th, test_headers_debezium_id_only);
    tcase_add_test(th, test_headers_placement);
    tcase_add_test(th, test_headers_none_and_default);
    tcase_add_test(th, test_headers_refused);
    tcase_add_test(th, test_tombstone_on_empty_payload);
    tcase_add_test(th, test_span_context);
    tcase_add_test(th, test_json_value);
    tcase_add_test(th, test_json_value_bytea);
    suite_add_tcase(s, th);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
