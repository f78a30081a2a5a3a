/*
 * redact.h - keeping passwords out of logs. libpq's own error text can
 * quote the conninfo it could not parse, password included; every
 * connection error goes through here before it is logged. A URL may carry
 * credentials too ([registry] url = https://user:password@host/): every
 * place that prints one prints redact_url()'s copy. Pure but for libpq's
 * conninfo parser.
 */
#ifndef OUTBOXD_REDACT_H
#define OUTBOXD_REDACT_H

#include <stdbool.h>
#include <stddef.h>

/* Copies msg (an error about connecting with conninfo) into out with the
 * conninfo's password masked, and, when conninfo cannot even be parsed,
 * everything libpq quoted removed. */
void redact_conn_error(const char *conninfo, const char *msg, char *out, size_t outlen);

/* Copies in to out with the text between every pair of double quotes
 * replaced by "...": libpq's conninfo parse errors quote the offending
 * part, which may hold the password. */
void redact_strip_quoted(const char *in, char *out, size_t outlen);

/* Copies in to out with every occurrence of secret (if non-empty)
 * replaced by "********", and newlines and tabs folded into single spaces
 * (libpq's messages span lines). */
void redact_mask(const char *in, const char *secret, char *out, size_t outlen);

/* Copies url into out with its credentials (the userinfo between
 * "scheme://" and the host: "user:password@", up to the last '@', so a
 * password with an unescaped '/' or '@' is covered too) replaced by
 * "********@". A URL without an '@' is copied as it is. */
void redact_url(const char *url, char *out, size_t outlen);

/* True when url carries credentials redact_url() masks. */
bool redact_url_has_credentials(const char *url);

#endif
