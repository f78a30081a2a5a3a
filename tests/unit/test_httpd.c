/*
 * test_httpd.c - include/obs/httpd.h: [http] listen parsing, the pure router
 * (status codes, bodies, the stall threshold of /healthz, the reason of
 * /readyz), and one real server on 127.0.0.1 port 0 answering over a
 * socket from a published snapshot and heartbeat.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "httpd.h"

START_TEST(test_listen_valid)
{
    char err[256];
    struct listen_addr la;
    ck_assert_int_eq(listen_addr_parse("127.0.0.1:19187", &la, err, sizeof(err)), 0);
    ck_assert_int_eq(la.family, AF_INET);
    ck_assert_int_eq(la.port, 19187);
    struct sockaddr_in *a = (struct sockaddr_in *)&la.sa;
    ck_assert_uint_eq(ntohl(a->sin_addr.s_addr), 0x7f000001);
    ck_assert_int_eq(ntohs(a->sin_port), 19187);
    ck_assert_int_eq(listen_addr_parse(":80", &la, err, sizeof(err)), 0);
    ck_assert_uint_eq(((struct sockaddr_in *)&la.sa)->sin_addr.s_addr, htonl(INADDR_ANY));
    ck_assert_int_eq(listen_addr_parse("0.0.0.0:0", &la, err, sizeof(err)), 0);
    ck_assert_int_eq(la.port, 0);
    ck_assert_int_eq(listen_addr_parse("[::1]:65535", &la, err, sizeof(err)), 0);
    ck_assert_int_eq(la.family, AF_INET6);
    ck_assert_int_eq(la.port, 65535);
    ck_assert_int_eq(listen_addr_parse("[::]:19187", &la, err, sizeof(err)), 0);
    /* a host name is kept for httpd_start() to resolve */
    ck_assert_int_eq(listen_addr_parse("localhost:19187", &la, err, sizeof(err)), 0);
    ck_assert_int_eq(la.family, AF_UNSPEC);
    ck_assert_str_eq(la.name, "localhost");
    ck_assert_int_eq(la.port, 19187);
    ck_assert_int_eq(listen_addr_parse("db-1.example.org:0", &la, err, sizeof(err)), 0);
    ck_assert_str_eq(la.name, "db-1.example.org");
}
END_TEST

static const char *const invalid[][2] = {
    {"19187", "expected HOST:PORT"},
    {"127.0.0.1", "expected HOST:PORT"},
    {"127.0.0.1:", "is not a number"},
    {"127.0.0.1:65536", "is not a number"},
    {"127.0.0.1:-1", "is not a number"},
    {"127.0.0.1:+80", "is not a number"},
    {"127.0.0.1:80x", "is not a number"},
    {"local_host:19187", "not a numeric IP address nor a host name"},
    {"1.2.3:19187", "not a numeric IP address"},
    {"256.0.0.1:19187", "not a numeric IP address"},
    {"::1:19187", "not a numeric IP address"},
    {"[::1]19187", "expected [IPv6]:PORT"},
    {"[::1:19187", "expected [IPv6]:PORT"},
    {"[127.0.0.1]:19187", "not a numeric IP address"},
};

START_TEST(test_listen_invalid)
{
    char err[256] = "";
    struct listen_addr la;
    ck_assert_int_eq(listen_addr_parse(invalid[_i][0], &la, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, invalid[_i][1]) != NULL, "%s: error \"%s\" lacks \"%s\"",
                  invalid[_i][0], err, invalid[_i][1]);
    ck_assert_msg(strstr(err, invalid[_i][0]) != NULL, "error does not quote the value: %s",
                  err);
}
END_TEST

static struct httpd_view view(void)
{
    return (struct httpd_view){.metrics = "outboxd_ready 1\n",
                               .beat_ms = 10000,
                               .ready = true,
                               .not_ready = "",
                               .stall_ms = 30000};
}

START_TEST(test_route_metrics)
{
    struct httpd_view v = view();
    struct httpd_reply r;
    httpd_route("GET", "/metrics", &v, 10000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
    ck_assert_uint_eq(r.len, strlen(v.metrics));
    ck_assert_ptr_eq(r.body, v.metrics);
    httpd_route("HEAD", "/metrics", &v, 10000, &r);
    ck_assert_int_eq(r.status, 200);
    v.metrics = NULL;
    httpd_route("GET", "/metrics", &v, 10000, &r);
    ck_assert_int_eq(r.status, 503);
}
END_TEST

START_TEST(test_route_healthz)
{
    struct httpd_view v = view();
    struct httpd_reply r;
    httpd_route("GET", "/healthz", &v, 10000 + 1234, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "ok: event loop turned 1.234 s ago\n");
    ck_assert_uint_eq(r.len, strlen(r.body));
    httpd_route("GET", "/healthz", &v, 10000 + 30000, &r); /* at the limit: still ok */
    ck_assert_int_eq(r.status, 200);
    httpd_route("GET", "/healthz", &v, 10000 + 30001, &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_str_eq(r.body, "event loop stalled: last turn 30.001 s ago\n");
    httpd_route("GET", "/healthz", &v, 9000, &r); /* a beat "from the future" */
    ck_assert_int_eq(r.status, 200);
}
END_TEST

START_TEST(test_route_readyz)
{
    struct httpd_view v = view();
    struct httpd_reply r;
    httpd_route("GET", "/readyz", &v, 10000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, "ready\n");
    v.note = "standing by: slot \"s\" is held by another process (pid 7)";
    httpd_route("GET", "/readyz", &v, 10000, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body,
                     "ready: standing by: slot \"s\" is held by another process (pid 7)\n");
    v.ready = false; /* the note is only said when ready */
    httpd_route("GET", "/readyz", &v, 10000, &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_ptr_null(strstr(r.body, "standing by"));
    v.not_ready = "no Kafka broker reachable";
    httpd_route("GET", "/readyz", &v, 10000, &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_str_eq(r.body, "not ready: no Kafka broker reachable\n");
    ck_assert_str_eq(r.content_type, "text/plain; charset=utf-8");
}
END_TEST

/* The verdict is the loop's, published every 500 ms: a loop that stopped
 * turning must not leave it saying "ready" (issue 15, item 4: /readyz ready
 * while /healthz reported a 95 s stall). */
START_TEST(test_route_readyz_stalled_loop)
{
    struct httpd_view v = view();
    struct httpd_reply r;
    httpd_route("GET", "/readyz", &v, 10000 + HTTPD_READY_STALL_MS, &r); /* at the limit */
    ck_assert_int_eq(r.status, 200);
    httpd_route("GET", "/readyz", &v, 10000 + HTTPD_READY_STALL_MS + 1, &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_str_eq(r.body, "not ready: event loop stalled: last turn 5.001 s ago\n");
    httpd_route("GET", "/readyz", &v, 10000 + 95000, &r);
    ck_assert_int_eq(r.status, 503);
    ck_assert_str_eq(r.body, "not ready: event loop stalled: last turn 95.000 s ago\n");
    v.ready_stall_ms = 2000; /* the view's own bound wins */
    httpd_route("GET", "/readyz", &v, 10000 + 2001, &r);
    ck_assert_int_eq(r.status, 503);
    v.ready = false; /* a stall is said even when the verdict was not ready */
    v.not_ready = "no Kafka broker reachable";
    httpd_route("GET", "/readyz", &v, 10000 + 2001, &r);
    ck_assert_ptr_nonnull(strstr(r.body, "event loop stalled"));
    httpd_route("GET", "/readyz", &v, 9000, &r); /* a beat "from the future" */
    ck_assert_str_eq(r.body, "not ready: no Kafka broker reachable\n");
}
END_TEST

START_TEST(test_route_errors)
{
    struct httpd_view v = view();
    struct httpd_reply r;
    httpd_route("GET", "/metricsx", &v, 10000, &r);
    ck_assert_int_eq(r.status, 404);
    httpd_route("GET", "/healthz/", &v, 10000, &r);
    ck_assert_int_eq(r.status, 404);
    httpd_route("POST", "/healthz", &v, 10000, &r);
    ck_assert_int_eq(r.status, 405);
    httpd_route("DELETE", "/metrics", &v, 10000, &r);
    ck_assert_int_eq(r.status, 405);
    httpd_route("GET", "/", &v, 10000, &r);
    ck_assert_int_eq(r.status, 200);
    /* a very long path is cut in the body, not overflowing it */
    char path[1000];
    memset(path, 'a', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';
    httpd_route("GET", path, &v, 10000, &r);
    ck_assert_int_eq(r.status, 404);
    ck_assert_uint_lt(r.len, sizeof(r.buf));
}
END_TEST

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* GET path from 127.0.0.1:port; returns the whole response (malloc'd). */
static char *get(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + len, cap - len - 1)) > 0)
        len += (size_t)r;
    buf[len] = '\0';
    close(fd);
    return buf;
}

START_TEST(test_server)
{
    char err[256];
    struct listen_addr la;
    int port = -1;
    ck_assert_int_eq(listen_addr_parse("127.0.0.1:0", &la, err, sizeof(err)), 0);
    struct httpd *h = httpd_start(&la, &port, err, sizeof(err));
    ck_assert_msg(h != NULL, "%s", err);
    ck_assert_int_gt(port, 0);

    /* Before the first snapshot: not ready, no metrics; alive. */
    char *resp = get(port, "/readyz");
    ck_assert_msg(strncmp(resp, "HTTP/1.0 503", 12) == 0 ||
                      strncmp(resp, "HTTP/1.1 503", 12) == 0,
                  "%s", resp);
    ck_assert_ptr_nonnull(strstr(resp, "not ready: starting"));
    free(resp);
    resp = get(port, "/healthz");
    ck_assert_ptr_nonnull(strstr(resp, " 200 "));
    free(resp);

    const char *text = "# TYPE outboxd_ready gauge\noutboxd_ready 1\n";
    ck_assert_int_eq(httpd_publish(h, text, strlen(text), true, NULL), 0);
    resp = get(port, "/metrics");
    ck_assert_ptr_nonnull(strstr(resp, " 200 "));
    ck_assert_ptr_nonnull(strstr(resp, "text/plain; version=0.0.4"));
    ck_assert_ptr_nonnull(
        strstr(resp, "\r\n\r\n# TYPE outboxd_ready gauge\noutboxd_ready 1\n"));
    free(resp);
    resp = get(port, "/readyz");
    ck_assert_ptr_nonnull(strstr(resp, " 200 "));
    free(resp);

    ck_assert_int_eq(httpd_publish(h, "", 0, false, "no Kafka broker reachable"), 0);
    resp = get(port, "/readyz");
    ck_assert_ptr_nonnull(strstr(resp, " 503 "));
    ck_assert_ptr_nonnull(strstr(resp, "not ready: no Kafka broker reachable"));
    free(resp);

    /* A heartbeat older than HTTPD_STALL_MS: /healthz fails. */
    httpd_beat(h, mono_ms() - HTTPD_STALL_MS - 5000);
    resp = get(port, "/healthz");
    ck_assert_ptr_nonnull(strstr(resp, " 503 "));
    ck_assert_ptr_nonnull(strstr(resp, "event loop stalled"));
    free(resp);
    httpd_beat(h, mono_ms());
    resp = get(port, "/healthz");
    ck_assert_ptr_nonnull(strstr(resp, " 200 "));
    free(resp);

    /* The same port cannot be bound twice: a clear error. */
    struct listen_addr same;
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ck_assert_int_eq(listen_addr_parse(addr, &same, err, sizeof(err)), 0);
    int port2;
    ck_assert_ptr_null(httpd_start(&same, &port2, err, sizeof(err)));
    ck_assert_msg(strstr(err, "Address already in use") != NULL, "%s", err);
    httpd_stop(h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("httpd");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_listen_valid);
    tcase_add_loop_test(tc, test_listen_invalid, 0,
                        (int)(sizeof(invalid) / sizeof(invalid[0])));
    tcase_add_test(tc, test_route_metrics);
    tcase_add_test(tc, test_route_healthz);
    tcase_add_test(tc, test_route_readyz);
    tcase_add_test(tc, test_route_readyz_stalled_loop);
    tcase_add_test(tc, test_route_errors);
    tcase_add_test(tc, test_server);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
