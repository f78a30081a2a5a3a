/*
 * awscreds.h - AWS credentials from the standard chain, in the order the
 * AWS SDKs search it (Java v2's DefaultCredentialsProvider, Go v2's
 * resolveCredentialChain; the "standardized credential providers" of the
 * SDKs' reference guide): the environment, a web identity token file (EKS
 * IRSA: STS AssumeRoleWithWebIdentity), the shared credentials and config
 * files with a profile, the container endpoint (ECS, EKS Pod Identity),
 * EC2's instance metadata (IMDSv2). Used for the MSK IAM token (kafka/) and
 * the RDS IAM token (pg/). The parsing of each source's answer is pure
 * (awsparse.h); this file's functions read files and the network.
 */
#ifndef OUTBOXD_AWSCREDS_H
#define OUTBOXD_AWSCREDS_H

#include <pthread.h>
#include <stddef.h>
#include <time.h>

struct aws_creds {
    char *access_key_id, *secret_access_key, *session_token; /* session_token may be NULL */
    time_t expires;                                          /* 0: does not expire */
    char source[32]; /* "environment", "profile NAME", "web identity", "container",
                        "instance" */
};

/* [aws] as configured (NULLs: the environment's fallbacks). */
struct aws_settings {
    const char *region;
    const char *profile;
};

/* Resolves credentials along the chain. 0 and *out filled (free with
 * aws_creds_clear), or -1 with err naming each source tried and why it
 * failed. May do network I/O (STS, container, IMDS), each request bounded
 * by a short timeout (AWS_HTTP_TIMEOUT_MS). Any thread; reads the process's
 * environment. */
int aws_creds_get(const struct aws_settings *s, struct aws_creds *out, char *err,
                  size_t errlen);

/* Frees what c holds (the secret and the token are overwritten first) and
 * zeroes it. */
void aws_creds_clear(struct aws_creds *c);

/* A deep copy of src into *dst. 0, or -1 on out of memory (*dst zeroed). */
int aws_creds_copy(struct aws_creds *dst, const struct aws_creds *src);

/* The region from s, then the environment (AWS_REGION, then
 * AWS_DEFAULT_REGION); NULL when none (the caller reports it). Not
 * allocated: s's or the environment's. */
const char *aws_region(const struct aws_settings *s);

/* The profile from s, then AWS_PROFILE, then "default". Not allocated. */
const char *aws_profile(const struct aws_settings *s);

/* How long each HTTP request of the chain may take (STS, container, IMDS;
 * the SDKs wait 1 s for IMDS and the container, several for STS). */
#define AWS_HTTP_TIMEOUT_MS 3000

/* Credentials are fetched again when they expire within this many seconds
 * (the SDKs refresh 5 to 15 minutes ahead; a token signed with them lives
 * at most until they expire). */
#define AWS_CREDS_REFRESH_S 600

/* Credentials kept between uses (one per client; zero-initialise it, or
 * AWS_CREDS_CACHE_INIT). */
struct aws_creds_cache {
    pthread_mutex_t mu;
    struct aws_creds c; /* c.access_key_id NULL: none yet */
};
#define AWS_CREDS_CACHE_INIT                                                               \
    {                                                                                      \
        .mu = PTHREAD_MUTEX_INITIALIZER                                                    \
    }

/* The cached credentials copied into *out, fetched again by
 * aws_creds_get() first when there are none or they expire within
 * AWS_CREDS_REFRESH_S of now. Returns as aws_creds_get(). Any thread (the
 * cache's mutex is held during a fetch). */
int aws_creds_cached(struct aws_creds_cache *cache, const struct aws_settings *s,
                     time_t now, struct aws_creds *out, char *err, size_t errlen);

/* Frees the cached credentials (the mutex stays usable). */
void aws_creds_cache_clear(struct aws_creds_cache *cache);

#endif
