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

#include "grow.h"
#include "serde_int.h"

#define MAX_NESTING 64 /* a schema nested deeper than this (in its text) is refused */

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
    if (!ref || ref[0] != '#') return NULL;
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

/* What compiling one schema keeps track of. A $ref may point anywhere in
 * the document, into a const or an example too ("#/definitions/x/const"),
 * so each target is compiled as a schema of its own (once: seen), after
 * the tree. */
struct compiler {
    json_t *root;
    json_t *seen;    /* "%p" of each schema object compiled -> its state in find_loops() */
    json_t *targets; /* the $ref strings met, whose targets are compiled after the tree */
    char *err;
    size_t errlen;
};

static const char *node_key(const json_t *s, char *buf, size_t len)
{
    snprintf(buf, len, "%p", (const void *)s);
    return buf;
}

static int compile(struct compiler *c, json_t *s, const char *where, int depth);

static int compile_each(struct compiler *c, json_t *container, const char *where,
                        const char *kw, int depth)
{
    char w[512];
    if (json_is_array(container)) {
        size_t i;
        json_t *v;
        json_array_foreach(container, i, v)
        {
            snprintf(w, sizeof(w), "%s/%s/%zu", where, kw, i);
            if (compile(c, v, w, depth + 1) != 0) return -1;
        }
        return 0;
    }
    const char *k;
    json_t *v;
    json_object_foreach(container, k, v)
    {
        snprintf(w, sizeof(w), "%s/%s/%s", where, kw, k);
        if (compile(c, v, w, depth + 1) != 0) return -1;
    }
    return 0;
}

static int compile(struct compiler *c, json_t *s, const char *where, int depth)
{
    char *err = c->err, key[32];
    size_t errlen = c->errlen;
    if (json_is_boolean(s)) return 0;
    if (!json_is_object(s)) {
        snprintf(err, errlen, "the JSON Schema at %s is not a schema (an object or a boolean)",
                 where);
        return -1;
    }
    if (depth > MAX_NESTING) {
        snprintf(err, errlen, "the JSON Schema nests deeper than %d at %s", MAX_NESTING, where);
        return -1;
    }
    node_key(s, key, sizeof(key));
    if (json_object_get(c->seen, key)) return 0;
    if (json_object_set_new(c->seen, key, json_integer(0)) != 0) {
        snprintf(err, errlen, "out of memory");
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
                     "include/message/serde_jsonschema.h), so set value_validate = false and "
                     "let the consumers validate", k, where);
            return -1;
        }
        int rc = 0;
        if (!strcmp(k, "properties") || !strcmp(k, "definitions") || !strcmp(k, "$defs")) {
            rc = json_is_object(v) ? compile_each(c, v, where, k, depth) : -2;
        } else if (!strcmp(k, "allOf") || !strcmp(k, "anyOf") || !strcmp(k, "oneOf")) {
            rc = json_is_array(v) ? compile_each(c, v, where, k, depth) : -2;
        } else if (!strcmp(k, "not") || !strcmp(k, "additionalProperties")) {
            char w[512];
            snprintf(w, sizeof(w), "%s/%s", where, k);
            rc = compile(c, v, w, depth + 1);
        } else if (!strcmp(k, "items")) {
            if (json_is_array(v)) {
                snprintf(err, errlen, "the JSON Schema's \"items\" at %s is an array (a tuple), "
                         "which outboxd does not evaluate: set value_validate = false", where);
                return -1;
            }
            char w[512];
            snprintf(w, sizeof(w), "%s/items", where);
            rc = compile(c, v, w, depth + 1);
        } else if (!strcmp(k, "$ref")) {
            if (!json_is_string(v) || !resolve_ref(c->root, json_string_value(v))) {
                snprintf(err, errlen, "the JSON Schema's $ref %s at %s is not a reference to "
                         "the schema itself (\"#...\"), which outboxd resolves",
                         json_is_string(v) ? json_string_value(v) : "(not a string)", where);
                return -1;
            }
            if (json_array_append(c->targets, v) != 0) {
                snprintf(err, errlen, "out of memory");
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

/* A loop that never reaches the payload: $ref and the combinators (allOf,
 * anyOf, oneOf, not) apply a schema to the same value, so a chain of them
 * that comes back to a schema already on it ({"$ref": "#"} at the root,
 * {"anyOf": [{"$ref": "#"}]}, two definitions that name each other) would
 * be followed forever. properties, additionalProperties and items go into
 * the payload, which ends: a recursion through them is a recursive type,
 * not a loop. Found by a depth-first walk along the first kind only; the
 * second kind's targets are walked afterwards from the work list, each
 * with a chain of its own. */
enum { WHITE, GREY, BLACK };

static int set_state(struct compiler *c, const json_t *s, int state)
{
    char key[32];
    return json_object_set_new(c->seen, node_key(s, key, sizeof(key)), json_integer(state));
}

static int state_of(struct compiler *c, const json_t *s)
{
    char key[32];
    return (int)json_integer_value(json_object_get(c->seen, node_key(s, key, sizeof(key))));
}

static int loop_walk(struct compiler *c, json_t *s, const char *via, int depth, json_t *work);

static int loop_edge(struct compiler *c, json_t *to, const char *via, int depth, json_t *work)
{
    if (!json_is_object(to)) return 0;
    int st = state_of(c, to);
    if (st == GREY) {
        snprintf(c->err, c->errlen, "the JSON Schema loops: following its $ref %s comes back "
                 "to a schema on the way there without going into the payload, so no payload "
                 "could ever be checked against it", via);
        return -1;
    }
    if (st == BLACK) return 0;
    if (depth >= SERDE_MAX_DEPTH) {
        snprintf(c->err, c->errlen, "the JSON Schema's $refs and combinators chain deeper than "
                 "%d without going into the payload (at its $ref %s), outboxd's limit",
                 SERDE_MAX_DEPTH, via);
        return -1;
    }
    return loop_walk(c, to, via, depth + 1, work);
}

static int loop_walk(struct compiler *c, json_t *s, const char *via, int depth, json_t *work)
{
    if (set_state(c, s, GREY) != 0) goto oom;
    json_t *k, *v;
    size_t i;
    if ((k = json_object_get(s, "$ref")) &&
        loop_edge(c, resolve_ref(c->root, json_string_value(k)), json_string_value(k), depth,
                  work) != 0)
        return -1;
    static const char *const same_value[] = {"allOf", "anyOf", "oneOf"};
    for (size_t n = 0; n < NLIST(same_value); n++) {
        json_array_foreach(json_object_get(s, same_value[n]), i, v)
        {
            if (loop_edge(c, v, via, depth, work) != 0) return -1;
        }
    }
    if ((k = json_object_get(s, "not")) && loop_edge(c, k, via, depth, work) != 0) return -1;
    /* into the payload: later, from the work list, on chains of their own */
    const char *name;
    json_object_foreach(json_object_get(s, "properties"), name, v)
    {
        if (json_is_object(v) && json_array_append(work, v) != 0) goto oom;
    }
    static const char *const inside[] = {"additionalProperties", "items"};
    for (size_t n = 0; n < NLIST(inside); n++)
        if ((k = json_object_get(s, inside[n])) && json_is_object(k) &&
            json_array_append(work, k) != 0)
            goto oom;
    if (set_state(c, s, BLACK) != 0) goto oom;
    return 0;
oom:
    snprintf(c->err, c->errlen, "out of memory");
    return -1;
}

static int find_loops(struct compiler *c)
{
    json_t *work = json_array();
    if (!work || json_array_append(work, c->root) != 0) {
        json_decref(work);
        snprintf(c->err, c->errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(work); i++) {
        json_t *s = json_array_get(work, i);
        if (json_is_object(s) && state_of(c, s) == WHITE) rc = loop_walk(c, s, "#", 0, work);
    }
    json_decref(work);
    return rc;
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
    if (errlen) err[0] = '\0';
    struct compiler c = {.root = root, .seen = json_object(), .targets = json_array(),
                         .err = err, .errlen = errlen};
    int rc = c.seen && c.targets ? compile(&c, root, "#", 0) : -1;
    /* Each $ref's target as a schema of its own (the list grows as they
     * are compiled); the ref is where an error is. */
    for (size_t i = 0; rc == 0 && i < json_array_size(c.targets); i++) {
        const char *ref = json_string_value(json_array_get(c.targets, i));
        rc = compile(&c, resolve_ref(root, ref), ref, 0);
    }
    if (rc == 0) rc = find_loops(&c);
    json_decref(c.seen);
    json_decref(c.targets);
    struct serde_jsonschema *s = NULL;
    if (rc != 0 || !(s = calloc(1, sizeof(*s)))) {
        if (errlen && !err[0]) snprintf(err, errlen, "out of memory");
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

/* One payload's walk. err is where a mismatch is said: the payload's own
 * buffer, or a branch's while allOf/anyOf/oneOf/not try it; a limit is
 * always said in the payload's (budget). */
struct walk {
    json_t *root;
    struct serde_path path;
    char *err;
    size_t errlen;
    struct serde_budget budget;
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

/* The canonical form of a JSON value for uniqueItems: equal in JSON
 * Schema's sense (same(): numbers by value, members in any order) exactly
 * when the bytes are equal. A kind letter, then: a number as %.17g of its
 * double (what same() compares; -0 as 0), a string as its length and
 * bytes, an array as its count and items, an object as its count and
 * members sorted by name. */
struct canon {
    char *b; /* owned by the caller of canon_put(): free(b) */
    size_t len, cap;
};

static int canon_bytes(struct canon *c, const void *p, size_t n)
{
    if (grow_array((void **)&c->b, &c->cap, c->len + n, 1, 256) != 0) return -1;
    memcpy(c->b + c->len, p, n);
    c->len += n;
    return 0;
}

static int canon_text(struct canon *c, char kind, const char *s, size_t n)
{
    char head[32];
    int h = snprintf(head, sizeof(head), "%c%zu:", kind, n);
    return canon_bytes(c, head, (size_t)h) != 0 || canon_bytes(c, s, n) != 0 ? -1 : 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int canon_put(struct canon *c, const json_t *j)
{
    char num[40];
    switch (json_typeof(j)) {
    case JSON_INTEGER:
    case JSON_REAL: {
        double d = json_number_value(j);
        int n = snprintf(num, sizeof(num), "%.17g", d == 0 ? 0.0 : d);
        return canon_text(c, 'n', num, (size_t)n);
    }
    case JSON_STRING: return canon_text(c, 's', json_string_value(j), json_string_length(j));
    case JSON_TRUE: return canon_bytes(c, "t", 1);
    case JSON_FALSE: return canon_bytes(c, "f", 1);
    case JSON_NULL: return canon_bytes(c, "z", 1);
    case JSON_ARRAY: {
        int n = snprintf(num, sizeof(num), "a%zu:", json_array_size(j));
        if (canon_bytes(c, num, (size_t)n) != 0) return -1;
        for (size_t i = 0; i < json_array_size(j); i++)
            if (canon_put(c, json_array_get(j, i)) != 0) return -1;
        return 0;
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(j), i = 0;
        const char **names = malloc((n ? n : 1) * sizeof(*names));
        if (!names) return -1;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) names[i++] = k;
        qsort(names, n, sizeof(*names), by_name);
        int h = snprintf(num, sizeof(num), "o%zu:", n), rc = canon_bytes(c, num, (size_t)h);
        for (i = 0; rc == 0 && i < n; i++)
            if (canon_text(c, 's', names[i], strlen(names[i])) != 0 ||
                canon_put(c, json_object_get(j, names[i])) != 0)
                rc = -1;
        free(names);
        return rc;
    }
    }
    return -1;
}

struct item {
    size_t at, len, index; /* its canonical form: canon.b[at..at+len) */
    const char *form;      /* canon.b + at, once canon.b no longer moves */
};

static int by_form(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->form, y->form, n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* uniqueItems in O(n log n): the items' canonical forms sorted, equal ones
 * side by side. 0 when all differ; else 1 with *first, *second the pair
 * the old pairwise scan named (the lowest first index that has an equal,
 * and its next equal); -1 out of memory. */
static int equal_items(const json_t *arr, size_t *first, size_t *second)
{
    size_t n = json_array_size(arr);
    struct canon c = {0};
    struct item *it = malloc((n ? n : 1) * sizeof(*it));
    int rc = it ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        it[i] = (struct item){.at = c.len, .index = i};
        rc = canon_put(&c, json_array_get(arr, i));
        it[i].len = c.len - it[i].at;
    }
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            it[i].form = c.b + it[i].at; /* every item has a kind letter: c.b is set */
        qsort(it, n, sizeof(*it), by_form);
        for (size_t i = 0; i + 1 < n; i++) {
            if (it[i].len != it[i + 1].len || memcmp(it[i].form, it[i + 1].form, it[i].len))
                continue;
            if (rc == 0 || it[i].index < *first) {
                *first = it[i].index; /* sorted by index within equals: the group's lowest */
                *second = it[i + 1].index;
                rc = 1;
            }
            while (i + 1 < n && it[i].len == it[i + 1].len &&
                   memcmp(it[i].form, it[i + 1].form, it[i].len) == 0)
                i++; /* the rest of this group */
        }
    }
    free(it);
    free(c.b);
    return rc;
}

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
    if (json_is_true(json_object_get(s, "uniqueItems"))) {
        size_t a = 0, b = 0;
        int rc = serde_budget_spend(&w->budget, n, depth, &w->path);
        if (rc != 0) return rc;
        if ((rc = equal_items(j, &a, &b)) < 0) return refuse(w, "out of memory (uniqueItems)");
        if (rc) return refuse(w, "items %zu and %zu are equal (uniqueItems)", a, b);
    }
    for (i = 0; items && i < n; i++) {
        size_t was = serde_path_push(&w->path, NULL, i);
        int rc = check(w, items, json_array_get(j, i), depth + 1);
        serde_path_pop(&w->path, was);
        if (rc != 0) return rc;
    }
    return 0;
}

/* allOf, anyOf, oneOf, not: the failures of the branches are not the
 * payload's path's, so they are said in why, not in the payload's err.
 * 0: fits; -1: does not (why says why); SERDE_LIMIT: the walk ends. */
static int fits(struct walk *w, const json_t *s, const json_t *j, int depth, char *why,
                size_t whylen)
{
    char *err = w->err;
    size_t errlen = w->errlen;
    w->err = why;
    w->errlen = whylen;
    int rc = check(w, s, j, depth + 1);
    w->err = err;
    w->errlen = errlen;
    return rc;
}

static int check_combinators(struct walk *w, const json_t *s, const json_t *j, int depth)
{
    char why[384];
    json_t *k, *v;
    size_t i;
    int rc;
    if ((k = json_object_get(s, "allOf"))) {
        json_array_foreach(k, i, v)
        {
            if ((rc = fits(w, v, j, depth, why, sizeof(why))) == SERDE_LIMIT) return rc;
            if (rc != 0) {
                snprintf(w->err, w->errlen, "%s (allOf %zu)", why, i);
                return -1;
            }
        }
    }
    if ((k = json_object_get(s, "anyOf"))) {
        bool ok = false;
        json_array_foreach(k, i, v)
        {
            if ((rc = fits(w, v, j, depth, why, sizeof(why))) == SERDE_LIMIT) return rc;
            if (rc == 0) {
                ok = true; /* the others need not be tried */
                break;
            }
        }
        if (!ok) return refuse(w, "fits none of anyOf's %zu schemas", json_array_size(k));
    }
    if ((k = json_object_get(s, "oneOf"))) {
        size_t n = 0, fit[2] = {0, 0};
        json_array_foreach(k, i, v)
        {
            if ((rc = fits(w, v, j, depth, why, sizeof(why))) == SERDE_LIMIT) return rc;
            if (rc == 0) fit[n++] = i;
            if (n == 2) break; /* one too many already */
        }
        if (n == 0)
            return refuse(w, "fits 0 of oneOf's %zu schemas, not exactly one",
                          json_array_size(k));
        if (n == 2)
            return refuse(w, "fits more than one of oneOf's %zu schemas (%zu and %zu), not "
                             "exactly one",
                          json_array_size(k), fit[0], fit[1]);
    }
    if ((k = json_object_get(s, "not"))) {
        if ((rc = fits(w, k, j, depth, why, sizeof(why))) == SERDE_LIMIT) return rc;
        if (rc == 0) return refuse(w, "fits the schema of \"not\"");
    }
    return 0;
}

static int check(struct walk *w, const json_t *s, const json_t *j, int depth)
{
    int rc = serde_budget_spend(&w->budget, 1, depth, &w->path);
    if (rc != 0) return rc;
    if (json_is_true(s)) return 0;
    if (json_is_false(s)) return refuse(w, "the schema accepts nothing here (false)");
    json_t *k;
    if ((k = json_object_get(s, "$ref"))) {
        /* compiled: a string that resolves to a schema; never NULL here */
        const json_t *to = resolve_ref(w->root, json_string_value(k));
        if (!to) return refuse(w, "the schema's $ref does not resolve");
        if ((rc = check(w, to, j, depth + 1)) != 0) return rc;
    }
    if ((k = json_object_get(s, "type")) && check_type(w, k, j) != 0) return -1;
    if ((k = json_object_get(s, "const")) && !same(k, j))
        return refuse(w, "not the schema's const value");
    if ((k = json_object_get(s, "enum"))) {
        size_t i;
        json_t *v;
        bool any = false;
        if ((rc = serde_budget_spend(&w->budget, json_array_size(k), depth, &w->path)) != 0)
            return rc;
        json_array_foreach(k, i, v)
        {
            if (same(v, j)) {
                any = true;
                break;
            }
        }
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
    if (json_is_object(j) && (rc = check_object(w, s, j, depth)) != 0) return rc;
    if (json_is_array(j) && (rc = check_array(w, s, j, depth)) != 0) return rc;
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
    serde_budget_init(&w.budget, len, err, errlen);
    int rc = check(&w, s->root, j, 0);
    json_decref(j);
    return rc == 0 ? 0 : -1;
}
