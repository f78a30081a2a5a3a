/*
 * standby.h - the decisions of a hot standby pair ([postgres] hot_standby,
 * README "Hot standby"): how often an instance that finds the slot held
 * by another process checks again, and the fence that keeps an active
 * instance that stalled from handing Kafka anything more from a stream the
 * server may already have given to the other instance. Pure: no clock, no
 * I/O (tests/unit/test_standby.c); relaystate.c applies them (relayobs.c
 * the last, a standby server's WAL receiver).
 *
 * Exclusivity itself is the server's: a slot has one walsender at a time,
 * and START_REPLICATION on an active slot fails (SQLSTATE 55006). What the
 * server cannot see is a client that stalled (SIGSTOP, a frozen VM, a
 * throttled container) with frames still in its socket buffer: the server
 * cuts it after wal_sender_timeout without a reply and frees the slot,
 * the other instance starts streaming, and the stalled one, on waking,
 * would read and produce those frames beside it. The fence: a stream whose
 * last status went out more than fence_ms ago is not read any further.
 * The server counts wal_sender_timeout from the last reply it received,
 * which cannot be earlier than the last status sent, so a stream within
 * the fence has not been cut for silence yet.
 */
#ifndef OUTBOXD_STANDBY_H
#define OUTBOXD_STANDBY_H

#include <stdbool.h>
#include <stdint.h>

/* While the slot is held by another process, it is checked this often (or
 * every retry_max_ms, if that is shorter): it bounds what a take-over adds
 * to the server's detection of the dead holder. */
#define STANDBY_CHECK_MS 1000

/* The fence is this fraction of the server's wal_sender_timeout: above the
 * longest normal silence (a status goes out every status_interval_ms, 1 s
 * by default, and at once when the server asks, which it does after half
 * the timeout), below the timeout by a margin that covers one turn of the
 * loop and the other instance's start. */
#define STANDBY_FENCE_NUM 3
#define STANDBY_FENCE_DEN 4

/* The interval between two checks of a held slot (ms). */
int standby_check_ms(int retry_max_ms);

/* The fence (ms) for a walsender whose wal_sender_timeout is
 * sender_timeout_ms; 0 (no fence) when the server never cuts a silent
 * client (0) or the timeout is not known (< 0). */
int64_t standby_fence_ms(int64_t sender_timeout_ms);

/* Whether a stream whose last status went out at last_status_ms (or that
 * started then, monotonic) must not be read any further at now_ms. */
bool standby_fenced(int64_t now_ms, int64_t last_status_ms, int64_t fence_ms);

/*
 * The yield: an active instance that reaches no Kafka broker while it
 * still reaches the server keeps its walsender alive (its statuses go on),
 * so the server never frees the slot and a standby that does reach Kafka
 * would wait for as long as the partition lasts. With [postgres]
 * hot_standby_yield (yield_ms > 0) it gives the slot up instead: it stops
 * (exit 1, confirming only what was ACKed), the standby takes the slot,
 * and a supervisor starts this one again, which then stands by.
 *
 * standby_kafka_lost() follows the brokers the producer is connected to
 * (brokers_up, librdkafka's statistics: < 0 not known yet) at now_ms and
 * keeps in *lost_since_ms since when it has seen none (0: some are up, or
 * not known; the relay clears it when a stream starts); it returns how
 * long none has been reachable (0 while some are, or before the first
 * statistics).
 * standby_should_yield() says whether that is past the yield.
 */
int64_t standby_kafka_lost(int brokers_up, int64_t now_ms, int64_t *lost_since_ms);
bool standby_should_yield(int64_t lost_ms, int64_t yield_ms);

/*
 * Decoding on a standby server (PostgreSQL 16+; not the pair above): the
 * standby's own WAL receiver. A standby that receives no WAL decodes
 * nothing more, and neither the stream nor the slot's lag says so (the
 * lag is measured against the standby's own replay position, which does
 * not move either): its primary is down, or another standby was promoted
 * past a point this one had already replayed, so it can never follow it
 * (its log: "new timeline N forked off current database system timeline
 * M before current recovery point"). The monitor reads the receiver's
 * status with the slot (monitor.h).
 *
 * standby_receiver_stalled() keeps in *since_ms since when status has not
 * been "streaming" at now_ms (0 while it is, and while it is not known:
 * "" on a primary, "?" for a role that may not read it) and returns for
 * how long. Past STANDBY_RECEIVER_WARN_MS the relay warns, then every
 * STANDBY_RECEIVER_WARN_EVERY_MS, and says when it streams again.
 */
#define STANDBY_RECEIVER_WARN_MS 30000
#define STANDBY_RECEIVER_WARN_EVERY_MS 300000
int64_t standby_receiver_stalled(const char *status, int64_t now_ms, int64_t *since_ms);

#endif
