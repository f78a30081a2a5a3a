/*
 * test_decoder.c - the plugin-independent decoder: plugin names
 * (include/config/settings.h), the output_plugin_libraries check, and dispatch
 * to the right decoder.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "decoder.h"

START_TEST(test_plugin_names)
{
    ck_assert_int_eq(plugin_parse("pgoutput"), PLUGIN_PGOUTPUT);
    ck_assert_int_eq(plugin_parse("wal2json"), PLUGIN_WAL2JSON);
    ck_assert_int_eq(plugin_parse("test_decoding"), -1);
    ck_assert_int_eq(plugin_parse(""), -1);
    ck_assert_int_eq(plugin_parse("PGOUTPUT"), -1);
    ck_assert_str_eq(plugin_name(PLUGIN_PGOUTPUT), "pgoutput");
    ck_assert_str_eq(plugin_name(PLUGIN_WAL2JSON), "wal2json");
}
END_TEST

START_TEST(test_plugin_listed)
{
    ck_assert(plugin_listed("pgoutput, test_decoding", "pgoutput"));
    ck_assert(!plugin_listed("pgoutput, test_decoding", "wal2json"));
    ck_assert(plugin_listed("pgoutput,wal2json", "wal2json"));
    ck_assert(plugin_listed("  wal2json  ", "wal2json"));
    /* a quoted whole list is one bogus name on the server; a name inside it
     * still reads as listed here, but a prefix or suffix never matches */
    ck_assert(!plugin_listed("wal2json2, xwal2json", "wal2json"));
    ck_assert(!plugin_listed("pgoutputs", "pgoutput"));
    ck_assert(!plugin_listed("", "pgoutput"));
    ck_assert(!plugin_listed(",,", "pgoutput"));
}
END_TEST

START_TEST(test_dispatch)
{
    char err[256];
    struct repl_msg m;
    /* pgoutput Begin: 'B' final_lsn=0x10 commit_time=0 xid=7 */
    static const unsigned char begin[] = {'B', 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0,
                                          0,   0, 0, 0, 0, 0, 0, 7};
    struct decoder *pg = decoder_new(PLUGIN_PGOUTPUT);
    ck_assert_ptr_nonnull(pg);
    ck_assert_int_eq(decoder_decode(pg, 0, (const char *)begin, sizeof(begin), &m, err,
                                    sizeof(err)),
                     0);
    ck_assert_int_eq(m.kind, RM_BEGIN);
    ck_assert_uint_eq(m.u.begin.final_lsn, 0x10);
    ck_assert_uint_eq(m.u.begin.xid, 7);
    /* the same decoder refuses JSON */
    ck_assert_int_eq(decoder_decode(pg, 0, "{\"action\":\"B\"}", 14, &m, err, sizeof(err)),
                     -1);
    decoder_free(pg);

    struct decoder *wj = decoder_new(PLUGIN_WAL2JSON);
    ck_assert_ptr_nonnull(wj);
    const char *c = "{\"action\":\"C\",\"lsn\":\"0/1571240\",\"nextlsn\":\"0/1571270\"}";
    ck_assert_int_eq(decoder_decode(wj, 0x1571270, c, strlen(c), &m, err, sizeof(err)), 0);
    ck_assert_int_eq(m.kind, RM_COMMIT);
    ck_assert_uint_eq(m.u.commit.commit_lsn, 0x1571240);
    ck_assert_uint_eq(m.u.commit.end_lsn, 0x1571270);
    ck_assert_int_eq(decoder_decode(wj, 0, (const char *)begin, sizeof(begin), &m, err,
                                    sizeof(err)),
                     -1);
    decoder_free(wj);
    decoder_free(NULL);
}
END_TEST

/* What a refused payload was: only a wal2json change or message record can
 * be set aside by the relay (dead-lettered within its transaction). */
START_TEST(test_failure_kind)
{
    char err[256];
    struct repl_msg m;
    struct decoder *wj = decoder_new(PLUGIN_WAL2JSON);
    struct decoder *pg = decoder_new(PLUGIN_PGOUTPUT);
    ck_assert_ptr_nonnull(wj);
    ck_assert_ptr_nonnull(pg);
    const char *bad_insert = "{\"action\":\"I\",\"schema\":\"public\",\"columns\":\"\xff";
    ck_assert_int_eq(decoder_decode(wj, 0, bad_insert, strlen(bad_insert), &m, err,
                                    sizeof(err)),
                     -1);
    ck_assert_int_eq(decoder_failure(wj, bad_insert, strlen(bad_insert)), DF_CHANGE);
    const char *change[] = {"{\"action\":\"U\"", "{\"action\":\"D\"", "{\"action\":\"T\"",
                            "{\"action\":\"M\""};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(decoder_failure(wj, change[i], strlen(change[i])), DF_CHANGE);
    const char *stream[] = {"{\"action\":\"B\",\"lsn\":\"0/", "{\"action\":\"C\"", "{\"action\":\"X\"",
                            "\xff", ""};
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(decoder_failure(wj, stream[i], strlen(stream[i])), DF_STREAM);
    /* pgoutput is binary: a message that does not decode is a protocol error */
    ck_assert_int_eq(decoder_failure(pg, bad_insert, strlen(bad_insert)), DF_STREAM);
    ck_assert_int_eq(decoder_failure(pg, "I", 1), DF_STREAM);
    decoder_free(wj);
    decoder_free(pg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("decoder");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_plugin_names);
    tcase_add_test(tc, test_plugin_listed);
    tcase_add_test(tc, test_dispatch);
    tcase_add_test(tc, test_failure_kind);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
