/*
 * test_config_outboxes.c - [outbox.NAME] sections (config.h): what a named
 * section inherits from the plain [outbox], the environment and --set
 * spellings, and the configurations refused as ambiguous.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_outbox.h"
#include "config_serde.h"

static struct config C;
static char err[512];

static void setup(void)
{
    ck_assert_int_eq(config_init(&C), 0);
    err[0] = '\0';
    ck_assert_int_eq(config_apply_set(&C, "postgres.conninfo=host=db", err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "kafka.bootstrap.servers=k:9092", err, sizeof(err)),
                     0);
}

static void teardown(void) { config_free(&C); }

#define ERR_HAS(s)                                                                        \
    ck_assert_msg(strstr(err, (s)) != NULL, "err \"%s\" does not mention \"%s\"", err, (s))

static void load(const char *content)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/outboxd-test-outboxes.XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
    int rc = config_load_file(&C, path, err, sizeof(err));
    unlink(path);
    ck_assert_msg(rc == 0, "load: %s", err);
}

static size_t key_at(const char *key)
{
    for (size_t i = 0; i < config_key_count(); i++)
        if (!strcmp(config_key_at(i)->section, "outbox") && !strcmp(config_key_at(i)->key, key))
            return i;
    ck_abort_msg("no key %s", key);
    return 0;
}

/* Without named sections the plain [outbox] is the one table. */
START_TEST(test_plain_only)
{
    load("[outbox]\ntable = app.events\n");
    ck_assert_uint_eq(config_outbox_count(&C), 1);
    ck_assert_ptr_eq(config_outbox_at(&C, 0), &C.outbox);
    ck_assert_str_eq(config_outbox_at(&C, 0)->table, "app.events");
    ck_assert_ptr_null(config_outbox_at(&C, 1));
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_find(&C, NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_find(&C, "orders", err, sizeof(err)), -1);
    ERR_HAS("plain [outbox] only");
}
END_TEST

/* A named section takes what the plain [outbox] sets (wherever in the file
 * that is), its own keys win, the rest are defaults; sources say so. */
START_TEST(test_inheritance)
{
    load("[outbox.orders]\ntable = app.orders\ncolumn.payload = body_o\n"
         "[outbox]\ncolumn.payload = body\ntopic = t.${event_type}\n"
         "[outbox.billing]\ntable = app.billing\ntopic = billing\n");
    ck_assert_uint_eq(config_outbox_count(&C), 2);
    const struct outbox_spec *o = config_outbox_at(&C, 0), *b = config_outbox_at(&C, 1);
    ck_assert_str_eq(o->name, "orders");
    ck_assert_str_eq(b->name, "billing");
    ck_assert_str_eq(o->table, "app.orders");
    ck_assert_str_eq(o->columns[OC_PAYLOAD], "body_o"); /* its own */
    ck_assert_int_eq(o->source[key_at("column.payload")], CONFIG_SRC_FILE);
    ck_assert_str_eq(o->topic, "t.${event_type}"); /* set in [outbox] after it */
    ck_assert_int_eq(o->source[key_at("topic")], CONFIG_SRC_INHERITED);
    ck_assert_str_eq(b->columns[OC_PAYLOAD], "body"); /* set in [outbox] before it */
    ck_assert_str_eq(b->topic, "billing");
    ck_assert_str_eq(b->columns[OC_EVENT_ID], "event_id"); /* default */
    ck_assert_int_eq(b->source[key_at("column.event_id")], CONFIG_SRC_DEFAULT);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    char v[256];
    ck_assert_str_eq(config_outbox_key_value(o, key_at("column.payload"), v, sizeof(v)),
                     "body_o");
    ck_assert_str_eq(config_source_name(CONFIG_SRC_INHERITED), "[outbox]");
    ck_assert_int_eq(config_outbox_find(&C, "billing", err, sizeof(err)), 1);
    ck_assert_int_eq(config_outbox_find(&C, NULL, err, sizeof(err)), -1);
    ERR_HAS("orders, billing");
    ck_assert_int_eq(config_outbox_find(&C, "nope", err, sizeof(err)), -1);
    ERR_HAS("no section [outbox.nope]");
}
END_TEST

/* The preset is inherited too, under what either section sets itself. */
START_TEST(test_preset_inherited)
{
    load("[outbox]\npreset = debezium\ncolumn.payload = body\n"
         "[outbox.a]\ntable = s.a\n[outbox.b]\ntable = s.b\npreset = outboxd\n"
         "column.event_id = eid\n");
    const struct outbox_spec *a = config_outbox_at(&C, 0), *b = config_outbox_at(&C, 1);
    ck_assert_int_eq(a->preset, OUTBOX_PRESET_DEBEZIUM);
    ck_assert_str_eq(a->columns[OC_EVENT_ID], "id");         /* the preset's */
    ck_assert_str_eq(a->columns[OC_PAYLOAD], "body");        /* [outbox]'s over the preset */
    ck_assert_str_eq(a->table, "s.a");                       /* its own over the preset */
    ck_assert_int_eq(b->preset, OUTBOX_PRESET_OUTBOXD);
    ck_assert_str_eq(b->columns[OC_EVENT_ID], "eid");
    ck_assert_str_eq(b->columns[OC_AGGREGATE_ID], "aggregate_id"); /* outboxd's */
    ck_assert_str_eq(b->columns[OC_PAYLOAD], "body");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
}
END_TEST

/* --set outbox.NAME.key and OUTBOXD_OUTBOX_<NAME>_<KEY> reach named
 * sections; the environment's NAME matches the file's section whatever
 * its case and '-', or makes the section. */
START_TEST(test_env_and_set)
{
    load("[outbox.billing-v2]\ntable = app.billing\n");
    char *envp[] = {"OUTBOXD_OUTBOX_BILLING_V2_COLUMN_PAYLOAD=b2",
                    "OUTBOXD_OUTBOX_ORDERS_TABLE=app.orders",
                    "OUTBOXD_OUTBOX_ORDERS_TOPIC=o.${event_type}",
                    "OUTBOXD_OUTBOX_HEADERS=event_id, commit_lsn", NULL};
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "outbox.orders.column.aggregate_id=order_id", err,
                                      sizeof(err)),
                     0);
    ck_assert_int_eq(config_apply_set(&C, "outbox.column.event_type=kind", err, sizeof(err)),
                     0);
    ck_assert_uint_eq(config_outbox_count(&C), 2);
    const struct outbox_spec *b = config_outbox_at(&C, 0), *o = config_outbox_at(&C, 1);
    ck_assert_str_eq(b->name, "billing-v2"); /* the file's first */
    ck_assert_str_eq(b->columns[OC_PAYLOAD], "b2");
    ck_assert_int_eq(b->source[key_at("column.payload")], CONFIG_SRC_ENV);
    ck_assert_str_eq(o->name, "orders");
    ck_assert_str_eq(o->table, "app.orders");
    ck_assert_str_eq(o->topic, "o.${event_type}");
    ck_assert_str_eq(o->columns[OC_AGGREGATE_ID], "order_id");
    ck_assert_int_eq(o->source[key_at("column.aggregate_id")], CONFIG_SRC_SET);
    /* plain keys from the environment and --set are inherited */
    ck_assert_str_eq(o->headers, "event_id, commit_lsn");
    ck_assert_str_eq(b->columns[OC_EVENT_TYPE], "kind");
    ck_assert_str_eq(C.outbox.columns[OC_EVENT_TYPE], "kind");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    /* a variable no [outbox] key ends is still an error */
    char *bad[] = {"OUTBOXD_OUTBOX_ORDERS_TABEL=x", NULL};
    ck_assert_int_eq(config_load_env(&C, bad, err, sizeof(err)), -1);
    ERR_HAS("OUTBOXD_OUTBOX_ORDERS_TABEL");
}
END_TEST

/* Sections the environment makes are in the order of their names,
 * whatever the environment's order. */
START_TEST(test_env_order)
{
    char *envp[] = {"OUTBOXD_OUTBOX_ZED_TABLE=s.z", "OUTBOXD_OUTBOX_ALPHA_TABLE=s.a",
                    "OUTBOXD_OUTBOX_MID_TABLE=s.m", NULL};
    ck_assert_int_eq(config_load_env(&C, envp, err, sizeof(err)), 0);
    ck_assert_uint_eq(config_outbox_count(&C), 3);
    ck_assert_str_eq(config_outbox_at(&C, 0)->name, "alpha");
    ck_assert_str_eq(config_outbox_at(&C, 1)->name, "mid");
    ck_assert_str_eq(config_outbox_at(&C, 2)->name, "zed");
}
END_TEST

/* What cannot mean one thing is refused, naming the section. */
START_TEST(test_refused)
{
    ck_assert_int_eq(config_set(&C, "outbox.a b", "table", "x.y", err, sizeof(err)), -1);
    ERR_HAS("letters, digits, '_' and '-'");
    ck_assert_int_eq(config_set(&C, "outbox.", "table", "x.y", err, sizeof(err)), -1);
    ERR_HAS("not a section name");
    ck_assert_int_eq(config_set(&C, "outbox.orders", "tabel", "x.y", err, sizeof(err)), -1);
    ERR_HAS("unknown key \"tabel\" in section [outbox.orders]; did you mean \"table\"?");
    ck_assert_int_eq(config_set(&C, "outbox.orders", "repair_margin", "soon", err,
                                sizeof(err)), -1);
    ERR_HAS("[outbox.orders] repair_margin:");
    ck_assert_int_eq(config_apply_set(&C, "outbox.orders.tabel=x", err, sizeof(err)), -1);
    ERR_HAS("[outbox.orders]");
}
END_TEST

START_TEST(test_refused_at_validation)
{
    /* two sections on one table */
    load("[outbox.a]\ntable = s.t\n[outbox.b]\ntable = t\n[outbox.c]\ntable = public.t\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.b] and [outbox.c] are both on the table public.t");
    config_free(&C);
    setup();
    /* a table in the plain section next to named ones */
    load("[outbox]\ntable = s.t\n[outbox.a]\ntable = s.a\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox] table = s.t is set and there are [outbox.NAME] sections");
    config_free(&C);
    setup();
    /* a named section without its table */
    load("[outbox.a]\ntopic = x\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.a] table is not set");
    config_free(&C);
    setup();
    /* two names with one environment spelling */
    load("[outbox.a-b]\ntable = s.a\n[outbox.A_B]\ntable = s.b\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("OUTBOXD_OUTBOX_A_B_");
    config_free(&C);
    setup();
    /* a bad topic template is named by its section */
    load("[outbox.a]\ntable = s.a\ntopic = x.${\n[outbox.b]\ntable = s.b\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.a]");
    config_free(&C);
    setup();
    /* polling serves one table; repair covers several */
    load("[outbox.a]\ntable = s.a\n[outbox.b]\ntable = s.b\n[source]\nmode = polling\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("mode = polling serves one outbox table");
    ck_assert_int_eq(config_apply_set(&C, "source.mode=logical", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "postgres.on_slot_loss=repair", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
}
END_TEST

/* message_prefix is per section: each its own (the set finds the section
 * by it), one prefix in two sections refused, naming both, and when it
 * is inherited from [outbox], saying so. */
START_TEST(test_message_prefix_per_section)
{
    load("[outbox.a]\ntable = s.a\nmessage_prefix = pa\n[outbox.b]\ntable = s.b\n"
         "message_prefix = pb\n[outbox.c]\ntable = s.c\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    struct outbox_set set;
    ck_assert_int_eq(config_outbox_set(&C, &set, err, sizeof(err)), 0);
    ck_assert_int_eq(outbox_set_find_prefix(&set, "pb"), 1);
    ck_assert_int_eq(outbox_set_find_prefix(&set, "pa"), 0);
    ck_assert_int_eq(outbox_set_find_prefix(&set, "pc"), -1);
    ck_assert_int_eq(outbox_set_find_prefix(&set, NULL), -1);
    ck_assert(outbox_set_has_prefix(&set));
    outbox_set_free(&set);
    ck_assert_int_eq(config_apply_set(&C, "outbox.c.message_prefix=pa", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.a] and [outbox.c] both have message_prefix = pa");
    ck_assert_ptr_null(strstr(err, "inherited"));
    config_free(&C);
    setup();
    load("[outbox]\nmessage_prefix = p\n[outbox.a]\ntable = s.a\n[outbox.b]\ntable = s.b\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.a] and [outbox.b] both have message_prefix = p");
    ERR_HAS("inherited from [outbox]");
    ck_assert_int_eq(config_apply_set(&C, "outbox.b.message_prefix=q", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    config_free(&C);
    setup();
    /* the heartbeat's prefix is refused, naming the section */
    load("[outbox.a]\ntable = s.a\nmessage_prefix = outboxd.heartbeat\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.a] message_prefix \"outboxd.heartbeat\"");
    config_free(&C);
    setup();
    /* polling reads tables only */
    load("[outbox]\nmessage_prefix = p\n[source]\nmode = polling\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("message_prefix needs [source] mode = logical");
}
END_TEST

/* One named section alone is that table (anything but polling refusing
 * several works with it). */
START_TEST(test_one_named)
{
    load("[outbox.only]\ntable = s.only\n[source]\nmode = polling\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_find(&C, NULL, err, sizeof(err)), 0);
    struct outbox_set set;
    ck_assert_int_eq(config_outbox_set(&C, &set, err, sizeof(err)), 0);
    ck_assert_uint_eq(set.n, 1);
    ck_assert_str_eq(set.maps[0].table, "only");
    ck_assert_str_eq(set.names[0], "only");
    outbox_set_free(&set);
}
END_TEST

/* The registry converters' keys: read per section, inherited from
 * [outbox], and refused with a reason naming the section and key. */
START_TEST(test_registry_keys)
{
    load("[outbox]\nvalue_converter = avro\n"
         "[outbox.a]\ntable = public.a\nvalue_schema_version = 3\n"
         "[outbox.b]\ntable = public.b\nvalue_converter = protobuf\n"
         "value_message_index = 1.0\nvalue_subject_strategy = RecordNameStrategy\n"
         "value_record_name = com.acme.${event_type}\n");
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.a] value_converter = avro needs [registry] url");
    ck_assert_int_eq(config_apply_set(&C, "registry.url=http://r:8081", err, sizeof(err)), 0);
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "%s", err);
    struct serde_spec a, b;
    ck_assert_int_eq(config_serde_spec(config_outbox_at(&C, 0), &a, err, sizeof(err)), 0);
    ck_assert_int_eq(a.format, VALUE_AVRO); /* inherited */
    ck_assert_int_eq(a.version, 3);
    ck_assert_int_eq(a.strategy, SUBJECT_TOPIC);
    ck_assert_int_eq(config_serde_spec(config_outbox_at(&C, 1), &b, err, sizeof(err)), 0);
    ck_assert_int_eq(b.format, VALUE_PROTOBUF);
    ck_assert_int_eq(b.version, REGISTRY_LATEST);
    ck_assert_int_eq(b.strategy, SUBJECT_RECORD);
    ck_assert_str_eq(b.record_name, "com.acme.${event_type}");
    ck_assert_int_eq(b.nindexes, 2);
    ck_assert_int_eq(b.indexes[0], 1);
    ck_assert_int_eq(b.indexes[1], 0);

    ck_assert_int_eq(config_apply_set(&C, "outbox.a.value_schema_version=first", err,
                                      sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.a] value_schema_version = \"first\": latest or a version number");
    ck_assert_int_eq(config_apply_set(&C, "outbox.a.value_schema_version=latest", err,
                                      sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "outbox.b.value_message_index=1.x", err, sizeof(err)),
                     0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[outbox.b] value_message_index = \"1.x\"");
    ck_assert_int_eq(config_apply_set(&C, "outbox.b.value_message_index=0", err, sizeof(err)),
                     0);
    ck_assert_int_eq(config_apply_set(&C, "outbox.b.value_record_name=", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("value_subject_strategy = record needs value_record_name");
    ck_assert_int_eq(config_apply_set(&C, "outbox.b.value_subject_strategy=topic", err,
                                      sizeof(err)), 0);
    ck_assert_int_eq(config_apply_set(&C, "registry.url=registry:8081", err, sizeof(err)), 0);
    ck_assert_int_eq(config_outbox_validate(&C, err, sizeof(err)), -1);
    ERR_HAS("[registry] url \"registry:8081\" must start with http:// or https://");
    /* polling mode takes them too (one table there) */
    config_free(&C);
    setup();
    load("[outbox]\nvalue_converter = json_schema\n[registry]\nurl = https://r\n"
         "[source]\nmode = polling\n");
    ck_assert_msg(config_outbox_validate(&C, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(config_apply_set(&C, "outbox.value_converter=xml", err, sizeof(err)), -1);
    ERR_HAS("\"xml\" is not one of string|json|avro|json_schema|protobuf");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config_outboxes");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_plain_only);
    tcase_add_test(tc, test_inheritance);
    tcase_add_test(tc, test_preset_inherited);
    tcase_add_test(tc, test_env_and_set);
    tcase_add_test(tc, test_env_order);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_refused_at_validation);
    tcase_add_test(tc, test_one_named);
    tcase_add_test(tc, test_message_prefix_per_section);
    tcase_add_test(tc, test_registry_keys);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
