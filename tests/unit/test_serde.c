/*
 * test_serde.c - the Schema Registry's wire format (serde_wire.h), a JSON
 * payload as Avro binary (serde_avro.h), the registry's answers and paths
 * (registry.h) and the subject names (serde.h). The Avro bytes expected
 * here are worked out by hand from the specification's binary encoding,
 * not taken from libavro.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry.h"
#include "serde.h"
#include "serde_avro.h"
#include "serde_wire.h"

static char err[1024];

#define ERR_HAS(s)                                                                         \
    ck_assert_msg(strstr(err, (s)) != NULL, "err \"%s\" does not mention \"%s\"", err, (s))

static void assert_bytes(const void *got, size_t n, const unsigned char *want, size_t wn)
{
    ck_assert_uint_eq(n, wn);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(((const unsigned char *)got)[i] == want[i],
                      "byte %zu: got 0x%02x, want 0x%02x", i, ((const unsigned char *)got)[i],
                      want[i]);
}

START_TEST(test_wire_prefix)
{
    unsigned char b[SERDE_WIRE_PREFIX];
    ck_assert_uint_eq(serde_wire_prefix(b, 0x01020304), 5);
    assert_bytes(b, 5, (const unsigned char[]){0, 1, 2, 3, 4}, 5);
    serde_wire_prefix(b, 70000);
    int32_t id;
    size_t body;
    ck_assert_int_eq(serde_wire_read(b, 5, &id, &body), 0);
    ck_assert_int_eq(id, 70000);
    ck_assert_uint_eq(body, 5);
    ck_assert_int_eq(serde_wire_read(b, 4, &id, &body), -1);
    b[0] = 1;
    ck_assert_int_eq(serde_wire_read(b, 5, &id, &body), -1);
}
END_TEST

START_TEST(test_wire_indexes)
{
    unsigned char b[SERDE_WIRE_INDEX_MAX];
    int idx[SERDE_WIRE_MAX_INDEXES];
    /* [0]: the single byte 0 */
    ck_assert_int_eq(serde_wire_parse_indexes("0", idx), 1);
    assert_bytes(b, serde_wire_indexes(b, idx, 1), (const unsigned char[]){0}, 1);
    /* [1, 0]: count 2 -> 4, 1 -> 2, 0 -> 0 (zig-zag) */
    ck_assert_int_eq(serde_wire_parse_indexes("1.0", idx), 2);
    assert_bytes(b, serde_wire_indexes(b, idx, 2), (const unsigned char[]){4, 2, 0}, 3);
    /* [2]: count 1 -> 2, 2 -> 4 */
    ck_assert_int_eq(serde_wire_parse_indexes("2", idx), 1);
    assert_bytes(b, serde_wire_indexes(b, idx, 1), (const unsigned char[]){2, 4}, 2);
    /* 64 -> zig-zag 128: a two-byte varint */
    ck_assert_int_eq(serde_wire_parse_indexes("64", idx), 1);
    assert_bytes(b, serde_wire_indexes(b, idx, 1), (const unsigned char[]){2, 0x80, 0x01}, 3);
    ck_assert_int_eq(serde_wire_parse_indexes("3,1", idx), 2);
    ck_assert_int_eq(idx[0], 3);
    ck_assert_int_eq(idx[1], 1);
    ck_assert_int_eq(serde_wire_parse_indexes("", idx), -1);
    ck_assert_int_eq(serde_wire_parse_indexes("1.", idx), -1);
    ck_assert_int_eq(serde_wire_parse_indexes("-1", idx), -1);
    ck_assert_int_eq(serde_wire_parse_indexes("a", idx), -1);
    ck_assert_int_eq(serde_wire_parse_indexes("0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0", idx), -1);
}
END_TEST

static const char *ORDER_SCHEMA =
    "{\"type\":\"record\",\"name\":\"Order\",\"namespace\":\"com.acme\",\"fields\":["
    "{\"name\":\"name\",\"type\":\"string\"},"
    "{\"name\":\"qty\",\"type\":\"int\"},"
    "{\"name\":\"note\",\"type\":[\"null\",\"string\"],\"default\":null},"
    "{\"name\":\"price\",\"type\":\"double\"},"
    "{\"name\":\"tags\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
    "{\"name\":\"kind\",\"type\":{\"type\":\"enum\",\"name\":\"Kind\",\"symbols\":[\"A\",\"B\"]}},"
    "{\"name\":\"total\",\"type\":\"long\"}]}";

static struct serde_avro *order_avro(void)
{
    struct serde_avro *a = serde_avro_new(ORDER_SCHEMA, strlen(ORDER_SCHEMA), err, sizeof(err));
    ck_assert_msg(a != NULL, "%s", err);
    return a;
}

static int encode(struct serde_avro *a, const char *json, const char **out, size_t *n)
{
    return serde_avro_encode(a, json, strlen(json), out, n, err, sizeof(err));
}

START_TEST(test_avro_record)
{
    struct serde_avro *a = order_avro();
    const char *out;
    size_t n;
    ck_assert_msg(encode(a, "{\"name\":\"ab\",\"qty\":3,\"note\":null,\"price\":1.5,"
                            "\"tags\":[\"x\"],\"kind\":\"B\",\"total\":-65}",
                         &out, &n) == 0,
                  "%s", err);
    static const unsigned char want[] = {
        0x04, 'a', 'b',                                /* name: length 2, "ab" */
        0x06,                                          /* qty 3 */
        0x00,                                          /* note: union branch 0, null */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF8, 0x3F, /* price 1.5, little-endian */
        0x02, 0x02, 'x', 0x00,                         /* tags: block of 1, "x", end */
        0x02,                                          /* kind: symbol 1 */
        0x81, 0x01,                                    /* total -65: zig-zag 129 */
    };
    assert_bytes(out, n, want, sizeof(want));
    /* the optional field left out is null; the union's string branch is 1 */
    ck_assert_msg(encode(a, "{\"name\":\"\",\"qty\":0,\"price\":0,\"tags\":[],\"kind\":\"A\","
                            "\"total\":0}",
                         &out, &n) == 0,
                  "%s", err);
    assert_bytes(out, n, (const unsigned char[]){0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 14);
    ck_assert_msg(encode(a, "{\"name\":\"\",\"qty\":0,\"note\":\"hi\",\"price\":0,\"tags\":[],"
                            "\"kind\":\"A\",\"total\":0}",
                         &out, &n) == 0,
                  "%s", err);
    ck_assert_uint_eq(n, 17);
    assert_bytes(out + 2, 4, (const unsigned char[]){0x02, 0x04, 'h', 'i'}, 4);
    /* Avro's own JSON form of a union value */
    ck_assert_msg(encode(a, "{\"name\":\"\",\"qty\":0,\"note\":{\"string\":\"hi\"},\"price\":0,"
                            "\"tags\":[],\"kind\":\"A\",\"total\":0}",
                         &out, &n) == 0,
                  "%s", err);
    ck_assert_uint_eq(n, 17);
    serde_avro_free(a);
}
END_TEST

START_TEST(test_avro_mismatch)
{
    struct serde_avro *a = order_avro();
    const char *out;
    size_t n;
    ck_assert_int_eq(encode(a, "{\"name\":\"a\",\"qty\":\"3\",\"price\":1,\"tags\":[],"
                               "\"kind\":\"A\",\"total\":1}",
                            &out, &n),
                     -1);
    ERR_HAS("$.qty: a string where the schema has int");
    ck_assert_int_eq(encode(a, "{\"name\":\"a\",\"price\":1,\"tags\":[],\"kind\":\"A\","
                               "\"total\":1}",
                            &out, &n),
                     -1);
    ERR_HAS("$.qty: missing");
    ck_assert_int_eq(encode(a, "{\"name\":\"a\",\"qty\":1,\"price\":1,\"tags\":[],"
                               "\"kind\":\"A\",\"total\":1,\"qtty\":2}",
                            &out, &n),
                     -1);
    ERR_HAS("\"qtty\" is not a field of record Order");
    ck_assert_int_eq(encode(a, "{\"name\":\"a\",\"qty\":1,\"price\":1,\"tags\":[1],"
                               "\"kind\":\"A\",\"total\":1}",
                            &out, &n),
                     -1);
    ERR_HAS("$.tags[0]: an integer where the schema has string");
    ck_assert_int_eq(encode(a, "{\"name\":\"a\",\"qty\":1,\"price\":1,\"tags\":[],"
                               "\"kind\":\"C\",\"total\":1}",
                            &out, &n),
                     -1);
    ERR_HAS("\"C\" is not a symbol of enum Kind");
    ck_assert_int_eq(encode(a, "{\"name\":\"a\",\"qty\":3000000000,\"price\":1,\"tags\":[],"
                               "\"kind\":\"A\",\"total\":1}",
                            &out, &n),
                     -1);
    ERR_HAS("$.qty: an integer out of int's range");
    ck_assert_int_eq(encode(a, "{\"name\":\"a\",\"qty\":1,\"note\":5,\"price\":1,\"tags\":[],"
                               "\"kind\":\"A\",\"total\":1}",
                            &out, &n),
                     -1);
    ERR_HAS("$.note: an integer fits no branch of the union");
    ck_assert_int_eq(encode(a, "{\"name\":", &out, &n), -1);
    ERR_HAS("the payload is not JSON");
    ck_assert_int_eq(encode(a, "[1]", &out, &n), -1);
    ERR_HAS("$: an array where the schema has record Order");
    /* a good payload after the failures encodes whole (the value is reset) */
    ck_assert_int_eq(encode(a, "{\"name\":\"\",\"qty\":0,\"price\":0,\"tags\":[],\"kind\":\"A\","
                               "\"total\":0}",
                            &out, &n),
                     0);
    ck_assert_uint_eq(n, 14);
    serde_avro_free(a);
}
END_TEST

START_TEST(test_avro_types)
{
    const char *schema =
        "{\"type\":\"record\",\"name\":\"T\",\"fields\":["
        "{\"name\":\"b\",\"type\":\"boolean\"},"
        "{\"name\":\"f\",\"type\":\"float\"},"
        "{\"name\":\"raw\",\"type\":\"bytes\"},"
        "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":\"long\"}},"
        "{\"name\":\"fx\",\"type\":{\"type\":\"fixed\",\"name\":\"F2\",\"size\":2}}]}";
    struct serde_avro *a = serde_avro_new(schema, strlen(schema), err, sizeof(err));
    ck_assert_msg(a != NULL, "%s", err);
    const char *out;
    size_t n;
    ck_assert_msg(encode(a, "{\"b\":true,\"f\":2,\"raw\":\"\\u00ff\\u0001\",\"m\":{\"k\":1},"
                            "\"fx\":\"ab\"}",
                         &out, &n) == 0,
                  "%s", err);
    static const unsigned char want[] = {
        0x01,                   /* true */
        0x00, 0x00, 0x00, 0x40, /* 2.0f little-endian */
        0x04, 0xFF, 0x01,       /* bytes: length 2, 0xff 0x01 */
        0x02, 0x02, 'k', 0x02, 0x00, /* map: block of 1, "k", 1, end */
        'a', 'b',               /* fixed(2) */
    };
    assert_bytes(out, n, want, sizeof(want));
    ck_assert_int_eq(encode(a, "{\"b\":true,\"f\":2,\"raw\":\"\",\"m\":{},\"fx\":\"abc\"}", &out,
                            &n),
                     -1);
    ERR_HAS("3 bytes where the fixed F2 has 2");
    ck_assert_int_eq(encode(a, "{\"b\":true,\"f\":2,\"raw\":\"\\u0100\",\"m\":{},\"fx\":\"ab\"}",
                            &out, &n),
                     -1);
    ERR_HAS("above U+00FF");
    serde_avro_free(a);
    ck_assert_ptr_null(serde_avro_new("{\"type\":\"nope\"}", 16, err, sizeof(err)));
    ERR_HAS("not an Avro schema");
}
END_TEST

START_TEST(test_registry_answers)
{
    struct registry_schema s;
    bool nf;
    const char *ok = "{\"subject\":\"orders-value\",\"version\":3,\"id\":17,"
                     "\"schema\":\"{\\\"type\\\":\\\"string\\\"}\"}";
    ck_assert_int_eq(registry_parse_version(ok, strlen(ok), 200, "orders-value", &s, &nf, err,
                                            sizeof(err)),
                     0);
    ck_assert_int_eq(s.id, 17);
    ck_assert_int_eq(s.version, 3);
    ck_assert_str_eq(s.type, "AVRO"); /* absent: Avro */
    ck_assert_str_eq(s.schema, "{\"type\":\"string\"}");
    registry_schema_clear(&s);
    const char *pb = "{\"subject\":\"p\",\"version\":1,\"id\":2,\"schemaType\":\"PROTOBUF\","
                     "\"schema\":\"syntax = \\\"proto3\\\";\"}";
    ck_assert_int_eq(registry_parse_version(pb, strlen(pb), 200, "p", &s, &nf, err, sizeof(err)),
                     0);
    ck_assert_str_eq(s.type, "PROTOBUF");
    registry_schema_clear(&s);
    const char *nfb = "{\"error_code\":40401,\"message\":\"Subject 'x' not found.\"}";
    ck_assert_int_eq(registry_parse_version(nfb, strlen(nfb), 404, "x", &s, &nf, err,
                                            sizeof(err)),
                     -1);
    ck_assert(nf);
    ERR_HAS("subject not found for subject \"x\" (HTTP 404, error 40401)");
    const char *nv = "{\"error_code\":40402,\"message\":\"Version 9 not found.\"}";
    ck_assert_int_eq(registry_parse_version(nv, strlen(nv), 404, "x", &s, &nf, err,
                                            sizeof(err)),
                     -1);
    ck_assert(nf);
    ERR_HAS("version not found");
    ck_assert_int_eq(registry_parse_version("oops", 4, 500, "x", &s, &nf, err, sizeof(err)),
                     -1);
    ck_assert(!nf);
    ERR_HAS("the registry refused the lookup for subject \"x\" (HTTP 500");
    const char *noid = "{\"schema\":\"x\"}";
    ck_assert_int_eq(registry_parse_version(noid, strlen(noid), 200, "x", &s, &nf, err,
                                            sizeof(err)),
                     -1);
    ERR_HAS("is not a schema version");
}
END_TEST

START_TEST(test_registry_paths)
{
    char p[256];
    registry_version_path("orders-value", REGISTRY_LATEST, p, sizeof(p));
    ck_assert_str_eq(p, "/subjects/orders-value/versions/latest");
    registry_version_path("com.acme.Order", 4, p, sizeof(p));
    ck_assert_str_eq(p, "/subjects/com.acme.Order/versions/4");
    registry_version_path("a b/c?", 1, p, sizeof(p));
    ck_assert_str_eq(p, "/subjects/a%20b%2Fc%3F/versions/1");
}
END_TEST

/* An unreachable registry: the first lookup is pending, and the event
 * waits, its value untouched; never a value without its schema. */
START_TEST(test_serde_waits_for_registry)
{
    struct registry_opts o = {.url = "http://127.0.0.1:1", .timeout_ms = 500,
                              .refresh_ms = 60000, .retry_ms = 60000};
    struct registry *reg = registry_new(&o, err, sizeof(err));
    ck_assert_msg(reg != NULL, "%s", err);
    struct serde_spec spec = {.format = VALUE_AVRO, .strategy = SUBJECT_TOPIC};
    struct serde *s = serde_new(&spec, reg, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    struct outbox_event ev;
    memset(&ev, 0, sizeof(ev));
    snprintf(ev.topic, sizeof(ev.topic), "orders");
    ev.value = (struct slice){"{}", 2};
    char subject[SERDE_SUBJECT_MAX];
    ck_assert_int_eq(serde_subject(s, &ev, NULL, NULL, 0, subject, sizeof(subject), err,
                                   sizeof(err)),
                     0);
    ck_assert_str_eq(subject, "orders-value");
    ck_assert_int_eq(serde_encode(s, subject, &ev, 0, err, sizeof(err)), SERDE_WAIT);
    ck_assert_ptr_eq(ev.value.data, "{}");
    /* the lookup fails (connection refused); the event still waits */
    enum serde_result r;
    for (int i = 0; i < 500 && (r = serde_encode(s, subject, &ev, 0, err, sizeof(err))) ==
                                   SERDE_WAIT && !err[0];
         i++)
        usleep(10000);
    ck_assert_int_eq(r, SERDE_WAIT);
    ERR_HAS("schema registry http://127.0.0.1:1/subjects/orders-value/versions/latest");
    ck_assert_ptr_eq(ev.value.data, "{}");
    struct registry_stats st;
    registry_stats(reg, &st);
    ck_assert_uint_eq(st.requests_failed, 1);
    ck_assert_uint_eq(st.hits, 0);
    serde_free(s);
    /* a record strategy needs the record name */
    spec.strategy = SUBJECT_RECORD;
    ck_assert_ptr_null(serde_new(&spec, reg, err, sizeof(err)));
    ERR_HAS("needs value_record_name");
    registry_free(reg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("serde");
    TCase *tc = tcase_create("serde");
    tcase_add_test(tc, test_wire_prefix);
    tcase_add_test(tc, test_wire_indexes);
    tcase_add_test(tc, test_avro_record);
    tcase_add_test(tc, test_avro_mismatch);
    tcase_add_test(tc, test_avro_types);
    tcase_add_test(tc, test_registry_answers);
    tcase_add_test(tc, test_registry_paths);
    tcase_add_test(tc, test_serde_waits_for_registry);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
