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

bool slotcmd_failover_at_create(int want, bool standby)
{
    return want == 1 && !standby;
}

enum slotcmd_failover_action slotcmd_failover_action(bool want, bool has, int server_major)
{
    if (server_major < SLOTCMD_FAILOVER_MAJOR || want == has) return SLOT_FAILOVER_KEEP;
    return want ? SLOT_FAILOVER_ENABLE : SLOT_FAILOVER_LEFT_ON;
}

struct slotcmd_lost slotcmd_lost_cause(const char *reason)
{
    static const struct slotcmd_lost causes[] = {
        {"wal_removed",
         "the server removed WAL it still needed (the slot held more than "
         "max_slot_wal_keep_size)",
         "raise max_slot_wal_keep_size (or set it to -1) so that it covers the WAL written "
         "while outboxd may be stopped"},
        {"idle_timeout",
         "nothing read it for longer than the server's idle_replication_slot_timeout "
         "(PostgreSQL 18): outboxd was stopped, or could not connect, for that long",
         "set idle_replication_slot_timeout longer than the longest stop of outboxd, or to 0 "
         "(ALTER SYSTEM SET idle_replication_slot_timeout = 0; SELECT pg_reload_conf()), and "
         "[postgres] planned_downtime to that stop (outboxd check compares them)"},
        {"rows_removed",
         "on a standby, the primary vacuumed rows the slot still needed (a conflict with "
         "recovery)",
         "on the standby, hot_standby_feedback = on with a physical slot on the primary "
         "(primary_slot_name)"},
        {"wal_level_insufficient",
         "wal_level was lowered below logical on the primary",
         "keep wal_level = logical on the primary"},
    };
    for (size_t i = 0; reason && i < sizeof(causes) / sizeof(causes[0]); i++)
        if (strcmp(reason, causes[i].label) == 0) return causes[i];
    if (reason && *reason)
        return (struct slotcmd_lost){reason, "a cause this version of outboxd does not know",
                                     NULL};
    return (struct slotcmd_lost){
        "unknown",
        "the server removed WAL it still needed (before PostgreSQL 17 the server does not "
        "say why; max_slot_wal_keep_size is the usual cause)",
        "raise max_slot_wal_keep_size (or set it to -1)"};
}
