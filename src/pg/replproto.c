/*
 * replproto.c - the streaming replication sub-protocol carried inside the
 * CopyData messages of a START_REPLICATION ... LOGICAL session.
 *
 * Everything here is pure: repl_parse_frame() turns the payload of one
 * CopyData message from the server into a struct repl_frame (borrowing the
 * XLogData payload from the input), repl_build_status() writes the 34-byte
 * standby status update that acknowledges WAL back to the server. Neither
 * allocates. See include/pg/replproto.h for the wire formats.
 *
 * The big-endian helpers at the bottom are shared with the plugin decoders
 * (pgoutput.c); callers are responsible for bounds checks.
 */
#include "replproto.h"

#include <stdarg.h>
#include <stdio.h>

#include "clock.h"

/* Sizes of the fixed parts of each frame, kind byte included. */
#define XLOGDATA_HDR_LEN (1 + 8 + 8 + 8)
#define KEEPALIVE_LEN (1 + 8 + 8 + 1)

/* Microseconds between 1970-01-01 and 2000-01-01 UTC (the Postgres epoch). */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes one formatted line into err when the caller gave a buffer. */
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (!err || errlen == 0) return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/*
 * XLogData: Byte1('w') Int64 dataStart Int64 walEnd Int64 sendTime Byte(n).
 * The payload is everything after the 25-byte header (may be empty).
 */
static int parse_xlogdata(const unsigned char *p, size_t len,
                          struct repl_frame *out, char *err, size_t errlen)
{
    if (len < XLOGDATA_HDR_LEN) {
        set_err(err, errlen,
                "replication XLogData: truncated header (need %d bytes, have %zu)",
                XLOGDATA_HDR_LEN, len);
        return -1;
    }
    out->kind = RF_XLOGDATA;
    out->data_start = repl_get_u64(p + 1);
    out->wal_end = repl_get_u64(p + 9);
    out->send_time = (int64_t)repl_get_u64(p + 17);
    out->reply_requested = false;
    out->data = (const char *)p + XLOGDATA_HDR_LEN;
    out->len = len - XLOGDATA_HDR_LEN;
    return 0;
}

/*
 * Primary keepalive: Byte1('k') Int64 walEnd Int64 sendTime
 * Byte1 replyRequested. Exactly 18 bytes.
 */
static int parse_keepalive(const unsigned char *p, size_t len,
                           struct repl_frame *out, char *err, size_t errlen)
{
    if (len != KEEPALIVE_LEN) {
        set_err(err, errlen,
                "replication keepalive: %s frame (need %d bytes, have %zu)",
                len < KEEPALIVE_LEN ? "truncated" : "oversized", KEEPALIVE_LEN,
                len);
        return -1;
    }
    out->kind = RF_KEEPALIVE;
    out->data_start = LSN_INVALID;
    out->wal_end = repl_get_u64(p + 1);
    out->send_time = (int64_t)repl_get_u64(p + 9);
    out->reply_requested = p[17] != 0;
    out->data = NULL;
    out->len = 0;
    return 0;
}

int repl_parse_frame(const char *buf, size_t len, struct repl_frame *out,
                     char *err, size_t errlen)
{
    const unsigned char *p = (const unsigned char *)buf;

    if (len == 0) {
        set_err(err, errlen, "replication frame: empty CopyData message");
        return -1;
    }
    switch (p[0]) {
    case RF_XLOGDATA:
        return parse_xlogdata(p, len, out, err, errlen);
    case RF_KEEPALIVE:
        return parse_keepalive(p, len, out, err, errlen);
    default:
        set_err(err, errlen,
                "replication frame: unknown kind byte 0x%02x (expected 'w' or 'k')",
                p[0]);
        return -1;
    }
}

/*
 * Standby status update: Byte1('r') Int64 written Int64 flushed
 * Int64 applied Int64 sendTime Byte1 replyRequested (34 bytes).
 */
void repl_build_status(char out[REPL_STATUS_LEN], lsn_t written, lsn_t flushed,
                       lsn_t applied, int64_t now_pg, bool reply_requested)
{
    unsigned char *p = (unsigned char *)out;

    p[0] = 'r';
    repl_put_u64(p + 1, written);
    repl_put_u64(p + 9, flushed);
    repl_put_u64(p + 17, applied);
    repl_put_u64(p + 25, (uint64_t)now_pg);
    p[33] = reply_requested ? 1 : 0;
}

int64_t repl_now(void)
{
    return clock_unix_us() - PG_EPOCH_OFFSET_US;
}

uint64_t repl_get_u64(const unsigned char *p)
{
    return ((uint64_t)repl_get_u32(p) << 32) | repl_get_u32(p + 4);
}

uint32_t repl_get_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
           ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

uint16_t repl_get_u16(const unsigned char *p)
{
    return (uint16_t)(((unsigned)p[0] << 8) | p[1]);
}

void repl_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}
