/*
 * check_mskiam.c - the "kafka token" line of `outboxd check` with [kafka]
 * sasl.mechanism = AWS_MSK_IAM: one MSK IAM token signed as the daemon's
 * token refresh callback signs it (mskiam.h: the same credential chain,
 * cache and region), and where its credentials came from: the source, the
 * access key id's last 4 characters (never more of it, never the secret),
 * the region and the token's expiry. Or a FAIL naming every source of
 * credentials tried and why each failed. The token is not shown to a
 * broker here: the broker check that follows connects with it.
 */
#include "check_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mskiam.h"

void check_kafka_msk_token(struct ck *k)
{
    const char *what = "kafka token";
    if (!k->kafka) return ck_skip(k, what, "the [kafka] configuration is not valid");
    char *token = NULL, source[64], last4[5], err[2048];
    const char *region = NULL;
    time_t exp;
    if (msk_iam_token(k->cfg, &token, &exp, source, sizeof(source), last4, &region, err,
                      sizeof(err)) != 0) {
        ck_report(
            k, CHECK_FAIL, what,
            "give outboxd AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "a web identity (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, as EKS sets "
            "them), a profile ([aws] profile in ~/.aws/credentials), or the container's "
            "or the instance's role",
            "AWS_MSK_IAM: %s", err);
        return;
    }
    memset(token, 0, strlen(token));
    free(token);
    long long left = (long long)exp - (long long)time(NULL);
    char when[32] = "";
    struct tm tm;
    if (gmtime_r(&exp, &tm)) strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    ck_report(k, CHECK_OK, what, NULL,
              "AWS_MSK_IAM token for region %s signed with credentials from %s (access key "
              "...%s); it expires %s (in %lld s); outboxd signs a new one before then",
              region, source, last4, when, left);
}
