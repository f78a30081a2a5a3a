/*
 * slotcmd.c - replication commands on slots and the failover decision (see
 * slotcmd.h).
 */
#include "slotcmd.h"

#include <stdio.h>
#include <string.h>

/* snprintf into out; -1 with err when it did not fit. */
static int fit(int n, size_t outlen, char *err, size_t errlen)
{
    if (n < 0 || (size_t)n >= outlen) {
        snprintf(err, errlen, "replication command too long");
        return -1;
    }
    return 0;
}

static int no_failover(int server_major, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen,
             "%s needs PostgreSQL %d or later; the server is PostgreSQL %d", what,
             SLOTCMD_FAILOVER_MAJOR, server_major);
    return -1;
}

int slotcmd_create(const char *slot, const char *plugin, const struct slot_create_opts *o,
                   int server_major, char *out, size_t outlen, char *err, size_t errlen)
{
    bool failover = o && o->failover, export = o && o->export_snapshot;
    if (failover && server_major < SLOTCMD_FAILOVER_MAJOR)
        return no_failover(server_major, "a failover slot", err, errlen);
    int n;
    if (server_major >= 15)
        n = snprintf(out, outlen, "CREATE_REPLICATION_SLOT %s LOGICAL %s (SNAPSHOT '%s'%s)",
                     slot, plugin, export ? "export" : "nothing",
                     failover ? ", FAILOVER true" : "");
    else /* the only syntax 14 and older know */
        n = snprintf(out, outlen, "CREATE_REPLICATION_SLOT %s LOGICAL %s %s", slot, plugin,
                     export ? "EXPORT_SNAPSHOT" : "NOEXPORT_SNAPSHOT");
    return fit(n, outlen, err, errlen);
}

int slotcmd_alter_failover(const char *slot, bool failover, int server_major, char *out,
                           size_t outlen, char *err, size_t errlen)
{
    if (server_major < SLOTCMD_FAILOVER_MAJOR)
        return no_failover(server_major, "ALTER_REPLICATION_SLOT", err, errlen);
    int n = snprintf(out, outlen, "ALTER_REPLICATION_SLOT %s (FAILOVER %s)", slot,
                     failover ? "true" : "false");
    return fit(n, outlen, err, errlen);
}

int slotcmd_failover_wanted(enum failover_mode mode, int server_major, char *err,
                            size_t errlen)
{
    bool capable = server_major >= SLOTCMD_FAILOVER_MAJOR;
    if (mode == FAILOVER_OFF) return 0;
    if (mode == FAILOVER_AUTO) return capable ? 1 : 0;
    if (capable) return 1;
    snprintf(err, errlen,
             "[postgres] failover = on, but the server is PostgreSQL %d: failover slots "
             "need PostgreSQL %d or later. Set failover = auto (on where the server has "
             "them) or off; below %d a promoted standby has no copy of the slot (see the "
             "README, Gap repair)",
             server_major, SLOTCMD_FAILOVER_MAJOR, SLOTCMD_FAILOVER_MAJOR);
    return -1;
}

enum slotcmd_failover_action slotcmd_failover_action(bool want, bool has, int server_major)
{
    if (server_major < SLOTCMD_FAILOVER_MAJOR || want == has) return SLOT_FAILOVER_KEEP;
    return want ? SLOT_FAILOVER_ENABLE : SLOT_FAILOVER_LEFT_ON;
}
