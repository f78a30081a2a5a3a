/*
 * heartbeat.h - outboxd's heartbeat message, pure: the logical decoding
 * message the monitor writes on its normal connection (monitor.h:
 * pg_logical_emit_message(false, HEARTBEAT_PREFIX, content)) and the relay
 * recognises when it comes back on the stream (changes.c), which gives its
 * round trip. Its prefix is reserved: an outbox's message_prefix may not be
 * it (outbox.c).
 *
 * The content: "slot=S sent_us=T", S the slot's name, T the Unix time of
 * sending in microseconds.
 */
#ifndef OUTBOXD_HEARTBEAT_H
#define OUTBOXD_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The prefix of heartbeat messages. */
#define HEARTBEAT_PREFIX "outboxd.heartbeat"

/* The content of a heartbeat for slot sent at sent_us (Unix epoch us)
 * into out. */
void heartbeat_content(const char *slot, int64_t sent_us, char *out, size_t outlen);

/* True when a logical message (prefix, content of len bytes) is a
 * heartbeat of slot; sets *sent_us. Any bytes are safe. */
bool heartbeat_parse(const char *prefix, const char *content, size_t len, const char *slot,
                     int64_t *sent_us);

#endif
