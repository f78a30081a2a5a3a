/*
 * outboxd-netdelay - a userspace delayer for the partition tests' nemesis
 * (tests/e2e/netns_lib.sh, netns_delay): this kernel has no sch_netem, so
 * packets are handed to this process with iptables' NFQUEUE target, held
 * for DELAY +- JITTER ms each (uniform; packets released out of order
 * are reordered), and accepted back into the kernel. Run it inside the
 * test host's network namespace (ip netns exec), before the rules that
 * queue to it.
 *
 *   outboxd-netdelay --queue N --delay-ms D --jitter-ms J [--seed S]
 *
 * Runs until SIGTERM or SIGINT, then accepts whatever it still holds and
 * prints on stderr "netdelay: queue N: P packets, max H held, F dropped by
 * the kernel (queue full)". A packet the kernel could not queue (this
 * process too slow, or gone) is dropped by the kernel: that is loss, not
 * delay, and counted only as the kernel reports it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* At most this many packets held at once: about 90 ms of a test's traffic
 * is far below it; past it, a packet is released at once. */
#define MAX_HELD 65536
#define KERNEL_QUEUE_LEN 65536

struct held {
    int64_t due_us;
    uint32_t id;
};

/* The packets held, a binary min-heap on due_us. */
static struct held heap[MAX_HELD];
static size_t nheld, max_held;
static uint64_t npackets;
static int delay_us, jitter_us;
static volatile sig_atomic_t stop;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void heap_push(struct held h)
{
    size_t i = nheld++;
    while (i > 0 && heap[(i - 1) / 2].due_us > h.due_us) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = h;
}

static struct held heap_pop(void)
{
    struct held top = heap[0], last = heap[--nheld];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= nheld) break;
        if (c + 1 < nheld && heap[c + 1].due_us < heap[c].due_us) c++;
        if (heap[c].due_us >= last.due_us) break;
        heap[i] = heap[c];
        i = c;
    }
    if (nheld) heap[i] = last;
    return top;
}

/* This packet's delay: delay_us +- jitter_us, uniform, never negative. */
static int64_t pick_delay_us(void)
{
    int64_t d = delay_us;
    if (jitter_us > 0) d += (int64_t)(random() % (2 * jitter_us + 1)) - jitter_us;
    return d > 0 ? d : 0;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa,
                     void *data)
{
    (void)msg;
    (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    npackets++;
    if (nheld == MAX_HELD) return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    heap_push((struct held){now_us() + pick_delay_us(), id});
    if (nheld > max_held) max_held = nheld;
    return 0;
}

/* Accepts every held packet due by now (all of them when all is set). */
static void release_due(struct nfq_q_handle *qh, bool all)
{
    int64_t now = now_us();
    while (nheld && (all || heap[0].due_us <= now)) {
        struct held h = heap_pop();
        if (nfq_set_verdict(qh, h.id, NF_ACCEPT, 0, NULL) < 0)
            fprintf(stderr, "netdelay: verdict for packet %u failed: %s\n", h.id,
                    strerror(errno));
    }
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: outboxd-netdelay --queue N --delay-ms D --jitter-ms J [--seed S]\n");
    return 2;
}

/* The kernel's count of packets it dropped for this queue (queue full or
 * no listener): /proc/net/netfilter/nfnetlink_queue, column 6. */
static long kernel_drops(int queue)
{
    FILE *f = fopen("/proc/net/netfilter/nfnetlink_queue", "r");
    long q, a, b, c, d, drops, out = -1;
    if (!f) return -1;
    while (fscanf(f, "%ld %ld %ld %ld %ld %ld %*[^\n]", &q, &a, &b, &c, &d, &drops) == 6)
        if (q == queue) out = drops;
    fclose(f);
    return out;
}

int main(int argc, char **argv)
{
    int queue = -1;
    unsigned seed = (unsigned)time(NULL);
    delay_us = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--queue")) queue = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--delay-ms")) delay_us = atoi(argv[i + 1]) * 1000;
        else if (!strcmp(argv[i], "--jitter-ms")) jitter_us = atoi(argv[i + 1]) * 1000;
        else if (!strcmp(argv[i], "--seed")) seed = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else return usage();
    }
    if (argc % 2 == 0 || queue < 0 || queue > 65535 || delay_us < 0 || jitter_us < 0)
        return usage();
    srandom(seed);

    struct nfq_handle *h = nfq_open();
    if (!h) {
        fprintf(stderr, "netdelay: nfq_open: %s\n", strerror(errno));
        return 1;
    }
    struct nfq_q_handle *qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
    if (!qh) {
        fprintf(stderr, "netdelay: binding queue %d: %s\n", queue, strerror(errno));
        nfq_close(h);
        return 1;
    }
    /* Only the packet's id is needed, not its bytes. */
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0 ||
        nfq_set_queue_maxlen(qh, KERNEL_QUEUE_LEN) < 0) {
        fprintf(stderr, "netdelay: configuring queue %d: %s\n", queue, strerror(errno));
        nfq_destroy_queue(qh);
        nfq_close(h);
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int fd = nfq_fd(h);
    fprintf(stderr, "netdelay: queue %d: holding packets %d +- %d ms\n", queue,
            delay_us / 1000, jitter_us / 1000);
    fflush(stderr);
    char buf[4096] __attribute__((aligned));
    while (!stop) {
        int timeout = -1;
        if (nheld) {
            int64_t wait = heap[0].due_us - now_us();
            timeout = wait <= 0 ? 0 : (int)((wait + 999) / 1000);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, timeout);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "netdelay: poll: %s\n", strerror(errno));
            break;
        }
        if (n > 0) {
            ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (r > 0) nfq_handle_packet(h, buf, (int)r);
            else if (r < 0 && errno == ENOBUFS)
                fprintf(stderr, "netdelay: the kernel's queue overflowed (ENOBUFS)\n");
        }
        release_due(qh, false);
    }
    release_due(qh, true);
    fprintf(stderr, "netdelay: queue %d: %llu packets, max %zu held, %ld dropped by the kernel "
            "(queue full)\n",
            queue, (unsigned long long)npackets, max_held, kernel_drops(queue));
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
