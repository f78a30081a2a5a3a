/*
 * awstoken.h - the two IAM auth tokens outboxd signs with AWS credentials
 * (awscreds.h): MSK's, handed to librdkafka as an OAUTHBEARER token, and
 * RDS's, given to PostgreSQL as the password. Each is a SigV4 presigned
 * request (awssigv4.h) as AWS's own signers build it, byte for byte
 * (tests/aws/signers.sh compares them). Pure: no I/O.
 */
#ifndef OUTBOXD_AWSTOKEN_H
#define OUTBOXD_AWSTOKEN_H

#include <time.h>

#include "awscreds.h"

/* How long both tokens are valid (X-Amz-Expires), as AWS's signers. */
#define AWS_TOKEN_EXPIRES_S 900

/* The User-Agent query parameter outboxd's MSK token carries (not signed;
 * MSK logs it). AWS's signers put their own name there. */
#define AWS_MSK_USER_AGENT "outboxd/" OUTBOXD_VERSION

/* The RDS IAM auth token for HOST:PORT and USER, valid 900 s from now (what
 * @aws-sdk/rds-signer's getAuthToken returns). Allocated; caller frees.
 * NULL on OOM. */
char *aws_rds_token(const struct aws_creds *c, const char *region, const char *host,
                    int port, const char *user, time_t now);

/* The MSK IAM OAUTHBEARER token (what aws-msk-iam-sasl-signer's
 * generateAuthToken returns), *expires_out = its expiry: now + 900 s, or
 * sooner when the credentials expire sooner (as the signer). Allocated;
 * caller frees. NULL on OOM. */
char *aws_msk_token(const struct aws_creds *c, const char *region, time_t now,
                    time_t *expires_out);

/* aws_msk_token() with the User-Agent parameter user_agent (the tests give
 * AWS's signer's own, to compare the whole token with it). */
char *aws_msk_token_ua(const struct aws_creds *c, const char *region, time_t now,
                       const char *user_agent, time_t *expires_out);

/* The URL a MSK token encodes (base64url without padding), decoded:
 * malloc'ed, NUL-terminated; NULL when token is not base64url. For check's
 * and the tests' reading of a token. */
char *aws_msk_token_url(const char *token);

#endif
