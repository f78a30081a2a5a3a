/*
 * accept.c - `outboxd accept-slot` (accept.h). Used after outboxd refused
 * to start because someone else moved the slot past the offset file, or
 * the file is of another stream, beyond the server's WAL, or corrupt: the
 * operator runs outboxd verify to see what is missing, then accepts the
 * slot's position as where streaming continues.
 */
#include "accept.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "exitcode.h"
#include "resume.h"
#include "stream.h"

/* What the file said before, for the report. */
static void describe_old(const char *path, char *out, size_t outlen)
{
    struct offset_state old;
    char err[1024], d[512];
    int rc = offset_read(path, &old, err, sizeof(err));
    if (rc == 0)
        snprintf(out, outlen, "absent");
    else if (rc < 0)
        snprintf(out, outlen, "unreadable (%s)", err);
    else
        snprintf(out, outlen, "%s", offset_describe(&old, d, sizeof(d)));
}

int accept_slot_run(const struct config *c)
{
    char err[1024], before[1536], now[512];
    struct stream *st = stream_connect(c->pg_conninfo, err, sizeof(err));
    if (!st) {
        log_error("%s", err);
        return EXIT_FATAL;
    }
    struct server_ident id;
    struct slot_info si;
    int code = EXIT_FATAL;
    if (stream_identify(st, &id, err, sizeof(err)) != 0 ||
        stream_slot_info(st, c->pg_slot, &si, err, sizeof(err)) != 0) {
        log_error("%s", err);
        goto out;
    }
    code = EXIT_USAGE;
    if (!si.exists) {
        log_error("replication slot \"%s\" does not exist on this server (system %s, "
                  "database %s): there is no position to accept; nothing written",
                  c->pg_slot, id.system, id.dbname);
        goto out;
    }
    if (strcmp(si.plugin, plugin_name(c->pg_plugin)) != 0 ||
        strcmp(si.database, id.dbname) != 0) {
        log_error("replication slot \"%s\" is of database %s with plugin %s, but the "
                  "configuration streams database %s with plugin %s: nothing written",
                  c->pg_slot, si.database, si.plugin, id.dbname, plugin_name(c->pg_plugin));
        goto out;
    }
    if (si.active) {
        log_error("replication slot \"%s\" is in use by process %d: stop the outboxd (or "
                  "other client) streaming it first; nothing written",
                  c->pg_slot, si.active_pid);
        goto out;
    }
    struct resume_server srv;
    resume_server_init(&srv, id.system, id.timeline, id.xlogpos, id.dbname, c->pg_slot,
                       plugin_name(c->pg_plugin));
    struct offset_state next;
    resume_identity(&srv, si.confirmed_flush, &next);
    describe_old(c->offsets_file, before, sizeof(before));
    if (offset_write(c->offsets_file, &next, err, sizeof(err)) != 0) {
        log_error("%s", err);
        code = EXIT_FATAL;
        goto out;
    }
    printf("offset file %s: was %s\n"
           "offset file %s: now %s (the slot's confirmed position)\n"
           "outboxd will stream from there; events committed before it that outboxd had "
           "not sent are not sent: outboxd verify -c %s lists what is missing from Kafka\n",
           c->offsets_file, before, c->offsets_file, offset_describe(&next, now, sizeof(now)),
           c->path ? c->path : "FILE");
    code = EXIT_OK;
out:
    stream_close(st);
    return code;
}
