/*
 * outboxd-mockbroker - hosts librdkafka's built-in mock Kafka cluster in a
 * process of its own so that end-to-end tests can point outboxd (and
 * outboxd-kdump) at a "Kafka" that lives on loopback, and inject faults.
 *
 * Usage:
 *   outboxd-mockbroker [--brokers N] [--partitions N] [--topic NAME]...
 *                      [--port-file FILE] [--control FILE]
 *
 * Once the cluster listens, the bootstrap servers string is written to
 * --port-file (atomically: temp file + rename) and printed on stdout as
 * "BOOTSTRAP <servers>". Commands are then read line by line from stdin and,
 * with --control, from that FIFO (created if missing; opened read-write so
 * that it never reports EOF). Every command is answered on stdout with one
 * line, "ok" or "error <reason>":
 *
 *   down BROKER_ID          broker stops serving (connections are closed)
 *   up BROKER_ID            broker serves again
 *   rtt BROKER_ID MS        added round-trip latency for every response
 *   error APIKEY ERR COUNT  the next COUNT requests of APIKEY (a number or a
 *                           name: produce, fetch, metadata, ...) fail with
 *                           ERR (a number or a name such as _TRANSPORT or
 *                           NOT_LEADER_FOR_PARTITION; RD_KAFKA_RESP_ERR_
 *                           prefix optional)
 *   clear APIKEY            drops the pending injected errors of APIKEY
 *   create TOPIC [PARTS]    creates a topic (PARTS defaults to --partitions)
 *   leader TOPIC PART ID    moves a partition's leadership
 *   bootstrap               answers "ok <servers>"
 *   ping                    answers "ok"
 *   quit                    answers "ok" and exits 0
 *
 * The process exits 0 on SIGTERM, SIGINT or "quit", and when stdin reaches
 * EOF unless --control was given.
 *
 * Known properties of the librdkafka 2.0.x mock cluster that tests must
 * live with:
 *
 *  - Auto-created topics (a producer's Metadata request for an unknown
 *    topic) always get the mock's built-in default of 4 partitions; the
 *    default is not settable through the public API. --partitions therefore
 *    applies to topics created here (--topic, "create"): pre-create a topic
 *    to give it another partition count. A warning is printed when
 *    --partitions is not 4 and no --topic was given.
 *
 *  - The mock does NOT check idempotent producer sequence numbers (it only
 *    validates them for transactional producers). An injected retriable
 *    Produce error such as NOT_ENOUGH_REPLICAS therefore makes the
 *    idempotent producer's retry logic treat earlier in-flight batches as
 *    "implicitly acked" while the mock never stored them: the test sees a
 *    false message loss that a real broker would not cause. Tests must
 *    inject faults as broker down/up, dropped connections ("error produce
 *    _TRANSPORT 1") or latency ("rtt") instead.
 *
 *  - Each partition keeps at most about 5 MB (and 100000 message sets);
 *    older message sets are silently dropped beyond that, as if by
 *    retention. Keep the data a test produces per partition below that
 *    (outboxd-kdump warns when a partition no longer starts at offset 0).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define MOCK_DEFAULT_PARTITIONS 4
#define LINE_MAX_LEN 4096

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *out) {
    fprintf(out,
            "usage: outboxd-mockbroker [--brokers N] [--partitions N] "
            "[--topic NAME]... [--port-file FILE] [--control FILE]\n");
}

static bool parse_int(const char *s, long min, long max, long *out) {
    char *end;
    long v;

    if (!s || !*s) return false;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

static const struct {
    const char *name;
    int16_t key;
} api_names[] = {
    {"produce", 0},          {"fetch", 1},
    {"listoffsets", 2},      {"metadata", 3},
    {"offsetcommit", 8},     {"offsetfetch", 9},
    {"findcoordinator", 10}, {"joingroup", 11},
    {"heartbeat", 12},       {"leavegroup", 13},
    {"syncgroup", 14},       {"apiversions", 18},
    {"initproducerid", 22},  {"addpartitionstotxn", 24},
    {"endtxn", 26},
};

static bool parse_apikey(const char *s, int16_t *out) {
    long v;
    size_t i;

    for (i = 0; i < sizeof(api_names) / sizeof(api_names[0]); i++) {
        if (!strcasecmp(s, api_names[i].name)) {
            *out = api_names[i].key;
            return true;
        }
    }
    if (parse_int(s, 0, INT16_MAX, &v)) {
        *out = (int16_t)v;
        return true;
    }
    return false;
}

static bool parse_errcode(const char *s, rd_kafka_resp_err_t *out) {
    const struct rd_kafka_err_desc *descs;
    size_t cnt, i;
    long v;

    if (parse_int(s, INT_MIN, INT_MAX, &v)) {
        *out = (rd_kafka_resp_err_t)v;
        return true;
    }
    if (!strncasecmp(s, "RD_KAFKA_RESP_ERR_", 18)) s += 18;
    rd_kafka_get_err_descs(&descs, &cnt);
    for (i = 0; i < cnt; i++) {
        if (descs[i].name && !strcasecmp(descs[i].name, s)) {
            *out = descs[i].code;
            return true;
        }
    }
    return false;
}

static int write_port_file(const char *path, const char *servers) {
    char tmp[PATH_MAX];
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >=
        (int)sizeof(tmp)) {
        fprintf(stderr, "mockbroker: --port-file path too long\n");
        return -1;
    }
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "mockbroker: %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "%s\n", servers);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fprintf(stderr, "mockbroker: %s: %s\n", tmp, strerror(errno));
        fclose(f);
        unlink(tmp);
        return -1;
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "mockbroker: %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

struct ctx {
    rd_kafka_mock_cluster_t *mcluster;
    const char *bootstraps;
    int brokers;
    int partitions;
    bool quit;
};

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...) {
    va_list ap;

    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static void reply_err(const char *what, rd_kafka_resp_err_t err) {
    if (err)
        reply("error %s: %s", what, rd_kafka_err2name(err));
    else
        reply("ok");
}

/* Splits line into at most max whitespace-separated words. */
static int split(char *line, char **argv, int max) {
    int n = 0;
    char *save = NULL, *tok;

    for (tok = strtok_r(line, " \t\r\n", &save); tok && n < max;
         tok = strtok_r(NULL, " \t\r\n", &save))
        argv[n++] = tok;
    if (tok) return -1; /* too many words */
    return n;
}

static void run_command(struct ctx *c, char *line) {
    char *argv[8];
    int argc = split(line, argv, 8);
    long id, v, cnt;
    int16_t apikey;
    rd_kafka_resp_err_t err;

    if (argc == 0) return; /* blank line: no reply */
    if (argc < 0) {
        reply("error too many arguments");
        return;
    }
    if (argv[0][0] == '#') return; /* comment */

    if (!strcmp(argv[0], "quit") || !strcmp(argv[0], "exit")) {
        reply("ok");
        c->quit = true;
    } else if (!strcmp(argv[0], "ping")) {
        reply("ok");
    } else if (!strcmp(argv[0], "bootstrap")) {
        reply("ok %s", c->bootstraps);
    } else if (!strcmp(argv[0], "down") || !strcmp(argv[0], "up")) {
        if (argc != 2 || !parse_int(argv[1], 1, INT32_MAX, &id)) {
            reply("error usage: %s BROKER_ID", argv[0]);
            return;
        }
        if (id > c->brokers) {
            reply("error no broker %ld (cluster has %d)", id, c->brokers);
            return;
        }
        if (argv[0][0] == 'd')
            err = rd_kafka_mock_broker_set_down(c->mcluster, (int32_t)id);
        else
            err = rd_kafka_mock_broker_set_up(c->mcluster, (int32_t)id);
        reply_err(argv[0], err);
    } else if (!strcmp(argv[0], "rtt")) {
        if (argc != 3 || !parse_int(argv[1], 1, INT32_MAX, &id) ||
            !parse_int(argv[2], 0, INT_MAX, &v)) {
            reply("error usage: rtt BROKER_ID MS");
            return;
        }
        if (id > c->brokers) {
            reply("error no broker %ld (cluster has %d)", id, c->brokers);
            return;
        }
        err = rd_kafka_mock_broker_set_rtt(c->mcluster, (int32_t)id, (int)v);
        reply_err("rtt", err);
    } else if (!strcmp(argv[0], "error")) {
        rd_kafka_resp_err_t code;
        rd_kafka_resp_err_t *codes;
        long i;

        if (argc != 4 || !parse_apikey(argv[1], &apikey) ||
            !parse_errcode(argv[2], &code) ||
            !parse_int(argv[3], 1, 1000000, &cnt)) {
            reply("error usage: error APIKEY ERRCODE COUNT");
            return;
        }
        codes = calloc((size_t)cnt, sizeof(*codes));
        if (!codes) {
            reply("error out of memory");
            return;
        }
        for (i = 0; i < cnt; i++) codes[i] = code;
        rd_kafka_mock_push_request_errors_array(c->mcluster, apikey,
                                                (size_t)cnt, codes);
        free(codes);
        reply("ok");
    } else if (!strcmp(argv[0], "clear")) {
        if (argc != 2 || !parse_apikey(argv[1], &apikey)) {
            reply("error usage: clear APIKEY");
            return;
        }
        rd_kafka_mock_clear_request_errors(c->mcluster, apikey);
        reply("ok");
    } else if (!strcmp(argv[0], "create")) {
        long parts = c->partitions;

        if ((argc != 2 && argc != 3) ||
            (argc == 3 && !parse_int(argv[2], 1, 100000, &parts))) {
            reply("error usage: create TOPIC [PARTITIONS]");
            return;
        }
        err = rd_kafka_mock_topic_create(c->mcluster, argv[1], (int)parts,
                                         c->brokers < 3 ? c->brokers : 3);
        reply_err("create", err);
    } else if (!strcmp(argv[0], "leader")) {
        if (argc != 4 || !parse_int(argv[2], 0, INT32_MAX, &v) ||
            !parse_int(argv[3], -1, INT32_MAX, &id)) {
            reply("error usage: leader TOPIC PARTITION BROKER_ID");
            return;
        }
        err = rd_kafka_mock_partition_set_leader(c->mcluster, argv[1],
                                                 (int32_t)v, (int32_t)id);
        reply_err("leader", err);
    } else if (!strcmp(argv[0], "help")) {
        reply("ok commands: down ID | up ID | rtt ID MS | error APIKEY ERR "
              "COUNT | clear APIKEY | create TOPIC [PARTS] | leader TOPIC "
              "PART ID | bootstrap | ping | quit");
    } else {
        reply("error unknown command '%s'", argv[0]);
    }
}

/* A line-buffered input source. */
struct input {
    int fd;
    char buf[LINE_MAX_LEN];
    size_t len;
    bool overflow; /* discarding the rest of an over-long line */
};

/* Reads what is available; runs every complete line. Returns 0, or 1 on
 * EOF, -1 on error. */
static int input_read(struct ctx *c, struct input *in) {
    ssize_t n;
    char *nl;

    n = read(in->fd, in->buf + in->len, sizeof(in->buf) - 1 - in->len);
    if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -1;
    }
    if (n == 0) {
        if (in->len > 0 && !in->overflow) { /* last line without newline */
            in->buf[in->len] = '\0';
            run_command(c, in->buf);
        }
        in->len = 0;
        return 1;
    }
    in->len += (size_t)n;
    in->buf[in->len] = '\0';
    while (!c->quit && (nl = memchr(in->buf, '\n', in->len))) {
        size_t linelen = (size_t)(nl - in->buf);

        *nl = '\0';
        if (in->overflow) {
            in->overflow = false;
            reply("error line too long");
        } else {
            run_command(c, in->buf);
        }
        memmove(in->buf, nl + 1, in->len - linelen - 1);
        in->len -= linelen + 1;
        in->buf[in->len] = '\0';
    }
    if (in->len == sizeof(in->buf) - 1) { /* full without a newline */
        in->overflow = true;
        in->len = 0;
    }
    return 0;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"brokers", required_argument, NULL, 'b'},
        {"partitions", required_argument, NULL, 'p'},
        {"topic", required_argument, NULL, 't'},
        {"port-file", required_argument, NULL, 'f'},
        {"control", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct ctx c = {.brokers = 1, .partitions = MOCK_DEFAULT_PARTITIONS};
    const char *port_file = NULL, *control = NULL;
    const char **topics = NULL;
    int ntopics = 0, opt, i;
    long v;
    char errstr[512];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    struct input in_stdin = {.fd = STDIN_FILENO}, in_ctl = {.fd = -1};
    bool stdin_open = true;
    struct sigaction sa;
    int rc = 0;

    topics = calloc((size_t)argc, sizeof(*topics));
    if (!topics) return 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'b':
            if (!parse_int(optarg, 1, 64, &v)) {
                fprintf(stderr, "mockbroker: bad --brokers '%s'\n", optarg);
                return 1;
            }
            c.brokers = (int)v;
            break;
        case 'p':
            if (!parse_int(optarg, 1, 100000, &v)) {
                fprintf(stderr, "mockbroker: bad --partitions '%s'\n",
                        optarg);
                return 1;
            }
            c.partitions = (int)v;
            break;
        case 't':
            topics[ntopics++] = optarg;
            break;
        case 'f':
            port_file = optarg;
            break;
        case 'c':
            control = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 1;
    }
    if (c.partitions != MOCK_DEFAULT_PARTITIONS && ntopics == 0)
        fprintf(stderr,
                "mockbroker: warning: --partitions %d only applies to "
                "topics created with --topic or 'create'; auto-created "
                "topics get the mock's fixed default of %d partitions\n",
                c.partitions, MOCK_DEFAULT_PARTITIONS);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (control) {
        struct stat st;

        if (stat(control, &st) != 0) {
            if (errno != ENOENT || mkfifo(control, 0600) != 0) {
                fprintf(stderr, "mockbroker: %s: %s\n", control,
                        strerror(errno));
                return 1;
            }
        } else if (!S_ISFIFO(st.st_mode)) {
            fprintf(stderr, "mockbroker: %s: not a FIFO\n", control);
            return 1;
        }
        /* Read-write: we are a writer too, so the FIFO never hits EOF
         * when a client closes it, and open() does not block. */
        in_ctl.fd = open(control, O_RDWR | O_NONBLOCK | O_CLOEXEC);
        if (in_ctl.fd < 0) {
            fprintf(stderr, "mockbroker: %s: %s\n", control, strerror(errno));
            return 1;
        }
    }

    /* The mock cluster needs a client instance to hang off; it is never
     * used to produce. */
    conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "client.id", "outboxd-mockbroker", errstr,
                          sizeof(errstr)) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "log_level", "4", errstr, sizeof(errstr)) !=
            RD_KAFKA_CONF_OK) {
        fprintf(stderr, "mockbroker: %s\n", errstr);
        return 1;
    }
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "mockbroker: rd_kafka_new: %s\n", errstr);
        return 1;
    }
    c.mcluster = rd_kafka_mock_cluster_new(rk, c.brokers);
    if (!c.mcluster) {
        fprintf(stderr, "mockbroker: could not create the mock cluster\n");
        rd_kafka_destroy(rk);
        return 1;
    }
    c.bootstraps = rd_kafka_mock_cluster_bootstraps(c.mcluster);

    for (i = 0; i < ntopics; i++) {
        rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(
            c.mcluster, topics[i], c.partitions,
            c.brokers < 3 ? c.brokers : 3);
        if (err) {
            fprintf(stderr, "mockbroker: creating topic %s: %s\n", topics[i],
                    rd_kafka_err2str(err));
            rc = 1;
            goto out;
        }
    }

    if (port_file && write_port_file(port_file, c.bootstraps) != 0) {
        rc = 1;
        goto out;
    }
    printf("BOOTSTRAP %s\n", c.bootstraps);
    fflush(stdout);

    while (!g_stop && !c.quit) {
        struct pollfd pfd[2];
        int n = 0, r, idx_stdin = -1, idx_ctl = -1;

        if (stdin_open) {
            pfd[n].fd = in_stdin.fd;
            pfd[n].events = POLLIN;
            idx_stdin = n++;
        }
        if (in_ctl.fd >= 0) {
            pfd[n].fd = in_ctl.fd;
            pfd[n].events = POLLIN;
            idx_ctl = n++;
        }
        if (n == 0) break; /* stdin gone and no control FIFO */

        r = poll(pfd, (nfds_t)n, 1000);
        if (r < 0) {
            if (errno == EINTR) continue;
            perror("mockbroker: poll");
            rc = 1;
            break;
        }
        if (idx_stdin >= 0 &&
            (pfd[idx_stdin].revents & (POLLIN | POLLHUP | POLLERR))) {
            r = input_read(&c, &in_stdin);
            if (r != 0) {
                stdin_open = false;
                if (!control) break;
            }
        }
        if (!c.quit && idx_ctl >= 0 && (pfd[idx_ctl].revents & POLLIN)) {
            if (input_read(&c, &in_ctl) < 0) {
                perror("mockbroker: reading control FIFO");
                rc = 1;
                break;
            }
        }
    }

out:
    rd_kafka_mock_cluster_destroy(c.mcluster);
    rd_kafka_destroy(rk);
    if (in_ctl.fd >= 0) close(in_ctl.fd);
    free(topics);
    return rc;
}
