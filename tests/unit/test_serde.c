/*
 * test_serde.c - the Schema Registry's wire format (serde_wire.h), a JSON
 * payload as Avro binary (serde_avro.h), the registry's answers and paths
 * (registry.h) and the subject names (serde.h). The Avro bytes expected
 * here are worked out by hand from the specification's binary encoding,
 * not taken from libavro.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "registry.h"
#include "serde.h"
#include "serde_avro.h"
#include "serde_jsonschema.h"
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

static const char *CUSTOMER_SCHEMA =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"title\":\"Customer\","
    "\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"id\",\"name\"],"
    "\"properties\":{\"id\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":4},"
    "\"name\":{\"type\":\"string\"},\"tier\":{\"enum\":[\"gold\",\"silver\",1]},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"exclusiveMaximum\":150},"
    "\"score\":{\"type\":[\"number\",\"null\"],\"multipleOf\":0.5},"
    "\"items\":{\"type\":\"array\",\"maxItems\":3,\"uniqueItems\":true,"
    "\"items\":{\"$ref\":\"#/$defs/Item\"}},"
    "\"contact\":{\"oneOf\":[{\"type\":\"string\",\"format\":\"email\"},{\"type\":\"integer\"}]},"
    "\"nick\":{\"not\":{\"const\":\"root\"}}},"
    "\"$defs\":{\"Item\":{\"type\":\"object\",\"required\":[\"sku\"],"
    "\"properties\":{\"sku\":{\"type\":\"string\"},\"qty\":{\"type\":\"integer\",\"minimum\":1}}}}}";

static int validate(const struct serde_jsonschema *js, const char *json)
{
    return serde_jsonschema_validate(js, json, strlen(json), err, sizeof(err));
}

START_TEST(test_jsonschema)
{
    struct serde_jsonschema *js =
        serde_jsonschema_new(CUSTOMER_SCHEMA, strlen(CUSTOMER_SCHEMA), err, sizeof(err));
    ck_assert_msg(js != NULL, "%s", err);
    ck_assert_msg(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"tier\":1.0,\"age\":30,"
                               "\"score\":2.5,\"items\":[{\"sku\":\"x\",\"qty\":2},{\"sku\":\"y\"}],"
                               "\"contact\":7,\"nick\":\"me\"}") == 0,
                  "%s", err);
    ck_assert_msg(validate(js, "{\"id\":\"\xc3\xa4\xc3\xa4\",\"name\":\"A\",\"score\":null,"
                               "\"age\":149.0}") == 0,
                  "%s", err); /* 2 code points, 4 bytes; 149.0 is an integer */
    ck_assert_int_eq(validate(js, "{\"name\":\"A\"}"), -1);
    ERR_HAS("$: required member \"id\" is missing");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"nmae\":1}"), -1);
    ERR_HAS("member \"nmae\" is not allowed");
    ck_assert_int_eq(validate(js, "{\"id\":\"c\",\"name\":\"A\"}"), -1);
    ERR_HAS("$.id: a string of 1 characters, shorter than minLength 2");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":5}"), -1);
    ERR_HAS("$.name: an integer where the schema wants string");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"tier\":\"bronze\"}"), -1);
    ERR_HAS("$.tier: a string that is not one of the schema's enum values");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"age\":150}"), -1);
    ERR_HAS("$.age: 150 is not below the exclusive maximum 150");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"age\":1.5}"), -1);
    ERR_HAS("$.age: a number where the schema wants integer");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"score\":0.3}"), -1);
    ERR_HAS("$.score: 0.3 is not a multiple of 0.5");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"items\":[{\"qty\":1}]}"), -1);
    ERR_HAS("$.items[0]: required member \"sku\" is missing");
    ck_assert_int_eq(
        validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"items\":[{\"sku\":\"a\",\"qty\":0}]}"), -1);
    ERR_HAS("$.items[0].qty: 0 is below the minimum 1");
    ck_assert_int_eq(
        validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"items\":[{\"sku\":\"a\"},{\"sku\":\"a\"}]}"),
        -1);
    ERR_HAS("$.items: items 0 and 1 are equal (uniqueItems)");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"contact\":true}"), -1);
    ERR_HAS("$.contact: fits 0 of oneOf's 2 schemas");
    ck_assert_int_eq(validate(js, "{\"id\":\"c1\",\"name\":\"A\",\"nick\":\"root\"}"), -1);
    ERR_HAS("$.nick: fits the schema of \"not\"");
    ck_assert_int_eq(validate(js, "[1]"), -1);
    ERR_HAS("$: an array where the schema wants object");
    ck_assert_int_eq(validate(js, "{"), -1);
    ERR_HAS("the payload is not JSON");
    serde_jsonschema_free(js);

    /* draft 4's boolean exclusiveMaximum */
    const char *d4 = "{\"type\":\"number\",\"maximum\":5,\"exclusiveMaximum\":true}";
    js = serde_jsonschema_new(d4, strlen(d4), err, sizeof(err));
    ck_assert_msg(js != NULL, "%s", err);
    ck_assert_int_eq(validate(js, "4.5"), 0);
    ck_assert_int_eq(validate(js, "5"), -1);
    ERR_HAS("5 is above the maximum 5 (exclusive)");
    serde_jsonschema_free(js);
}
END_TEST

/* Keywords outboxd does not evaluate are refused when the schema is
 * compiled, never skipped. */
START_TEST(test_jsonschema_refused)
{
    static const char *const refused[][2] = {
        {"{\"type\":\"string\",\"pattern\":\"^a\"}", "uses \"pattern\" (at #)"},
        {"{\"properties\":{\"a\":{\"if\":{}}}}", "uses \"if\" (at #/properties/a)"},
        {"{\"items\":[{\"type\":\"string\"}]}", "is an array (a tuple)"},
        {"{\"$ref\":\"http://example.com/s.json\"}", "is not a reference to the schema itself"},
        {"{\"$ref\":\"#/$defs/missing\"}", "is not a reference to the schema itself"},
        {"[1]", "is not a schema"},
        {"{", "is not JSON"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        ck_assert_ptr_null(
            serde_jsonschema_new(refused[i][0], strlen(refused[i][0]), err, sizeof(err)));
        ERR_HAS(refused[i][1]);
    }
    const char *ok = "true";
    struct serde_jsonschema *js = serde_jsonschema_new(ok, 4, err, sizeof(err));
    ck_assert_ptr_nonnull(js);
    ck_assert_int_eq(validate(js, "{\"anything\":[1]}"), 0);
    serde_jsonschema_free(js);
}
END_TEST

/* A $ref may point anywhere in the document: the crash of issue 53 was a
 * $ref to a const whose own "$ref" is a number (never compiled as a
 * schema, then followed with a NULL string). Every target is compiled as
 * a schema now, and loops that never go into the payload are refused. */
START_TEST(test_jsonschema_refs)
{
    static const char *const refused[][2] = {
        {"{\"$schema\":\"http://json-schema.org/draft-07/schema#\","
         "\"$ref\":\"#/definitions/x/const\","
         "\"definitions\":{\"x\":{\"const\":{\"$ref\":5}}}}",
         "$ref (not a string) at #/definitions/x/const is not a reference"},
        {"{\"$ref\":\"#/definitions/x/const\","
         "\"definitions\":{\"x\":{\"const\":{\"pattern\":\"a\"}}}}",
         "uses \"pattern\" (at #/definitions/x/const)"},
        {"{\"$ref\":\"#\"}", "loops: following its $ref # comes back"},
        {"{\"anyOf\":[{\"type\":\"string\"},{\"$ref\":\"#\"}]}", "loops"},
        {"{\"$ref\":\"#/$defs/a\",\"$defs\":{\"a\":{\"allOf\":[{\"$ref\":\"#/$defs/b\"}]},"
         "\"b\":{\"not\":{\"$ref\":\"#/$defs/a\"}}}}",
         "loops: following its $ref #/$defs/a comes back"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        err[0] = '\0';
        ck_assert_ptr_null(
            serde_jsonschema_new(refused[i][0], strlen(refused[i][0]), err, sizeof(err)));
        ERR_HAS(refused[i][1]);
    }
    /* a recursion through properties or items goes into the payload: a
     * recursive type, not a loop */
    const char *tree = "{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\","
                       "\"items\":{\"$ref\":\"#\"}},\"name\":{\"$ref\":\"#/$defs/n\"}},"
                       "\"$defs\":{\"n\":{\"allOf\":[{\"type\":\"string\"}]}}}";
    struct serde_jsonschema *js = serde_jsonschema_new(tree, strlen(tree), err, sizeof(err));
    ck_assert_msg(js != NULL, "%s", err);
    ck_assert_msg(validate(js, "{\"name\":\"a\",\"kids\":[{\"kids\":[{\"name\":\"c\"}]}]}") == 0,
                  "%s", err);
    ck_assert_int_eq(validate(js, "{\"kids\":[{\"kids\":[{\"name\":3}]}]}"), -1);
    ERR_HAS("$.kids[0].kids[0].name: an integer where the schema wants string");
    serde_jsonschema_free(js);
}
END_TEST

/* {"c": {"c": ... leaf}} nested levels deep (caller frees). */
static char *nested(int levels, const char *leaf)
{
    size_t n = (size_t)levels * 6 + strlen(leaf) + 1;
    char *s = malloc(n), *p = s;
    ck_assert_ptr_nonnull(s);
    for (int i = 0; i < levels; i++) p += sprintf(p, "{\"c\":");
    p += sprintf(p, "%s", leaf);
    for (int i = 0; i < levels; i++) *p++ = '}';
    *p = '\0';
    return s;
}

/* What a payload may cost is bounded (serde_int.h): anyOf over a
 * recursive $ref whose both branches descend re-checks each level twice,
 * 2^60 walks for 60 levels on the old code; it now ends at the step limit,
 * named in the error. oneOf over the same recursion, whose other branch
 * fails at once, is linear and a 60-level payload fits (the old depth
 * limit of 64 subschemas refused it). */
START_TEST(test_jsonschema_limits)
{
    const char *one = "{\"$ref\":\"#/$defs/n\",\"$defs\":{\"n\":{\"oneOf\":["
                      "{\"type\":\"object\",\"required\":[\"c\"],"
                      "\"properties\":{\"c\":{\"$ref\":\"#/$defs/n\"}}},"
                      "{\"type\":\"object\",\"maxProperties\":0}]}}}";
    struct serde_jsonschema *js = serde_jsonschema_new(one, strlen(one), err, sizeof(err));
    ck_assert_msg(js != NULL, "%s", err);
    char *p = nested(60, "{}");
    ck_assert_msg(validate(js, p) == 0, "%s", err);
    free(p);
    p = nested(60, "5");
    ck_assert_int_eq(validate(js, p), -1);
    ERR_HAS("fits 0 of oneOf's 2 schemas");
    free(p);
    serde_jsonschema_free(js);

    const char *any = "{\"$ref\":\"#/$defs/n\",\"$defs\":{\"n\":{\"anyOf\":["
                      "{\"type\":\"object\",\"properties\":{\"c\":{\"$ref\":\"#/$defs/n\"}}},"
                      "{\"type\":\"object\",\"minProperties\":1,"
                      "\"properties\":{\"c\":{\"$ref\":\"#/$defs/n\"}}}]}}}";
    js = serde_jsonschema_new(any, strlen(any), err, sizeof(err));
    ck_assert_msg(js != NULL, "%s", err);
    p = nested(60, "{}");
    ck_assert_msg(validate(js, p) == 0, "%s", err); /* the first branch fits: linear */
    free(p);
    p = nested(60, "5");
    ck_assert_int_eq(validate(js, p), -1);
    ERR_HAS("$.c.c.c");
    ERR_HAS("checking the payload against the schema takes more than");
    ERR_HAS("steps, outboxd's limit per payload");
    free(p);
    /* deeper than the depth limit: said so, not "fits none" */
    p = nested(200, "{}");
    ck_assert_int_eq(validate(js, p), -1);
    ERR_HAS("the schema nests deeper than 256 subschemas here, outboxd's limit");
    free(p);
    serde_jsonschema_free(js);
}
END_TEST

/* uniqueItems sorts the items' canonical forms: equal in JSON Schema's
 * sense (1 = 1.0, members in any order) and only then; many items. */
START_TEST(test_jsonschema_unique)
{
    const char *u = "{\"type\":\"array\",\"uniqueItems\":true}";
    struct serde_jsonschema *js = serde_jsonschema_new(u, strlen(u), err, sizeof(err));
    ck_assert_msg(js != NULL, "%s", err);
    ck_assert_msg(validate(js, "[1,\"1\",[1],{\"a\":1},true,null,false,1.5,[],{},\"\"]") == 0,
                  "%s", err);
    ck_assert_int_eq(validate(js, "[0,{\"a\":1,\"b\":[1,2]},3,{\"b\":[1.0,2],\"a\":1}]"), -1);
    ERR_HAS("$: items 1 and 3 are equal (uniqueItems)");
    ck_assert_int_eq(validate(js, "[2,-0.0,5,0,2]"), -1);
    ERR_HAS("$: items 0 and 4 are equal"); /* the lowest first index, as before */
    ck_assert_int_eq(validate(js, "[[\"a\",\"b\"],[\"ab\"],[\"a\",\"b\"]]"), -1);
    ERR_HAS("items 0 and 2 are equal");
    enum { N = 5000 };
    char *arr = malloc(N * 24 + 64), *p = arr;
    ck_assert_ptr_nonnull(arr);
    *p++ = '[';
    for (int i = 0; i < N; i++) p += sprintf(p, "%s{\"k\":%d,\"v\":\"x%d\"}", i ? "," : "", i, i);
    strcpy(p, "]");
    ck_assert_msg(validate(js, arr) == 0, "%s", err);
    strcpy(p, ",{\"v\":\"x7\",\"k\":7.0}]");
    ck_assert_int_eq(validate(js, arr), -1);
    ERR_HAS("$: items 7 and 5000 are equal (uniqueItems)");
    free(arr);
    serde_jsonschema_free(js);
}
END_TEST

/* Avro: a union of two records that both recurse, and a payload that fits
 * neither 60 levels down, made the old walk try both branches at every
 * level (2^60); the step limit ends it, named in the error. A payload that
 * fits the first branch at each level encodes. */
START_TEST(test_avro_union_limits)
{
    const char *schema =
        "{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"c\",\"type\":[\"null\","
        "\"A\",{\"type\":\"record\",\"name\":\"B\",\"fields\":[{\"name\":\"c\","
        "\"type\":[\"null\",\"A\",\"B\"]}]}]}]}";
    struct serde_avro *a = serde_avro_new(schema, strlen(schema), err, sizeof(err));
    ck_assert_msg(a != NULL, "%s", err);
    const char *out;
    size_t n;
    char *p = nested(60, "null");
    ck_assert_msg(encode(a, p, &out, &n) == 0, "%s", err);
    ck_assert_uint_eq(n, 60); /* branch 1 (A) at 59 levels, then branch 0 (null) */
    free(p);
    p = nested(60, "5");
    ck_assert_int_eq(encode(a, p, &out, &n), -1);
    ERR_HAS("$.c.c.c");
    ERR_HAS("checking the payload against the schema takes more than");
    free(p);
    p = nested(200, "null");
    ck_assert_int_eq(encode(a, p, &out, &n), -1);
    ERR_HAS("nests deeper than 256");
    free(p);
    serde_avro_free(a);
}
END_TEST

/* The subject strategies: Confluent's names, the record name rendered
 * from the row's columns. */
START_TEST(test_subjects)
{
    struct rel_column cols[] = {{.name = "event_id"}, {.name = "event_type"}};
    struct relation rel = {.nspname = "public", .relname = "outbox", .ncols = 2, .cols = cols};
    struct col_value vals[] = {{CV_TEXT, 2, "e1"}, {CV_TEXT, 11, "OrderPlaced"}};
    struct outbox_event ev;
    memset(&ev, 0, sizeof(ev));
    snprintf(ev.topic, sizeof(ev.topic), "outbox.event.order");
    char subject[SERDE_SUBJECT_MAX];
    struct serde_spec spec = {.format = VALUE_AVRO, .strategy = SUBJECT_TOPIC_RECORD,
                              .record_name = "com.acme.${event_type}"};
    struct serde *s = serde_new(&spec, NULL, err, sizeof(err));
    ck_assert_msg(s != NULL, "%s", err);
    ck_assert_int_eq(serde_subject(s, &ev, &rel, vals, 2, subject, sizeof(subject), err,
                                   sizeof(err)),
                     0);
    ck_assert_str_eq(subject, "outbox.event.order-com.acme.OrderPlaced");
    serde_free(s);
    spec.strategy = SUBJECT_RECORD;
    s = serde_new(&spec, NULL, err, sizeof(err));
    ck_assert_int_eq(serde_subject(s, &ev, &rel, vals, 2, subject, sizeof(subject), err,
                                   sizeof(err)),
                     0);
    ck_assert_str_eq(subject, "com.acme.OrderPlaced");
    vals[1] = (struct col_value){CV_NULL, 0, NULL};
    ck_assert_int_eq(serde_subject(s, &ev, &rel, vals, 2, subject, sizeof(subject), err,
                                   sizeof(err)),
                     -1);
    ERR_HAS("value_record_name: topic template: column \"event_type\" is NULL");
    serde_free(s);
    spec.record_name = "com.acme.${";
    ck_assert_ptr_null(serde_new(&spec, NULL, err, sizeof(err)));
    ERR_HAS("value_record_name \"com.acme.${\"");
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
    ERR_HAS("the registry refused the lookup for subject \"x\" (HTTP 500): (the answer is not "
            "the registry's JSON");
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

/* Credentials in the URL never reach the error, which goes to the log,
 * /readyz and outboxd check (issue 53). */
START_TEST(test_registry_error_masks_url)
{
    struct registry_opts o = {.url = "http://bob:S3cr3t@127.0.0.1:1/", .timeout_ms = 500};
    struct registry_schema sch;
    bool nf;
    ck_assert_int_eq(registry_fetch(&o, "orders-value", REGISTRY_LATEST, &sch, &nf, err,
                                    sizeof(err)),
                     -1);
    ERR_HAS("schema registry http://********@127.0.0.1:1/subjects/orders-value/versions/latest: ");
    ck_assert_msg(!strstr(err, "S3cr3t") && !strstr(err, "bob"), "%s", err);
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

/* A registry of one subject on a loopback port: each request gets the
 * version fake_version says (1: id 7, 2: id 8), whatever it asks. */
static _Atomic int fake_version = 1;
static int fake_fd = -1;

static void *fake_registry(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(fake_fd, NULL, NULL);
        if (c < 0) return NULL; /* shut down */
        char req[4096];
        size_t n = 0;
        ssize_t got;
        while (n + 1 < sizeof(req) && (got = read(c, req + n, sizeof(req) - 1 - n)) > 0) {
            n += (size_t)got;
            req[n] = '\0';
            if (strstr(req, "\r\n\r\n")) break;
        }
        int v = fake_version;
        char body[256], resp[512];
        int bl = snprintf(body, sizeof(body),
                          "{\"subject\":\"orders-value\",\"version\":%d,\"id\":%d,"
                          "\"schema\":\"{\\\"type\\\":\\\"%s\\\"}\"}",
                          v, 6 + v, v == 1 ? "string" : "long");
        int rl = snprintf(resp, sizeof(resp),
                          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                          bl, body);
        ssize_t w = write(c, resp, (size_t)rl);
        (void)w;
        close(c);
    }
}

/* Waits until the registry has made ok successful lookups. */
static void wait_ok(struct registry *reg, uint64_t ok)
{
    struct registry_stats st;
    for (int i = 0; i < 5000; i++) {
        registry_stats(reg, &st);
        if (st.requests_ok >= ok) return;
        ck_assert_msg(st.requests_failed == 0, "a lookup failed");
        usleep(1000);
    }
    ck_abort_msg("the registry made %llu lookups, not %llu, in 5 s",
                 (unsigned long long)st.requests_ok, (unsigned long long)ok);
}

/* orders-value (latest) at now_ms, once the registry made ok lookups. */
static const struct registry_schema *found_after(struct registry *reg, int64_t now_ms,
                                                 uint64_t ok)
{
    const struct registry_schema *sch = NULL;
    wait_ok(reg, ok);
    ck_assert_int_eq(registry_lookup(reg, "orders-value", REGISTRY_LATEST, now_ms, &sch, err,
                                     sizeof(err)),
                     REGISTRY_FOUND);
    return sch;
}

/* Issue 53: every refresh of a latest subject kept the schema it replaced
 * for the process's life, changed or not (288 a day per subject at 5 min).
 * Now a refresh that finds the same version keeps the cached one, one that
 * finds another replaces it, and the replaced one lives until the next
 * lookup: the pointer a lookup handed out is read below after a refresh
 * replaced it (memcheck.test_serde checks the read). */
START_TEST(test_registry_refresh_bounded)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    fake_fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fake_fd, 0);
    ck_assert_int_eq(bind(fake_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fake_fd, 8), 0);
    ck_assert_int_eq(getsockname(fake_fd, (struct sockaddr *)&a, &al), 0);
    pthread_t srv;
    ck_assert_int_eq(pthread_create(&srv, NULL, fake_registry, NULL), 0);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
    struct registry_opts o = {.url = url, .timeout_ms = 5000, .refresh_ms = 1, .retry_ms = 1};
    struct registry *reg = registry_new(&o, err, sizeof(err));
    ck_assert_msg(reg != NULL, "%s", err);
    const int64_t later = INT64_C(1) << 60; /* past every refresh period; 0: before any */
    const struct registry_schema *sch = NULL;
    enum registry_answer ans =
        registry_lookup(reg, "orders-value", REGISTRY_LATEST, 0, &sch, err, sizeof(err));
    ck_assert_int_eq(ans, REGISTRY_PENDING);
    enum { N = 30 };
    for (uint64_t i = 1; i <= N; i++) /* each lookup queues a refresh */
        ck_assert_int_eq(found_after(reg, later, i)->id, 7);
    ck_assert_int_eq(found_after(reg, 0, N + 1)->id, 7); /* the last refresh is done */
    struct registry_stats st;
    registry_stats(reg, &st);
    ck_assert_uint_eq(st.requests_ok, N + 1);
    ck_assert_int_eq(st.subjects, 1);
    ck_assert_int_eq(st.schemas, 1); /* was N + 1 */

    /* a changed version replaces the cached one; flipping back and forth
     * does not grow the cache either */
    uint64_t ok = N + 1;
    for (int i = 0; i < N; i++) {
        int was_version = fake_version;
        fake_version = 3 - was_version;
        const struct registry_schema *was = found_after(reg, later, ok); /* queues a refresh */
        ck_assert_int_eq(was->id, 6 + was_version);
        wait_ok(reg, ++ok);
        registry_stats(reg, &st);
        ck_assert_int_eq(st.schemas, 2); /* the new one, and the one replaced */
        /* replaced, and still valid until the next lookup */
        ck_assert_int_eq(was->id, 6 + was_version);
        ck_assert_str_eq(was->schema, was_version == 1 ? "{\"type\":\"string\"}"
                                                       : "{\"type\":\"long\"}");
        sch = found_after(reg, 0, ok);
        ck_assert_int_eq(sch->id, 6 + fake_version);
        registry_stats(reg, &st);
        ck_assert_int_eq(st.schemas, 1);
    }
    registry_free(reg);
    shutdown(fake_fd, SHUT_RDWR);
    pthread_join(srv, NULL);
    close(fake_fd);
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
    tcase_add_test(tc, test_jsonschema);
    tcase_add_test(tc, test_jsonschema_refused);
    tcase_add_test(tc, test_jsonschema_refs);
    tcase_add_test(tc, test_jsonschema_limits);
    tcase_add_test(tc, test_jsonschema_unique);
    tcase_add_test(tc, test_avro_union_limits);
    tcase_add_test(tc, test_subjects);
    tcase_add_test(tc, test_registry_answers);
    tcase_add_test(tc, test_registry_paths);
    tcase_add_test(tc, test_registry_error_masks_url);
    tcase_add_test(tc, test_serde_waits_for_registry);
    tcase_add_test(tc, test_registry_refresh_bounded);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
