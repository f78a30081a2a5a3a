/*
 * awssigv4.c - AWS Signature Version 4, query-string presigning (see
 * awssigv4.h).
 *
 * A presigned GET of https://HOST/PATH?PARAMS, valid EXPIRES seconds from
 * DATE, for SERVICE in REGION, by ACCESS_KEY_ID with SECRET (and TOKEN when
 * the credentials are temporary). Everything is ASCII; "\n" is one LF.
 *
 *   Query parameters added to PARAMS before signing:
 *     X-Amz-Algorithm      = AWS4-HMAC-SHA256
 *     X-Amz-Credential     = ACCESS_KEY_ID/SCOPE
 *     X-Amz-Date           = DATE               (YYYYMMDDTHHMMSSZ, UTC)
 *     X-Amz-Expires        = EXPIRES            (decimal seconds)
 *     X-Amz-Security-Token = TOKEN              (only with a session token)
 *     X-Amz-SignedHeaders  = host
 *   SCOPE = YYYYMMDD/REGION/SERVICE/aws4_request
 *
 *   Canonical request (hashed with SHA-256, hex, lower case):
 *     GET\n
 *     PATH\n                          "/" for both of outboxd's tokens
 *     CANONICAL_QUERY\n               every parameter but X-Amz-Signature:
 *                                     KEY=VALUE, each URI-encoded (below),
 *                                     sorted by encoded key, joined by "&"
 *     host:HOST\n                     the one signed header, its value with
 *     \n                              CR/LF as space, runs of blanks as one,
 *     host\n                          trimmed (the SDKs' canonical header)
 *     PAYLOAD_HASH                    hex SHA-256 of the empty body (the JS
 *                                     SDK) or UNSIGNED-PAYLOAD (botocore)
 *
 *   String to sign:
 *     AWS4-HMAC-SHA256\n
 *     DATE\n
 *     SCOPE\n
 *     hex(SHA-256(canonical request))
 *
 *   Signing key (HMAC-SHA256(key, data), binary):
 *     k = HMAC("AWS4" SECRET, YYYYMMDD); k = HMAC(k, REGION);
 *     k = HMAC(k, SERVICE); k = HMAC(k, "aws4_request")
 *   X-Amz-Signature = hex(HMAC(k, string to sign))
 *
 *   URI encoding: every byte but A-Z a-z 0-9 - _ . ~ becomes %XX (upper-
 *   case hex), UTF-8 bytes each; as encodeURIComponent() plus ! ' ( ) *,
 *   the SDKs' escapeUri.
 *
 *   The URL's query: the signed parameters, then X-Amz-Signature and the
 *   unsigned ones (a User-Agent), all encoded the same way and sorted by
 *   key (the JS SDK's formatUrl/buildQueryString).
 */
#include "awssigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char hexdig[] = "0123456789abcdef";

static void to_hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hexdig[b[i] >> 4];
        out[2 * i + 1] = hexdig[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void aws_sha256_hex(const void *p, size_t len, char hex[65])
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256(p, len, d);
    to_hex(d, sizeof(d), hex);
}

static void hmac(const void *key, size_t keylen, const char *data, unsigned char out[32])
{
    unsigned int n = 32;
    HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)data, strlen(data), out,
         &n);
}

void aws_sigv4_signing_key(const char *secret, const char *date, const char *region,
                           const char *service, unsigned char key[32])
{
    size_t n = strlen(secret) + 4;
    char *k0 = malloc(n + 1);
    unsigned char k[32];
    if (!k0) { /* a key of all zeros: the signature will not match, never a crash */
        memset(key, 0, 32);
        return;
    }
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, secret, n - 4 + 1);
    hmac(k0, n, date, k);
    memset(k0, 0, n);
    free(k0);
    hmac(k, 32, region, k);
    hmac(k, 32, service, k);
    hmac(k, 32, "aws4_request", key);
    memset(k, 0, sizeof(k));
}

static bool unreserved(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
           (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~';
}

char *aws_uri_encode(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out) return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (unreserved(*p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = "0123456789ABCDEF"[*p >> 4];
            *o++ = "0123456789ABCDEF"[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

void aws_sigv4_date(time_t t, char out[17])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* One parameter, encoded: "KEY=VALUE" and its key's length. */
struct enc {
    char *kv;
    size_t klen;
};

static int enc_cmp(const void *a, const void *b)
{
    const struct enc *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->kv, y->kv, n);
    if (c) return c;
    return x->klen < y->klen ? -1 : x->klen > y->klen;
}

static int enc_add(struct enc *e, size_t *n, const char *key, const char *value)
{
    char *k = aws_uri_encode(key), *v = aws_uri_encode(value);
    char *kv = k && v ? malloc(strlen(k) + strlen(v) + 2) : NULL;
    if (kv) {
        sprintf(kv, "%s=%s", k, v);
        e[*n].kv = kv;
        e[*n].klen = strlen(k);
        (*n)++;
    }
    free(k);
    free(v);
    return kv ? 0 : -1;
}

/* e[0..n) sorted and joined by '&'; malloc'ed, or NULL. */
static char *enc_join(struct enc *e, size_t n)
{
    qsort(e, n, sizeof(*e), enc_cmp);
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(e[i].kv) + 1;
    char *out = malloc(len), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (i) *o++ = '&';
        size_t l = strlen(e[i].kv);
        memcpy(o, e[i].kv, l);
        o += l;
    }
    *o = '\0';
    return out;
}

static void enc_free(struct enc *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* the session token is in one of them */
        memset(e[i].kv, 0, strlen(e[i].kv));
        free(e[i].kv);
    }
    free(e);
}

/* The host header's canonical value: CR and LF as spaces, runs of spaces
 * and tabs as one space, no space at either end. malloc'ed, or NULL. */
static char *canon_header_value(const char *v)
{
    char *out = malloc(strlen(v) + 1), *o = out;
    if (!out) return NULL;
    bool blank = false;
    for (const char *p = v; *p; p++) {
        char ch = *p == '\r' || *p == '\n' ? ' ' : *p;
        if (ch == ' ' || ch == '\t') {
            blank = true;
            continue;
        }
        if (blank && o > out) *o++ = ' ';
        blank = false;
        *o++ = ch;
    }
    *o = '\0';
    return out;
}

/* The signed parameters and the X-Amz-* ones (not the signature), encoded,
 * into *e (malloc'ed array, *n of them). The date and scope are written to
 * date[17] and scope. 0 or -1. */
static int signed_params(const struct aws_creds *c, const struct aws_presign *p,
                         struct enc **e, size_t *n, char date[17], char *scope,
                         size_t scopelen)
{
    char expires[24], *cred;
    aws_sigv4_date(p->now, date);
    snprintf(scope, scopelen, "%.8s/%s/%s/aws4_request", date, p->region, p->service);
    snprintf(expires, sizeof(expires), "%ld", p->expires);
    cred = malloc(strlen(c->access_key_id) + strlen(scope) + 2);
    *n = 0;
    *e = calloc(p->nparams + p->nunsigned + 8, sizeof(**e));
    if (!cred || !*e) {
        free(cred);
        free(*e);
        *e = NULL;
        return -1;
    }
    sprintf(cred, "%s/%s", c->access_key_id, scope);
    int rc = 0;
    for (size_t i = 0; i < p->nparams && rc == 0; i++)
        rc = enc_add(*e, n, p->params[i].key, p->params[i].value);
    if (rc == 0) rc = enc_add(*e, n, "X-Amz-Algorithm", "AWS4-HMAC-SHA256");
    if (rc == 0) rc = enc_add(*e, n, "X-Amz-Credential", cred);
    if (rc == 0) rc = enc_add(*e, n, "X-Amz-Date", date);
    if (rc == 0) rc = enc_add(*e, n, "X-Amz-Expires", expires);
    if (rc == 0 && c->session_token && *c->session_token)
        rc = enc_add(*e, n, "X-Amz-Security-Token", c->session_token);
    if (rc == 0) rc = enc_add(*e, n, "X-Amz-SignedHeaders", "host");
    free(cred);
    if (rc) {
        enc_free(*e, *n);
        *e = NULL;
    }
    return rc;
}

/* The canonical request of the parameters e[0..n) (sorted by it). */
static char *canonical_request(const struct aws_presign *p, struct enc *e, size_t n)
{
    char *query = enc_join(e, n), *host = canon_header_value(p->host);
    char *out = NULL;
    if (query && host) {
        size_t len =
            strlen(p->path) + strlen(query) + strlen(host) + strlen(p->payload_hash) + 32;
        out = malloc(len);
        if (out)
            snprintf(out, len, "GET\n%s\n%s\nhost:%s\n\nhost\n%s", p->path, query, host,
                     p->payload_hash);
    }
    if (query) memset(query, 0, strlen(query));
    free(query);
    free(host);
    return out;
}

char *aws_sigv4_canonical_request(const struct aws_creds *c, const struct aws_presign *p)
{
    struct enc *e;
    size_t n;
    char date[17], scope[256];
    if (signed_params(c, p, &e, &n, date, scope, sizeof(scope)) != 0) return NULL;
    char *cr = canonical_request(p, e, n);
    enc_free(e, n);
    return cr;
}

char *aws_sigv4_presign(const struct aws_creds *c, const struct aws_presign *p)
{
    struct enc *e;
    size_t n;
    char date[17], scope[256];
    if (signed_params(c, p, &e, &n, date, scope, sizeof(scope)) != 0) return NULL;
    char *cr = canonical_request(p, e, n);
    char *out = NULL;
    if (cr) {
        char crhash[65], sig[65];
        aws_sha256_hex(cr, strlen(cr), crhash);
        memset(cr, 0, strlen(cr));
        free(cr);
        size_t sts_len = strlen(scope) + 128;
        char *sts = malloc(sts_len);
        unsigned char key[32], mac[32];
        if (sts) {
            snprintf(sts, sts_len, "AWS4-HMAC-SHA256\n%s\n%s\n%s", date, scope, crhash);
            char day[9];
            memcpy(day, date, 8);
            day[8] = '\0';
            aws_sigv4_signing_key(c->secret_access_key, day, p->region, p->service, key);
            hmac(key, sizeof(key), sts, mac);
            memset(key, 0, sizeof(key));
            to_hex(mac, sizeof(mac), sig);
            free(sts);
            int rc = enc_add(e, &n, "X-Amz-Signature", sig);
            for (size_t i = 0; i < p->nunsigned && rc == 0; i++)
                rc = enc_add(e, &n, p->unsigned_params[i].key, p->unsigned_params[i].value);
            if (rc == 0) out = enc_join(e, n);
        }
    }
    enc_free(e, n);
    return out;
}
