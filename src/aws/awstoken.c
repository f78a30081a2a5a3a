/*
 * awstoken.c - MSK's and RDS's IAM auth tokens (see awstoken.h), built as
 * AWS's signers build them:
 *
 *   MSK (aws-msk-iam-sasl-signer-js 1.0.3, generateAuthTokenFromCredentials-
 *   Provider; the Go, Python and Java signers sign the same request):
 *     presigned GET https://kafka.REGION.amazonaws.com/?Action=kafka-cluster%3AConnect
 *     service kafka-cluster, Host kafka.REGION.amazonaws.com, X-Amz-Expires
 *     900 or the seconds the credentials have left when fewer, payload hash
 *     of the empty body; then User-Agent=NAME/VERSION added unsigned; the
 *     whole URL, scheme included, base64url-encoded without padding. Its
 *     expiry: X-Amz-Date + X-Amz-Expires.
 *   RDS (@aws-sdk/rds-signer 3.x, Signer.getAuthToken):
 *     presigned GET https://HOST:PORT/?Action=connect&DBUser=USER, service
 *     rds-db, Host HOST:PORT, X-Amz-Expires 900, payload hash of the empty
 *     body; the URL without "https://".
 */
#include "awstoken.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awssigv4.h"

char *aws_rds_token(const struct aws_creds *c, const char *region, const char *host,
                    int port, const char *user, time_t now)
{
    size_t hlen = strlen(host) + 16;
    char *hostport = malloc(hlen);
    if (!hostport) return NULL;
    snprintf(hostport, hlen, "%s:%d", host, port);
    const struct aws_param params[] = {{"Action", "connect"}, {"DBUser", user}};
    struct aws_presign p = {
        .region = region,
        .service = "rds-db",
        .host = hostport,
        .path = "/",
        .params = params,
        .nparams = 2,
        .expires = AWS_TOKEN_EXPIRES_S,
        .now = now,
        .payload_hash = AWS_EMPTY_SHA256,
    };
    char *q = aws_sigv4_presign(c, &p);
    char *out = q ? malloc(strlen(hostport) + strlen(q) + 3) : NULL;
    if (out) sprintf(out, "%s/?%s", hostport, q);
    if (q) memset(q, 0, strlen(q));
    free(q);
    free(hostport);
    return out;
}

static const char b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* s as base64url without padding; malloc'ed, or NULL. */
static char *base64url(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(4 * (n / 3) + 5), *o = out;
    const unsigned char *p = (const unsigned char *)s;
    if (!out) return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        *o++ = b64url[v >> 18];
        *o++ = b64url[(v >> 12) & 63];
        *o++ = b64url[(v >> 6) & 63];
        *o++ = b64url[v & 63];
    }
    if (n - i == 1) {
        unsigned v = (unsigned)p[i] << 16;
        *o++ = b64url[v >> 18];
        *o++ = b64url[(v >> 12) & 63];
    } else if (n - i == 2) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8;
        *o++ = b64url[v >> 18];
        *o++ = b64url[(v >> 12) & 63];
        *o++ = b64url[(v >> 6) & 63];
    }
    *o = '\0';
    return out;
}

char *aws_msk_token_url(const char *token)
{
    size_t n = strlen(token);
    char *out = malloc(n * 3 / 4 + 4), *o = out;
    if (!out) return NULL;
    unsigned v = 0;
    int bits = 0;
    for (const char *p = token; *p; p++) {
        const char *at = strchr(b64url, *p);
        if (!at || !*p) {
            free(out);
            return NULL;
        }
        v = v << 6 | (unsigned)(at - b64url);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (char)((v >> bits) & 255);
        }
    }
    *o = '\0';
    return out;
}

char *aws_msk_token_ua(const struct aws_creds *c, const char *region, time_t now,
                       const char *user_agent, time_t *expires_out)
{
    long ttl = AWS_TOKEN_EXPIRES_S;
    /* As the signer: never valid past the credentials' expiry. */
    if (c->expires && (long long)c->expires - (long long)now < ttl)
        ttl = (long long)c->expires - (long long)now > 0 ? (long)(c->expires - now) : 1;
    size_t hlen = strlen(region) + 32;
    char *host = malloc(hlen);
    if (!host) return NULL;
    snprintf(host, hlen, "kafka.%s.amazonaws.com", region);
    const struct aws_param params[] = {{"Action", "kafka-cluster:Connect"}};
    const struct aws_param ua[] = {{"User-Agent", user_agent}};
    struct aws_presign p = {
        .region = region,
        .service = "kafka-cluster",
        .host = host,
        .path = "/",
        .params = params,
        .nparams = 1,
        .unsigned_params = ua,
        .nunsigned = 1,
        .expires = ttl,
        .now = now,
        .payload_hash = AWS_EMPTY_SHA256,
    };
    char *q = aws_sigv4_presign(c, &p);
    char *url = q ? malloc(strlen(host) + strlen(q) + 16) : NULL;
    char *out = NULL;
    if (url) {
        sprintf(url, "https://%s/?%s", host, q);
        out = base64url(url);
        memset(url, 0, strlen(url));
    }
    if (q) memset(q, 0, strlen(q));
    free(q);
    free(url);
    free(host);
    if (out && expires_out) *expires_out = now + ttl;
    return out;
}

char *aws_msk_token(const struct aws_creds *c, const char *region, time_t now,
                    time_t *expires_out)
{
    return aws_msk_token_ua(c, region, now, AWS_MSK_USER_AGENT, expires_out);
}
