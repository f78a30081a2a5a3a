/*
 * relaystate.h - the logical relay's states, one turn at a time
 * (relaystate.c): what relay.c's loop calls. The state itself is
 * relay_int.h's struct relay.
 */
#ifndef OUTBOXD_RELAYSTATE_H
#define OUTBOXD_RELAYSTATE_H

#include <stdbool.h>

#include "relay_int.h"

/* One turn of the current state. Returns whether the loop should wait
 * (evloop.h) before the next turn; false: go on at once. */
bool relay_step(struct relay *r);

#endif
