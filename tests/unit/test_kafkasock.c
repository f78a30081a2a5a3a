/*
 * test_kafkasock.c - the broker connections of outboxd's Kafka clients
 * (kafkasock.h): a TCP socket opened by the socket callback carries the
 * keepalive and TCP_USER_TIMEOUT options and close-on-exec; a socket of
 * another family gets no TCP option and is still returned.
 */
#include <check.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kafkasock.h"

static int opt(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof(v);
    ck_assert_int_eq(getsockopt(fd, level, name, &v, &len), 0);
    return v;
}

static void check_tcp(int domain)
{
    int fd = kafka_socket_open(domain, SOCK_STREAM, IPPROTO_TCP, NULL);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ne(opt(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
    ck_assert_int_eq(opt(fd, IPPROTO_TCP, TCP_KEEPIDLE), KAFKA_KEEPIDLE_S);
    ck_assert_int_eq(opt(fd, IPPROTO_TCP, TCP_KEEPINTVL), KAFKA_KEEPINTVL_S);
    ck_assert_int_eq(opt(fd, IPPROTO_TCP, TCP_KEEPCNT), KAFKA_KEEPCNT);
    ck_assert_int_eq(opt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), KAFKA_TCP_USER_TIMEOUT_MS);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    close(fd);
}

START_TEST(test_tcp_ipv4) { check_tcp(AF_INET); }
END_TEST

START_TEST(test_tcp_ipv6)
{
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    if (probe < 0) { /* no IPv6 here: the callback fails as socket() does */
        ck_assert_int_eq(kafka_socket_open(AF_INET6, SOCK_STREAM, IPPROTO_TCP, NULL), -1);
        return;
    }
    close(probe);
    check_tcp(AF_INET6);
}
END_TEST

START_TEST(test_not_tcp)
{
    int fd = kafka_socket_open(AF_UNIX, SOCK_STREAM, 0, NULL);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(opt(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    close(fd);
}
END_TEST

START_TEST(test_failure_is_reported)
{
    ck_assert_int_eq(kafka_socket_open(-1, SOCK_STREAM, 0, NULL), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("kafkasock");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_tcp_ipv4);
    tcase_add_test(tc, test_tcp_ipv6);
    tcase_add_test(tc, test_not_tcp);
    tcase_add_test(tc, test_failure_is_reported);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
