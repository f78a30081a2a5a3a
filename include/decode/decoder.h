/*
 * decoder.h - the plugin-independent decoder the relay uses: one call per
 * XLogData payload, whichever output plugin produced it. The relay never
 * knows which plugin is in use beyond choosing it here and in
 * stream_start().
 */
#ifndef OUTBOXD_DECODER_H
#define OUTBOXD_DECODER_H

#include <stdbool.h>
#include <stddef.h>

#include "decode.h"
#include "settings.h" /* enum plugin_kind, plugin_name() */

/* True when list, the value of a server's output_plugin_libraries setting
 * (comma-separated names, e.g. "pgoutput, test_decoding"), names plugin. */
bool plugin_listed(const char *list, const char *plugin);

struct decoder;

/* NULL on out of memory. Free with decoder_free(). */
struct decoder *decoder_new(enum plugin_kind plugin);
void decoder_free(struct decoder *d);

/* Decodes the payload of one XLogData frame whose dataStart is data_start.
 * Same contract as pgoutput_decode()/wal2json_decode(). */
int decoder_decode(struct decoder *d, lsn_t data_start, const char *buf, size_t len,
                   struct repl_msg *out, char *err, size_t errlen);

/* What a payload that decoder_decode() refused was, as far as the relay
 * can act on it. (The decoder's state is as it was before the call.) */
enum decode_failure {
    /* Nothing the relay can set aside: a pgoutput message (binary; one that
     * does not decode is a protocol error), or a wal2json record that
     * opens or closes a transaction, or whose action cannot be read. */
    DF_STREAM = 0,
    /* A wal2json record of one change or message ("I", "U", "D", "T",
     * "M"): one bad record of the transaction that is open, if any. */
    DF_CHANGE,
};

enum decode_failure decoder_failure(const struct decoder *d, const char *buf, size_t len);

#endif
