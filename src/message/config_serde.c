/*
 * config_serde.c - [registry] and the value_* keys built into the serde
 * set (config_serde.h).
 */
#include "config_serde.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"
#include "secrets.h"

static bool uses_registry(const struct outbox_spec *s)
{
    return s->value_format == VALUE_AVRO || s->value_format == VALUE_JSON_SCHEMA ||
           s->value_format == VALUE_PROTOBUF;
}

bool config_uses_registry(const struct config *c)
{
    for (size_t i = 0; i < config_outbox_count(c); i++)
        if (uses_registry(config_outbox_at(c, i))) return true;
    return false;
}

int config_registry_opts(const struct config *c, struct registry_opts *o, char **password,
                         char *err, size_t errlen)
{
    *password = NULL;
    *o = (struct registry_opts){.url = c->registry_url,
                                .user = c->registry_user,
                                .ca_file = c->registry_ca_file,
                                .cert_file = c->registry_cert_file,
                                .key_file = c->registry_key_file,
                                .timeout_ms = (int)c->registry_timeout_ms,
                                .refresh_ms = c->registry_refresh_ms,
                                .retry_ms = c->registry_retry_ms};
    if (!c->registry_url) {
        snprintf(err, errlen, "[registry] url is not set");
        return -1;
    }
    if (strncmp(c->registry_url, "http://", 7) != 0 &&
        strncmp(c->registry_url, "https://", 8) != 0) {
        char shown[512];
        redact_url(c->registry_url, shown, sizeof(shown));
        snprintf(err, errlen, "[registry] url \"%s\" must start with http:// or https://",
                 shown);
        return -1;
    }
    if (c->registry_password_file) {
        char why[512];
        if (!c->registry_user) {
            snprintf(err, errlen, "[registry] password_file is set but user is not");
            return -1;
        }
        if (secret_file_read(c->registry_password_file, password, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "[registry] password_file: %s", why);
            return -1;
        }
        o->password = *password;
    }
    return 0;
}

int config_serde_spec(const struct outbox_spec *s, struct serde_spec *spec, char *err,
                      size_t errlen)
{
    char label[128];
    memset(spec, 0, sizeof(*spec));
    spec->format = s->value_format;
    spec->strategy = s->value_strategy;
    spec->record_name = s->value_record_name;
    spec->validate = s->value_validate;
    const char *v = s->value_schema_version;
    if (!v || strcmp(v, "latest") == 0) {
        spec->version = REGISTRY_LATEST;
    } else {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || end == v || n < 1 || n > 1000000000) {
            snprintf(err, errlen, "%s value_schema_version = \"%s\": latest or a version "
                     "number (1, 2, ...)", config_outbox_label(s, label, sizeof(label)), v);
            return -1;
        }
        spec->version = (int)n;
    }
    spec->nindexes = serde_wire_parse_indexes(s->value_message_index ? s->value_message_index
                                                                      : "0",
                                              spec->indexes);
    if (spec->nindexes < 0) {
        snprintf(err, errlen, "%s value_message_index = \"%s\": the message's index in the "
                 ".proto file, and of each nested message, joined by dots (0, 1.0), at most "
                 "%d", config_outbox_label(s, label, sizeof(label)), s->value_message_index,
                 SERDE_WIRE_MAX_INDEXES);
        return -1;
    }
    if (uses_registry(s) && s->value_strategy != SUBJECT_TOPIC && !s->value_record_name) {
        snprintf(err, errlen, "%s value_subject_strategy = %s needs value_record_name (the "
                 "record's full name, or a template such as com.acme.${event_type})",
                 config_outbox_label(s, label, sizeof(label)),
                 subject_strategy_name(s->value_strategy));
        return -1;
    }
    return 0;
}

int config_serde_validate(const struct config *c, char *err, size_t errlen)
{
    char label[128];
    for (size_t i = 0; i < config_outbox_count(c); i++) {
        const struct outbox_spec *s = config_outbox_at(c, i);
        struct serde_spec spec;
        if (config_serde_spec(s, &spec, err, errlen) != 0) return -1;
        if (!uses_registry(s)) continue;
        if (!c->registry_url) {
            snprintf(err, errlen, "%s value_converter = %s needs [registry] url (the schema "
                     "registry's base URL)", config_outbox_label(s, label, sizeof(label)),
                     value_format_name(s->value_format));
            return -1;
        }
    }
    if (c->registry_url) {
        struct registry_opts o;
        char *password;
        int rc = config_registry_opts(c, &o, &password, err, errlen);
        free(password);
        if (rc != 0) return -1;
    }
    return 0;
}

int config_serde_set(const struct config *c, struct serde_set *set, char *err, size_t errlen)
{
    memset(set, 0, sizeof(*set));
    set->n = config_outbox_count(c);
    if (!config_uses_registry(c)) return 0;
    struct registry_opts o;
    char *password;
    if (config_registry_opts(c, &o, &password, err, errlen) != 0) return -1;
    set->reg = registry_new(&o, err, errlen);
    free(password);
    if (!set->reg) return -1;
    if (!(set->by_map = calloc(set->n, sizeof(*set->by_map)))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < set->n; i++) {
        const struct outbox_spec *s = config_outbox_at(c, i);
        struct serde_spec spec;
        if (!uses_registry(s)) continue;
        if (config_serde_spec(s, &spec, err, errlen) != 0) goto fail;
        if (!(set->by_map[i] = serde_new(&spec, set->reg, err, errlen))) goto fail;
    }
    return 0;
fail:
    serde_set_free(set);
    return -1;
}
