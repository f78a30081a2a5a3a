/*
 * awssigv4.h - AWS Signature Version 4 query-string presigning (the
 * X-Amz-* parameters in the URL, as a presigned URL carries them), the one
 * form outboxd needs: its two tokens are presigned GETs (awstoken.h). The
 * hashes are OpenSSL's libcrypto. Pure: no I/O.
 */
#ifndef OUTBOXD_AWSSIGV4_H
#define OUTBOXD_AWSSIGV4_H

#include <stddef.h>
#include <time.h>

#include "awscreds.h"

/* SHA-256 of the empty string, hex: the payload hash of a GET without a
 * body as the AWS SDK for JavaScript's signer computes it (botocore's
 * presigner uses "UNSIGNED-PAYLOAD" instead; both are valid SigV4). */
#define AWS_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define AWS_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

/* One query parameter, not encoded. */
struct aws_param {
    const char *key, *value;
};

/* What to presign: a GET of https://HOST PATH?PARAMS. */
struct aws_presign {
    const char *region, *service;
    const char *host; /* the Host header's value as signed (host, or host:port) */
    const char *path; /* absolute and already canonical ("/" for both tokens) */
    const struct aws_param *params; /* signed */
    size_t nparams;
    const struct aws_param *unsigned_params; /* added after signing (a User-Agent) */
    size_t nunsigned;
    long expires;             /* X-Amz-Expires, seconds */
    time_t now;               /* X-Amz-Date */
    const char *payload_hash; /* AWS_EMPTY_SHA256 or AWS_UNSIGNED_PAYLOAD */
};

/* The presigned query string (without '?'): every parameter, signed and
 * X-Amz-* and unsigned, encoded and sorted by key, X-Amz-Signature among
 * them. malloc'ed; the caller frees it. NULL on out of memory. */
char *aws_sigv4_presign(const struct aws_creds *c, const struct aws_presign *p);

/* The canonical request presigning p signs (for the tests and for
 * reading a signature that does not match): malloc'ed, or NULL. */
char *aws_sigv4_canonical_request(const struct aws_creds *c, const struct aws_presign *p);

/* The signing key of secret for date (YYYYMMDD), region and service into
 * key[32] (the derivation AWS's documentation gives as test vector). */
void aws_sigv4_signing_key(const char *secret, const char *date, const char *region,
                           const char *service, unsigned char key[32]);

/* SigV4's URI encoding of s (every byte but A-Z a-z 0-9 - _ . ~ as %XX,
 * upper-case hex: what the SDKs' escapeUri does). malloc'ed, or NULL. */
char *aws_uri_encode(const char *s);

/* The SHA-256 of len bytes of p as 64 lower-case hex digits (and a NUL)
 * into hex[65]. */
void aws_sha256_hex(const void *p, size_t len, char hex[65]);

/* t (UTC) as SigV4's long date, YYYYMMDD'T'HHMMSS'Z', into out[17]. */
void aws_sigv4_date(time_t t, char out[17]);

#endif
