/*
 * main.c - command line, configuration loading and reloading (SIGHUP, see
 * signals.h); the work is done by relay_run() or poll_relay_run().
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accept.h"
#include "checks.h"
#include "config.h"
#include "inidiff.h"
#include "log.h"
#include "poll_relay.h"
#include "relay.h"
#include "signals.h"
#include "verify.h"

#ifdef OUTBOXD_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

extern char **environ;

/* Set by the first SIGTERM/SIGINT (signals.c). */
static volatile sig_atomic_t stop_requested;

/* Which allocator serves malloc(): "jemalloc 5.3.0" when the daemon is
 * linked with it (CMakeLists.txt says why), else "libc". Asking jemalloc
 * also makes sure the linker kept it. Returns out. */
static const char *allocator_name(char *out, size_t outlen)
{
#ifdef OUTBOXD_JEMALLOC
    const char *v = NULL;
    size_t len = sizeof(v);
    if (mallctl("version", (void *)&v, &len, NULL, 0) == 0 && v) {
        /* "5.3.0-0-g54eaed1d...": the release is enough */
        snprintf(out, outlen, "jemalloc %.*s", (int)strcspn(v, "-"), v);
        return out;
    }
#endif
    snprintf(out, outlen, "libc");
    return out;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd -c FILE [--set section.key=value ...]\n"
            "       outboxd verify -c FILE [--set ...] [--since TIMESTAMP] [--timeout DURATION]\n"
            "                      [--json]\n"
            "       outboxd check -c FILE [--set ...] [--config-only]\n"
            "       outboxd requeue -c FILE [--set ...] EVENT_ID...\n"
            "       outboxd accept-slot -c FILE [--set ...]\n"
            "       outboxd --help | --version\n"
            "\n"
            "Relays committed INSERTs into a PostgreSQL outbox table to Kafka through a\n"
            "logical replication slot, confirming the slot only after broker ACK; or,\n"
            "with [source] mode = polling, by claiming rows of the table with leases.\n"
            "\n"
            "  -c, --config FILE   INI configuration file\n"
            "      --set S.K=V     override one key (repeatable)\n"
            "  -h, --help          this text\n"
            "  -V, --version       print the version\n"
            "\n"
            "verify compares the outbox table with the topics and the dead-letter topic:\n"
            "events missing from Kafka, dead-lettered events, duplicates, unknown events\n"
            "and per-key order violations (outboxd verify --help for more).\n"
            "\n"
            "check validates the configuration, Postgres (connection, wal_level, slots,\n"
            "role, outbox table, publication, plugin, slot) and Kafka (broker, topics)\n"
            "before streaming, one line per check (ok, warn, FAIL with the fix, skip);\n"
            "it exits 0 when nothing failed, 1 otherwise. --config-only checks the\n"
            "configuration alone and connects to nothing.\n"
            "\n"
            "requeue ([source] mode = polling) puts QUARANTINED events back to PENDING\n"
            "with their attempts reset; it exits 0 when every one was requeued.\n"
            "\n"
            "accept-slot rewrites the offset file to the slot's confirmed position, with\n"
            "this server's identity, after outboxd refused to start because the file and\n"
            "the slot disagree (run outboxd verify first: events between the two\n"
            "positions may never have been sent); stop outboxd before. It exits 0 when\n"
            "the file was written.\n"
            "\n"
            "Every key can also be set as OUTBOXD_<SECTION>_<KEY> (dots as '_').\n"
            "Precedence: --set > environment > file > default.\n"
            "\n"
            "Signals: SIGTERM/SIGINT stop gracefully; SIGHUP re-reads the file and\n"
            "applies [log] level and format (the log names keys that need a restart);\n"
            "SIGUSR1/SIGUSR2 are ignored.\n"
            "\n"
            "Exit codes of the daemon:\n"
            "  0  stopped by SIGTERM/SIGINT after a graceful drain\n"
            "  1  fatal runtime error (systemd's Restart=on-failure restarts it)\n"
            "  2  needs an operator: bad usage or configuration, a corrupt offset file, an\n"
            "     offset file of another stream or beyond the server's WAL, a slot moved\n"
            "     past the offset file by someone else, a lost slot (the unit's\n"
            "     RestartPreventExitStatus=2 does not restart it)\n"
            "check: 0 nothing failed, 1 something failed. verify: 0 nothing missing and\n"
            "nothing out of order, 1 problems found, 2 could not run. accept-slot: 0\n"
            "written, 1 connection or write failed, 2 refused (no such slot, another\n"
            "plugin, the slot in use).\n");
}

/* Names the OUTBOXD_* variables that set nothing (see config_env_unmatched),
 * once the log format is known. */
static void warn_unmatched_env(void)
{
    char msg[1024];
    if (config_env_unmatched(environ, msg, sizeof(msg)) > 0) log_warn("%s", msg);
}

/* Loads cfg (config_init()ed by the caller) from the file at path, then
 * the environment, then the --set options of argv from index first (later
 * wins), and validates it. requeue: bare arguments are EVENT_IDs. 0, or -1
 * with err. */
static int load_config(struct config *cfg, const char *path, int argc, char **argv,
                       int first, bool requeue, char *err, size_t errlen)
{
    if (config_load_file(cfg, path, err, errlen) != 0 ||
        config_load_env(cfg, environ, err, errlen) != 0)
        return -1;
    for (int i = first; i < argc; i++) {
        /* Options with a value were checked by main(); skip the value. */
        if (verify_option_takes_value(argv[i]) || !strcmp(argv[i], "-c") ||
            !strcmp(argv[i], "--config"))
            i++;
        else if (requeue && argv[i][0] != '-')
            continue;
        else if (!strcmp(argv[i], "--set") && config_apply_set(cfg, argv[++i], err, errlen))
            return -1;
    }
    return config_validate(cfg, err, errlen);
}

/* What SIGHUP needs to load the configuration again the way main() did:
 * the same file, environment and --set options. file: the keys of the
 * file as the daemon started with it (what "needs a restart" compares
 * with); level, format: the [log] settings in force. */
struct reload_ctx {
    const char *path;
    int argc;
    char **argv;
    struct ini_pairs file;
    int level, format;
};

/* SIGHUP: loads the configuration again; when it loads, applies [log]
 * level and format and logs one line saying what was reloaded and which
 * changed keys need a restart; when it does not, logs why and keeps the
 * running one. */
static void reload_config(void *p)
{
    static const char *const live[] = {"log.level", "log.format", NULL};
    struct reload_ctx *rc = p;
    struct config fresh;
    struct ini_pairs now = {0};
    char err[1024], applied[128] = "", restart[768];
    if (config_init(&fresh) != 0) {
        log_error("SIGHUP: out of memory: keeping the running configuration");
        return;
    }
    if (load_config(&fresh, rc->path, rc->argc, rc->argv, 1, false, err, sizeof(err)) != 0 ||
        ini_pairs_read_file(rc->path, &now, err, sizeof(err)) != 0) {
        log_error("SIGHUP: the configuration no longer loads (%s): keeping the running one",
                  err);
        goto out;
    }
    if (fresh.log_level != rc->level)
        snprintf(applied, sizeof(applied), "log.level %s -> %s",
                 log_level_name((enum log_level)rc->level),
                 log_level_name((enum log_level)fresh.log_level));
    if (fresh.log_format != rc->format)
        snprintf(applied + strlen(applied), sizeof(applied) - strlen(applied),
                 "%slog.format %s -> %s", applied[0] ? ", " : "",
                 log_format_name((enum log_format)rc->format),
                 log_format_name((enum log_format)fresh.log_format));
    rc->level = fresh.log_level;
    rc->format = fresh.log_format;
    log_set_level((enum log_level)fresh.log_level);
    log_set_format((enum log_format)fresh.log_format); /* this line in the new format */
    size_t n = ini_pairs_changed(&rc->file, &now, live, restart, sizeof(restart));
    log_info("SIGHUP: reloaded %s: %s; %s%s", rc->path,
             applied[0] ? applied : "log.level and log.format unchanged",
             n ? "changed keys that need a restart to take effect: " : "no other key changed",
             n ? restart : "");
out:
    ini_pairs_free(&now);
    config_free(&fresh);
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    char err[1024];
    struct config cfg;
    int code;

    if (config_init(&cfg) != 0) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    /* First pass: options that need no configuration. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            if (argc > 1 && !strcmp(argv[1], "verify"))
                verify_usage(stdout);
            else
                usage(stdout);
            config_free(&cfg);
            return EXIT_OK;
        }
        if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version")) {
            printf("outboxd %s\n", OUTBOXD_VERSION);
            config_free(&cfg);
            return EXIT_OK;
        }
    }
    /* Second pass: the file first, then env, then --set, so later wins. */
    int first = 1;
    bool verify = argc > 1 && !strcmp(argv[1], "verify");
    struct verify_options vopt;
    verify_options_init(&vopt);
    int vr;
    bool check = argc > 1 && !strcmp(argv[1], "check");
    bool config_only = false;
    bool requeue = argc > 1 && !strcmp(argv[1], "requeue");
    bool accept = argc > 1 && !strcmp(argv[1], "accept-slot");
    char **ids = NULL;
    int nids = 0;
    if (verify || check || requeue || accept) first = 2;
    if (requeue && !(ids = calloc((size_t)argc, sizeof(*ids)))) {
        log_error("out of memory");
        config_free(&cfg);
        return EXIT_FATAL;
    }
    for (int i = first; i < argc; i++) {
        if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) && i + 1 < argc) {
            path = argv[++i];
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            i++;
        } else if (verify && (vr = verify_option(&vopt, argc, argv, &i, err, sizeof(err)))) {
            if (vr > 0) continue;
            fprintf(stderr, "outboxd verify: %s\n", err);
            verify_usage(stderr);
            config_free(&cfg);
            free(ids);
            return EXIT_USAGE;
        } else if (check && !strcmp(argv[i], "--config-only")) {
            config_only = true;
        } else if (requeue && argv[i][0] != '-') {
            ids[nids++] = argv[i];
        } else {
            fprintf(stderr, "outboxd: unknown or incomplete argument \"%s\"\n", argv[i]);
            usage(stderr);
            config_free(&cfg);
            free(ids);
            return EXIT_USAGE;
        }
    }
    if (requeue && nids == 0) {
        fprintf(stderr, "outboxd: requeue needs at least one EVENT_ID\n");
        usage(stderr);
        config_free(&cfg);
        free(ids);
        return EXIT_USAGE;
    }
    if (!path) {
        fprintf(stderr, "outboxd: -c FILE is required\n");
        usage(stderr);
        config_free(&cfg);
        free(ids);
        return EXIT_USAGE;
    }
    if (load_config(&cfg, path, argc, argv, first, requeue, err, sizeof(err)) != 0)
        goto bad_config;
    cfg.path = path;

    log_set_level((enum log_level)cfg.log_level);
    log_set_format((enum log_format)cfg.log_format);
    bool daemon = !check && !verify && !requeue && !accept;
    if (daemon && cfg.source_mode != SOURCE_POLLING) log_set_context("slot", cfg.pg_slot);
    warn_unmatched_env();
    if (check) {
        code = check_run(&cfg, false, config_only ? CHECK_SCOPE_CONFIG : CHECK_SCOPE_ALL);
        config_free(&cfg);
        return code;
    }
    if (verify) {
        code = verify_run(&cfg, &vopt);
        config_free(&cfg);
        return code;
    }
    if (accept) {
        code = cfg.source_mode == SOURCE_POLLING
                   ? (log_error("accept-slot: [source] mode = polling has no slot"), EXIT_USAGE)
                   : accept_slot_run(&cfg);
        config_free(&cfg);
        return code;
    }
    if (requeue) {
        code = poll_requeue_run(&cfg, ids, nids);
        config_free(&cfg);
        free(ids);
        return code;
    }
    struct reload_ctx rc = {.path = path, .argc = argc, .argv = argv,
                            .level = cfg.log_level, .format = cfg.log_format};
    if (ini_pairs_read_file(path, &rc.file, err, sizeof(err)) != 0)
        log_warn("%s (SIGHUP will name every key as changed)", err);
    signals_install(&stop_requested, reload_config, &rc);
    char alloc[64];
    log_info("outboxd %s starting (%s mode, allocator %s)", OUTBOXD_VERSION,
             cfg.source_mode == SOURCE_POLLING ? "polling" : "logical",
             allocator_name(alloc, sizeof(alloc)));
    code = cfg.source_mode == SOURCE_POLLING ? poll_relay_run(&cfg, &stop_requested)
                                              : relay_run(&cfg, &stop_requested);
    ini_pairs_free(&rc.file);
    config_free(&cfg);
    return code;

bad_config:
    config_free(&cfg);
    free(ids);
    warn_unmatched_env(); /* a misspelt section may be why */
    if (check) return check_config_failed(err); /* a FAIL line, exit 1 */
    log_error("configuration: %s", err);
    return EXIT_USAGE;
}
