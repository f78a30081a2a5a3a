/*
 * httpd.h - the HTTP endpoints for operators: /metrics (Prometheus text
 * exposition format), /healthz (the process is alive and its event loop is
 * turning) and /readyz (streaming from the slot and a broker reachable).
 *
 * Threading: libmicrohttpd serves requests on its own internal thread. The
 * relay's event loop stays the single owner of all relay state; it never
 * shares it. Instead it pushes to the server:
 *   - a heartbeat (a timestamp, atomic) on every turn of the loop, and
 *   - every publish interval a snapshot: the rendered /metrics text and the
 *     readiness verdict, copied under a mutex.
 * The HTTP thread only reads that snapshot (under the mutex) and the
 * heartbeat. So a scrape never waits for the loop, and the loop never waits
 * for a slow HTTP client; /metrics is at most one publish interval old.
 */
#ifndef OUTBOXD_HTTPD_H
#define OUTBOXD_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "listenaddr.h"
#include "metrics.h"


/* Bounds on the clients (libmicrohttpd 0.9.75 options): at most
 * HTTPD_MAX_CONNECTIONS at once, HTTPD_MAX_PER_IP of them from one
 * address, and a connection that sends nothing for HTTPD_IDLE_TIMEOUT_S
 * is closed (the timeout restarts with every byte, so a client trickling
 * one byte per 5 s is closed after 3 s). Prometheus, a kubelet or curl
 * send their request at once; a keep-alive connection idle between
 * scrapes is reopened by the scraper. So clients that trickle or hang can
 * hold at most HTTPD_MAX_PER_IP connections per address, and a probe from
 * another address always finds a free one. */
#define HTTPD_MAX_CONNECTIONS 64
#define HTTPD_MAX_PER_IP 8
#define HTTPD_IDLE_TIMEOUT_S 3

/* /healthz fails when the event loop has not turned for this long. */
#define HTTPD_STALL_MS 30000

/* /readyz fails sooner: the verdict it answers with is the loop's own,
 * published every 500 ms, so a loop that stopped turning would otherwise
 * leave it saying "ready" for ever. A turn waits at most ~1 s (select,
 * a producer poll of 100 ms, a replaced Kafka client); 5 s without one is a
 * stall, and a stalled relay delivers nothing. */
#define HTTPD_READY_STALL_MS 5000

/* What a request is answered from: a snapshot of the relay's state. */
struct httpd_view {
    const char *metrics; /* exposition text, NUL-terminated; NULL before the first */
    int64_t beat_ms;     /* monotonic ms of the loop's last turn */
    bool ready;
    const char *not_ready; /* why not, when !ready */
    const char *note;      /* when ready: what it does, if worth saying (a hot
                            * standby's "standing by: ..."); NULL or "": none */
    int64_t stall_ms;      /* HTTPD_STALL_MS, or less in tests */
    int64_t ready_stall_ms; /* HTTPD_READY_STALL_MS; 0 means that default */
};

/* One answer. body points into the view or into static text. */
struct httpd_reply {
    int status;
    const char *content_type;
    const char *body;
    size_t len;
    char buf[256]; /* body storage for the short answers */
};

/* Answers method + path from v at monotonic time now_ms: GET/HEAD of
 * /metrics, /healthz, /readyz (and / listing them); 404 for other paths,
 * 405 for other methods. /readyz is 503 when the loop has not turned for
 * ready_stall_ms, whatever its last verdict said. Pure. */
void httpd_route(const char *method, const char *path, const struct httpd_view *v,
                 int64_t now_ms, struct httpd_reply *out);

struct httpd;

/* Binds la (a host name: its first IPv4 address from getaddrinfo(), else
 * its first IPv6 one) and starts serving on libmicrohttpd's own thread
 * (signals blocked there: SIGTERM stays with the main thread), with
 * connections bounded so that slow clients cannot keep the probes out
 * (HTTPD_MAX_CONNECTIONS, HTTPD_MAX_PER_IP, HTTPD_IDLE_TIMEOUT_S). NULL
 * with err (e.g. the address is in use, the name does not resolve). Stop with httpd_stop(). *bound_port is set to the
 * port actually bound (the chosen one for port 0). */
struct httpd *httpd_start(const struct listen_addr *la, int *bound_port, char *err,
                          size_t errlen);

/* Stops the server thread and frees h (NULL is fine). */
void httpd_stop(struct httpd *h);

/* The loop turned at monotonic now_ms. Lock-free; h may be NULL. */
void httpd_beat(struct httpd *h, int64_t now_ms);

/* How often the relays publish a snapshot (and at once when something
 * readiness depends on changed: they set their next deadline to 0). */
#define HTTPD_PUBLISH_MS 500

/* For the relays, on every turn of the loop: beats, and says whether a
 * snapshot is due by next_publish_ms (false when h is NULL). The caller
 * then publishes (httpd_publish_metrics()) and sets its next deadline to
 * now_ms + HTTPD_PUBLISH_MS. */
bool httpd_tick(struct httpd *h, int64_t now_ms, int64_t next_publish_ms);

/* Replaces the snapshot: the metrics text (len bytes, copied) and the
 * readiness verdict (reason copied: why not ready, or, when ready, the
 * note /readyz adds; NULL: none). h may be NULL.
 * Returns 0, -1 on out of memory (the previous snapshot stays). */
int httpd_publish(struct httpd *h, const char *metrics, size_t len, bool ready,
                  const char *reason);

/* For the relays: starts the server of [http] listen, the text listen
 * (for the log) that config.c parsed into la, logging where it serves;
 * *out = NULL when listen is NULL or "" (no server). Returns 0, or 1
 * after logging why when the address cannot be bound. */
int httpd_from_config(const char *listen, const struct listen_addr *la, struct httpd **out);

/* For the relays: renders m (m->ready set from not_ready) into tb (reused:
 * emptied first) at Unix time now_us and publishes it with the verdict
 * (not_ready NULL: ready, with ready_note if not NULL). Logs a warning on
 * out of memory. */
void httpd_publish_metrics(struct httpd *h, struct metrics *m, struct textbuf *tb,
                           int64_t now_us, const char *not_ready, const char *ready_note);

#endif
