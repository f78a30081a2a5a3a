/*
 * serde.c - an outbox section's values in the registry's wire format
 * (serde.h): subject, schema from the cache, encoding or validation,
 * frame. A schema is compiled (libavro's, or serde_jsonschema.c's) once
 * per registry id, at its first use.
 */
#include "serde.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "serde_avro.h"
#include "serde_jsonschema.h"

/* A compiled schema, by registry id: Avro, or a JSON Schema to validate
 * with. */
struct compiled {
    int32_t id;
    struct serde_avro *avro;
    struct serde_jsonschema *json;
};

struct serde {
    struct serde_spec spec;
    char *record_name;             /* owned copy of spec.record_name */
    struct topic_template *record; /* parsed record_name; NULL: none */
    struct registry *reg;          /* borrowed */
    struct compiled *compiled;     /* owned */
    size_t ncompiled, capcompiled;
    unsigned char *buf; /* the framed value; owned */
    size_t cap;
};

struct serde *serde_new(const struct serde_spec *spec, struct registry *reg, char *err,
                        size_t errlen)
{
    struct serde *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->spec = *spec;
    s->reg = reg;
    if (spec->record_name && spec->record_name[0]) {
        char terr[256];
        s->record_name = strdup(spec->record_name);
        s->record = s->record_name ? topic_template_parse(s->record_name, terr, sizeof(terr))
                                   : NULL;
        if (!s->record) {
            snprintf(err, errlen, "value_record_name \"%s\": %s", spec->record_name,
                     s->record_name ? terr : "out of memory");
            serde_free(s);
            return NULL;
        }
    }
    s->spec.record_name = s->record_name;
    if (spec->strategy != SUBJECT_TOPIC && !s->record) {
        snprintf(err, errlen,
                 "value_subject_strategy = %s needs value_record_name (the record's full "
                 "name, or a template such as com.acme.${event_type})",
                 subject_strategy_name(spec->strategy));
        serde_free(s);
        return NULL;
    }
    return s;
}

void serde_free(struct serde *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->ncompiled; i++) {
        serde_avro_free(s->compiled[i].avro);
        serde_jsonschema_free(s->compiled[i].json);
    }
    free(s->compiled);
    topic_template_free(s->record);
    free(s->record_name);
    free(s->buf);
    free(s);
}

int serde_subject(const struct serde *s, const struct outbox_event *ev,
                  const struct relation *rel, const struct col_value *values, int nvalues,
                  char *out, size_t outlen, char *err, size_t errlen)
{
    char record[SERDE_SUBJECT_MAX], rerr[256];
    if (s->spec.strategy != SUBJECT_TOPIC &&
        topic_template_render(s->record, rel, values, nvalues, record, sizeof(record), rerr,
                              sizeof(rerr)) < 0) {
        snprintf(err, errlen, "value_record_name: %s", rerr);
        return -1;
    }
    int n;
    switch (s->spec.strategy) {
    case SUBJECT_TOPIC: n = snprintf(out, outlen, "%s-value", ev->topic); break;
    case SUBJECT_RECORD: n = snprintf(out, outlen, "%s", record); break;
    default: n = snprintf(out, outlen, "%s-%s", ev->topic, record); break;
    }
    if (n < 0 || (size_t)n >= outlen) {
        snprintf(err, errlen, "the subject is longer than %zu bytes", outlen - 1);
        return -1;
    }
    return 0;
}

/* The registry's schemaType each converter expects. */
static const char *expected_type(enum value_format f)
{
    switch (f) {
    case VALUE_AVRO: return "AVRO";
    case VALUE_JSON_SCHEMA: return "JSON";
    default: return "PROTOBUF";
    }
}

/* The compiled form of sch (compiled at its first use: Avro for the
 * avro converter, a JSON Schema for json_schema), or NULL with err. */
static const struct compiled *compiled_for(struct serde *s, const struct registry_schema *sch,
                                           char *err, size_t errlen)
{
    for (size_t i = 0; i < s->ncompiled; i++)
        if (s->compiled[i].id == sch->id) return &s->compiled[i];
    struct compiled c = {.id = sch->id};
    size_t len = strlen(sch->schema);
    if (s->spec.format == VALUE_AVRO)
        c.avro = serde_avro_new(sch->schema, len, err, errlen);
    else
        c.json = serde_jsonschema_new(sch->schema, len, err, errlen);
    if (!c.avro && !c.json) return NULL;
    if (grow_array((void **)&s->compiled, &s->capcompiled, s->ncompiled + 1,
                   sizeof(*s->compiled), 4) != 0) {
        serde_avro_free(c.avro);
        serde_jsonschema_free(c.json);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->compiled[s->ncompiled] = c;
    return &s->compiled[s->ncompiled++];
}

/* The framed value: prefix, the message-index list (protobuf), body. */
static int frame(struct serde *s, int32_t id, const void *body, size_t len,
                 struct outbox_event *ev, char *err, size_t errlen)
{
    unsigned char idx[SERDE_WIRE_INDEX_MAX];
    size_t nidx = s->spec.format == VALUE_PROTOBUF
                      ? serde_wire_indexes(idx, s->spec.indexes, s->spec.nindexes)
                      : 0;
    size_t total = SERDE_WIRE_PREFIX + nidx + len;
    if (grow_array((void **)&s->buf, &s->cap, total, 1, 256) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    serde_wire_prefix(s->buf, id);
    memcpy(s->buf + SERDE_WIRE_PREFIX, idx, nidx);
    if (len) memcpy(s->buf + SERDE_WIRE_PREFIX + nidx, body, len);
    ev->value = (struct slice){(const char *)s->buf, total};
    return 0;
}

enum serde_result serde_encode(struct serde *s, const char *subject, struct outbox_event *ev,
                               int64_t now_ms, char *err, size_t errlen)
{
    if (errlen) err[0] = '\0';
    if (ev->value_null) return SERDE_OK;
    const struct registry_schema *sch = NULL;
    switch (registry_lookup(s->reg, subject, s->spec.version, now_ms, &sch, err, errlen)) {
    case REGISTRY_FOUND: break;
    case REGISTRY_PENDING:
    case REGISTRY_FAILED: return SERDE_WAIT;
    }
    const char *want = expected_type(s->spec.format);
    if (strcmp(sch->type, want) != 0) {
        snprintf(err, errlen,
                 "subject \"%s\" (version %d, id %d) holds a schema of type %s, but "
                 "value_converter = %s needs %s",
                 subject, sch->version, sch->id, sch->type, value_format_name(s->spec.format),
                 want);
        return SERDE_FATAL;
    }
    const char *body = ev->value.data;
    size_t len = ev->value.len;
    char why[384];
    bool check = s->spec.format == VALUE_AVRO ||
                 (s->spec.format == VALUE_JSON_SCHEMA && s->spec.validate);
    const struct compiled *c = check ? compiled_for(s, sch, why, sizeof(why)) : NULL;
    if (check && !c) {
        snprintf(err, errlen, "subject \"%s\" (version %d, id %d): %s", subject, sch->version,
                 sch->id, why);
        return SERDE_FATAL;
    }
    if (c && c->avro &&
        serde_avro_encode(c->avro, ev->value.data, ev->value.len, &body, &len, why,
                          sizeof(why)) != 0) {
        snprintf(err, errlen, "the payload does not fit the Avro schema of subject \"%s\" "
                 "(version %d, id %d): %s", subject, sch->version, sch->id, why);
        return SERDE_MISMATCH;
    }
    if (c && c->json &&
        serde_jsonschema_validate(c->json, ev->value.data, ev->value.len, why, sizeof(why)) !=
            0) {
        snprintf(err, errlen, "the payload does not fit the JSON Schema of subject \"%s\" "
                 "(version %d, id %d): %s", subject, sch->version, sch->id, why);
        return SERDE_MISMATCH;
    }
    return frame(s, sch->id, body, len, ev, err, errlen) == 0 ? SERDE_OK : SERDE_FATAL;
}

void serde_set_free(struct serde_set *set)
{
    for (size_t i = 0; set->by_map && i < set->n; i++) serde_free(set->by_map[i]);
    free(set->by_map);
    registry_free(set->reg);
    memset(set, 0, sizeof(*set));
}

bool serde_wait_reason(char *buf, size_t len, const char *subject, const char *why)
{
    char was[1024];
    snprintf(was, sizeof(was), "%s", buf);
    snprintf(buf, len, "an event waits for the schema of subject \"%.200s\"%s%.400s", subject,
             why[0] ? ": " : " (first lookup)", why);
    return why[0] && strcmp(was, buf) != 0;
}
