/*
 * test_bytea.c - a bytea value's bytes from its text output (include/decode/bytea.h):
 * the hex format, with and without "\x", and the escape format.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytea.h"

static char err[256];
static char out[2048];

#define ERR_HAS(s)                                                                         \
    ck_assert_msg(strstr(err, (s)) != NULL, "err \"%s\" does not mention \"%s\"", err, (s))

/* Every byte value, in both formats and both cases of hex digits. */
START_TEST(test_all_bytes)
{
    char hex[2 + 512 + 1] = "\\x", esc[256 * 4 + 1];
    size_t n = 0;
    for (int i = 0; i < 256; i++) {
        snprintf(hex + 2 + 2 * i, 3, _i ? "%02X" : "%02x", i);
        if (i == '\\')
            n += (size_t)snprintf(esc + n, 3, "\\\\");
        else if (i < 0x20 || i > 0x7e)
            n += (size_t)snprintf(esc + n, 5, "\\%03o", i);
        else
            esc[n++] = (char)i;
    }
    ck_assert_int_eq(bytea_text_decode(hex, strlen(hex), out, err, sizeof(err)), 256);
    for (int i = 0; i < 256; i++) ck_assert_int_eq((unsigned char)out[i], i);
    memset(out, 0, sizeof(out));
    ck_assert_int_eq(bytea_hex_decode(hex + 2, strlen(hex) - 2, out, err, sizeof(err)), 256);
    for (int i = 0; i < 256; i++) ck_assert_int_eq((unsigned char)out[i], i);
    memset(out, 0, sizeof(out));
    ck_assert_int_eq(bytea_text_decode(esc, n, out, err, sizeof(err)), 256);
    for (int i = 0; i < 256; i++) ck_assert_int_eq((unsigned char)out[i], i);
}
END_TEST

/* Escape text as PostgreSQL also accepts it on input: octal escapes of
 * printable bytes, and a text that merely contains "x" after a byte. */
START_TEST(test_escape_forms)
{
    ck_assert_int_eq(bytea_text_decode("", 0, out, err, sizeof(err)), 0);
    ck_assert_int_eq(bytea_text_decode("\\x", 2, out, err, sizeof(err)), 0);
    ck_assert_int_eq(bytea_text_decode("a\\101x", 6, out, err, sizeof(err)), 3);
    ck_assert_mem_eq(out, "aAx", 3);
    ck_assert_int_eq(bytea_text_decode("\\\\x41", 5, out, err, sizeof(err)), 4);
    ck_assert_mem_eq(out, "\\x41", 4); /* "\\" first: escape format, not hex */
    /* in place, hex only */
    char s[] = "616263";
    ck_assert_int_eq(bytea_hex_decode(s, 6, s, err, sizeof(err)), 3);
    ck_assert_mem_eq(s, "abc", 3);
}
END_TEST

START_TEST(test_errors)
{
    ck_assert_int_eq(bytea_text_decode("\\x0", 3, out, err, sizeof(err)), -1);
    ERR_HAS("odd number of digits (1)");
    ck_assert_int_eq(bytea_text_decode("\\x0z", 4, out, err, sizeof(err)), -1);
    ERR_HAS("non-hex character at 1");
    ck_assert_int_eq(bytea_text_decode("ab\\", 3, out, err, sizeof(err)), -1);
    ERR_HAS("bad escape at 2");
    ck_assert_int_eq(bytea_text_decode("\\400", 4, out, err, sizeof(err)), -1);
    ERR_HAS("bad escape at 0");
    ck_assert_int_eq(bytea_text_decode("\\08", 3, out, err, sizeof(err)), -1);
    ERR_HAS("bad escape");
    ck_assert_int_eq(bytea_hex_decode("\\x00", 4, out, err, sizeof(err)), -1);
    ERR_HAS("non-hex character at 0");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bytea");
    TCase *tc = tcase_create("decode");
    tcase_add_loop_test(tc, test_all_bytes, 0, 2);
    tcase_add_test(tc, test_escape_forms);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
