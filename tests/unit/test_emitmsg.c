/*
 * test_emitmsg.c - the table-less outbox's message content (emitmsg.h):
 * every field of format version 1, versions, malformed content, base64
 * payloads, extra headers and placed columns, and the event built from it
 * as outbox_event_build() builds a row's.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emitmsg.h"
#include "outbox.h"
#include "relcache.h"

static const char *const default_columns[OC__COUNT] = {
    "event_id", "aggregate_type", "aggregate_id", "aggregate_version", "event_type", "payload"};

static char err[512];
static struct outbox_map map;
static struct emitmsg *em;
static struct outbox_event ev;

#define EVENT_ID "0f8fad5b-d9cb-469f-a165-70867728950e"
#define LSN 0x16B374D848ULL

#define SLICE_EQ(sl, str)                                                                    \
    do {                                                                                     \
        const char *_want = (str);                                                           \
        ck_assert_uint_eq((sl).len, strlen(_want));                                          \
        if ((sl).len) ck_assert_mem_eq((sl).data, _want, (sl).len);                          \
    } while (0)

#define ERR_HAS(s) ck_assert_msg(strstr(err, (s)) != NULL, "err \"%s\" lacks \"%s\"", err, (s))

static void setup_with(const char *topic, const char *headers, const char *placement,
                       const char *span)
{
    ck_assert_int_eq(outbox_map_init(&map, "public.outbox_events", default_columns, topic, err,
                                     sizeof(err)),
                     0);
    if (headers || placement)
        ck_assert_msg(outbox_map_set_headers(&map, headers ? headers : OUTBOX_HEADERS_DEFAULT,
                                             placement, err, sizeof(err)) == 0,
                      "%s", err);
    if (span) ck_assert_int_eq(outbox_map_set_span_context(&map, span, err, sizeof(err)), 0);
    em = emitmsg_new(&map, "outbox");
    ck_assert_ptr_nonnull(em);
}

static void setup(void) { setup_with("outbox.event.${aggregate_type}", NULL, NULL, NULL); }

static void teardown(void)
{
    emitmsg_free(em);
    em = NULL;
    outbox_map_free(&map);
}

static int build(const char *content)
{
    err[0] = '\0';
    return emitmsg_event_build(em, &map, content, strlen(content), LSN, &ev, err, sizeof(err));
}

/* The value of header name, or NULL; *n its count. */
static const struct outbox_header *header(const char *name, int *n)
{
    const struct outbox_header *h = NULL;
    *n = 0;
    for (int i = 0; i < ev.nheaders; i++)
        if (strcmp(ev.headers[i].name, name) == 0) {
            if (!h) h = &ev.headers[i];
            (*n)++;
        }
    return h;
}

#define HEADER_EQ(name, want)                                                                \
    do {                                                                                     \
        int _n;                                                                              \
        const struct outbox_header *_h = header((name), &_n);                                \
        ck_assert_msg(_h != NULL, "no header %s", (name));                                   \
        ck_assert_int_eq(_n, 1);                                                             \
        SLICE_EQ(_h->value, (want));                                                         \
    } while (0)

#define NO_HEADER(name)                                                                      \
    do {                                                                                     \
        int _n;                                                                              \
        ck_assert_ptr_null(header((name), &_n));                                             \
    } while (0)

#define FULL                                                                                 \
    "{\"v\":1,\"event_id\":\"" EVENT_ID "\",\"aggregate_type\":\"order\","                   \
    "\"aggregate_id\":\"42\",\"event_type\":\"OrderPlaced\",\"aggregate_version\":7,"        \
    "\"payload\":\"{\\\"total\\\": 10, \\\"note\\\": \\\"Gr\\u00fc\\u00dfe\\\"}\","          \
    "\"headers\":{\"tenant\":\"acme\",\"skip\":null}}"

START_TEST(test_every_field)
{
    ck_assert_msg(build(FULL) == 0, "%s", err);
    ck_assert_str_eq(ev.topic, "outbox.event.order");
    ck_assert_int_eq(ev.fault, OF_NONE);
    ck_assert(!ev.key_null);
    SLICE_EQ(ev.key, "42");
    ck_assert(!ev.value_null);
    SLICE_EQ(ev.value, "{\"total\": 10, \"note\": \"Grüße\"}");
    SLICE_EQ(ev.event_id, EVENT_ID);
    /* outboxd's headers in their configured order, then the content's */
    static const char *const names[] = {"event_id",          "event_type", "aggregate_type",
                                        "aggregate_id",      "aggregate_version",
                                        "commit_lsn",        "tenant"};
    static const char *const values[] = {EVENT_ID, "OrderPlaced", "order", "42", "7",
                                         "16/B374D848", "acme"};
    ck_assert_int_eq(ev.nheaders, 7);
    for (int i = 0; i < 7; i++) {
        ck_assert_str_eq(ev.headers[i].name, names[i]);
        SLICE_EQ(ev.headers[i].value, values[i]);
    }
    NO_HEADER("skip");
}
END_TEST

START_TEST(test_optional_fields)
{
    /* no version, no payload, no headers: no version header, a null value */
    ck_assert_msg(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\","
                        "\"aggregate_id\":\"1\",\"event_type\":\"t\"}") == 0,
                  "%s", err);
    ck_assert(ev.value_null);
    NO_HEADER("aggregate_version");
    ck_assert_int_eq(ev.nheaders, 5);
    /* explicit nulls are the same; a string version is its text */
    ck_assert_msg(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\","
                        "\"aggregate_id\":\"1\",\"event_type\":\"t\",\"payload\":null,"
                        "\"aggregate_version\":\"12\",\"headers\":null,"
                        "\"payload_encoding\":null}") == 0,
                  "%s", err);
    ck_assert(ev.value_null);
    HEADER_EQ("aggregate_version", "12");
    /* an empty text payload is an empty value, not null */
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\","
                           "\"aggregate_id\":\"1\",\"event_type\":\"t\",\"payload\":\"\","
                           "\"payload_encoding\":\"text\",\"aggregate_version\":-3}"),
                     0);
    ck_assert(!ev.value_null);
    ck_assert_uint_eq(ev.value.len, 0);
    HEADER_EQ("aggregate_version", "-3");
}
END_TEST

START_TEST(test_base64_payload)
{
    /* every byte value survives, line breaks (PostgreSQL's encode()) skipped */
    unsigned char raw[256];
    for (int i = 0; i < 256; i++) raw[i] = (unsigned char)i;
    static const char tbl[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char b64[400], content[600];
    size_t n = 0;
    for (int i = 0; i < 256; i += 3) {
        unsigned v = (unsigned)raw[i] << 16 | (i + 1 < 256 ? raw[i + 1] : 0) << 8 |
                     (i + 2 < 256 ? raw[i + 2] : 0);
        b64[n++] = tbl[v >> 18 & 63];
        b64[n++] = tbl[v >> 12 & 63];
        b64[n++] = i + 1 < 256 ? tbl[v >> 6 & 63] : '=';
        b64[n++] = i + 2 < 256 ? tbl[v & 63] : '=';
        if (n % 77 == 76) {
            b64[n++] = '\\';
            b64[n++] = 'n';
        }
    }
    b64[n] = '\0';
    snprintf(content, sizeof(content),
             "{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\",\"aggregate_id\":\"1\","
             "\"event_type\":\"t\",\"payload\":\"%s\",\"payload_encoding\":\"base64\"}",
             b64);
    ck_assert_msg(build(content) == 0, "%s", err);
    ck_assert_uint_eq(ev.value.len, 256);
    ck_assert_mem_eq(ev.value.data, raw, 256);
    /* one and two padding characters; the empty string */
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\","
                           "\"aggregate_id\":\"1\",\"event_type\":\"t\",\"payload\":\"AAE=\","
                           "\"payload_encoding\":\"base64\"}"),
                     0);
    ck_assert_uint_eq(ev.value.len, 2);
    ck_assert_mem_eq(ev.value.data, "\0\1", 2);
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\","
                           "\"aggregate_id\":\"1\",\"event_type\":\"t\",\"payload\":\"/w==\","
                           "\"payload_encoding\":\"base64\"}"),
                     0);
    ck_assert_uint_eq(ev.value.len, 1);
    ck_assert_int_eq((unsigned char)ev.value.data[0], 0xff);
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\","
                           "\"aggregate_id\":\"1\",\"event_type\":\"t\",\"payload\":\"\","
                           "\"payload_encoding\":\"base64\"}"),
                     0);
    ck_assert(!ev.value_null);
    ck_assert_uint_eq(ev.value.len, 0);
}
END_TEST

/* Content that cannot be read: BAD_MESSAGE, the raw content as the value,
 * the reason in err. */
static void bad(const char *content, const char *why)
{
    ck_assert_int_eq(build(content), -1);
    ck_assert_int_eq(ev.fault, OF_BAD_MESSAGE);
    ERR_HAS(why);
    ck_assert_str_eq(ev.topic, "");
    ck_assert(ev.topic_error[0] != '\0');
    ck_assert(ev.key_null);
    SLICE_EQ(ev.value, content);
    HEADER_EQ("commit_lsn", "16/B374D848");
}

#define IDS "\"event_id\":\"e\",\"aggregate_type\":\"a\",\"aggregate_id\":\"1\",\"event_type\":\"t\""

START_TEST(test_malformed)
{
    bad("", "not valid JSON");
    bad("{\"v\":1,", "not valid JSON");
    bad("hello", "not valid JSON");
    bad("[1]", "an array, not a JSON object");
    bad("{" IDS "}", "no \"v\"");
    bad("{\"v\":1," IDS ",\"v\":1}", "duplicate");
    bad("{\"v\":1," IDS ",\"event_typ\":\"x\"}", "unknown field \"event_typ\"");
    bad("{\"v\":1,\"event_id\":5,\"aggregate_type\":\"a\",\"aggregate_id\":\"1\","
        "\"event_type\":\"t\"}",
        "\"event_id\" is a number");
    bad("{\"v\":1," IDS ",\"aggregate_version\":1.5}", "not an integer");
    bad("{\"v\":1," IDS ",\"aggregate_version\":true}", "\"aggregate_version\" is");
    bad("{\"v\":1," IDS ",\"payload\":{\"a\":1}}", "\"payload\" is an object");
    bad("{\"v\":1," IDS ",\"payload\":\"x\",\"payload_encoding\":\"hex\"}",
        "not \"text\" or \"base64\"");
    bad("{\"v\":1," IDS ",\"payload\":\"a*==\",\"payload_encoding\":\"base64\"}",
        "outside the alphabet");
    bad("{\"v\":1," IDS ",\"payload\":\"abc\",\"payload_encoding\":\"base64\"}",
        "multiple of 4");
    bad("{\"v\":1," IDS ",\"payload\":\"a===\",\"payload_encoding\":\"base64\"}",
        "more than two");
    bad("{\"v\":1," IDS ",\"payload\":\"ab=c\",\"payload_encoding\":\"base64\"}",
        "after the padding");
    bad("{\"v\":1," IDS ",\"headers\":[\"a\"]}", "\"headers\" is an array");
    bad("{\"v\":1," IDS ",\"headers\":{\"a\":1}}", "header \"a\" is a number");
    bad("{\"v\":1," IDS ",\"headers\":{\"\":\"x\"}}", "empty name");
    /* a header outboxd sets: refused after the event is built, so its dead
     * letter still names the topic and key */
    ck_assert_int_eq(build("{\"v\":1," IDS ",\"headers\":{\"event_type\":\"x\"}}"), -1);
    ck_assert_int_eq(ev.fault, OF_BAD_MESSAGE);
    ERR_HAS("header \"event_type\" in \"headers\": outboxd sets a header of that name");
    ck_assert_str_eq(ev.topic, "outbox.event.a");
    SLICE_EQ(ev.key, "1");
    char many[2000];
    int n = snprintf(many, sizeof(many), "{\"v\":1," IDS ",\"headers\":{");
    for (int i = 0; i <= EMITMSG_MAX_HEADERS; i++)
        n += snprintf(many + n, sizeof(many) - (size_t)n, "%s\"h%d\":\"x\"", i ? "," : "", i);
    snprintf(many + n, sizeof(many) - (size_t)n, "}}");
    bad(many, "more than 16");
}
END_TEST

START_TEST(test_versions)
{
    bad("{\"v\":2," IDS "}", "\"v\" is 2: this outboxd reads content format version 1");
    bad("{\"v\":0," IDS "}", "version 1 only");
    bad("{\"v\":1.0," IDS "}", "version 1 only");
    bad("{\"v\":\"1\"," IDS "}", "\"v\" is a string");
    bad("{\"v\":null," IDS "}", "\"v\" is null");
    ck_assert_msg(build("{\"v\":1," IDS "}") == 0, "%s", err);
}
END_TEST

/* Missing and null mapped fields are the faults a row's NULLs are. */
START_TEST(test_row_faults)
{
    ck_assert_int_eq(build("{\"v\":1,\"aggregate_type\":\"a\",\"aggregate_id\":\"1\","
                           "\"event_type\":\"t\",\"payload\":\"p\"}"),
                     -1);
    ck_assert_int_eq(ev.fault, OF_NULL_EVENT_ID);
    ck_assert_str_eq(ev.topic, "outbox.event.a"); /* the dead letter says where it was going */
    SLICE_EQ(ev.value, "p");
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"\",\"aggregate_type\":\"a\","
                           "\"aggregate_id\":\"1\",\"event_type\":\"t\"}"),
                     -1);
    ck_assert_int_eq(ev.fault, OF_EMPTY_EVENT_ID);
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\","
                           "\"aggregate_id\":null,\"event_type\":\"t\"}"),
                     -1);
    ck_assert_int_eq(ev.fault, OF_NULL_AGGREGATE_ID);
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a\","
                           "\"aggregate_id\":\"1\"}"),
                     -1);
    ck_assert_int_eq(ev.fault, OF_NULL_EVENT_TYPE);
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_id\":\"1\","
                           "\"event_type\":\"t\"}"),
                     -1);
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC); /* ${aggregate_type} is NULL */
    ck_assert_int_eq(build("{\"v\":1,\"event_id\":\"e\",\"aggregate_type\":\"a b\","
                           "\"aggregate_id\":\"1\",\"event_type\":\"t\"}"),
                     -1);
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC);
    /* the content's headers stay on a poison event (its dead letter) */
    ck_assert_int_eq(build("{\"v\":1,\"aggregate_type\":\"a\",\"aggregate_id\":\"1\","
                           "\"event_type\":\"t\",\"headers\":{\"tenant\":\"acme\"}}"),
                     -1);
    HEADER_EQ("tenant", "acme");
}
END_TEST

/* The section's column names and headers map a message as they map a row. */
START_TEST(test_section_mapping)
{
    static const char *const dbz[OC__COUNT] = {"id",      "aggregatetype", "aggregateid",
                                               "version", "type",          "payload"};
    struct outbox_map m;
    ck_assert_int_eq(outbox_map_init(&m, "public.outbox", dbz, "outbox.${aggregatetype}.${tier}",
                                     err, sizeof(err)),
                     0);
    ck_assert_msg(outbox_map_set_headers(&m, "event_id:id,commit_lsn:lsn",
                                         "tier:header:x-tier,type:header:eventType", err,
                                         sizeof(err)) == 0,
                  "%s", err);
    ck_assert_int_eq(outbox_map_set_span_context(&m, "tracingspancontext", err, sizeof(err)),
                     0);
    struct emitmsg *p = emitmsg_new(&m, "billing");
    ck_assert_ptr_nonnull(p);
    const struct relation *rel;
    const struct col_value *vals;
    int n;
    static const char content[] =
        "{\"v\":1,\"event_id\":\"e1\",\"aggregate_type\":\"inv\",\"aggregate_id\":\"9\","
        "\"event_type\":\"Sent\",\"payload\":\"x\",\"headers\":{\"tier\":\"gold\","
        "\"tracingspancontext\":\"traceparent=00-0af7651916cd43dd8448eb211c80319c-"
        "b7ad6b7169203331-01\",\"other\":\"o\"}}";
    ck_assert_msg(emitmsg_parse(p, content, strlen(content), &rel, &vals, &n, err,
                                sizeof(err)) == 0,
                  "%s", err);
    /* the pseudo-row: the section's column names, then the placed ones */
    ck_assert_str_eq(rel->nspname, "pg_logical_emit_message");
    ck_assert_str_eq(rel->relname, "billing");
    ck_assert_int_eq(n, 8);
    ck_assert_str_eq(rel->cols[0].name, "id");
    ck_assert_str_eq(rel->cols[4].name, "type");
    ck_assert_str_eq(rel->cols[6].name, "tier");
    ck_assert_str_eq(rel->cols[7].name, "tracingspancontext");
    ck_assert_int_eq(vals[3].kind, CV_NULL);
    ck_assert_int_eq(vals[6].kind, CV_TEXT);

    ck_assert_msg(emitmsg_event_build(p, &m, content, strlen(content), LSN, &ev, err,
                                      sizeof(err)) == 0,
                  "%s", err);
    ck_assert_str_eq(ev.topic, "outbox.inv.gold");
    SLICE_EQ(ev.key, "9");
    HEADER_EQ("id", "e1");
    HEADER_EQ("lsn", "16/B374D848");
    HEADER_EQ("x-tier", "gold");
    HEADER_EQ("eventType", "Sent");
    HEADER_EQ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    HEADER_EQ("other", "o");
    NO_HEADER("tier"); /* placed as configured, not a second time */
    NO_HEADER("tracingspancontext");
    /* a placed column the message lacks: no header, as for a NULL column */
    static const char plain[] =
        "{\"v\":1,\"event_id\":\"e2\",\"aggregate_type\":\"inv\",\"aggregate_id\":\"9\","
        "\"event_type\":\"Sent\"}";
    ck_assert_int_eq(emitmsg_event_build(p, &m, plain, strlen(plain), LSN, &ev, err,
                                         sizeof(err)),
                     -1);
    ck_assert_int_eq(ev.fault, OF_BAD_TOPIC); /* ${tier} is NULL */
    emitmsg_free(p);
    outbox_map_free(&m);
}
END_TEST

/* Rows and messages alternate through one map: each is built from its own
 * layout (the map caches column positions per layout). */
START_TEST(test_interleaved_with_rows)
{
    static const char *const cols[] = {"payload", "event_type", "aggregate_id", "event_id",
                                       "aggregate_type"};
    struct relation *r = relation_new(1, "public", "outbox_events", 'd', 5);
    for (int i = 0; i < 5; i++) r->cols[i].name = strdup(cols[i]);
    struct col_value v[5] = {{CV_TEXT, 3, "row"}, {CV_TEXT, 1, "T"}, {CV_TEXT, 1, "7"},
                             {CV_TEXT, 2, "r1"}, {CV_TEXT, 1, "x"}};
    for (int round = 0; round < 2; round++) {
        ck_assert_int_eq(outbox_event_build(&map, r, v, 5, LSN, &ev, err, sizeof(err)), 0);
        SLICE_EQ(ev.value, "row");
        SLICE_EQ(ev.event_id, "r1");
        ck_assert_str_eq(ev.topic, "outbox.event.x");
        ck_assert_msg(build("{\"v\":1,\"event_id\":\"m1\",\"aggregate_type\":\"y\","
                            "\"aggregate_id\":\"8\",\"event_type\":\"U\",\"payload\":\"msg\"}") ==
                          0,
                      "%s", err);
        SLICE_EQ(ev.value, "msg");
        SLICE_EQ(ev.event_id, "m1");
        ck_assert_str_eq(ev.topic, "outbox.event.y");
    }
    relation_free(r);
}
END_TEST

START_TEST(test_prefix_setting)
{
    ck_assert_int_eq(outbox_map_set_message_prefix(&map, "outbox", err, sizeof(err)), 0);
    ck_assert_str_eq(map.message_prefix, "outbox");
    ck_assert_int_eq(outbox_map_set_message_prefix(&map, "", err, sizeof(err)), 0);
    ck_assert_ptr_null(map.message_prefix);
    ck_assert_int_eq(outbox_map_set_message_prefix(&map, "outboxd.heartbeat", err, sizeof(err)),
                     -1);
    ERR_HAS("heartbeat");
    ck_assert_ptr_null(map.message_prefix);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("emitmsg");
    TCase *tc = tcase_create("content");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_every_field);
    tcase_add_test(tc, test_optional_fields);
    tcase_add_test(tc, test_base64_payload);
    tcase_add_test(tc, test_malformed);
    tcase_add_test(tc, test_versions);
    tcase_add_test(tc, test_row_faults);
    tcase_add_test(tc, test_section_mapping);
    tcase_add_test(tc, test_interleaved_with_rows);
    tcase_add_test(tc, test_prefix_setting);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
