/*
 * test_heartbeat.c - heartbeat messages (include/message/heartbeat.h): the content
 * outboxd writes with pg_logical_emit_message(), recognising it when it
 * comes back, and both decoders on heartbeats captured from a real
 * PostgreSQL 15 server (pg_logical_emit_message(false, 'outboxd.heartbeat',
 * 'slot=w sent_us=123'), read with pg_logical_slot_peek_binary_changes()
 * for pgoutput with messages 'true', and pg_logical_slot_peek_changes()
 * for wal2json format-version 2 with outboxd's options).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"
#include "heartbeat.h"

/* pgoutput 'M': flags 0 (not transactional), LSN 0/1517A70, prefix,
 * content length 18, content. */
static const unsigned char cap_pgoutput_heartbeat[] = {
    0x4d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x51, 0x7a, 0x70, 0x6f, 0x75, 0x74,
    0x62, 0x6f, 0x78, 0x64, 0x2e, 0x68, 0x65, 0x61, 0x72, 0x74, 0x62, 0x65, 0x61,
    0x74, 0x00, 0x00, 0x00, 0x00, 0x12, 0x73, 0x6c, 0x6f, 0x74, 0x3d, 0x77, 0x20,
    0x73, 0x65, 0x6e, 0x74, 0x5f, 0x75, 0x73, 0x3d, 0x31, 0x32, 0x33};

static const char cap_wal2json_heartbeat[] =
    "{\"action\":\"M\",\"timestamp\":null,\"lsn\":\"0/1517A70\",\"transactional\":false,"
    "\"prefix\":\"outboxd.heartbeat\",\"content\":\"slot=w sent_us=123\"}";

START_TEST(test_content_round_trip)
{
    char buf[128];
    int64_t t = 0;
    heartbeat_content("outboxd", INT64_C(1796010778546186), buf, sizeof(buf));
    ck_assert_str_eq(buf, "slot=outboxd sent_us=1796010778546186");
    ck_assert(heartbeat_parse(HEARTBEAT_PREFIX, buf, strlen(buf), "outboxd", &t));
    ck_assert_int_eq(t, INT64_C(1796010778546186));
}
END_TEST

START_TEST(test_parse_rejects)
{
    int64_t t = 42;
    const char *ok = "slot=s1 sent_us=5";
    ck_assert(heartbeat_parse(HEARTBEAT_PREFIX, ok, strlen(ok), "s1", &t));
    ck_assert_int_eq(t, 5);
    t = 42;
    /* another slot's heartbeat (two outboxd on one database) */
    ck_assert(!heartbeat_parse(HEARTBEAT_PREFIX, ok, strlen(ok), "s", &t));
    ck_assert(!heartbeat_parse(HEARTBEAT_PREFIX, ok, strlen(ok), "s10", &t));
    /* another prefix, or none */
    ck_assert(!heartbeat_parse("outboxd.heartbeat2", ok, strlen(ok), "s1", &t));
    ck_assert(!heartbeat_parse("", ok, strlen(ok), "s1", &t));
    ck_assert(!heartbeat_parse(NULL, ok, strlen(ok), "s1", &t));
    ck_assert(!heartbeat_parse(HEARTBEAT_PREFIX, NULL, 0, "s1", &t));
    /* malformed contents */
    static const char *const bad[] = {
        "",
        "slot=s1",
        "slot=s1 sent_us=",
        "slot=s1 sent_us=12x",
        "slot=s1 sent_us=-1",
        "slot=s1  sent_us=1",
        "SLOT=s1 sent_us=1",
        "slot=s1 sent_us=1234567890123456789", /* 19 digits: may overflow */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!heartbeat_parse(HEARTBEAT_PREFIX, bad[i], strlen(bad[i]), "s1", &t),
                      "accepted \"%s\"", bad[i]);
    /* the length is what counts, not a NUL: content is not NUL-terminated */
    const char *longer = "slot=s1 sent_us=77 trailing";
    ck_assert(heartbeat_parse(HEARTBEAT_PREFIX, longer, 18, "s1", &t));
    ck_assert_int_eq(t, 77);
    ck_assert(!heartbeat_parse(HEARTBEAT_PREFIX, longer, strlen(longer), "s1", &t));
    ck_assert_int_eq(t, 77); /* untouched by the failures */
}
END_TEST

/* Decodes buf (copied, so that reads past len would be caught by
 * valgrind) with plugin; returns the message. */
static struct repl_msg decode_copy(enum plugin_kind plugin, const void *buf, size_t len,
                                   struct decoder **dec, char **copy)
{
    char err[512];
    struct repl_msg m;
    *dec = decoder_new(plugin);
    ck_assert_ptr_nonnull(*dec);
    *copy = malloc(len);
    memcpy(*copy, buf, len);
    int rc = decoder_decode(*dec, UINT64_C(0x1517A70), *copy, len, &m, err, sizeof(err));
    ck_assert_msg(rc == 0, "decode failed: %s", err);
    return m;
}

START_TEST(test_captured_pgoutput)
{
    struct decoder *dec;
    char *copy;
    struct repl_msg m = decode_copy(PLUGIN_PGOUTPUT, cap_pgoutput_heartbeat,
                                    sizeof(cap_pgoutput_heartbeat), &dec, &copy);
    int64_t t = 0;
    ck_assert_int_eq(m.kind, RM_MESSAGE);
    ck_assert_uint_eq(m.u.message.flags, 0);
    ck_assert_uint_eq(m.u.message.lsn, UINT64_C(0x1517A70));
    ck_assert(
        heartbeat_parse(m.u.message.prefix, m.u.message.content, m.u.message.len, "w", &t));
    ck_assert_int_eq(t, 123);
    ck_assert(!heartbeat_parse(m.u.message.prefix, m.u.message.content, m.u.message.len,
                               "outboxd", &t));
    decoder_free(dec);
    free(copy);
}
END_TEST

START_TEST(test_captured_wal2json)
{
    struct decoder *dec;
    char *copy;
    struct repl_msg m = decode_copy(PLUGIN_WAL2JSON, cap_wal2json_heartbeat,
                                    strlen(cap_wal2json_heartbeat), &dec, &copy);
    int64_t t = 0;
    ck_assert_int_eq(m.kind, RM_MESSAGE);
    ck_assert_uint_eq(m.u.message.flags, 0);
    ck_assert(
        heartbeat_parse(m.u.message.prefix, m.u.message.content, m.u.message.len, "w", &t));
    ck_assert_int_eq(t, 123);
    decoder_free(dec);
    free(copy);
}
END_TEST

/* Every truncation of the captured pgoutput heartbeat is an error, never
 * a read past the end (valgrind run) or a heartbeat. */
START_TEST(test_truncated_pgoutput)
{
    char err[512];
    struct decoder *dec = decoder_new(PLUGIN_PGOUTPUT);
    for (size_t n = 0; n < sizeof(cap_pgoutput_heartbeat); n++) {
        char *copy = malloc(n ? n : 1);
        memcpy(copy, cap_pgoutput_heartbeat, n);
        struct repl_msg m;
        int rc = decoder_decode(dec, 1, copy, n, &m, err, sizeof(err));
        ck_assert_msg(rc != 0, "truncation to %zu bytes decoded", n);
        free(copy);
    }
    decoder_free(dec);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("heartbeat");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_content_round_trip);
    tcase_add_test(tc, test_parse_rejects);
    tcase_add_test(tc, test_captured_pgoutput);
    tcase_add_test(tc, test_captured_wal2json);
    tcase_add_test(tc, test_truncated_pgoutput);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
