/*
 * connerr.h - what a libpq connection failure means and how to fix it.
 * Pure: matches the text libpq (PostgreSQL 15) or the server gave.
 *
 * Some failures heal by waiting (the server restarting, a network cut, too
 * many connections): the daemon retries those. The others need an operator
 * (a bad conninfo option, a certificate that does not verify, a password
 * that is wrong): retrying them only fills the log, so the daemon exits
 * with EXIT_USAGE and this module's fix, and `outboxd check` prints the
 * same fix.
 */
#ifndef OUTBOXD_CONNERR_H
#define OUTBOXD_CONNERR_H

#include <stdbool.h>

/* The fix for a connection error message msg that cannot heal by waiting,
 * or NULL when it may be transient (also pgconn.c's own reasons for making
 * no RDS IAM token: the AWS credentials may come later). The string is
 * static. */
const char *connerr_fix(const char *msg);

/* Whether a failure connerr_fix() names is still retried by a daemon that
 * has streamed from this server before: with [postgres] auth = aws_rds_iam
 * (token_auth), RDS refusing a token through PAM after tokens have worked
 * is IAM throttling or propagation, or a policy an operator is changing,
 * not a configuration that a restart would repeat (exit 2 is not restarted
 * by systemd). At start it stays fatal: there it is the set-up. */
bool connerr_heals_once_streamed(const char *msg, bool token_auth);

#endif
