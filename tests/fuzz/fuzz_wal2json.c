/*
 * fuzz_wal2json.c - libFuzzer harness for wal2json_decode() (src/decode/wal2json.c).
 *
 * Input: 8 bytes (big-endian) taken as the XLogData dataStart, then one or
 * more wal2json lines separated by '\n' (a line of the stream carries no
 * newline of its own; JSON strings escape theirs). Every line is decoded
 * with that dataStart by one decoder, fresh for each input, so sequences
 * that change the cached layout (ALTER TABLE, an UPDATE without its TOASTed
 * column) are explored. A seed is simply a .jsonl capture behind 8 bytes.
 *
 * Each line is copied into a heap block of exactly its length (no NUL
 * after it), so ASan sees any read past its end. Checks besides "no crash,
 * no leak, no UB", from wal2json.h and decode.h:
 *   - 0: a known kind; every borrowed string and value is readable to its
 *     length (ASan checks them); a tuple has as many values as its relation
 *     has columns, only text and NULL values (wal2json has no others), and
 *     a Commit's end_lsn is the dataStart.
 *   - -1: err holds a non-empty, NUL-terminated one-line reason with no
 *     control bytes ("Control bytes from the input never reach err").
 * A broken promise aborts, which libFuzzer reports as a crash.
 *
 * Seeds: tests/fuzz/make-corpus.sh. Run: tests/fuzz/run.sh.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wal2json.h"

#define FUZZ_NAME "fuzz_wal2json"
#include "fuzz_common.h"

static void touch_str(const char *s)
{
    CHECK(s != NULL);
    touch(s, strlen(s));
}

static void check_relation(const struct relation *rel)
{
    CHECK(rel != NULL);
    CHECK(rel->relid != 0);
    touch_str(rel->nspname);
    touch_str(rel->relname);
    CHECK(rel->ncols >= 0);
    CHECK(rel->ncols == 0 || rel->cols != NULL);
    for (int i = 0; i < rel->ncols; i++) {
        touch_str(rel->cols[i].name);
        CHECK(rel->cols[i].name[0] != '\0');
    }
}

static void check_ok(lsn_t data_start, const struct repl_msg *m)
{
    switch (m->kind) {
    case RM_BEGIN:
    case RM_TRUNCATE:
        break;
    case RM_COMMIT:
        CHECK(m->u.commit.end_lsn == data_start);
        break;
    case RM_INSERT:
    case RM_UPDATE:
    case RM_DELETE:
        check_relation(m->u.tuple.rel);
        CHECK(m->u.tuple.nvalues == m->u.tuple.rel->ncols);
        CHECK(m->u.tuple.nvalues == 0 || m->u.tuple.values != NULL);
        for (int i = 0; i < m->u.tuple.nvalues; i++) {
            const struct col_value *v = &m->u.tuple.values[i];

            if (v->kind == CV_NULL) {
                CHECK(v->len == 0);
                continue;
            }
            /* CV_BINARY: a bytea column's bytes, decoded from the hex
             * wal2json prints when it sends type OIDs (wal2json.c). */
            CHECK(v->kind == CV_TEXT || v->kind == CV_BINARY);
            CHECK(v->data != NULL);
            touch(v->data, v->len);
        }
        break;
    case RM_MESSAGE:
        touch_str(m->u.message.prefix);
        CHECK(m->u.message.len == 0 || m->u.message.content != NULL);
        if (m->u.message.len) touch(m->u.message.content, m->u.message.len);
        break;
    default:
        CHECK(!"unexpected repl_msg kind from wal2json");
    }
}

static void check_err(const char *err, size_t errlen)
{
    size_t n = strnlen(err, errlen);

    CHECK(n < errlen);
    CHECK(n > 0);
    for (size_t i = 0; i < n; i++)
        CHECK((unsigned char)err[i] >= 0x20 && err[i] != 0x7f);
}

static void decode_one(struct wal2json_decoder *d, lsn_t data_start,
                       const uint8_t *data, size_t len)
{
    char *buf = malloc(len ? len : 1);
    char err[256];
    struct repl_msg m;

    CHECK(buf != NULL);
    if (len) memcpy(buf, data, len);
    memset(&m, 0, sizeof(m));
    memset(err, 0x55, sizeof(err));
    if (wal2json_decode(d, data_start, buf, len, &m, err, sizeof(err)) == 0)
        check_ok(data_start, &m);
    else
        check_err(err, sizeof(err));
    /* What the relay asks of a line the decoder refused: read in bounds,
     * an upper-case letter or nothing. */
    char action = wal2json_line_action(buf, len);
    CHECK(action == '\0' || (action >= 'A' && action <= 'Z'));
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wal2json_decoder *d;
    lsn_t data_start = 0;

    if (size < 8) return 0;
    for (int i = 0; i < 8; i++) data_start = data_start << 8 | data[i];
    data += 8;
    size -= 8;
    d = wal2json_decoder_new();
    CHECK(d != NULL);
    for (;;) {
        const uint8_t *nl = memchr(data, '\n', size);
        size_t n = nl ? (size_t)(nl - data) : size;

        /* A file ends with a newline: no empty line after it. */
        if (n > 0 || nl) decode_one(d, data_start, data, n);
        if (!nl) break;
        data += n + 1;
        size -= n + 1;
    }
    wal2json_decoder_free(d);
    return 0;
}
