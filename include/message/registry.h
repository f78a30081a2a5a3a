/*
 * registry.h - a Schema Registry client: the REST API of Confluent's
 * Schema Registry, which Apicurio Registry (under /apis/ccompat/v7),
 * Karapace and Redpanda serve too. outboxd only reads: it looks up the
 * schema a subject's version (or latest) holds, and its id; schemas are
 * registered by the teams who own them, as with Confluent's serializers
 * under auto.register.schemas = false and use.latest.version = true.
 *
 * Lookups run on a thread of their own, never on the relay's loop: the
 * relay asks the cache (registry_lookup()), which answers at once with the
 * schema, or "pending" after queuing a lookup; the thread does the HTTP
 * request and wakes the loop through registry_wakeup_fd(). What is found
 * stays cached for the process's life; a "latest" entry is looked up again
 * every refresh period in the background while the cached one keeps
 * serving, so a registry that goes down after the first lookups holds
 * nothing. A refresh that finds the same version keeps the cached one; one
 * that finds another replaces it. So the cache holds one schema per subject
 * version looked up, however long the process runs. A lookup that fails (registry down, subject missing) is tried
 * again every retry period; meanwhile the event waits (serde.h holds it)
 * and is never sent without its schema.
 *
 * Thread safety: registry_lookup(), registry_stats() and the wakeup calls
 * are for the relay's thread; the cache is shared with the lookup thread
 * under a mutex. A struct registry_schema, once returned, does not change
 * and lives until the next registry_lookup() (a refresh may have replaced
 * it: the replaced one is freed there, on the relay's thread, never by the
 * lookup thread) or registry_free(): use it within the call that looked it
 * up, and look it up again the next time.
 */
#ifndef OUTBOXD_REGISTRY_H
#define OUTBOXD_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct registry_opts {
    const char *url;       /* base URL: http(s)://host:port[/path], e.g. Apicurio's
                            * http://registry:8080/apis/ccompat/v7 */
    const char *user;      /* HTTP basic auth; NULL: none */
    const char *password;  /* with user */
    const char *ca_file;   /* TLS: CA bundle to verify the registry; NULL: the system's */
    const char *cert_file; /* TLS client certificate; NULL: none */
    const char *key_file;  /* its key */
    int timeout_ms;        /* one request at most */
    int64_t refresh_ms;    /* "latest" is looked up again this often */
    int64_t retry_ms;      /* a failed lookup is tried again after this */
};

/* One version of a subject, as the registry returned it. */
struct registry_schema {
    char *subject;
    int version;
    int32_t id;    /* what goes into the wire format's prefix */
    char *type;    /* "AVRO", "JSON" or "PROTOBUF" (absent in the answer: AVRO) */
    char *schema;  /* the schema text */
};

/* The version registry_lookup() means by 0. */
#define REGISTRY_LATEST 0

/* Parses the answer to GET /subjects/{subject}/versions/{version}
 * (status: the HTTP status) into *out (its strings malloc'd: free with
 * registry_schema_clear()). Pure. 0, or -1 with the reason in err (the
 * registry's error code and message for a 4xx/5xx, e.g. "subject not
 * found (HTTP 404, error 40401)"); *notfound is set when the subject or
 * version does not exist. */
int registry_parse_version(const char *body, size_t len, long status, const char *subject,
                           struct registry_schema *out, bool *notfound, char *err,
                           size_t errlen);
void registry_schema_clear(struct registry_schema *s);

/* The request path of (subject, version): "/subjects/<subject, URL
 * encoded>/versions/<version or latest>", into out. Pure. */
void registry_version_path(const char *subject, int version, char *out, size_t outlen);

/* One lookup, synchronous (outboxd check; the lookup thread): 0 with *out
 * (free with registry_schema_clear()), or -1 with err. */
int registry_fetch(const struct registry_opts *o, const char *subject, int version,
                   struct registry_schema *out, bool *notfound, char *err, size_t errlen);

struct registry;

/* Starts the client and its lookup thread. The strings of o are copied.
 * NULL with err on failure. Free with registry_free() (joins the thread). */
struct registry *registry_new(const struct registry_opts *o, char *err, size_t errlen);
void registry_free(struct registry *r);

enum registry_answer {
    REGISTRY_FOUND,   /* *out is set */
    REGISTRY_PENDING, /* not known yet: a lookup is queued or running */
    REGISTRY_FAILED,  /* the last lookup failed (err says why); it is tried again */
};

/* The schema of (subject, version) from the cache; see above. now_ms is
 * the monotonic clock (clock.h). */
enum registry_answer registry_lookup(struct registry *r, const char *subject, int version,
                                     int64_t now_ms, const struct registry_schema **out,
                                     char *err, size_t errlen);

/* Readable when a lookup finished: the relay's loop watches it and calls
 * registry_wakeup_drain() when it is. */
int registry_wakeup_fd(const struct registry *r);
void registry_wakeup_drain(struct registry *r);

struct registry_stats {
    uint64_t hits;          /* lookups the cache answered */
    uint64_t requests_ok;   /* HTTP lookups that found the schema */
    uint64_t requests_failed; /* ... that failed (unreachable, 4xx/5xx, bad answer) */
    uint64_t not_found;     /* ... of which the subject or version did not exist */
    int subjects;           /* cached subject versions */
    int schemas;            /* schemas held: one per subject version found, and the
                             * ones refreshes replaced since the last lookup */
};
void registry_stats(struct registry *r, struct registry_stats *out);

#endif
