/* quiet_check.h - Check assertions for the unit tests' hot loops.
 *
 * Check records the source line of every ck_assert* that passes
 * (_mark_point: one write(2) to the channel it reads results from). The
 * model runs assert millions of times: test_tracker spent 6 s in those
 * system calls instead of 0.2 s computing, and under AddressSanitizer it
 * ran past its 120 s ctest timeout. These macros test the condition
 * themselves and call into Check only when it fails, with the failing
 * values and this line; every argument is evaluated exactly once.
 * Inside loops that run thousands of times, use qck_*; elsewhere,
 * Check's own ck_* (their last passing line helps when a test crashes).
 */
#ifndef OUTBOXD_TESTS_QUIET_CHECK_H
#define OUTBOXD_TESTS_QUIET_CHECK_H

#include <check.h>
#include <stdint.h>
#include <string.h>

#define qck_assert(C)                                                        \
    do {                                                                     \
        if (!(C)) ck_abort_msg("Assertion '%s' failed", #C);                 \
    } while (0)

#define qck_assert_msg(C, ...)                                               \
    do {                                                                     \
        if (!(C)) ck_abort_msg(__VA_ARGS__);                                 \
    } while (0)

#define qck_assert_cmp_(T, F, X, OP, Y)                                      \
    do {                                                                     \
        T qx_ = (T)(X), qy_ = (T)(Y);                                        \
        if (!(qx_ OP qy_))                                                   \
            ck_abort_msg("Assertion '%s %s %s' failed: %s == %" F            \
                         ", %s == %" F,                                      \
                         #X, #OP, #Y, #X, qx_, #Y, qy_);                     \
    } while (0)

#define qck_assert_int_eq(X, Y) qck_assert_cmp_(intmax_t, "jd", X, ==, Y)
#define qck_assert_int_ne(X, Y) qck_assert_cmp_(intmax_t, "jd", X, !=, Y)
#define qck_assert_int_ge(X, Y) qck_assert_cmp_(intmax_t, "jd", X, >=, Y)
#define qck_assert_int_gt(X, Y) qck_assert_cmp_(intmax_t, "jd", X, >, Y)
#define qck_assert_uint_eq(X, Y) qck_assert_cmp_(uintmax_t, "ju", X, ==, Y)
#define qck_assert_uint_ne(X, Y) qck_assert_cmp_(uintmax_t, "ju", X, !=, Y)
#define qck_assert_uint_ge(X, Y) qck_assert_cmp_(uintmax_t, "ju", X, >=, Y)

#define qck_assert_str_eq(X, Y)                                              \
    do {                                                                     \
        const char *qx_ = (X), *qy_ = (Y);                                   \
        if (strcmp(qx_, qy_) != 0)                                           \
            ck_abort_msg("Assertion '%s == %s' failed: %s == \"%s\", "       \
                         "%s == \"%s\"",                                     \
                         #X, #Y, #X, qx_, #Y, qy_);                          \
    } while (0)

#define qck_assert_ptr_null(X)                                               \
    do {                                                                     \
        const void *qx_ = (X);                                               \
        if (qx_ != NULL)                                                     \
            ck_abort_msg("Assertion '%s == NULL' failed: %p", #X, qx_);      \
    } while (0)

#define qck_assert_ptr_eq(X, Y)                                              \
    do {                                                                     \
        const void *qx_ = (X), *qy_ = (Y);                                   \
        if (qx_ != qy_)                                                      \
            ck_abort_msg("Assertion '%s == %s' failed: %p != %p", #X, #Y,    \
                         qx_, qy_);                                          \
    } while (0)

#define qck_assert_ptr_nonnull(X)                                            \
    do {                                                                     \
        if ((X) == NULL) ck_abort_msg("Assertion '%s != NULL' failed", #X);  \
    } while (0)

#endif
