/*
 * main.c - the outboxd executable: the command line and what it starts.
 *
 *   outboxd [options]            the daemon: relay_run() (relay.h) when
 *                                [source] mode = logical, poll_relay_run()
 *                                (pollrelay.h) when mode = polling
 *   outboxd check                check_run() (check.h)
 *   outboxd verify               verify_run() (verify.h)
 *   outboxd requeue EVENT_ID...  poll_requeue_run() (requeue.h)
 *   outboxd accept-slot          accept_slot_run() (accept.h)
 *   outboxd repair               repair_run() (repair.h); the daemon runs
 *                                it first when [postgres] on_slot_loss =
 *                                repair, and again when the slot is lost
 *   outboxd republish            republish_run() (republish.h)
 *   outboxd config               prints the effective configuration
 *                                (confdoc.h); --example, --doc-table
 *
 * main() parses the command line in two passes (the options that need no
 * configuration first: --help, --version, config --example/--doc-table),
 * loads the configuration (the file, then OUTBOXD_<SECTION>_<KEY>
 * variables, then --set, then the secret files; config.h) and validates
 * it, applies [log], and runs the subcommand or the daemon. The daemon
 * installs the signal handlers (signals.h): SIGTERM/SIGINT set the stop
 * flag the relay polls; SIGHUP loads the configuration again the same way
 * and applies [log] level and format (reload_config). The exit code is the
 * run function's (exitcode.h); a bad command line or configuration exits
 * EXIT_USAGE here.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "accept.h"
#include "check.h"
#include "confdoc.h"
#include "config.h"
#include "config_outbox.h"
#include "exitcode.h"
#include "inidiff.h"
#include "kafkaconf.h"
#include "log.h"
#include "pgconn.h"
#include "pollrelay.h"
#include "relay.h"
#include "repair.h"
#include "republish.h"
#include "requeue.h"
#include "secrets.h"
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

/* ---- usage: one function per subcommand ---------------------------------- */

/* Options every subcommand takes. */
static void common_options(FILE *out)
{
    fprintf(out,
            "  -c, --config FILE   INI configuration file (optional when everything comes\n"
            "                      from OUTBOXD_<SECTION>_<KEY> environment variables)\n"
            "      --set S.K=V     override one key (repeatable; visible in ps: keep\n"
            "                      passwords in password_file, see the README)\n"
            "  -h, --help          this text\n");
}

/* The exit codes, the same in every subcommand (README, Exit codes). */
static void exit_codes(FILE *out)
{
    fprintf(out,
            "\n"
            "Exit codes (the same meaning in every subcommand):\n"
            "  0  success: stopped after a graceful drain (daemon), nothing failed\n"
            "     (check), nothing wrong (verify), done (requeue, accept-slot, repair,\n"
            "     republish, config)\n"
            "  1  failed at run time or found problems: a fatal runtime error (daemon;\n"
            "     systemd's Restart=on-failure restarts it), a check FAILed (check),\n"
            "     problems found (verify), an event not requeued (requeue), the\n"
            "     connection or the write failed (accept-slot, repair), an event not\n"
            "     ACKed or not found (republish)\n"
            "  2  needs an operator: bad usage or configuration (every subcommand), a\n"
            "     state only an operator can resolve (the daemon's offset file and slot,\n"
            "     accept-slot's refusals; RestartPreventExitStatus=2 keeps it down)\n");
}

static void daemon_usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd [-c FILE] [--set section.key=value ...]\n"
            "       outboxd check [-c FILE] [--set ...] [--config-only]\n"
            "       outboxd verify [-c FILE] [--set ...] [--since TIMESTAMP]\n"
            "                      [--timeout DURATION] [--isolation LEVEL] [--json]\n"
            "       outboxd requeue [-c FILE] [--set ...] EVENT_ID...\n"
            "       outboxd accept-slot [-c FILE] [--set ...]\n"
            "       outboxd repair [-c FILE] [--set ...] [--since TIMESTAMP]\n"
            "       outboxd republish [-c FILE] [--set ...] [--event-id ID,...]\n"
            "                         [--aggregate TYPE:ID] [--since TS [--until TS]]\n"
            "                         [--outbox NAME] [--dry-run]\n"
            "       outboxd config [-c FILE] [--set ...] [--example]\n"
            "       outboxd [SUBCOMMAND] --help | outboxd --version\n"
            "\n"
            "Relays committed INSERTs into a PostgreSQL outbox table to Kafka through a\n"
            "logical replication slot, confirming the slot only after broker ACK; or,\n"
            "with [source] mode = polling, by claiming rows of the table with leases.\n"
            "`outboxd SUBCOMMAND --help` describes each subcommand.\n"
            "\n");
    common_options(out);
    fprintf(out,
            "  -V, --version       print the version\n"
            "\n"
            "Every key can also be set as OUTBOXD_<SECTION>_<KEY> (dots as '_').\n"
            "Precedence: --set > environment > file > default. Durations take a unit\n"
            "(500ms, 5s, 2m, 1h, 7d); the *_ms keys also a bare number of milliseconds.\n"
            "\n"
            "Signals: SIGTERM/SIGINT stop gracefully; SIGHUP re-reads the file and\n"
            "applies [log] level and format (the log names keys that need a restart);\n"
            "SIGUSR1/SIGUSR2 are ignored.\n");
    exit_codes(out);
}

static void check_usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd check [-c FILE] [--set section.key=value ...] [--config-only]\n"
            "\n"
            "Validates the configuration, Postgres (connection, wal_level, slots, role,\n"
            "outbox table, publication, plugin, slot) and Kafka (broker, topics) before\n"
            "streaming, one line per check (ok, warn, FAIL with the fix, skip).\n"
            "\n");
    common_options(out);
    fprintf(out, "      --config-only   check the configuration alone; connect to nothing\n"
                 "\n"
                 "Exits 0 when nothing failed, 1 when a check failed, 2 when the\n"
                 "configuration did (see below).\n");
    exit_codes(out);
}

static void verify_usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd verify [-c FILE] [--set section.key=value ...]\n"
            "                      [--since TIMESTAMP] [--timeout DURATION]\n"
            "                      [--isolation LEVEL] [--json]\n"
            "\n"
            "Compares the outbox table with the topics its rows route to and with the\n"
            "dead-letter topic ([errors] dlq_topic): events missing from Kafka, events\n"
            "dead-lettered instead of delivered, duplicates, unknown messages and per-key\n"
            "order violations.\n"
            "\n");
    common_options(out);
    verify_options_usage(out);
    fprintf(out, "\n"
                 "Exits 0 when nothing is missing and nothing is out of order (dead-lettered\n"
                 "events, duplicates and unknown messages are reported, not failed), 1 when\n"
                 "events are missing or out of order, 2 when it could not run (see below:\n"
                 "also Postgres or the broker unreachable, or the topics not read within\n"
                 "--timeout).\n");
    exit_codes(out);
}

static void requeue_usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd requeue [-c FILE] [--set section.key=value ...] EVENT_ID...\n"
            "\n"
            "[source] mode = polling: puts QUARANTINED events back to PENDING with their\n"
            "attempts reset.\n"
            "\n");
    common_options(out);
    fprintf(out, "\nExits 0 when every one was requeued.\n");
    exit_codes(out);
}

static void accept_slot_usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd accept-slot [-c FILE] [--set section.key=value ...]\n"
            "\n"
            "Rewrites the offset file to the slot's confirmed position, with this\n"
            "server's identity, after outboxd refused to start because the file and\n"
            "the slot disagree (run outboxd verify first: events between the two\n"
            "positions may never have been sent); stop outboxd before.\n"
            "\n");
    common_options(out);
    fprintf(out, "\nExits 0 when the file was written, 1 when the connection or the write\n"
                 "failed, 2 when it refused (no such slot, another plugin, the slot in use).\n");
    exit_codes(out);
}

static void repair_usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd repair [-c FILE] [--set section.key=value ...]\n"
            "                      [--since TIMESTAMP]\n"
            "\n"
            "After the replication slot was dropped, invalidated (wal_status = lost) or\n"
            "left behind by a failover: creates the slot again with an exported\n"
            "snapshot, re-publishes from the outbox table every row committed since the\n"
            "last ACKed transaction (the offset file's commit time, less [outbox]\n"
            "repair_margin; by pg_xact_commit_timestamp() when track_commit_timestamp\n"
            "is on, else by [outbox] repair_column; a transaction's rows in insert order\n"
            "by [outbox] order_column), waits for every ACK, and writes\n"
            "the offset file at the new slot's consistent point. Stop outboxd before.\n"
            "Rows the application already deleted cannot be re-published.\n"
            "\n");
    common_options(out);
    fprintf(out,
            "      --since TIMESTAMP  re-publish from this time instead of the offset\n"
            "                         file's (still less repair_margin)\n"
            "\nExits 0 when repaired (or the slot needs no repair), 1 when a connection,\n"
            "a statement or a delivery failed (the new slot is dropped again, the offset\n"
            "file unchanged: run it again), 2 when it refused (the slot in use, no\n"
            "commit time known and no --since, no way to tell commit order).\n");
    exit_codes(out);
}

static void republish_usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd republish [-c FILE] [--set section.key=value ...]\n"
            "                         [--event-id ID[,ID...]]... [--aggregate TYPE:ID]\n"
            "                         [--since TIMESTAMP [--until TIMESTAMP]]\n"
            "                         [--outbox NAME] [--dry-run]\n"
            "\n"
            "Sends outbox rows to Kafka again, for consumers that lost events: the rows\n"
            "that match every selection given, read from the outbox table in commit\n"
            "order (by aggregate_version for one aggregate), mapped and produced as the\n"
            "relay does ([outbox], [kafka], [errors] policy), then waits for every ACK.\n"
            "The replication slot and the offset file are not touched: the daemon may\n"
            "run meanwhile. Consumers get copies: they de-duplicate by event_id. Under\n"
            "[delivery] mode = exactly_once the copies are produced outside Kafka\n"
            "transactions. Rows the application deleted cannot be republished.\n"
            "\n");
    common_options(out);
    fprintf(out,
            "      --event-id ID     these events (repeatable, or comma-separated)\n"
            "      --aggregate TYPE:ID  one aggregate's events (or --aggregate-type TYPE\n"
            "                        --aggregate-id ID)\n"
            "      --since TIMESTAMP rows whose [outbox] repair_column is at or after it\n"
            "      --until TIMESTAMP ... and before it (PostgreSQL's timestamptz syntax,\n"
            "                        e.g. '2026-12-03 16:00+00')\n"
            "      --outbox NAME     the table of [outbox.NAME] (needed when there are\n"
            "                        several outbox sections)\n"
            "      --dry-run         list what would be sent; send nothing\n"
            "\nExits 0 when every selected event was ACKed by Kafka, 1 when one was not\n"
            "(a delivery failed or timed out, a row cannot be published under [errors]\n"
            "policy = halt), an event id was not found or nothing matched (said why:\n"
            "rows deleted after insert), or a connection failed; 2 for bad arguments.\n");
    exit_codes(out);
}

static void config_usage(FILE *out)
{
    fprintf(out,
            "usage: outboxd config [-c FILE] [--set section.key=value ...]\n"
            "       outboxd config --example | --doc-table logical|polling\n"
            "\n"
            "Prints the effective configuration, every key with where its value came\n"
            "from (default, file, environment, --set, secret file); passwords and other\n"
            "secrets are masked.\n"
            "\n");
    common_options(out);
    fprintf(out, "      --example       print the sample configuration (every key, its\n"
                 "                      default and meaning; deploy/outboxd.ini.example)\n"
                 "      --doc-table W   print the README's key table (logical or polling)\n"
                 "\n"
                 "Exits 0 when the configuration is valid, 2 when it is not (the keys are\n"
                 "printed first).\n");
    exit_codes(out);
}

/* ---- subcommands ---------------------------------------------------------- */

enum command {
    CMD_DAEMON, CMD_CHECK, CMD_VERIFY, CMD_REQUEUE, CMD_ACCEPT, CMD_REPAIR, CMD_REPUBLISH,
    CMD_CONFIG
};

static const struct {
    const char *name;
    enum command cmd;
    void (*usage)(FILE *out);
} commands[] = {
    {"check", CMD_CHECK, check_usage},
    {"verify", CMD_VERIFY, verify_usage},
    {"requeue", CMD_REQUEUE, requeue_usage},
    {"accept-slot", CMD_ACCEPT, accept_slot_usage},
    {"repair", CMD_REPAIR, repair_usage},
    {"republish", CMD_REPUBLISH, republish_usage},
    {"config", CMD_CONFIG, config_usage},
};

/* The subcommand argv[1] names (CMD_DAEMON for none), its usage in *usage. */
static enum command command_of(int argc, char **argv, void (**usage)(FILE *))
{
    *usage = daemon_usage;
    if (argc < 2) return CMD_DAEMON;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name)) {
            *usage = commands[i].usage;
            return commands[i].cmd;
        }
    return CMD_DAEMON;
}

/* Names the OUTBOXD_* variables that set nothing (see config_env_unmatched),
 * once the log format is known. */
static void warn_unmatched_env(void)
{
    char msg[1024];
    if (config_env_unmatched(environ, msg, sizeof(msg)) > 0) log_warn("%s", msg);
}

/* Warns (once the log format is known) about secrets others can read: a
 * config file holding a password, a secret file readable by its group or
 * others, a secret given with --set (visible in ps). */
static void warn_exposed_secrets(const struct config *c)
{
    char msg[1024];
    if (c->path && config_file_holds_secret(c) &&
        secret_file_exposed(c->path, "a secret (a password in [postgres] conninfo, a "
                                     "[kafka] secret property or credentials in [registry] "
                                     "url)",
                            msg, sizeof(msg)) == 1)
        log_warn("%s; or move the password to password_file", msg);
    if (c->pg_password_file &&
        secret_file_exposed(c->pg_password_file, "the Postgres password ([postgres] "
                                                 "password_file)",
                            msg, sizeof(msg)) == 1)
        log_warn("%s", msg);
    if (c->kafka_sasl_password_file &&
        secret_file_exposed(c->kafka_sasl_password_file,
                            "the SASL password ([kafka] sasl.password_file)", msg,
                            sizeof(msg)) == 1)
        log_warn("%s", msg);
    if (c->kafka_oidc_secret_file &&
        secret_file_exposed(c->kafka_oidc_secret_file,
                            "the OIDC client secret ([kafka] "
                            "sasl.oauthbearer.client.secret_file)",
                            msg, sizeof(msg)) == 1)
        log_warn("%s", msg);
    if (c->registry_password_file &&
        secret_file_exposed(c->registry_password_file,
                            "the schema registry's password ([registry] password_file)", msg,
                            sizeof(msg)) == 1)
        log_warn("%s", msg);
    if (config_set_holds_secret(c))
        log_warn("a secret was given with --set: it is visible to every user in ps; use "
                 "[postgres] password_file, [kafka] sasl.password_file, [registry] "
                 "password_file or the environment");
}

/* Loads cfg (config_init()ed by the caller) from the file at path (none:
 * NULL), then the environment, then the --set options of argv from index
 * first (later wins), then the secret files. requeue: bare arguments are
 * EVENT_IDs. Does not validate (config_outbox_validate). 0, or -1 with err. */
static int load_config(struct config *cfg, const char *path, int argc, char **argv,
                       int first, bool requeue, char *err, size_t errlen)
{
    if ((path && config_load_file(cfg, path, err, errlen) != 0) ||
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
    return config_load_secrets(cfg, err, errlen);
}

/* What SIGHUP needs to load the configuration again the way main() did:
 * the same file (path NULL: none), environment and --set options. file:
 * the keys of the file as the daemon started with it (what "needs a
 * restart" compares with); level, format: the [log] settings in force. */
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
    const char *what = rc->path ? rc->path : "the environment";
    if (config_init(&fresh) != 0) {
        log_error("SIGHUP: out of memory: keeping the running configuration");
        return;
    }
    if (load_config(&fresh, rc->path, rc->argc, rc->argv, 1, false, err, sizeof(err)) != 0 ||
        config_outbox_validate(&fresh, err, sizeof(err)) != 0 ||
        (rc->path && ini_pairs_read_file(rc->path, &now, err, sizeof(err)) != 0)) {
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
    log_info("SIGHUP: reloaded %s: %s; %s%s", what,
             applied[0] ? applied : "log.level and log.format unchanged",
             n ? "changed keys that need a restart to take effect: " : "no other key changed",
             n ? restart : "");
out:
    ini_pairs_free(&now);
    config_free(&fresh);
}

/* ---- command line ---------------------------------------------------------- */

/* What the command line asks for, once parsed. */
struct args {
    enum command cmd;
    void (*usage)(FILE *out); /* the subcommand's --help */
    int first;                /* index of the first option in argv */
    const char *path;         /* -c FILE; NULL: none */
    struct verify_options vopt;
    bool config_only;         /* check --config-only */
    const char *since;        /* repair --since; NULL: none */
    char **ids;               /* requeue: the EVENT_IDs (into argv); owned array */
    int nids;
    struct repub_options ropt; /* republish */
};

/* First pass: the options that need no configuration (--help, --version,
 * config --example and --doc-table). True when one was found and handled;
 * *code is then the exit code. */
static bool early_option(const struct args *a, int argc, char **argv, int *code)
{
    *code = EXIT_OK;
    for (int i = a->first; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            a->usage(stdout);
            return true;
        }
        if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version")) {
            printf("outboxd %s\nlibrdkafka %s\n", OUTBOXD_VERSION, rd_kafka_version_str());
            return true;
        }
        if (a->cmd == CMD_CONFIG && !strcmp(argv[i], "--example")) {
            confdoc_example(stdout);
            return true;
        }
        if (a->cmd == CMD_CONFIG && !strcmp(argv[i], "--doc-table") && i + 1 < argc) {
            if (confdoc_table(argv[i + 1], stdout) == 0) return true;
            fprintf(stderr, "outboxd: --doc-table logical|polling\n");
            *code = EXIT_USAGE;
            return true;
        }
    }
    return false;
}

/* Prints the formatted line and the usage to stderr; returns EXIT_USAGE. */
static int usage_error(const struct args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int usage_error(const struct args *a, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    a->usage(stderr);
    return EXIT_USAGE;
}

/* Second pass: -c, the subcommand's own options and requeue's EVENT_IDs
 * (--set is applied later, by load_config). EXIT_OK when the command line
 * is good, else the exit code, the error printed: EXIT_USAGE (with the
 * usage) or EXIT_FATAL (out of memory). */
static int parse_args(struct args *a, int argc, char **argv)
{
    char err[1024];
    int vr;

    verify_options_init(&a->vopt);
    if (a->cmd == CMD_REQUEUE && !(a->ids = calloc((size_t)argc, sizeof(*a->ids)))) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    for (int i = a->first; i < argc; i++) {
        if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")) && i + 1 < argc) {
            a->path = argv[++i];
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            i++;
        } else if (a->cmd == CMD_VERIFY &&
                   (vr = verify_option(&a->vopt, argc, argv, &i, err, sizeof(err)))) {
            if (vr < 0) return usage_error(a, "outboxd verify: %s", err);
        } else if (a->cmd == CMD_REPAIR && !strcmp(argv[i], "--since") && i + 1 < argc) {
            a->since = argv[++i];
        } else if (a->cmd == CMD_REPUBLISH &&
                   (vr = repub_option(&a->ropt, argc, argv, &i, err, sizeof(err)))) {
            if (vr < 0) return usage_error(a, "outboxd republish: %s", err);
        } else if (a->cmd == CMD_CHECK && !strcmp(argv[i], "--config-only")) {
            a->config_only = true;
        } else if (a->cmd == CMD_REQUEUE && argv[i][0] != '-') {
            a->ids[a->nids++] = argv[i];
        } else {
            return usage_error(a, "outboxd: unknown or incomplete argument \"%s\"", argv[i]);
        }
    }
    if (a->cmd == CMD_REQUEUE && a->nids == 0)
        return usage_error(a, "outboxd: requeue needs at least one EVENT_ID");
    if (a->cmd == CMD_REPUBLISH && repub_options_check(&a->ropt, err, sizeof(err)) != 0)
        return usage_error(a, "outboxd republish: %s", err);
    return EXIT_OK;
}

/* ---- configuration ---------------------------------------------------------- */

/* Loads cfg (config_init()ed) as the command line says and validates it;
 * `config` prints it (and the warnings) before the validation, so a bad
 * configuration is shown too. 0, or -1 with err. */
static int configure(struct config *cfg, const struct args *a, int argc, char **argv,
                     char *err, size_t errlen)
{
    /* Without -c, everything comes from the environment and --set. */
    if (load_config(cfg, a->path, argc, argv, a->first, a->cmd == CMD_REQUEUE, err,
                    errlen) != 0)
        return -1;
    cfg->path = a->path;
    if (a->cmd == CMD_CONFIG) {
        confdoc_effective(cfg, stdout);
        fflush(stdout);
        warn_unmatched_env();
        warn_exposed_secrets(cfg);
    }
    return config_outbox_validate(cfg, err, errlen);
}

/* Reports a configuration that does not load or validate (err); returns
 * the exit code, EXIT_USAGE. */
static int config_failed(const struct args *a, const char *err)
{
    warn_unmatched_env(); /* a misspelt section may be why */
    if (a->cmd == CMD_CHECK) return check_config_failed(err); /* a FAIL line, exit 2 */
    log_error("configuration: %s", err);
    return EXIT_USAGE;
}

/* Applies [log] and warns about what the configuration left unused or
 * exposed, before anything else is logged. */
static void start_logging(const struct config *cfg, enum command cmd)
{
    log_set_level((enum log_level)cfg->log_level);
    log_set_format((enum log_format)cfg->log_format);
    if (cmd == CMD_DAEMON && cfg->source_mode != SOURCE_POLLING)
        log_set_context("slot", cfg->pg_slot);
    warn_unmatched_env();
    warn_exposed_secrets(cfg);
}

/* ---- running ---------------------------------------------------------------- */

/* Runs the subcommand a names (not the daemon, not config); its exit code. */
static int run_subcommand(const struct config *cfg, const struct args *a)
{
    switch (a->cmd) {
    case CMD_CHECK:
        return check_run(cfg, false, a->config_only ? CHECK_SCOPE_CONFIG : CHECK_SCOPE_ALL);
    case CMD_VERIFY:
        return verify_run(cfg, &a->vopt);
    case CMD_ACCEPT:
        if (cfg->source_mode != SOURCE_POLLING) return accept_slot_run(cfg);
        log_error("accept-slot: [source] mode = polling has no slot");
        return EXIT_USAGE;
    case CMD_REQUEUE:
        return poll_requeue_run(cfg, a->ids, a->nids);
    case CMD_REPAIR:
        if (cfg->source_mode != SOURCE_POLLING)
            return repair_run(cfg, &(struct repair_options){.since = a->since});
        log_error("repair: [source] mode = polling has no slot");
        return EXIT_USAGE;
    case CMD_REPUBLISH:
        return republish_run(cfg, &a->ropt);
    default:
        return EXIT_FATAL; /* not a subcommand: main() runs those itself */
    }
}

/* The logical relay. With [postgres] on_slot_loss = repair, the repair
 * runs first (a usable slot needs none) and again whenever the relay
 * stopped because the slot is invalidated or gone. */
static int run_logical(const struct config *cfg)
{
    bool repair = cfg->pg_on_slot_loss == SLOT_LOSS_REPAIR;
    for (;;) {
        int code;
        if (repair && (code = repair_run(cfg, &(struct repair_options){.at_start = true})))
            return code;
        bool lost = false;
        code = relay_run(cfg, &stop_requested, &lost);
        if (!lost || !repair || stop_requested) return code;
        log_warn("the replication slot was lost: repairing ([postgres] on_slot_loss = repair)");
    }
}

/* SCRAM with a librdkafka that Kafka 4 brokers refuse (kafkaconf.h): said
 * at start, before the broker's "invalid credentials" says it misleadingly. */
static void warn_scram_client(const struct config *cfg)
{
    const char *mech = config_kafka_get(cfg, "sasl.mechanism");
    if (!mech || strncasecmp(mech, "SCRAM", 5) != 0 || !kafka_scram_kafka4_bug(rd_kafka_version()))
        return;
    log_warn("[kafka] sasl.mechanism = %s with librdkafka %s: Kafka 4 brokers refuse its SCRAM "
             "proof as invalid credentials (fixed in 2.6.1, librdkafka#4895); Kafka 3.x accepts "
             "it. Build outboxd with deploy/librdkafka.sh (README, \"Which Kafka and librdkafka\")",
             mech, rd_kafka_version_str());
}

/* The daemon: installs the signal handlers (SIGTERM/SIGINT set
 * stop_requested; SIGHUP reloads the configuration, reload_config) and
 * runs the relay of [source] mode until it stops; its exit code. */
static int run_daemon(struct config *cfg, const struct args *a, int argc, char **argv)
{
    struct reload_ctx rc = {.path = a->path, .argc = argc, .argv = argv,
                            .level = cfg->log_level, .format = cfg->log_format};
    char err[1024], alloc[64];
    int code;

    if (a->path && ini_pairs_read_file(a->path, &rc.file, err, sizeof(err)) != 0)
        log_warn("%s (SIGHUP will name every key as changed)", err);
    signals_install(&stop_requested, reload_config, &rc);
    log_info("outboxd %s starting (%s mode, allocator %s, librdkafka %s)", OUTBOXD_VERSION,
             cfg->source_mode == SOURCE_POLLING ? "polling" : "logical",
             allocator_name(alloc, sizeof(alloc)), rd_kafka_version_str());
    warn_scram_client(cfg);
    if (cfg->pg_auth == PG_AUTH_AWS_RDS_IAM)
        log_info("postgres: [postgres] auth = aws_rds_iam: each connection gets a fresh RDS "
                 "IAM token as its password (outboxd check names the credentials' source)");
    code = cfg->source_mode == SOURCE_POLLING ? poll_relay_run(cfg, &stop_requested)
                                               : run_logical(cfg);
    ini_pairs_free(&rc.file);
    return code;
}

int main(int argc, char **argv)
{
    struct args a = {0};
    struct config cfg;
    char err[1024];
    int code;

    a.cmd = command_of(argc, argv, &a.usage);
    a.first = a.cmd == CMD_DAEMON ? 1 : 2;
    if (early_option(&a, argc, argv, &code)) return code;
    if (config_init(&cfg) != 0) {
        log_error("out of memory");
        return EXIT_FATAL;
    }
    code = parse_args(&a, argc, argv);
    if (code != EXIT_OK)
        ;
    else if (configure(&cfg, &a, argc, argv, err, sizeof(err)) != 0)
        code = config_failed(&a, err);
    else if (a.cmd != CMD_CONFIG) {
        start_logging(&cfg, a.cmd);
        /* Before anything connects: every connection authenticates so. */
        struct aws_settings aws = {.region = cfg.aws_region, .profile = cfg.aws_profile};
        if (pgconn_set_auth(cfg.pg_auth, &aws) != 0) {
            log_error("out of memory");
            code = EXIT_FATAL;
        } else
            code = a.cmd == CMD_DAEMON ? run_daemon(&cfg, &a, argc, argv)
                                   : run_subcommand(&cfg, &a);
    }
    config_free(&cfg);
    free(a.ids);
    repub_options_free(&a.ropt);
    return code;
}
