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

enum plugin_kind { PLUGIN_PGOUTPUT = 0, PLUGIN_WAL2JSON = 1 };

/* "pgoutput" or "wal2json"; -1 when unknown. */
int plugin_parse(const char *name);
const char *plugin_name(enum plugin_kind p);

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

#endif
