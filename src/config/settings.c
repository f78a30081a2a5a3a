/*
 * settings.c - the words of the [postgres] keys other modules act on
 * (plugin, failover, on_slot_loss, auth) and their enums (see settings.h).
 */
#include "settings.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

static const char *const plugin_names[PLUGIN__COUNT] = {"pgoutput", "wal2json"};

int plugin_parse(const char *name)
{
    for (int i = 0; i < PLUGIN__COUNT; i++)
        if (strcmp(name, plugin_names[i]) == 0) return i;
    return -1;
}

const char *plugin_name(enum plugin_kind p)
{
    return (unsigned)p < PLUGIN__COUNT ? plugin_names[p] : "?";
}

int failover_parse(const char *s)
{
    static const char *const on[] = {"on", "true", "yes", "1"};
    static const char *const off[] = {"off", "false", "no", "0"};
    if (!s) return -1;
    if (strcasecmp(s, "auto") == 0) return FAILOVER_AUTO;
    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        if (strcasecmp(s, on[i]) == 0) return FAILOVER_ON;
        if (strcasecmp(s, off[i]) == 0) return FAILOVER_OFF;
    }
    return -1;
}

const char *failover_name(enum failover_mode m)
{
    return m == FAILOVER_ON ? "on" : m == FAILOVER_OFF ? "off" : "auto";
}

int slot_loss_parse(const char *s)
{
    if (strcmp(s, "halt") == 0) return SLOT_LOSS_HALT;
    if (strcmp(s, "repair") == 0) return SLOT_LOSS_REPAIR;
    return -1;
}

const char *slot_loss_name(enum slot_loss l)
{
    return l == SLOT_LOSS_REPAIR ? "repair" : "halt";
}

int pg_auth_parse(const char *s)
{
    if (strcmp(s, "password") == 0) return PG_AUTH_PASSWORD;
    if (strcmp(s, "aws_rds_iam") == 0) return PG_AUTH_AWS_RDS_IAM;
    return -1;
}

const char *pg_auth_name(enum pg_auth a)
{
    return a == PG_AUTH_AWS_RDS_IAM ? "aws_rds_iam" : "password";
}

int value_format_parse(const char *s)
{
    static const char *const names[] = {"string", "json", "avro", "json_schema", "protobuf"};
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

const char *value_format_name(enum value_format f)
{
    switch (f) {
    case VALUE_STRING: return "string";
    case VALUE_JSON: return "json";
    case VALUE_AVRO: return "avro";
    case VALUE_JSON_SCHEMA: return "json_schema";
    case VALUE_PROTOBUF: return "protobuf";
    }
    return "?";
}

int subject_strategy_parse(const char *s)
{
    if (strcmp(s, "topic") == 0 || strcmp(s, "TopicNameStrategy") == 0) return SUBJECT_TOPIC;
    if (strcmp(s, "record") == 0 || strcmp(s, "RecordNameStrategy") == 0) return SUBJECT_RECORD;
    if (strcmp(s, "topic_record") == 0 || strcmp(s, "TopicRecordNameStrategy") == 0)
        return SUBJECT_TOPIC_RECORD;
    return -1;
}

const char *subject_strategy_name(enum subject_strategy s)
{
    switch (s) {
    case SUBJECT_TOPIC: return "topic";
    case SUBJECT_RECORD: return "record";
    case SUBJECT_TOPIC_RECORD: return "topic_record";
    }
    return "?";
}
