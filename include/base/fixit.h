/*
 * fixit.h - the fix-it advice outboxd gives for a set-up it cannot run
 * with, in one place so that `outboxd check` and the daemon say the same:
 * the statement or command that mends it. Each function formats into out
 * (truncated to outlen) and returns out; names are passed as the caller
 * wants them shown (check quotes identifiers where SQL needs it). Pure.
 */
#ifndef OUTBOXD_FIXIT_H
#define OUTBOXD_FIXIT_H

#include <stddef.h>

/* "create it with CREATE PUBLICATION pub FOR TABLE table WITH (publish =
 * 'insert') (see sql/outbox.sql)": the publication does not exist. */
char *fixit_create_publication(char *out, size_t outlen, const char *pub,
                               const char *table);

/* "ALTER PUBLICATION pub SET (publish = 'insert')": it does not publish
 * inserts. */
char *fixit_publish_inserts(char *out, size_t outlen, const char *pub);

/* "ALTER PUBLICATION pub ADD TABLE table": the table is not in it. */
char *fixit_add_table(char *out, size_t outlen, const char *pub, const char *table);

/* "create it with SELECT pg_create_logical_replication_slot('slot',
 * 'plugin')": the slot does not exist and outboxd may not create it. */
char *fixit_create_slot(char *out, size_t outlen, const char *slot, const char *plugin);

/* "Debian: apt-get install postgresql-<major>-<plugin>": the output
 * plugin's library is missing on the server (SQLSTATE 58P01). */
char *fixit_install_plugin(char *out, size_t outlen, const char *plugin, int server_major);

/* "run ALTER SYSTEM SET output_plugin_libraries = pgoutput, wal2json (an
 * unquoted list), then reload the configuration": the server's
 * output_plugin_libraries does not list the plugin. A static string. */
const char *fixit_allow_plugin(void);

#endif
