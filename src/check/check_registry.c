/*
 * check_registry.c - `outboxd check`'s schema registry line: for a section
 * whose value_converter is avro, json_schema or protobuf, the registry is
 * reached, and every subject the outbox table's rows name (from the
 * topics they render, check_kafka.c's render_topics(), or a constant
 * record name) has the version the section uses, of the converter's type.
 * Lookups are registry_fetch(), the daemon's own request, synchronously.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_int.h"
#include "config_serde.h"
#include "registry.h"
#include "serde.h"
#include "serde_jsonschema.h"

#define SUBJECTS_SHOWN 5

static const char *type_of(enum value_format f)
{
    return f == VALUE_AVRO ? "AVRO" : f == VALUE_JSON_SCHEMA ? "JSON" : "PROTOBUF";
}

/* What the lookups of the section's subjects found. */
struct found {
    int ok, missing, wrong_type, unusable;
    char ok_text[512], missing_text[512], wrong_text[512];
};

static void note(char *buf, size_t len, int count, const char *item)
{
    size_t n = strlen(buf);
    if (count > SUBJECTS_SHOWN || n + 4 >= len) return;
    if (n) {
        memcpy(buf + n, ", ", 3);
        n += 2;
    }
    size_t il = strlen(item);
    if (il > len - n - 1) il = len - n - 1; /* the list is cut, not the report */
    memcpy(buf + n, item, il);
    buf[n + il] = '\0';
}

/* Looks subject up; a registry that cannot be reached is reported and
 * returns -1 (no point in asking for the next subject). */
static int look_up(struct ck *k, const struct registry_opts *o, const struct serde_spec *spec,
                   const char *subject, struct found *f)
{
    struct registry_schema s;
    bool notfound;
    char err[1024], item[600];
    if (registry_fetch(o, subject, spec->version, &s, &notfound, err, sizeof(err)) != 0) {
        if (!notfound) {
            ck_report(k, CHECK_FAIL, "schema registry",
                      "start the registry, or correct [registry] url, user, password_file "
                      "or the TLS files",
                      "%s", err);
            return -1;
        }
        snprintf(item, sizeof(item), "%s", subject);
        note(f->missing_text, sizeof(f->missing_text), ++f->missing, item);
        return 0;
    }
    char why[512];
    struct serde_jsonschema *js = NULL;
    if (strcmp(s.type, type_of(spec->format)) == 0 && spec->format == VALUE_JSON_SCHEMA &&
        spec->validate &&
        !(js = serde_jsonschema_new(s.schema, strlen(s.schema), why, sizeof(why)))) {
        ck_report(k, CHECK_FAIL, "schema registry",
                  "set value_validate = false, or register a schema of the keywords outboxd "
                  "evaluates",
                  "value_validate = true, subject %s v%d id %d: %s", subject, s.version, s.id,
                  why);
        f->unusable++;
    }
    serde_jsonschema_free(js);
    if (strcmp(s.type, type_of(spec->format)) != 0) {
        snprintf(item, sizeof(item), "%s (type %s)", subject, s.type);
        note(f->wrong_text, sizeof(f->wrong_text), ++f->wrong_type, item);
    } else {
        snprintf(item, sizeof(item), "%s v%d id %d", subject, s.version, s.id);
        note(f->ok_text, sizeof(f->ok_text), ++f->ok, item);
    }
    registry_schema_clear(&s);
    return 0;
}

/* The subjects the rows name: from the topics they render (topic
 * strategies) or the constant record name. 0, 1 when they cannot be known
 * before the rows come (a record name template), -1 (reported). */
static int subjects(struct ck *k, const struct serde *sd, const struct serde_spec *spec,
                    struct topic_list *out)
{
    struct topic_list topics = {0};
    int nulls;
    bool truncated;
    char err[1024], subject[SERDE_SUBJECT_MAX];
    if (spec->strategy != SUBJECT_TOPIC && strstr(spec->record_name, "${")) return 1;
    if (spec->strategy == SUBJECT_RECORD) {
        topics_add(&topics, "");
    } else if (render_topics(k, &topics, &nulls, &truncated, err, sizeof(err)) < 0) {
        topics_free(&topics);
        ck_report(k, CHECK_WARN, "schema registry",
                  "run outboxd check again when the table is less busy",
                  "the topics of the rows could not be read from the outbox table: %s", err);
        return -1;
    }
    struct relation rel = {.nspname = "", .relname = ""};
    for (size_t i = 0; i < topics.n; i++) {
        struct outbox_event ev;
        memset(&ev, 0, sizeof(ev));
        snprintf(ev.topic, sizeof(ev.topic), "%s", topics.names[i]);
        if (serde_subject(sd, &ev, &rel, NULL, 0, subject, sizeof(subject), err,
                          sizeof(err)) == 0)
            topics_add(out, subject);
    }
    topics_free(&topics);
    return 0;
}

static void report(struct ck *k, const struct serde_spec *spec, const struct found *f,
                   size_t nsubjects)
{
    const char *what = "schema registry";
    char version[32];
    if (spec->version == REGISTRY_LATEST)
        snprintf(version, sizeof(version), "latest");
    else
        snprintf(version, sizeof(version), "%d", spec->version);
    if (f->missing)
        ck_report(k, CHECK_FAIL, what,
                  "register the schemas (POST /subjects/<subject>/versions), or correct "
                  "value_subject_strategy and value_record_name; events of these subjects "
                  "wait until they exist",
                  "%d of %zu subjects have no version %s: %s%s", f->missing, nsubjects, version,
                  f->missing_text, f->missing > SUBJECTS_SHOWN ? ", ..." : "");
    if (f->wrong_type)
        ck_report(k, CHECK_FAIL, what, "use the value_converter the subjects' schemas are for",
                  "value_converter = %s needs %s schemas, but %s%s",
                  value_format_name(spec->format), type_of(spec->format), f->wrong_text,
                  f->wrong_type > SUBJECTS_SHOWN ? ", ..." : "");
    if (!f->missing && !f->wrong_type && !f->unusable)
        ck_report(k, CHECK_OK, what, NULL, "%s: %s%s", value_format_name(spec->format),
                  f->ok_text, f->ok > SUBJECTS_SHOWN ? ", ..." : "");
}

void check_registry(struct ck *k)
{
    const char *what = "schema registry";
    const struct outbox_spec *s = k->spec;
    if (!s || (s->value_format != VALUE_AVRO && s->value_format != VALUE_JSON_SCHEMA &&
               s->value_format != VALUE_PROTOBUF))
        return;
    struct serde_spec spec;
    struct registry_opts o;
    char *password = NULL, err[1024];
    if (config_serde_spec(s, &spec, err, sizeof(err)) != 0 ||
        config_registry_opts(k->cfg, &o, &password, err, sizeof(err)) != 0) {
        free(password);
        return ck_skip(k, what, "the [registry] or value_* configuration is not valid");
    }
    if (!k->map_ok) {
        free(password);
        return ck_skip(k, what, "[outbox] topic is not valid");
    }
    if (k->ntcols > 0 && spec.strategy != SUBJECT_RECORD &&
        (!k->pg_ok || !k->table_ok || !k->can_select)) {
        free(password);
        return ck_skip(k, what, "the subjects come from the outbox table's rows, which could "
                                "not be read");
    }
    struct serde *sd = serde_new(&spec, NULL, err, sizeof(err));
    struct topic_list subj = {0};
    int rc = sd ? subjects(k, sd, &spec, &subj) : -1;
    if (!sd) ck_report(k, CHECK_FAIL, what, "correct value_record_name", "%s", err);
    if (rc == 1) {
        ck_report(k, CHECK_OK, what, NULL,
                  "%s: the record names come from the rows (value_record_name = %s): each "
                  "subject is looked up when its first event is sent",
                  value_format_name(spec.format), spec.record_name);
    } else if (rc == 0 && subj.n == 0) {
        ck_report(k, CHECK_OK, what, NULL,
                  "%s: no rows yet to name a subject: each is looked up when its first event "
                  "is sent", value_format_name(spec.format));
    } else if (rc == 0) {
        struct found f = {0};
        size_t i;
        for (i = 0; i < subj.n; i++)
            if (look_up(k, &o, &spec, subj.names[i], &f) != 0) break;
        if (i == subj.n) report(k, &spec, &f, subj.n);
    }
    topics_free(&subj);
    serde_free(sd);
    free(password);
}
