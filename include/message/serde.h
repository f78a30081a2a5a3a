/*
 * serde.h - an outbox section's values in the Schema Registry's wire
 * format ([outbox] value_converter = avro, json_schema or protobuf): the
 * step between mapping (outbox.h) and producing. It names the subject
 * (value_subject_strategy), asks the registry client's cache for the
 * schema (registry.h), encodes the payload and frames it (serde_wire.h).
 *
 *   avro         the JSON payload encoded as Avro binary with the subject's
 *                schema (serde_avro.h); a payload that does not fit it is
 *                a poison event, SCHEMA_MISMATCH
 *   json_schema  the JSON payload as it is; with value_validate = true it
 *                must fit the subject's JSON Schema (serde_jsonschema.h),
 *                else it is a poison event, SCHEMA_MISMATCH; a schema with
 *                keywords outboxd does not evaluate halts (SERDE_FATAL)
 *   protobuf     the payload's bytes (a bytea column holding the message
 *                serialized by the application) and the message-index list
 *                of value_message_index
 *
 * A subject the registry has not answered for yet holds the event
 * (SERDE_WAIT) exactly as a full producer queue does: nothing behind it is
 * read, and it is encoded again when the relay resumes it. A subject whose
 * schema is of another type than the converter (an Avro converter on a
 * PROTOBUF subject) is a configuration error: SERDE_FATAL halts.
 */
#ifndef OUTBOXD_SERDE_H
#define OUTBOXD_SERDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "outbox.h"
#include "registry.h"
#include "serde_wire.h"
#include "settings.h"

#define SERDE_SUBJECT_MAX 512

struct serde_spec {
    enum value_format format;   /* VALUE_AVRO, VALUE_JSON_SCHEMA or VALUE_PROTOBUF */
    enum subject_strategy strategy;
    const char *record_name;    /* record strategies: a template of ${column}s
                                 * (outbox.h's topic template syntax); borrowed */
    int version;                /* REGISTRY_LATEST or a pinned version */
    bool validate;              /* json_schema: the payload must fit the schema */
    int indexes[SERDE_WIRE_MAX_INDEXES]; /* protobuf: the message-index list */
    int nindexes;
};

enum serde_result {
    SERDE_OK,       /* ev's value is the framed encoding */
    SERDE_WAIT,     /* the schema is not known yet: hold the event */
    SERDE_MISMATCH, /* this payload does not fit: a poison event */
    SERDE_FATAL,    /* the configuration and the registry disagree: halt */
};

/* "SCHEMA_MISMATCH": the dead-letter code of a payload that does not fit. */
#define SERDE_MISMATCH_CODE "SCHEMA_MISMATCH"
#define SERDE_FATAL_CODE "SCHEMA_TYPE"

struct serde;

/* A serde for one section; spec is copied (record_name too), reg borrowed
 * (it must outlive the serde). NULL with err on a bad record_name template
 * or out of memory. Free with serde_free(). */
struct serde *serde_new(const struct serde_spec *spec, struct registry *reg, char *err,
                        size_t errlen);
void serde_free(struct serde *s);

/* The subject of ev's value (ev->topic set), rendered from the row for the
 * record strategies, into out. 0, or -1 with err (a record-name column
 * missing or NULL: the row is then a poison event like a bad topic). */
int serde_subject(const struct serde *s, const struct outbox_event *ev,
                  const struct relation *rel, const struct col_value *values, int nvalues,
                  char *out, size_t outlen, char *err, size_t errlen);

/* Encodes ev's value for subject (serde_subject()) and points ev->value at
 * the framed bytes in s's buffer (valid until the next call). A null value
 * (a tombstone) stays null. now_ms: the monotonic clock. On SERDE_WAIT the
 * reason (the registry's last failure, or "" while a first lookup runs) is
 * in err and ev is unchanged; on SERDE_MISMATCH and SERDE_FATAL too. */
enum serde_result serde_encode(struct serde *s, const char *subject, struct outbox_event *ev,
                               int64_t now_ms, char *err, size_t errlen);

/* Why an event waits for the schema of subject (why: the registry's last
 * answer, "" while a first lookup runs), written into buf (what /readyz
 * says). Returns true when there is a reason and it differs from what buf
 * held: the caller logs it then, once per reason. */
bool serde_wait_reason(char *buf, size_t len, const char *subject, const char *why);

/* The serdes of a set of outbox maps and the registry client they share:
 * by_map[i] is map i's serde, NULL for a map whose converter is string or
 * json. reg is NULL when no map has a registry converter. */
struct serde_set {
    struct registry *reg; /* owned */
    struct serde **by_map; /* owned, n entries */
    size_t n;
};

/* Frees the serdes and the registry (joins its thread); set is zeroed. */
void serde_set_free(struct serde_set *set);

#endif
