/*
 * trickle.c - slow HTTP clients for tests/e2e/http_limits.sh: opens N
 * connections to HOST:PORT from source address SRC and sends an HTTP
 * request on each one byte at a time, one byte every INTERVAL_MS, for
 * SECONDS or until SIGTERM, whichever comes first (the test stops it
 * once its probes are done: a slow machine must not end the clients
 * before the probes); a connection the server closes is opened again at
 * once (a persistent slowloris). Prints, at the end, how many connections
 * were opened and the most that were open at once (as the client saw
 * them).
 *
 *   outboxd-trickle SRC HOST PORT N INTERVAL_MS SECONDS
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char request[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A connected socket from src to dst, or -1. */
static int open_one(const struct sockaddr_in *src, const struct sockaddr_in *dst)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (bind(fd, (const struct sockaddr *)src, sizeof(*src)) != 0 ||
        connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* 1 when the server has closed fd (EOF or error), 0 while it is open. */
static int closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 0;
    char b[256];
    ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: outboxd-trickle SRC HOST PORT N INTERVAL_MS SECONDS\n");
        return 2;
    }
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, argv[1], &src.sin_addr) != 1 ||
        inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1) {
        fprintf(stderr, "outboxd-trickle: SRC and HOST must be IPv4 addresses\n");
        return 2;
    }
    dst.sin_port = htons((uint16_t)atoi(argv[3]));
    int n = atoi(argv[4]), interval = atoi(argv[5]);
    long long end = now_ms() + 1000LL * atoi(argv[6]);
    int *fd = calloc((size_t)n, sizeof(*fd));
    size_t *sent = calloc((size_t)n, sizeof(*sent));
    if (!fd || !sent) {
        free(fd);
        free(sent);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_term};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    long opened = 0;
    int most = 0;
    for (int i = 0; i < n; i++) fd[i] = -1;
    while (!stopping && now_ms() < end) {
        int open_now = 0;
        for (int i = 0; i < n; i++) {
            if (fd[i] >= 0 && closed(fd[i])) {
                close(fd[i]);
                fd[i] = -1;
            }
            if (fd[i] < 0 && (fd[i] = open_one(&src, &dst)) >= 0) {
                opened++;
                sent[i] = 0;
            }
            if (fd[i] < 0) continue;
            open_now++;
            if (sent[i] < sizeof(request) - 1 &&
                send(fd[i], request + sent[i], 1, MSG_NOSIGNAL) == 1)
                sent[i]++;
        }
        if (open_now > most) most = open_now;
        /* sleep INTERVAL_MS, but look for closed connections every 100 ms */
        for (int t = 0; t < interval && !stopping && now_ms() < end; t += 100) {
            usleep(100 * 1000);
            for (int i = 0; i < n; i++)
                if (fd[i] >= 0 && closed(fd[i])) {
                    close(fd[i]);
                    fd[i] = -1;
                }
        }
    }
    printf("opened %ld connections, at most %d open at once\n", opened, most);
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0) close(fd[i]);
    free(fd);
    free(sent);
    return 0;
}
