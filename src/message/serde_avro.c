/*
 * serde_avro.c - a JSON payload as Avro binary (serde_avro.h): jansson
 * reads the JSON, a walk along the schema fills one libavro generic value
 * (reused from event to event), and libavro writes it.
 *
 * Avro binary (the specification's "Binary Encoding"), what libavro writes
 * and a consumer's KafkaAvroDeserializer reads after the registry's
 * 5-byte prefix: int and long as zig-zag varints, float and double as
 * little-endian IEEE 754, strings and bytes as a long length then the
 * bytes, a record as its fields in schema order, a union as the branch's
 * index (long) then the value, arrays and maps as blocks of a count then
 * the items. Nothing in it names a field: the reader must have the
 * writer's schema, hence the id in the prefix.
 */
#include "serde_avro.h"

#include <avro.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "serde_int.h"

struct serde_avro {
    avro_schema_t schema;
    avro_value_iface_t *iface;
    avro_value_t value; /* reused: reset before each payload */
    char *buf;          /* the encoded payload; owned */
    size_t cap;
};

struct serde_avro *serde_avro_new(const char *schema_json, size_t len, char *err, size_t errlen)
{
    struct serde_avro *a = calloc(1, sizeof(*a));
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (avro_schema_from_json_length(schema_json, len, &a->schema) != 0) {
        snprintf(err, errlen, "the registry's schema is not an Avro schema libavro reads: %s",
                 avro_strerror());
        free(a);
        return NULL;
    }
    a->iface = avro_generic_class_from_schema(a->schema);
    if (!a->iface || avro_generic_value_new(a->iface, &a->value) != 0) {
        snprintf(err, errlen, "cannot make a value of the Avro schema: %s", avro_strerror());
        if (a->iface) avro_value_iface_decref(a->iface);
        avro_schema_decref(a->schema);
        free(a);
        return NULL;
    }
    return a;
}

void serde_avro_free(struct serde_avro *a)
{
    if (!a) return;
    avro_value_decref(&a->value);
    avro_value_iface_decref(a->iface);
    avro_schema_decref(a->schema);
    free(a->buf);
    free(a);
}

/* One payload's walk. err is where a mismatch is said: the payload's own
 * buffer, or a union branch's while it is tried; a limit is always said in
 * the payload's (budget). depth: the fill() calls under way. */
struct walk {
    struct serde_path path;
    char *err;
    size_t errlen;
    struct serde_budget budget;
    int depth;
};

static avro_schema_t resolve(avro_schema_t s)
{
    while (s && is_avro_link(s)) s = avro_schema_link_target(s);
    return s;
}

/* "int", "union", "record com.acme.Order": what the schema has there. */
static const char *schema_kind(avro_schema_t s, char *buf, size_t len)
{
    const char *kind;
    switch (avro_typeof(s)) {
    case AVRO_RECORD: kind = "record"; break;
    case AVRO_ENUM: kind = "enum"; break;
    case AVRO_FIXED: kind = "fixed"; break;
    case AVRO_UNION: return "a union";
    case AVRO_ARRAY: return "an array";
    case AVRO_MAP: return "a map";
    default: return avro_schema_type_name(s);
    }
    snprintf(buf, len, "%s %s", kind, avro_schema_name(s));
    return buf;
}

static int mismatch(struct walk *w, const json_t *j, avro_schema_t s, const char *why)
{
    char kind[160];
    if (why)
        snprintf(w->err, w->errlen, "%s: %s", w->path.text, why);
    else
        snprintf(w->err, w->errlen, "%s: %s where the schema has %s", w->path.text,
                 serde_json_kind(j), schema_kind(s, kind, sizeof(kind)));
    return -1;
}

static int fill(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v);

/* Bytes of Avro's JSON encoding: each code point 0-255 is one byte. n is
 * the decoded length. Returns a malloc'd buffer (the caller frees it), or
 * NULL when a code point is above 255. */
static unsigned char *latin1_bytes(const char *s, size_t len, size_t *n)
{
    unsigned char *out = malloc(len + 1);
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            out[k++] = c;
        } else if ((c == 0xC2 || c == 0xC3) && i + 1 < len) {
            out[k++] = (unsigned char)(((c & 0x03) << 6) | ((unsigned char)s[++i] & 0x3F));
        } else {
            free(out);
            return NULL;
        }
    }
    *n = k;
    return out;
}

static int fill_bytes(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v)
{
    if (!json_is_string(j)) return mismatch(w, j, s, NULL);
    size_t n;
    unsigned char *b = latin1_bytes(json_string_value(j), json_string_length(j), &n);
    if (!b) return mismatch(w, j, s, "a string with a character above U+00FF, which Avro's "
                                     "JSON form of bytes cannot hold");
    int rc;
    if (is_avro_fixed(s)) {
        if ((int64_t)n != avro_schema_fixed_size(s)) {
            free(b);
            char why[128];
            snprintf(why, sizeof(why), "%zu bytes where the fixed %s has %lld", n,
                     avro_schema_name(s), (long long)avro_schema_fixed_size(s));
            return mismatch(w, j, s, why);
        }
        rc = avro_value_set_fixed(v, b, n);
    } else {
        rc = avro_value_set_bytes(v, b, n);
    }
    free(b);
    return rc == 0 ? 0 : mismatch(w, j, s, avro_strerror());
}

static int fill_record(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v)
{
    if (!json_is_object(j)) return mismatch(w, j, s, NULL);
    size_t nfields = avro_schema_record_size(s);
    size_t seen = 0;
    for (size_t i = 0; i < nfields; i++) {
        const char *name = avro_schema_record_field_name(s, (int)i);
        avro_schema_t fs = resolve(avro_schema_record_field_get_by_index(s, (int)i));
        avro_value_t field;
        if (avro_value_get_by_index(v, i, &field, NULL) != 0)
            return mismatch(w, j, s, avro_strerror());
        size_t was = serde_path_push(&w->path, name, 0);
        const json_t *m = json_object_get(j, name);
        if (m) seen++;
        int rc;
        if (!m && is_avro_union(fs)) {
            rc = fill(w, fs, json_null(), &field);
            if (rc == -1) rc = mismatch(w, j, fs, "missing, and its type has no null branch");
        } else if (!m) {
            rc = mismatch(w, j, fs, "missing (the field is not optional: its type has no null "
                                    "branch)");
        } else {
            rc = fill(w, fs, m, &field);
        }
        serde_path_pop(&w->path, was);
        if (rc != 0) return rc;
    }
    if (seen == json_object_size(j)) return 0;
    const char *key;
    json_t *m;
    json_object_foreach((json_t *)j, key, m)
    {
        if (avro_schema_record_field_get_index(s, key) < 0) {
            char why[200];
            snprintf(why, sizeof(why), "member \"%.100s\" is not a field of record %s", key,
                     avro_schema_name(s));
            return mismatch(w, j, s, why);
        }
    }
    return 0;
}

/* The union's branch named name ("string", "long", a record's name or
 * full name), or -1. */
static int union_branch_named(avro_schema_t s, const char *name)
{
    size_t n = avro_schema_union_size(s);
    for (size_t i = 0; i < n; i++) {
        avro_schema_t b = resolve(avro_schema_union_branch(s, (int)i));
        const char *bn = avro_schema_type_name(b);
        if (bn && strcmp(bn, name) == 0) return (int)i;
        const char *ns = avro_schema_namespace(b);
        if (bn && ns) {
            size_t nl = strlen(ns);
            if (strncmp(name, ns, nl) == 0 && name[nl] == '.' && strcmp(name + nl + 1, bn) == 0)
                return (int)i;
        }
    }
    return -1;
}

static int fill_union(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v)
{
    avro_value_t branch;
    /* Avro's JSON form: {"long": 5}, {"com.acme.Address": {...}}. */
    if (json_is_object(j) && json_object_size(j) == 1) {
        const char *key = json_object_iter_key(json_object_iter((json_t *)j));
        int i = union_branch_named(s, key);
        if (i >= 0) {
            avro_schema_t bs = resolve(avro_schema_union_branch(s, i));
            if (avro_value_set_branch(v, i, &branch) != 0)
                return mismatch(w, j, s, avro_strerror());
            return fill(w, bs, json_object_get(j, key), &branch);
        }
    }
    size_t n = avro_schema_union_size(s);
    char first_err[256] = "";
    for (size_t i = 0; i < n; i++) {
        avro_schema_t bs = resolve(avro_schema_union_branch(s, (int)i));
        if (avro_value_set_branch(v, (int)i, &branch) != 0) continue;
        /* Each branch is tried whole: a payload that fits none deep inside
         * costs a walk per branch per level, which the budget bounds. */
        char e[256] = "", *err = w->err;
        size_t errlen = w->errlen;
        w->err = e;
        w->errlen = sizeof(e);
        int rc = fill(w, bs, j, &branch);
        w->err = err;
        w->errlen = errlen;
        if (rc == 0 || rc == SERDE_LIMIT) return rc;
        if (!first_err[0]) snprintf(first_err, sizeof(first_err), "%s", e);
    }
    char why[400];
    snprintf(why, sizeof(why), "%s fits no branch of the union (first branch: %s)",
             serde_json_kind(j), first_err);
    return mismatch(w, j, s, why);
}

static int fill_array(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v)
{
    if (!json_is_array(j)) return mismatch(w, j, s, NULL);
    avro_schema_t items = resolve(avro_schema_array_items(s));
    for (size_t i = 0; i < json_array_size(j); i++) {
        avro_value_t elem;
        if (avro_value_append(v, &elem, NULL) != 0) return mismatch(w, j, s, avro_strerror());
        size_t was = serde_path_push(&w->path, NULL, i);
        int rc = fill(w, items, json_array_get(j, i), &elem);
        serde_path_pop(&w->path, was);
        if (rc != 0) return rc;
    }
    return 0;
}

static int fill_map(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v)
{
    if (!json_is_object(j)) return mismatch(w, j, s, NULL);
    avro_schema_t values = resolve(avro_schema_map_values(s));
    const char *key;
    json_t *m;
    json_object_foreach((json_t *)j, key, m)
    {
        avro_value_t elem;
        if (avro_value_add(v, key, &elem, NULL, NULL) != 0)
            return mismatch(w, j, s, avro_strerror());
        size_t was = serde_path_push(&w->path, key, 0);
        int rc = fill(w, values, m, &elem);
        serde_path_pop(&w->path, was);
        if (rc != 0) return rc;
    }
    return 0;
}

static int fill_number(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v)
{
    if (is_avro_int32(s) || is_avro_int64(s)) {
        if (!json_is_integer(j)) return mismatch(w, j, s, NULL);
        json_int_t n = json_integer_value(j);
        if (is_avro_int64(s)) return avro_value_set_long(v, n) == 0 ? 0 : -1;
        if (n < INT32_MIN || n > INT32_MAX)
            return mismatch(w, j, s, "an integer out of int's range");
        return avro_value_set_int(v, (int32_t)n) == 0 ? 0 : -1;
    }
    if (!json_is_number(j)) return mismatch(w, j, s, NULL);
    double d = json_number_value(j);
    if (is_avro_float(s)) return avro_value_set_float(v, (float)d) == 0 ? 0 : -1;
    return avro_value_set_double(v, d) == 0 ? 0 : -1;
}

/* fill() for one schema node, whose steps and depth fill() counted. */
static int fill_one(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v)
{
    s = resolve(s);
    switch (avro_typeof(s)) {
    case AVRO_NULL:
        if (!json_is_null(j)) return mismatch(w, j, s, NULL);
        return avro_value_set_null(v) == 0 ? 0 : -1;
    case AVRO_BOOLEAN:
        if (!json_is_boolean(j)) return mismatch(w, j, s, NULL);
        return avro_value_set_boolean(v, json_is_true(j)) == 0 ? 0 : -1;
    case AVRO_INT32:
    case AVRO_INT64:
    case AVRO_FLOAT:
    case AVRO_DOUBLE: return fill_number(w, s, j, v);
    case AVRO_STRING:
        if (!json_is_string(j)) return mismatch(w, j, s, NULL);
        return avro_value_set_string_len(v, json_string_value(j), json_string_length(j) + 1) == 0
                   ? 0
                   : -1;
    case AVRO_BYTES:
    case AVRO_FIXED: return fill_bytes(w, s, j, v);
    case AVRO_ENUM: {
        if (!json_is_string(j)) return mismatch(w, j, s, NULL);
        int i = avro_schema_enum_get_by_name(s, json_string_value(j));
        if (i < 0) {
            char why[200];
            snprintf(why, sizeof(why), "\"%.80s\" is not a symbol of enum %s",
                     json_string_value(j), avro_schema_name(s));
            return mismatch(w, j, s, why);
        }
        return avro_value_set_enum(v, i) == 0 ? 0 : -1;
    }
    case AVRO_RECORD: return fill_record(w, s, j, v);
    case AVRO_ARRAY: return fill_array(w, s, j, v);
    case AVRO_MAP: return fill_map(w, s, j, v);
    case AVRO_UNION: return fill_union(w, s, j, v);
    default: return mismatch(w, j, s, "a schema type outboxd does not encode");
    }
}

/* j into v along s. 0; -1: j does not fit (w->err says where and why);
 * SERDE_LIMIT: the walk reached a limit (said in the payload's err). */
static int fill(struct walk *w, avro_schema_t s, const json_t *j, avro_value_t *v)
{
    int rc = serde_budget_spend(&w->budget, 1, ++w->depth, &w->path);
    if (rc == 0) rc = fill_one(w, s, j, v);
    w->depth--;
    return rc;
}

int serde_avro_encode(struct serde_avro *a, const char *json, size_t len, const char **out,
                      size_t *outlen, char *err, size_t errlen)
{
    json_error_t jerr;
    if (errlen) err[0] = '\0';
    json_t *j = json_loadb(json, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    if (!j) {
        snprintf(err, errlen, "the payload is not JSON: %s (line %d, column %d)", jerr.text,
                 jerr.line, jerr.column);
        return -1;
    }
    struct walk w = {.path = SERDE_PATH_ROOT, .err = err, .errlen = errlen};
    serde_budget_init(&w.budget, len, err, errlen);
    avro_value_reset(&a->value);
    int rc = fill(&w, a->schema, j, &a->value);
    json_decref(j);
    if (rc != 0) {
        if (!err[0]) snprintf(err, errlen, "%s: %s", w.path.text, avro_strerror());
        return -1;
    }
    size_t size;
    if (avro_value_sizeof(&a->value, &size) != 0 ||
        grow_array((void **)&a->buf, &a->cap, size ? size : 1, 1, 256) != 0) {
        snprintf(err, errlen, "cannot size the Avro value: %s", avro_strerror());
        return -1;
    }
    avro_writer_t wr = avro_writer_memory(a->buf, (int64_t)a->cap);
    int wrc = avro_value_write(wr, &a->value);
    avro_writer_free(wr);
    if (wrc != 0) {
        snprintf(err, errlen, "cannot write the Avro value: %s", avro_strerror());
        return -1;
    }
    *out = a->buf;
    *outlen = size;
    return 0;
}
