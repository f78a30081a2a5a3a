/*
 * config.c - outboxd's configuration: defaults, INI file (libinih),
 * OUTBOXD_* environment variables and --set assignments, applied in that
 * order so that the last one wins: --set > environment > file > default.
 *
 * Known keys are described once, in the table below; the file parser, the
 * environment scan and --set all go through config_set(), so a key behaves
 * the same wherever it comes from. config_set() parses a value once, into
 * its type (a number, a duration, an enum of settings.h, a parsed listen
 * address): no other module reads a key's text again.
 *
 * The configuration is the bottom of the include graph: this file uses
 * only the base (str, log, duration, settings, listenaddr, secrets,
 * redact). Building the outbox sections into outbox.c's maps, and the
 * checks that need them, are config_outbox.c's.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "listenaddr.h"
#include "log.h"
#include "redact.h"
#include "secrets.h"
#include "settings.h"
#include "str.h"

enum key_type {
    KT_STRING,
    KT_BOOL,
    KT_POSINT,
    KT_MS,      /* int milliseconds >= 1: a bare number or a duration (the *_ms keys) */
    KT_MS0,     /* the same, 0 allowed (off) */
    KT_LOGLEVEL,
    KT_LOGFORMAT,
    KT_PLUGIN,   /* enum plugin_kind (settings.h) */
    KT_FAILOVER, /* enum failover_mode */
    KT_SLOTLOSS, /* enum slot_loss */
    KT_POLICY,
    KT_LISTEN,
    KT_MODE,
    KT_DELIVERY,
    KT_DURATION, /* int64 milliseconds, the unit required */
    KT_PATH,     /* a string, NULL (unset) by default */
    KT_PRESET,
    KT_CONVERTER, /* [outbox] value_converter: enum value_format */
    KT_STRATEGY,  /* [outbox] value_subject_strategy: enum subject_strategy */
    KT_TIMESTAMP, /* [outbox] timestamp: produce or commit, as a bool */
};

struct key_def {
    struct config_key doc;
    enum key_type type;
    size_t offset; /* into struct config */
};

#define CFG(field) offsetof(struct config, field)
#define K(sec, key, type, field, def, meaning) {{sec, key, def, meaning, NULL}, type, CFG(field)}
/* An [outbox] key: its field is in struct outbox_spec (one per section). */
#define KO(key, type, field, def, meaning)                                                   \
    {{"outbox", key, def, meaning, NULL}, type, offsetof(struct outbox_spec, field)}
#define KX(sec, key, type, field, example, meaning)                                          \
    {{sec, key, NULL, meaning, example}, type, CFG(field)}

/* Every known key: name, type, default and meaning, in the order of the
 * sample file. The defaults are applied by config_init() from here. */
static const struct key_def key_defs[] = {
    KX("postgres", "conninfo", KT_STRING, pg_conninfo,
       "host=db port=5432 dbname=app user=outboxd",
       "libpq connection string or postgres:// URI (required); keep the password out of it"),
    K("postgres", "password_file", KT_PATH, pg_password_file, NULL,
      "file holding the role's password (one line), used as the conninfo's password"),
    K("postgres", "slot", KT_STRING, pg_slot, "outboxd", "logical replication slot"),
    K("postgres", "publication", KT_STRING, pg_publication, "outboxd_pub",
      "publication of the outbox table (pgoutput)"),
    K("postgres", "plugin", KT_PLUGIN, pg_plugin, "pgoutput",
      "output plugin: pgoutput or wal2json"),
    K("postgres", "create_slot", KT_BOOL, pg_create_slot, "true",
      "create the slot at start when it does not exist"),
    K("postgres", "direct_read", KT_BOOL, pg_direct_read, "true",
      "read the stream from the socket itself (false: through libpq)"),
    K("postgres", "hot_standby", KT_BOOL, pg_hot_standby, "false",
      "other outboxd instances share this slot: wait while one holds it, trust the slot they moved"),
    K("postgres", "hot_standby_yield", KT_DURATION, pg_hot_standby_yield_ms, "30s",
      "hot_standby: an active instance that reaches no Kafka broker this long exits 1 so a standby takes the slot (0: never)"),
    K("postgres", "planned_downtime", KT_DURATION, pg_planned_downtime_ms, "1h",
      "the longest outboxd may be stopped (maintenance, an outage): outboxd check warns when the server would invalidate the slot sooner"),
    K("postgres", "failover", KT_FAILOVER, pg_failover, "auto",
      "failover slot (synced to standbys, PostgreSQL 17+): auto (on where the server has it), on or off"),
    K("postgres", "status_interval_ms", KT_MS, pg_status_interval_ms, "1000",
      "standby status (confirmed position) sent at least this often"),
    K("postgres", "retry_min_ms", KT_MS, pg_retry_min_ms, "500",
      "reconnect backoff, first delay (exponential, with jitter)"),
    K("postgres", "retry_max_ms", KT_MS, pg_retry_max_ms, "30000",
      "reconnect backoff, longest delay"),
    K("postgres", "heartbeat_interval_ms", KT_MS0, pg_heartbeat_interval_ms, "0",
      "heartbeat message period (0: off, else at least 100 ms)"),
    K("postgres", "monitor_interval_ms", KT_MS, pg_monitor_interval_ms, "5000",
      "slot lag / wal_status query period (at least 100 ms)"),
    K("postgres", "on_slot_loss", KT_SLOTLOSS, pg_on_slot_loss, "halt",
      "the slot is gone or invalidated: halt (exit 2, run outboxd repair) or repair"),
    K("postgres", "halt_linger", KT_DURATION, pg_halt_linger_ms, "5m",
      "on_slot_loss = halt: /readyz and /metrics say why this long, then exit 2 (0: at once)"),
    KO("preset", KT_PRESET, preset, "outboxd",
      "outboxd, or debezium: the Outbox Event Router's table and messages (the keys below)"),
    KO("table", KT_STRING, table, "public.outbox_events",
      "the outbox table (schema.table)"),
    KO("message_prefix", KT_PATH, message_prefix, NULL,
       "also publish outbox_emit() messages of this prefix (sql/outbox_emit.sql; unset: off)"),
    KO("topic", KT_STRING, topic, "outbox.event.${aggregate_type}",
      "topic template; ${column} is replaced by the row's value"),
    KO("column.event_id", KT_STRING, columns[OC_EVENT_ID], "event_id",
      "column of the event id (header event_id)"),
    KO("column.aggregate_type", KT_STRING, columns[OC_AGGREGATE_TYPE],
      "aggregate_type", "column of the aggregate type (header aggregate_type)"),
    KO("column.aggregate_id", KT_STRING, columns[OC_AGGREGATE_ID],
      "aggregate_id", "column of the aggregate id (the message key)"),
    KO("column.aggregate_version", KT_STRING, columns[OC_AGGREGATE_VERSION],
      "aggregate_version", "column of the aggregate version (header aggregate_version)"),
    KO("column.event_type", KT_STRING, columns[OC_EVENT_TYPE], "event_type",
      "column of the event type (header event_type)"),
    KO("column.payload", KT_STRING, columns[OC_PAYLOAD], "payload",
      "column of the payload (the message value)"),
    KO("headers", KT_STRING, headers, OUTBOX_HEADERS_DEFAULT,
      "headers, FIELD[:NAME], ... (FIELD: a column.* key's name or commit_lsn), or none"),
    KO("additional_placement", KT_PATH, placement, NULL,
      "more columns as headers: COLUMN:header[:NAME], ... (Debezium's syntax)"),
    KO("tombstone_on_empty_payload", KT_BOOL, tombstone_on_empty, "false",
      "an empty payload is sent as a null value (a tombstone), like a NULL one"),
    KO("span_context_column", KT_PATH, span_column, NULL,
      "column of a tracing span context (Properties text): its entries become headers"),
    KO("value_converter", KT_CONVERTER, value_format, "string",
      "string: the payload's text; json: as Connect's JsonConverter (envelope fields); avro, json_schema or protobuf: Schema Registry wire format ([registry])"),
    KO("value_subject_strategy", KT_STRATEGY, value_strategy, "topic",
      "registry subject of the value: topic (<topic>-value), record (value_record_name) or topic_record (<topic>-<record>)"),
    KO("value_record_name", KT_PATH, value_record_name, NULL,
      "record strategies: the record's full name, or a template such as com.acme.${event_type}"),
    KO("value_schema_version", KT_STRING, value_schema_version, "latest",
      "the subject's version whose schema encodes the values: latest or a number"),
    KO("value_message_index", KT_STRING, value_message_index, "0",
      "protobuf: which message of the .proto the payload is (0: the first; 1.0: the first nested in the second)"),
    KO("value_validate", KT_BOOL, value_validate, "false",
      "json_schema: a payload the subject's JSON Schema refuses is a poison event (SCHEMA_MISMATCH)"),
    KO("timestamp", KT_TIMESTAMP, timestamp_commit, "produce",
      "record timestamp: produce (when sent to Kafka) or commit (the transaction's commit time)"),
    KO("repair_column", KT_PATH, repair_column, "created_at",
      "each row's insert time: repair without track_commit_timestamp; republish --since"),
    KO("order_column", KT_PATH, order_column, "seq",
      "a column filled from a sequence at insert: repair and republish order a transaction's rows by it (sql/outbox_order_column.sql)"),
    KO("repair_margin", KT_DURATION, repair_margin_ms, "1m",
      "repair re-sends rows from this long before the last ACKed commit time"),
    K("offsets", "file", KT_STRING, offsets_file, "outboxd.offset",
      "offset file: the last position whose events were all ACKed"),
    K("delivery", "mode", KT_DELIVERY, delivery_mode, "at_least_once",
      "at_least_once, or exactly_once (Kafka transactions; read_committed consumers)"),
    K("delivery", "transactional_id", KT_PATH, delivery_transactional_id, NULL,
      "exactly_once: the producer's transactional.id (unset: outboxd-<system id>-<slot>)"),
    K("delivery", "progress_topic", KT_STRING, delivery_progress_topic, "outboxd.progress",
      "exactly_once: compacted topic of the committed positions (created if missing)"),
    K("delivery", "txn_max_events", KT_POSINT, delivery_txn_max_events, "10000",
      "exactly_once: a Kafka transaction commits after this many events ..."),
    K("delivery", "txn_max_ms", KT_MS, delivery_txn_max_ms, "100",
      "exactly_once: ... or this long after its first event"),
    K("errors", "policy", KT_POLICY, errors_policy, "halt",
      "an event that cannot be published: halt or dlq"),
    K("errors", "dlq_topic", KT_STRING, errors_dlq_topic, "outbox.dlq",
      "dead-letter topic (policy = dlq)"),
    K("aws", "region", KT_PATH, aws_region, NULL,
      "AWS region of MSK's IAM tokens and RDS's (unset: AWS_REGION, then AWS_DEFAULT_REGION)"),
    K("aws", "profile", KT_PATH, aws_profile, NULL,
      "profile of the shared credentials and config files (unset: AWS_PROFILE, then default)"),
    K("registry", "url", KT_PATH, registry_url, NULL,
      "Schema Registry base URL (Confluent API; Apicurio: http://host:8080/apis/ccompat/v7)"),
    K("registry", "user", KT_PATH, registry_user, NULL, "HTTP basic auth user (unset: none)"),
    K("registry", "password_file", KT_PATH, registry_password_file, NULL,
      "file holding the basic auth password (one line)"),
    K("registry", "ca_file", KT_PATH, registry_ca_file, NULL,
      "https: CA bundle that verifies the registry (unset: the system's)"),
    K("registry", "cert_file", KT_PATH, registry_cert_file, NULL,
      "https: client certificate (unset: none)"),
    K("registry", "key_file", KT_PATH, registry_key_file, NULL, "https: the client key"),
    K("registry", "timeout", KT_DURATION, registry_timeout_ms, "10s", "one lookup at most"),
    K("registry", "refresh", KT_DURATION, registry_refresh_ms, "5m",
      "latest versions are looked up again this often (the cached one serves meanwhile)"),
    K("registry", "retry", KT_DURATION, registry_retry_ms, "2s",
      "a failed lookup is tried again after this (the event waits)"),
    K("registry", "not_ready_after", KT_DURATION, registry_not_ready_ms, "30s",
      "an event waiting this long for its schema makes /readyz fail"),
    K("log", "level", KT_LOGLEVEL, log_level, "info", "error, warn, info or debug"),
    K("log", "format", KT_LOGFORMAT, log_format, "text", "text or json"),
    K("http", "listen", KT_LISTEN, http_listen, "127.0.0.1:19187",
      "host:port of /metrics, /healthz, /readyz (empty: no HTTP server)"),
    K("source", "mode", KT_MODE, source_mode, "logical",
      "logical (replication slot) or polling (leases on the table)"),
    K("polling", "owner_id", KT_STRING, poll_owner_id, NULL,
      "this relay's name in lease_owner (unset: hostname:pid)"),
    K("polling", "batch_size", KT_POSINT, poll_batch_size, "100",
      "rows claimed (and in flight) at most"),
    K("polling", "lease", KT_DURATION, poll_lease_ms, "30s",
      "how long a claim is exclusive (at least 1s)"),
    K("polling", "poll_interval_ms", KT_MS, poll_interval_ms, "1000",
      "claim at least this often when no NOTIFY arrives"),
    K("polling", "max_attempts", KT_POSINT, poll_max_attempts, "10",
      "failed attempts before the row is QUARANTINED"),
    K("polling", "backoff_min", KT_DURATION, poll_backoff_min_ms, "1s",
      "retry delay, first (doubling up to backoff_max, with jitter)"),
    K("polling", "backoff_max", KT_DURATION, poll_backoff_max_ms, "5m", "retry delay, longest"),
    K("polling", "retention", KT_DURATION, poll_retention_ms, "7d",
      "SENT rows older than this are deleted (0 or off: never)"),
    K("polling", "retention_batch", KT_POSINT, poll_retention_batch, "1000",
      "rows per DELETE (each its own short transaction)"),
    K("polling", "retention_interval", KT_DURATION, poll_retention_interval_ms, "1m",
      "how often retention runs"),
    K("polling", "notify_channel", KT_STRING, poll_notify_channel, "outboxd",
      "the channel LISTENed to (sql/outbox_polling.sql notifies outboxd)"),
};
#define NKEYS (sizeof(key_defs) / sizeof(key_defs[0]))
_Static_assert(NKEYS <= CONFIG_MAX_KEYS, "raise CONFIG_MAX_KEYS");

size_t config_key_count(void) { return NKEYS; }

const struct config_key *config_key_at(size_t i) { return i < NKEYS ? &key_defs[i].doc : NULL; }

const char *config_source_name(enum config_source s)
{
    switch (s) {
    case CONFIG_SRC_DEFAULT: return "default";
    case CONFIG_SRC_FILE: return "file";
    case CONFIG_SRC_ENV: return "environment";
    case CONFIG_SRC_SET: return "--set";
    case CONFIG_SRC_SECRET_FILE: return "secret file";
    case CONFIG_SRC_PRESET: return "[outbox] preset";
    case CONFIG_SRC_INHERITED: return "[outbox]";
    }
    return "?";
}

static const char *const known_sections[] = {"postgres", "outbox",  "kafka",
                                             "aws",      "offsets",  "delivery",
                                             "errors",   "registry", "log",
                                             "http",     "source",   "polling"};

const char *config_section_at(size_t i)
{
    return i < sizeof(known_sections) / sizeof(known_sections[0]) ? known_sections[i] : NULL;
}

/* outboxd's own librdkafka defaults; the file may override them. */
static const char *const kafka_defaults[][3] = {
    {"enable.idempotence", "true", "no duplicates from the producer's own retries"},
    {"acks", "all", "an event is ACKed once every in-sync replica has it"},
    {"partitioner", "murmur2_random", "the Java client's partitioner: same key, same partition"},
    /* One produce request in flight per broker connection. With up to 5
     * (librdkafka's idempotent default), a restarted outboxd (a new producer
     * id) lost events on a real 3-broker Kafka 3.9.1 (real.faults, 3 rounds:
     * 4 events ACKed and confirmed but never in the log): its first request
     * to a partition was refused (NOT_ENOUGH_REPLICAS, two brokers down) while
     * the next one, sent behind it, was accepted as the ISR grew back, since
     * the broker takes any first sequence from a producer it has no state
     * for; most likely librdkafka 2.0.2 then took the refused messages for
     * persisted (a later message of the partition was ACKed: its "implicit
     * ack") and reported them delivered (inferred from the offsets and the
     * logs, not traced in librdkafka). With one request in flight the
     * refused one is retried before anything behind it is sent.
     * Re-examined with librdkafka 2.14.2 on Kafka 4.4.0 (issue 37): 5
     * rounds with 5 in flight (a scratch build without check_in_flight),
     * NOT_ENOUGH_REPLICAS provoked in every round (112-510 appends
     * refused), 30 kill -9 restarts: 355,520 events, 0 missing, 0 out of
     * order. One run cannot rule the path out, librdkafka 2.0.2 is still
     * supported, and no gain from more in flight is measured yet: it
     * stays 1 (tests/faults.md, Evidence). */
    {"max.in.flight.requests.per.connection", "1",
     "one produce request per broker at a time: a refused one is retried before any behind it"},
};
#define NKAFKA_DEFAULTS (sizeof(kafka_defaults) / sizeof(kafka_defaults[0]))

/* outboxd's producer defaults beyond kafka_defaults (the producer's alone:
 * verify's consumer does not take them); the [kafka] section may override
 * them. The queue bound keeps memory bounded however large the backlog;
 * no delivery timeout, because a broker that is down for minutes must
 * delay events, not fail them (nothing is confirmed while they wait). */
static const char *const producer_defaults[][3] = {
    /* In messages: librdkafka counts only key and value bytes, while a
     * queued event costs about three times that (the message, its six
     * headers). 5,000 events is 25-50 ms of a drain, plenty to keep a
     * broker busy (a drain was no faster with 10,000), and keeps peak RSS
     * near 22 MB even for a 500,000-event transaction: with 10,000 it
     * reached 28.6 MB once the daemon allocated through jemalloc, with
     * 64 MB of queue it passed 30 MB. */
    {"queue.buffering.max.messages", "5000", "events queued for the broker at most (bounds memory)"},
    /* In bytes, for large payloads. */
    {"queue.buffering.max.kbytes", "16384", "kilobytes queued for the broker at most (bounds memory)"},
    {"message.timeout.ms", "0",
     "0: a broker outage delays events, never fails them (polling mode: half the lease)"},
    /* librdkafka waits linger.ms (default 5) to fill a batch; 2 ms halves
     * the steady-state commit-to-ACK latency (benchmark p50 6 -> 3 ms, p99
     * 18 -> 10 ms at 5,000 events/s) for no measurable CPU in a drain, where
     * batches fill by themselves.
     *
     * Against real Kafka (3 brokers, RF 3, acks=all; topic of 4 partitions,
     * so two brokers lead one partition each) a longer linger cut outboxd's
     * CPU on the 2-core bench host (one cluster, 2 ms against 20 ms: a
     * drain 10.9-18.6 against 7.7-8.7 us/event in 4 and 2 runs; steady
     * state 72-108 against 31-33 us/event in 4 and 2 runs), because
     * librdkafka 2.0.2's broker thread busy-polls (poll() with timeout 0,
     * strace) from the moment a partition's batch is due until the
     * response to that partition's in-flight request arrives, when no
     * other request waits on the connection: the idempotent producer's
     * in-flight limit (rd_kafka_toppar_producer_serve) compares the
     * messages in flight with a limit of 5 requests, after the wake-up
     * was already set to now. It stays 2 ms: 20 would delay every event
     * by up to 20 ms on a cluster whose round trip is short (the mock's
     * is 0.3-0.7 ms). Two partitions per broker avoid the spin (the other
     * partition's request waits in the connection's queue): same cluster,
     * back to back, 6 against 4 partitions: a drain 8.5 against 10.9
     * us/event, steady state 20 against 108 us/event.
     *
     * Re-decided on librdkafka 2.14.2 with the spin patched out
     * (deploy/librdkafka-wakeup.patch): on the three-broker mock at 5,000
     * events/s, one run each, commit-to-ACK p50 / p99 and CPU per 1,000
     * events were 4.3 / 13.2 ms, 26.5 ms at 0; 4.2 / 13.2, 26.9 at 1;
     * 3.7-3.9 / 7.4-8.3, 23.8 at 2 (two runs); 5.2 / 9.7, 20.0 at 5
     * (tests/bench/librdkafka.md). A shorter linger means more, smaller
     * requests, and on a host the database shares the CPU they cost
     * comes back as latency; 5 saves CPU but adds its wait to every
     * event. It stays 2. */
    {"linger.ms", "2", "how long librdkafka waits to fill a batch (latency)"},
    /* Statistics say which brokers are connected (/readyz, metrics). */
    {"statistics.interval.ms", "1000", "statistics period: connected brokers for /readyz and metrics"},
};

bool config_kafka_producer_default(size_t i, const char **key, const char **value,
                                   const char **meaning)
{
    if (i >= sizeof(producer_defaults) / sizeof(producer_defaults[0])) return false;
    *key = producer_defaults[i][0];
    *value = producer_defaults[i][1];
    *meaning = producer_defaults[i][2];
    return true;
}

/* The [kafka] keys outboxd itself reads (never passed to librdkafka). */
#define SASL_PASSWORD_FILE "sasl.password_file"
#define OIDC_SECRET_FILE "sasl.oauthbearer.client.secret_file"
#define OIDC_SECRET "sasl.oauthbearer.client.secret"

bool config_kafka_doc(size_t i, struct config_key *k)
{
    static const struct config_key own[] = {
        {"kafka", "bootstrap.servers", NULL, "the brokers, host:port[,host:port...] (required)",
         "kafka:9092"},
        {"kafka", SASL_PASSWORD_FILE, NULL,
         "file holding the SASL password (one line), used as sasl.password", NULL},
        {"kafka", OIDC_SECRET_FILE, NULL,
         "file holding the OIDC client secret (one line), used as " OIDC_SECRET
         " (sasl.oauthbearer.method = oidc)",
         NULL},
    };
    const size_t nown = sizeof(own) / sizeof(own[0]);
    if (i < nown) {
        *k = own[i];
        return true;
    }
    i -= nown;
    if (i < NKAFKA_DEFAULTS) {
        *k = (struct config_key){"kafka", kafka_defaults[i][0], kafka_defaults[i][1],
                                 kafka_defaults[i][2], NULL};
        return true;
    }
    i -= NKAFKA_DEFAULTS;
    const char *key, *value, *meaning;
    if (!config_kafka_producer_default(i, &key, &value, &meaning)) return false;
    *k = (struct config_key){"kafka", key, value, meaning, NULL};
    return true;
}

bool config_kafka_key_secret(const char *key)
{
    if (!strcmp(key, SASL_PASSWORD_FILE) || !strcmp(key, OIDC_SECRET_FILE))
        return false; /* a path */
    return strstr(key, "password") || strstr(key, "secret") ||
           !strcmp(key, "sasl.oauthbearer.config") || !strcmp(key, "ssl.key.pem");
}

static bool is_outbox_key(const struct key_def *d) { return !strcmp(d->doc.section, "outbox"); }

/* Key d's field: in s for an [outbox] key, else in c. */
static void *field_at(struct config *c, struct outbox_spec *s, const struct key_def *d)
{
    return is_outbox_key(d) ? (char *)s + d->offset : (char *)c + d->offset;
}

static char **str_field(struct config *c, struct outbox_spec *s, const struct key_def *d)
{
    return (char **)field_at(c, s, d);
}

static int set_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy) return -1;
    free(*field);
    *field = copy;
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "on", "yes", "1"};
    static const char *const no[] = {"false", "off", "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) return *out = true, 0;
        if (strcasecmp(v, no[i]) == 0) return *out = false, 0;
    }
    return -1;
}

/* An integer in [min, 86400000] (a day in milliseconds at most). */
static int parse_int_from(const char *v, long min, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || n < min || n > 86400000) return -1;
    *out = (int)n;
    return 0;
}

static int parse_posint(const char *v, int *out)
{
    return parse_int_from(v, 1, out);
}

/* A *_ms key: milliseconds, bare or with a unit, in [min, a day]. */
static int parse_ms(const char *v, long min, int *out, char *why, size_t whylen)
{
    int64_t ms;
    if (duration_parse(v, DURATION_BARE_MS, &ms, why, whylen) != 0) return -1;
    if (ms < min || ms > 86400000) {
        snprintf(why, whylen, "\"%s\" is %s", v,
                 ms < min ? "not a positive duration (at least 1 ms)" : "longer than a day");
        return -1;
    }
    *out = (int)ms;
    return 0;
}

static int set_known(struct config *c, struct outbox_spec *s, const struct key_def *d,
                     const char *value, char *err, size_t errlen);

/* Gives s's [outbox] keys their built-in defaults. 0, or -1. */
static int spec_defaults(struct config *c, struct outbox_spec *s)
{
    char err[256];
    for (size_t i = 0; i < NKEYS; i++)
        if (is_outbox_key(&key_defs[i]) && key_defs[i].doc.def) {
            if (set_known(c, s, &key_defs[i], key_defs[i].doc.def, err, sizeof(err)) != 0)
                return -1;
            s->source[i] = CONFIG_SRC_DEFAULT;
        }
    return 0;
}

int config_init(struct config *c)
{
    char err[256];
    memset(c, 0, sizeof(*c));
    c->loading = CONFIG_SRC_DEFAULT;
    for (size_t i = 0; i < NKEYS; i++)
        if (!is_outbox_key(&key_defs[i]) && key_defs[i].doc.def &&
            config_set(c, key_defs[i].doc.section, key_defs[i].doc.key, key_defs[i].doc.def,
                       err, sizeof(err)) != 0)
            goto fail;
    if (spec_defaults(c, &c->outbox) != 0) goto fail;
    for (size_t i = 0; i < NKAFKA_DEFAULTS; i++)
        if (config_set(c, "kafka", kafka_defaults[i][0], kafka_defaults[i][1], err,
                       sizeof(err)) != 0)
            goto fail;
    return 0;
fail:
    config_free(c);
    return -1;
}

static bool is_string_type(enum key_type t)
{
    return t == KT_STRING || t == KT_LISTEN || t == KT_PATH;
}

/* Frees the strings of c's keys (s NULL) or of s's [outbox] keys. */
static void free_strings(struct config *c, struct outbox_spec *s)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (is_string_type(key_defs[i].type) && is_outbox_key(&key_defs[i]) == (s != NULL)) {
            char **f = str_field(c, s, &key_defs[i]);
            free(*f);
            *f = NULL;
        }
}

void config_free(struct config *c)
{
    free_strings(c, NULL);
    free_strings(c, &c->outbox);
    for (size_t i = 0; i < c->noutboxes; i++) {
        free_strings(c, &c->outboxes[i]);
        free(c->outboxes[i].name);
    }
    free(c->outboxes);
    c->outboxes = NULL;
    c->noutboxes = 0;
    free(c->kafka_sasl_password_file);
    c->kafka_sasl_password_file = NULL;
    free(c->kafka_oidc_secret_file);
    c->kafka_oidc_secret_file = NULL;
    for (size_t i = 0; i < c->nkafka; i++) {
        free(c->kafka[i].key);
        free(c->kafka[i].value);
    }
    free(c->kafka);
    c->kafka = NULL;
    c->nkafka = 0;
}

/* A [kafka] property whose name ends in ".ms" given with a unit ("5s")
 * goes to librdkafka in milliseconds; anything else as it is. */
static const char *kafka_value(const char *key, const char *value, char *buf, size_t buflen)
{
    size_t kl = strlen(key);
    int64_t ms;
    char why[160];
    if (kl > 3 && !strcmp(key + kl - 3, ".ms") && *value >= '0' && *value <= '9' &&
        strspn(value, "0123456789") < strlen(value) &&
        duration_parse(value, DURATION_BARE_MS, &ms, why, sizeof(why)) == 0) {
        snprintf(buf, buflen, "%lld", (long long)ms);
        return buf;
    }
    return value;
}

static int set_kafka(struct config *c, const char *key, const char *value)
{
    char msbuf[32];
    value = kafka_value(key, value, msbuf, sizeof(msbuf));
    for (size_t i = 0; i < c->nkafka; i++)
        if (strcmp(c->kafka[i].key, key) == 0) {
            c->kafka[i].source = c->loading;
            return set_string(&c->kafka[i].value, value);
        }
    struct kv *n = realloc(c->kafka, (c->nkafka + 1) * sizeof(*n));
    if (!n) return -1;
    c->kafka = n;
    n[c->nkafka].key = strdup(key);
    n[c->nkafka].value = strdup(value);
    n[c->nkafka].source = c->loading;
    if (!n[c->nkafka].key || !n[c->nkafka].value) {
        free(n[c->nkafka].key);
        free(n[c->nkafka].value);
        return -1;
    }
    c->nkafka++;
    return 0;
}

const char *config_kafka_get(const struct config *c, const char *key)
{
    for (size_t i = 0; i < c->nkafka; i++)
        if (strcmp(c->kafka[i].key, key) == 0) return c->kafka[i].value;
    return NULL;
}

/* The value of a [kafka] property as the producer runs it: [kafka], else
 * outboxd's default, else dflt. -1 when it is not a whole number
 * (librdkafka itself then refuses it, with its own message). */
long long config_kafka_number(const struct config *c, const char *key, long long dflt)
{
    const char *v = config_kafka_get(c, key);
    for (size_t i = 0; !v && i < sizeof(producer_defaults) / sizeof(producer_defaults[0]); i++)
        if (strcmp(producer_defaults[i][0], key) == 0) v = producer_defaults[i][1];
    if (!v) return dflt;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    return errno || end == v || *end || n < 0 ? -1 : n;
}


/* Refuses message.max.bytes above queue.buffering.max.kbytes * 1024 (as
 * the producer would run them, defaults included): an event between the
 * two passes the size check and then never fits the queue. Returns 0, or
 * -1 with a message naming both settings and values in err. */
static int check_queue_fit(const struct config *c, char *err, size_t errlen)
{
    long long kb =
        config_kafka_number(c, "queue.buffering.max.kbytes", KAFKA_DEFAULT_QUEUE_MAX_KBYTES);
    long long mmb = config_kafka_number(c, "message.max.bytes", KAFKA_DEFAULT_MESSAGE_MAX_BYTES);
    if (kb < 0 || mmb < 0 || mmb <= kb * 1024) return 0;
    snprintf(err, errlen,
             "[kafka] message.max.bytes = %lld is larger than queue.buffering.max.kbytes = "
             "%lld (%lld bytes): an event between the two would pass the size check and "
             "then never fit the producer's queue; raise queue.buffering.max.kbytes to at "
             "least %lld or lower message.max.bytes",
             mmb, kb, kb * 1024, (mmb + 1023) / 1024);
    return -1;
}

/* Refuses (-1 with err) max.in.flight.requests.per.connection above 1:
 * with librdkafka 2.0.2's idempotent producer a later request's ACK can
 * stand for a refused one's messages (its "implicit ack"), which loses them.
 * 0 when it is 1 (outboxd's default) or left to librdkafka to refuse. */
static int check_in_flight(const struct config *c, char *err, size_t errlen)
{
    long long n = config_kafka_number(c, "max.in.flight.requests.per.connection", 1);
    if (n <= 1) return 0; /* 1, or not a number: librdkafka's own message */
    snprintf(err, errlen,
             "[kafka] max.in.flight.requests.per.connection = %lld: outboxd needs 1. With more "
             "than one produce request in flight, librdkafka 2.0.2 reports events as "
             "delivered that the broker refused (a request refused with NOT_ENOUGH_REPLICAS "
             "while the one behind it is stored, as on a restart during an ISR shrink: "
             "seen on a real 3-broker Kafka, README \"Faults it rides out\"); remove the "
             "key or set it to 1",
             n);
    return -1;
}

/* The known sections, comma-separated, into out (truncated to outlen). */
static void known_section_list(char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(known_sections) / sizeof(known_sections[0]); i++) {
        int w = snprintf(out + used, outlen - used, "%s%s", i ? ", " : "", known_sections[i]);
        if (w < 0 || (size_t)w >= outlen - used) return;
        used += (size_t)w;
    }
}

static bool section_known(const char *section)
{
    for (size_t i = 0; i < sizeof(known_sections) / sizeof(known_sections[0]); i++)
        if (strcmp(section, known_sections[i]) == 0) return true;
    return false;
}

/* "[section] key: " and the rest formatted into err; returns -1. */
static int key_error(char *err, size_t errlen, const struct key_def *d, const char *fmt,
                     ...) __attribute__((format(printf, 4, 5)));
static int key_error(char *err, size_t errlen, const struct key_def *d, const char *fmt,
                     ...)
{
    int n = snprintf(err, errlen, "[%s] %s: ", d->doc.section, d->doc.key);
    if (n < 0 || (size_t)n >= errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The index of value among the n words of one_of, or -1 with "\"value\" is
 * not one of a|b" in err. */
static int parse_choice(const struct key_def *d, const char *value,
                        const char *const *one_of, int n, char *err, size_t errlen)
{
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        if (strcmp(value, one_of[i]) == 0) return i;
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? "|" : "",
                 one_of[i]);
    }
    return key_error(err, errlen, d, "\"%s\" is not one of %s", value, list);
}

/* [outbox] preset: the values it gives the keys it governs; outboxd's are
 * the keys' own defaults (key_defs). */
static const char *const presets[] = {"outboxd", "debezium"};
static const char *const debezium_preset[][2] = {
    {"table", "public.outbox"},
    {"topic", "outbox.event.${aggregatetype}"},
    {"column.event_id", "id"},
    {"column.aggregate_type", "aggregatetype"},
    {"column.aggregate_id", "aggregateid"},
    {"column.event_type", "type"},
    {"column.payload", "payload"},
    {"headers", "event_id:id"},
    {"span_context_column", "tracingspancontext"},
    {"repair_column", ""}, /* Debezium's table has no insert time */
    {"order_column", ""},  /* nor an insert order */
};
#define NPRESET_KEYS (sizeof(debezium_preset) / sizeof(debezium_preset[0]))

/* Gives each key of s the preset governs the preset's value, unless it
 * was set by the file, the environment or --set (before or after the
 * preset: a later set replaces it, and a later preset skips it), or
 * inherited from the plain [outbox]. */
static int apply_preset(struct config *c, struct outbox_spec *s, int preset, char *err,
                        size_t errlen)
{
    for (size_t k = 0; k < NPRESET_KEYS; k++)
        for (size_t i = 0; i < NKEYS; i++) {
            const struct key_def *d = &key_defs[i];
            if (strcmp(d->doc.section, "outbox") || strcmp(d->doc.key, debezium_preset[k][0]))
                continue;
            if (s->source[i] != CONFIG_SRC_DEFAULT && s->source[i] != CONFIG_SRC_PRESET) break;
            const char *v = preset == OUTBOX_PRESET_DEBEZIUM ? debezium_preset[k][1]
                            : d->doc.def                     ? d->doc.def
                                                             : ""; /* KT_PATH: unset */
            if (set_known(c, s, d, v, err, errlen) != 0) return -1;
            s->source[i] = preset == OUTBOX_PRESET_DEBEZIUM ? CONFIG_SRC_PRESET
                                                            : CONFIG_SRC_DEFAULT;
            break;
        }
    return 0;
}

/* The keys whose value is one of a few words, stored as an enum. */
static int set_enum(struct config *c, struct outbox_spec *s, const struct key_def *d,
                    const char *value, char *err, size_t errlen)
{
    static const char *const modes[] = {"logical", "polling"};
    static const char *const policies[] = {"halt", "dlq"};
    static const char *const deliveries[] = {"at_least_once", "exactly_once"};
    static const char *const converters[] = {"string", "json", "avro", "json_schema",
                                             "protobuf"};
    static const char *const strategies[] = {"topic", "record", "topic_record"};
    static const char *const timestamps[] = {"produce", "commit"};
    int i;
    switch (d->type) {
    case KT_CONVERTER:
        if ((i = parse_choice(d, value, converters, 5, err, errlen)) < 0) return -1;
        s->value_format = i;
        return 0;
    case KT_STRATEGY:
        if ((i = subject_strategy_parse(value)) < 0 &&
            (i = parse_choice(d, value, strategies, 3, err, errlen)) < 0)
            return -1;
        s->value_strategy = i;
        return 0;
    case KT_TIMESTAMP:
        if ((i = parse_choice(d, value, timestamps, 2, err, errlen)) < 0) return -1;
        s->timestamp_commit = i == 1;
        return 0;
    case KT_PRESET:
        if ((i = parse_choice(d, value, presets, 2, err, errlen)) < 0) return -1;
        s->preset = i;
        return apply_preset(c, s, i, err, errlen);
    case KT_DELIVERY:
        if ((i = parse_choice(d, value, deliveries, 2, err, errlen)) < 0) return -1;
        c->delivery_mode = i == 1 ? DELIVERY_EXACTLY_ONCE : DELIVERY_AT_LEAST_ONCE;
        return 0;
    case KT_MODE:
        if ((i = parse_choice(d, value, modes, 2, err, errlen)) < 0) return -1;
        c->source_mode = i == 1 ? SOURCE_POLLING : SOURCE_LOGICAL;
        return 0;
    case KT_POLICY:
        if ((i = parse_choice(d, value, policies, 2, err, errlen)) < 0) return -1;
        c->errors_policy = i == 1 ? ERRORS_DLQ : ERRORS_HALT;
        return 0;
    case KT_LOGFORMAT:
        if ((i = log_format_parse(value)) < 0)
            return key_error(err, errlen, d, "\"%s\" is not one of text|json", value);
        c->log_format = i;
        return 0;
    default: /* KT_LOGLEVEL */
        if ((i = log_level_parse(value)) < 0)
            return key_error(err, errlen, d, "\"%s\" is not one of error|warn|info|debug",
                             value);
        c->log_level = i;
        return 0;
    }
}

/* "pgoutput, wal2json": the plugins settings.h knows, into out. */
static const char *plugin_list(char *out, size_t outlen)
{
    out[0] = '\0';
    for (int i = 0; i < PLUGIN__COUNT; i++)
        snprintf(out + strlen(out), outlen - strlen(out), "%s%s", i ? ", " : "",
                 plugin_name((enum plugin_kind)i));
    return out;
}

/* The [postgres] keys other modules act on (settings.h): plugin, failover,
 * on_slot_loss, parsed here once into their enums. */
static int set_postgres_word(struct config *c, const struct key_def *d, const char *value,
                             char *err, size_t errlen)
{
    char list[128];
    int i;
    switch (d->type) {
    case KT_PLUGIN:
        if ((i = plugin_parse(value)) < 0)
            return key_error(err, errlen, d, "unknown plugin \"%s\" (supported: %s)", value,
                             plugin_list(list, sizeof(list)));
        c->pg_plugin = (enum plugin_kind)i;
        return 0;
    case KT_FAILOVER:
        if ((i = failover_parse(value)) < 0)
            return key_error(err, errlen, d, "\"%s\" is not one of auto|on|off", value);
        c->pg_failover = (enum failover_mode)i;
        return 0;
    default: /* KT_SLOTLOSS */
        if ((i = slot_loss_parse(value)) < 0)
            return key_error(err, errlen, d, "\"%s\" is not one of halt|repair", value);
        c->pg_on_slot_loss = (enum slot_loss)i;
        return 0;
    }
}

/* The keys whose value is a number: a boolean, a count, milliseconds. */
static int set_number(struct config *c, struct outbox_spec *s, const struct key_def *d,
                      const char *value, char *err, size_t errlen)
{
    void *field = field_at(c, s, d);
    char why[200];
    int64_t ms;
    switch (d->type) {
    case KT_DURATION:
        if (duration_parse(value, 0, &ms, why, sizeof(why)) != 0)
            return key_error(err, errlen, d, "%s", why);
        *(int64_t *)field = ms;
        return 0;
    case KT_MS:
    case KT_MS0:
        if (parse_ms(value, d->type == KT_MS ? 1 : 0, field, why, sizeof(why)) != 0)
            return key_error(err, errlen, d, "%s", why);
        return 0;
    case KT_BOOL:
        if (parse_bool(value, field) != 0)
            return key_error(err, errlen, d, "\"%s\" is not a boolean (true/false)", value);
        return 0;
    default: /* KT_POSINT */
        if (parse_posint(value, field) != 0)
            return key_error(err, errlen, d, "\"%s\" is not a positive integer", value);
        return 0;
    }
}

/* The keys whose value is kept as a string, after its check. */
static int set_text(struct config *c, struct outbox_spec *s, const struct key_def *d,
                    const char *value, char *err, size_t errlen)
{
    char why[256];
    struct listen_addr la = {0};
    switch (d->type) {
    case KT_PATH:
        if (*value == '\0') { /* empty: unset */
            free(*str_field(c, s, d));
            *str_field(c, s, d) = NULL;
            return 0;
        }
        break;
    case KT_STRING:
        if (*value == '\0' && strcmp(d->doc.key, "conninfo") != 0)
            return key_error(err, errlen, d, "must not be empty");
        break;
    default: /* KT_LISTEN */
        if (*value != '\0' && listen_addr_parse(value, &la, why, sizeof(why)) != 0)
            return key_error(err, errlen, d, "%s", why);
        c->http_addr = la; /* parsed once: httpd_from_config() binds it */
        break;
    }
    if (set_string(str_field(c, s, d), value) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static int set_known(struct config *c, struct outbox_spec *s, const struct key_def *d,
                     const char *value, char *err, size_t errlen)
{
    switch (d->type) {
    case KT_MODE:
    case KT_DELIVERY:
    case KT_PRESET:
    case KT_CONVERTER:
    case KT_STRATEGY:
    case KT_TIMESTAMP:
    case KT_POLICY:
    case KT_LOGFORMAT:
    case KT_LOGLEVEL:
        return set_enum(c, s, d, value, err, errlen);
    case KT_PLUGIN:
    case KT_FAILOVER:
    case KT_SLOTLOSS:
        return set_postgres_word(c, d, value, err, errlen);
    case KT_DURATION:
    case KT_MS:
    case KT_MS0:
    case KT_BOOL:
    case KT_POSINT:
        return set_number(c, s, d, value, err, errlen);
    case KT_PATH:
    case KT_STRING:
    case KT_LISTEN:
        return set_text(c, s, d, value, err, errlen);
    }
    return -1;
}

/* "unknown key \"KEY\" in section [LABEL]", with the closest key of
 * section (the key table's) if it looks like a typo; returns -1. */
static int unknown_key(const char *section, const char *label, const char *key, char *err,
                       size_t errlen)
{
    const char *cands[NKEYS];
    size_t ncands = 0;
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(key_defs[i].doc.section, section) == 0) cands[ncands++] = key_defs[i].doc.key;
    const char *hint = str_suggest(key, cands, ncands);
    if (hint)
        snprintf(err, errlen, "unknown key \"%s\" in section [%s]; did you mean \"%s\"?", key,
                 label, hint);
    else
        snprintf(err, errlen, "unknown key \"%s\" in section [%s]", key, label);
    return -1;
}

static size_t key_index(const char *section, const char *key)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(key_defs[i].doc.section, section) && !strcmp(key_defs[i].doc.key, key))
            return i;
    return NKEYS;
}

size_t config_key_index(const char *section, const char *key) { return key_index(section, key); }

/* ---- outbox sections ------------------------------------------------------ */

/* [outbox.NAME]: NAME is [A-Za-z0-9_-]+ (it names the section in messages,
 * metrics and `republish --outbox`, and has an environment spelling). */
static bool outbox_name_valid(const char *name)
{
    return *name && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "0123456789_-") == strlen(name);
}

static bool set_explicitly(unsigned char src)
{
    return src == CONFIG_SRC_FILE || src == CONFIG_SRC_ENV || src == CONFIG_SRC_SET;
}

static const char *spec_key_value(const struct outbox_spec *s, size_t i, char *out,
                                  size_t outlen);

/* Named section n takes key i from the plain [outbox] when the plain
 * section set it and n did not; never the table (each named section names
 * its own). */
static int inherit_key(struct config *c, struct outbox_spec *n, size_t i, char *err,
                       size_t errlen)
{
    const struct key_def *d = &key_defs[i];
    if (!set_explicitly(c->outbox.source[i]) || set_explicitly(n->source[i]) ||
        !strcmp(d->doc.key, "table"))
        return 0;
    char v[4096];
    spec_key_value(&c->outbox, i, v, sizeof(v));
    if (set_known(c, n, d, v, err, errlen) != 0) return -1;
    n->source[i] = CONFIG_SRC_INHERITED;
    return 0;
}

/* The named section called name, made (defaults, then what the plain
 * [outbox] sets) when there is none yet; NULL with err on out of memory. */
static struct outbox_spec *named_outbox(struct config *c, const char *name, char *err,
                                        size_t errlen)
{
    for (size_t i = 0; i < c->noutboxes; i++)
        if (!strcmp(c->outboxes[i].name, name)) return &c->outboxes[i];
    struct outbox_spec *a = realloc(c->outboxes, (c->noutboxes + 1) * sizeof(*a));
    if (!a) goto oom;
    c->outboxes = a;
    struct outbox_spec *n = &a[c->noutboxes];
    memset(n, 0, sizeof(*n));
    c->noutboxes++;
    if (!(n->name = strdup(name)) || spec_defaults(c, n) != 0) goto oom;
    for (size_t i = 0; i < NKEYS; i++)
        if (is_outbox_key(&key_defs[i]) && inherit_key(c, n, i, err, errlen) != 0) return NULL;
    return n;
oom:
    snprintf(err, errlen, "out of memory");
    return NULL;
}

/* Sets key of [outbox.NAME]. */
static int set_named(struct config *c, const char *name, const char *key, const char *value,
                     char *err, size_t errlen)
{
    char label[128];
    snprintf(label, sizeof(label), "outbox.%s", name);
    if (!outbox_name_valid(name)) {
        snprintf(err, errlen,
                 "[%s]: \"%s\" is not a section name: NAME of [outbox.NAME] is letters, "
                 "digits, '_' and '-'",
                 label, name);
        return -1;
    }
    size_t i = key_index("outbox", key);
    if (i == NKEYS) return unknown_key("outbox", label, key, err, errlen);
    struct outbox_spec *n = named_outbox(c, name, err, errlen);
    if (!n) return -1;
    if (set_known(c, n, &key_defs[i], value, err, errlen) != 0) {
        /* key_error() says "[outbox] key: ...": name the section. */
        if (!strncmp(err, "[outbox]", 8)) {
            char why[512];
            snprintf(why, sizeof(why), "%s", err + 8);
            snprintf(err, errlen, "[%s]%s", label, why);
        }
        return -1;
    }
    n->source[i] = (unsigned char)c->loading;
    return 0;
}

/* Sets key i of the plain [outbox], and of every named section that
 * inherits it. */
static int set_plain_outbox(struct config *c, size_t i, const char *value, char *err,
                            size_t errlen)
{
    if (set_known(c, &c->outbox, &key_defs[i], value, err, errlen) != 0) return -1;
    c->outbox.source[i] = (unsigned char)c->loading;
    for (size_t k = 0; k < c->noutboxes; k++)
        if (inherit_key(c, &c->outboxes[k], i, err, errlen) != 0) return -1;
    return 0;
}

size_t config_outbox_count(const struct config *c)
{
    return c->noutboxes ? c->noutboxes : 1;
}

const struct outbox_spec *config_outbox_at(const struct config *c, size_t i)
{
    if (!c->noutboxes) return i == 0 ? &c->outbox : NULL;
    return i < c->noutboxes ? &c->outboxes[i] : NULL;
}

const char *config_outbox_label(const struct outbox_spec *s, char *buf, size_t buflen)
{
    if (s->name)
        snprintf(buf, buflen, "[outbox.%s]", s->name);
    else
        snprintf(buf, buflen, "[outbox]");
    return buf;
}

int config_outbox_find(const struct config *c, const char *name, char *err, size_t errlen)
{
    size_t n = config_outbox_count(c);
    if (!name || !*name) {
        if (n == 1) return 0;
    } else {
        for (size_t i = 0; i < c->noutboxes; i++)
            if (!strcmp(c->outboxes[i].name, name)) return (int)i;
    }
    char list[512] = "";
    for (size_t i = 0; i < c->noutboxes; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                 c->outboxes[i].name);
    if (!c->noutboxes)
        snprintf(err, errlen, "no outbox section \"%s\": the configuration has the plain "
                 "[outbox] only (leave the name out)", name);
    else if (!name || !*name)
        snprintf(err, errlen, "the configuration has several outbox sections: name one "
                 "(%s)", list);
    else
        snprintf(err, errlen, "no section [outbox.%s] (the outbox sections: %s)", name, list);
    return -1;
}

int config_set(struct config *c, const char *section, const char *key,
               const char *value, char *err, size_t errlen)
{
    if (!strncmp(section, "outbox.", 7)) return set_named(c, section + 7, key, value, err, errlen);
    if (!section_known(section)) {
        char list[160];
        known_section_list(list, sizeof(list));
        snprintf(err, errlen, "%s: unknown section [%s] (known: %s)", key, section, list);
        return -1;
    }
    if (strcmp(section, "kafka") == 0) {
        if (*key == '\0') {
            snprintf(err, errlen, "[kafka]: empty key");
            return -1;
        }
        if (!strcmp(key, SASL_PASSWORD_FILE)) { /* outboxd's, not librdkafka's */
            free(c->kafka_sasl_password_file);
            c->kafka_sasl_password_file = *value ? strdup(value) : NULL;
            c->kafka_sasl_password_file_source = c->loading;
            if (*value && !c->kafka_sasl_password_file) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            return 0;
        }
        if (!strcmp(key, OIDC_SECRET_FILE)) { /* outboxd's, not librdkafka's */
            free(c->kafka_oidc_secret_file);
            c->kafka_oidc_secret_file = *value ? strdup(value) : NULL;
            c->kafka_oidc_secret_file_source = c->loading;
            if (*value && !c->kafka_oidc_secret_file) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            return 0;
        }
        if (set_kafka(c, key, value) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    size_t i = key_index(section, key);
    if (i == NKEYS) return unknown_key(section, section, key, err, errlen);
    if (is_outbox_key(&key_defs[i])) return set_plain_outbox(c, i, value, err, errlen);
    if (set_known(c, NULL, &key_defs[i], value, err, errlen) != 0) return -1;
    c->source[i] = (unsigned char)c->loading;
    return 0;
}

/* libinih is built without line numbers in the handler and with a fixed
 * line buffer (INI_MAX_LINE, 200 bytes in Debian's build). Feeding it
 * through our own reader lets us count lines, so every error names its
 * line, and refuse an over-long line instead of letting libinih silently
 * split it into two. */
struct ini_ctx {
    struct config *c;
    FILE *f;
    int lineno;
    char reason[512]; /* the first error, at line lineno */
    int failed;
};

static char *read_line(char *str, int num, void *stream)
{
    struct ini_ctx *ctx = stream;
    if (ctx->failed || !fgets(str, num, ctx->f)) return NULL;
    ctx->lineno++;
    size_t n = strlen(str);
    if (n == (size_t)num - 1 && str[n - 1] != '\n' && !feof(ctx->f)) {
        snprintf(ctx->reason, sizeof(ctx->reason),
                 "line longer than %d bytes (the INI parser's limit); set this key "
                 "through its OUTBOXD_* environment variable or --set instead",
                 num - 2);
        ctx->failed = 1;
        return NULL;
    }
    return str;
}

static int on_ini_value(void *user, const char *section, const char *name,
                        const char *value)
{
    struct ini_ctx *ctx = user;
    if (ctx->failed) return 0;
    if (config_set(ctx->c, section, name, value, ctx->reason, sizeof(ctx->reason)) != 0) {
        ctx->failed = 1;
        return 0;
    }
    return 1;
}

int config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct ini_ctx ctx = {.c = c, .f = f};
    enum config_source was = c->loading;
    c->loading = CONFIG_SRC_FILE;
    int rc = ini_parse_stream(read_line, &ctx, on_ini_value, &ctx);
    c->loading = was;
    fclose(f);
    /* inih reports the first bad line, syntax or ours; we stopped reading at
     * ours, so a smaller rc is a syntax error before it. */
    if (ctx.failed && (rc <= 0 || rc >= ctx.lineno)) {
        snprintf(err, errlen, "%s:%d: %s", path, ctx.lineno, ctx.reason);
        return -1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)",
                 path, rc);
        return -1;
    }
    return 0;
}

/* The environment name of a key: OUTBOXD_<SECTION>_<KEY>, dots as '_'. */
static void env_name(const char *section, const char *key, char *out, size_t outlen)
{
    size_t n = (size_t)snprintf(out, outlen, "OUTBOXD_%s_%s", section, key);
    if (n >= outlen) n = outlen - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = out[i] == '.' ? '_' : (char)toupper((unsigned char)out[i]);
}

static const char *env_lookup(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=') return *envp + n + 1;
    return NULL;
}

/* True when the variable e (NAME=value) starts with OUTBOXD_<SECTION>_ of a
 * known section. */
static bool env_in_section(const char *e)
{
    char name[128];
    for (size_t i = 0; i < sizeof(known_sections) / sizeof(known_sections[0]); i++) {
        env_name(known_sections[i], "", name, sizeof(name));
        if (strncmp(e, name, strlen(name)) == 0) return true;
    }
    return false;
}

/* The environment spelling of an [outbox.NAME]'s NAME: upper case, '-' as '_'. */
static void env_section_name(const char *name, char *out, size_t outlen)
{
    size_t n = 0;
    for (; *name && n + 1 < outlen; name++)
        out[n++] = *name == '-' ? '_' : (char)toupper((unsigned char)*name);
    out[n] = '\0';
}

/* For OUTBOXD_OUTBOX_<NAME>_<KEY>=value (e, not a plain [outbox] key's
 * variable): the [outbox] key's index, and in name the section's name: a
 * section already made (file) whose spelling matches, else NAME in lower
 * case. NKEYS when no [outbox] key ends the variable's name. */
static size_t env_named_outbox(const struct config *c, const char *e, char *name,
                               size_t namelen)
{
    static const char prefix[] = "OUTBOXD_OUTBOX_";
    if (strncmp(e, prefix, sizeof(prefix) - 1) != 0) return NKEYS;
    const char *rest = e + sizeof(prefix) - 1, *eq = strchr(rest, '=');
    size_t n = eq ? (size_t)(eq - rest) : strlen(rest), best = NKEYS, bestlen = 0;
    char kname[128];
    for (size_t i = 0; i < NKEYS; i++) { /* the longest key that ends it */
        if (!is_outbox_key(&key_defs[i])) continue;
        env_name("", key_defs[i].doc.key, kname, sizeof(kname)); /* OUTBOXD__KEY */
        const char *k = kname + 8;                                 /* _KEY */
        size_t kl = strlen(k);
        if (n > kl && !strncmp(rest + n - kl, k, kl) && kl > bestlen) best = i, bestlen = kl;
    }
    if (best == NKEYS || n - bestlen >= namelen) return NKEYS;
    char want[128];
    snprintf(want, sizeof(want), "%.*s", (int)(n - bestlen), rest);
    for (size_t i = 0; i < c->noutboxes; i++) {
        char have[128];
        env_section_name(c->outboxes[i].name, have, sizeof(have));
        if (!strcmp(have, want)) {
            snprintf(name, namelen, "%s", c->outboxes[i].name);
            return best;
        }
    }
    for (size_t i = 0; want[i]; i++) name[i] = (char)tolower((unsigned char)want[i]);
    name[strlen(want)] = '\0';
    return best;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One OUTBOXD_OUTBOX_<NAME>_<KEY> variable over [outbox.NAME]; 0 when e is
 * none (or the plain [outbox]'s). 0, or -1 with err. */
static int load_env_named_one(struct config *c, const char *e, char *err, size_t errlen)
{
    char name[128], section[140], plain[128];
    const char *eq = strchr(e, '=');
    size_t i = eq ? env_named_outbox(c, e, name, sizeof(name)) : NKEYS;
    if (i == NKEYS) return 0;
    env_name("outbox", key_defs[i].doc.key, plain, sizeof(plain));
    if (strlen(plain) == (size_t)(eq - e) && !strncmp(e, plain, strlen(plain))) return 0;
    snprintf(section, sizeof(section), "outbox.%s", name);
    return config_set(c, section, key_defs[i].doc.key, eq + 1, err, errlen);
}

/* The OUTBOXD_OUTBOX_<NAME>_<KEY> variables of envp, over [outbox.NAME],
 * in name order: sections the environment makes are in the order of their
 * names, whatever the environment's order. */
static int load_env_named(struct config *c, char *const *envp, char *err, size_t errlen)
{
    size_t n = 0;
    for (char *const *e = envp; e && *e; e++)
        if (!strncmp(*e, "OUTBOXD_OUTBOX_", 15)) n++;
    if (!n) return 0;
    const char **vars = malloc(n * sizeof(*vars));
    if (!vars) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    n = 0;
    for (char *const *e = envp; *e; e++)
        if (!strncmp(*e, "OUTBOXD_OUTBOX_", 15)) vars[n++] = *e;
    qsort(vars, n, sizeof(*vars), cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = load_env_named_one(c, vars[i], err, errlen);
    free(vars);
    return rc;
}

static int load_env(struct config *c, char *const *envp, char *err, size_t errlen)
{
    char name[128];
    for (size_t i = 0; i < NKEYS; i++) {
        env_name(key_defs[i].doc.section, key_defs[i].doc.key, name, sizeof(name));
        const char *v = env_lookup(envp, name);
        if (v && config_set(c, key_defs[i].doc.section, key_defs[i].doc.key, v, err, errlen) != 0)
            return -1;
    }
    if (load_env_named(c, envp, err, errlen) != 0) return -1;
    /* A misspelt key of a known section is an error. A variable that
     * matches no section may belong to something else (a wrapper script's
     * OUTBOXD_BUILD_DIR): it is skipped here, and the caller names it in a
     * warning (config_env_unmatched). */
    for (char *const *e = envp; e && *e; e++) {
        if (strncmp(*e, "OUTBOXD_", 8) != 0 || strncmp(*e, "OUTBOXD_KAFKA_", 14) == 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        if (!env_in_section(*e)) continue;
        bool known = false;
        for (size_t i = 0; i < NKEYS; i++) {
            env_name(key_defs[i].doc.section, key_defs[i].doc.key, name, sizeof(name));
            if (strlen(name) == n && strncmp(*e, name, n) == 0) known = true;
        }
        if (env_named_outbox(c, *e, name, sizeof(name)) != NKEYS) known = true;
        if (!known) {
            snprintf(err, errlen, "environment variable %.*s is not a known key", (int)n, *e);
            return -1;
        }
    }
    /* [kafka] keys are open-ended: OUTBOXD_KAFKA_SASL_USERNAME becomes
     * sasl.username (librdkafka property names use dots, never '_'). */
    static const char prefix[] = "OUTBOXD_KAFKA_";
    for (; envp && *envp; envp++) {
        if (strncmp(*envp, prefix, sizeof(prefix) - 1) != 0) continue;
        const char *rest = *envp + sizeof(prefix) - 1;
        const char *eq = strchr(rest, '=');
        if (!eq || eq == rest || (size_t)(eq - rest) >= sizeof(name)) continue;
        size_t n = (size_t)(eq - rest);
        for (size_t i = 0; i < n; i++)
            name[i] = rest[i] == '_' ? '.' : (char)tolower((unsigned char)rest[i]);
        name[n] = '\0';
        if (!strcmp(name, "sasl.password.file")) /* OUTBOXD_KAFKA_SASL_PASSWORD_FILE */
            snprintf(name, sizeof(name), "%s", SASL_PASSWORD_FILE);
        /* OUTBOXD_KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET_FILE */
        if (!strcmp(name, "sasl.oauthbearer.client.secret.file"))
            snprintf(name, sizeof(name), "%s", OIDC_SECRET_FILE);
        if (config_set(c, "kafka", name, eq + 1, err, errlen) != 0) return -1;
    }
    return 0;
}

int config_load_env(struct config *c, char *const *envp, char *err, size_t errlen)
{
    enum config_source was = c->loading;
    c->loading = CONFIG_SRC_ENV;
    int rc = load_env(c, envp, err, errlen);
    c->loading = was;
    return rc;
}

int config_env_unmatched(char *const *envp, char *msg, size_t msglen)
{
    int count = 0;
    size_t used = 0;
    int w = snprintf(msg, msglen, "ignoring environment variable");
    used = w < 0 ? 0 : (size_t)w < msglen ? (size_t)w : msglen - 1;
    for (; envp && *envp; envp++) {
        if (strncmp(*envp, "OUTBOXD_", 8) != 0 || env_in_section(*envp)) continue;
        const char *eq = strchr(*envp, '=');
        int n = (int)(eq ? (size_t)(eq - *envp) : strlen(*envp));
        w = snprintf(msg + used, msglen - used, "%s%.*s", count ? ", " : " ", n, *envp);
        if (w > 0) used += (size_t)w < msglen - used ? (size_t)w : msglen - used - 1;
        count++;
    }
    if (count) {
        char list[256];
        known_section_list(list, sizeof(list));
        snprintf(msg + used, msglen - used,
                 ": no section matches (OUTBOXD_<SECTION>_<KEY>, sections: %s)", list);
    } else {
        msg[0] = '\0';
    }
    return count;
}

int config_apply_set(struct config *c, const char *assignment, char *err, size_t errlen)
{
    const char *dot = strchr(assignment, '.');
    const char *eq = strchr(assignment, '=');
    if (!dot || !eq || dot > eq || dot == assignment) {
        snprintf(err, errlen, "--set \"%s\": expected section.key=value", assignment);
        return -1;
    }
    char section[192], key[256];
    size_t slen = (size_t)(dot - assignment), klen = (size_t)(eq - dot - 1);
    if (slen >= sizeof(section) || klen >= sizeof(key) || klen == 0) {
        snprintf(err, errlen, "--set \"%s\": expected section.key=value", assignment);
        return -1;
    }
    memcpy(section, assignment, slen);
    section[slen] = '\0';
    memcpy(key, dot + 1, klen);
    key[klen] = '\0';
    /* outbox.NAME.key: a named outbox section ("column.*" keys have a dot
     * of their own). */
    char *kdot = strchr(key, '.');
    if (!strcmp(section, "outbox") && kdot && key_index("outbox", key) == NKEYS &&
        strncmp(key, "column.", 7) != 0 && slen + 1 + (size_t)(kdot - key) < sizeof(section)) {
        size_t nlen = (size_t)(kdot - key);
        section[slen] = '.';
        memcpy(section + slen + 1, key, nlen);
        section[slen + 1 + nlen] = '\0';
        memmove(key, kdot + 1, strlen(kdot + 1) + 1);
    }
    enum config_source was = c->loading;
    c->loading = CONFIG_SRC_SET;
    int rc = config_set(c, section, key, eq + 1, err, errlen);
    c->loading = was;
    return rc;
}

/* The [polling] keys that depend on each other (mode = polling only). */
static int config_validate_polling(const struct config *c, char *err, size_t errlen)
{
    if (config_outbox_count(c) > 0 && config_outbox_at(c, 0)->timestamp_commit) {
        snprintf(err, errlen,
                 "[outbox] timestamp = commit needs [source] mode = logical: polling mode "
                 "reads rows, not the transactions' commit records, so it has no commit time "
                 "to give (use produce, the default)");
        return -1;
    }
    if (c->poll_lease_ms < 1000) {
        snprintf(err, errlen, "[polling] lease: %lld ms is too short (at least 1s: the lease "
                 "must outlast a broker round trip)", (long long)c->poll_lease_ms);
        return -1;
    }
    if (c->poll_backoff_min_ms <= 0) {
        snprintf(err, errlen, "[polling] backoff_min must be more than 0");
        return -1;
    }
    if (c->poll_backoff_min_ms > c->poll_backoff_max_ms) {
        snprintf(err, errlen, "[polling] backoff_min (%lld ms) is larger than backoff_max "
                 "(%lld ms)", (long long)c->poll_backoff_min_ms,
                 (long long)c->poll_backoff_max_ms);
        return -1;
    }
    if (c->poll_retention_ms > 0 && c->poll_retention_interval_ms <= 0) {
        snprintf(err, errlen, "[polling] retention_interval must be more than 0 when "
                 "retention is on");
        return -1;
    }
    for (const char *p = c->poll_notify_channel; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) {
            snprintf(err, errlen, "[polling] notify_channel \"%s\": use lower-case letters, "
                     "digits and '_' only", c->poll_notify_channel);
            return -1;
        }
    return 0;
}

/* The outbox sections, as far as no map needs building (config_outbox.c
 * checks the maps): the plain [outbox] holds no table when there are
 * named ones, every named one names its table, their environment
 * spellings differ, and polling (one table) is not asked for several. */
static int config_validate_outboxes(const struct config *c, char *err, size_t errlen)
{
    size_t ti = key_index("outbox", "table");
    if (c->noutboxes && set_explicitly(c->outbox.source[ti])) {
        snprintf(err, errlen, "[outbox] table = %s is set and there are [outbox.NAME] "
                 "sections (%s, ...): with named sections each one names its table; move the "
                 "table into an [outbox.NAME] section (keys set in [outbox] are the named "
                 "sections' defaults)", c->outbox.table, c->outboxes[0].name);
        return -1;
    }
    for (size_t i = 0; i < c->noutboxes; i++) {
        if (c->outboxes[i].source[ti] == CONFIG_SRC_DEFAULT) {
            snprintf(err, errlen, "[outbox.%s] table is not set: each [outbox.NAME] section "
                     "names its outbox table (table = schema.table)", c->outboxes[i].name);
            return -1;
        }
        char a[128], b[128];
        env_section_name(c->outboxes[i].name, a, sizeof(a));
        for (size_t j = 0; j < i; j++) {
            env_section_name(c->outboxes[j].name, b, sizeof(b));
            if (!strcmp(a, b)) {
                snprintf(err, errlen, "[outbox.%s] and [outbox.%s]: both are OUTBOXD_OUTBOX_%s_* "
                         "in the environment; rename one", c->outboxes[j].name,
                         c->outboxes[i].name, a);
                return -1;
            }
        }
    }
    if (c->noutboxes < 2) return 0;
    if (c->source_mode == SOURCE_POLLING) {
        snprintf(err, errlen, "[source] mode = polling serves one outbox table, and there are "
                 "%zu [outbox.NAME] sections: run one polling relay per table (each with its "
                 "own configuration), or use mode = logical", c->noutboxes);
        return -1;
    }
    return 0;
}

int config_validate(const struct config *c, char *err, size_t errlen)
{
    if (!c->pg_conninfo || !*c->pg_conninfo) {
        snprintf(err, errlen,
                 "[postgres] conninfo is not set (file, OUTBOXD_POSTGRES_CONNINFO or "
                 "--set postgres.conninfo=...)");
        return -1;
    }
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(c->pg_conninfo, &perr);
    if (!opts) {
        char safe[512];
        redact_conn_error(c->pg_conninfo, perr ? perr : "out of memory", safe, sizeof(safe));
        PQfreemem(perr);
        snprintf(err, errlen, "[postgres] conninfo cannot be parsed (not shown: it may hold a "
                 "password): %s", safe);
        return -1;
    }
    PQconninfoFree(opts);
    if (c->pg_retry_min_ms > c->pg_retry_max_ms) {
        snprintf(err, errlen, "[postgres] retry_min_ms (%d) is larger than retry_max_ms (%d)",
                 c->pg_retry_min_ms, c->pg_retry_max_ms);
        return -1;
    }
    if (c->pg_heartbeat_interval_ms > 0 && c->pg_heartbeat_interval_ms < 100) {
        snprintf(err, errlen,
                 "[postgres] heartbeat_interval_ms: %d is below 100 ms (0 turns heartbeats "
                 "off)",
                 c->pg_heartbeat_interval_ms);
        return -1;
    }
    if (c->pg_monitor_interval_ms < 100) {
        snprintf(err, errlen, "[postgres] monitor_interval_ms: %d is below 100 ms",
                 c->pg_monitor_interval_ms);
        return -1;
    }
    if (!config_kafka_get(c, "bootstrap.servers")) {
        snprintf(err, errlen, "[kafka] bootstrap.servers is not set");
        return -1;
    }
    if (check_queue_fit(c, err, errlen) != 0 || check_in_flight(c, err, errlen) != 0)
        return -1;
    if (config_validate_outboxes(c, err, errlen) != 0) return -1;
    if (c->delivery_mode == DELIVERY_EXACTLY_ONCE && c->source_mode == SOURCE_POLLING) {
        snprintf(err, errlen, "[delivery] mode = exactly_once needs [source] mode = logical: "
                 "the polling relay marks rows SENT, which no Kafka transaction can cover");
        return -1;
    }
    return c->source_mode == SOURCE_POLLING ? config_validate_polling(c, err, errlen) : 0;
}

/* ---- secrets ------------------------------------------------------------ */

int config_load_secrets(struct config *c, char *err, size_t errlen)
{
    char why[512];
    char *pw = NULL;
    if (c->pg_password_file) {
        char *conninfo = NULL;
        if (secret_file_read(c->pg_password_file, &pw, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "[postgres] password_file: %s", why);
            return -1;
        }
        int rc = secret_conninfo_with_password(c->pg_conninfo, pw, &conninfo, err, errlen);
        free(pw);
        if (rc != 0) return -1;
        free(c->pg_conninfo);
        c->pg_conninfo = conninfo;
    }
    if (c->kafka_sasl_password_file) {
        const char *had = config_kafka_get(c, "sasl.password");
        if (had) {
            snprintf(err, errlen, "[kafka] sasl.password and sasl.password_file are both set: "
                                  "keep one of them (the file)");
            return -1;
        }
        if (secret_file_read(c->kafka_sasl_password_file, &pw, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "[kafka] sasl.password_file: %s", why);
            return -1;
        }
        enum config_source was = c->loading;
        c->loading = CONFIG_SRC_SECRET_FILE;
        int rc = set_kafka(c, "sasl.password", pw);
        c->loading = was;
        free(pw);
        if (rc != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    if (c->kafka_oidc_secret_file) {
        /* librdkafka takes the secret under either name */
        if (config_kafka_get(c, OIDC_SECRET) ||
            config_kafka_get(c, "sasl.oauthbearer.client.credentials.client.secret")) {
            snprintf(err, errlen, "[kafka] " OIDC_SECRET " and " OIDC_SECRET_FILE
                                  " are both set: keep one of them (the file)");
            return -1;
        }
        if (secret_file_read(c->kafka_oidc_secret_file, &pw, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "[kafka] " OIDC_SECRET_FILE ": %s", why);
            return -1;
        }
        enum config_source was = c->loading;
        c->loading = CONFIG_SRC_SECRET_FILE;
        int rc = set_kafka(c, OIDC_SECRET, pw);
        c->loading = was;
        free(pw);
        if (rc != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    return 0;
}

/* True when a secret came from source src: the conninfo's password, a
 * [kafka] secret property, or credentials in [registry] url. */
static bool secret_from(const struct config *c, enum config_source src)
{
    size_t ci = key_index("postgres", "conninfo");
    if (c->source[ci] == src && c->pg_conninfo && !c->pg_password_file &&
        secret_conninfo_has_password(c->pg_conninfo))
        return true;
    if (c->source[key_index("registry", "url")] == src &&
        redact_url_has_credentials(c->registry_url))
        return true;
    for (size_t i = 0; i < c->nkafka; i++)
        if (c->kafka[i].source == src && config_kafka_key_secret(c->kafka[i].key)) return true;
    return false;
}

bool config_file_holds_secret(const struct config *c)
{
    return secret_from(c, CONFIG_SRC_FILE);
}

bool config_set_holds_secret(const struct config *c)
{
    return secret_from(c, CONFIG_SRC_SET);
}

/* ---- values as written -------------------------------------------------- */

/* Key i as a file would say it, from c, or from s for an [outbox] key. */
static const char *key_value(const struct config *c, const struct outbox_spec *s, size_t i,
                             char *out, size_t outlen)
{
    static const char *const levels[] = {"error", "warn", "info", "debug"};
    const struct key_def *d = &key_defs[i];
    const void *f = is_outbox_key(d) ? (const char *)s + d->offset : (const char *)c + d->offset;
    out[0] = '\0';
    switch (d->type) {
    case KT_STRING:
    case KT_LISTEN:
    case KT_PATH: {
        const char *v = *(char *const *)f;
        if (!v) break;
        if (c && f == &c->pg_conninfo)
            secret_conninfo_masked(v, out, outlen);
        else if (c && f == &c->registry_url)
            redact_url(v, out, outlen);
        else
            snprintf(out, outlen, "%s", v);
        break;
    }
    case KT_BOOL: snprintf(out, outlen, "%s", *(const bool *)f ? "true" : "false"); break;
    case KT_POSINT:
    case KT_MS:
    case KT_MS0: snprintf(out, outlen, "%d", *(const int *)f); break;
    case KT_DURATION: duration_format(*(const int64_t *)f, out, outlen); break;
    case KT_LOGLEVEL:
        snprintf(out, outlen, "%s", c->log_level >= 0 && c->log_level < 4 ? levels[c->log_level]
                                                                          : "?");
        break;
    case KT_LOGFORMAT:
        snprintf(out, outlen, "%s", c->log_format == LOG_FORMAT_JSON ? "json" : "text");
        break;
    case KT_POLICY:
        snprintf(out, outlen, "%s", c->errors_policy == ERRORS_DLQ ? "dlq" : "halt");
        break;
    case KT_MODE:
        snprintf(out, outlen, "%s", c->source_mode == SOURCE_POLLING ? "polling" : "logical");
        break;
    case KT_DELIVERY:
        snprintf(out, outlen, "%s",
                 c->delivery_mode == DELIVERY_EXACTLY_ONCE ? "exactly_once" : "at_least_once");
        break;
    case KT_PRESET:
        snprintf(out, outlen, "%s", presets[s->preset == OUTBOX_PRESET_DEBEZIUM]);
        break;
    case KT_CONVERTER:
        snprintf(out, outlen, "%s", value_format_name(s->value_format));
        break;
    case KT_STRATEGY:
        snprintf(out, outlen, "%s", subject_strategy_name(s->value_strategy));
        break;
    case KT_TIMESTAMP:
        snprintf(out, outlen, "%s", s->timestamp_commit ? "commit" : "produce");
        break;
    case KT_PLUGIN: snprintf(out, outlen, "%s", plugin_name(c->pg_plugin)); break;
    case KT_FAILOVER: snprintf(out, outlen, "%s", failover_name(c->pg_failover)); break;
    case KT_SLOTLOSS:
        snprintf(out, outlen, "%s", slot_loss_name(c->pg_on_slot_loss));
        break;
    }
    return out;
}

const char *config_key_value(const struct config *c, size_t i, char *out, size_t outlen)
{
    return key_value(c, &c->outbox, i, out, outlen);
}

const char *config_outbox_key_value(const struct outbox_spec *s, size_t i, char *out,
                                    size_t outlen)
{
    return key_value(NULL, s, i, out, outlen);
}

static const char *spec_key_value(const struct outbox_spec *s, size_t i, char *out,
                                  size_t outlen)
{
    return key_value(NULL, s, i, out, outlen);
}
