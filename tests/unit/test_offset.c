/*
 * test_offset.c - the offset file (include/ack/offset.h): format 2 key=value
 * lines, format 3 with progress inside a transaction (format 1, a bare LSN,
 * still read), written atomically (temp file +
 * rename), read back as 1 / 0 / -1; the pure parser and formatter.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "offset.h"

/* A format 2 state for lsn on a typical stream. */
static struct offset_state state_at(lsn_t lsn)
{
    struct offset_state st = {.format = 2, .lsn = lsn, .has_identity = true,
                              .timeline = 1};
    snprintf(st.system, sizeof(st.system), "7312345678901234567");
    snprintf(st.database, sizeof(st.database), "outbox");
    snprintf(st.slot, sizeof(st.slot), "outboxd");
    snprintf(st.plugin, sizeof(st.plugin), "pgoutput");
    return st;
}

static int wr(const char *p, lsn_t lsn, char *err, size_t errlen)
{
    struct offset_state st = state_at(lsn);
    return offset_write(p, &st, err, errlen);
}

static int rd(const char *p, lsn_t *v, char *err, size_t errlen)
{
    struct offset_state st;
    int rc = offset_read(p, &st, err, errlen);
    if (rc == 1) *v = st.lsn;
    return rc;
}

static char dir[256];
static char path[512];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/outboxd-test-offset.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/outboxd.offset", dir);
}

static void rm_rf(const char *d)
{
    DIR *dh = opendir(d);
    if (!dh) return;
    struct dirent *de;
    char p[1024];
    while ((de = readdir(dh)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof(p), "%s/%s", d, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_rf(p);
        else
            unlink(p);
    }
    closedir(dh);
    rmdir(d);
}

static void teardown(void) { rm_rf(dir); }

/* Whole file content into buf (NUL-terminated); returns length or -1. */
static long slurp(const char *p, char *buf, size_t cap)
{
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

static void spit(const char *p, const char *data, size_t len)
{
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Names of the entries of dir, joined with ',' (sorted is not needed: we
 * expect at most one). Returns the count. */
static int list_dir(char *names, size_t cap)
{
    DIR *dh = opendir(dir);
    ck_assert_ptr_nonnull(dh);
    int n = 0;
    names[0] = '\0';
    struct dirent *de;
    while ((de = readdir(dh)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n++) strncat(names, ",", cap - strlen(names) - 1);
        strncat(names, de->d_name, cap - strlen(names) - 1);
    }
    closedir(dh);
    return n;
}

START_TEST(test_round_trip)
{
    char err[256] = "";
    lsn_t v = 0;
    ck_assert_int_eq(wr(path, 0x16B374D848ULL, err, sizeof(err)), 0);
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), 1);
    ck_assert_uint_eq(v, 0x16B374D848ULL);
}
END_TEST

START_TEST(test_round_trip_edges)
{
    static const lsn_t vals[] = {0, 1, 0xFFFFFFFFULL, 0x100000000ULL,
                                 UINT64_MAX};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char err[256] = "";
        lsn_t v = ~vals[i];
        ck_assert_int_eq(wr(path, vals[i], err, sizeof(err)), 0);
        ck_assert_int_eq(rd(path, &v, err, sizeof(err)), 1);
        ck_assert_uint_eq(v, vals[i]);
    }
}
END_TEST

START_TEST(test_missing_file)
{
    char err[256] = "";
    lsn_t v = 0x1234;
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), 0);
    char p2[600];
    snprintf(p2, sizeof(p2), "%s/no/such/dir/offset", dir);
    ck_assert_int_eq(rd(p2, &v, err, sizeof(err)), 0);
}
END_TEST

#define HEADER                                                                       \
    "# outboxd offset file: the last position whose events were all ACKed\n"          \
    "# by Kafka, and the stream it belongs to (see README). Do not edit.\n"

START_TEST(test_exact_content)
{
    char err[256] = "", buf[1024];
    ck_assert_int_eq(wr(path, 0x16B374D848ULL, err, sizeof(err)), 0);
    slurp(path, buf, sizeof(buf));
    ck_assert_str_eq(buf, HEADER "format=2\nlsn=16/B374D848\nsystem=7312345678901234567\n"
                          "timeline=1\ndatabase=outbox\nslot=outboxd\nplugin=pgoutput\n");
    ck_assert_int_eq(wr(path, UINT64_MAX, err, sizeof(err)), 0);
    slurp(path, buf, sizeof(buf));
    ck_assert_ptr_nonnull(strstr(buf, "\nlsn=FFFFFFFF/FFFFFFFF\n"));
    ck_assert_int_eq(wr(path, 0xA0000000BULL, err, sizeof(err)), 0);
    slurp(path, buf, sizeof(buf));
    ck_assert_ptr_nonnull(strstr(buf, "\nlsn=A/B\n"));
}
END_TEST

START_TEST(test_overwrite)
{
    char err[256] = "", buf[1024];
    lsn_t v = 0;
    /* A longer value first, then a shorter one: no stale tail may remain. */
    ck_assert_int_eq(wr(path, 0xFFFFFFFFFFFFFFF0ULL, err, sizeof(err)), 0);
    ck_assert_int_eq(wr(path, 0x1A2BULL, err, sizeof(err)), 0);
    slurp(path, buf, sizeof(buf));
    ck_assert_ptr_nonnull(strstr(buf, "\nlsn=0/1A2B\n"));
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), 1);
    ck_assert_uint_eq(v, 0x1A2BULL);

    for (lsn_t l = 0x100; l < 0x100 + 50; l++) {
        ck_assert_int_eq(wr(path, l << 24, err, sizeof(err)), 0);
        ck_assert_int_eq(rd(path, &v, err, sizeof(err)), 1);
        ck_assert_uint_eq(v, l << 24);
    }
}
END_TEST

START_TEST(test_no_temp_files_left)
{
    char err[256] = "", names[1024];
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(wr(path, (lsn_t)i * 0x1000001ULL, err, sizeof(err)), 0);
    ck_assert_int_eq(list_dir(names, sizeof(names)), 1);
    ck_assert_str_eq(names, "outboxd.offset");
}
END_TEST

START_TEST(test_permissions_regular_file)
{
    /* 0600 whatever the umask (the file names the database and the slot). */
    char err[256] = "";
    mode_t old = umask(0);
    int rc = wr(path, 77, err, sizeof(err));
    umask(old);
    ck_assert_int_eq(rc, 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(st.st_mode & 0777, 0600);
}
END_TEST

START_TEST(test_temp_file_never_followed)
{
    /* A symbolic link where the temporary file goes (planted by someone
     * else, or left over) is neither followed nor written through: its
     * target keeps its content, and the offset file is written. */
    char err[256] = "", tmp[600], target[600], buf[64];
    lsn_t v = 0;
    snprintf(target, sizeof(target), "%s/target", dir);
    spit(target, "keep", 4);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    ck_assert_int_eq(symlink(target, tmp), 0);
    ck_assert_int_eq(wr(path, 0x55, err, sizeof(err)), 0);
    ck_assert_int_eq(slurp(target, buf, sizeof(buf)), 4);
    ck_assert_str_eq(buf, "keep");
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), 1);
    ck_assert_uint_eq(v, 0x55);
    struct stat st;
    ck_assert_int_eq(lstat(tmp, &st), -1); /* nothing left behind */
}
END_TEST

static const char *const corrupt[] = {
    "garbage\n",        "",          "\n",        "16B374D848\n", "16/\n",
    "/B374D848\n",      "1/2/3\n",   "G/1\n",     "16/B374D848 junk\n",
    "123456789/0\n",    "16/B374D848\n17/0\n", "=\n", "lsn=0/1\n",
    "format=2\nlsn=0/1\n",
};

START_TEST(test_corrupt)
{
    const char *c = corrupt[_i];
    char err[256] = "";
    lsn_t v = 0x5555;
    spit(path, c, strlen(c));
    ck_assert_msg(rd(path, &v, err, sizeof(err)) == -1,
                  "offset_read accepted \"%s\"", c);
    ck_assert_msg(err[0] != '\0', "no reason for corrupt content \"%s\"", c);
}
END_TEST

START_TEST(test_unreadable_is_error)
{
    /* The path is a directory: it exists but cannot be read as a file. */
    char err[256] = "";
    lsn_t v = 0;
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
}
END_TEST

START_TEST(test_write_into_missing_dir_fails)
{
    char err[256] = "", p2[600];
    snprintf(p2, sizeof(p2), "%s/missing-subdir/outboxd.offset", dir);
    ck_assert_int_eq(wr(p2, 42, err, sizeof(err)), -1);
    ck_assert(err[0] != '\0');
}
END_TEST

START_TEST(test_write_failure_keeps_old_value)
{
    /* The temp file cannot be created (a directory occupies its name; this
     * fails for root too, unlike a permission bit): the write fails and the
     * old file is still readable with its old value. */
    char err[256] = "", tmp[600];
    lsn_t v = 0;
    ck_assert_int_eq(wr(path, 0x2A00000001ULL, err, sizeof(err)), 0);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    int rc = wr(path, 0x99, err, sizeof(err));
    rmdir(tmp);
    ck_assert_int_eq(rc, -1);
    ck_assert(err[0] != '\0');
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), 1);
    ck_assert_uint_eq(v, 0x2A00000001ULL);
}
END_TEST

START_TEST(test_relative_path)
{
    /* A bare file name (the default "outboxd.offset") is relative to the
     * working directory: the temp file must land in the same directory. */
    char err[256] = "", names[1024];
    lsn_t v = 0;
    char cwd[1024];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
    ck_assert_int_eq(chdir(dir), 0);
    int w = wr("outboxd.offset", 0x300000004ULL, err, sizeof(err));
    int r = rd("outboxd.offset", &v, err, sizeof(err));
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_int_eq(w, 0);
    ck_assert_int_eq(r, 1);
    ck_assert_uint_eq(v, 0x300000004ULL);
    ck_assert_int_eq(list_dir(names, sizeof(names)), 1);
    ck_assert_str_eq(names, "outboxd.offset");
}
END_TEST

/* ---- format 2 and format 1, pure ---- */

static const char *const full_v2 =
    "# a comment\n"
    "format=2\nlsn=16/B374D848\nsystem=7312345678901234567\ntimeline=3\n"
    "\n"
    "database=outbox\nslot=outboxd\nplugin=wal2json\n";

START_TEST(test_parse_v2)
{
    struct offset_state st;
    char err[256] = "";
    ck_assert_int_eq(offset_parse(full_v2, strlen(full_v2), &st, err, sizeof(err)), 0);
    ck_assert_int_eq(st.format, 2);
    ck_assert(st.has_identity);
    ck_assert_uint_eq(st.lsn, 0x16B374D848ULL);
    ck_assert_str_eq(st.system, "7312345678901234567");
    ck_assert_uint_eq(st.timeline, 3);
    ck_assert_str_eq(st.database, "outbox");
    ck_assert_str_eq(st.slot, "outboxd");
    ck_assert_str_eq(st.plugin, "wal2json");
    /* No final newline is fine too. */
    const char *t = "format=2\nlsn=0/1\nsystem=1\ntimeline=1\ndatabase=d\nslot=s\nplugin=p";
    ck_assert_int_eq(offset_parse(t, strlen(t), &st, err, sizeof(err)), 0);
    ck_assert_str_eq(st.plugin, "p");
}
END_TEST

START_TEST(test_parse_v1)
{
    struct offset_state st;
    char err[256] = "";
    ck_assert_int_eq(offset_parse("16/B374D848\n", 12, &st, err, sizeof(err)), 0);
    ck_assert_int_eq(st.format, 1);
    ck_assert(!st.has_identity);
    ck_assert_uint_eq(st.lsn, 0x16B374D848ULL);
    ck_assert_int_eq(offset_parse("0/0", 3, &st, err, sizeof(err)), 0);
    ck_assert_uint_eq(st.lsn, 0);
    /* and from a file, as main wrote it */
    lsn_t v = 0;
    spit(path, "FFFFFFFF/FFFFFFFF\n", 18);
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), 1);
    ck_assert_uint_eq(v, UINT64_MAX);
}
END_TEST

/* Each key of full_v2 left out in turn: refused, naming the key. */
START_TEST(test_every_field_missing)
{
    static const char *const keys[] = {"format", "lsn",  "system", "timeline",
                                       "database", "slot", "plugin"};
    const char *key = keys[_i];
    char text[512] = "", line[128], err[256] = "";
    const char *p = full_v2;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p) + 1;
        snprintf(line, sizeof(line), "%.*s", (int)n, p);
        if (!(strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == '='))
            strcat(text, line);
        p += n;
    }
    struct offset_state st;
    ck_assert_int_eq(offset_parse(text, strlen(text), &st, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, key) != NULL, "err \"%s\" does not name %s", err, key);
}
END_TEST

static const char *const garbage_v2[] = {
    "format=2\nlsn=16/B374D848x\nsystem=1\ntimeline=1\ndatabase=d\nslot=s\nplugin=p\n",
    "format=2\nlsn=1/1\nsystem=12a\ntimeline=1\ndatabase=d\nslot=s\nplugin=p\n",
    "format=2\nlsn=1/1\nsystem=1\ntimeline=0\ndatabase=d\nslot=s\nplugin=p\n",
    "format=2\nlsn=1/1\nsystem=1\ntimeline=-1\ndatabase=d\nslot=s\nplugin=p\n",
    "format=2\nlsn=1/1\nsystem=1\ntimeline=1\ndatabase=\nslot=s\nplugin=p\n",
    "format=2\nlsn=1/1\nsystem=1\ntimeline=1\ndatabase=d\nslot=s\nplugin=p\nslot=t\n",
    "format=2\nlsn=1/1\nsystem=1\ntimeline=1\ndatabase=d\nslot=s\nplugin=p\ncolor=red\n",
    "format=2\nlsn=1/1\nsystem=1\ntimeline=1\ndatabase=d\nslot=s\nplugin=p\njunk\n",
    "format=2\nlsn=1/1\nsystem=1\ntimeline=1\ndatabase=d\\x\nslot=s\nplugin=p\n",
    "format=2\nlsn = 1/1\nsystem=1\ntimeline=1\ndatabase=d\nslot=s\nplugin=p\n",
    "format=two\nlsn=1/1\nsystem=1\ntimeline=1\ndatabase=d\nslot=s\nplugin=p\n",
    "format=1\nlsn=1/1\n",
    "\x01\x02=\xff\n",
};

START_TEST(test_garbage_v2)
{
    struct offset_state st;
    char err[256] = "";
    const char *t = garbage_v2[_i];
    ck_assert_msg(offset_parse(t, strlen(t), &st, err, sizeof(err)) == -1, "accepted %s", t);
    ck_assert(err[0] != '\0');
}
END_TEST

START_TEST(test_future_format_refused)
{
    /* Refused for the format, not for a missing or unknown key. */
    const char *t = "format=7\nlsn=1/1\nshard=9\n";
    struct offset_state st;
    char err[256] = "";
    lsn_t v;
    ck_assert_int_eq(offset_parse(t, strlen(t), &st, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, "format 7") && strstr(err, "newer outboxd"), "%s", err);
    spit(path, t, strlen(t));
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, path) && strstr(err, "newer outboxd") &&
                      strstr(err, "move it away"),
                  "%s", err);
}
END_TEST

/* ---- format 3: progress inside a transaction ---- */

/* Writes st (state_at(0x16B374D848) plus more), checks the file is its
 * identity in that format followed by the lines tail, and reads it back
 * into *back. */
static void write_expect(const struct offset_state *st, int format, const char *tail,
                         struct offset_state *back)
{
    char err[256] = "", buf[1024], want[1024];
    ck_assert_int_eq(offset_write(path, st, err, sizeof(err)), 0);
    slurp(path, buf, sizeof(buf));
    snprintf(want, sizeof(want),
             HEADER "format=%d\nlsn=16/B374D848\nsystem=7312345678901234567\n"
                    "timeline=1\ndatabase=outbox\nslot=outboxd\nplugin=pgoutput\n%s",
             format, tail);
    ck_assert_str_eq(buf, want);
    ck_assert_int_eq(offset_read(path, back, err, sizeof(err)), 1);
    ck_assert_int_eq(back->format, format);
}

START_TEST(test_progress_round_trip)
{
    char err[256] = "", buf[1024];
    struct offset_state st = state_at(0x16B374D848ULL), back;
    st.has_progress = true;
    st.txn_lsn = 0x16B3750000ULL;
    st.txn_acked = 30000;
    write_expect(&st, 3, "txn=16/B3750000\ntxn_acked=30000\n", &back);
    ck_assert(back.has_progress);
    ck_assert_uint_eq(back.lsn, 0x16B374D848ULL);
    ck_assert_uint_eq(back.txn_lsn, 0x16B3750000ULL);
    ck_assert_uint_eq(back.txn_acked, 30000);
    /* Without progress the same state is written as format 2 again. */
    back.has_progress = false;
    ck_assert_int_eq(offset_write(path, &back, err, sizeof(err)), 0);
    ck_assert_int_eq(offset_read(path, &st, err, sizeof(err)), 1);
    ck_assert_int_eq(st.format, 2);
    ck_assert(!st.has_progress);
    slurp(path, buf, sizeof(buf));
    ck_assert_ptr_null(strstr(buf, "txn"));
}
END_TEST

START_TEST(test_fingerprint_round_trip)
{
    /* Progress with what it counts: format 6, with or without the commit
     * time and acked; the fingerprint is written only with progress. */
    char err[256] = "", buf[1024];
    struct offset_state st = state_at(0x16B374D848ULL), back;
    st.has_progress = true;
    st.txn_lsn = 0x16B3750000ULL;
    st.txn_acked = 5000;
    st.txn_events = 0x9f0c3a5d21e4b877ULL;
    write_expect(&st, 6, "txn=16/B3750000\ntxn_acked=5000\ntxn_events=9f0c3a5d21e4b877\n",
                 &back);
    ck_assert(back.has_progress);
    ck_assert_uint_eq(back.txn_acked, 5000);
    ck_assert_uint_eq(back.txn_events, 0x9f0c3a5d21e4b877ULL);
    ck_assert(!back.has_acked);
    st.has_acked = true;
    st.acked_lsn = 0x16B3740000ULL + 0x10000;
    st.txn_lsn = st.acked_lsn;
    st.txn_events = 0x1; /* leading zeros are written */
    write_expect(&st, 6,
                 "txn=16/B3750000\ntxn_acked=5000\nacked=16/B3750000\n"
                 "txn_events=0000000000000001\n",
                 &back);
    ck_assert(back.has_acked);
    ck_assert_uint_eq(back.txn_events, 1);
    /* Without progress the fingerprint is not written: format 5. */
    back.has_progress = false;
    ck_assert_int_eq(offset_write(path, &back, err, sizeof(err)), 0);
    ck_assert_int_eq(offset_read(path, &st, err, sizeof(err)), 1);
    ck_assert_int_eq(st.format, 5);
    ck_assert_uint_eq(st.txn_events, 0);
    slurp(path, buf, sizeof(buf));
    ck_assert_ptr_null(strstr(buf, "txn"));
}
END_TEST

#define V3_IDENTITY "system=1\ntimeline=1\ndatabase=d\nslot=s\nplugin=p\n"
static const char *const bad_progress[] = {
    "format=3\nlsn=1/10\n" V3_IDENTITY "txn=1/20\n",              /* txn_acked missing */
    "format=3\nlsn=1/10\n" V3_IDENTITY "txn_acked=5\n",           /* txn missing */
    "format=3\nlsn=1/10\n" V3_IDENTITY "txn=1/8\ntxn_acked=5\n",   /* before lsn */
    "format=3\nlsn=1/10\n" V3_IDENTITY "txn=1/20\ntxn_acked=0\n",  /* nothing ACKed */
    "format=3\nlsn=1/10\n" V3_IDENTITY "txn=1/20\ntxn_acked=-1\n",
    "format=3\nlsn=1/10\n" V3_IDENTITY "txn=1/2x\ntxn_acked=5\n",
    "format=2\nlsn=1/10\n" V3_IDENTITY "txn=1/20\ntxn_acked=5\n",  /* keys of format 3 */
    /* format 6: progress and its fingerprint, together and well formed */
    "format=6\nlsn=1/10\n" V3_IDENTITY "txn=1/20\ntxn_acked=5\n",
    "format=6\nlsn=1/10\n" V3_IDENTITY "txn_events=00000000000000ff\n",
    "format=6\nlsn=1/10\n" V3_IDENTITY "txn=1/20\ntxn_acked=5\ntxn_events=0000000000000000\n",
    "format=6\nlsn=1/10\n" V3_IDENTITY "txn=1/20\ntxn_acked=5\ntxn_events=ff\n",
    "format=6\nlsn=1/10\n" V3_IDENTITY "txn=1/20\ntxn_acked=5\ntxn_events=00000000000000FF\n",
    "format=5\nlsn=1/10\n" V3_IDENTITY "acked=1/18\ntxn=1/20\ntxn_acked=5\n"
    "txn_events=00000000000000ff\n",
};

START_TEST(test_bad_progress_refused)
{
    struct offset_state st;
    char err[256] = "";
    const char *t = bad_progress[_i];
    ck_assert_msg(offset_parse(t, strlen(t), &st, err, sizeof(err)) == -1, "accepted %s", t);
    ck_assert(err[0] != '\0');
}
END_TEST

START_TEST(test_progress_parses_without_it)
{
    /* Format 3 may also come without progress (it is optional there). */
    const char *t = "format=3\nlsn=1/10\n" V3_IDENTITY;
    struct offset_state st;
    char err[256] = "", d[256];
    ck_assert_int_eq(offset_parse(t, strlen(t), &st, err, sizeof(err)), 0);
    ck_assert(!st.has_progress);
    const char *u = "format=3\nlsn=1/10\n" V3_IDENTITY "txn=1/20\ntxn_acked=7\n";
    ck_assert_int_eq(offset_parse(u, strlen(u), &st, err, sizeof(err)), 0);
    ck_assert(st.has_progress);
    ck_assert_uint_eq(st.txn_acked, 7);
    offset_describe(&st, d, sizeof(d));
    ck_assert_msg(strstr(d, "first 7 events of transaction 1/20"), "%s", d);
}
END_TEST

/* ---- format 4: the commit time of the last all-ACKed transaction ---- */

START_TEST(test_commit_time_round_trip)
{
    char err[256] = "", buf[1024];
    struct offset_state st = state_at(0x16B374D848ULL), back;
    /* 2026-12-03 16:48:11.000042 UTC */
    st.commit_time_us = 1796316491LL * 1000000 + 42;
    st.has_progress = true;
    st.txn_lsn = 0x16B3750000ULL;
    st.txn_acked = 3;
    ck_assert_int_eq(offset_format_of(&st), 4);
    write_expect(&st, 4,
                 "txn=16/B3750000\ntxn_acked=3\ncommit_time=2026-12-03 16:48:11.000042+00\n",
                 &back);
    ck_assert_int_eq(back.commit_time_us, st.commit_time_us);
    ck_assert(back.has_progress);
    ck_assert_uint_eq(back.txn_acked, 3);
    /* Without progress, still format 4. */
    back.has_progress = false;
    ck_assert_int_eq(offset_write(path, &back, err, sizeof(err)), 0);
    ck_assert_int_eq(offset_read(path, &st, err, sizeof(err)), 1);
    ck_assert_int_eq(st.format, 4);
    ck_assert(!st.has_progress);
    ck_assert_int_eq(st.commit_time_us, 1796316491LL * 1000000 + 42);
    /* The text PostgreSQL reads back. */
    ck_assert_str_eq(offset_commit_time_text(st.commit_time_us, buf, sizeof(buf)),
                     "2026-12-03 16:48:11.000042+00");
}
END_TEST

static const char *const bad_commit_time[] = {
    "format=4\nlsn=1/10\n" V3_IDENTITY,                                    /* missing */
    "format=3\nlsn=1/10\n" V3_IDENTITY "commit_time=2026-12-03 16:48:11.000042+00\n",
    "format=2\nlsn=1/10\n" V3_IDENTITY "commit_time=2026-12-03 16:48:11.000042+00\n",
    "format=4\nlsn=1/10\n" V3_IDENTITY "commit_time=2026-12-03 16:48:11+00\n", /* no us */
    "format=4\nlsn=1/10\n" V3_IDENTITY "commit_time=2026-13-03 16:48:11.000042+00\n",
    "format=4\nlsn=1/10\n" V3_IDENTITY "commit_time=2026-12-03 16:48:11.000042+01\n",
    "format=4\nlsn=1/10\n" V3_IDENTITY "commit_time=2026-12-03T16:48:11.000042+00\n",
    "format=4\nlsn=1/10\n" V3_IDENTITY "commit_time=2026-12-03 16:48:11.000042+00x\n",
};

/* The text t is refused, with a reason that names word. */
static void expect_refused(const char *t, const char *word)
{
    struct offset_state st;
    char err[256] = "";
    ck_assert_msg(offset_parse(t, strlen(t), &st, err, sizeof(err)) == -1, "accepted %s", t);
    ck_assert_msg(strstr(err, word), "%s", err);
}

START_TEST(test_bad_commit_time_refused)
{
    expect_refused(bad_commit_time[_i], "commit_time");
}
END_TEST

START_TEST(test_escaped_names_round_trip)
{
    struct offset_state st = state_at(0x42), back;
    snprintf(st.database, sizeof(st.database), "odd\nname\\with=stuff\r");
    char buf[OFFSET_FILE_MAX], err[256] = "";
    size_t n = offset_format(&st, buf, sizeof(buf));
    ck_assert_uint_gt(n, 0);
    ck_assert_ptr_nonnull(strstr(buf, "database=odd\\nname\\\\with=stuff\\r\n"));
    ck_assert_int_eq(offset_parse(buf, n, &back, err, sizeof(err)), 0);
    ck_assert_str_eq(back.database, st.database);
    ck_assert_uint_eq(back.lsn, 0x42);
    /* Too small a buffer: 0, not a truncated file. */
    ck_assert_uint_eq(offset_format(&st, buf, 40), 0);
}
END_TEST

START_TEST(test_write_read_identity)
{
    struct offset_state st = state_at(0x16B374D848ULL), back;
    snprintf(st.plugin, sizeof(st.plugin), "wal2json");
    st.timeline = 7;
    char err[256] = "";
    ck_assert_int_eq(offset_write(path, &st, err, sizeof(err)), 0);
    ck_assert_int_eq(offset_read(path, &back, err, sizeof(err)), 1);
    ck_assert(back.has_identity);
    ck_assert_uint_eq(back.timeline, 7);
    ck_assert_str_eq(back.plugin, "wal2json");
    ck_assert_str_eq(back.system, st.system);
}
END_TEST

/* ---- format 5: acked, ahead of the confirmable position ---- */

START_TEST(test_acked_round_trip)
{
    char err[256] = "", buf[1024], d[512];
    struct offset_state st = state_at(0x16B374D848ULL), back;
    st.has_acked = true;
    st.acked_lsn = 0x16B3760000ULL;
    st.has_progress = true;
    st.txn_lsn = 0x16B3770000ULL;
    st.txn_acked = 3;
    ck_assert_int_eq(offset_format_of(&st), 5);
    write_expect(&st, 5, "txn=16/B3770000\ntxn_acked=3\nacked=16/B3760000\n", &back);
    ck_assert(back.has_acked);
    ck_assert_uint_eq(back.acked_lsn, 0x16B3760000ULL);
    ck_assert(back.has_progress);
    ck_assert_int_eq(back.commit_time_us, 0); /* optional in format 5 */
    offset_describe(&back, d, sizeof(d));
    ck_assert_msg(strstr(d, "16/B374D848 (all ACKed to 16/B3760000), and the first 3 events"),
                  "%s", d);
    /* With a commit time too; without acked, format 4 again. */
    back.commit_time_us = 1796316491LL * 1000000 + 42;
    ck_assert_int_eq(offset_write(path, &back, err, sizeof(err)), 0);
    ck_assert_int_eq(offset_read(path, &st, err, sizeof(err)), 1);
    ck_assert_int_eq(st.format, 5);
    ck_assert_int_eq(st.commit_time_us, back.commit_time_us);
    st.has_acked = false;
    ck_assert_int_eq(offset_format_of(&st), 4);
    ck_assert_int_eq(offset_write(path, &st, err, sizeof(err)), 0);
    slurp(path, buf, sizeof(buf));
    ck_assert_ptr_null(strstr(buf, "\nacked="));
}
END_TEST

static const char *const bad_acked[] = {
    "format=5\nlsn=1/10\n" V3_IDENTITY,                          /* missing */
    "format=4\nlsn=1/10\n" V3_IDENTITY "commit_time=2026-12-03 16:48:11.000042+00\n"
    "acked=1/20\n",                                              /* keys of format 5 */
    "format=3\nlsn=1/10\n" V3_IDENTITY "acked=1/20\n",
    "format=5\nlsn=1/10\n" V3_IDENTITY "acked=1/10\n",           /* not ahead */
    "format=5\nlsn=1/10\n" V3_IDENTITY "acked=1/8\n",            /* behind */
    "format=5\nlsn=1/10\n" V3_IDENTITY "acked=1/2x\n",
    "format=5\nlsn=1/10\n" V3_IDENTITY "acked=1/30\ntxn=1/20\ntxn_acked=5\n", /* txn before */
};

START_TEST(test_bad_acked_refused)
{
    expect_refused(bad_acked[_i], "acked");
}
END_TEST

START_TEST(test_describe)
{
    char out[512];
    struct offset_state st = state_at(0x1A2B3C);
    offset_describe(&st, out, sizeof(out));
    ck_assert_str_eq(out, "0/1A2B3C on system 7312345678901234567/database outbox/slot "
                          "outboxd (timeline 1, plugin pgoutput)");
    st.has_identity = false;
    st.format = 1;
    offset_describe(&st, out, sizeof(out));
    ck_assert_ptr_nonnull(strstr(out, "0/1A2B3C (format 1"));
}
END_TEST

START_TEST(test_probe_dir)
{
    char err[256] = "", names[1024], p2[600];
    ck_assert_int_eq(offset_probe_dir(path, err, sizeof(err)), 0);
    ck_assert_int_eq(list_dir(names, sizeof(names)), 0); /* nothing left */
    snprintf(p2, sizeof(p2), "%s/missing-subdir/outboxd.offset", dir);
    ck_assert_int_eq(offset_probe_dir(p2, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "No such file"));
}
END_TEST

START_TEST(test_too_large_is_corrupt)
{
    char big[OFFSET_FILE_MAX + 100], err[256] = "";
    lsn_t v;
    memset(big, '#', sizeof(big));
    spit(path, big, sizeof(big));
    ck_assert_int_eq(rd(path, &v, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "larger than"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("offset");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    /* Every write fsyncs twice: test_overwrite's 50 writes overran Check's
     * 4 s default on a disk busy with a whole CI run beside it (seen
     * twice in four tries), so the timeout guards against a hang only. */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_round_trip_edges);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_exact_content);
    tcase_add_test(tc, test_overwrite);
    tcase_add_test(tc, test_no_temp_files_left);
    tcase_add_test(tc, test_permissions_regular_file);
    tcase_add_test(tc, test_temp_file_never_followed);
    tcase_add_loop_test(tc, test_corrupt, 0,
                        (int)(sizeof(corrupt) / sizeof(corrupt[0])));
    tcase_add_test(tc, test_unreadable_is_error);
    tcase_add_test(tc, test_write_into_missing_dir_fails);
    tcase_add_test(tc, test_write_failure_keeps_old_value);
    tcase_add_test(tc, test_relative_path);
    tcase_add_test(tc, test_parse_v2);
    tcase_add_test(tc, test_parse_v1);
    tcase_add_loop_test(tc, test_every_field_missing, 0, 7);
    tcase_add_loop_test(tc, test_garbage_v2, 0,
                        (int)(sizeof(garbage_v2) / sizeof(garbage_v2[0])));
    tcase_add_test(tc, test_future_format_refused);
    tcase_add_test(tc, test_escaped_names_round_trip);
    tcase_add_test(tc, test_progress_round_trip);
    tcase_add_test(tc, test_fingerprint_round_trip);
    tcase_add_loop_test(tc, test_bad_progress_refused, 0,
                        (int)(sizeof(bad_progress) / sizeof(bad_progress[0])));
    tcase_add_test(tc, test_progress_parses_without_it);
    tcase_add_test(tc, test_commit_time_round_trip);
    tcase_add_loop_test(tc, test_bad_commit_time_refused, 0,
                        (int)(sizeof(bad_commit_time) / sizeof(bad_commit_time[0])));
    tcase_add_test(tc, test_acked_round_trip);
    tcase_add_loop_test(tc, test_bad_acked_refused, 0,
                        (int)(sizeof(bad_acked) / sizeof(bad_acked[0])));
    tcase_add_test(tc, test_write_read_identity);
    tcase_add_test(tc, test_describe);
    tcase_add_test(tc, test_probe_dir);
    tcase_add_test(tc, test_too_large_is_corrupt);
    suite_add_tcase(s, tc);

    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
