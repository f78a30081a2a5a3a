/*
 * replproto.h - the streaming replication sub-protocol carried in CopyData
 * messages (pure: bytes in, struct out; struct in, bytes out).
 *
 * Server to client:
 *   XLogData          Byte1('w') Int64 dataStart Int64 walEnd Int64 sendTime
 *                     Byte(n) data   (here: one output plugin message)
 *   Primary keepalive Byte1('k') Int64 walEnd Int64 sendTime Byte1 replyRequested
 * Client to server:
 *   Standby status    Byte1('r') Int64 written Int64 flushed Int64 applied
 *                     Int64 sendTime Byte1 replyRequested
 * All integers are big-endian; times are microseconds since 2000-01-01 UTC
 * (PostgreSQL's epoch: PG_EPOCH_OFFSET_US, clock.h).
 */
#ifndef OUTBOXD_REPLPROTO_H
#define OUTBOXD_REPLPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lsn.h"

#define REPL_STATUS_LEN 34

enum repl_frame_kind { RF_XLOGDATA = 'w', RF_KEEPALIVE = 'k' };

struct repl_frame {
    enum repl_frame_kind kind;
    lsn_t data_start; /* XLogData only */
    lsn_t wal_end;
    int64_t send_time;
    bool reply_requested; /* keepalive only */
    const char *data;     /* XLogData payload, borrowed from the input */
    size_t len;
};

/* Parses one CopyData payload. Returns 0, or -1 with a reason in err. */
int repl_parse_frame(const char *buf, size_t len, struct repl_frame *out,
                     char *err, size_t errlen);

/* Writes a standby status update into out (REPL_STATUS_LEN bytes). */
void repl_build_status(char out[REPL_STATUS_LEN], lsn_t written, lsn_t flushed,
                       lsn_t applied, int64_t now_pg, bool reply_requested);

/* Current time as microseconds since 2000-01-01 UTC. */
int64_t repl_now(void);

/* Big-endian helpers shared by the decoders. */
uint64_t repl_get_u64(const unsigned char *p);
uint32_t repl_get_u32(const unsigned char *p);
uint16_t repl_get_u16(const unsigned char *p);
void repl_put_u64(unsigned char *p, uint64_t v);

#endif
