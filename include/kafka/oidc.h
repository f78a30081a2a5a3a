/*
 * oidc.h - OAUTHBEARER with OIDC client credentials as librdkafka does it
 * (`sasl.oauthbearer.method = oidc`): which [kafka] settings it reads, the
 * request it sends to the token endpoint, and how it reads the answer.
 * librdkafka fetches and refreshes the daemon's tokens itself; `outboxd
 * check` fetches one the same way (check_oidc.c) to show its principal and
 * expiry, or the token endpoint's refusal. Pure: no I/O.
 */
#ifndef OUTBOXD_OIDC_H
#define OUTBOXD_OIDC_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* The [kafka] settings of an OIDC client-credentials login (borrowed from
 * the configuration; NULL when not set). */
struct oidc_settings {
    const char *token_url;     /* sasl.oauthbearer.token.endpoint.url */
    const char *client_id;     /* sasl.oauthbearer.client.id, or its alias */
    const char *client_secret; /* sasl.oauthbearer.client.secret, or its alias */
    const char *scope;         /* sasl.oauthbearer.scope */
    const char *sub_claim;     /* sasl.oauthbearer.sub.claim.name ("sub" when not set) */
    const char *ca_location;   /* https.ca.location: a file, a directory or "probe" */
    const char *ca_pem;        /* https.ca.pem */
};

/* How [kafka] logs in. */
enum oidc_use {
    OIDC_NONE,               /* not OAUTHBEARER with sasl.oauthbearer.method = oidc */
    OIDC_CLIENT_CREDENTIALS, /* the client-credentials grant: s is filled */
    OIDC_OTHER,              /* oidc with another grant (JWT bearer, Azure IMDS): *why */
};

/* Which login c's [kafka] uses; fills s for OIDC_CLIENT_CREDENTIALS, and
 * sets *why (a static string) for OIDC_OTHER. */
enum oidc_use oidc_settings_from(const struct config *c, struct oidc_settings *s,
                                 const char **why);

/* The form body librdkafka posts: "grant_type=client_credentials", then
 * "&scope=SCOPE" when scope is set (as given: librdkafka does not encode
 * it). malloc'ed, the caller frees it; NULL when out of memory. The client
 * id and secret go in an "Authorization: Basic" header, as librdkafka's. */
char *oidc_request_body(const char *scope);

/* A token as librdkafka takes it from the answer. */
struct oidc_token {
    char *principal;     /* the sub claim's value (malloc'ed; oidc_token_clear frees) */
    long long exp;       /* the token's exp claim, seconds since the epoch */
    long long issued_at; /* its iat claim; -1 when absent */
    char *audience;      /* its aud claim, an array's strings joined by ", "; NULL when
                            absent (malloc'ed; oidc_token_clear frees) */
    char *issuer;        /* its iss claim; NULL when absent (likewise) */
};

void oidc_token_clear(struct oidc_token *t);

/*
 * The token endpoint's answer: status and body (len bytes, need not end in
 * NUL). Returns 0 with *t (cleared first) when status is 200 and the body
 * is JSON with "access_token" a JWT whose payload has a numeric "exp" and
 * a non-empty string claim sub_claim, as librdkafka requires. Else -1 with
 * err saying what the endpoint answered: "HTTP 401: unauthorized_client:
 * Invalid client ..." (RFC 6749's error and error_description when the
 * body has them, else up to 200 bytes of it), or what the token lacks.
 */
int oidc_parse_answer(long status, const char *body, size_t len, const char *sub_claim,
                      struct oidc_token *t, char *err, size_t errlen);

/* The payload (the middle part) of the JWT jwt, base64url-decoded,
 * NUL-terminated, malloc'ed (the caller frees it); NULL when jwt is not
 * three dot-separated parts or the middle one is not base64url. */
char *oidc_jwt_payload(const char *jwt);

#endif
