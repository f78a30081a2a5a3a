/*
 * awsparse.h - reading what the sources of AWS credentials give
 * (awscreds.c does their I/O): the shared credentials and config files
 * (INI with profiles), STS's XML answer to AssumeRoleWithWebIdentity, the
 * container endpoint's and EC2 instance metadata's JSON, their ISO 8601
 * times. Pure: no I/O.
 */
#ifndef OUTBOXD_AWSPARSE_H
#define OUTBOXD_AWSPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "awscreds.h"

/* Whether profile's section is in text, an INI file as the SDKs read it:
 * in the credentials file (config_file false) the section is [NAME]; in
 * the config file (true) it is [profile NAME], except the default
 * profile's, [default] (also [profile default]). */
bool aws_ini_has_profile(const char *text, bool config_file, const char *profile);

/* The value of key in profile's section of text (as above): trimmed,
 * malloc'ed (the caller frees it); NULL when absent, or empty, or out of
 * memory. Comments start a line with '#' or ';'; indented lines under
 * "key =" with no value (nested sub-sections, as config's s3 = ...) are
 * not keys of the profile. A key given twice: the last wins. */
char *aws_ini_get(const char *text, bool config_file, const char *profile, const char *key);

/* An ISO 8601 UTC time as AWS writes expirations ("2026-12-06T21:00:00Z",
 * with or without fractional seconds, "Z" or "+00:00") into *out. 0 or
 * -1. */
int aws_parse_time(const char *s, time_t *out);

/* STS's answer to AssumeRoleWithWebIdentity (HTTP status and body):
 * 0 with *out (source "web identity") and *role (the assumed role's ARN,
 * malloc'ed, may be NULL), or -1 with err: the HTTP status and STS's error
 * Code and Message, or what the answer lacks. */
int aws_parse_sts(long status, const char *body, struct aws_creds *out, char **role,
                  char *err, size_t errlen);

/* The container endpoint's or instance metadata's JSON credentials
 * (AccessKeyId, SecretAccessKey, Token, Expiration; IMDS's "Code" must be
 * "Success" when present): 0 with *out (source left to the caller), or -1
 * with err saying what is wrong (never the secret). */
int aws_parse_creds_json(const char *body, struct aws_creds *out, char *err, size_t errlen);

#endif
