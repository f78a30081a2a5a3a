/*
 * fixit.c - fix-it advice shared by `outboxd check` and the daemon (see
 * fixit.h).
 */
#include "fixit.h"

#include <stdio.h>

char *fixit_create_publication(char *out, size_t outlen, const char *pub, const char *table)
{
    snprintf(out, outlen,
             "create it with CREATE PUBLICATION %s FOR TABLE %s WITH (publish = 'insert') "
             "(see sql/outbox.sql)",
             pub, table);
    return out;
}

char *fixit_publish_inserts(char *out, size_t outlen, const char *pub)
{
    snprintf(out, outlen, "ALTER PUBLICATION %s SET (publish = 'insert')", pub);
    return out;
}

char *fixit_add_table(char *out, size_t outlen, const char *pub, const char *table)
{
    snprintf(out, outlen, "ALTER PUBLICATION %s ADD TABLE %s", pub, table);
    return out;
}

char *fixit_create_slot(char *out, size_t outlen, const char *slot, const char *plugin)
{
    snprintf(out, outlen,
             "create it with SELECT pg_create_logical_replication_slot('%s', '%s')", slot,
             plugin);
    return out;
}

char *fixit_install_plugin(char *out, size_t outlen, const char *plugin, int server_major)
{
    snprintf(out, outlen, "Debian: apt-get install postgresql-%d-%s", server_major, plugin);
    return out;
}

const char *fixit_allow_plugin(void)
{
    return "run ALTER SYSTEM SET output_plugin_libraries = pgoutput, wal2json (an unquoted "
           "list), then reload the configuration";
}
