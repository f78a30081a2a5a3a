/*
 * kafkasock.h - how outboxd's Kafka clients open their broker connections:
 * librdkafka's socket callback, so that a broker whose host goes silent (no
 * FIN, no RST: a dead host, a partition) is noticed in seconds.
 *
 * librdkafka bounds a request by socket.timeout.ms (60 s) and sets no TCP
 * option of its own that notices a silent peer; meanwhile TCP retransmits
 * with a backoff that grows to minutes, so that after a healed partition a
 * stalled connection could wait that long again before it carries data.
 * Measured on the partition suite (tests/e2e/partitions.sh): with
 * librdkafka's own sockets a leader cut off from outboxd for 35 s logged
 * nothing, its partitions' events were ACKed only 20 s after the healing,
 * and a leader cut off from everyone held its partitions for the whole cut
 * although leadership had moved after 10 s.
 */
#ifndef OUTBOXD_KAFKASOCK_H
#define OUTBOXD_KAFKASOCK_H

#include <librdkafka/rdkafka.h>

/* Unacknowledged data older than this ends a broker connection (Linux
 * TCP_USER_TIMEOUT; it also bounds a connect() to a silent host).
 * librdkafka then reconnects, refreshes its metadata and finds a new
 * leader if the controller moved it. A broker that is merely slow still
 * acknowledges at the TCP level, so only a silent network trips it. */
#define KAFKA_TCP_USER_TIMEOUT_MS 10000
/* Keepalives for a connection that sends nothing: probes after 10 s idle,
 * every 5 s, 2 unanswered end it (about 20 s). */
#define KAFKA_KEEPIDLE_S 10
#define KAFKA_KEEPINTVL_S 5
#define KAFKA_KEEPCNT 2

/* librdkafka's socket_cb: a socket(domain, type | SOCK_CLOEXEC, protocol)
 * with the options above when it is TCP (AF_INET, AF_INET6). Returns the
 * descriptor (librdkafka owns and closes it) or -1 with errno set. An
 * option the kernel refuses is logged and the socket still returned:
 * connecting matters more than noticing faster. */
int kafka_socket_open(int domain, int type, int protocol, void *opaque);

/* Installs kafka_socket_open on conf (every producer and consumer of
 * outboxd: kafka_conf_producer, kafka_conf_consumer). */
void kafka_conf_set_sockets(rd_kafka_conf_t *conf);

#endif
