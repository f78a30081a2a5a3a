/*
 * decoder.c - one decode call for whichever output plugin the slot uses.
 */
#include "decoder.h"

#include <stdlib.h>
#include <string.h>

#include "pgoutput.h"
#include "wal2json.h"

bool plugin_listed(const char *list, const char *plugin)
{
    size_t plen = strlen(plugin);
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '"') p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ' && *e != '"') e++;
        if (e > p && (size_t)(e - p) == plen && strncmp(p, plugin, plen) == 0) return true;
        p = e;
    }
    return false;
}

struct decoder {
    enum plugin_kind plugin;
    struct pgoutput_decoder *pg;
    struct wal2json_decoder *wj;
};

struct decoder *decoder_new(enum plugin_kind plugin)
{
    struct decoder *d = calloc(1, sizeof(*d));
    if (!d) return NULL;
    d->plugin = plugin;
    if (plugin == PLUGIN_PGOUTPUT)
        d->pg = pgoutput_decoder_new();
    else
        d->wj = wal2json_decoder_new();
    if (!d->pg && !d->wj) {
        free(d);
        return NULL;
    }
    return d;
}

void decoder_free(struct decoder *d)
{
    if (!d) return;
    pgoutput_decoder_free(d->pg);
    wal2json_decoder_free(d->wj);
    free(d);
}

int decoder_decode(struct decoder *d, lsn_t data_start, const char *buf, size_t len,
                   struct repl_msg *out, char *err, size_t errlen)
{
    if (d->plugin == PLUGIN_PGOUTPUT) return pgoutput_decode(d->pg, buf, len, out, err, errlen);
    return wal2json_decode(d->wj, data_start, buf, len, out, err, errlen);
}

enum decode_failure decoder_failure(const struct decoder *d, const char *buf, size_t len)
{
    if (d->plugin != PLUGIN_WAL2JSON) return DF_STREAM;
    char action = wal2json_line_action(buf, len);
    return action && strchr("IUDTM", action) ? DF_CHANGE : DF_STREAM;
}
