/*
 * outbox.h - from an outbox row to a Kafka message. Pure: no I/O.
 *
 * Given the configured outbox table and column names, decides whether a
 * decoded relation is the outbox, and turns one inserted row into the
 * message outboxd produces: topic (rendered from a template such as
 * "outbox.event.${aggregate_type}"), key = aggregate_id, value = payload
 * or NULL, and headers event_id, event_type, aggregate_type,
 * aggregate_id, aggregate_version (if present and not NULL), commit_lsn.
 *
 * What a column's value becomes (the payload, a key, a header, a topic
 * template's ${column}): the bytes of its text output (text, varchar, json,
 * jsonb as they are; any other type as PostgreSQL prints it: uuid, numbers,
 * timestamps...), except bytea (type OID 17), whose raw bytes are used:
 * its text output, hex or escape format, is decoded (bytea.h), and a
 * decoder that hands on the bytes themselves (CV_BINARY) is taken as it is.
 * Under value_converter = json a bytea value is a base64 JSON string
 * (jsonvalue.h), as Kafka Connect's JsonConverter writes BYTES.
 */
#ifndef OUTBOXD_OUTBOX_H
#define OUTBOXD_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "settings.h" /* enum outbox_col, OUTBOX_HEADERS_DEFAULT */
#include "spanctx.h"

/* "event_id", "aggregate_type", ... : the config key suffix and header name. */
const char *outbox_col_name(enum outbox_col c);

/* A parsed topic template: literal text and ${column} references. */
struct topic_template;

/* Parses tmpl. Returns NULL and a reason in err on a bad template (unclosed
 * "${", empty name). Free with topic_template_free(). */
struct topic_template *topic_template_parse(const char *tmpl, char *err,
                                            size_t errlen);
void topic_template_free(struct topic_template *t);

/* Renders the template for one row into out (NUL-terminated). Returns the
 * length, or -1 with a reason in err: a referenced column is missing from
 * the relation or NULL in the row, or the result does not fit outlen. */
int topic_template_render(const struct topic_template *t,
                          const struct relation *rel,
                          const struct col_value *values, int nvalues,
                          char *out, size_t outlen, char *err, size_t errlen);

/* Byte slice; data is borrowed and not NUL-terminated. */
struct slice {
    const char *data;
    size_t len;
};

/* Headers of a normal record ([outbox] headers: by default event_id,
 * event_type, aggregate_type, aggregate_id, aggregate_version, commit_lsn;
 * then the header placements of [outbox] additional_placement), at most
 * OUTBOX_ROW_HEADERS in all, and of a dead-letter record: those plus up to
 * OUTBOX_DLQ_HEADERS of its own (outbox_dlq_headers()). */
#define OUTBOX_SPEC_HEADERS 16 /* [outbox] headers and additional_placement */
#define OUTBOX_ROW_HEADERS (OUTBOX_SPEC_HEADERS + SPANCTX_MAX_ENTRIES)
#define OUTBOX_DLQ_HEADERS 6
#define OUTBOX_MAX_HEADERS (OUTBOX_ROW_HEADERS + OUTBOX_DLQ_HEADERS)
#define OUTBOX_TOPIC_MAX 256
#define OUTBOX_TOPIC_ERROR_MAX 256

/* Why a row cannot be published as it is. OF_SCHEMA is a configuration or
 * table problem that affects every row (always halts); the others are one
 * bad row (a poison event, dead-lettered under [errors] policy = dlq). */
enum outbox_fault {
    OF_NONE = 0,
    OF_SCHEMA,            /* configured column missing, unchanged-TOAST marker */
    OF_NULL_EVENT_ID,
    OF_EMPTY_EVENT_ID,    /* "" would reach consumers as an empty header */
    OF_NULL_AGGREGATE_ID,
    OF_EMPTY_AGGREGATE_ID,
    OF_NULL_EVENT_TYPE,
    OF_BAD_TOPIC,         /* template cannot render, or an invalid topic name */
    OF_BAD_SPAN_CONTEXT,  /* the span-context column cannot be read (spanctx.h) */
    OF_BAD_MESSAGE,       /* an outbox message's content cannot be read (emitmsg.h) */
    OF__COUNT             /* (the number of faults, for loops over them) */
};

/* "NULL_AGGREGATE_ID" etc.: the dlq_error header value. */
const char *outbox_fault_name(enum outbox_fault f);

/* True when topic is a legal Kafka topic name (1-249 of [A-Za-z0-9._-],
 * not "." or ".."); else false with the reason in err. */
bool outbox_topic_valid(const char *topic, char *err, size_t errlen);

struct outbox_header {
    const char *name; /* NUL-terminated; static, or borrowed as its holder says */
    struct slice value;
};

/* One message to produce. Borrows from the row's values and from the map's
 * scratch (decoded bytea values, the JSON value): valid as long as the
 * values are and until the next outbox_event_build() with the same map. */
struct outbox_event {
    char topic[OUTBOX_TOPIC_MAX]; /* "" when it could not be rendered or is
                                     not a valid name: see topic_error */
    enum outbox_fault fault;
    struct slice key;
    bool key_null;
    struct slice value;
    bool value_null;
    struct slice event_id;
    /* The record's timestamp (CreateTime), Unix epoch milliseconds; 0: the
     * producer's clock when it is handed the record (librdkafka's default).
     * outbox_event_set_commit_time() sets it. */
    int64_t timestamp_ms;
    int nheaders;
    struct outbox_header headers[OUTBOX_MAX_HEADERS];
    char commit_lsn[LSN_STRLEN];
    /* Why topic is "" (the template could not render, or the result is not
     * a valid topic name); "" when topic is set or the row is OF_SCHEMA. */
    char topic_error[OUTBOX_TOPIC_ERROR_MAX];
    /* The span context's headers point into it (outbox_map_set_span_context()). */
    struct spanctx span;
};

struct map_cache; /* column positions in the last relation layout seen */

/* Where one header's value comes from: a mapped column (enum outbox_col),
 * the commit LSN, or any other column of the table by name. */
enum { OUTBOX_HS_COMMIT_LSN = OC__COUNT, OUTBOX_HS_COLUMN };

struct outbox_hspec {
    int source;    /* enum outbox_col, OUTBOX_HS_COMMIT_LSN or OUTBOX_HS_COLUMN */
    char *column;  /* OUTBOX_HS_COLUMN: the column's name; owned */
    char *name;    /* the header's name (envelope: the field's); owned */
    bool envelope; /* a field of the JSON envelope, not a header */
};

struct outbox_map {
    char *schema;                  /* owned */
    char *table;                   /* owned */
    char *columns[OC__COUNT];      /* owned */
    struct topic_template *topic; /* owned */
    struct map_cache *cache;       /* owned; filled on use */
    struct outbox_hspec hspecs[OUTBOX_SPEC_HEADERS]; /* the headers, in order */
    int nhspecs;
    /* An empty payload becomes a null value (a tombstone), like a NULL one
     * ([outbox] tombstone_on_empty_payload; Debezium's
     * route.tombstone.on.empty.payload). Default false: an empty value. */
    bool tombstone_on_empty;
    char *span_column; /* owned; NULL: none (outbox_map_set_span_context()) */
    bool value_json;   /* outbox_map_set_value_json() */
    int nenvelope;     /* how many hspecs are envelope fields */
    /* [outbox] timestamp = commit: the record timestamp is the
     * transaction's commit time (outbox_event_set_commit_time()). Default
     * false: produce, the time the producer was handed the record. */
    bool timestamp_commit;
    char *message_prefix; /* owned; NULL: no table-less events (emitmsg.h) */
};

/* Fills m from a "schema.table" (or "table", meaning public) name, the
 * column names (indexed by enum outbox_col) and a topic template.
 * Returns 0, or -1 with a reason in err. Free with outbox_map_free(). */
int outbox_map_init(struct outbox_map *m, const char *table,
                    const char *const columns[OC__COUNT], const char *topic,
                    char *err, size_t errlen);
void outbox_map_free(struct outbox_map *m);

/*
 * Sets the headers every record carries, replacing outbox_map_init()'s
 * (OUTBOX_HEADERS_DEFAULT). headers: comma-separated FIELD[:NAME], FIELD
 * one of event_id, event_type, aggregate_type, aggregate_id,
 * aggregate_version (the mapped columns) or commit_lsn, NAME the header's
 * name (default FIELD); "none" for no such header. placement: NULL, "", or
 * Debezium's table.fields.additional.placement syntax, comma-separated
 * COLUMN:header[:NAME]: any column of the table as a header (NAME default
 * COLUMN), or COLUMN:envelope[:NAME]: a field of the JSON envelope (only
 * with outbox_map_set_value_json(), checked there); the partition
 * placement is refused (err says why). A header whose value is NULL is
 * left out. Returns 0, or -1 with
 * the reason in err (m unchanged but for a partial list, freed by
 * outbox_map_free()).
 */
int outbox_map_set_headers(struct outbox_map *m, const char *headers, const char *placement,
                           char *err, size_t errlen);

/* The value as Kafka Connect's JsonConverter (schemas.enable=false)
 * writes Debezium's ([outbox] value_converter = json; jsonvalue.h): the
 * payload as a JSON string, or with envelope placements the object
 * {"payload": <payload as a JSON string, or null>, "<NAME>": <the
 * column's value>, ...}. false: the payload's text as it is (StringConverter,
 * the default). 0, or -1 with err when envelope placements are set and
 * json is false. Call after outbox_map_set_headers(). */
int outbox_map_set_value_json(struct outbox_map *m, bool json, char *err, size_t errlen);

/* The tracing span-context column (Debezium's tracing.span.context.field):
 * when the table has a column of that name and a row's value is not NULL,
 * each entry of the value (java.util.Properties text, spanctx.h: the W3C
 * traceparent and tracestate an OpenTelemetry propagator wrote) becomes a
 * header after the others. A value that cannot be read makes the row a
 * poison event (OF_BAD_SPAN_CONTEXT). column NULL or "": none. 0, or -1
 * (out of memory) with err. */
int outbox_map_set_span_context(struct outbox_map *m, const char *column, char *err,
                                size_t errlen);

/* The prefix of the logical decoding messages that are events of this
 * outbox too (outbox_emit(), emitmsg.h); NULL or "": none. Refused (-1,
 * err) when it is the heartbeat's prefix. 0, or -1 with err. */
int outbox_map_set_message_prefix(struct outbox_map *m, const char *prefix, char *err,
                                  size_t errlen);

/* The name of the first header carrying source (an enum outbox_col or
 * OUTBOX_HS_COMMIT_LSN), or NULL when no header carries it (verify finds
 * the event id by it; polling mode drops the LSN's). Borrowed from m. */
const char *outbox_header_name(const struct outbox_map *m, int source);

/* True when rel is the configured outbox table. */
bool outbox_is_table(const struct outbox_map *m, const struct relation *rel);

/*
 * Builds the event for one inserted row. commit_lsn is the transaction's
 * commit record LSN. Returns 0, or -1 with ev->fault set and a reason in
 * err (required column missing from the table, unchanged-TOAST marker,
 * NULL or empty event_id, NULL or empty aggregate_id, NULL event_type, a topic that
 * cannot be rendered or is not a valid name). On a poison row (any fault
 * but OF_SCHEMA) ev still holds what the row has: key (key_null when
 * NULL), value, event_id, the headers that exist, and the topic the row
 * would have gone to (or, in topic_error, why it has none), whatever the
 * fault: a dead-letter record says both.
 */
int outbox_event_build(const struct outbox_map *m, const struct relation *rel,
                       const struct col_value *values, int nvalues,
                       lsn_t commit_lsn, struct outbox_event *ev, char *err,
                       size_t errlen);

/* Under m->timestamp_commit, sets ev's timestamp_ms to commit_time (the
 * transaction's commit time as decode.h gives it: microseconds since
 * 2000-01-01 UTC), in Unix milliseconds, rounded down; leaves 0 (the
 * producer's time) otherwise or when commit_time is 0 (unknown). Call it
 * after outbox_event_build(). */
void outbox_event_set_commit_time(const struct outbox_map *m, struct outbox_event *ev,
                                  int64_t commit_time);

/* Drops the commit LSN's header ([outbox] headers: commit_lsn by default)
 * that outbox_event_build() adds, for an event read from the table (polling
 * mode, repair), which has no commit LSN to give. */
void outbox_event_drop_lsn_header(const struct outbox_map *m, struct outbox_event *ev);

/*
 * The dead-letter record. Its headers are the original record's (as
 * producer_send() would have sent them: the one header list, built by
 * outbox_event_build()) followed by:
 *   dlq_original_topic        the topic the event would have gone to, or ""
 *   dlq_original_topic_error  only when that is "": why there is none
 *   dlq_reason, dlq_error     what is wrong, and its code
 *   dlq_record_lsn            only for a record that could not be decoded
 *   dlq_value_truncated_from  only when the value was truncated
 */
struct outbox_dlq {
    const char *topic;          /* "" when none */
    const char *topic_error;    /* why topic is "" (ignored otherwise) */
    const char *reason, *code;
    const char *record_lsn;     /* "" or NULL unless a record */
    const char *truncated_from; /* "" or NULL unless truncated */
};

/* Fills ev->headers (and nheaders) with orig[0..norig) (at most
 * OUTBOX_ROW_HEADERS of them are kept) and the dlq_* headers of d. The
 * headers borrow from orig and d. An empty topic_error is replaced by
 * "unknown". */
void outbox_dlq_headers(struct outbox_event *ev, const struct outbox_header *orig, int norig,
                        const struct outbox_dlq *d);

#endif
