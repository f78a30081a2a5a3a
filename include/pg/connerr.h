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

/* The fix for a connection error message msg that cannot heal by waiting,
 * or NULL when it may be transient (also pgconn.c's own reasons for making
 * no RDS IAM token: the AWS credentials may come later). The string is
 * static. */
const char *connerr_fix(const char *msg);

#endif
