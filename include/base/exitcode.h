/*
 * exitcode.h - the exit codes of outboxd, for every subcommand (README
 * "Exit codes"). The systemd unit restarts on 1 and not on 2
 * (RestartPreventExitStatus=2).
 */
#ifndef OUTBOXD_EXITCODE_H
#define OUTBOXD_EXITCODE_H

#define EXIT_OK 0    /* stopped by SIGTERM/SIGINT after a graceful drain; check/verify: all good */
#define EXIT_FATAL 1 /* fatal runtime error: restarting may help */
#define EXIT_USAGE 2 /* bad usage or configuration, or a state only an operator can resolve */

#endif
