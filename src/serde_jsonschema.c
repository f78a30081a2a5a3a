/*
 * serde_jsonschema.c - a JSON payload against a JSON Schema (serde_jsonschema.h):
 * the schema is parsed once with jansson and its keywords checked against
 * the list this file evaluates; a payload is then walked beside it.
 */
#include "serde_jsonschema.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serde_int.h"

#define MAX_DEPTH 64 /* nested subschemas and $refs followed, at most */

struct serde_jsonschema {
    json_t *root;
};

/* ---- compiling: every keyword must be one this file evaluates ---- */

static const char *const evaluated[] = {
    "type",        "enum",         "const",         "properties",       "required",
    "additionalProperties",        "minProperties", "maxProperties",    "items",
    "minItems",    "maxItems",     "uniqueItems",   "minimum",          "maximum",
    "exclusiveMinimum",            "exclusiveMaximum", "multipleOf",    "minLength",
    "maxLength",   "allOf",        "anyOf",         "oneOf",            "not",
    "$ref",        "definitions",  "$defs",
};
static const char *const annotations[] = {
    "$schema", "$id",     "id",       "title",      "description", "default",
    "examples", "$comment", "format", "readOnly",   "writeOnly",   "deprecated",
};

static bool listed(const char *k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, list[i]) == 0) return true;
    return false;
}

#define NLIST(a) (sizeof(a) / sizeof((a)[0]))

/* The JSON pointer ref ("#", "#/definitions/a") inside root, or NULL. */
static json_t *resolve_ref(json_t *root, const char *ref)
{
    if (ref[0] != '#') return NULL;
    json_t *at = root;
    const char *p = ref + 1;
    while (*p == '/') {
        p++;
        char seg[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof(seg)) {
            if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
                seg[n++] = p[1] == '0' ? '~' : '/';
                p += 2;
            } else {
                seg[n++] = *p++;
            }
        }
        seg[n] = '\0';
        at = json_is_object(at) ? json_object_get(at, seg) : NULL;
        if (!at) return NULL;
    }
    return *p ? NULL : at;
}

static int compile(json_t *root, json_t *s, const char *where, int depth, char *err,
                   size_t errlen);

static int compile_each(json_t *root, json_t *container, const char *where, const char *kw,
                        int depth, char *err, size_t errlen)
{
    char w[512];
    if (json_is_array(container)) {
        size_t i;
        json_t *v;
        json_array_foreach(container, i, v)
        {
            snprintf(w, sizeof(w), "%s/%s/%zu", where, kw, i);
            if (compile(root, v, w, depth + 1, err, errlen) != 0) return -1;
        }
        return 0;
    }
    const char *k;
    json_t *v;
    json_object_foreach(container, k, v)
    {
        snprintf(w, sizeof(w), "%s/%s/%s", where, kw, k);
        if (compile(root, v, w, depth + 1, err, errlen) != 0) return -1;
    }
    return 0;
}

static int compile(json_t *root, json_t *s, const char *where, int depth, char *err,
                   size_t errlen)
{
    if (json_is_boolean(s)) return 0;
    if (!json_is_object(s) || depth > MAX_DEPTH) {
        snprintf(err, errlen, "the JSON Schema at %s is not a schema (an object or a boolean)",
                 where);
        return -1;
    }
    const char *k;
    json_t *v;
    json_object_foreach(s, k, v)
    {
        if (listed(k, annotations, NLIST(annotations))) continue;
        if (!listed(k, evaluated, NLIST(evaluated))) {
            snprintf(err, errlen, "the JSON Schema uses \"%s\" (at %s), which outboxd does not "
                     "evaluate: with value_validate = true every keyword must be (see "
                     "include/serde_jsonschema.h), so set value_validate = false and let the "
                     "consumers validate", k, where);
            return -1;
        }
        int rc = 0;
        if (!strcmp(k, "properties") || !strcmp(k, "definitions") || !strcmp(k, "$defs")) {
            rc = json_is_object(v) ? compile_each(root, v, where, k, depth, err, errlen) : -2;
        } else if (!strcmp(k, "allOf") || !strcmp(k, "anyOf") || !strcmp(k, "oneOf")) {
            rc = json_is_array(v) ? compile_each(root, v, where, k, depth, err, errlen) : -2;
        } else if (!strcmp(k, "not") || !strcmp(k, "additionalProperties")) {
            char w[512];
            snprintf(w, sizeof(w), "%s/%s", where, k);
            rc = compile(root, v, w, depth + 1, err, errlen);
        } else if (!strcmp(k, "items")) {
            if (json_is_array(v)) {
                snprintf(err, errlen, "the JSON Schema's \"items\" at %s is an array (a tuple), "
                         "which outboxd does not evaluate: set value_validate = false", where);
                return -1;
            }
            char w[512];
            snprintf(w, sizeof(w), "%s/items", where);
            rc = compile(root, v, w, depth + 1, err, errlen);
        } else if (!strcmp(k, "$ref")) {
            if (!json_is_string(v) || !resolve_ref(root, json_string_value(v))) {
                snprintf(err, errlen, "the JSON Schema's $ref %s at %s is not a reference to "
                         "the schema itself (\"#...\"), which outboxd resolves",
                         json_is_string(v) ? json_string_value(v) : "(not a string)", where);
                return -1;
            }
        } else if (!strcmp(k, "required") && !json_is_array(v)) {
            rc = -2;
        }
        if (rc == -2) {
            snprintf(err, errlen, "the JSON Schema's \"%s\" at %s has the wrong type", k, where);
            return -1;
        }
        if (rc != 0) return -1;
    }
    return 0;
}

struct serde_jsonschema *serde_jsonschema_new(const char *schema, size_t len, char *err,
                                              size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(schema, len, JSON_DECODE_ANY, &jerr);
    if (!root) {
        snprintf(err, errlen, "the registry's JSON Schema is not JSON: %s", jerr.text);
        return NULL;
    }
    struct serde_jsonschema *s = NULL;
    if (compile(root, root, "#", 0, err, errlen) != 0 || !(s = calloc(1, sizeof(*s)))) {
        if (root && !s && !err[0]) snprintf(err, errlen, "out of memory");
        json_decref(root);
        return NULL;
    }
    s->root = root;
    return s;
}

void serde_jsonschema_free(struct serde_jsonschema *s)
{
    if (!s) return;
    json_decref(s->root);
    free(s);
}

/* ---- validating ---- */

struct walk {
    json_t *root;
    struct serde_path path;
    char *err;
    size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int refuse(struct walk *w, const char *fmt, ...)
{
    char why[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    snprintf(w->err, w->errlen, "%s: %s", w->path.text, why);
    return -1;
}

/* JSON Schema's equality: numbers by value (1 equals 1.0). */
static bool same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b)) return false;
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same(json_array_get(a, i), json_array_get(b, i))) return false;
        return true;
    }
    if (json_is_object(a)) {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v)
        {
            json_t *o = json_object_get(b, k);
            if (!o || !same(v, o)) return false;
        }
        return true;
    }
    return json_equal((json_t *)a, (json_t *)b);
}

static bool is_type(const json_t *j, const char *t)
{
    if (!strcmp(t, "null")) return json_is_null(j);
    if (!strcmp(t, "boolean")) return json_is_boolean(j);
    if (!strcmp(t, "object")) return json_is_object(j);
    if (!strcmp(t, "array")) return json_is_array(j);
    if (!strcmp(t, "string")) return json_is_string(j);
    if (!strcmp(t, "number")) return json_is_number(j);
    if (!strcmp(t, "integer"))
        return json_is_integer(j) ||
               (json_is_real(j) && json_real_value(j) == floor(json_real_value(j)));
    return false;
}

static int check(struct walk *w, const json_t *s, const json_t *j, int depth);

static int check_type(struct walk *w, const json_t *t, const json_t *j)
{
    if (json_is_string(t))
        return is_type(j, json_string_value(t))
                   ? 0
                   : refuse(w, "%s where the schema wants %s", serde_json_kind(j),
                            json_string_value(t));
    size_t i;
    json_t *v;
    json_array_foreach(t, i, v) if (json_is_string(v) && is_type(j, json_string_value(v))) return 0;
    return refuse(w, "%s, which is none of the schema's types", serde_json_kind(j));
}

static size_t utf8_length(const char *s, size_t n)
{
    size_t cps = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) cps++;
    return cps;
}

static int check_number(struct walk *w, const json_t *s, const json_t *j)
{
    double v = json_number_value(j);
    json_t *k;
    bool draft4_excl_min = json_is_true(json_object_get(s, "exclusiveMinimum"));
    bool draft4_excl_max = json_is_true(json_object_get(s, "exclusiveMaximum"));
    if ((k = json_object_get(s, "minimum")) && json_is_number(k) &&
        (draft4_excl_min ? v <= json_number_value(k) : v < json_number_value(k)))
        return refuse(w, "%g is below the minimum %g%s", v, json_number_value(k),
                      draft4_excl_min ? " (exclusive)" : "");
    if ((k = json_object_get(s, "maximum")) && json_is_number(k) &&
        (draft4_excl_max ? v >= json_number_value(k) : v > json_number_value(k)))
        return refuse(w, "%g is above the maximum %g%s", v, json_number_value(k),
                      draft4_excl_max ? " (exclusive)" : "");
    if ((k = json_object_get(s, "exclusiveMinimum")) && json_is_number(k) &&
        v <= json_number_value(k))
        return refuse(w, "%g is not above the exclusive minimum %g", v, json_number_value(k));
    if ((k = json_object_get(s, "exclusiveMaximum")) && json_is_number(k) &&
        v >= json_number_value(k))
        return refuse(w, "%g is not below the exclusive maximum %g", v, json_number_value(k));
    if ((k = json_object_get(s, "multipleOf")) && json_is_number(k) && json_number_value(k) > 0) {
        double q = v / json_number_value(k);
        if (fabs(q - round(q)) > 1e-9 * fmax(1.0, fabs(q)))
            return refuse(w, "%g is not a multiple of %g", v, json_number_value(k));
    }
    return 0;
}

static int check_object(struct walk *w, const json_t *s, const json_t *j, int depth)
{
    json_t *props = json_object_get(s, "properties");
    json_t *add = json_object_get(s, "additionalProperties");
    json_t *req = json_object_get(s, "required"), *k;
    size_t i;
    json_t *v;
    json_array_foreach(req, i, v)
    {
        if (json_is_string(v) && !json_object_get(j, json_string_value(v)))
            return refuse(w, "required member \"%.80s\" is missing", json_string_value(v));
    }
    if ((k = json_object_get(s, "minProperties")) && json_is_integer(k) &&
        (json_int_t)json_object_size(j) < json_integer_value(k))
        return refuse(w, "%zu members, fewer than minProperties %lld", json_object_size(j),
                      (long long)json_integer_value(k));
    if ((k = json_object_get(s, "maxProperties")) && json_is_integer(k) &&
        (json_int_t)json_object_size(j) > json_integer_value(k))
        return refuse(w, "%zu members, more than maxProperties %lld", json_object_size(j),
                      (long long)json_integer_value(k));
    const char *name;
    json_object_foreach((json_t *)j, name, v)
    {
        const json_t *sub = props ? json_object_get(props, name) : NULL;
        if (!sub && json_is_false(add))
            return refuse(w, "member \"%.80s\" is not allowed (additionalProperties is false)",
                          name);
        if (!sub && json_is_object(add)) sub = add;
        if (!sub) continue;
        size_t was = serde_path_push(&w->path, name, 0);
        int rc = check(w, sub, v, depth + 1);
        serde_path_pop(&w->path, was);
        if (rc != 0) return rc;
    }
    return 0;
}

static int check_array(struct walk *w, const json_t *s, const json_t *j, int depth)
{
    json_t *k, *items = json_object_get(s, "items");
    size_t n = json_array_size(j), i;
    if ((k = json_object_get(s, "minItems")) && json_is_integer(k) &&
        (json_int_t)n < json_integer_value(k))
        return refuse(w, "%zu items, fewer than minItems %lld", n,
                      (long long)json_integer_value(k));
    if ((k = json_object_get(s, "maxItems")) && json_is_integer(k) &&
        (json_int_t)n > json_integer_value(k))
        return refuse(w, "%zu items, more than maxItems %lld", n,
                      (long long)json_integer_value(k));
    if (json_is_true(json_object_get(s, "uniqueItems")))
        for (i = 0; i < n; i++)
            for (size_t m = i + 1; m < n; m++)
                if (same(json_array_get(j, i), json_array_get(j, m)))
                    return refuse(w, "items %zu and %zu are equal (uniqueItems)", i, m);
    for (i = 0; items && i < n; i++) {
        size_t was = serde_path_push(&w->path, NULL, i);
        int rc = check(w, items, json_array_get(j, i), depth + 1);
        serde_path_pop(&w->path, was);
        if (rc != 0) return rc;
    }
    return 0;
}

/* allOf, anyOf, oneOf, not: the failures of the branches are not the
 * payload's path's, so they are checked quietly. */
static int fits(struct walk *w, const json_t *s, const json_t *j, int depth, char *why,
                size_t whylen)
{
    struct walk q = *w;
    q.err = why;
    q.errlen = whylen;
    return check(&q, s, j, depth + 1) == 0;
}

static int check_combinators(struct walk *w, const json_t *s, const json_t *j, int depth)
{
    char why[384];
    json_t *k, *v;
    size_t i;
    if ((k = json_object_get(s, "allOf"))) {
        json_array_foreach(k, i, v)
        {
            if (!fits(w, v, j, depth, why, sizeof(why))) {
                snprintf(w->err, w->errlen, "%s (allOf %zu)", why, i);
                return -1;
            }
        }
    }
    if ((k = json_object_get(s, "anyOf"))) {
        bool ok = false;
        json_array_foreach(k, i, v) if (fits(w, v, j, depth, why, sizeof(why))) ok = true;
        if (!ok) return refuse(w, "fits none of anyOf's %zu schemas", json_array_size(k));
    }
    if ((k = json_object_get(s, "oneOf"))) {
        size_t n = 0;
        json_array_foreach(k, i, v) if (fits(w, v, j, depth, why, sizeof(why))) n++;
        if (n != 1) return refuse(w, "fits %zu of oneOf's %zu schemas, not exactly one", n,
                                  json_array_size(k));
    }
    if ((k = json_object_get(s, "not")) && fits(w, k, j, depth, why, sizeof(why)))
        return refuse(w, "fits the schema of \"not\"");
    return 0;
}

static int check(struct walk *w, const json_t *s, const json_t *j, int depth)
{
    if (depth > MAX_DEPTH) return refuse(w, "the schema nests deeper than %d", MAX_DEPTH);
    if (json_is_true(s)) return 0;
    if (json_is_false(s)) return refuse(w, "the schema accepts nothing here (false)");
    json_t *k;
    if ((k = json_object_get(s, "$ref")))
        if (check(w, resolve_ref(w->root, json_string_value(k)), j, depth + 1) != 0) return -1;
    if ((k = json_object_get(s, "type")) && check_type(w, k, j) != 0) return -1;
    if ((k = json_object_get(s, "const")) && !same(k, j))
        return refuse(w, "not the schema's const value");
    if ((k = json_object_get(s, "enum"))) {
        size_t i;
        json_t *v;
        bool any = false;
        json_array_foreach(k, i, v) if (same(v, j)) any = true;
        if (!any)
            return refuse(w, "%s that is not one of the schema's enum values",
                          serde_json_kind(j));
    }
    if (json_is_number(j) && check_number(w, s, j) != 0) return -1;
    if (json_is_string(j)) {
        size_t cps = utf8_length(json_string_value(j), json_string_length(j));
        if ((k = json_object_get(s, "minLength")) && json_is_integer(k) &&
            (json_int_t)cps < json_integer_value(k))
            return refuse(w, "a string of %zu characters, shorter than minLength %lld", cps,
                          (long long)json_integer_value(k));
        if ((k = json_object_get(s, "maxLength")) && json_is_integer(k) &&
            (json_int_t)cps > json_integer_value(k))
            return refuse(w, "a string of %zu characters, longer than maxLength %lld", cps,
                          (long long)json_integer_value(k));
    }
    if (json_is_object(j) && check_object(w, s, j, depth) != 0) return -1;
    if (json_is_array(j) && check_array(w, s, j, depth) != 0) return -1;
    return check_combinators(w, s, j, depth);
}

int serde_jsonschema_validate(const struct serde_jsonschema *s, const char *json, size_t len,
                              char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *j = json_loadb(json, len, JSON_DECODE_ANY, &jerr);
    if (!j) {
        snprintf(err, errlen, "the payload is not JSON: %s (line %d, column %d)", jerr.text,
                 jerr.line, jerr.column);
        return -1;
    }
    struct walk w = {.root = s->root, .path = SERDE_PATH_ROOT, .err = err, .errlen = errlen};
    int rc = check(&w, s->root, j, 0);
    json_decref(j);
    return rc;
}
