/*
 * registry.c - the Schema Registry client (registry.h): the answer's
 * parser, one synchronous lookup with libcurl, and the cache with its
 * lookup thread.
 *
 * The request (Confluent's REST API):
 *   GET <url>/subjects/<subject>/versions/<n | latest>
 *   Accept: application/vnd.schemaregistry.v1+json, application/json
 * The answer, 200:
 *   {"subject": "orders-value", "version": 3, "id": 17,
 *    "schemaType": "PROTOBUF", "schema": "<the schema as text>"}
 * where schemaType is absent for Avro. An error, 4xx/5xx:
 *   {"error_code": 40401, "message": "Subject 'x' not found."}
 * with 40401 (subject) and 40402 (version) meaning "does not exist".
 */
#include "registry.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "grow.h"
#include "redact.h"

#define ANSWER_MAX (4u << 20) /* a schema answer larger than this is refused */

void registry_schema_clear(struct registry_schema *s)
{
    free(s->subject);
    free(s->type);
    free(s->schema);
    memset(s, 0, sizeof(*s));
}

int registry_parse_version(const char *body, size_t len, long status, const char *subject,
                           struct registry_schema *out, bool *notfound, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    *notfound = false;
    json_t *j = json_loadb(body, len, 0, NULL);
    if (status != 200) {
        json_int_t code = j ? json_integer_value(json_object_get(j, "error_code")) : 0;
        const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;
        *notfound = status == 404 && (code == 40401 || code == 40402 || (code == 0 && msg));
        char ecode[32] = "";
        if (code) snprintf(ecode, sizeof(ecode), ", error %lld", (long long)code);
        snprintf(err, errlen, "%s for subject \"%s\" (HTTP %ld%s): %.200s",
                 *notfound ? (code == 40402 ? "version not found" : "subject not found")
                           : "the registry refused the lookup",
                 subject, status, ecode,
                 msg ? msg
                     : (len ? "(the answer is not the registry's JSON: from a proxy in between?)"
                            : "(an empty answer)"));
        json_decref(j);
        return -1;
    }
    const char *schema = j ? json_string_value(json_object_get(j, "schema")) : NULL;
    json_t *id = j ? json_object_get(j, "id") : NULL;
    if (!schema || !json_is_integer(id) || json_integer_value(id) < 0 ||
        json_integer_value(id) > INT32_MAX) {
        snprintf(err, errlen,
                 "the registry's answer for subject \"%s\" is not a schema version "
                 "(no \"schema\" string or no \"id\" in range): %.120s",
                 subject, len ? body : "(empty)");
        json_decref(j);
        return -1;
    }
    const char *type = json_string_value(json_object_get(j, "schemaType"));
    const char *subj = json_string_value(json_object_get(j, "subject"));
    out->id = (int32_t)json_integer_value(id);
    out->version = (int)json_integer_value(json_object_get(j, "version"));
    out->subject = strdup(subj ? subj : subject);
    out->type = strdup(type ? type : "AVRO");
    out->schema = strdup(schema);
    json_decref(j);
    if (!out->subject || !out->type || !out->schema) {
        registry_schema_clear(out);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

void registry_version_path(const char *subject, int version, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = (size_t)snprintf(out, outlen, "/subjects/");
    for (const unsigned char *p = (const unsigned char *)subject; *p && n + 4 < outlen; p++) {
        bool plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                     (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' ||
                     *p == '~';
        if (plain) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    if (n < outlen) out[n] = '\0';
    if (version == REGISTRY_LATEST)
        snprintf(out + n, outlen - n, "/versions/latest");
    else
        snprintf(out + n, outlen - n, "/versions/%d", version);
}

int registry_fetch(const struct registry_opts *o, const char *subject, int version,
                   struct registry_schema *out, bool *notfound, char *err, size_t errlen)
{
    char path[1024], url[2048];
    *notfound = false;
    registry_version_path(subject, version, path, sizeof(path));
    size_t ul = strlen(o->url);
    while (ul > 0 && o->url[ul - 1] == '/') ul--;
    snprintf(url, sizeof(url), "%.*s%s", (int)ul, o->url, path);
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "cannot start an HTTP client (libcurl)");
        return -1;
    }
    struct growtext a = {.max = ANSWER_MAX};
    struct curl_slist *hdr =
        curl_slist_append(NULL, "Accept: application/vnd.schemaregistry.v1+json, "
                                "application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, growtext_curl_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)o->timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (o->user) {
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(c, CURLOPT_USERNAME, o->user);
        curl_easy_setopt(c, CURLOPT_PASSWORD, o->password ? o->password : "");
    }
    if (o->ca_file) curl_easy_setopt(c, CURLOPT_CAINFO, o->ca_file);
    if (o->cert_file) curl_easy_setopt(c, CURLOPT_SSLCERT, o->cert_file);
    if (o->key_file) curl_easy_setopt(c, CURLOPT_SSLKEY, o->key_file);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    int ret;
    if (rc != CURLE_OK) {
        char shown[sizeof(url)];
        redact_url(url, shown, sizeof(shown)); /* goes to the log and /readyz */
        snprintf(err, errlen, "schema registry %s: %s%s", shown, curl_easy_strerror(rc),
                 a.too_large ? " (the answer is larger than 4 MiB)" : "");
        ret = -1;
    } else {
        ret = registry_parse_version(a.data ? a.data : "", a.len, status, subject, out,
                                     notfound, err, errlen);
    }
    free(a.data);
    return ret;
}

/* One cached subject version. */
struct entry {
    char *subject;
    int version;
    struct registry_schema *cur; /* NULL until found; replaced when a refresh finds another */
    int64_t fetched_ms;          /* when cur was last looked up */
    int64_t retry_ms;            /* a failed lookup: not again before this */
    bool queued;                 /* a lookup is queued or running */
    char error[384];             /* the last lookup's failure; "" after a success */
};

struct registry {
    struct registry_opts o; /* strings owned */
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    struct entry *entries;
    size_t n, cap;
    /* Replaced by a refresh, not freed yet: the relay's thread may still
     * use one registry_lookup() handed out (registry.h), so the lookup
     * thread never frees; the next registry_lookup() does, on the relay's
     * thread. At most one per entry (a refresh is queued by a lookup). */
    struct registry_schema **retired;
    size_t nretired, capretired;
    struct registry_stats st;
    int pipefd[2];
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static void wake(struct registry *r)
{
    char b = 1;
    ssize_t w = write(r->pipefd[1], &b, 1); /* a full pipe wakes the loop already */
    (void)w;
}

/* The queued entry to look up, copied out (the caller frees *subject), or
 * -1 when stopping. Called with r->mu held; waits on r->cv. */
static int next_job(struct registry *r, char **subject, int *version)
{
    for (;;) {
        if (r->stop) return -1;
        for (size_t i = 0; i < r->n; i++) {
            if (r->entries[i].queued) {
                *subject = strdup(r->entries[i].subject);
                *version = r->entries[i].version;
                if (*subject) return (int)i;
            }
        }
        pthread_cond_wait(&r->cv, &r->mu);
    }
}

static void schema_free(struct registry_schema *s)
{
    if (!s) return;
    registry_schema_clear(s);
    free(s);
}

/* The same version of the same schema: a refresh that changes nothing. */
static bool same_schema(const struct registry_schema *a, const struct registry_schema *b)
{
    return a->id == b->id && a->version == b->version && strcmp(a->type, b->type) == 0 &&
           strcmp(a->schema, b->schema) == 0 && strcmp(a->subject, b->subject) == 0;
}

/* Takes found (NULL: the lookup failed, err says why). */
static void finish_job(struct registry *r, size_t i, struct registry_schema *found, bool notfound,
                       const char *err)
{
    struct entry *e = &r->entries[i];
    int64_t now = clock_mono_ms();
    e->queued = false;
    if (found) {
        if (e->cur && same_schema(e->cur, found)) {
            schema_free(found); /* unchanged: the cached one keeps serving */
        } else if (e->cur && grow_array((void **)&r->retired, &r->capretired, r->nretired + 1,
                                        sizeof(*r->retired), 8) != 0) {
            schema_free(found); /* no room to retire the old one: it stays current */
        } else {
            if (e->cur) r->retired[r->nretired++] = e->cur;
            e->cur = found;
        }
        e->fetched_ms = now;
        e->error[0] = '\0';
        r->st.requests_ok++;
    } else {
        snprintf(e->error, sizeof(e->error), "%s", err);
        e->retry_ms = now + r->o.retry_ms;
        r->st.requests_failed++;
        if (notfound) r->st.not_found++;
    }
}

static void *lookup_thread(void *arg)
{
    struct registry *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        char *subject;
        int version;
        int i = next_job(r, &subject, &version);
        if (i < 0) break;
        pthread_mutex_unlock(&r->mu);
        char err[384] = "";
        bool notfound = false;
        struct registry_schema *s = calloc(1, sizeof(*s));
        if (!s || registry_fetch(&r->o, subject, version, s, &notfound, err, sizeof(err)) != 0) {
            if (!s) snprintf(err, sizeof(err), "out of memory");
            free(s);
            s = NULL;
        }
        free(subject);
        pthread_mutex_lock(&r->mu);
        finish_job(r, (size_t)i, s, notfound, err);
        wake(r);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

struct registry *registry_new(const struct registry_opts *o, char *err, size_t errlen)
{
    struct registry *r = calloc(1, sizeof(*r));
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->pipefd[0] = r->pipefd[1] = -1;
    r->o = *o;
    r->o.url = dup_or_null(o->url);
    r->o.user = dup_or_null(o->user);
    r->o.password = dup_or_null(o->password);
    r->o.ca_file = dup_or_null(o->ca_file);
    r->o.cert_file = dup_or_null(o->cert_file);
    r->o.key_file = dup_or_null(o->key_file);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (!r->o.url) {
        snprintf(err, errlen, "out of memory");
        registry_free(r);
        return NULL;
    }
    if (pipe(r->pipefd) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        registry_free(r);
        return NULL;
    }
    for (int i = 0; i < 2; i++)
        fcntl(r->pipefd[i], F_SETFL, fcntl(r->pipefd[i], F_GETFL) | O_NONBLOCK);
    /* Not thread-safe itself: done here, before the thread starts. */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* The thread blocks every signal: SIGTERM and the others must reach the
     * relay's thread, whose poll() they end (evloop.h). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&r->thread, NULL, lookup_thread, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start the registry lookup thread: %s", strerror(rc));
        registry_free(r);
        return NULL;
    }
    r->started = true;
    return r;
}

void registry_free(struct registry *r)
{
    if (!r) return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
    }
    for (size_t i = 0; i < r->n; i++) {
        free(r->entries[i].subject);
        schema_free(r->entries[i].cur);
    }
    for (size_t i = 0; i < r->nretired; i++) schema_free(r->retired[i]);
    free(r->entries);
    free(r->retired);
    for (int i = 0; i < 2; i++)
        if (r->pipefd[i] >= 0) close(r->pipefd[i]);
    free((char *)r->o.url);
    free((char *)r->o.user);
    free((char *)r->o.password);
    free((char *)r->o.ca_file);
    free((char *)r->o.cert_file);
    free((char *)r->o.key_file);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* The entry of (subject, version), added when new (NULL on out of memory).
 * Called with r->mu held. */
static struct entry *entry_for(struct registry *r, const char *subject, int version)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->entries[i].version == version && strcmp(r->entries[i].subject, subject) == 0)
            return &r->entries[i];
    char *s = strdup(subject);
    if (!s || grow_array((void **)&r->entries, &r->cap, r->n + 1, sizeof(*r->entries), 8) != 0) {
        free(s);
        return NULL;
    }
    struct entry *e = &r->entries[r->n++];
    memset(e, 0, sizeof(*e));
    e->subject = s;
    e->version = version;
    return e;
}

static void queue_lookup(struct registry *r, struct entry *e)
{
    if (e->queued) return;
    e->queued = true;
    pthread_cond_signal(&r->cv);
}

enum registry_answer registry_lookup(struct registry *r, const char *subject, int version,
                                     int64_t now_ms, const struct registry_schema **out,
                                     char *err, size_t errlen)
{
    enum registry_answer ans;
    pthread_mutex_lock(&r->mu);
    /* What the last call handed out is no longer used (registry.h): what
     * refreshes replaced since can go. */
    for (size_t i = 0; i < r->nretired; i++) schema_free(r->retired[i]);
    r->nretired = 0;
    struct entry *e = entry_for(r, subject, version);
    if (!e) {
        snprintf(err, errlen, "out of memory");
        ans = REGISTRY_FAILED;
    } else if (e->cur) {
        *out = e->cur;
        r->st.hits++;
        if (version == REGISTRY_LATEST && now_ms - e->fetched_ms >= r->o.refresh_ms &&
            now_ms >= e->retry_ms)
            queue_lookup(r, e); /* refreshed in the background; cur keeps serving */
        ans = REGISTRY_FOUND;
    } else if (e->error[0] && !e->queued) {
        snprintf(err, errlen, "%s", e->error);
        if (now_ms >= e->retry_ms) queue_lookup(r, e);
        ans = REGISTRY_FAILED;
    } else {
        if (e->error[0]) snprintf(err, errlen, "%s", e->error);
        queue_lookup(r, e);
        ans = e->error[0] ? REGISTRY_FAILED : REGISTRY_PENDING;
    }
    r->st.subjects = (int)r->n;
    pthread_mutex_unlock(&r->mu);
    return ans;
}

int registry_wakeup_fd(const struct registry *r) { return r ? r->pipefd[0] : -1; }

void registry_wakeup_drain(struct registry *r)
{
    char buf[64];
    while (read(r->pipefd[0], buf, sizeof(buf)) > 0) {
    }
}

void registry_stats(struct registry *r, struct registry_stats *out)
{
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    out->subjects = (int)r->n;
    out->schemas = (int)r->nretired;
    for (size_t i = 0; i < r->n; i++) out->schemas += r->entries[i].cur != NULL;
    pthread_mutex_unlock(&r->mu);
}
