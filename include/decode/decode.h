/*
 * decode.h - what a decoder hands on: struct repl_msg, one decoded
 * logical-replication message, the same whichever output plugin produced
 * it, and the relation layouts (struct relation) its rows refer to.
 *
 * Both decoders fill it: pgoutput.c (pgoutput_decode) and wal2json.c
 * (wal2json_decode, format-version 2), behind the plugin-independent
 * decoder_decode() of decoder.h that the relay calls; relcache.h caches the
 * relations. The outbox mapper (outbox.h) reads an RM_INSERT's tuple and
 * relation to build the Kafka event; beyond decoder.h nothing downstream
 * knows which plugin is in use. Only the fields a plugin sends are set:
 * wal2json sends no Origin, Relation or Type messages (its layouts are
 * read off each row), no replica identity and no typmod.
 *
 * Lifetime: a repl_msg borrows. String and value pointers point either into
 * the input buffer given to the decoder or into memory owned by the decoder
 * (relation cache, scratch arrays; wal2json: always the decoder's, never
 * the input). They stay valid until the next decode call on the same
 * decoder or until the input buffer is released, whichever comes first.
 * Relations stay valid until the decoder is freed or the relation is
 * redefined (pgoutput: a Relation message for the same relid; wal2json: a
 * row of the same table with another column list). Callers keep no
 * relation pointer across decode calls.
 */
#ifndef OUTBOXD_DECODE_H
#define OUTBOXD_DECODE_H

#include <stdint.h>

#include "lsn.h"

enum repl_msg_kind {
    RM_BEGIN = 1,
    RM_COMMIT,
    RM_ORIGIN,
    RM_RELATION,
    RM_TYPE,
    RM_INSERT,
    RM_UPDATE,
    RM_DELETE,
    RM_TRUNCATE,
    RM_MESSAGE,
};

/* Kind of one column value in a tuple (pgoutput's TupleData markers). */
enum col_kind {
    CV_NULL = 'n',      /* SQL NULL */
    CV_UNCHANGED = 'u', /* unchanged TOASTed value, not sent */
    CV_TEXT = 't',      /* text output of the type, data/len set */
    CV_BINARY = 'b',    /* binary send format, data/len set (wal2json.c: a bytea
                         * column's bytes, decoded from wal2json's hex) */
};

struct col_value {
    enum col_kind kind;
    uint32_t len;     /* bytes at data; 0 for NULL/UNCHANGED */
    const char *data; /* NOT NUL-terminated; borrowed */
};

struct rel_column {
    char *name;     /* NUL-terminated, owned by the relation */
    uint32_t typid; /* type OID */
    int32_t typmod;
    uint8_t flags; /* 1 = part of the replica identity key */
};

struct relation {
    /* Unique for the process lifetime (never reused, whichever decoder made
     * the relation): a cache keyed on it can never mistake one layout of a
     * table for another, even if the struct's memory is reused. */
    uint64_t layout_id;
    uint32_t relid;
    char *nspname; /* schema; owned */
    char *relname; /* table; owned */
    char replident;
    int ncols;
    struct rel_column *cols; /* ncols entries; owned */
};

struct repl_msg {
    enum repl_msg_kind kind;
    union {
        struct {
            lsn_t final_lsn;     /* LSN of the commit record */
            int64_t commit_time; /* microseconds since 2000-01-01 UTC */
            uint32_t xid;
        } begin;
        struct {
            uint8_t flags;
            lsn_t commit_lsn; /* LSN of the commit record */
            lsn_t end_lsn;    /* end of the commit record: the flush position */
            int64_t commit_time;
        } commit;
        struct {
            lsn_t commit_lsn;
            const char *name; /* NUL-terminated, borrowed */
        } origin;
        struct {
            const struct relation *rel; /* the new cached layout */
        } relation;
        struct {
            uint32_t oid;
            const char *nspname; /* borrowed */
            const char *name;    /* borrowed */
        } type;
        /* RM_INSERT: new tuple. RM_UPDATE: new tuple (old not exposed).
         * RM_DELETE: key/old tuple. */
        struct {
            const struct relation *rel;
            int nvalues;                   /* == number of columns sent */
            const struct col_value *values; /* decoder-owned scratch */
        } tuple;
        struct {
            int nrelids;
            uint8_t options;
        } truncate;
        struct {
            uint8_t flags; /* 1 = transactional */
            lsn_t lsn;
            const char *prefix; /* NUL-terminated, borrowed */
            uint32_t len;
            const char *content; /* borrowed */
        } message;
    } u;
};

#endif
