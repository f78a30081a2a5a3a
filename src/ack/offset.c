/*
 * offset.c - the offset file (format in offset.h), written so that a crash
 * at any instant leaves a complete old or new value: write a temp file in
 * the same directory, fsync it, rename it over the old one, fsync the
 * directory (the rename is only durable once the directory entry is).
 */
#include "offset.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- parsing and formatting (pure) ---------------------------------------- */

/* Copies the escaped value v[0..n) into out (outlen with the NUL), undoing
 * \\, \r and \n. Returns 0, or -1 when too long or badly escaped. */
static int unescape(const char *v, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = v[i];
        if (ch == '\\') {
            if (++i == n) return -1;
            ch = v[i] == 'n' ? '\n' : v[i] == 'r' ? '\r' : v[i] == '\\' ? '\\' : 0;
            if (!ch) return -1;
        } else if (ch == '\0') {
            return -1;
        }
        if (o + 1 >= outlen) return -1;
        out[o++] = ch;
    }
    out[o] = '\0';
    return 0;
}

/* Appends the escaped s to buf at *pos. Returns 0, or -1 when full. */
static int escape_into(const char *s, char *buf, size_t buflen, size_t *pos)
{
    for (; *s; s++) {
        const char *rep = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : *s == '\r' ? "\\r" : NULL;
        size_t n = rep ? 2 : 1;
        if (*pos + n >= buflen) return -1;
        memcpy(buf + *pos, rep ? rep : s, n);
        *pos += n;
    }
    return 0;
}

/* The keys of formats 2 to 6, in the order written: the identity, format
 * 3's progress, format 4's commit time, format 5's acked, format 6's
 * fingerprint of what the progress counts. */
enum {
    K_FORMAT, K_LSN, K_SYSTEM, K_TIMELINE, K_DATABASE, K_SLOT, K_PLUGIN, K_TXN, K_TXN_ACKED,
    K_COMMIT_TIME, K_ACKED, K_TXN_EVENTS, K_COUNT
};
#define K_IDENTITY_COUNT K_TXN
static const char *const key_names[K_COUNT] = {
    "format", "lsn",       "system",      "timeline", "database",  "slot",
    "plugin", "txn",       "txn_acked",   "commit_time", "acked", "txn_events"};

/* Format 6's fingerprint: exactly 16 lower-case hex digits, not 0. */
static int parse_fingerprint(const char *s, uint64_t *out)
{
    if (strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16) return -1;
    *out = strtoull(s, NULL, 16);
    return *out ? 0 : -1;
}

/* Format 4's commit_time: "2026-12-03 16:48:11.123456+00" (UTC, always
 * six fractional digits: what PostgreSQL prints for a timestamptz in UTC,
 * and reads back). */
#define COMMIT_TIME_LEN 29

#define COMMIT_TIME_BUF 64 /* room for any int the compiler imagines */

static void format_commit_time(int64_t unix_us, char out[COMMIT_TIME_BUF])
{
    time_t secs = (time_t)(unix_us / 1000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(out, COMMIT_TIME_BUF, "%04d-%02d-%02d %02d:%02d:%02d.%06d+00",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(unix_us % 1000000));
}

/* Parses format_commit_time()'s text exactly. Returns 0, or -1. */
static int parse_commit_time(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, sec, us, n = 0;
    if (strlen(s) != COMMIT_TIME_LEN ||
        sscanf(s, "%4d-%2d-%2d %2d:%2d:%2d.%6d+00%n", &y, &mo, &d, &h, &mi, &sec, &us, &n) != 7 ||
        n != COMMIT_TIME_LEN || y < 2000 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 ||
        mi > 59 || sec > 60 || us < 0)
        return -1;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                    .tm_min = mi, .tm_sec = sec};
    *out = (int64_t)timegm(&tm) * 1000000 + us;
    return 0;
}

static bool all_digits(const char *s, size_t maxlen)
{
    size_t n = strlen(s);
    if (n == 0 || n > maxlen) return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return false;
    return true;
}

/* Stores the value of key k into out. Returns 0 or -1 with err. */
static int set_field(struct offset_state *out, int k, const char *v, size_t n, char *err,
                     size_t errlen)
{
    char tmp[OFFSET_NAME_MAX * 2];
    size_t cap = k == K_SYSTEM ? sizeof(out->system) : OFFSET_NAME_MAX;
    if (unescape(v, n, tmp, cap) != 0) {
        snprintf(err, errlen, "the value of %s is too long or badly escaped", key_names[k]);
        return -1;
    }
    switch (k) {
    case K_FORMAT:
        if (!all_digits(tmp, 4)) break;
        out->format = atoi(tmp);
        return 0;
    case K_LSN:
        if (!lsn_parse(tmp, &out->lsn)) break;
        return 0;
    case K_TXN:
        if (!lsn_parse(tmp, &out->txn_lsn)) break;
        return 0;
    case K_ACKED:
        if (!lsn_parse(tmp, &out->acked_lsn)) break;
        return 0;
    case K_TXN_ACKED:
        if (!all_digits(tmp, 19) || strtoull(tmp, NULL, 10) == 0) break;
        out->txn_acked = strtoull(tmp, NULL, 10);
        return 0;
    case K_COMMIT_TIME:
        if (parse_commit_time(tmp, &out->commit_time_us) != 0) break;
        return 0;
    case K_TXN_EVENTS:
        if (parse_fingerprint(tmp, &out->txn_events) != 0) break;
        return 0;
    case K_SYSTEM:
        if (!all_digits(tmp, 20)) break;
        memcpy(out->system, tmp, strlen(tmp) + 1);
        return 0;
    case K_TIMELINE:
        if (!all_digits(tmp, 10) || strtoul(tmp, NULL, 10) == 0 ||
            strtoul(tmp, NULL, 10) > UINT32_MAX)
            break;
        out->timeline = (uint32_t)strtoul(tmp, NULL, 10);
        return 0;
    default: {
        char *dst = k == K_DATABASE ? out->database : k == K_SLOT ? out->slot : out->plugin;
        if (!*tmp) break;
        memcpy(dst, tmp, strlen(tmp) + 1);
        return 0;
    }
    }
    snprintf(err, errlen, "%s=%.*s is not a valid %s", key_names[k], (int)(n > 40 ? 40 : n), v,
             k == K_LSN || k == K_TXN || k == K_ACKED ? "LSN (like 16/B374D848)"
             : k == K_COMMIT_TIME ? "time (like 2026-12-03 16:48:11.123456+00)"
             : k == K_TXN_EVENTS  ? "fingerprint (16 hex digits, not all zero)"
                                  : "value");
    return -1;
}

/* Format 1: the whole text is one LSN, optionally followed by a newline. */
static bool parse_bare_lsn(const char *text, size_t len, struct offset_state *out)
{
    char buf[LSN_STRLEN + 2];
    if (len > 0 && text[len - 1] == '\n') len--;
    if (len == 0 || len >= sizeof(buf) || memchr(text, '\n', len)) return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (!lsn_parse(buf, &out->lsn)) return false;
    out->format = 1;
    return true;
}

/* A key of a later format: there when required, else refused when seen
 * (where: the formats it belongs to). Returns 0 or -1 with err. */
static int key_presence(bool seen, bool required, const char *key, const char *where,
                        int format, char *err, size_t errlen)
{
    if (seen == required) return 0;
    if (seen)
        snprintf(err, errlen, "line %s= belongs to %s, and the file says format %d", key,
                 where, format);
    else
        snprintf(err, errlen, "the %s line is missing (%s)", key, where);
    return -1;
}

/* Format 4's commit_time: there, and optional in formats 5 and 6.
 * Returns 0 or -1 with err. */
static int parse_commit_time_line(const struct offset_state *out, bool seen, char *err,
                                  size_t errlen)
{
    if (out->format >= 5) return 0;
    return key_presence(seen, out->format == 4, "commit_time", "formats 4 and 5", out->format,
                        err, errlen);
}

/* Format 5's acked: there (optional in format 6), and only there, after
 * lsn. Returns 0 or -1 with err. */
static int parse_acked_line(struct offset_state *out, bool seen, char *err, size_t errlen)
{
    char a[LSN_STRLEN], b[LSN_STRLEN];
    if (out->format != 6 &&
        key_presence(seen, out->format == 5, "acked", "formats 5 and 6", out->format, err,
                     errlen))
        return -1;
    if (seen && out->acked_lsn <= out->lsn) {
        snprintf(err, errlen, "acked=%s is not after lsn=%s: it is written only when ahead",
                 lsn_format(out->acked_lsn, a), lsn_format(out->lsn, b));
        return -1;
    }
    out->has_acked = seen;
    return 0;
}

/* Format 3's progress (also in formats 4 and 5; in format 6 required,
 * with txn_events, events): txn and txn_acked both or neither, and the
 * transaction at or after lsn (and acked). At lsn: a keepalive may
 * confirm the position of a commit record the walsender has not decoded
 * yet (everything before it was), and PostgreSQL sends a transaction
 * again unless it committed *before* the confirmed position
 * (SnapBuildXactNeedsSkip): its progress still counts. Returns 0 or -1
 * with err. */
static int parse_progress(struct offset_state *out, bool txn, bool acked, bool events,
                          char *err, size_t errlen)
{
    if (out->format == 2 && (txn || acked))
        return key_presence(true, false, txn ? "txn" : "txn_acked", "formats 3 to 6", 2, err,
                            errlen);
    if (key_presence(events, out->format == 6, "txn_events", "format 6", out->format, err,
                     errlen) != 0 ||
        (out->format == 6 && key_presence(txn, true, "txn", "format 6", 6, err, errlen) != 0))
        return -1;
    if (txn != acked) {
        snprintf(err, errlen, "the %s line is missing (txn and txn_acked go together)",
                 txn ? "txn_acked" : "txn");
        return -1;
    }
    lsn_t all_acked = offset_all_acked(out);
    if (txn && out->txn_lsn < all_acked) {
        char a[LSN_STRLEN], b[LSN_STRLEN];
        snprintf(err, errlen,
                 "txn=%s is before %s=%s: a transaction partly ACKed commits at or after "
                 "everything fully ACKed",
                 lsn_format(out->txn_lsn, a), out->has_acked ? "acked" : "lsn",
                 lsn_format(all_acked, b));
        return -1;
    }
    out->has_progress = txn;
    return 0;
}

int offset_parse(const char *text, size_t len, struct offset_state *out, char *err,
                 size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (memchr(text, '=', len) == NULL) {
        if (parse_bare_lsn(text, len, out)) return 0;
        snprintf(err, errlen, "it holds neither an LSN (format 1, like 16/B374D848) nor "
                              "key=value lines (formats 2 to 6)");
        return -1;
    }
    bool seen[K_COUNT] = {false};
    char unknown[96] = "";
    const char *p = text, *end = text + len;
    for (int lineno = 1; p < end; lineno++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *eq = memchr(p, '=', (size_t)(eol - p));
        if (eol == p || *p == '#') {
            /* blank or comment */
        } else if (!eq) {
            snprintf(err, errlen, "line %d is not key=value", lineno);
            return -1;
        } else {
            int k = 0;
            while (k < K_COUNT && !((size_t)(eq - p) == strlen(key_names[k]) &&
                                    memcmp(p, key_names[k], (size_t)(eq - p)) == 0))
                k++;
            if (k == K_COUNT) {
                /* reported after the format check: a newer format may have
                 * keys this version does not know */
                if (!unknown[0])
                    snprintf(unknown, sizeof(unknown), "line %d: unknown key \"%.*s\"",
                             lineno, (int)((eq - p) > 40 ? 40 : (eq - p)), p);
                p = eol + (nl ? 1 : 0);
                continue;
            }
            if (seen[k]) {
                snprintf(err, errlen, "line %d: %s appears twice", lineno, key_names[k]);
                return -1;
            }
            seen[k] = true;
            if (set_field(out, k, eq + 1, (size_t)(eol - eq - 1), err, errlen) != 0)
                return -1;
        }
        p = eol + (nl ? 1 : 0);
    }
    if (!seen[K_FORMAT]) {
        snprintf(err, errlen, "the format line (format=%d) is missing", OFFSET_FORMAT);
        return -1;
    }
    if (out->format < 2 || out->format > OFFSET_FORMAT) {
        snprintf(err, errlen,
                 "it has format %d, and this outboxd reads formats 1 to %d only (%s)",
                 out->format, OFFSET_FORMAT,
                 out->format > OFFSET_FORMAT ? "a newer outboxd wrote it: run that version"
                                             : "not a format outboxd ever wrote");
        return -1;
    }
    if (unknown[0]) {
        snprintf(err, errlen, "%s", unknown);
        return -1;
    }
    for (int k = 0; k < K_IDENTITY_COUNT; k++)
        if (!seen[k]) {
            snprintf(err, errlen, "the %s line is missing", key_names[k]);
            return -1;
        }
    out->has_identity = true;
    if (parse_commit_time_line(out, seen[K_COMMIT_TIME], err, errlen) != 0 ||
        parse_acked_line(out, seen[K_ACKED], err, errlen) != 0)
        return -1;
    return parse_progress(out, seen[K_TXN], seen[K_TXN_ACKED], seen[K_TXN_EVENTS], err,
                          errlen);
}

lsn_t offset_all_acked(const struct offset_state *st)
{
    return st->has_acked ? st->acked_lsn : st->lsn;
}

int offset_format_of(const struct offset_state *st)
{
    if (st->has_progress && st->txn_events) return 6;
    return st->has_acked ? 5 : st->commit_time_us > 0 ? 4 : st->has_progress ? 3 : 2;
}

char *offset_commit_time_text(int64_t unix_us, char *out, size_t outlen)
{
    char t[COMMIT_TIME_BUF];
    format_commit_time(unix_us, t);
    snprintf(out, outlen, "%s", t);
    return out;
}

size_t offset_format(const struct offset_state *st, char *buf, size_t buflen)
{
    char lsn[LSN_STRLEN];
    int n = snprintf(buf, buflen,
                     "# outboxd offset file: the last position whose events were all ACKed\n"
                     "# by Kafka, and the stream it belongs to (see README). Do not edit.\n"
                     "format=%d\nlsn=%s\nsystem=%s\ntimeline=%u\n",
                     offset_format_of(st), lsn_format(st->lsn, lsn), st->system,
                     (unsigned)st->timeline);
    if (n < 0 || (size_t)n >= buflen) return 0;
    size_t pos = (size_t)n;
    const char *names[3] = {"database=", "slot=", "plugin="};
    const char *vals[3] = {st->database, st->slot, st->plugin};
    for (int i = 0; i < 3; i++) {
        size_t kl = strlen(names[i]);
        if (strlen(vals[i]) >= OFFSET_NAME_MAX || pos + kl >= buflen) return 0;
        memcpy(buf + pos, names[i], kl);
        pos += kl;
        if (escape_into(vals[i], buf, buflen, &pos) != 0 || pos + 1 >= buflen) return 0;
        buf[pos++] = '\n';
    }
    if (st->has_progress) {
        n = snprintf(buf + pos, buflen - pos, "txn=%s\ntxn_acked=%llu\n",
                     lsn_format(st->txn_lsn, lsn), (unsigned long long)st->txn_acked);
        if (n < 0 || (size_t)n >= buflen - pos) return 0;
        pos += (size_t)n;
    }
    if (st->commit_time_us > 0) {
        char t[COMMIT_TIME_BUF];
        format_commit_time(st->commit_time_us, t);
        n = snprintf(buf + pos, buflen - pos, "commit_time=%s\n", t);
        if (n < 0 || (size_t)n >= buflen - pos) return 0;
        pos += (size_t)n;
    }
    if (st->has_acked) {
        n = snprintf(buf + pos, buflen - pos, "acked=%s\n", lsn_format(st->acked_lsn, lsn));
        if (n < 0 || (size_t)n >= buflen - pos) return 0;
        pos += (size_t)n;
    }
    if (st->has_progress && st->txn_events) {
        n = snprintf(buf + pos, buflen - pos, "txn_events=%016llx\n",
                     (unsigned long long)st->txn_events);
        if (n < 0 || (size_t)n >= buflen - pos) return 0;
        pos += (size_t)n;
    }
    buf[pos] = '\0';
    return pos;
}

char *offset_describe(const struct offset_state *st, char *out, size_t outlen)
{
    char a[LSN_STRLEN];
    char b[LSN_STRLEN], c[LSN_STRLEN], progress[160] = "";
    int n = 0;
    if (st->has_acked)
        n = snprintf(progress, sizeof(progress), " (all ACKed to %s)",
                     lsn_format(st->acked_lsn, c));
    if (st->has_progress && n >= 0 && (size_t)n < sizeof(progress))
        snprintf(progress + n, sizeof(progress) - (size_t)n,
                 ", and the first %llu events of transaction %s",
                 (unsigned long long)st->txn_acked, lsn_format(st->txn_lsn, b));
    if (st->has_identity)
        snprintf(out, outlen, "%s%s on system %s/database %s/slot %s (timeline %u, plugin %s)",
                 lsn_format(st->lsn, a), progress, st->system, st->database, st->slot,
                 (unsigned)st->timeline, st->plugin);
    else
        snprintf(out, outlen, "%s (format 1: no system, database or slot recorded)",
                 lsn_format(st->lsn, a));
    return out;
}

/* ---- the file ------------------------------------------------------------ */

int offset_read(const char *path, struct offset_state *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        snprintf(err, errlen, "offset file %s: %s", path, strerror(errno));
        return -1;
    }
    char buf[OFFSET_FILE_MAX + 1], why[256];
    size_t len = 0;
    ssize_t n;
    while ((n = read(fd, buf + len, sizeof(buf) - len)) > 0 && len + (size_t)n < sizeof(buf))
        len += (size_t)n;
    int saved = errno;
    close(fd);
    if (n < 0) {
        snprintf(err, errlen, "offset file %s: %s", path, strerror(saved));
        return -1;
    }
    if (n > 0) {
        snprintf(why, sizeof(why), "it is larger than %d bytes", OFFSET_FILE_MAX);
    } else if (offset_parse(buf, len, out, why, sizeof(why)) == 0) {
        return 1;
    }
    snprintf(err, errlen,
             "offset file %s is corrupt or unreadable: %s. Restore it, or move it away "
             "to start from the slot's confirmed position",
             path, why);
    return -1;
}

static int fsync_dir_of(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Creates the new file tmp (mode 0600: the file names the database and
 * the slot, and nobody else needs to read it), never through a symbolic
 * link nor into an existing file: a leftover of an earlier process with the
 * same pid is removed first (unlink removes a link itself, not what it
 * points to). Returns the descriptor, or -1 with errno set. */
static int create_new(const char *tmp)
{
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(tmp, flags, 0600);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, flags, 0600);
    return fd;
}

/* Writes len bytes of data to the new file tmp and fsyncs it; removes it on
 * failure. Returns 0 or -1 with errno set. */
static int write_synced(const char *tmp, const char *data, size_t len)
{
    int fd = create_new(tmp);
    if (fd < 0) return -1;
    ssize_t n = write(fd, data, len);
    if (n != (ssize_t)len || fsync(fd) != 0) {
        int saved = n >= 0 && n != (ssize_t)len ? ENOSPC : errno;
        close(fd);
        unlink(tmp);
        errno = saved ? saved : EIO;
        return -1;
    }
    if (close(fd) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

int offset_write(const char *path, const struct offset_state *st, char *err, size_t errlen)
{
    char tmp[4096], text[OFFSET_FILE_MAX];
    /* The temporary file's name is this process's own (two processes
     * never write one file: the slot admits one stream). */
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "offset file path too long");
        return -1;
    }
    size_t len = offset_format(st, text, sizeof(text));
    if (len == 0) {
        snprintf(err, errlen, "cannot write offset file %s: a name is too long", path);
        return -1;
    }
    if (write_synced(tmp, text, len) != 0) goto fail;
    if (rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        goto fail;
    }
    if (fsync_dir_of(path) != 0) goto fail;
    return 0;
fail:
    snprintf(err, errlen, "cannot write offset file %s: %s", path, strerror(errno));
    return -1;
}

int offset_probe_dir(const char *path, char *err, size_t errlen)
{
    char tmp[4096], block[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.probe.%ld", path, (long)getpid()) >= (int)sizeof(tmp)) {
        snprintf(err, errlen, "offset file path too long");
        return -1;
    }
    memset(block, '#', sizeof(block));
    if (write_synced(tmp, block, sizeof(block)) != 0) {
        snprintf(err, errlen, "writing and syncing a test file %s failed: %s", tmp,
                 strerror(errno));
        return -1;
    }
    unlink(tmp);
    return 0;
}
