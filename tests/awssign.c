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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awstoken.h"

int main(int argc, char **argv)
{
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
