/*
 * httpd.c - /metrics, /healthz and /readyz with libmicrohttpd.
 *
 * See httpd.h for the threading model: the server's thread answers from a
 * snapshot the event loop publishes (under a mutex) and from the loop's
 * heartbeat (an atomic); it never touches relay state. Routing is a pure
 * function (httpd_route) so that it is unit-tested without sockets.
 */
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

/* ---- routing (pure) ------------------------------------------------------ */

#define CT_TEXT "text/plain; charset=utf-8"
#define CT_METRICS "text/plain; version=0.0.4; charset=utf-8"

static void reply_text(struct httpd_reply *out, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_text(struct httpd_reply *out, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out->buf, sizeof(out->buf), fmt, ap);
    va_end(ap);
    out->status = status;
    out->content_type = CT_TEXT;
    out->body = out->buf;
    out->len = n < 0 ? 0 : (size_t)n < sizeof(out->buf) ? (size_t)n : sizeof(out->buf) - 1;
}

/* Milliseconds since the loop's last turn (0 for a beat "from the future"). */
static int64_t loop_age(const struct httpd_view *v, int64_t now_ms)
{
    int64_t age = now_ms - v->beat_ms;
    return age < 0 ? 0 : age;
}

void httpd_route(const char *method, const char *path, const struct httpd_view *v,
                 int64_t now_ms, struct httpd_reply *out)
{
    memset(out, 0, sizeof(*out));
    bool known = strcmp(path, "/metrics") == 0 || strcmp(path, "/healthz") == 0 ||
                 strcmp(path, "/readyz") == 0 || strcmp(path, "/") == 0;
    if (!known) {
        reply_text(out, 404, "not found: %.100s (try /metrics, /healthz, /readyz)\n", path);
        return;
    }
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        reply_text(out, 405, "method %.20s not allowed: use GET\n", method);
        return;
    }
    if (strcmp(path, "/") == 0) {
        reply_text(out, 200, "outboxd: /metrics /healthz /readyz\n");
    } else if (strcmp(path, "/metrics") == 0) {
        if (!v->metrics) {
            reply_text(out, 503, "metrics not published yet\n");
            return;
        }
        out->status = 200;
        out->content_type = CT_METRICS;
        out->body = v->metrics;
        out->len = strlen(v->metrics);
    } else if (strcmp(path, "/healthz") == 0) {
        int64_t age = loop_age(v, now_ms);
        if (age > v->stall_ms)
            reply_text(out, 503, "event loop stalled: last turn %lld.%03lld s ago\n",
                       (long long)(age / 1000), (long long)(age % 1000));
        else
            reply_text(out, 200, "ok: event loop turned %lld.%03lld s ago\n",
                       (long long)(age / 1000), (long long)(age % 1000));
    } else if (loop_age(v, now_ms) > (v->ready_stall_ms > 0 ? v->ready_stall_ms
                                                             : HTTPD_READY_STALL_MS)) {
        int64_t age = loop_age(v, now_ms);
        reply_text(out, 503, "not ready: event loop stalled: last turn %lld.%03lld s ago\n",
                   (long long)(age / 1000), (long long)(age % 1000));
    } else if (v->ready && v->note && *v->note) {
        reply_text(out, 200, "ready: %.200s\n", v->note);
    } else if (v->ready) {
        reply_text(out, 200, "ready\n");
    } else {
        reply_text(out, 503, "not ready: %.200s\n",
                   v->not_ready ? v->not_ready : "starting");
    }
}

/* ---- the server ---------------------------------------------------------- */

struct httpd {
    struct MHD_Daemon *daemon;
    int fd; /* the listening socket, closed by us after MHD stops */
    _Atomic int64_t beat_ms;
    pthread_mutex_t mu; /* guards the fields below */
    char *metrics;      /* owned */
    bool ready;
    char not_ready[256];
    char note[256];
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    (void)version;
    (void)upload_data;
    struct httpd *h = cls;
    static int first_call_marker;
    if (*req_cls == NULL) { /* headers only: answer on the next call */
        *req_cls = &first_call_marker;
        return MHD_YES;
    }
    if (*upload_data_size != 0) { /* ignore a body */
        *upload_data_size = 0;
        return MHD_YES;
    }
    struct httpd_reply rep;
    struct MHD_Response *resp;
    pthread_mutex_lock(&h->mu);
    struct httpd_view v = {
        .metrics = h->metrics,
        .beat_ms = atomic_load(&h->beat_ms),
        .ready = h->ready,
        .not_ready = h->not_ready,
        .note = h->note,
        .stall_ms = HTTPD_STALL_MS,
        .ready_stall_ms = HTTPD_READY_STALL_MS,
    };
    httpd_route(method, url, &v, clock_mono_ms(), &rep);
    /* The body may point into the snapshot: copy it before unlocking. */
    resp =
        MHD_create_response_from_buffer(rep.len, (void *)rep.body, MHD_RESPMEM_MUST_COPY);
    pthread_mutex_unlock(&h->mu);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rep.content_type);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (rep.status == 405)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(conn, (unsigned)rep.status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    log_warn("http: %s", msg);
}

/* A host name's address: the first IPv4 one getaddrinfo() gives, else the
 * first IPv6 one, with la's port, into out. 0, or -1 with err. */
static int resolve_listen(const struct listen_addr *la, struct listen_addr *out, char *err,
                          size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
    struct addrinfo *res = NULL, *pick = NULL;
    int rc = getaddrinfo(la->name, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "[http] listen: cannot resolve \"%s\": %s", la->name,
                 gai_strerror(rc));
        return -1;
    }
    for (struct addrinfo *ai = res; ai && !pick; ai = ai->ai_next)
        if (ai->ai_family == AF_INET) pick = ai;
    for (struct addrinfo *ai = res; ai && !pick; ai = ai->ai_next)
        if (ai->ai_family == AF_INET6) pick = ai;
    if (!pick || pick->ai_addrlen > sizeof(out->sa)) {
        freeaddrinfo(res);
        snprintf(err, errlen, "[http] listen: \"%s\" has no IPv4 or IPv6 address", la->name);
        return -1;
    }
    *out = *la;
    memcpy(&out->sa, pick->ai_addr, pick->ai_addrlen);
    out->len = (socklen_t)pick->ai_addrlen;
    out->family = pick->ai_family;
    if (pick->ai_family == AF_INET)
        ((struct sockaddr_in *)&out->sa)->sin_port = htons((uint16_t)la->port);
    else
        ((struct sockaddr_in6 *)&out->sa)->sin6_port = htons((uint16_t)la->port);
    freeaddrinfo(res);
    return 0;
}

static int open_listener(const struct listen_addr *given, int *bound_port, char *err,
                         size_t errlen)
{
    struct listen_addr resolved;
    const struct listen_addr *la = given;
    if (given->family == AF_UNSPEC) {
        if (resolve_listen(given, &resolved, err, errlen) != 0) return -1;
        la = &resolved;
    }
    char text[INET6_ADDRSTRLEN];
    const void *addr =
        la->family == AF_INET6
            ? (const void *)&((const struct sockaddr_in6 *)&la->sa)->sin6_addr
            : (const void *)&((const struct sockaddr_in *)&la->sa)->sin_addr;
    inet_ntop(la->family, addr, text, sizeof(text));
    int fd = socket(la->family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) {
        snprintf(err, errlen, "[http] listen: socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&la->sa, la->len) != 0 || listen(fd, 32) != 0) {
        snprintf(err, errlen, "[http] listen: cannot listen on %s port %d: %s", text,
                 la->port, strerror(errno));
        close(fd);
        return -1;
    }
    struct sockaddr_storage got;
    socklen_t glen = sizeof(got);
    *bound_port = la->port;
    if (getsockname(fd, (struct sockaddr *)&got, &glen) == 0)
        *bound_port =
            ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                            : ((struct sockaddr_in *)&got)->sin_port);
    return fd;
}

struct httpd *httpd_start(const struct listen_addr *la, int *bound_port, char *err,
                          size_t errlen)
{
    struct httpd *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->fd = -1;
    pthread_mutex_init(&h->mu, NULL);
    atomic_store(&h->beat_ms, clock_mono_ms());
    snprintf(h->not_ready, sizeof(h->not_ready), "starting");
    if ((h->fd = open_listener(la, bound_port, err, errlen)) < 0) {
        httpd_stop(h);
        return NULL;
    }
    /* The server thread inherits this mask: signals stay with the main
     * thread, whose select() they must interrupt. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    h->daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, h,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, h->fd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTPD_MAX_CONNECTIONS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTPD_MAX_PER_IP,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTPD_IDLE_TIMEOUT_S, MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!h->daemon) {
        snprintf(err, errlen, "[http] listen: libmicrohttpd did not start on port %d",
                 *bound_port);
        httpd_stop(h);
        return NULL;
    }
    h->fd = -1; /* MHD_stop_daemon() closes it */
    return h;
}

void httpd_stop(struct httpd *h)
{
    if (!h) return;
    if (h->daemon) MHD_stop_daemon(h->daemon);
    if (h->fd >= 0) close(h->fd);
    pthread_mutex_destroy(&h->mu);
    free(h->metrics);
    free(h);
}

int httpd_from_config(const char *listen, const struct listen_addr *la, struct httpd **out)
{
    char err[512];
    int port;
    *out = NULL;
    if (!listen || !*listen) return 0;
    if (!(*out = httpd_start(la, &port, err, sizeof(err)))) {
        log_error("%s", err);
        return 1;
    }
    log_info("http: serving /metrics, /healthz and /readyz on %s (port %d)", listen, port);
    return 0;
}

void httpd_publish_metrics(struct httpd *h, struct metrics *m, struct textbuf *tb,
                           int64_t now_us, const char *not_ready, const char *ready_note)
{
    if (!h) return;
    m->ready = not_ready == NULL;
    tb->len = 0;
    if (tb->data) tb->data[0] = '\0';
    tb->oom = false;
    if (metrics_render(m, now_us, tb) != 0 ||
        httpd_publish(h, tb->data, tb->len, not_ready == NULL,
                      not_ready ? not_ready : ready_note) != 0)
        log_warn("out of memory while rendering /metrics; serving the previous snapshot");
}

void httpd_beat(struct httpd *h, int64_t now_ms)
{
    if (h) atomic_store(&h->beat_ms, now_ms);
}

bool httpd_tick(struct httpd *h, int64_t now_ms, int64_t next_publish_ms)
{
    if (!h) return false;
    httpd_beat(h, now_ms);
    return now_ms >= next_publish_ms;
}

int httpd_publish(struct httpd *h, const char *metrics, size_t len, bool ready,
                  const char *reason)
{
    if (!h) return 0;
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, metrics, len);
    copy[len] = '\0';
    pthread_mutex_lock(&h->mu);
    char *old = h->metrics;
    h->metrics = copy;
    h->ready = ready;
    if (!ready) snprintf(h->not_ready, sizeof(h->not_ready), "%s", reason ? reason : "");
    snprintf(h->note, sizeof(h->note), "%s", ready && reason ? reason : "");
    pthread_mutex_unlock(&h->mu);
    free(old);
    return 0;
}
