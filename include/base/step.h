/*
 * step.h - the one return-code convention of the relay (relay.c and the
 * modules it drives: changes.c, deadletter.c, slotsetup.c).
 *
 * Every step of the relay - handling a frame, producing an event,
 * dead-lettering, opening the stream, sending a status - returns an enum
 * step. The function that returns a failure has logged it already (once);
 * the caller only decides what to do next: relay.c's loop maps the code to
 * its next state, and step_exit_code() to the process's exit code.
 */
#ifndef OUTBOXD_STEP_H
#define OUTBOXD_STEP_H

enum step {
    STEP_OK = 0, /* done: go on */
    STEP_HELD,   /* the producer queue is full: the event that did not fit
                  * is held (changes.h); stop reading, retry on a later turn */
    STEP_STOP,   /* SIGTERM/SIGINT seen: drain, confirm, exit 0 */
    STEP_BROKEN, /* the replication connection failed, or could not be opened
                  * for now (server down, slot in use): reconnect after the
                  * backoff */
    STEP_FATAL,  /* confirm what was ACKed, exit 1 (systemd restarts it) */
    STEP_USAGE,  /* exit 2: only an operator can fix it (configuration, the
                  * offset file, the brokers refusing outboxd's credentials) */
};

/* The exit code (exitcode.h) a relay that ended on s returns. */
int step_exit_code(enum step s);

#endif
