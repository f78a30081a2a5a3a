/*
 * awssign.c - outboxd-awssign: outboxd's MSK and RDS IAM auth tokens
 * (awstoken.h) for given credentials, region, host and user at a fixed
 * clock, printed as tests/aws/signers.js prints AWS's own signers' (the
 * same arguments), for tests/aws/signers.sh to compare byte for byte.
 *
 *   outboxd-awssign NOW REGION ACCESS_KEY_ID SECRET TOKEN|- EXPIRES|0 HOST PORT USER [UA]
 *
 * UA is the MSK token's User-Agent (default outboxd's; the comparison
 * gives the JS signer's own, which is not signed).
 *
 *   outboxd-awssign creds REGION|- PROFILE|- [N]
 *
 * resolves credentials along the chain (awscreds.h) as the daemon does,
 * through the cache N times (default 1), and prints "ok SOURCE KEY_ID
 * EXPIRES" (never the secret), or "fail ERROR" and exits 1
 * (tests/aws/chain.sh, against local stand-ins for STS, the container
 * endpoint and IMDS).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awstoken.h"

static int creds(int argc, char **argv)
{
    struct aws_settings s = {
        .region = argc > 2 && strcmp(argv[2], "-") ? argv[2] : NULL,
        .profile = argc > 3 && strcmp(argv[3], "-") ? argv[3] : NULL,
    };
    int n = argc > 4 ? atoi(argv[4]) : 1;
    struct aws_creds_cache cache = AWS_CREDS_CACHE_INIT;
    struct aws_creds c = {0};
    char err[4096];
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        aws_creds_clear(&c);
        rc = aws_creds_cached(&cache, &s, time(NULL), &c, err, sizeof(err));
    }
    if (rc == 0)
        printf("ok %s %s %lld\n", c.source, c.access_key_id, (long long)c.expires);
    else
        printf("fail %s\n", err);
    aws_creds_clear(&c);
    aws_creds_cache_clear(&cache);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "creds")) return creds(argc, argv);
    if (argc < 10) {
        fprintf(
            stderr,
            "usage: outboxd-awssign NOW REGION ACCESS_KEY_ID SECRET TOKEN|- EXPIRES|0 HOST "
            "PORT USER [USER_AGENT]\n");
        return 2;
    }
    time_t now = (time_t)strtoll(argv[1], NULL, 10);
    struct aws_creds c = {
        .access_key_id = argv[3],
        .secret_access_key = argv[4],
        .session_token = strcmp(argv[5], "-") ? argv[5] : NULL,
        .expires = (time_t)strtoll(argv[6], NULL, 10),
    };
    time_t exp;
    char *msk =
        aws_msk_token_ua(&c, argv[2], now, argc > 10 ? argv[10] : AWS_MSK_USER_AGENT, &exp);
    char *rds = aws_rds_token(&c, argv[2], argv[7], atoi(argv[8]), argv[9], now);
    if (!msk || !rds) {
        fprintf(stderr, "outboxd-awssign: out of memory\n");
        return 1;
    }
    printf("msk %s %lld\nrds %s\n", msk, (long long)exp, rds);
    free(msk);
    free(rds);
    return 0;
}
