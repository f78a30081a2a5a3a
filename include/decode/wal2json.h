/*
 * wal2json.h - decoder for the wal2json output plugin, format-version 2
 * (one JSON object per change), pure: bytes in, struct repl_msg out.
 *
 * outboxd starts the stream with
 *   "format-version" '2', "include-transaction" 'true', "include-lsn" 'true',
 *   "include-timestamp" 'true', "include-types" 'false',
 *   "add-tables" '<schema>.<table>[,...]', "actions" 'insert'
 * (the add-tables value built by wal2json_add_table(), quoted as a literal
 * of the replication command by pgsql_quote_literal())
 * so each XLogData payload is one line such as
 *   {"action":"B","timestamp":"2026-11-30 00:58:39.245662+00",
 *    "lsn":"0/1571240","nextlsn":"0/1571270"}
 *   {"action":"I","timestamp":"...","lsn":"0/1570EA0","schema":"public",
 *    "table":"outbox_events","columns":[{"name":"event_id","value":"f8cc..."},
 *    {"name":"aggregate_version","value":7},{"name":"payload","value":null}]}
 *   {"action":"C","timestamp":"...","lsn":"0/1571240","nextlsn":"0/1571270"}
 *
 * Values: wal2json prints text-like types (text, uuid, jsonb, timestamptz)
 * as JSON strings, which decode to exactly the text Postgres prints; numbers
 * as bare JSON numbers, which the decoder keeps as their exact source text
 * (never through a double: 1.50 stays "1.50", a 30-digit numeric stays
 * whole); booleans as true/false, which become "t"/"f" as Postgres prints
 * them; SQL NULL as null. So a row of the outbox (uuid, text, bigint,
 * jsonb, timestamptz) decodes to the same bytes pgoutput sends. Known
 * exceptions, all from wal2json itself: bytea comes without the "\x"
 * prefix, numeric/float NaN and Infinity come as null, and bytes of a
 * logical message that are not valid UTF-8 are dropped.
 *
 * B: final_lsn = "lsn" (the commit record's LSN).
 * C: commit_lsn = "lsn"; end_lsn = the XLogData dataStart of the C record,
 *    which is the end of the commit record (equal to "nextlsn").
 * I/U/D: a relation is synthesised per schema.table from the column names
 *    of the row and cached; a row with a different column list (ALTER TABLE)
 *    replaces the cached layout. Relation ids are assigned by the decoder.
 * M (logical messages) and T (truncate) decode to RM_MESSAGE/RM_TRUNCATE.
 */
#ifndef OUTBOXD_WAL2JSON_H
#define OUTBOXD_WAL2JSON_H

#include <stddef.h>

#include "decode.h"

struct wal2json_decoder;

/* NULL on out of memory. Free with wal2json_decoder_free(). */
struct wal2json_decoder *wal2json_decoder_new(void);
void wal2json_decoder_free(struct wal2json_decoder *d);

/*
 * Decodes one line. data_start is the XLogData dataStart of the frame that
 * carried it. Returns 0 and fills *out, or -1 with a one-line reason in err
 * (not JSON, truncated, unknown action, missing or mistyped field, ...).
 * Pointers in *out stay valid until the next call or until the decoder is
 * freed (the decoder owns the parsed document).
 */
int wal2json_decode(struct wal2json_decoder *d, lsn_t data_start, const char *buf,
                    size_t len, struct repl_msg *out, char *err, size_t errlen);

/*
 * The action a line claims, read off its first bytes without parsing the
 * rest: 'I' for a line starting {"action":"I" (whitespace allowed between
 * the tokens), '\0' when it does not start that way. For a line that
 * wal2json_decode() refused: wal2json writes "action" first, so a record
 * whose values are not valid UTF-8 (a SQL_ASCII database stores any
 * bytes) or that is cut short still says what it is.
 */
char wal2json_line_action(const char *buf, size_t len);

/*
 * Appends schema.table to list, the value of wal2json's "add-tables"
 * option (a comma-separated list; list NULL starts it). wal2json splits
 * the list on commas and blanks, schema from table on the first period,
 * and reads a lone '*' as every schema or table; a backslash takes the
 * next byte as it is. So every ASCII byte of the names that is not a
 * letter, digit or '_' gets a backslash: "Sales EU"."Outbox Events, v2"
 * is Sales\ EU.Outbox\ Events\,\ v2. Bytes from 0x80 up are left as they
 * are: a backslash inside a UTF-8 sequence would make the command text
 * invalid UTF-8, which the server refuses. Returns the grown list
 * (malloc'd, the caller frees it), or NULL on out of memory (list freed).
 */
char *wal2json_add_table(char *list, const char *schema, const char *table);

#endif
