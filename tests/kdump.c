/*
 * outboxd-kdump - dumps every message of some Kafka topics, from the
 * beginning to the end each partition had when the dump started, as one
 * JSON object per line:
 *
 *   {"topic":"t","partition":0,"offset":12,
 *    "key":"k" | null, "key_hex":"6b" | null,
 *    "value":"v" | null, "value_hex":"76" | null,
 *    "headers":{"name":"value" | null, ...},
 *    "headers_hex":{"name":"hex" | null, ...},
 *    "headers_list":[["name","value" | null], ...],
 *    "timestamp":1733000000000 | null}
 *
 * "key"/"value" (and header values) are JSON strings when the bytes are
 * valid UTF-8, else null; the *_hex fields carry the raw bytes in lower-case
 * hex, so tests can compare bytes exactly. null in a *_hex field means a
 * null key/value. headers_list keeps every header in order, duplicates too.
 * "timestamp" is the message's timestamp in ms since the epoch (CreateTime:
 * when the producer was handed the message, so a copy sent again after a
 * restart carries the later time; the fault suites attribute duplicates to
 * faults with it), null when the message has none.
 *
 * Output is sorted by topic, then partition, then offset.
 *
 * Usage: outboxd-kdump -b BOOTSTRAP (-t TOPIC ... | --all-topics)
 *                      [--timeout-ms MS] [-X prop=value ...]
 *
 * Partitions are assigned directly (no consumer group) at
 * OFFSET_BEGINNING; the end of each is its high watermark, queried first.
 * Topics that do not exist are reported on stderr and dumped as empty.
 * Exit status: 0 done, 1 error, 2 the end was not reached: --timeout-ms
 * (default 60000) passed without progress. Every step forward (the
 * metadata, a partition's watermarks, a message or a partition's end)
 * starts the wait again, so thousands of partitions on a slow machine
 * (an AddressSanitizer build beside other tests) take as long as they
 * need, and a stalled broker still ends the dump.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <librdkafka/rdkafka.h>

struct part {
    char *topic;
    int32_t partition;
    int64_t lo, hi;    /* watermarks when the dump started */
    bool done;         /* reached hi (or EOF) */
    char **lines;      /* JSON lines, in offset order */
    size_t nlines, cap;
    int64_t next;      /* next expected offset (dedup after a refetch) */
};

static int64_t now_ms(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die_oom(void) {
    fprintf(stderr, "kdump: out of memory\n");
    exit(1);
}

static char *hex(const void *p, size_t len) {
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = p;
    char *s = malloc(len * 2 + 1);
    size_t i;

    if (!s) die_oom();
    for (i = 0; i < len; i++) {
        s[2 * i] = digits[b[i] >> 4];
        s[2 * i + 1] = digits[b[i] & 15];
    }
    s[2 * len] = '\0';
    return s;
}

/* JSON string for bytes when valid UTF-8 (NUL bytes allowed), else null;
 * null for a NULL pointer. */
static json_t *bytes_str(const void *p, size_t len) {
    json_t *j;

    if (!p) return json_null();
    j = json_stringn((const char *)p, len);
    return j ? j : json_null();
}

static json_t *bytes_hex(const void *p, size_t len) {
    char *h;
    json_t *j;

    if (!p) return json_null();
    h = hex(p, len);
    j = json_string(h);
    free(h);
    return j;
}

static void set_new(json_t *obj, const char *key, json_t *val) {
    if (!val || json_object_set_new(obj, key, val) != 0) die_oom();
}

static char *message_json(const rd_kafka_message_t *m) {
    json_t *o = json_object(), *h = json_object(), *hh = json_object(),
           *hl = json_array();
    rd_kafka_headers_t *hdrs = NULL;
    char *line;

    if (!o || !h || !hh || !hl) die_oom();
    set_new(o, "topic", json_string(rd_kafka_topic_name(m->rkt)));
    set_new(o, "partition", json_integer(m->partition));
    set_new(o, "offset", json_integer(m->offset));
    set_new(o, "key", bytes_str(m->key, m->key_len));
    set_new(o, "key_hex", bytes_hex(m->key, m->key_len));
    set_new(o, "value", bytes_str(m->payload, m->len));
    set_new(o, "value_hex", bytes_hex(m->payload, m->len));

    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        size_t i;
        const char *name;
        const void *val;
        size_t vlen;

        for (i = 0; !rd_kafka_header_get_all(hdrs, i, &name, &val, &vlen);
             i++) {
            json_t *pair = json_array();

            if (!pair) die_oom();
            /* Header names are strings in the protocol; a name that is not
             * valid UTF-8 is kept in hex form. */
            json_t *jn = json_string(name);
            if (!jn) {
                char *hn = hex(name, strlen(name));
                char *k = malloc(strlen(hn) + 5);
                if (!k) die_oom();
                sprintf(k, "hex:%s", hn);
                jn = json_string(k);
                free(hn);
                free(k);
            }
            if (!jn) die_oom();
            set_new(h, json_string_value(jn), bytes_str(val, vlen));
            set_new(hh, json_string_value(jn), bytes_hex(val, vlen));
            if (json_array_append(pair, jn) ||
                json_array_append_new(pair, bytes_str(val, vlen)) ||
                json_array_append_new(hl, pair))
                die_oom();
            json_decref(jn);
        }
    }
    set_new(o, "headers", h);
    set_new(o, "headers_hex", hh);
    set_new(o, "headers_list", hl);
    {
        int64_t ts = rd_kafka_message_timestamp(m, NULL);
        set_new(o, "timestamp", ts >= 0 ? json_integer(ts) : json_null());
    }

    line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!line) die_oom();
    json_decref(o);
    return line;
}

static void usage(FILE *out) {
    fprintf(out, "usage: outboxd-kdump -b BOOTSTRAP (-t TOPIC ... | "
                 "--all-topics [--exclude TOPIC ...]) [--timeout-ms MS] "
                 "[-X prop=value ...]\n"
                 "  (-X isolation.level=read_uncommitted: every copy written, "
                 "aborted transactions' too;\n   librdkafka's default is "
                 "read_committed)\n");
}

/* --all-topics: every topic but Kafka's own (__*) and the excluded. */
static bool all_wanted(const char *topic, const char **excluded, int n) {
    if (strncmp(topic, "__", 2) == 0) return false;
    for (int i = 0; i < n; i++)
        if (!strcmp(topic, excluded[i])) return false;
    return true;
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v) {
    char errstr[512];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        fprintf(stderr, "kdump: %s=%s: %s\n", k, v, errstr);
        exit(1);
    }
}

static int cmp_part(const void *a, const void *b) {
    const struct part *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);

    if (c) return c;
    return (x->partition > y->partition) - (x->partition < y->partition);
}

static int64_t remaining(int64_t deadline) {
    int64_t r = deadline - now_ms();
    return r > 0 ? r : 0;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"bootstrap", required_argument, NULL, 'b'},
        {"topic", required_argument, NULL, 't'},
        {"all-topics", no_argument, NULL, 'a'},
        {"timeout-ms", required_argument, NULL, 'T'},
        {"exclude", required_argument, NULL, 'x'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *bootstrap = NULL;
    const char **topics, **excluded;
    int ntopics = 0, nexcluded = 0, opt, i, j;
    bool all = false;
    long timeout_ms = 60000;
    int64_t deadline;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    char errstr[512];
    const struct rd_kafka_metadata *md = NULL;
    struct part *parts = NULL;
    size_t nparts = 0, pcap = 0, p, ndone = 0;
    rd_kafka_topic_partition_list_t *assign;
    rd_kafka_resp_err_t err;
    int rc = 0;

    topics = calloc((size_t)argc, sizeof(*topics));
    if (!topics) die_oom();
    excluded = calloc((size_t)argc, sizeof(*excluded));
    if (!excluded) die_oom();
    while ((opt = getopt_long(argc, argv, "b:t:x:X:h", opts, NULL)) != -1) {
        switch (opt) {
        case 'x':
            excluded[nexcluded++] = optarg;
            break;
        case 'b':
            bootstrap = optarg;
            break;
        case 't':
            topics[ntopics++] = optarg;
            break;
        case 'a':
            all = true;
            break;
        case 'T': {
            char *end;
            errno = 0;
            timeout_ms = strtol(optarg, &end, 10);
            if (errno || *end || timeout_ms <= 0) {
                fprintf(stderr, "kdump: bad --timeout-ms '%s'\n", optarg);
                return 1;
            }
            break;
        }
        case 'X': {
            char *eq = strchr(optarg, '=');
            if (!eq) {
                fprintf(stderr, "kdump: -X needs prop=value\n");
                return 1;
            }
            *eq = '\0';
            conf_set(conf, optarg, eq + 1);
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (!bootstrap || optind != argc || (ntopics == 0) == !all) {
        usage(stderr);
        return 1;
    }
    deadline = now_ms() + timeout_ms;

    conf_set(conf, "bootstrap.servers", bootstrap);
    conf_set(conf, "group.id", "outboxd-kdump");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "enable.auto.offset.store", "false");
    conf_set(conf, "enable.partition.eof", "true");
    conf_set(conf, "auto.offset.reset", "earliest");
    conf_set(conf, "check.crcs", "true");
    conf_set(conf, "log_level", "4");
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "kdump: rd_kafka_new: %s\n", errstr);
        return 1;
    }

    /* Metadata: every topic (to list them, or to find the given ones
     * without asking the broker to create them). Retry transient errors. */
    for (;;) {
        int t = (int)remaining(deadline);

        if (t > 5000) t = 5000;
        err = rd_kafka_metadata(rk, 1, NULL, &md, t > 0 ? t : 1);
        if (!err) {
            bool transient = false;

            for (i = 0; i < md->topic_cnt; i++) {
                const struct rd_kafka_metadata_topic *mt = &md->topics[i];
                bool want = false;

                if (all)
                    want = all_wanted(mt->topic, excluded, nexcluded);
                for (j = 0; !all && j < ntopics; j++)
                    if (!strcmp(topics[j], mt->topic)) want = true;
                if (want && (mt->err == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
                             mt->partition_cnt == 0))
                    transient = true;
            }
            if (!transient) {
                deadline = now_ms() + timeout_ms;
                break;
            }
            rd_kafka_metadata_destroy(md);
            md = NULL;
            err = RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE;
        }
        if (remaining(deadline) == 0) {
            fprintf(stderr, "kdump: metadata: %s (timed out)\n",
                    rd_kafka_err2str(err));
            rd_kafka_destroy(rk);
            return 2;
        }
        fprintf(stderr, "kdump: metadata: %s; retrying\n",
                rd_kafka_err2str(err));
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
    }

    for (j = 0; !all && j < ntopics; j++) {
        bool found = false;

        for (i = 0; i < md->topic_cnt; i++)
            if (!strcmp(md->topics[i].topic, topics[j])) found = true;
        if (!found)
            fprintf(stderr, "kdump: topic %s does not exist: dumped as empty\n",
                    topics[j]);
    }

    for (i = 0; i < md->topic_cnt; i++) {
        const struct rd_kafka_metadata_topic *mt = &md->topics[i];
        bool want = false;

        if (all)
            want = all_wanted(mt->topic, excluded, nexcluded);
        for (j = 0; !all && j < ntopics; j++)
            if (!strcmp(topics[j], mt->topic)) want = true;
        if (!want) continue;
        if (mt->err) {
            fprintf(stderr, "kdump: topic %s: %s\n", mt->topic,
                    rd_kafka_err2str(mt->err));
            if (mt->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) continue;
            rc = 1;
            goto out;
        }
        for (j = 0; j < mt->partition_cnt; j++) {
            if (nparts == pcap) {
                pcap = pcap ? pcap * 2 : 16;
                parts = realloc(parts, pcap * sizeof(*parts));
                if (!parts) die_oom();
            }
            memset(&parts[nparts], 0, sizeof(parts[nparts]));
            parts[nparts].topic = strdup(mt->topic);
            if (!parts[nparts].topic) die_oom();
            parts[nparts].partition = mt->partitions[j].id;
            nparts++;
        }
    }
    rd_kafka_metadata_destroy(md);
    md = NULL;
    if (nparts) qsort(parts, nparts, sizeof(*parts), cmp_part);

    /* The end to reach: each partition's high watermark, now. */
    for (p = 0; p < nparts; p++) {
        struct part *pt = &parts[p];

        for (;;) {
            int t = (int)remaining(deadline);

            if (t > 5000) t = 5000;
            err = rd_kafka_query_watermark_offsets(rk, pt->topic, pt->partition,
                                                   &pt->lo, &pt->hi,
                                                   t > 0 ? t : 1);
            if (!err) {
                deadline = now_ms() + timeout_ms;
                break;
            }
            if (remaining(deadline) == 0) {
                fprintf(stderr, "kdump: watermarks of %s [%" PRId32 "]: %s "
                                "(timed out)\n",
                        pt->topic, pt->partition, rd_kafka_err2str(err));
                rc = 2;
                goto out;
            }
            fprintf(stderr, "kdump: watermarks of %s [%" PRId32 "]: %s; "
                            "retrying\n",
                    pt->topic, pt->partition, rd_kafka_err2str(err));
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (pt->lo > 0)
            fprintf(stderr,
                    "kdump: warning: %s [%" PRId32 "] starts at offset %" PRId64
                    ": earlier messages were deleted by the broker "
                    "(retention / mock size limit)\n",
                    pt->topic, pt->partition, pt->lo);
        pt->next = pt->lo;
        if (pt->hi <= pt->lo) {
            pt->done = true;
            ndone++;
        }
    }

    if (ndone < nparts) {
        assign = rd_kafka_topic_partition_list_new((int)nparts);
        for (p = 0; p < nparts; p++) {
            if (parts[p].done) continue;
            rd_kafka_topic_partition_list_add(assign, parts[p].topic,
                                              parts[p].partition)
                ->offset = RD_KAFKA_OFFSET_BEGINNING;
        }
        err = rd_kafka_assign(rk, assign);
        rd_kafka_topic_partition_list_destroy(assign);
        if (err) {
            fprintf(stderr, "kdump: assign: %s\n", rd_kafka_err2str(err));
            rc = 1;
            goto out;
        }
    }

    while (ndone < nparts) {
        rd_kafka_message_t *m;
        struct part *pt = NULL;
        struct part key;
        int t = (int)remaining(deadline);

        if (t == 0) {
            for (p = 0; p < nparts; p++)
                if (!parts[p].done)
                    fprintf(stderr,
                            "kdump: %s [%" PRId32 "]: at offset %" PRId64
                            ", end %" PRId64 " not reached in time\n",
                            parts[p].topic, parts[p].partition, parts[p].next,
                            parts[p].hi);
            rc = 2;
            goto out;
        }
        m = rd_kafka_consumer_poll(rk, t < 500 ? t : 500);
        if (!m) continue;

        if (m->rkt) {
            key.topic = (char *)rd_kafka_topic_name(m->rkt);
            key.partition = m->partition;
            pt = bsearch(&key, parts, nparts, sizeof(*parts), cmp_part);
        }
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (pt && !pt->done && m->offset >= pt->hi) {
                pt->done = true;
                ndone++;
                deadline = now_ms() + timeout_ms;
            }
        } else if (m->err) {
            fprintf(stderr, "kdump: %s [%" PRId32 "]: %s\n",
                    m->rkt ? rd_kafka_topic_name(m->rkt) : "-", m->partition,
                    rd_kafka_message_errstr(m));
            if (m->err == RD_KAFKA_RESP_ERR__FATAL ||
                m->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
                m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
                m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
                rd_kafka_message_destroy(m);
                rc = 1;
                goto out;
            }
        } else if (pt && !pt->done && m->offset >= pt->next) {
            if (m->offset < pt->hi) {
                if (pt->nlines == pt->cap) {
                    pt->cap = pt->cap ? pt->cap * 2 : 64;
                    pt->lines = realloc(pt->lines, pt->cap * sizeof(char *));
                    if (!pt->lines) die_oom();
                }
                pt->lines[pt->nlines++] = message_json(m);
            }
            pt->next = m->offset + 1;
            deadline = now_ms() + timeout_ms;
            if (pt->next >= pt->hi) {
                pt->done = true;
                ndone++;
            }
        }
        rd_kafka_message_destroy(m);
    }

out:
    if (rc == 0) {
        for (p = 0; p < nparts; p++)
            for (size_t l = 0; l < parts[p].nlines; l++)
                if (puts(parts[p].lines[l]) == EOF) rc = 1;
        if (fflush(stdout) != 0) {
            perror("kdump: stdout");
            rc = 1;
        }
    }
    for (p = 0; p < nparts; p++) {
        for (size_t l = 0; l < parts[p].nlines; l++) free(parts[p].lines[l]);
        free(parts[p].lines);
        free(parts[p].topic);
    }
    free(parts);
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(topics);
    free(excluded);
    return rc;
}
