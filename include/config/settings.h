/*
 * settings.h - the typed values of the [postgres] keys whose words other
 * modules act on: the output plugin, failover, on_slot_loss and auth; and the
 * roles of the [outbox] column.* keys. config.c parses each once, when
 * the configuration is loaded, into struct config's enum fields; every
 * other module reads the enum, and prints it with the name function. Pure, and includes nothing of outboxd's, so
 * that the configuration stays at the bottom of the include graph.
 * Adding an output plugin starts here: its name in settings.c's table,
 * then its decoder (decoder.c). Unit-tested in tests/unit/test_decoder.c
 * and test_slotcmd.c.
 */
#ifndef OUTBOXD_SETTINGS_H
#define OUTBOXD_SETTINGS_H

/* [postgres] plugin: the logical decoding output plugin of the slot. */
enum plugin_kind { PLUGIN_PGOUTPUT = 0, PLUGIN_WAL2JSON = 1, PLUGIN__COUNT };

/* "pgoutput" or "wal2json"; -1 when unknown. */
int plugin_parse(const char *name);
/* The plugin's name as the server knows it ("pgoutput"). */
const char *plugin_name(enum plugin_kind p);

/* [postgres] failover. */
enum failover_mode {
    FAILOVER_AUTO, /* on when the server has failover slots (17+) */
    FAILOVER_ON,   /* required: a server below 17 is an error */
    FAILOVER_OFF,
};

/* "auto", "on" or "off" (also true/false, yes/no, 1/0 for on/off, in any
 * case); -1 for anything else. */
int failover_parse(const char *s);
/* "auto", "on" or "off". */
const char *failover_name(enum failover_mode m);

/* [postgres] on_slot_loss: what the daemon does when its slot is gone or
 * invalidated (README "Gap repair"). */
enum slot_loss {
    SLOT_LOSS_HALT,   /* exit 2 (after halt_linger); the operator runs outboxd repair */
    SLOT_LOSS_REPAIR, /* run gap repair, then go on */
};

/* "halt" or "repair" (exactly); -1 for anything else. */
int slot_loss_parse(const char *s);
/* "halt" or "repair". */
const char *slot_loss_name(enum slot_loss l);

/* [postgres] auth: where a new connection's password comes from
 * (pgconn.h). */
enum pg_auth {
    PG_AUTH_PASSWORD,    /* the conninfo's, password_file, PGPASSWORD, ~/.pgpass */
    PG_AUTH_AWS_RDS_IAM, /* a fresh RDS IAM auth token for each connection */
};

/* "password" or "aws_rds_iam" (exactly); -1 for anything else. */
int pg_auth_parse(const char *s);
/* "password" or "aws_rds_iam". */
const char *pg_auth_name(enum pg_auth a);

/* [outbox] value_converter: what the value of a record is (serde.h). */
enum value_format {
    VALUE_STRING = 0, /* the payload's bytes as they are */
    VALUE_JSON,       /* Connect's JsonConverter (jsonvalue.h) */
    VALUE_AVRO,       /* Avro binary in the registry's wire format */
    VALUE_JSON_SCHEMA,/* the JSON payload in the registry's wire format */
    VALUE_PROTOBUF,   /* the Protobuf bytes in the registry's wire format */
};

/* "string", "json", "avro", "json_schema" or "protobuf"; -1 for anything
 * else. */
int value_format_parse(const char *s);
const char *value_format_name(enum value_format f);

/* [outbox] value_subject_strategy: the registry subject of a record's
 * value, as Confluent's serializers name them. */
enum subject_strategy {
    SUBJECT_TOPIC = 0,    /* TopicNameStrategy: <topic>-value */
    SUBJECT_RECORD,       /* RecordNameStrategy: <record name> */
    SUBJECT_TOPIC_RECORD, /* TopicRecordNameStrategy: <topic>-<record name> */
};

/* "topic", "record" or "topic_record" (also Confluent's class names
 * TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy); -1
 * for anything else. */
int subject_strategy_parse(const char *s);
const char *subject_strategy_name(enum subject_strategy s);

/* [outbox] column.*: the role each configured column plays in an event
 * (outbox.h's map; outbox_col_name() says "event_id", ...). */
enum outbox_col {
    OC_EVENT_ID = 0,
    OC_AGGREGATE_TYPE,
    OC_AGGREGATE_ID,
    OC_AGGREGATE_VERSION,
    OC_EVENT_TYPE,
    OC_PAYLOAD,
    OC__COUNT
};

/* The [outbox] headers default: outboxd's own headers. */
#define OUTBOX_HEADERS_DEFAULT                                                         \
    "event_id, event_type, aggregate_type, aggregate_id, aggregate_version, commit_lsn"

#endif
