/*
 * config.h - outboxd's configuration: INI file, environment, --set.
 *
 * Precedence: --set section.key=value > OUTBOXD_<SECTION>_<KEY> environment
 * variable (upper case, dots as '_') > file > built-in default.
 * A named outbox section [outbox.NAME] is --set outbox.NAME.key=value and
 * OUTBOXD_OUTBOX_<NAME>_<KEY> (NAME upper-cased, '-' as '_'; it matches
 * the file's section case-insensitively, or makes the section, in lower
 * case, when the file has none).
 * [kafka] keys are not interpreted: they go to librdkafka as they are, on
 * top of outboxd's own defaults (enable.idempotence=true, acks=all,
 * partitioner=murmur2_random).
 */
#ifndef OUTBOXD_CONFIG_H
#define OUTBOXD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "listenaddr.h"
#include "settings.h"

/* [errors] policy: what to do with an event that cannot be published. */
enum { ERRORS_HALT = 0, ERRORS_DLQ = 1 };

/* [source] mode: how committed outbox rows are found. */
enum { SOURCE_LOGICAL = 0, SOURCE_POLLING = 1 };

/* [delivery] mode. */
enum { DELIVERY_AT_LEAST_ONCE = 0, DELIVERY_EXACTLY_ONCE = 1 };

/* [outbox] preset: whose table and message layout the defaults follow. */
enum { OUTBOX_PRESET_OUTBOXD = 0, OUTBOX_PRESET_DEBEZIUM = 1 };

/* Where a key's value came from (outboxd config prints it). */
enum config_source {
    CONFIG_SRC_DEFAULT = 0,
    CONFIG_SRC_FILE,
    CONFIG_SRC_ENV,
    CONFIG_SRC_SET,
    CONFIG_SRC_SECRET_FILE, /* read from password_file / sasl.password_file */
    CONFIG_SRC_PRESET,      /* [outbox] preset's value for a key not set otherwise */
    CONFIG_SRC_INHERITED,   /* [outbox.NAME]: the value set in the plain [outbox] */
};

/* "default", "file", "environment", "--set", "secret file". */
const char *config_source_name(enum config_source s);

/* The key table (config.c), the one source of names, defaults and
 * meanings: the parser validates against it, and `outboxd config
 * --example` and the README's key tables are printed from it. */
struct config_key {
    const char *section;
    const char *key;
    const char *def;     /* the built-in default as written in a file; NULL: none */
    const char *meaning; /* one line, for the documentation */
    const char *example; /* a required key's example value (sample file), or NULL */
};

/* Number of known keys (not counting [kafka], which is open-ended). */
size_t config_key_count(void);
/* Key i (< config_key_count()). */
const struct config_key *config_key_at(size_t i);
/* The index of section's key (config_key_at()), config_key_count() when
 * there is none. */
size_t config_key_index(const char *section, const char *key);

/* Section i of the known ones in file order ("postgres", "outbox",
 * "kafka", ...); NULL past the last. */
const char *config_section_at(size_t i);

/* outboxd's own [kafka] keys, for the documentation: bootstrap.servers,
 * sasl.password_file and the librdkafka defaults outboxd sets (config.c's
 * and kafkaconf.c's). Fills *k; false past the last. */
bool config_kafka_doc(size_t i, struct config_key *k);

/* True for a [kafka] property that holds a secret (sasl.password,
 * ssl.key.password, sasl.oauthbearer.client.secret, ...). */
bool config_kafka_key_secret(const char *key);

#define CONFIG_MAX_KEYS 96

/* One outbox section, [outbox] or [outbox.NAME]: everything that is per
 * table (the table, its column mapping, topic template, headers, ...).
 *
 * With no [outbox.NAME] section the plain [outbox] is the one table, as
 * it always was. With named sections every [outbox.NAME] is a table, and
 * a key set in [outbox] (file, environment, --set) is the default of
 * every named section that does not set it itself, preset included; the
 * plain section's table must then be unset. A key's value in a named
 * section: set in the section > set in [outbox] > the section's preset >
 * built-in default. */
struct outbox_spec {
    char *name; /* NAME of [outbox.NAME]; NULL: the plain [outbox]. Owned. */
    /* Where each [outbox] key (by config_key_at() index) came from. */
    unsigned char source[CONFIG_MAX_KEYS];
    int preset; /* OUTBOX_PRESET_*: sets the defaults of the keys below */
    char *table;
    char *message_prefix; /* table-less events with this prefix (emitmsg.h); NULL: off */
    char *topic;
    char *columns[OC__COUNT];
    char *headers;   /* FIELD[:NAME], ... (outbox_map_set_headers()) */
    char *placement; /* COLUMN:header[:NAME], ...; NULL: none */
    bool tombstone_on_empty; /* an empty payload: a null value */
    char *span_column;       /* tracing span-context column; NULL: none */
    int value_format;        /* value_converter: enum value_format (settings.h) */
    int value_strategy;      /* value_subject_strategy: enum subject_strategy */
    char *value_record_name; /* record strategies' record name template; NULL: none */
    char *value_schema_version; /* "latest" or a version number */
    char *value_message_index;  /* protobuf's message-index list, "0", "1.0" */
    bool value_validate;        /* json_schema: the payload must fit the schema */
    bool timestamp_commit;   /* timestamp = commit, else produce
                              * (outbox_map.timestamp_commit) */
    char *repair_column;     /* repair's time column when track_commit_timestamp
                              * is off (e.g. created_at); NULL: none */
    char *order_column;      /* insert order within a transaction (a sequence's
                              * column, e.g. seq): repair and republish order a
                              * transaction's rows by it; NULL: none (ctid) */
    int64_t repair_margin_ms; /* repair re-sends from this much before the boundary */
};

struct kv {
    char *key;   /* owned */
    char *value; /* owned */
    enum config_source source;
};

struct config {
    const char *path; /* the file loaded (main.c sets it, argv's), for messages */
    /* Where each known key (config_key_at order) came from. */
    unsigned char source[CONFIG_MAX_KEYS];
    enum config_source loading; /* the source config_set() records */
    char *pg_password_file;     /* [postgres] password_file; NULL: none */
    char *kafka_sasl_password_file; /* [kafka] sasl.password_file (not librdkafka's) */
    enum config_source kafka_sasl_password_file_source;
    /* [kafka] sasl.oauthbearer.client.secret_file (not librdkafka's): the
     * OIDC client secret, used as sasl.oauthbearer.client.secret */
    char *kafka_oidc_secret_file;
    enum config_source kafka_oidc_secret_file_source;
    /* [postgres] */
    char *pg_conninfo;
    char *pg_slot;
    char *pg_publication;
    enum plugin_kind pg_plugin; /* plugin_name() prints it */
    bool pg_create_slot;
    bool pg_direct_read; /* read the replication socket itself (stream.c) */
    enum failover_mode pg_failover;
    bool pg_hot_standby; /* other instances share the slot (README "Hot standby") */
    int64_t pg_hot_standby_yield_ms; /* ... and an active one that reaches no
                                      * broker this long exits (0: never) */
    int64_t pg_planned_downtime_ms; /* the longest stop outboxd check plans for */
    int pg_status_interval_ms;
    int pg_retry_min_ms; /* reconnect backoff bounds */
    int pg_retry_max_ms;
    int pg_heartbeat_interval_ms; /* 0: no heartbeat message */
    int pg_monitor_interval_ms;   /* slot lag / wal_status query period */
    enum slot_loss pg_on_slot_loss; /* README "Gap repair" */
    int64_t pg_halt_linger_ms;    /* halt: /readyz and /metrics say so this long,
                                   * then exit 2 */

    /* [outbox]: the one outbox table when there are no [outbox.NAME]
     * sections; with them, the defaults every named section inherits (its
     * table key must then be unset). Use config_outbox_at(). */
    struct outbox_spec outbox;
    /* [outbox.NAME] sections, in order of first appearance: the file's in
     * file order, then those the environment makes (by name), then
     * --set's; owned. */
    struct outbox_spec *outboxes;
    size_t noutboxes;

    /* [kafka]: in order of first appearance; later sets replace values. */
    struct kv *kafka;
    size_t nkafka;

    /* [offsets] */
    char *offsets_file;

    /* [delivery] (exactly_once: see relaytxn.c) */
    int delivery_mode;              /* DELIVERY_AT_LEAST_ONCE or DELIVERY_EXACTLY_ONCE */
    char *delivery_transactional_id; /* NULL: outboxd-<system id>-<slot> */
    char *delivery_progress_topic;  /* compacted topic of the committed positions */
    int delivery_txn_max_events;    /* a Kafka transaction commits after this many events */
    int delivery_txn_max_ms;        /* ... or this long after its first one */

    /* [errors] */
    int errors_policy; /* ERRORS_HALT or ERRORS_DLQ */
    char *errors_dlq_topic;

    /* [aws] (awscreds.h): NULL, the environment's fallbacks */
    char *aws_region;
    char *aws_profile;

    /* [registry] (registry.h) */
    char *registry_url; /* NULL: no registry */
    char *registry_user;
    char *registry_password_file;
    char *registry_ca_file;
    char *registry_cert_file;
    char *registry_key_file;
    int64_t registry_timeout_ms;
    int64_t registry_refresh_ms;
    int64_t registry_retry_ms;
    int64_t registry_not_ready_ms;

    /* [log] */
    int log_level;  /* enum log_level */
    int log_format; /* enum log_format */

    /* [http] */
    char *http_listen; /* "host:port"; "" disables the HTTP server */
    struct listen_addr http_addr; /* http_listen parsed (httpd_from_config()) */

    /* [source] */
    int source_mode; /* SOURCE_LOGICAL or SOURCE_POLLING */

    /* [polling] (mode = polling; see polling.h and pollrelay.h) */
    char *poll_owner_id;        /* NULL: hostname:pid */
    int poll_batch_size;        /* rows per claim */
    int64_t poll_lease_ms;      /* lease duration */
    int poll_interval_ms;       /* claim at least this often without NOTIFY */
    int poll_max_attempts;      /* failed attempts before QUARANTINED */
    int64_t poll_backoff_min_ms;
    int64_t poll_backoff_max_ms;
    int64_t poll_retention_ms;          /* SENT rows kept; 0: never deleted */
    int poll_retention_batch;           /* rows per DELETE */
    int64_t poll_retention_interval_ms; /* how often retention runs */
    char *poll_notify_channel;          /* LISTEN channel */
};

/* The outbox sections in use: the [outbox.NAME] sections in the order
 * they first appeared, or the plain [outbox] when there are none. */
size_t config_outbox_count(const struct config *c);
const struct outbox_spec *config_outbox_at(const struct config *c, size_t i);

/* The index of the section in use named name (NULL or "": the only one,
 * or the plain [outbox]), or -1 with a reason in err naming the sections. */
int config_outbox_find(const struct config *c, const char *name, char *err, size_t errlen);

/* "[outbox]" or "[outbox.NAME]" into buf; returns buf. */
const char *config_outbox_label(const struct outbox_spec *s, char *buf, size_t buflen);

/* Fills c with the built-in defaults. Returns 0, -1 on out of memory. */
int config_init(struct config *c);
void config_free(struct config *c);

/* Sets one key. Returns 0, or -1 with a reason naming section and key in
 * err (unknown section or key, bad value). */
int config_set(struct config *c, const char *section, const char *key,
               const char *value, char *err, size_t errlen);

/* Reads an INI file over c. Returns 0 or -1 with "FILE:LINE: reason". */
int config_load_file(struct config *c, const char *path, char *err,
                     size_t errlen);

/* Applies OUTBOXD_* variables from envp (NULL-terminated "NAME=value"
 * strings) over c. Returns 0 or -1. */
int config_load_env(struct config *c, char *const *envp, char *err,
                    size_t errlen);

/* The OUTBOXD_* variables of envp whose name matches no section (a
 * misspelt section, or another program's variable such as a script's
 * OUTBOXD_BUILD_DIR): config_load_env() skips them, and the caller warns
 * with msg, "ignoring environment variable NAME[, NAME...]: no section
 * matches (...)" (names only, never values; truncated to msglen). Returns
 * how many; msg is empty for none. Pure. */
int config_env_unmatched(char *const *envp, char *msg, size_t msglen);

/* Applies one "section.key=value" (from --set). Returns 0 or -1. */
int config_apply_set(struct config *c, const char *assignment, char *err,
                     size_t errlen);

/* Checks cross-key consistency after loading (conninfo present and
 * parseable, retry bounds in order, the outbox sections' maps, ...); the
 * words and numbers of single keys were checked, and parsed, when they
 * were set. Returns 0 or -1. */
int config_validate(const struct config *c, char *err, size_t errlen);

/* Reads the secret files (password_file into the conninfo's password,
 * sasl.password_file into [kafka] sasl.password) once everything is
 * loaded; before config_validate(). Returns 0 or -1 (unreadable or empty
 * file, a password given both ways). */
int config_load_secrets(struct config *c, char *err, size_t errlen);

/* The value of key i as a file would say it (durations with their unit,
 * "" when unset), secrets masked, into out. Returns out. */
const char *config_key_value(const struct config *c, size_t i, char *out, size_t outlen);

/* The same for an [outbox] key (section "outbox") of outbox section s. */
const char *config_outbox_key_value(const struct outbox_spec *s, size_t i, char *out,
                                    size_t outlen);

/* True when the file loaded set a key holding a secret (a conninfo with a
 * password, a [kafka] secret property, a [registry] url with credentials). */
bool config_file_holds_secret(const struct config *c);

/* True when --set gave a secret (visible in ps). */
bool config_set_holds_secret(const struct config *c);

/* Value of a [kafka] key, NULL if not set. */
const char *config_kafka_get(const struct config *c, const char *key);

/* outboxd's producer default number i beyond the [kafka] defaults of
 * config_init() (key, value, a one-line meaning for the documentation);
 * false past the last. The producer (kafkaconf.h) sets each unless [kafka]
 * does. */
bool config_kafka_producer_default(size_t i, const char **key, const char **value,
                                   const char **meaning);

/* librdkafka 2.0.2's own defaults (CONFIGURATION.md) of the properties
 * outboxd compares itself. */
#define KAFKA_DEFAULT_MESSAGE_MAX_BYTES 1000000LL
#define KAFKA_DEFAULT_QUEUE_MAX_KBYTES 1048576LL

/* The whole number a [kafka] property has as the producer runs it:
 * [kafka], else outboxd's producer default, else dflt. -1 when it is not a
 * whole number (librdkafka itself then refuses it, with its own message). */
long long config_kafka_number(const struct config *c, const char *key, long long dflt);

#endif
