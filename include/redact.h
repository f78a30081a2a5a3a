/*
 * redact.h - keeping passwords out of logs. libpq's own error text can
 * quote the conninfo it could not parse, password included; every
 * connection error goes through here before it is logged.
 */
#ifndef OUTBOXD_REDACT_H
#define OUTBOXD_REDACT_H

#include <stddef.h>

/* Copies msg (an error about connecting with conninfo) into out with the
 * conninfo's password masked, and, when conninfo cannot even be parsed,
 * everything libpq quoted removed. */
void redact_conn_error(const char *conninfo, const char *msg, char *out, size_t outlen);

#endif
