/*
 * fuzz_pgoutput.c - libFuzzer harness for pgoutput_decode() (src/decode/pgoutput.c).
 *
 * Input: a sequence of pgoutput messages, each framed as
 *
 *     Int32 (big-endian) length, Byte(length) message
 *
 * A length larger than what is left takes the rest of the input, so any
 * byte string is a valid input (a lone unframed message loses its first
 * four bytes to the length). Every input gets a fresh decoder that has
 * already decoded a valid Relation message for the outbox layout of
 * sql/outbox.sql (relid 16384, as in tests/data/pgoutput/), so an Insert
 * needs no Relation in front of it; the framing lets sequences such as
 * Relation -> Insert -> Relation (ALTER TABLE) -> Insert be explored.
 *
 * Each message is copied into a heap block of exactly its length, so ASan
 * sees any read past its end. Besides "no crash, no leak, no UB", the
 * harness checks what pgoutput.h and decode.h promise:
 *   - 0: the repl_msg is consistent - borrowed pointers lie inside the
 *     message, strings are NUL-terminated there, a tuple has as many values
 *     as its relation has columns, a Relation is the one now cached;
 *     every byte the message borrows is read (ASan checks them).
 *   - -1: err holds a non-empty, NUL-terminated reason of one line, and a
 *     failed message did not change the cached outbox relation.
 * A broken promise aborts, which libFuzzer reports as a crash.
 *
 * Seeds: tests/fuzz/make-corpus.sh. Run: tests/fuzz/run.sh.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgoutput.h"

#define OUTBOX_RELID 16384u

/* The Relation message of public.outbox_events from
 * tests/data/pgoutput/outboxd_pub.hex (line 2). */
static const unsigned char outbox_relation[] = {
    'R', 0x00, 0x00, 0x40, 0x00, 'p', 'u', 'b', 'l', 'i', 'c', 0x00,
    'o', 'u', 't', 'b', 'o', 'x', '_', 'e', 'v', 'e', 'n', 't', 's', 0x00,
    'd', 0x00, 0x07,
    0x01, 'e', 'v', 'e', 'n', 't', '_', 'i', 'd', 0x00,
    0x00, 0x00, 0x0b, 0x86, 0xff, 0xff, 0xff, 0xff,
    0x00, 'a', 'g', 'g', 'r', 'e', 'g', 'a', 't', 'e', '_', 't', 'y', 'p', 'e', 0x00,
    0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff,
    0x00, 'a', 'g', 'g', 'r', 'e', 'g', 'a', 't', 'e', '_', 'i', 'd', 0x00,
    0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff,
    0x00, 'a', 'g', 'g', 'r', 'e', 'g', 'a', 't', 'e', '_', 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x00,
    0x00, 0x00, 0x00, 0x14, 0xff, 0xff, 0xff, 0xff,
    0x00, 'e', 'v', 'e', 'n', 't', '_', 't', 'y', 'p', 'e', 0x00,
    0x00, 0x00, 0x00, 0x19, 0xff, 0xff, 0xff, 0xff,
    0x00, 'p', 'a', 'y', 'l', 'o', 'a', 'd', 0x00,
    0x00, 0x00, 0x0e, 0xda, 0xff, 0xff, 0xff, 0xff,
    0x00, 'c', 'r', 'e', 'a', 't', 'e', 'd', '_', 'a', 't', 0x00,
    0x00, 0x00, 0x04, 0xa0, 0xff, 0xff, 0xff, 0xff,
};

#define FUZZ_NAME "fuzz_pgoutput"
#include "fuzz_common.h"

/* p[0..n) lies inside buf[0..len). */
static int inside(const char *buf, size_t len, const char *p, size_t n)
{
    uintptr_t b = (uintptr_t)buf, q = (uintptr_t)p;

    return q >= b && q <= b + len && n <= b + len - q;
}

/* A NUL-terminated string borrowed from buf[0..len). */
static void check_str(const char *buf, size_t len, const char *s)
{
    CHECK(s != NULL);
    CHECK(inside(buf, len, s, 1));
    CHECK(memchr(s, '\0', (size_t)(buf + len - s)) != NULL);
    touch(s, strlen(s));
}

static void check_relation(const struct relation *rel)
{
    CHECK(rel != NULL);
    CHECK(rel->nspname != NULL && rel->relname != NULL);
    touch(rel->nspname, strlen(rel->nspname));
    touch(rel->relname, strlen(rel->relname));
    CHECK(rel->ncols >= 0);
    CHECK(rel->ncols == 0 || rel->cols != NULL);
    for (int i = 0; i < rel->ncols; i++) {
        CHECK(rel->cols[i].name != NULL);
        touch(rel->cols[i].name, strlen(rel->cols[i].name));
    }
}

static void check_ok(struct pgoutput_decoder *d, const char *buf, size_t len,
                     const struct repl_msg *m)
{
    switch (m->kind) {
    case RM_BEGIN:
    case RM_COMMIT:
    case RM_TRUNCATE:
        CHECK(m->kind != RM_TRUNCATE || m->u.truncate.nrelids >= 0);
        break;
    case RM_ORIGIN:
        check_str(buf, len, m->u.origin.name);
        break;
    case RM_TYPE:
        check_str(buf, len, m->u.type.nspname);
        check_str(buf, len, m->u.type.name);
        break;
    case RM_RELATION:
        check_relation(m->u.relation.rel);
        CHECK(pgoutput_relation(d, m->u.relation.rel->relid) == m->u.relation.rel);
        break;
    case RM_INSERT:
    case RM_UPDATE:
    case RM_DELETE:
        check_relation(m->u.tuple.rel);
        CHECK(pgoutput_relation(d, m->u.tuple.rel->relid) == m->u.tuple.rel);
        CHECK(m->u.tuple.nvalues == m->u.tuple.rel->ncols);
        CHECK(m->u.tuple.nvalues == 0 || m->u.tuple.values != NULL);
        for (int i = 0; i < m->u.tuple.nvalues; i++) {
            const struct col_value *v = &m->u.tuple.values[i];

            switch (v->kind) {
            case CV_NULL:
            case CV_UNCHANGED:
                CHECK(v->len == 0);
                break;
            case CV_TEXT:
            case CV_BINARY:
                CHECK(v->len == 0 || v->data != NULL);
                if (v->len) {
                    CHECK(inside(buf, len, v->data, v->len));
                    touch(v->data, v->len);
                }
                break;
            default:
                CHECK(!"unknown col_kind");
            }
        }
        break;
    case RM_MESSAGE:
        check_str(buf, len, m->u.message.prefix);
        if (m->u.message.len) {
            CHECK(inside(buf, len, m->u.message.content, m->u.message.len));
            touch(m->u.message.content, m->u.message.len);
        }
        break;
    default:
        CHECK(!"unknown repl_msg kind");
    }
}

static void check_err(const char *err, size_t errlen)
{
    size_t n = strnlen(err, errlen);

    CHECK(n < errlen);  /* NUL-terminated */
    CHECK(n > 0);       /* says something */
    CHECK(memchr(err, '\n', n) == NULL && memchr(err, '\r', n) == NULL);
}

/* Decodes one message from a heap copy of exactly its length. */
static void decode_one(struct pgoutput_decoder *d, const uint8_t *data, size_t len)
{
    char *buf = malloc(len ? len : 1);
    char err[256];
    struct repl_msg m;
    const struct relation *before = pgoutput_relation(d, OUTBOX_RELID);
    int ncols_before = before ? before->ncols : -1;

    CHECK(buf != NULL);
    if (len) memcpy(buf, data, len);
    memset(&m, 0, sizeof(m));
    memset(err, 0x55, sizeof(err)); /* no NUL unless the decoder writes one */
    if (pgoutput_decode(d, buf, len, &m, err, sizeof(err)) == 0) {
        check_ok(d, buf, len, &m);
    } else {
        check_err(err, sizeof(err));
        CHECK(pgoutput_relation(d, OUTBOX_RELID) == before);
        if (before) CHECK(before->ncols == ncols_before);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pgoutput_decoder *d = pgoutput_decoder_new();
    struct repl_msg m;
    char err[256];

    CHECK(d != NULL);
    if (pgoutput_decode(d, (const char *)outbox_relation, sizeof(outbox_relation),
                        &m, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_pgoutput: the built-in Relation failed: %s\n", err);
        abort();
    }
    CHECK(m.kind == RM_RELATION && m.u.relation.rel->ncols == 7);

    while (size > 0) {
        size_t n;

        if (size < 4) { /* too short for a length: one message */
            decode_one(d, data, size);
            break;
        }
        n = (size_t)data[0] << 24 | (size_t)data[1] << 16 | (size_t)data[2] << 8 |
            (size_t)data[3];
        data += 4;
        size -= 4;
        if (n > size) n = size;
        decode_one(d, data, n);
        data += n;
        size -= n;
    }
    pgoutput_decoder_free(d);
    return 0;
}
