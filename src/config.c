/*
 * config.c - outboxd's configuration: defaults, INI file (libinih),
 * OUTBOXD_* environment variables and --set assignments, applied in that
 * order so that the last one wins: --set > environment > file > default.
 *
 * Known keys are described once, in the table below; the file parser, the
 * environment scan and --set all go through config_set(), so a key behaves
 * the same wherever it comes from.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include <libpq-fe.h>

#include "decoder.h"
#include "httpd.h"
#include "kafkaconf.h"
#include "log.h"
#include "polling.h"
#include "redact.h"

enum key_type {
    KT_STRING,
    KT_BOOL,
    KT_POSINT,
    KT_NONNEGINT,
    KT_LOGLEVEL,
    KT_LOGFORMAT,
    KT_PLUGIN,
    KT_POLICY,
    KT_LISTEN,
    KT_MODE,
    KT_DURATION,
};

struct key_def {
    const char *section;
    const char *key;
    enum key_type type;
    size_t offset; /* into struct config */
};

#define CFG(field) offsetof(struct config, field)

static const struct key_def key_defs[] = {
    {"postgres", "conninfo", KT_STRING, CFG(pg_conninfo)},
    {"postgres", "slot", KT_STRING, CFG(pg_slot)},
    {"postgres", "publication", KT_STRING, CFG(pg_publication)},
    {"postgres", "plugin", KT_PLUGIN, CFG(pg_plugin)},
    {"postgres", "create_slot", KT_BOOL, CFG(pg_create_slot)},
    {"postgres", "direct_read", KT_BOOL, CFG(pg_direct_read)},
    {"postgres", "status_interval_ms", KT_POSINT, CFG(pg_status_interval_ms)},
    {"postgres", "retry_min_ms", KT_POSINT, CFG(pg_retry_min_ms)},
    {"postgres", "retry_max_ms", KT_POSINT, CFG(pg_retry_max_ms)},
    {"postgres", "heartbeat_interval_ms", KT_NONNEGINT, CFG(pg_heartbeat_interval_ms)},
    {"postgres", "monitor_interval_ms", KT_POSINT, CFG(pg_monitor_interval_ms)},
    {"outbox", "table", KT_STRING, CFG(outbox_table)},
    {"outbox", "topic", KT_STRING, CFG(outbox_topic)},
    {"outbox", "column.event_id", KT_STRING, CFG(outbox_columns[OC_EVENT_ID])},
    {"outbox", "column.aggregate_type", KT_STRING, CFG(outbox_columns[OC_AGGREGATE_TYPE])},
    {"outbox", "column.aggregate_id", KT_STRING, CFG(outbox_columns[OC_AGGREGATE_ID])},
    {"outbox", "column.aggregate_version", KT_STRING,
     CFG(outbox_columns[OC_AGGREGATE_VERSION])},
    {"outbox", "column.event_type", KT_STRING, CFG(outbox_columns[OC_EVENT_TYPE])},
    {"outbox", "column.payload", KT_STRING, CFG(outbox_columns[OC_PAYLOAD])},
    {"offsets", "file", KT_STRING, CFG(offsets_file)},
    {"errors", "policy", KT_POLICY, CFG(errors_policy)},
    {"errors", "dlq_topic", KT_STRING, CFG(errors_dlq_topic)},
    {"log", "level", KT_LOGLEVEL, CFG(log_level)},
    {"log", "format", KT_LOGFORMAT, CFG(log_format)},
    {"http", "listen", KT_LISTEN, CFG(http_listen)},
    {"source", "mode", KT_MODE, CFG(source_mode)},
    {"polling", "owner_id", KT_STRING, CFG(poll_owner_id)},
    {"polling", "batch_size", KT_POSINT, CFG(poll_batch_size)},
    {"polling", "lease", KT_DURATION, CFG(poll_lease_ms)},
    {"polling", "poll_interval_ms", KT_POSINT, CFG(poll_interval_ms)},
    {"polling", "max_attempts", KT_POSINT, CFG(poll_max_attempts)},
    {"polling", "backoff_min", KT_DURATION, CFG(poll_backoff_min_ms)},
    {"polling", "backoff_max", KT_DURATION, CFG(poll_backoff_max_ms)},
    {"polling", "retention", KT_DURATION, CFG(poll_retention_ms)},
    {"polling", "retention_batch", KT_POSINT, CFG(poll_retention_batch)},
    {"polling", "retention_interval", KT_DURATION, CFG(poll_retention_interval_ms)},
    {"polling", "notify_channel", KT_STRING, CFG(poll_notify_channel)},
};
#define NKEYS (sizeof(key_defs) / sizeof(key_defs[0]))

static const char *const known_sections[] = {"postgres", "outbox", "kafka", "offsets",
                                             "errors",   "log",    "http",   "source",
                                             "polling"};

/* outboxd's own librdkafka defaults; the file may override them. */
static const char *const kafka_defaults[][2] = {
    {"enable.idempotence", "true"},
    {"acks", "all"},
    {"partitioner", "murmur2_random"},
    /* One produce request in flight per broker connection. With up to 5
     * (librdkafka's idempotent default), a restarted outboxd (a new producer
     * id) lost events on a real 3-broker Kafka 3.9.1 (real.faults, 3 rounds:
     * 4 events ACKed and confirmed but never in the log): its first request
     * to a partition was refused (NOT_ENOUGH_REPLICAS, two brokers down) while
     * the next one, sent behind it, was accepted as the ISR grew back, since
     * the broker takes any first sequence from a producer it has no state
     * for; most likely librdkafka 2.0.2 then took the refused messages for
     * persisted (a later message of the partition was ACKed: its "implicit
     * ack") and reported them delivered (inferred from the offsets and the
     * logs, not traced in librdkafka). With one request in flight the
     * refused one is retried before anything behind it is sent. */
    {"max.in.flight.requests.per.connection", "1"},
};

static char **str_field(struct config *c, const struct key_def *d)
{
    return (char **)((char *)c + d->offset);
}

static int set_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy) return -1;
    free(*field);
    *field = copy;
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "on", "yes", "1"};
    static const char *const no[] = {"false", "off", "no", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) return *out = true, 0;
        if (strcasecmp(v, no[i]) == 0) return *out = false, 0;
    }
    return -1;
}

/* An integer in [min, 86400000] (a day in milliseconds at most). */
static int parse_int_from(const char *v, long min, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || n < min || n > 86400000) return -1;
    *out = (int)n;
    return 0;
}

static int parse_posint(const char *v, int *out)
{
    return parse_int_from(v, 1, out);
}

int config_init(struct config *c)
{
    static const struct {
        const char *section, *key, *value;
    } defaults[] = {
        {"postgres", "slot", "outboxd"},
        {"postgres", "publication", "outboxd_pub"},
        {"postgres", "plugin", "pgoutput"},
        {"postgres", "create_slot", "true"},
        {"postgres", "direct_read", "true"},
        {"postgres", "status_interval_ms", "1000"},
        {"postgres", "retry_min_ms", "500"},
        {"postgres", "retry_max_ms", "30000"},
        {"postgres", "heartbeat_interval_ms", "0"},
        {"postgres", "monitor_interval_ms", "5000"},
        {"outbox", "table", "public.outbox_events"},
        {"outbox", "topic", "outbox.event.${aggregate_type}"},
        {"offsets", "file", "outboxd.offset"},
        {"errors", "policy", "halt"},
        {"errors", "dlq_topic", "outbox.dlq"},
        {"log", "level", "info"},
        {"log", "format", "text"},
        {"http", "listen", "127.0.0.1:9187"},
        {"source", "mode", "logical"},
        {"polling", "batch_size", "100"},
        {"polling", "lease", "30s"},
        {"polling", "poll_interval_ms", "1000"},
        {"polling", "max_attempts", "10"},
        {"polling", "backoff_min", "1s"},
        {"polling", "backoff_max", "5m"},
        {"polling", "retention", "7d"},
        {"polling", "retention_batch", "1000"},
        {"polling", "retention_interval", "1m"},
        {"polling", "notify_channel", "outboxd"},
    };
    char err[256];
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
        if (config_set(c, defaults[i].section, defaults[i].key, defaults[i].value, err,
                       sizeof(err)) != 0)
            goto fail;
    for (int i = 0; i < OC__COUNT; i++)
        if (set_string(&c->outbox_columns[i], outbox_col_name(i)) != 0) goto fail;
    for (size_t i = 0; i < sizeof(kafka_defaults) / sizeof(kafka_defaults[0]); i++)
        if (config_set(c, "kafka", kafka_defaults[i][0], kafka_defaults[i][1], err,
                       sizeof(err)) != 0)
            goto fail;
    return 0;
fail:
    config_free(c);
    return -1;
}

void config_free(struct config *c)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (key_defs[i].type == KT_STRING || key_defs[i].type == KT_PLUGIN ||
            key_defs[i].type == KT_LISTEN) {
            char **f = str_field(c, &key_defs[i]);
            free(*f);
            *f = NULL;
        }
    for (size_t i = 0; i < c->nkafka; i++) {
        free(c->kafka[i].key);
        free(c->kafka[i].value);
    }
    free(c->kafka);
    c->kafka = NULL;
    c->nkafka = 0;
}

static int set_kafka(struct config *c, const char *key, const char *value)
{
    for (size_t i = 0; i < c->nkafka; i++)
        if (strcmp(c->kafka[i].key, key) == 0) return set_string(&c->kafka[i].value, value);
    struct kv *n = realloc(c->kafka, (c->nkafka + 1) * sizeof(*n));
    if (!n) return -1;
    c->kafka = n;
    n[c->nkafka].key = strdup(key);
    n[c->nkafka].value = strdup(value);
    if (!n[c->nkafka].key || !n[c->nkafka].value) {
        free(n[c->nkafka].key);
        free(n[c->nkafka].value);
        return -1;
    }
    c->nkafka++;
    return 0;
}

const char *config_kafka_get(const struct config *c, const char *key)
{
    for (size_t i = 0; i < c->nkafka; i++)
        if (strcmp(c->kafka[i].key, key) == 0) return c->kafka[i].value;
    return NULL;
}

/* The known sections, comma-separated, into out (truncated to outlen). */
static void known_section_list(char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(known_sections) / sizeof(known_sections[0]); i++) {
        int w = snprintf(out + used, outlen - used, "%s%s", i ? ", " : "", known_sections[i]);
        if (w < 0 || (size_t)w >= outlen - used) return;
        used += (size_t)w;
    }
}

static bool section_known(const char *section)
{
    for (size_t i = 0; i < sizeof(known_sections) / sizeof(known_sections[0]); i++)
        if (strcmp(section, known_sections[i]) == 0) return true;
    return false;
}

static int set_known(struct config *c, const struct key_def *d, const char *value,
                     char *err, size_t errlen)
{
    int lvl;
    int64_t ms;
    char why[200];
    switch (d->type) {
    case KT_MODE:
        if (strcmp(value, "logical") != 0 && strcmp(value, "polling") != 0) {
            snprintf(err, errlen, "[%s] %s: \"%s\" is not one of logical|polling", d->section,
                     d->key, value);
            return -1;
        }
        c->source_mode = strcmp(value, "polling") == 0 ? SOURCE_POLLING : SOURCE_LOGICAL;
        return 0;
    case KT_DURATION:
        if (polling_duration_parse(value, &ms, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "[%s] %s: %s", d->section, d->key, why);
            return -1;
        }
        *(int64_t *)((char *)c + d->offset) = ms;
        return 0;
    case KT_STRING:
        if (*value == '\0' && strcmp(d->key, "conninfo") != 0) {
            snprintf(err, errlen, "[%s] %s: must not be empty", d->section, d->key);
            return -1;
        }
        break;
    case KT_PLUGIN:
        if (plugin_parse(value) < 0) {
            snprintf(err, errlen,
                     "[%s] %s: unknown plugin \"%s\" (supported: pgoutput, wal2json)",
                     d->section, d->key, value);
            return -1;
        }
        break;
    case KT_BOOL:
        if (parse_bool(value, (bool *)((char *)c + d->offset)) != 0) {
            snprintf(err, errlen, "[%s] %s: \"%s\" is not a boolean (true/false)",
                     d->section, d->key, value);
            return -1;
        }
        return 0;
    case KT_POSINT:
        if (parse_posint(value, (int *)((char *)c + d->offset)) != 0) {
            snprintf(err, errlen, "[%s] %s: \"%s\" is not a positive integer", d->section,
                     d->key, value);
            return -1;
        }
        return 0;
    case KT_NONNEGINT:
        if (parse_int_from(value, 0, (int *)((char *)c + d->offset)) != 0) {
            snprintf(err, errlen, "[%s] %s: \"%s\" is not a non-negative integer (0 = off)",
                     d->section, d->key, value);
            return -1;
        }
        return 0;
    case KT_LISTEN:
        if (*value != '\0') {
            char why[256];
            struct listen_addr la;
            if (listen_addr_parse(value, &la, why, sizeof(why)) != 0) {
                snprintf(err, errlen, "[%s] %s: %s", d->section, d->key, why);
                return -1;
            }
        }
        break;
    case KT_LOGFORMAT:
        if ((lvl = log_format_parse(value)) < 0) {
            snprintf(err, errlen, "[%s] %s: \"%s\" is not one of text|json", d->section,
                     d->key, value);
            return -1;
        }
        c->log_format = lvl;
        return 0;
    case KT_POLICY:
        if (strcmp(value, "halt") != 0 && strcmp(value, "dlq") != 0) {
            snprintf(err, errlen, "[%s] %s: \"%s\" is not one of halt|dlq", d->section,
                     d->key, value);
            return -1;
        }
        c->errors_policy = strcmp(value, "dlq") == 0 ? ERRORS_DLQ : ERRORS_HALT;
        return 0;
    case KT_LOGLEVEL:
        if ((lvl = log_level_parse(value)) < 0) {
            snprintf(err, errlen, "[%s] %s: \"%s\" is not one of error|warn|info|debug",
                     d->section, d->key, value);
            return -1;
        }
        c->log_level = lvl;
        return 0;
    }
    if (set_string(str_field(c, d), value) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int config_set(struct config *c, const char *section, const char *key,
               const char *value, char *err, size_t errlen)
{
    if (!section_known(section)) {
        snprintf(err, errlen,
                 "%s: unknown section [%s] (known: postgres, outbox, kafka, offsets, errors, "
                 "log, http, source, polling)",
                 key, section);
        return -1;
    }
    if (strcmp(section, "kafka") == 0) {
        if (*key == '\0') {
            snprintf(err, errlen, "[kafka]: empty key");
            return -1;
        }
        if (set_kafka(c, key, value) != 0) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(key_defs[i].section, section) == 0 && strcmp(key_defs[i].key, key) == 0)
            return set_known(c, &key_defs[i], value, err, errlen);
    /* The closest known key of the section, if it looks like a typo. */
    const char *cands[NKEYS];
    size_t ncands = 0;
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(key_defs[i].section, section) == 0) cands[ncands++] = key_defs[i].key;
    const char *hint = check_suggest(key, cands, ncands);
    if (hint)
        snprintf(err, errlen, "unknown key \"%s\" in section [%s]; did you mean \"%s\"?", key,
                 section, hint);
    else
        snprintf(err, errlen, "unknown key \"%s\" in section [%s]", key, section);
    return -1;
}

/* libinih is built without line numbers in the handler and with a fixed
 * line buffer (INI_MAX_LINE, 200 bytes in Debian's build). Feeding it
 * through our own reader lets us count lines, so every error names its
 * line, and refuse an over-long line instead of letting libinih silently
 * split it into two. */
struct ini_ctx {
    struct config *c;
    FILE *f;
    int lineno;
    char reason[512]; /* the first error, at line lineno */
    int failed;
};

static char *read_line(char *str, int num, void *stream)
{
    struct ini_ctx *ctx = stream;
    if (ctx->failed || !fgets(str, num, ctx->f)) return NULL;
    ctx->lineno++;
    size_t n = strlen(str);
    if (n == (size_t)num - 1 && str[n - 1] != '\n' && !feof(ctx->f)) {
        snprintf(ctx->reason, sizeof(ctx->reason),
                 "line longer than %d bytes (the INI parser's limit); set this key "
                 "through its OUTBOXD_* environment variable or --set instead",
                 num - 2);
        ctx->failed = 1;
        return NULL;
    }
    return str;
}

static int on_ini_value(void *user, const char *section, const char *name,
                        const char *value)
{
    struct ini_ctx *ctx = user;
    if (ctx->failed) return 0;
    if (config_set(ctx->c, section, name, value, ctx->reason, sizeof(ctx->reason)) != 0) {
        ctx->failed = 1;
        return 0;
    }
    return 1;
}

int config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct ini_ctx ctx = {.c = c, .f = f};
    int rc = ini_parse_stream(read_line, &ctx, on_ini_value, &ctx);
    fclose(f);
    /* inih reports the first bad line, syntax or ours; we stopped reading at
     * ours, so a smaller rc is a syntax error before it. */
    if (ctx.failed && (rc <= 0 || rc >= ctx.lineno)) {
        snprintf(err, errlen, "%s:%d: %s", path, ctx.lineno, ctx.reason);
        return -1;
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)",
                 path, rc);
        return -1;
    }
    return 0;
}

/* The environment name of a key: OUTBOXD_<SECTION>_<KEY>, dots as '_'. */
static void env_name(const char *section, const char *key, char *out, size_t outlen)
{
    size_t n = (size_t)snprintf(out, outlen, "OUTBOXD_%s_%s", section, key);
    if (n >= outlen) n = outlen - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = out[i] == '.' ? '_' : (char)toupper((unsigned char)out[i]);
}

static const char *env_lookup(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=') return *envp + n + 1;
    return NULL;
}

/* True when the variable e (NAME=value) starts with OUTBOXD_<SECTION>_ of a
 * known section. */
static bool env_in_section(const char *e)
{
    char name[128];
    for (size_t i = 0; i < sizeof(known_sections) / sizeof(known_sections[0]); i++) {
        env_name(known_sections[i], "", name, sizeof(name));
        if (strncmp(e, name, strlen(name)) == 0) return true;
    }
    return false;
}

int config_load_env(struct config *c, char *const *envp, char *err, size_t errlen)
{
    char name[128];
    for (size_t i = 0; i < NKEYS; i++) {
        env_name(key_defs[i].section, key_defs[i].key, name, sizeof(name));
        const char *v = env_lookup(envp, name);
        if (v && config_set(c, key_defs[i].section, key_defs[i].key, v, err, errlen) != 0)
            return -1;
    }
    /* A misspelt key of a known section is an error. A variable that
     * matches no section may belong to something else (a wrapper script's
     * OUTBOXD_BUILD_DIR): it is skipped here, and the caller names it in a
     * warning (config_env_unmatched). */
    for (char *const *e = envp; e && *e; e++) {
        if (strncmp(*e, "OUTBOXD_", 8) != 0 || strncmp(*e, "OUTBOXD_KAFKA_", 14) == 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        if (!env_in_section(*e)) continue;
        bool known = false;
        for (size_t i = 0; i < NKEYS; i++) {
            env_name(key_defs[i].section, key_defs[i].key, name, sizeof(name));
            if (strlen(name) == n && strncmp(*e, name, n) == 0) known = true;
        }
        if (!known) {
            snprintf(err, errlen, "environment variable %.*s is not a known key", (int)n, *e);
            return -1;
        }
    }
    /* [kafka] keys are open-ended: OUTBOXD_KAFKA_SASL_USERNAME becomes
     * sasl.username (librdkafka property names use dots, never '_'). */
    static const char prefix[] = "OUTBOXD_KAFKA_";
    for (; envp && *envp; envp++) {
        if (strncmp(*envp, prefix, sizeof(prefix) - 1) != 0) continue;
        const char *rest = *envp + sizeof(prefix) - 1;
        const char *eq = strchr(rest, '=');
        if (!eq || eq == rest || (size_t)(eq - rest) >= sizeof(name)) continue;
        size_t n = (size_t)(eq - rest);
        for (size_t i = 0; i < n; i++)
            name[i] = rest[i] == '_' ? '.' : (char)tolower((unsigned char)rest[i]);
        name[n] = '\0';
        if (config_set(c, "kafka", name, eq + 1, err, errlen) != 0) return -1;
    }
    return 0;
}

int config_env_unmatched(char *const *envp, char *msg, size_t msglen)
{
    int count = 0;
    size_t used = 0;
    int w = snprintf(msg, msglen, "ignoring environment variable");
    used = w < 0 ? 0 : (size_t)w < msglen ? (size_t)w : msglen - 1;
    for (; envp && *envp; envp++) {
        if (strncmp(*envp, "OUTBOXD_", 8) != 0 || env_in_section(*envp)) continue;
        const char *eq = strchr(*envp, '=');
        int n = (int)(eq ? (size_t)(eq - *envp) : strlen(*envp));
        w = snprintf(msg + used, msglen - used, "%s%.*s", count ? ", " : " ", n, *envp);
        if (w > 0) used += (size_t)w < msglen - used ? (size_t)w : msglen - used - 1;
        count++;
    }
    if (count) {
        char list[256];
        known_section_list(list, sizeof(list));
        snprintf(msg + used, msglen - used,
                 ": no section matches (OUTBOXD_<SECTION>_<KEY>, sections: %s)", list);
    } else {
        msg[0] = '\0';
    }
    return count;
}

int config_apply_set(struct config *c, const char *assignment, char *err, size_t errlen)
{
    const char *dot = strchr(assignment, '.');
    const char *eq = strchr(assignment, '=');
    if (!dot || !eq || dot > eq || dot == assignment) {
        snprintf(err, errlen, "--set \"%s\": expected section.key=value", assignment);
        return -1;
    }
    char section[64], key[256];
    size_t slen = (size_t)(dot - assignment), klen = (size_t)(eq - dot - 1);
    if (slen >= sizeof(section) || klen >= sizeof(key) || klen == 0) {
        snprintf(err, errlen, "--set \"%s\": expected section.key=value", assignment);
        return -1;
    }
    memcpy(section, assignment, slen);
    section[slen] = '\0';
    memcpy(key, dot + 1, klen);
    key[klen] = '\0';
    return config_set(c, section, key, eq + 1, err, errlen);
}

/* The [polling] keys that depend on each other (mode = polling only). */
static int config_validate_polling(const struct config *c, char *err, size_t errlen)
{
    if (c->poll_lease_ms < 1000) {
        snprintf(err, errlen, "[polling] lease: %lld ms is too short (at least 1s: the lease "
                 "must outlast a broker round trip)", (long long)c->poll_lease_ms);
        return -1;
    }
    if (c->poll_backoff_min_ms <= 0) {
        snprintf(err, errlen, "[polling] backoff_min must be more than 0");
        return -1;
    }
    if (c->poll_backoff_min_ms > c->poll_backoff_max_ms) {
        snprintf(err, errlen, "[polling] backoff_min (%lld ms) is larger than backoff_max "
                 "(%lld ms)", (long long)c->poll_backoff_min_ms,
                 (long long)c->poll_backoff_max_ms);
        return -1;
    }
    if (c->poll_retention_ms > 0 && c->poll_retention_interval_ms <= 0) {
        snprintf(err, errlen, "[polling] retention_interval must be more than 0 when "
                 "retention is on");
        return -1;
    }
    for (const char *p = c->poll_notify_channel; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) {
            snprintf(err, errlen, "[polling] notify_channel \"%s\": use lower-case letters, "
                     "digits and '_' only", c->poll_notify_channel);
            return -1;
        }
    return 0;
}

int config_validate(const struct config *c, char *err, size_t errlen)
{
    if (!c->pg_conninfo || !*c->pg_conninfo) {
        snprintf(err, errlen,
                 "[postgres] conninfo is not set (file, OUTBOXD_POSTGRES_CONNINFO or "
                 "--set postgres.conninfo=...)");
        return -1;
    }
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(c->pg_conninfo, &perr);
    if (!opts) {
        char safe[512];
        redact_conn_error(c->pg_conninfo, perr ? perr : "out of memory", safe, sizeof(safe));
        PQfreemem(perr);
        snprintf(err, errlen, "[postgres] conninfo cannot be parsed (not shown: it may hold a "
                 "password): %s", safe);
        return -1;
    }
    PQconninfoFree(opts);
    if (plugin_parse(c->pg_plugin) < 0) {
        snprintf(err, errlen, "[postgres] plugin: unknown plugin \"%s\"", c->pg_plugin);
        return -1;
    }
    if (c->pg_retry_min_ms > c->pg_retry_max_ms) {
        snprintf(err, errlen, "[postgres] retry_min_ms (%d) is larger than retry_max_ms (%d)",
                 c->pg_retry_min_ms, c->pg_retry_max_ms);
        return -1;
    }
    if (c->pg_heartbeat_interval_ms > 0 && c->pg_heartbeat_interval_ms < 100) {
        snprintf(err, errlen,
                 "[postgres] heartbeat_interval_ms: %d is below 100 ms (0 turns heartbeats "
                 "off)",
                 c->pg_heartbeat_interval_ms);
        return -1;
    }
    if (c->pg_monitor_interval_ms < 100) {
        snprintf(err, errlen, "[postgres] monitor_interval_ms: %d is below 100 ms",
                 c->pg_monitor_interval_ms);
        return -1;
    }
    if (!config_kafka_get(c, "bootstrap.servers")) {
        snprintf(err, errlen, "[kafka] bootstrap.servers is not set");
        return -1;
    }
    if (kafka_conf_check_queue_fit(c, err, errlen) != 0) return -1;
    return c->source_mode == SOURCE_POLLING ? config_validate_polling(c, err, errlen) : 0;
}
