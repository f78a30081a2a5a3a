/*
 * kafkasock.c - the broker connections of outboxd's Kafka clients: TCP
 * options that bound how long a silent broker host goes unnoticed (see
 * kafkasock.h).
 */
#include "kafkasock.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"

static const struct {
    int level, name, value;
    const char *what;
} TCP_OPTIONS[] = {
    {SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"},
    {IPPROTO_TCP, TCP_KEEPIDLE, KAFKA_KEEPIDLE_S, "TCP_KEEPIDLE"},
    {IPPROTO_TCP, TCP_KEEPINTVL, KAFKA_KEEPINTVL_S, "TCP_KEEPINTVL"},
    {IPPROTO_TCP, TCP_KEEPCNT, KAFKA_KEEPCNT, "TCP_KEEPCNT"},
    {IPPROTO_TCP, TCP_USER_TIMEOUT, KAFKA_TCP_USER_TIMEOUT_MS, "TCP_USER_TIMEOUT"},
};
#define N_TCP_OPTIONS (sizeof(TCP_OPTIONS) / sizeof(TCP_OPTIONS[0]))

/* Sets every TCP option on fd; one refused is logged and skipped. */
static void set_tcp_options(int fd)
{
    for (size_t i = 0; i < N_TCP_OPTIONS; i++) {
        int v = TCP_OPTIONS[i].value;
        if (setsockopt(fd, TCP_OPTIONS[i].level, TCP_OPTIONS[i].name, &v, sizeof(v)) != 0)
            log_warn("kafka: setting %s on a broker connection failed: %s (a silent broker "
                     "host may go unnoticed for longer)",
                     TCP_OPTIONS[i].what, strerror(errno));
    }
}

int kafka_socket_open(int domain, int type, int protocol, void *opaque)
{
    (void)opaque;
    int fd = socket(domain, type | SOCK_CLOEXEC, protocol);
    if (fd < 0) return -1;
    if (domain == AF_INET || domain == AF_INET6) set_tcp_options(fd);
    return fd;
}

void kafka_conf_set_sockets(rd_kafka_conf_t *conf)
{
    rd_kafka_conf_set_socket_cb(conf, kafka_socket_open);
}
