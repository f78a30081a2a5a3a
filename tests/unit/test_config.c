/*
 * test_config.c - configuration (include/config/config.h): defaults, config_set,
 * INI file, environment, --set, precedence, validation.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_outbox.h"
#include "config_serde.h"
#include "kafkaconf.h"
#include "log.h"
#include "outbox.h"

static struct config C;
static char err[512];

static void setup(void)
{
    memset(&C, 0, sizeof(C));
    ck_assert_int_eq(config_init(&C), 0);
    err[0] = '\0';
}

static void teardown(void) { config_free(&C); }

/* Writes content to a new temp file; path into out (cap >= 64). */
static void write_temp(const char *content, char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/outboxd-test-config.XXXXXX");
    int fd = mkstemp(out);
    ck_assert_int_ge(fd, 0);
    size_t len = strlen(content);
    ck_assert_int_eq(write(fd, content, len), (ssize_t)len);
    ck_assert_int_eq(close(fd), 0);
}

#define ERR_HAS(s)                                                           \
    ck_assert_msg(strstr(err, (s)) != NULL, "err \"%s\" does not mention \"%s\"", \
                  err, (s))

/* ---- defaults ---- */

START_TEST(test_defaults)
{
    ck_assert_ptr_null(C.pg_conninfo);
    ck_assert_str_eq(C.pg_slot, "outboxd");
    ck_assert_str_eq(C.pg_publication, "outboxd_pub");
    ck_assert_int_eq(C.pg_plugin, PLUGIN_PGOUTPUT);
    ck_assert(C.pg_create_slot == true);
    ck_assert_int_eq(C.pg_status_interval_ms, 1000);
    ck_assert_str_eq(C.outbox.table, "public.outbox_events");
    ck_assert_str_eq(C.outbox.topic, "outbox.event.${aggregate_type}");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_ID], "event_id");
    ck_assert_str_eq(C.outbox.columns[OC_AGGREGATE_TYPE], "aggregate_type");
    ck_assert_str_eq(C.outbox.columns[OC_AGGREGATE_ID], "aggregate_id");
    ck_assert_str_eq(C.outbox.columns[OC_AGGREGATE_VERSION], "aggregate_version");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_TYPE], "event_type");
    ck_assert_str_eq(C.outbox.columns[OC_PAYLOAD], "payload");
    ck_assert_str_eq(C.offsets_file, "outboxd.offset");
    ck_assert_int_eq(C.log_level, LOG_INFO);
}
END_TEST

START_TEST(test_kafka_defaults)
{
    ck_assert_pstr_eq(config_kafka_get(&C, "enable.idempotence"), "true");
    ck_assert_pstr_eq(config_kafka_get(&C, "acks"), "all");
    ck_assert_pstr_eq(config_kafka_get(&C, "partitioner"), "murmur2_random");
    /* A later request must never be ACKed past a refused one (config.c). */
    ck_assert_pstr_eq(config_kafka_get(&C, "max.in.flight.requests.per.connection"), "1");
    ck_assert_ptr_null(config_kafka_get(&C, "bootstrap.servers"));
    ck_assert_ptr_null(config_kafka_get(&C, "nonexistent.key"));
    /* The kafka array agrees with config_kafka_get. */
    int seen = 0;
    for (size_t i = 0; i < C.nkafka; i++) {
        ck_assert_ptr_nonnull(C.kafka[i].key);
        ck_assert_ptr_nonnull(C.kafka[i].value);
        if (strcmp(C.kafka[i].key, "acks") == 0) {
            ck_assert_str_eq(C.kafka[i].value, "all");
            seen++;
        }
    }
    ck_assert_int_eq(seen, 1);
}
END_TEST

START_TEST(test_col_names)
{
    ck_assert_str_eq(outbox_col_name(OC_EVENT_ID), "event_id");
    ck_assert_str_eq(outbox_col_name(OC_AGGREGATE_TYPE), "aggregate_type");
    ck_assert_str_eq(outbox_col_name(OC_AGGREGATE_ID), "aggregate_id");
    ck_assert_str_eq(outbox_col_name(OC_AGGREGATE_VERSION), "aggregate_version");
    ck_assert_str_eq(outbox_col_name(OC_EVENT_TYPE), "event_type");
    ck_assert_str_eq(outbox_col_name(OC_PAYLOAD), "payload");
}
END_TEST

START_TEST(test_init_free_twice)
{
    /* Independent configs do not share storage. */
    struct config d;
    memset(&d, 0, sizeof(d));
    ck_assert_int_eq(config_init(&d), 0);
    ck_assert_int_eq(config_set(&d, "postgres", "slot", "other", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&d, "kafka", "acks", "1", err, sizeof(err)), 0);
    ck_assert_str_eq(C.pg_slot, "outboxd");
    ck_assert_pstr_eq(config_kafka_get(&C, "acks"), "all");
    config_free(&d);
    ck_assert_str_eq(C.pg_slot, "outboxd");
}
END_TEST

/* ---- config_set ---- */

START_TEST(test_set_postgres)
{
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "host=db dbname=app", err, sizeof(err)), 0);
    ck_assert_pstr_eq(C.pg_conninfo, "host=db dbname=app");
    ck_assert_int_eq(config_set(&C, "postgres", "slot", "s1", err, sizeof(err)), 0);
    ck_assert_str_eq(C.pg_slot, "s1");
    ck_assert_int_eq(config_set(&C, "postgres", "publication", "p1", err, sizeof(err)), 0);
    ck_assert_str_eq(C.pg_publication, "p1");
    ck_assert_int_eq(config_set(&C, "postgres", "plugin", "pgoutput", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_plugin, PLUGIN_PGOUTPUT);
    ck_assert_int_eq(config_set(&C, "postgres", "create_slot", "false", err, sizeof(err)), 0);
    ck_assert(C.pg_create_slot == false);
    ck_assert_int_eq(config_set(&C, "postgres", "status_interval_ms", "250", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_status_interval_ms, 250);
    ck_assert_int_eq(config_set(&C, "postgres", "status_interval_ms", "600000", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_status_interval_ms, 600000);
    /* Setting again replaces. */
    ck_assert_int_eq(config_set(&C, "postgres", "slot", "s2", err, sizeof(err)), 0);
    ck_assert_str_eq(C.pg_slot, "s2");
}
END_TEST

START_TEST(test_set_value_copied)
{
    char buf[32];
    strcpy(buf, "myslot");
    ck_assert_int_eq(config_set(&C, "postgres", "slot", buf, err, sizeof(err)), 0);
    strcpy(buf, "CLOBBERED");
    ck_assert_str_eq(C.pg_slot, "myslot");
    strcpy(buf, "k.v");
    ck_assert_int_eq(config_set(&C, "kafka", buf, "val", err, sizeof(err)), 0);
    strcpy(buf, "XXX");
    ck_assert_pstr_eq(config_kafka_get(&C, "k.v"), "val");
}
END_TEST

START_TEST(test_set_outbox)
{
    ck_assert_int_eq(config_set(&C, "outbox", "table", "app.events", err, sizeof(err)), 0);
    ck_assert_str_eq(C.outbox.table, "app.events");
    ck_assert_int_eq(config_set(&C, "outbox", "topic", "t.${event_type}", err, sizeof(err)), 0);
    ck_assert_str_eq(C.outbox.topic, "t.${event_type}");
    static const char *const names[OC__COUNT] = {"id", "agg_type", "agg_id",
                                                 "version", "kind", "body"};
    for (int i = 0; i < OC__COUNT; i++) {
        char key[64];
        snprintf(key, sizeof(key), "column.%s", outbox_col_name((enum outbox_col)i));
        ck_assert_msg(config_set(&C, "outbox", key, names[i], err, sizeof(err)) == 0,
                      "set outbox.%s: %s", key, err);
    }
    for (int i = 0; i < OC__COUNT; i++)
        ck_assert_str_eq(C.outbox.columns[i], names[i]);
}
END_TEST

START_TEST(test_set_offsets_log)
{
    ck_assert_int_eq(config_set(&C, "offsets", "file", "/var/lib/outboxd/off", err, sizeof(err)), 0);
    ck_assert_str_eq(C.offsets_file, "/var/lib/outboxd/off");
    static const struct {
        const char *s;
        int v;
    } lv[] = {{"error", LOG_ERROR}, {"warn", LOG_WARN}, {"debug", LOG_DEBUG}, {"info", LOG_INFO}};
    for (size_t i = 0; i < sizeof(lv) / sizeof(lv[0]); i++) {
        ck_assert_int_eq(config_set(&C, "log", "level", lv[i].s, err, sizeof(err)), 0);
        ck_assert_int_eq(C.log_level, lv[i].v);
    }
}
END_TEST

START_TEST(test_set_kafka)
{
    size_t n0 = C.nkafka;
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "b1:9092,b2:9092", err, sizeof(err)), 0);
    ck_assert_pstr_eq(config_kafka_get(&C, "bootstrap.servers"), "b1:9092,b2:9092");
    ck_assert_uint_eq(C.nkafka, n0 + 1);
    ck_assert_str_eq(C.kafka[C.nkafka - 1].key, "bootstrap.servers");
    ck_assert_str_eq(C.kafka[C.nkafka - 1].value, "b1:9092,b2:9092");

    /* Any key passes through uninterpreted. */
    ck_assert_int_eq(config_set(&C, "kafka", "sasl.password", "s3cr=t;x", err, sizeof(err)), 0);
    ck_assert_pstr_eq(config_kafka_get(&C, "sasl.password"), "s3cr=t;x");
    ck_assert_uint_eq(C.nkafka, n0 + 2);
    ck_assert_str_eq(C.kafka[n0 + 1].key, "sasl.password");

    /* Defaults are overridable, in place. */
    ck_assert_int_eq(config_set(&C, "kafka", "acks", "1", err, sizeof(err)), 0);
    ck_assert_pstr_eq(config_kafka_get(&C, "acks"), "1");
    ck_assert_int_eq(config_set(&C, "kafka", "partitioner", "consistent", err, sizeof(err)), 0);
    ck_assert_pstr_eq(config_kafka_get(&C, "partitioner"), "consistent");
    ck_assert_int_eq(config_set(&C, "kafka", "enable.idempotence", "false", err, sizeof(err)), 0);
    ck_assert_pstr_eq(config_kafka_get(&C, "enable.idempotence"), "false");
    ck_assert_uint_eq(C.nkafka, n0 + 2);

    /* Later sets replace values; order of first appearance is kept. */
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "b3:9092", err, sizeof(err)), 0);
    ck_assert_pstr_eq(config_kafka_get(&C, "bootstrap.servers"), "b3:9092");
    ck_assert_uint_eq(C.nkafka, n0 + 2);
    ck_assert_str_eq(C.kafka[n0].key, "bootstrap.servers");
    ck_assert_str_eq(C.kafka[n0].value, "b3:9092");
    ck_assert_str_eq(C.kafka[n0 + 1].key, "sasl.password");
    /* Exactly one entry per key. */
    for (size_t i = 0; i < C.nkafka; i++)
        for (size_t j = i + 1; j < C.nkafka; j++)
            ck_assert_str_ne(C.kafka[i].key, C.kafka[j].key);
}
END_TEST

START_TEST(test_set_many_kafka)
{
    char k[32], v[32];
    size_t n0 = C.nkafka;
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "x.key%d", i);
        snprintf(v, sizeof(v), "v%d", i);
        ck_assert_int_eq(config_set(&C, "kafka", k, v, err, sizeof(err)), 0);
    }
    ck_assert_uint_eq(C.nkafka, n0 + 200);
    for (int i = 0; i < 200; i++) {
        snprintf(k, sizeof(k), "x.key%d", i);
        snprintf(v, sizeof(v), "v%d", i);
        ck_assert_pstr_eq(config_kafka_get(&C, k), v);
        ck_assert_str_eq(C.kafka[n0 + (size_t)i].key, k);
    }
}
END_TEST

static const struct {
    const char *v;
    bool b;
} bools[] = {{"true", true}, {"false", false}, {"on", true}, {"off", false},
             {"yes", true},  {"no", false},    {"1", true},  {"0", false}};

START_TEST(test_booleans)
{
    /* Start from the opposite so the assignment is observable. */
    C.pg_create_slot = !bools[_i].b;
    ck_assert_msg(config_set(&C, "postgres", "create_slot", bools[_i].v, err, sizeof(err)) == 0,
                  "boolean \"%s\" rejected: %s", bools[_i].v, err);
    ck_assert_msg(C.pg_create_slot == bools[_i].b, "boolean \"%s\" read as %d",
                  bools[_i].v, (int)C.pg_create_slot);
}
END_TEST

/* ---- config_set errors ---- */

START_TEST(test_unknown_section)
{
    ck_assert_int_eq(config_set(&C, "nosuchsection", "slot", "x", err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
    ERR_HAS("nosuchsection");
}
END_TEST

START_TEST(test_unknown_key)
{
    ck_assert_int_eq(config_set(&C, "postgres", "bogus_key", "x", err, sizeof(err)), -1);
    ERR_HAS("bogus_key");
    ERR_HAS("postgres");
    err[0] = '\0';
    ck_assert_int_eq(config_set(&C, "outbox", "column.bogus", "x", err, sizeof(err)), -1);
    ERR_HAS("column.bogus");
    err[0] = '\0';
    ck_assert_int_eq(config_set(&C, "outbox", "slot", "x", err, sizeof(err)), -1);
    ERR_HAS("slot");
    err[0] = '\0';
    ck_assert_int_eq(config_set(&C, "offsets", "path", "x", err, sizeof(err)), -1);
    ERR_HAS("path");
    err[0] = '\0';
    ck_assert_int_eq(config_set(&C, "log", "lvl", "x", err, sizeof(err)), -1);
    ERR_HAS("lvl");
    /* Nothing changed. */
    ck_assert_str_eq(C.pg_slot, "outboxd");
}
END_TEST

/* A likely typo of a key of the same section is named. */
static const struct {
    const char *section, *key, *suggestion; /* NULL: no suggestion */
} typos[] = {
    {"postgres", "slto", "slot"},
    {"postgres", "conninf", "conninfo"},
    {"postgres", "create-slot", "create_slot"},
    {"postgres", "publicaton", "publication"},
    {"outbox", "column.paylod", "column.payload"},
    {"outbox", "topics", "topic"},
    {"offsets", "fiel", "file"},
    {"errors", "polciy", "policy"},
    {"log", "levle", "level"},
    {"postgres", "bogus_key", NULL},
    {"offsets", "path", NULL},
    {"outbox", "slot", NULL}, /* a key of another section: no guess */
    {"log", "lvl", NULL},
};

START_TEST(test_unknown_key_suggestion)
{
    char want[256];
    ck_assert_int_eq(config_set(&C, typos[_i].section, typos[_i].key, "x", err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "unknown key \"%s\" in section [%s]", typos[_i].key,
             typos[_i].section);
    if (typos[_i].suggestion) {
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "; did you mean \"%s\"?",
                 typos[_i].suggestion);
        ck_assert_str_eq(err, want);
    } else {
        ck_assert_str_eq(err, want);
        ck_assert_ptr_null(strstr(err, "did you mean"));
    }
}
END_TEST

START_TEST(test_unknown_key_suggestion_in_file)
{
    char path[64], want[256];
    write_temp("[postgres]\n"
               "slto = a\n",
               path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof(want), "%s:2: unknown key \"slto\" in section [postgres]; did you "
             "mean \"slot\"?", path);
    ck_assert_str_eq(err, want);
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, "postgres.plugn=wal2json", err, sizeof(err)), -1);
    ck_assert_str_eq(err, "unknown key \"plugn\" in section [postgres]; did you mean "
                          "\"plugin\"?");
}
END_TEST

static const char *const bad_bools[] = {"maybe", "2", "", "tru", "truex", "-1", "y e s"};

START_TEST(test_bad_boolean)
{
    ck_assert_msg(config_set(&C, "postgres", "create_slot", bad_bools[_i], err, sizeof(err)) == -1,
                  "boolean \"%s\" accepted", bad_bools[_i]);
    ERR_HAS("create_slot");
}
END_TEST

static const char *const bad_ints[] = {
    "abc", "-5", "0", "", "12abc", "1.5", "99999999999999999999", " ", "-0",
};

START_TEST(test_bad_integer)
{
    ck_assert_msg(config_set(&C, "postgres", "status_interval_ms", bad_ints[_i], err, sizeof(err)) == -1,
                  "status_interval_ms \"%s\" accepted (-> %d)", bad_ints[_i],
                  C.pg_status_interval_ms);
    ERR_HAS("status_interval_ms");
}
END_TEST

START_TEST(test_bad_log_level)
{
    ck_assert_int_eq(config_set(&C, "log", "level", "verbose", err, sizeof(err)), -1);
    ERR_HAS("level");
    err[0] = '\0';
    ck_assert_int_eq(config_set(&C, "log", "level", "", err, sizeof(err)), -1);
    ERR_HAS("level");
    ck_assert_int_eq(C.log_level, LOG_INFO);
}
END_TEST

/* [http] listen, [log] format, [postgres] heartbeat_interval_ms and
 * monitor_interval_ms (observability). */
START_TEST(test_observability_keys)
{
    ck_assert_str_eq(C.http_listen, "127.0.0.1:19187");
    ck_assert_int_eq(C.log_format, LOG_FORMAT_TEXT);
    ck_assert_int_eq(C.pg_heartbeat_interval_ms, 0);
    ck_assert_int_eq(C.pg_monitor_interval_ms, 5000);
    /* empty listen disables the server */
    ck_assert_int_eq(config_set(&C, "http", "listen", "", err, sizeof(err)), 0);
    ck_assert_str_eq(C.http_listen, "");
    ck_assert_int_eq(config_set(&C, "http", "listen", "[::]:9000", err, sizeof(err)), 0);
    ck_assert_str_eq(C.http_listen, "[::]:9000");
    ck_assert_int_eq(config_set(&C, "http", "listen", "localhost:19187", err, sizeof(err)), 0);
    ck_assert_str_eq(C.http_listen, "localhost:19187"); /* host names too */
    ck_assert_int_eq(config_set(&C, "http", "listen", "[::]:9000", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "http", "listen", "no_such:19187", err, sizeof(err)),
                     -1);
    ERR_HAS("[http] listen");
    ERR_HAS("numeric IP");
    ck_assert_str_eq(C.http_listen, "[::]:9000");
    /* parsed once, with the text: what httpd_from_config() binds */
    ck_assert_int_eq(C.http_addr.family, AF_INET6);
    ck_assert_int_eq(C.http_addr.port, 9000);
    ck_assert_int_eq(config_set(&C, "http", "listen", "127.0.0.1:99999", err, sizeof(err)),
                     -1);
    ERR_HAS("0 to 65535");
    ck_assert_int_eq(config_set(&C, "http", "port", "1", err, sizeof(err)), -1);
    ERR_HAS("unknown key \"port\" in section [http]");

    ck_assert_int_eq(config_set(&C, "log", "format", "json", err, sizeof(err)), 0);
    ck_assert_int_eq(C.log_format, LOG_FORMAT_JSON);
    ck_assert_int_eq(config_set(&C, "log", "format", "logfmt", err, sizeof(err)), -1);
    ERR_HAS("text|json");
    ck_assert_int_eq(C.log_format, LOG_FORMAT_JSON);

    ck_assert_int_eq(
        config_set(&C, "postgres", "heartbeat_interval_ms", "10000", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_heartbeat_interval_ms, 10000);
    ck_assert_int_eq(
        config_set(&C, "postgres", "heartbeat_interval_ms", "0", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_heartbeat_interval_ms, 0);
    ck_assert_int_eq(
        config_set(&C, "postgres", "heartbeat_interval_ms", "-5", err, sizeof(err)), -1);
    ERR_HAS("heartbeat_interval_ms");
    ERR_HAS("is not a duration");
    ck_assert_int_eq(
        config_set(&C, "postgres", "monitor_interval_ms", "0", err, sizeof(err)), -1);
    ERR_HAS("positive");

    /* intervals below 100 ms are refused when the whole is validated */
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "dbname=x", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "k:9092", err, sizeof(err)),
                     0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "heartbeat_interval_ms", "50", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("heartbeat_interval_ms: 50 is below 100 ms");
    ck_assert_int_eq(config_set(&C, "postgres", "heartbeat_interval_ms", "100", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "monitor_interval_ms", "99", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("monitor_interval_ms: 99 is below 100 ms");

    char *env[] = {"OUTBOXD_HTTP_LISTEN=0.0.0.0:9100", "OUTBOXD_LOG_FORMAT=json", NULL};
    ck_assert_int_eq(config_load_env(&C, env, err, sizeof(err)), 0);
    ck_assert_str_eq(C.http_listen, "0.0.0.0:9100");
    char *bad_env[] = {"OUTBOXD_HTTP_LISTN=0.0.0.0:9100", NULL};
    ck_assert_int_eq(config_load_env(&C, bad_env, err, sizeof(err)), -1);
    ERR_HAS("OUTBOXD_HTTP_LISTN");
}
END_TEST

START_TEST(test_err_small_buffer)
{
    /* A tiny err buffer is NUL-terminated and not overrun. */
    char small[8];
    memset(small, 'Z', sizeof(small));
    ck_assert_int_eq(config_set(&C, "nosuchsection", "a_rather_long_key_name", "x", small, 5), -1);
    ck_assert_ptr_nonnull(memchr(small, '\0', 5));
    ck_assert_int_eq(small[5], 'Z');
}
END_TEST

/* ---- INI file ---- */

static const char *const full_ini =
    "# a comment\n"
    "; another comment\n"
    "\n"
    "[postgres]\n"
    "conninfo = host=db.internal port=5433 dbname=app user=outboxd\n"
    "slot = file_slot\n"
    "publication = file_pub\n"
    "create_slot = no\n"
    "status_interval_ms = 2500\n"
    "\n"
    "[outbox]\n"
    "table = app.events\n"
    "topic = events.${aggregate_type}.v1\n"
    "column.event_id = id\n"
    "column.payload = body\n"
    "\n"
    "[kafka]\n"
    "bootstrap.servers = broker1:9092,broker2:9092\n"
    "acks = 1\n"
    "linger.ms = 5\n"
    "\n"
    "[offsets]\n"
    "file = /var/lib/outboxd/outboxd.offset\n"
    "\n"
    "[log]\n"
    "level = debug\n";

START_TEST(test_load_file)
{
    char path[64];
    write_temp(full_ini, path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_msg(rc == 0, "config_load_file: %s", err);
    ck_assert_pstr_eq(C.pg_conninfo, "host=db.internal port=5433 dbname=app user=outboxd");
    ck_assert_str_eq(C.pg_slot, "file_slot");
    ck_assert_str_eq(C.pg_publication, "file_pub");
    ck_assert_int_eq(C.pg_plugin, PLUGIN_PGOUTPUT);
    ck_assert(C.pg_create_slot == false);
    ck_assert_int_eq(C.pg_status_interval_ms, 2500);
    ck_assert_str_eq(C.outbox.table, "app.events");
    ck_assert_str_eq(C.outbox.topic, "events.${aggregate_type}.v1");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_ID], "id");
    ck_assert_str_eq(C.outbox.columns[OC_PAYLOAD], "body");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_TYPE], "event_type");
    ck_assert_str_eq(C.outbox.columns[OC_AGGREGATE_ID], "aggregate_id");
    ck_assert_pstr_eq(config_kafka_get(&C, "bootstrap.servers"), "broker1:9092,broker2:9092");
    ck_assert_pstr_eq(config_kafka_get(&C, "acks"), "1");
    ck_assert_pstr_eq(config_kafka_get(&C, "linger.ms"), "5");
    ck_assert_pstr_eq(config_kafka_get(&C, "enable.idempotence"), "true");
    ck_assert_pstr_eq(config_kafka_get(&C, "partitioner"), "murmur2_random");
    ck_assert_str_eq(C.offsets_file, "/var/lib/outboxd/outboxd.offset");
    ck_assert_int_eq(C.log_level, LOG_DEBUG);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
}
END_TEST

START_TEST(test_load_file_partial_keeps_defaults)
{
    char path[64];
    write_temp("[postgres]\nslot=only_this\n", path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_msg(rc == 0, "config_load_file: %s", err);
    ck_assert_str_eq(C.pg_slot, "only_this");
    ck_assert_str_eq(C.pg_publication, "outboxd_pub");
    ck_assert_int_eq(C.pg_status_interval_ms, 1000);
    ck_assert_str_eq(C.outbox.table, "public.outbox_events");
    ck_assert_pstr_eq(config_kafka_get(&C, "acks"), "all");
    ck_assert_int_eq(C.log_level, LOG_INFO);
}
END_TEST

START_TEST(test_load_file_over_previous)
{
    /* A file is applied over what is already there. */
    char path[64];
    ck_assert_int_eq(config_set(&C, "postgres", "publication", "preset", err, sizeof(err)), 0);
    write_temp("[postgres]\nslot=s\n", path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(C.pg_publication, "preset");
    ck_assert_str_eq(C.pg_slot, "s");
}
END_TEST

START_TEST(test_load_file_missing)
{
    const char *p = "/tmp/outboxd-test-config-does-not-exist-4711.ini";
    unlink(p);
    ck_assert_int_eq(config_load_file(&C, p, err, sizeof(err)), -1);
    ERR_HAS(p);
}
END_TEST

START_TEST(test_load_file_syntax_error)
{
    char path[64], want[128];
    write_temp("[postgres]\n"
               "slot = a\n"
               "this line has no equals sign\n"
               "publication = b\n",
               path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof(want), "%s:3", path);
    ERR_HAS(want);
}
END_TEST

START_TEST(test_load_file_bad_section_header)
{
    char path[64], want[128];
    write_temp("[postgres]\n"
               "slot = a\n"
               "\n"
               "[outbox\n"
               "table = x.y\n",
               path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof(want), "%s:4", path);
    ERR_HAS(want);
}
END_TEST

START_TEST(test_load_file_bad_value_line)
{
    char path[64], want[128];
    write_temp("[postgres]\n"
               "slot = a\n"
               "# comment\n"
               "\n"
               "create_slot = perhaps\n",
               path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof(want), "%s:5", path);
    ERR_HAS(want);
    ERR_HAS("create_slot");
}
END_TEST

START_TEST(test_load_file_unknown_key_line)
{
    char path[64], want[128];
    write_temp("[postgres]\n"
               "slot = a\n"
               "[nosection]\n"
               "x = 1\n",
               path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof(want), "%s:4", path);
    ERR_HAS(want);
    ERR_HAS("nosection");
}
END_TEST

START_TEST(test_load_file_syntax_error_then_bad_value)
{
    /* Two errors: the one reported must describe the line it names. */
    char path[64], want[128];
    write_temp("[postgres]\n"
               "this line has no equals sign\n"
               "slot = a\n"
               "create_slot = perhaps\n",
               path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof(want), "%s:2", path);
    ERR_HAS(want);
    ck_assert_msg(strstr(err, "create_slot") == NULL,
                  "line 2 reported with the reason of line 4: \"%s\"", err);
}
END_TEST

/* A line longer than a parser's fixed line buffer must be read whole, or
 * rejected: never silently cut, with its tail read as another line. */
START_TEST(test_load_file_long_kafka_line)
{
    char servers[1024] = "", line[128], path[64];
    for (int i = 0; i < 12; i++) {
        snprintf(line, sizeof(line), "%sbroker-%02d.kafka.eu-west-1.internal.example.com:9092",
                 i ? "," : "", i);
        strcat(servers, line);
    }
    ck_assert_uint_gt(strlen(servers), 400);
    char content[1200];
    snprintf(content, sizeof(content), "[kafka]\nbootstrap.servers = %s\nacks = all\n",
             servers);
    write_temp(content, path, sizeof(path));
    size_t n0 = C.nkafka;
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    if (rc == 0) {
        ck_assert_pstr_eq(config_kafka_get(&C, "bootstrap.servers"), servers);
        ck_assert_uint_eq(C.nkafka, n0 + 1); /* no stray keys from a cut line */
    } else {
        ck_assert_int_eq(rc, -1);
        ck_assert(err[0] != '\0');
    }
}
END_TEST

START_TEST(test_load_file_long_conninfo)
{
    char conninfo[600], path[64], content[800];
    snprintf(conninfo, sizeof(conninfo),
             "host=pg-primary.db.eu-west-1.internal.example.com port=5432 dbname=orders "
             "user=outboxd sslmode=verify-full "
             "sslrootcert=/etc/outboxd/tls/root-ca-bundle-2024.pem "
             "sslcert=/etc/outboxd/tls/client-outboxd.pem "
             "sslkey=/etc/outboxd/tls/client-outboxd.key "
             "application_name=outboxd connect_timeout=10");
    ck_assert_uint_gt(strlen(conninfo), 250);
    snprintf(content, sizeof(content), "[postgres]\nconninfo = %s\n", conninfo);
    write_temp(content, path, sizeof(path));
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    /* libinih (Debian's build) reads at most 200 bytes a line. A longer
     * line must be refused with its line number and the way out (the
     * environment or --set), never cut and half-applied. */
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_nonnull(strstr(err, ":2: line longer than"));
    ck_assert_ptr_nonnull(strstr(err, "environment variable or --set"));
    ck_assert_ptr_null(C.pg_conninfo);
    /* The same value through --set is accepted whole. */
    char assignment[700];
    snprintf(assignment, sizeof(assignment), "postgres.conninfo=%s", conninfo);
    ck_assert_int_eq(config_apply_set(&C, assignment, err, sizeof(err)), 0);
    ck_assert_pstr_eq(C.pg_conninfo, conninfo);
}
END_TEST

/* ---- environment ---- */

START_TEST(test_load_env)
{
    char *envp[] = {
        "PATH=/usr/bin:/bin",
        "OUTBOXD_POSTGRES_SLOT=x",
        "HOME=/root",
        "OUTBOXD_OUTBOX_COLUMN_EVENT_ID=id",
        "OUTBOXD_KAFKA_BOOTSTRAP_SERVERS=h:1",
        "OUTBOXD_POSTGRES_STATUS_INTERVAL_MS=333",
        "OUTBOXD_POSTGRES_CREATE_SLOT=off",
        "OUTBOXD_POSTGRES_CONNINFO=host=envhost dbname=d",
        "OUTBOXD_LOG_LEVEL=warn",
        "OUTBOXD_OFFSETS_FILE=/data/off",
        "OUTBOXD_OUTBOX_TABLE=s.t",
        "NOT_OUTBOXD_POSTGRES_PUBLICATION=nope",
        NULL,
    };
    int rc = config_load_env(&C, envp, err, sizeof(err));
    ck_assert_msg(rc == 0, "config_load_env: %s", err);
    ck_assert_str_eq(C.pg_slot, "x");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_ID], "id");
    ck_assert_pstr_eq(config_kafka_get(&C, "bootstrap.servers"), "h:1");
    ck_assert_int_eq(C.pg_status_interval_ms, 333);
    ck_assert(C.pg_create_slot == false);
    ck_assert_pstr_eq(C.pg_conninfo, "host=envhost dbname=d");
    ck_assert_int_eq(C.log_level, LOG_WARN);
    ck_assert_str_eq(C.offsets_file, "/data/off");
    ck_assert_str_eq(C.outbox.table, "s.t");
    /* Untouched. */
    ck_assert_str_eq(C.pg_publication, "outboxd_pub");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_TYPE], "event_type");
    ck_assert_pstr_eq(config_kafka_get(&C, "acks"), "all");
}
END_TEST

START_TEST(test_load_env_uses_envp_not_environ)
{
    setenv("OUTBOXD_POSTGRES_PUBLICATION", "from_environ", 1);
    char *envp[] = {"OUTBOXD_POSTGRES_SLOT=from_envp", NULL};
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), 0);
    ck_assert_str_eq(C.pg_slot, "from_envp");
    ck_assert_str_eq(C.pg_publication, "outboxd_pub");
    unsetenv("OUTBOXD_POSTGRES_PUBLICATION");
}
END_TEST

START_TEST(test_load_env_empty)
{
    char *envp[] = {NULL};
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), 0);
    ck_assert_str_eq(C.pg_slot, "outboxd");
}
END_TEST

START_TEST(test_load_env_bad_value)
{
    char *envp[] = {"OUTBOXD_POSTGRES_STATUS_INTERVAL_MS=soon", NULL};
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
}
END_TEST

START_TEST(test_load_env_kafka_multi_dots)
{
    char *envp[] = {"OUTBOXD_KAFKA_SASL_MECHANISMS=PLAIN",
                    "OUTBOXD_KAFKA_ACKS=0",
                    "OUTBOXD_KAFKA_QUEUE_BUFFERING_MAX_MESSAGES=1000",
                    NULL};
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), 0);
    ck_assert_pstr_eq(config_kafka_get(&C, "sasl.mechanisms"), "PLAIN");
    ck_assert_pstr_eq(config_kafka_get(&C, "acks"), "0");
    ck_assert_pstr_eq(config_kafka_get(&C, "queue.buffering.max.messages"), "1000");
}
END_TEST

START_TEST(test_load_env_unknown_key_in_known_section)
{
    char *envp[] = {"OUTBOXD_POSTGRES_SLTO=x", NULL};
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "OUTBOXD_POSTGRES_SLTO is not a known key") != NULL, "%s", err);
}
END_TEST

/* A variable that matches no section (a misspelt section, here HTPP for
 * HTTP, or another program's OUTBOXD_BUILD_DIR) is not fatal: config_load_env
 * skips it, and config_env_unmatched names it for the caller's warning, so
 * a setting given to a container never silently does nothing. */
START_TEST(test_load_env_unknown_section_skipped_and_named)
{
    char msg[512];
    char *envp[] = {"PATH=/bin", "OUTBOXD_POSTGRES_SLOT=x", "OUTBOXD_HTPP_LISTEN=0.0.0.0:1",
                    "OUTBOXD_NOSUCH", "OUTBOXD_KAFKA_ACKS=1", "XOUTBOXD_Y=2", NULL};
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), 0);
    ck_assert_str_eq(C.pg_slot, "x");
    ck_assert_int_eq(config_env_unmatched(envp, msg, sizeof(msg)), 2);
    ck_assert_msg(strstr(msg, "ignoring environment variable OUTBOXD_HTPP_LISTEN, "
                              "OUTBOXD_NOSUCH: no section matches") == msg,
                  "%s", msg);
    ck_assert_msg(strstr(msg, "sections: postgres, outbox, kafka") != NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "0.0.0.0:1") == NULL, "value shown: %s", msg);

    char *known[] = {"OUTBOXD_POSTGRES_SLOT=y", "OUTBOXD_KAFKA_ACKS=1", "HOME=/", NULL};
    ck_assert_int_eq(config_env_unmatched(known, msg, sizeof(msg)), 0);
    ck_assert_str_eq(msg, "");

    char small[40];
    ck_assert_int_eq(config_env_unmatched(envp, small, sizeof(small)), 2);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
}
END_TEST

/* ---- --set ---- */

START_TEST(test_apply_set)
{
    ck_assert_int_eq(config_apply_set(&C, "postgres.slot=abc", err, sizeof(err)), 0);
    ck_assert_str_eq(C.pg_slot, "abc");
    ck_assert_int_eq(config_apply_set(&C, "postgres.conninfo=host=x port=5", err, sizeof(err)), 0);
    ck_assert_pstr_eq(C.pg_conninfo, "host=x port=5");
    ck_assert_int_eq(config_apply_set(&C, "kafka.bootstrap.servers=h:9092", err, sizeof(err)), 0);
    ck_assert_pstr_eq(config_kafka_get(&C, "bootstrap.servers"), "h:9092");
    ck_assert_int_eq(config_apply_set(&C, "outbox.column.event_id=eid", err, sizeof(err)), 0);
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_ID], "eid");
    ck_assert_int_eq(config_apply_set(&C, "postgres.create_slot=0", err, sizeof(err)), 0);
    ck_assert(C.pg_create_slot == false);
    ck_assert_int_eq(config_apply_set(&C, "postgres.status_interval_ms=42", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_status_interval_ms, 42);
    ck_assert_int_eq(config_apply_set(&C, "log.level=error", err, sizeof(err)), 0);
    ck_assert_int_eq(C.log_level, LOG_ERROR);
    ck_assert_int_eq(config_apply_set(&C, "outbox.topic=a.${b}", err, sizeof(err)), 0);
    ck_assert_str_eq(C.outbox.topic, "a.${b}");
}
END_TEST

START_TEST(test_apply_set_errors)
{
    ck_assert_int_eq(config_apply_set(&C, "postgres.slot", err, sizeof(err)), -1); /* no '=' */
    ck_assert(err[0] != '\0');
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, "slot=abc", err, sizeof(err)), -1); /* no dot */
    ck_assert(err[0] != '\0');
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, "", err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, ".slot=abc", err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, "postgres.=abc", err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, "postgres.nosuchkey=1", err, sizeof(err)), -1);
    ERR_HAS("nosuchkey");
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, "postgres.create_slot=sure", err, sizeof(err)), -1);
    ERR_HAS("create_slot");
    /* "slot=a.b": the first dot is after '=': no section. */
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, "slot=a.b", err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
    ck_assert_str_eq(C.pg_slot, "outboxd");
}
END_TEST

/* ---- precedence ---- */

START_TEST(test_precedence)
{
    char path[64];
    write_temp("[postgres]\n"
               "slot = file_slot\n"
               "publication = file_pub\n"
               "status_interval_ms = 111\n"
               "[kafka]\n"
               "acks = file_acks\n"
               "linger.ms = 1\n"
               "[log]\n"
               "level = error\n",
               path, sizeof(path));
    char *envp[] = {"OUTBOXD_POSTGRES_SLOT=env_slot",
                    "OUTBOXD_POSTGRES_PUBLICATION=env_pub",
                    "OUTBOXD_KAFKA_ACKS=env_acks",
                    "OUTBOXD_LOG_LEVEL=warn",
                    NULL};
    /* The order main() applies them: file, env, --set. */
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "postgres.slot=set_slot", err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "kafka.acks=set_acks", err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "log.level=debug", err, sizeof(err)), 0);

    ck_assert_str_eq(C.pg_slot, "set_slot");             /* set > env > file */
    ck_assert_pstr_eq(config_kafka_get(&C, "acks"), "set_acks");
    ck_assert_int_eq(C.log_level, LOG_DEBUG);
    ck_assert_str_eq(C.pg_publication, "env_pub");        /* env > file */
    ck_assert_int_eq(C.pg_status_interval_ms, 111);        /* file > default */
    ck_assert_pstr_eq(config_kafka_get(&C, "linger.ms"), "1");
    ck_assert_int_eq(C.pg_plugin, PLUGIN_PGOUTPUT);             /* default */
    ck_assert_pstr_eq(config_kafka_get(&C, "enable.idempotence"), "true");
}
END_TEST

/* ---- validate ---- */

START_TEST(test_validate)
{
    /* bootstrap.servers set so that conninfo is the only thing missing. */
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "h:9092", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1); /* no conninfo */
    ck_assert(err[0] != '\0');
    err[0] = '\0';
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "dbname=x", err, sizeof(err)), 0);
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "validate: %s", err);
}
END_TEST

/* kset KEY VALUE: a [kafka] property, asserted to be taken. */
#define KSET(k, v) ck_assert_int_eq(config_set(&C, "kafka", (k), (v), err, sizeof(err)), 0)

/* Issue 15, item 5: an event larger than the producer's queue never left,
 * silently. librdkafka counts value bytes against
 * queue.buffering.max.kbytes, and refuses even into an empty queue a
 * message that does not fit; message.max.bytes above it lets such events
 * through the size check. */
START_TEST(test_validate_message_larger_than_queue)
{
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "h:9092", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "dbname=x", err, sizeof(err)), 0);
    /* defaults: librdkafka's 1,000,000 bytes against outboxd's 16,384 kB */
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "validate: %s", err);
    KSET("message.max.bytes", "16777216");
    ck_assert_msg(config_validate(&C, err, sizeof(err)) == 0, "equal bounds: %s", err);
    KSET("message.max.bytes", "16777217");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("message.max.bytes = 16777217");
    ERR_HAS("queue.buffering.max.kbytes = 16384");
    KSET("message.max.bytes", "100000000");
    KSET("queue.buffering.max.kbytes", "65536");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("message.max.bytes = 100000000");
    ERR_HAS("queue.buffering.max.kbytes = 65536");
    ERR_HAS("97657"); /* the kbytes that would do */
    KSET("queue.buffering.max.kbytes", "97657");
    ck_assert_msg(config_validate(&C, err, sizeof(err)) == 0, "raised queue: %s", err);
    /* a value librdkafka will refuse itself is left to librdkafka's message */
    KSET("queue.buffering.max.kbytes", "lots");
    ck_assert_msg(config_validate(&C, err, sizeof(err)) == 0, "not a number: %s", err);
}
END_TEST

/* [postgres] auth (issue 57): password by default; aws_rds_iam refuses a
 * password of another source (it would win over the token: libpq uses a
 * given password before the password file outboxd fills) and a server
 * that is not authenticated (the token is sent as a cleartext password),
 * each naming what to change. */
START_TEST(test_validate_rds_iam)
{
    const char *good = "host=db.example port=5432 user=outboxd dbname=app "
                       "sslmode=verify-full sslrootcert=/etc/rds-ca.pem";
    char buf[512];
    unsetenv("PGPASSWORD");
    unsetenv("PGSSLMODE");
    unsetenv("PGSSLROOTCERT");
    unsetenv("AWS_DEFAULT_REGION");
    setenv("AWS_REGION", "eu-west-1", 1);
    ck_assert_int_eq(C.pg_auth, PG_AUTH_PASSWORD);
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "h:9092", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "auth", "aws_iam", err, sizeof(err)), -1);
    ERR_HAS("not one of password|aws_rds_iam");
    ck_assert_int_eq(config_set(&C, "postgres", "auth", "aws_rds_iam", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_auth, PG_AUTH_AWS_RDS_IAM);
    ck_assert_str_eq(config_key_value(&C, config_key_index("postgres", "auth"), buf, sizeof(buf)),
                     "aws_rds_iam");
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", good, err, sizeof(err)), 0);
    ck_assert_msg(config_validate(&C, err, sizeof(err)) == 0, "good: %s", err);
    /* a password of another source */
    snprintf(buf, sizeof(buf), "%s password=hunter2", good);
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", buf, err, sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("the conninfo has a password");
    ck_assert_ptr_null(strstr(err, "hunter2"));
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", good, err, sizeof(err)), 0);
    setenv("PGPASSWORD", "hunter2", 1);
    ck_assert_int_eq(config_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("PGPASSWORD is set");
    unsetenv("PGPASSWORD");
    /* TLS that does not authenticate the server */
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo",
                                "host=db.example user=outboxd sslmode=require "
                                "sslrootcert=/etc/rds-ca.pem", err, sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("needs sslmode=verify-full in the conninfo (it is \"require\")");
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo",
                                "host=db.example user=outboxd sslrootcert=/etc/rds-ca.pem", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("it is not set: libpq's default prefer");
    setenv("PGSSLMODE", "verify-full", 1); /* libpq's environment counts */
    ck_assert_msg(config_validate(&C, err, sizeof(err)) == 0, "PGSSLMODE: %s", err);
    unsetenv("PGSSLMODE");
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo",
                                "host=db.example user=outboxd sslmode=verify-full", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("needs sslrootcert");
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", good, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "password_file", "/run/pw", err, sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("password_file are both set");
    ck_assert_int_eq(config_set(&C, "postgres", "password_file", "", err, sizeof(err)), 0);
    unsetenv("AWS_REGION"); /* a token is signed for a region */
    ck_assert_int_eq(config_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("needs an AWS region");
    setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
    ck_assert_msg(config_validate(&C, err, sizeof(err)) == 0, "AWS_DEFAULT_REGION: %s", err);
    unsetenv("AWS_DEFAULT_REGION");
    ck_assert_int_eq(config_set(&C, "aws", "region", "us-east-2", err, sizeof(err)), 0);
    ck_assert_msg(config_validate(&C, err, sizeof(err)) == 0, "[aws] region: %s", err);
    /* password (the default) asks none of this */
    ck_assert_int_eq(config_set(&C, "postgres", "auth", "password", err, sizeof(err)), 0);
    ck_assert_msg(config_validate(&C, err, sizeof(err)) == 0, "password: %s", err);
}
END_TEST

/* More than one produce request in flight lost events on a real 3-broker
 * Kafka (real.faults): refused, naming the key; 1 and the default pass. */
START_TEST(test_validate_in_flight)
{
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "h:9092", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "dbname=x", err, sizeof(err)), 0);
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "default: %s", err);
    KSET("max.in.flight.requests.per.connection", "5");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("max.in.flight.requests.per.connection = 5");
    ERR_HAS("NOT_ENOUGH_REPLICAS");
    KSET("max.in.flight.requests.per.connection", "2");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    KSET("max.in.flight.requests.per.connection", "1");
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "one: %s", err);
}
END_TEST

/* The run-time decision: a value that can never enter the queue. */
START_TEST(test_value_fits_queue)
{
    ck_assert(kafka_queue_max_bytes(&C) == 16384LL * 1024);
    ck_assert(kafka_value_fits_queue(0, 16384LL * 1024));
    ck_assert(kafka_value_fits_queue(16384 * 1024, 16384LL * 1024));
    ck_assert(!kafka_value_fits_queue(16384 * 1024 + 1, 16384LL * 1024));
    ck_assert(!kafka_value_fits_queue(2048, 1024));
    ck_assert(kafka_value_fits_queue((size_t)-1, -1)); /* bound unknown: librdkafka decides */
    KSET("queue.buffering.max.kbytes", "1");
    ck_assert(kafka_queue_max_bytes(&C) == 1024);
}
END_TEST

START_TEST(test_validate_bad_conninfo_hides_password)
{
    /* libpq quotes what it cannot parse; the message must not carry the
     * password, in either form. */
    static const char *const bad[] = {
        "postgres://outboxd:S3cr3tPW@[127.0.0.1:5432/db",
        "postgres://outboxd:S3cr3tPW%zz@localhost/db",
        "host=localhost password='S3cr3tPW",
        "host=localhost password=S3cr3tPW nonsense_key=1",
    };
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "h:9092", err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(config_set(&C, "postgres", "conninfo", bad[i], err, sizeof(err)), 0);
        err[0] = '\0';
        ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
        ck_assert_msg(strstr(err, "conninfo cannot be parsed") != NULL, "%s", err);
        ck_assert_msg(strstr(err, "S3cr3tPW") == NULL, "password in: %s", err);
    }
}
END_TEST

/* plugin, failover and on_slot_loss are parsed once, when set, into
 * their enums (settings.h); a bad value is refused there, naming the key
 * and the value, and leaves the setting as it was. */
START_TEST(test_postgres_words_parsed_once)
{
    static const struct {
        const char *key, *bad, *msg;
    } cases[] = {
        {"plugin", "decoderbufs", "[postgres] plugin: unknown plugin \"decoderbufs\" "
                                  "(supported: pgoutput, wal2json)"},
        {"failover", "maybe", "[postgres] failover: \"maybe\" is not one of auto|on|off"},
        {"on_slot_loss", "Repair",
         "[postgres] on_slot_loss: \"Repair\" is not one of halt|repair"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        err[0] = '\0';
        ck_assert_int_eq(
            config_set(&C, "postgres", cases[i].key, cases[i].bad, err, sizeof(err)), -1);
        ck_assert_str_eq(err, cases[i].msg);
    }
    ck_assert_int_eq(C.pg_plugin, PLUGIN_PGOUTPUT);
    ck_assert_int_eq(C.pg_failover, FAILOVER_AUTO);
    ck_assert_int_eq(C.pg_on_slot_loss, SLOT_LOSS_HALT);
    ck_assert_int_eq(config_set(&C, "postgres", "plugin", "wal2json", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_plugin, PLUGIN_WAL2JSON);
    ck_assert_int_eq(config_set(&C, "postgres", "failover", "YES", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_failover, FAILOVER_ON);
    ck_assert_int_eq(config_set(&C, "postgres", "on_slot_loss", "repair", err, sizeof(err)),
                     0);
    ck_assert_int_eq(C.pg_on_slot_loss, SLOT_LOSS_REPAIR);
    /* printed from the enum (outboxd config): "YES" as "on" */
    static const char *const printed[][2] = {
        {"plugin", "wal2json"}, {"failover", "on"}, {"on_slot_loss", "repair"}};
    char v[64];
    for (size_t i = 0; i < config_key_count(); i++) {
        const struct config_key *k = config_key_at(i);
        for (size_t j = 0; j < 3; j++)
            if (!strcmp(k->section, "postgres") && !strcmp(k->key, printed[j][0]))
                ck_assert_str_eq(config_key_value(&C, i, v, sizeof(v)), printed[j][1]);
    }
}
END_TEST


/* ---- issue 16: units, sources, secret files ---- */

/* The *_ms keys keep taking bare milliseconds and take units too. */
START_TEST(test_ms_keys_take_units)
{
    ck_assert_int_eq(config_set(&C, "postgres", "retry_min_ms", "500", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_retry_min_ms, 500);
    ck_assert_int_eq(config_set(&C, "postgres", "retry_min_ms", "500ms", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_retry_min_ms, 500);
    ck_assert_int_eq(config_set(&C, "postgres", "retry_max_ms", "2m", err, sizeof(err)), 0);
    ck_assert_int_eq(C.pg_retry_max_ms, 120000);
    ck_assert_int_eq(config_set(&C, "polling", "poll_interval_ms", "5s", err, sizeof(err)), 0);
    ck_assert_int_eq(C.poll_interval_ms, 5000);
    ck_assert_int_eq(config_set(&C, "postgres", "status_interval_ms", "2d", err, sizeof(err)),
                     -1);
    ERR_HAS("longer than a day");
    /* keys without _ms still need the unit */
    ck_assert_int_eq(config_set(&C, "polling", "lease", "30", err, sizeof(err)), -1);
    ERR_HAS("is not a duration");
    /* [kafka] *.ms properties reach librdkafka in milliseconds */
    ck_assert_int_eq(config_set(&C, "kafka", "linger.ms", "1s", err, sizeof(err)), 0);
    ck_assert_str_eq(config_kafka_get(&C, "linger.ms"), "1000");
    ck_assert_int_eq(config_set(&C, "kafka", "message.timeout.ms", "30000", err, sizeof(err)),
                     0);
    ck_assert_str_eq(config_kafka_get(&C, "message.timeout.ms"), "30000");
}
END_TEST

static size_t key_at(const char *section, const char *key)
{
    for (size_t i = 0; i < config_key_count(); i++)
        if (!strcmp(config_key_at(i)->section, section) && !strcmp(config_key_at(i)->key, key))
            return i;
    ck_abort_msg("no key %s.%s", section, key);
    return 0;
}

START_TEST(test_sources)
{
    char path[64], v[256];
    write_temp("[postgres]\nslot = from_file\npublication = p_file\n", path, sizeof(path));
    char *envp[] = {"OUTBOXD_POSTGRES_PUBLICATION=p_env", "OUTBOXD_KAFKA_ACKS=1", NULL};
    ck_assert_int_eq(config_load_file(&C, path, err, sizeof(err)), 0);
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "log.level=debug", err, sizeof(err)), 0);
    unlink(path);
    ck_assert_int_eq(C.source[key_at("postgres", "slot")], CONFIG_SRC_FILE);
    ck_assert_int_eq(C.source[key_at("postgres", "publication")], CONFIG_SRC_ENV);
    ck_assert_int_eq(C.source[key_at("log", "level")], CONFIG_SRC_SET);
    ck_assert_int_eq(C.source[key_at("http", "listen")], CONFIG_SRC_DEFAULT);
    ck_assert_str_eq(config_key_value(&C, key_at("log", "level"), v, sizeof(v)), "debug");
    ck_assert_str_eq(config_key_value(&C, key_at("polling", "lease"), v, sizeof(v)), "30s");
    ck_assert_str_eq(config_source_name(CONFIG_SRC_ENV), "environment");
    for (size_t i = 0; i < C.nkafka; i++)
        if (!strcmp(C.kafka[i].key, "acks")) ck_assert_int_eq(C.kafka[i].source, CONFIG_SRC_ENV);
}
END_TEST

/* [delivery]: the mode, its defaults, and what exactly_once refuses. */
START_TEST(test_delivery_keys)
{
    ck_assert_int_eq(C.delivery_mode, DELIVERY_AT_LEAST_ONCE);
    ck_assert_ptr_null(C.delivery_transactional_id);
    ck_assert_str_eq(C.delivery_progress_topic, "outboxd.progress");
    ck_assert_int_eq(C.delivery_txn_max_events, 10000);
    ck_assert_int_eq(C.delivery_txn_max_ms, 100);
    ck_assert_int_eq(config_set(&C, "delivery", "mode", "exactly-once", err, sizeof(err)), -1);
    ERR_HAS("at_least_once");
    ERR_HAS("exactly_once");
    ck_assert_int_eq(C.delivery_mode, DELIVERY_AT_LEAST_ONCE);
    ck_assert_int_eq(config_set(&C, "delivery", "mode", "exactly_once", err, sizeof(err)), 0);
    ck_assert_int_eq(C.delivery_mode, DELIVERY_EXACTLY_ONCE);
    ck_assert_int_eq(config_set(&C, "delivery", "txn_max_ms", "2s", err, sizeof(err)), 0);
    ck_assert_int_eq(C.delivery_txn_max_ms, 2000);
    ck_assert_int_eq(config_set(&C, "delivery", "txn_max_events", "0", err, sizeof(err)), -1);
    ck_assert_int_eq(config_set(&C, "delivery", "transactional_id", "payments-1", err,
                                sizeof(err)), 0);
    ck_assert_str_eq(C.delivery_transactional_id, "payments-1");
    ck_assert_int_eq(config_set(&C, "delivery", "no_such_key", "1", err, sizeof(err)), -1);
    ERR_HAS("no_such_key");

    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "dbname=x", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "k:9092", err, sizeof(err)),
                     0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "delivery", "progress_topic", "", err, sizeof(err)), -1);
    ERR_HAS("progress_topic");
    ck_assert_int_eq(config_set(&C, "delivery", "progress_topic", "p", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "source", "mode", "polling", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("exactly_once needs [source] mode = logical");
    /* an unknown section's error lists [delivery] among the known ones */
    ck_assert_int_eq(config_set(&C, "deliver", "mode", "x", err, sizeof(err)), -1);
    ERR_HAS("delivery");
}
END_TEST

/* [outbox] preset = debezium: the Outbox Event Router's table, columns,
 * topic and header, for every key not set otherwise, wherever the preset
 * and the key are set, and in either order. */
START_TEST(test_outbox_preset)
{
    char path[64], v[256];
    size_t table = key_at("outbox", "table"), topic = key_at("outbox", "topic");
    ck_assert_int_eq(C.outbox.preset, OUTBOX_PRESET_OUTBOXD);
    ck_assert_str_eq(C.outbox.headers, OUTBOX_HEADERS_DEFAULT);
    ck_assert_ptr_null(C.outbox.placement);
    /* the column set before the preset, in the file, stays */
    write_temp("[outbox]\ncolumn.payload = body\npreset = debezium\n", path, sizeof(path));
    ck_assert_int_eq(config_load_file(&C, path, err, sizeof(err)), 0);
    unlink(path);
    ck_assert_int_eq(C.outbox.preset, OUTBOX_PRESET_DEBEZIUM);
    ck_assert_str_eq(C.outbox.table, "public.outbox");
    ck_assert_str_eq(C.outbox.topic, "outbox.event.${aggregatetype}");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_ID], "id");
    ck_assert_str_eq(C.outbox.columns[OC_AGGREGATE_TYPE], "aggregatetype");
    ck_assert_str_eq(C.outbox.columns[OC_AGGREGATE_ID], "aggregateid");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_TYPE], "type");
    ck_assert_str_eq(C.outbox.columns[OC_PAYLOAD], "body");
    ck_assert_str_eq(C.outbox.headers, "event_id:id");
    ck_assert_str_eq(C.outbox.span_column, "tracingspancontext");
    ck_assert_int_eq(C.outbox.source[table], CONFIG_SRC_PRESET);
    ck_assert_int_eq(C.outbox.source[key_at("outbox", "column.payload")], CONFIG_SRC_FILE);
    ck_assert_str_eq(config_source_name(CONFIG_SRC_PRESET), "[outbox] preset");
    ck_assert_str_eq(config_key_value(&C, key_at("outbox", "preset"), v, sizeof(v)), "debezium");
    /* a key set after the preset wins, and a later preset skips it */
    ck_assert_int_eq(config_apply_set(&C, "outbox.topic=events.${aggregatetype}", err,
                                      sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "outbox.preset=outboxd", err, sizeof(err)), 0);
    ck_assert_str_eq(C.outbox.topic, "events.${aggregatetype}");
    ck_assert_int_eq(C.outbox.source[topic], CONFIG_SRC_SET);
    /* ... and the keys only the preset set go back to outboxd's defaults */
    ck_assert_str_eq(C.outbox.table, "public.outbox_events");
    ck_assert_int_eq(C.outbox.source[table], CONFIG_SRC_DEFAULT);
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_ID], "event_id");
    ck_assert_str_eq(C.outbox.headers, OUTBOX_HEADERS_DEFAULT);
    ck_assert_str_eq(C.outbox.columns[OC_PAYLOAD], "body");
    ck_assert_ptr_null(C.outbox.span_column);
    ck_assert_int_eq(config_set(&C, "outbox", "preset", "Debezium", err, sizeof(err)), -1);
    ERR_HAS("outboxd|debezium");
}
END_TEST

/* A header list or placement that cannot be built fails validation, with
 * the reason. */
START_TEST(test_validate_outbox_headers)
{
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "dbname=x", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "h:9092", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "outbox", "additional_placement", "type:header:eventType",
                                err, sizeof(err)), 0);
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "validate: %s", err);
    ck_assert_int_eq(config_set(&C, "outbox", "additional_placement", "type:envelope", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("need [outbox] value_converter = json");
    ck_assert_int_eq(config_set(&C, "outbox", "value_converter", "json", err, sizeof(err)), 0);
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "validate: %s", err);
    ck_assert_int_eq(config_set(&C, "outbox", "value_converter", "JSON", err, sizeof(err)),
                     -1);
    ERR_HAS("[outbox] value_converter: \"JSON\" is not one of string|json");
    ck_assert_int_eq(C.outbox.value_format, VALUE_JSON); /* kept */
    ck_assert_int_eq(config_set(&C, "outbox", "value_converter", "string", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "outbox", "additional_placement", "", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "outbox", "headers", "event_id,payload", err, sizeof(err)),
                     0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox] headers");
}
END_TEST

/* [outbox] timestamp: produce (default) or commit, which the map
 * carries; another value is refused when set; polling mode refuses commit
 * (it has no commit time). */
START_TEST(test_outbox_timestamp)
{
    struct outbox_map m;
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "dbname=x", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "kafka", "bootstrap.servers", "h:9092", err, sizeof(err)), 0);
    ck_assert(!C.outbox.timestamp_commit); /* produce */
    ck_assert_int_eq(config_outbox_map(&C.outbox, &m, err, sizeof(err)), 0);
    ck_assert(!m.timestamp_commit);
    outbox_map_free(&m);
    ck_assert_int_eq(config_set(&C, "outbox", "timestamp", "commit", err, sizeof(err)), 0);
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "validate: %s", err);
    ck_assert_int_eq(config_outbox_map(&C.outbox, &m, err, sizeof(err)), 0);
    ck_assert(m.timestamp_commit);
    outbox_map_free(&m);
    ck_assert_int_eq(config_set(&C, "source", "mode", "polling", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox] timestamp = commit needs [source] mode = logical");
    ck_assert_int_eq(config_set(&C, "outbox", "timestamp", "produce", err, sizeof(err)), 0);
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "validate: %s", err);
    ck_assert_int_eq(config_set(&C, "source", "mode", "logical", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "outbox", "timestamp", "Commit", err, sizeof(err)), -1);
    ERR_HAS("[outbox] timestamp: \"Commit\" is not one of produce|commit");
}
END_TEST

/* Every key of the table has a meaning, and its default is what
 * config_init() applies (the sample file says the truth). */
START_TEST(test_key_table_defaults)
{
    char v[256];
    for (size_t i = 0; i < config_key_count(); i++) {
        const struct config_key *k = config_key_at(i);
        ck_assert_msg(k->meaning && *k->meaning, "%s.%s: no meaning", k->section, k->key);
        ck_assert_str_eq(config_key_value(&C, i, v, sizeof(v)), k->def ? k->def : "");
    }
    ck_assert(config_kafka_key_secret("sasl.password"));
    ck_assert(config_kafka_key_secret("ssl.key.password"));
    ck_assert(config_kafka_key_secret("sasl.oauthbearer.client.secret"));
    ck_assert(!config_kafka_key_secret("sasl.username"));
    ck_assert(!config_kafka_key_secret("sasl.password_file"));
}
END_TEST

START_TEST(test_password_files)
{
    char pg[64], kf[64], v[512];
    write_temp("pg'pw\\x\n", pg, sizeof(pg));
    write_temp("kafka-pw\n", kf, sizeof(kf));
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "postgres://u@db:5433/app", err,
                                sizeof(err)),
                     0);
    ck_assert_int_eq(config_set(&C, "postgres", "password_file", pg, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "kafka", "sasl.password_file", kf, err, sizeof(err)), 0);
    ck_assert_ptr_null(config_kafka_get(&C, "sasl.password_file")); /* not librdkafka's */
    ck_assert_int_eq(config_load_secrets(&C, err, sizeof(err)), 0);
    ck_assert_str_eq(config_kafka_get(&C, "sasl.password"), "kafka-pw");
    ck_assert_ptr_nonnull(strstr(C.pg_conninfo, "password='pg\\'pw\\\\x'"));
    ck_assert_ptr_nonnull(strstr(C.pg_conninfo, "port='5433'"));
    config_key_value(&C, key_at("postgres", "conninfo"), v, sizeof(v));
    ck_assert_msg(!strstr(v, "pg'pw") && strstr(v, "********"), "shown: %s", v);
    ck_assert(!config_file_holds_secret(&C));
    unlink(pg);
    unlink(kf);
}
END_TEST

START_TEST(test_password_file_errors)
{
    char pg[64];
    write_temp("", pg, sizeof(pg));
    ck_assert_int_eq(config_set(&C, "postgres", "conninfo", "host=db", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&C, "postgres", "password_file", pg, err, sizeof(err)), 0);
    ck_assert_int_eq(config_load_secrets(&C, err, sizeof(err)), -1);
    ERR_HAS("password_file");
    ERR_HAS("empty");
    unlink(pg);
    write_temp("pw\n", pg, sizeof(pg));
    ck_assert_int_eq(config_set(&C, "postgres", "password_file", pg, err, sizeof(err)), 0);
    ck_assert_int_eq(
        config_set(&C, "postgres", "conninfo", "host=db password=other", err, sizeof(err)), 0);
    ck_assert_int_eq(config_load_secrets(&C, err, sizeof(err)), -1);
    ERR_HAS("keep one of them");
    ck_assert(!strstr(err, "other"));
    unlink(pg);
    ck_assert_int_eq(config_load_secrets(&C, err, sizeof(err)), -1);
    ERR_HAS("No such file");
}
END_TEST

START_TEST(test_secret_in_file_and_set)
{
    char path[64];
    write_temp("[postgres]\nconninfo = host=db password=x\n", path, sizeof(path));
    ck_assert_int_eq(config_load_file(&C, path, err, sizeof(err)), 0);
    unlink(path);
    ck_assert(config_file_holds_secret(&C));
    ck_assert(!config_set_holds_secret(&C));
    ck_assert_int_eq(config_apply_set(&C, "kafka.sasl.password=y", err, sizeof(err)), 0);
    ck_assert(config_set_holds_secret(&C));
}
END_TEST

/* Credentials in [registry] url: masked wherever the URL is shown
 * (outboxd config, the url's own error), and a secret the file holds. */
START_TEST(test_registry_url_credentials)
{
    char path[64], v[512];
    write_temp("[registry]\nurl = https://bob:S3cr3t@reg.example/apis/ccompat/v7\n", path,
               sizeof(path));
    ck_assert_int_eq(config_load_file(&C, path, err, sizeof(err)), 0);
    unlink(path);
    ck_assert(config_file_holds_secret(&C));
    config_key_value(&C, key_at("registry", "url"), v, sizeof(v));
    ck_assert_str_eq(v, "https://********@reg.example/apis/ccompat/v7");
    ck_assert_int_eq(config_set(&C, "registry", "url", "ftp://bob:S3cr3t@reg", err, sizeof(err)),
                     0);
    ck_assert_int_eq(config_serde_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[registry] url \"ftp://********@reg\" must start with http://");
    ck_assert_ptr_null(strstr(err, "S3cr3t"));
    ck_assert_int_eq(config_set(&C, "registry", "url", "https://reg.example", err, sizeof(err)),
                     0);
    config_key_value(&C, key_at("registry", "url"), v, sizeof(v));
    ck_assert_str_eq(v, "https://reg.example");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_kafka_defaults);
    tcase_add_test(tc, test_validate_in_flight);
    tcase_add_test(tc, test_col_names);
    tcase_add_test(tc, test_init_free_twice);
    tcase_add_test(tc, test_set_postgres);
    tcase_add_test(tc, test_set_value_copied);
    tcase_add_test(tc, test_set_outbox);
    tcase_add_test(tc, test_set_offsets_log);
    tcase_add_test(tc, test_set_kafka);
    tcase_add_test(tc, test_set_many_kafka);
    tcase_add_loop_test(tc, test_booleans, 0, (int)(sizeof(bools) / sizeof(bools[0])));
    tcase_add_test(tc, test_unknown_section);
    tcase_add_test(tc, test_unknown_key);
    tcase_add_loop_test(tc, test_unknown_key_suggestion, 0,
                        (int)(sizeof(typos) / sizeof(typos[0])));
    tcase_add_test(tc, test_unknown_key_suggestion_in_file);
    tcase_add_loop_test(tc, test_bad_boolean, 0, (int)(sizeof(bad_bools) / sizeof(bad_bools[0])));
    tcase_add_loop_test(tc, test_bad_integer, 0, (int)(sizeof(bad_ints) / sizeof(bad_ints[0])));
    tcase_add_test(tc, test_bad_log_level);
    tcase_add_test(tc, test_observability_keys);
    tcase_add_test(tc, test_err_small_buffer);
    tcase_add_test(tc, test_load_file);
    tcase_add_test(tc, test_load_file_partial_keeps_defaults);
    tcase_add_test(tc, test_load_file_over_previous);
    tcase_add_test(tc, test_load_file_missing);
    tcase_add_test(tc, test_load_file_syntax_error);
    tcase_add_test(tc, test_load_file_bad_section_header);
    tcase_add_test(tc, test_load_file_bad_value_line);
    tcase_add_test(tc, test_load_file_unknown_key_line);
    tcase_add_test(tc, test_load_file_syntax_error_then_bad_value);
    tcase_add_test(tc, test_load_file_long_kafka_line);
    tcase_add_test(tc, test_load_file_long_conninfo);
    tcase_add_test(tc, test_load_env);
    tcase_add_test(tc, test_load_env_uses_envp_not_environ);
    tcase_add_test(tc, test_load_env_empty);
    tcase_add_test(tc, test_load_env_bad_value);
    tcase_add_test(tc, test_load_env_kafka_multi_dots);
    tcase_add_test(tc, test_load_env_unknown_key_in_known_section);
    tcase_add_test(tc, test_load_env_unknown_section_skipped_and_named);
    tcase_add_test(tc, test_apply_set);
    tcase_add_test(tc, test_apply_set_errors);
    tcase_add_test(tc, test_precedence);
    tcase_add_test(tc, test_validate);
    tcase_add_test(tc, test_postgres_words_parsed_once);
    tcase_add_test(tc, test_validate_message_larger_than_queue);
    tcase_add_test(tc, test_value_fits_queue);
    tcase_add_test(tc, test_validate_bad_conninfo_hides_password);
    tcase_add_test(tc, test_ms_keys_take_units);
    tcase_add_test(tc, test_sources);
    tcase_add_test(tc, test_key_table_defaults);
    tcase_add_test(tc, test_delivery_keys);
    tcase_add_test(tc, test_outbox_preset);
    tcase_add_test(tc, test_validate_outbox_headers);
    tcase_add_test(tc, test_outbox_timestamp);
    tcase_add_test(tc, test_password_files);
    tcase_add_test(tc, test_password_file_errors);
    tcase_add_test(tc, test_secret_in_file_and_set);
    tcase_add_test(tc, test_registry_url_credentials);
    tcase_add_test(tc, test_validate_rds_iam);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
